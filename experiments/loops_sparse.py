"""Forward dynamics with kinematic loops as one sparse block system (seed 001 eq. 15-17 with the loop
rows of seed 003 Sec. II-D; sparsedyn.problems.loop_forward_dynamics) next to C-ABA and the dense
Lagrange baselines, in operations per state.

Per system: the size of D with its loop rows, nnz of D and of its LU, fill, the ordering (the planner's
pick among sparsedyn's own orderings), the LU + substitution flops (exact, from the symbolic factorization), the counted
assembly of D and b, their total; next to C-ABA (seed 003, Algorithm 1), Lagrange multipliers with
a dense LU of the KKT matrix and with the sparse L^T L of H, and the tree-only forward-dynamics plan
of the same spanning tree (no loops: what the loop rows add). Counts come from
sparsedyn.opcount (one state). A chain-length sweep of the geared chain follows. Both plans use
the planner's pick among the orderings sparsedyn computes itself (experiments/own_orderings.py),
so that the counts do not depend on SciPy's or CHOLMOD's versions.

A last section does the same for inverse dynamics and the Delassus matrix WITH loops in Nori's
system (loop_inverse_dynamics, sparsedyn.delassus(cluster_model, ...)): per system, the loop ID
plan next to C-RNEA and the projected RNEA, and the loop Delassus evaluation (6D contacts on the
end-effectors of loops_tables.py) next to C-EFPA and the projected inverse OSIM.

    python experiments/loops_sparse.py [--quick]
Output: experiments/out/loops_sparse.md
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from sparsedyn.files import atomic_write
from sparsedyn.loops import belt_chain, four_bar, geared_chain, mini_cheetah, mit_humanoid  # noqa: E402
from sparsedyn.opcount import count_operations  # noqa: E402
import sparsedyn as sd  # noqa: E402
from sparsedyn.problems import compile, forward_dynamics, loop_forward_dynamics, loop_inverse_dynamics  # noqa: E402
from sparsedyn.problems.loop_delassus import compile_loop_delassus  # noqa: E402
from sparsedyn.recursive.cluster import (c_aba, c_efpa, c_rnea, lagrange_fd, projected_rnea,  # noqa: E402
                                         projection_inverse_osim)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from own_orderings import own_best, versions_line  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "out")

SYSTEMS = [
    ("12-link GT chain", lambda: geared_chain(12)),
    ("12-link PBT chain", lambda: belt_chain(12)),
    ("Mini Cheetah", mini_cheetah),
    ("MIT Humanoid", mit_humanoid),
    ("four-bar + tail", four_bar),
]


def _ops(fn):
    with count_operations() as ops:
        fn()
    return ops.flops


def own_plan(problem):
    """(plan under the planner's pick among sparsedyn's own orderings, the "auto" plan)."""
    auto = compile(problem)
    name = own_best(auto.factorization.table)["name"]
    return (auto if name == auto.factorization.stats["ordering"] else compile(problem, ordering=name)), auto


def measure(cm):
    plan, auto = own_plan(loop_forward_dynamics(cm))
    tree, _ = own_plan(forward_dynamics(cm.model))
    q, yd, tau = cm.random_state(0)
    qd = cm.spanning_velocity(q, yd)
    s, t = plan.stats, tree.stats
    sparse = _ops(lambda: plan.solve(q, qd, tau))
    # the counted solve is the stats' assembly + LU flops (plus nothing else): check, don't trust
    assert sparse == s["total_flops"], (sparse, s["total_flops"])
    return dict(n=s["n"], nc=cm.nc, nnz_D=s["nnz_D"], nnz_LU=s["nnz_LU"], fill=s["fill"],
                ordering=s["ordering"], lu=s["flops"], assembly=s["assembly_flops"], sparse=sparse,
                tree=t["flops"] + t["assembly_flops"],
                auto=f"{auto.stats['total_flops']} ({auto.stats['ordering']})",
                caba=_ops(lambda: c_aba(cm, q, yd, tau)),
                dense=_ops(lambda: lagrange_fd(cm, q, qd, tau, method="dense")),
                ltl=_ops(lambda: lagrange_fd(cm, q, qd, tau, method="ltl")))


SYSTEM_HEAD = ["| system | n (D) | loop rows | nnz D | nnz LU | fill | ordering | LU flops | assembly | "
               "sparse loop plan | tree FD plan | C-ABA | x C-ABA | Lagrange dense | Lagrange L^T L | "
               "auto (this installation) |",
               "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
SWEEP_HEAD = ["| links | sparse loop plan | fill | ordering | C-ABA | x C-ABA | Lagrange dense | "
              "Lagrange L^T L | auto (this installation) |",
              "|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
#: columns that depend on SciPy's / CHOLMOD's orderings (their versions)
VERSION_DEPENDENT = ("auto (this installation)",)
#: loop-plan columns: the loop systems have several equally cheap safe matchings, and SciPy's
#: min_weight_full_bipartite_matching picks one (the tree plans' matching is unique)
MATCHING_DEPENDENT = ("nnz LU", "fill", "ordering", "LU flops", "sparse loop plan", "x C-ABA")


def system_line(label, make):
    r = measure(make())
    return (f"| {label} | {r['n']} | {r['nc']} | {r['nnz_D']} | {r['nnz_LU']} | {r['fill']} | "
            f"{r['ordering']} | {r['lu']} | {r['assembly']} | {r['sparse']} | {r['tree']} | "
            f"{r['caba']} | {r['sparse'] / r['caba']:.2f} | {r['dense']} | {r['ltl']} | {r['auto']} |")


def sweep_line(n):
    r = measure(geared_chain(n))
    return (f"| {n} | {r['sparse']} | {r['fill']} | {r['ordering']} | {r['caba']} | "
            f"{r['sparse'] / r['caba']:.2f} | {r['dense']} | {r['ltl']} | {r['auto']} |"), \
        (n, r["sparse"], r["caba"], r["dense"])


def sweep_slopes(sweep):
    """{name: log-log slope over the longer half} of (n, sparse, C-ABA, dense) tuples."""
    n, sp_, ca, de = (np.array(x, float) for x in zip(*sweep[len(sweep) // 2:]))
    return {k: float(np.polyfit(np.log(n), np.log(v), 1)[0]) for k, v in
            (("sparse", sp_), ("C-ABA", ca), ("Lagrange dense", de))}


#: 6D contacts of the ID / Delassus section: the end-effectors of loops_tables.py's Table IV
CONTACTS = {"12-link GT chain": ["link12"], "12-link PBT chain": ["link12"],
            "Mini Cheetah": ["FR_shank", "FL_shank", "HR_shank", "HL_shank"],
            "MIT Humanoid": ["left_foot", "right_foot", "left_elbow", "right_elbow"],
            "four-bar + tail": ["tail"]}
ID_HEAD = ["| system | loop ID plan | C-RNEA | x C-RNEA | projected RNEA | contacts (6D) | loop Delassus | "
           "C-EFPA | x C-EFPA | projected inverse OSIM |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
#: loop-plan columns of the ID / Delassus section (their safe matchings: MATCHING_DEPENDENT's reason)
ID_MATCHING_DEPENDENT = ("loop ID plan", "x C-RNEA", "loop Delassus", "x C-EFPA")


def id_delassus_line(label, make):
    """One row: counted loop ID plan.solve and loop Delassus vs the recursive and projected ones."""
    cm = make()
    links = CONTACTS[label]
    plan, _ = own_plan(loop_inverse_dynamics(cm))
    fd, _ = own_plan(loop_forward_dynamics(cm, f_ext=links))
    delassus = compile_loop_delassus(cm, [sd.Contact(n) for n in links],
                                     ordering=fd.factorization.stats["ordering"])
    q, yd, ydd = cm.random_state(0)
    qd = cm.spanning_velocity(q, yd)
    sparse_id = _ops(lambda: plan.solve(q, qd, ydd=ydd))
    assert sparse_id == plan.stats["total_flops"], (sparse_id, plan.stats["total_flops"])
    sparse_del = _ops(lambda: delassus(q, backend="numpy"))
    assert sparse_del == delassus.stats["total_flops"], (sparse_del, delassus.stats["total_flops"])
    crnea, cefpa = _ops(lambda: c_rnea(cm, q, yd, ydd)), _ops(lambda: c_efpa(cm, q, links))
    return (f"| {label} | {sparse_id} | {crnea} | {sparse_id / crnea:.2f} | "
            f"{_ops(lambda: projected_rnea(cm, q, yd, ydd))} | {len(links)} | {sparse_del} | {cefpa} | "
            f"{sparse_del / cefpa:.2f} | {_ops(lambda: projection_inverse_osim(cm, q, links))} |")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="chain lengths 2, 6, 12 only")
    args = ap.parse_args(argv)
    lines = ["# Forward dynamics with loops: sparse block system vs C-ABA and Lagrange", "",
             f"Command: `python experiments/loops_sparse.py{' --quick' if args.quick else ''}`", "",
             "Operations per state (mul+add+div+sqrt, sparsedyn.opcount, paper convention). `sparse loop plan` = "
             "assembly of D, b with the loop rows + the static-pivot LU and substitutions of the "
             "planner's pick among sparsedyn's own orderings (= the counted `plan.solve`); `tree FD plan` = the same "
             "spanning tree without loop rows (not a solution of the looped system, for scale); "
             "`x C-ABA` = sparse / C-ABA. Lagrange dense = one LU of the (nv+nc) KKT matrix; "
             "Lagrange L^T L = Featherstone's sparse H = L^T L and the nc x nc Schur complement. "
             "`auto (this installation)` = the loop plan `compile` picks here, SciPy's and CHOLMOD's "
             "orderings included (their versions decide it). The loop systems' safe matching is not "
             "unique and SciPy's matching picks one, so the loop-plan columns (MATCHING_DEPENDENT) "
             "depend on SciPy's version too.", "", versions_line(), "",
             *SYSTEM_HEAD]
    for label, make in SYSTEMS:
        lines.append(system_line(label, make))
        print(lines[-1], flush=True)
    lengths = [2, 6, 12] if args.quick else [2, 4, 8, 12, 16, 24]
    lines += ["", "## Geared chain over length", "", *SWEEP_HEAD]
    sweep = []
    for n in lengths:
        line, point = sweep_line(n)
        lines.append(line)
        sweep.append(point)
        print(lines[-1], flush=True)
    if len(sweep) >= 3:
        slope = sweep_slopes(sweep)
        lines += ["", "Log-log slope of the op count over the longer half: " +
                  ", ".join(f"{k} {v:.2f}" for k, v in slope.items()) + "."]
    lines += ["", "## Inverse dynamics and Delassus matrices with loops", "",
              "`loop ID plan` = the counted `plan.solve` of loop_inverse_dynamics (assembly, LU, "
              "tau_y = tau - K_y^T lambda); `loop Delassus` = the counted "
              "`delassus(cluster_model, q, contacts, method=\"sparse\")` (assembly, one LU, one "
              "substitution per contact column, C x), each under the planner's pick among our own "
              "orderings; C-EFPA and the projected inverse OSIM on the same end-effectors.", "",
              *ID_HEAD]
    for label, make in SYSTEMS:
        lines.append(id_delassus_line(label, make))
        print(lines[-1], flush=True)
    os.makedirs(OUT, exist_ok=True)
    with atomic_write(os.path.join(OUT, "loops_sparse.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines[-2:]))


if __name__ == "__main__":
    main()
