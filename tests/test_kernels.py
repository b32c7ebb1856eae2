"""Online kernels: NumPy and numba LU programs agree bit for bit and with dense NumPy; the CHOLMOD
wrapper agrees with dense NumPy."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from sparsedyn import SingularModelError
from sparsedyn.kernels import SparseCholesky, schedule, solve_numba, solve_numpy
from sparsedyn.opcount import count_operations
from test_planner import (block_tridiagonal, dense_solve, hidden_diagonal, lower_triangular,
                          newton_euler_chain, plan, rel_err)

SYSTEMS = {
    "hidden_diagonal": lambda: hidden_diagonal(150, seed=8),
    "block_tridiagonal": lambda: block_tridiagonal(20, size=6, seed=2),
    "lower_triangular": lambda: lower_triangular(100, seed=3),
    "ne_id": lambda: newton_euler_chain(6, "id", seed=4)[0],
    "ne_fd": lambda: newton_euler_chain(6, "fd", seed=5)[0],
}


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_backends_and_loop_orders_agree_exactly(name):
    system = SYSTEMS[name]()
    rng = np.random.default_rng(1)
    B = 37  # not a multiple of any chunk size
    values, rhs = system.sample(B, rng), rng.normal(size=(B, system.n))
    fact = plan(system)
    prog = fact.program
    x_np, broken_np = solve_numpy(prog, schedule(prog), values, rhs)
    x_outer, broken_outer = solve_numba(prog, values, rhs, loop="batch_outer")
    x_inner, broken_inner = solve_numba(prog, values, rhs, loop="batch_inner")
    assert not (broken_np.any() or broken_outer.any() or broken_inner.any())
    assert np.array_equal(x_np, x_outer) and np.array_equal(x_np, x_inner)
    assert rel_err(x_np, dense_solve(system, values, rhs)) <= 1e-10


def test_constant_entries_are_taken_from_the_plan():
    system = newton_euler_chain(3, "fd", seed=1)[0]
    rng = np.random.default_rng(2)
    values, rhs = system.sample(3, rng), rng.normal(size=(3, system.n))
    garbage = values.copy()
    known = ~np.isnan(system.const)
    garbage[:, known] = 1e9
    fact = plan(system)
    for backend in ("numpy", "numba"):
        assert np.array_equal(fact.solve(garbage, rhs, backend=backend), fact.solve(values, rhs, backend=backend))


def test_single_state_and_broadcasting_shapes():
    system = block_tridiagonal(6)
    rng = np.random.default_rng(3)
    values, rhs = system.sample(4, rng), rng.normal(size=(4, system.n))
    fact = plan(system)
    ref = dense_solve(system, values, rhs)
    x0 = fact.solve(values[0], rhs[0])
    assert x0.shape == (system.n,) and rel_err(x0, ref[0]) <= 1e-10
    # one matrix, many right-hand sides
    shared = fact.solve(values[0], rhs)
    assert shared.shape == (4, system.n)
    assert rel_err(shared, dense_solve(system, np.repeat(values[:1], 4, 0), rhs)) <= 1e-10
    x, ok = fact.solve(values[1], rhs[1], return_status=True)
    assert ok.shape == (1,) and ok.all() and rel_err(x, ref[1]) <= 1e-10


def test_batch_larger_than_one_work_chunk(monkeypatch):
    import sparsedyn.kernels.lu_numpy as lu_numpy
    system = hidden_diagonal(30, seed=4)
    fact = plan(system)
    monkeypatch.setattr(lu_numpy, "WORK_BYTES", 8 * fact.program.n_slots * 3)  # chunks of 3 states
    rng = np.random.default_rng(5)
    values, rhs = system.sample(10, rng), rng.normal(size=(10, system.n))
    x = fact.solve(values, rhs, backend="numpy")
    assert rel_err(x, dense_solve(system, values, rhs)) <= 1e-10


# ---------------------------------------------------------------- CHOLMOD wrapper
def _spd_system(n=60, seed=0):
    rng = np.random.default_rng(seed)
    G = sp.random(n, n, density=0.05, random_state=seed) + sp.identity(n)
    pattern = ((G @ G.T) != 0).astype(float).tocsc()
    pattern.sort_indices()
    rows = pattern.indices
    cols = np.repeat(np.arange(n), np.diff(pattern.indptr))

    def sample(B):
        out = np.empty((B, pattern.nnz))
        for b in range(B):
            Gb = G.copy()
            Gb.data = rng.normal(size=Gb.nnz)
            A = (Gb @ Gb.T + sp.identity(n)).toarray()
            out[b] = A[rows, cols]
        return out

    return pattern, rows, cols, sample


def test_cholesky_matches_dense_numpy_for_a_batch():
    pattern, rows, cols, sample = _spd_system()
    n = pattern.shape[0]
    rng = np.random.default_rng(1)
    values, rhs = sample(5), rng.normal(size=(5, n))
    chol = SparseCholesky(pattern, ordering="amd")
    x = chol.solve_batch(values, rhs)
    D = np.zeros((5, n, n))
    D[:, rows, cols] = values
    ref = np.linalg.solve(D, rhs[..., None])[..., 0]
    assert rel_err(x, ref) <= 1e-10
    # one factorization, several right-hand sides
    X = chol.factor(values[2]).solve(rhs.T)
    assert rel_err(X, np.linalg.solve(D[2], rhs.T)) <= 1e-10


def test_cholesky_plan_round_trip_keeps_the_permutation():
    pattern, rows, cols, sample = _spd_system(seed=3)
    chol = SparseCholesky(pattern, ordering="metis")
    loaded = SparseCholesky.from_dict(chol.to_dict())
    assert np.array_equal(loaded.perm, chol.perm)
    values, rhs = sample(2), np.random.default_rng(0).normal(size=(2, pattern.shape[0]))
    assert np.array_equal(loaded.solve_batch(values, rhs), chol.solve_batch(values, rhs))
    with pytest.raises(ValueError, match="format"):
        SparseCholesky.from_dict({**chol.to_dict(), "format": "x"})
    with pytest.raises(ValueError, match="perm"):
        SparseCholesky.from_dict({**chol.to_dict(), "perm": chol.perm[::-1][1:]})


def test_cholesky_rejects_bad_input_and_indefinite_states():
    pattern, rows, cols, sample = _spd_system(n=20, seed=2)
    with pytest.raises(ValueError, match="pattern"):
        SparseCholesky(sp.csc_matrix(np.triu(np.ones((4, 4)))))
    with pytest.raises(ValueError, match="ordering"):
        SparseCholesky(pattern, ordering="umfpack")
    chol = SparseCholesky(pattern)
    values = sample(3)
    values[1] = -values[1]  # negative definite
    with pytest.raises(SingularModelError, match="batch index 1") as info:
        chol.solve_batch(values, np.ones((3, 20)))
    assert info.value.batch_indices == (1,)


# ---------------------------------------------------------------- several right-hand sides
@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_several_right_hand_sides_share_one_factorization(name):
    """rhs (B, n, k): every backend and loop order equals numpy.linalg.solve column by column,
    the kernels agree bit for bit, and k = 1 gives the (B, n) result exactly."""
    system = SYSTEMS[name]()
    rng = np.random.default_rng(6)
    B, k = 19, 5
    values, rhs = system.sample(B, rng), rng.normal(size=(B, system.n, k))
    fact = plan(system)
    prog = fact.program
    assert prog.split
    ref = np.linalg.solve(system.dense(values), rhs)
    x_np, broken_np = solve_numpy(prog, schedule(prog), values, rhs)
    x_outer, broken_outer = solve_numba(prog, values, rhs, loop="batch_outer")
    x_inner, broken_inner = solve_numba(prog, values, rhs, loop="batch_inner", chunk=4)
    assert not (broken_np.any() or broken_outer.any() or broken_inner.any())
    assert x_np.shape == (B, system.n, k)
    assert np.array_equal(x_np, x_outer) and np.array_equal(x_np, x_inner)
    assert rel_err(x_np, ref) <= 1e-10
    for backend in ("numpy", "numba"):
        x = fact.solve(values, rhs, backend=backend)
        assert np.array_equal(x, x_np)
        assert np.array_equal(fact.solve(values, rhs[:, :, 2:3], backend=backend)[:, :, 0],
                              fact.solve(values, rhs[:, :, 2], backend=backend))
        # one matrix for a batch of right-hand-side sets, and one set for a batch of matrices
        x0 = fact.solve(values[0], rhs, backend=backend)
        assert rel_err(x0, np.linalg.solve(system.dense(values[:1]), rhs)) <= 1e-10
        x1 = fact.solve(values, rhs[:1], backend=backend)
        assert rel_err(x1, np.linalg.solve(system.dense(values), rhs[:1])) <= 1e-10


def test_several_right_hand_sides_cost_and_bad_shapes():
    system = block_tridiagonal(5)
    fact = plan(system)
    s = fact.stats
    assert 0 < s["solve_flops"] < s["flops"]
    assert s["solve_flops"] == s["solve_mul"] + s["solve_add"] + s["solve_div"]
    rng = np.random.default_rng(7)
    values, rhs = system.sample(3, rng), rng.normal(size=(3, system.n, 4))
    with count_operations() as ops:
        fact.solve(values, rhs)
    assert ops.flops == 3 * (s["flops"] + 3 * s["solve_flops"])
    with pytest.raises(ValueError, match="rhs"):
        fact.solve(values, rhs[:, :-1])
    with pytest.raises(ValueError, match="rhs"):
        fact.solve(values, rhs[:2])
    bad = rhs.copy()
    bad[1, 2, 3] = np.nan
    with pytest.raises(ValueError, match="rhs"):
        fact.solve(values, bad)


def test_program_stored_before_the_split_still_solves():
    """A stored plan without n_factor_ops (one program in one level order, RECIP slots not
    initialised) loads, solves like the split plan and takes several right-hand sides."""
    from sparsedyn.ir.lu_program import level_order
    from sparsedyn.planner import Factorization
    from sparsedyn.planner.factorization import _checksum
    system = newton_euler_chain(6, "fd", seed=5)[0]
    fact = plan(system)
    d = fact.to_dict()
    p = fact.program
    order = level_order(p.op_code, p.op_t, p.op_a, p.op_b, p.n_slots)
    for key in ("op_code", "op_t", "op_a", "op_b"):
        d["program_" + key] = d["program_" + key][order]
    del d["program_n_factor_ops"], d["program_op_stage"]        # neither existed then
    keep = ~np.isin(p.init_slots, p.op_t[p.op_code == 0]) | (p.init_values != 0)
    d["program_init_slots"], d["program_init_values"] = p.init_slots[keep], p.init_values[keep]
    d["checksum"] = _checksum(d)
    legacy = Factorization.from_dict(d)
    assert not legacy.program.split and legacy.stats["solve_flops"] == legacy.stats["flops"]
    rng = np.random.default_rng(8)
    values, rhs = system.sample(4, rng), rng.normal(size=(4, system.n, 3))
    for backend in ("numpy", "numba"):
        x = legacy.solve(values, rhs, backend=backend)
        assert rel_err(x, fact.solve(values, rhs, backend=backend)) <= 1e-14
        assert rel_err(x, np.linalg.solve(system.dense(values), rhs)) <= 1e-10


def test_cholesky_plan_refuses_stored_arrays_of_the_wrong_type():
    """A stored index of the wrong dtype is corruption: refused by name, never cast."""
    pattern, *_ = _spd_system(n=12, seed=4)
    good = SparseCholesky(pattern, ordering="amd").to_dict()
    for key, bad in (("perm", good["perm"].astype(float)), ("pattern_indices", good["pattern_indices"] + 0.5),
                     ("shape", np.array(["12", "12"]))):
        with pytest.raises(ValueError, match=key):
            SparseCholesky.from_dict({**good, key: bad})
