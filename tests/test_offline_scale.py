"""Offline planning at scale (issue #20 item 5): the compiled dependency-level pass, the
structural flop bound that "auto" ranks candidate orderings by, the budget that skips the
candidates that explode, and the memory of the planner growing linearly with the chain.

Oracles: the pure-Python dependency-level loop the planner used before (kept here), a dense
boolean elimination without pivoting (the exact patterns of L and U), the fully built programs
(ordering="all": every candidate built) and Pinocchio's ABA for the plans' answers."""
from __future__ import annotations

import pathlib
import re
import sys

import numpy as np
import pytest
import scipy.sparse as sp

import sparsedyn as sd
from sparsedyn.ir.instructions import READS_A, READS_B, READS_T
from sparsedyn.ir.lu_program import dependency_levels, program_parts
from sparsedyn.models import humanoid, random_tree, serial_chain
from sparsedyn.planner.estimate_numba import OVER_BUDGET, ZERO_PIVOT, estimate
from sparsedyn.planner.factorization import BUDGET, FOLDING_FLOOR

ROOT = pathlib.Path(__file__).resolve().parents[1]


def python_levels(code, t, a, b, n_slots, stage=None):
    """The planner's former pure-Python dependency_levels, verbatim: the oracle."""
    last_write = np.full(n_slots, -1, dtype=np.int64)
    last_read = np.full(n_slots, -1, dtype=np.int64)
    touched_in = np.full(n_slots, -1, dtype=np.int64)
    stage = np.zeros(code.size, dtype=np.int64) if stage is None else stage
    level = np.empty(code.size, dtype=np.int64)
    for o in range(code.size):
        c, st = code[o], stage[o]
        reads = [t[o]] if READS_T[c] else []
        if READS_A[c]:
            reads.append(a[o])
        if READS_B[c]:
            reads.append(b[o])
        for s in reads + [t[o]]:
            if touched_in[s] != st:
                touched_in[s], last_write[s], last_read[s] = st, -1, -1
        lv = max(last_write[t[o]], last_read[t[o]])
        for r in reads:
            lv = max(lv, last_write[r])
        lv += 1
        level[o] = lv
        last_write[t[o]] = lv
        for r in reads:
            last_read[r] = max(last_read[r], lv)
    return level


@pytest.mark.parametrize("seed", range(4))
def test_dependency_levels_equal_the_python_pass_on_random_programs(seed):
    rng = np.random.default_rng(seed)
    m, slots = 3000, [5, 40, 400, 4000][seed]      # few slots: long dependency chains
    code = rng.integers(0, READS_T.size, m).astype(np.int8)
    t, a, b = rng.integers(0, slots, (3, m))
    stage = np.sort(rng.integers(0, 30, m))
    for st in (None, stage):
        assert np.array_equal(dependency_levels(code, t, a, b, slots, st),
                              python_levels(code, t, a, b, slots, st))


def test_dependency_levels_equal_the_python_pass_on_real_plans():
    for model in (humanoid(), serial_chain(12)):
        for problem in (sd.forward_dynamics(model), sd.inverse_dynamics(model)):
            p = sd.compile(problem).factorization.program
            for lo, hi in program_parts(p):
                args = (p.op_code[lo:hi], p.op_t[lo:hi], p.op_a[lo:hi], p.op_b[lo:hi], p.n_slots)
                assert np.array_equal(dependency_levels(*args), python_levels(*args))
            by_stage = np.argsort(p.op_stage, kind="stable")       # ir/layout.py's use
            args = (p.op_code[by_stage], p.op_t[by_stage], p.op_a[by_stage],
                    p.op_b[by_stage], p.n_slots, p.op_stage[by_stage])
            assert np.array_equal(dependency_levels(*args), python_levels(*args))


def _dense_lu_counts(B):
    """|L_k| and |U_k| of the LU without pivoting of the boolean pattern B (dense elimination)."""
    S = B.toarray() != 0
    n = S.shape[0]
    L, U = np.zeros(n, dtype=int), np.zeros(n, dtype=int)
    for k in range(n):
        assert S[k, k]
        rows, cols = np.flatnonzero(S[k + 1:, k]) + k + 1, np.flatnonzero(S[k, k + 1:]) + k + 1
        L[k], U[k] = rows.size, cols.size
        S[np.ix_(rows, cols)] = True
    return L, U


@pytest.mark.parametrize("ordering", ["natural", "amd", "rcm", "btf"])
def test_estimate_counts_the_factors_and_bounds_the_built_flops(ordering):
    plan = sd.compile(sd.forward_dynamics(serial_chain(6), f_ext=True), ordering=ordering)
    f = plan.factorization
    p = f.program
    flops, nnz_LU = estimate(f.pattern, p.row_perm, p.col_perm, np.inf)
    L, U = _dense_lu_counts(f.pattern[p.row_perm][:, p.col_perm])
    n = L.size
    assert nnz_LU == L.sum() + U.sum() + n == f.stats["nnz_LU"]
    assert flops == n + np.minimum(L, U).sum() + 2 * (L @ U) + 2 * (L.sum() + U.sum()) + n
    assert f.stats["flops"] <= flops
    # the budget counts the multiply-adds the elimination visits: stopped one short of them
    assert estimate(f.pattern, p.row_perm, p.col_perm, L @ U) == (flops, nnz_LU)
    assert estimate(f.pattern, p.row_perm, p.col_perm, L @ U - 1) == (OVER_BUDGET, -1)


def test_estimate_names_a_structurally_zero_pivot():
    pattern = sp.csc_matrix(np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]))
    # natural order: pivot 1 is filled in by L[1,0] U[0,1]; rows 1 and 2 swapped, it is not
    assert estimate(pattern, np.arange(3), np.arange(3), np.inf)[0] > 0
    assert estimate(pattern, np.array([0, 2, 1]), np.arange(3), np.inf) == (ZERO_PIVOT, 1)


@pytest.mark.parametrize("case", ["chain200", "humanoid_fd", "humanoid_id", "tree_fd"])
def test_auto_within_budget_plans_what_building_every_candidate_plans(case):
    """The budget never changes the plan: the same ordering and bit-identical program as
    building every candidate ("all"); each skipped candidate's built program costs more than
    the chosen one, and its row says so; one ruled out as unable to win indeed costs, built,
    at least FOLDING_FLOOR times its structural bound."""
    model = {"chain200": serial_chain(200), "tree_fd": random_tree(25, seed=3)}.get(case)
    model = humanoid() if model is None else model
    problem = (sd.inverse_dynamics if case.endswith("id") else sd.forward_dynamics)(model)
    auto, full = sd.compile(problem), sd.compile(problem, ordering="all")
    assert auto.stats["ordering"] == full.stats["ordering"]
    for key, val in auto.factorization.program.arrays().items():
        assert np.array_equal(val, getattr(full.factorization.program, key)), key
    chosen = auto.stats["flops"]
    rows = {r["name"]: r for r in full.table}
    skipped = [r for r in auto.table if r["note"].startswith("skipped: over budget")]
    for r in skipped:
        assert r["flops"] == -1 and not r["pivot_safe"] and f"{BUDGET} x" in r["note"]
        assert rows[r["name"]]["flops"] > BUDGET / 2 * chosen
    for r in auto.table:
        if r["note"].startswith("skipped: cannot win"):
            bound = int(re.search(r"structural bound (\d+) flops", r["note"]).group(1))
            assert rows[r["name"]]["flops"] >= FOLDING_FLOOR * bound > chosen
        if r["pivot_safe"]:
            assert r == {**rows[r["name"]], "time_s": r["time_s"]}
    if case == "chain200":
        assert [r["name"] for r in skipped] == ["btf"]       # 12x the chosen flops at 200 links


def test_offline_scale_experiment_memory_per_link_is_constant(tmp_path, monkeypatch):
    """experiments/offline_scale.py at reduced size: compiling a 3x longer chain with the default
    settings takes about 3x the planner's memory (per link within 1.5x; quadratic growth would
    be 3x), plans Nori's ABA order at both sizes and skips btf, whose fill explodes, without
    building it; its Markdown table has a row per size."""
    sys.path.insert(0, str(ROOT / "experiments"))
    import offline_scale
    monkeypatch.setattr(offline_scale, "OUT", str(tmp_path))
    rows = offline_scale.main(["--sizes", "100", "300"])
    small, large = rows
    per_link = [r["plan_mb"] / r["n"] for r in rows]
    assert 1 / 1.5 <= per_link[1] / per_link[0] <= 1.5, per_link
    for r in rows:
        assert r["ordering"] == "aba" and r["skipped"] == ["btf"] and r["built"] >= 1
        assert r["n_D"] == 14 * r["n"]
    text = (tmp_path / "offline_scale.md").read_text()
    assert [line.split("|")[1].strip() for line in text.splitlines()
            if line.startswith("| 100 ") or line.startswith("| 300 ")] == ["100", "300"]


@pytest.mark.parametrize("system", ["spd", "quasi_definite"])
def test_symmetric_auto_plans_what_building_every_candidate_plans(system):
    """L D L^T plans (symmetric=True): the bound counts the L D L^T's operations (about half
    the LU's), is exact on the factor, bounds every built program, and "auto" plans what "all"
    plans."""
    from test_planner import quasi_definite, spd_system
    from sparsedyn.planner import plan_factorization
    s = spd_system(80, seed=2) if system == "spd" else quasi_definite(seed=4)
    auto, full = (plan_factorization(s.pattern, s.always, s.const, ordering=o, symmetric=True)
                  for o in ("auto", "all"))
    assert auto.stats["ordering"] == full.stats["ordering"]
    for key, val in auto.program.arrays().items():
        assert np.array_equal(val, getattr(full.program, key)), key
    for r in full.table:
        if not r["pivot_safe"]:
            continue
        p = plan_factorization(s.pattern, s.always, s.const, ordering=r["name"],
                               symmetric=True).program
        flops, nnz_LU = estimate(s.pattern, p.row_perm, p.col_perm, np.inf, symmetric=True)
        c, _ = _dense_lu_counts(s.pattern[p.row_perm][:, p.col_perm])
        n = c.size
        assert nnz_LU == 2 * c.sum() + n == r["nnz_LU"]
        assert flops == n + c.sum() + c @ (c + 1) + 4 * c.sum() + n
        assert FOLDING_FLOOR * flops <= r["flops"] <= flops


def test_readme_quotes_the_committed_scale_table():
    """README.md quotes experiments/out/offline_scale.md's table as it is (header + 5 sizes)."""
    import pathlib
    from md_tables import readme_quotes
    readme_quotes(pathlib.Path(__file__).resolve().parents[1] / "experiments" / "out"
                  / "offline_scale.md", 6)
