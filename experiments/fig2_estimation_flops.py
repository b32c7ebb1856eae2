"""Nori's Fig. 2: floating-point operations of joint-torque estimation for a serial chain with
N_B links and load cells at the two extremal links (seed 001, Sec. VI).

The chain floats (free-flyer on link 1, as Nori's humanoid with the left foot as base); both end
links carry an unknown contact wrench. Load cells alone (f_z, mu_x, mu_y per end) leave an
internal tangential force unobservable for every state (Remark 5: EstimationProblem.check raises).
The slippery-floor assumption (f_x = f_y = 0 at both ends, eq. 24) makes it solvable, but then the
system is OVER-determined by 4 rows (n + 6 equations for n + 2 unknowns in Nori's eq. 23), so an LU
applies to its normal equations P = A^T A (the least-squares route of sparsedyn.estimation):

  - dense LU of P:              2/3 n^3 + 2 n^2 (n unknowns of [D; D_Y])
  - permuted sparse LU of P:    exact flop count of the planner's static-pivot program (P is SPD,
                                pivots on its diagonal), factorisation + substitutions, under the
                                ordering the planner picks among those sparsedyn computes itself
                                (experiments/own_orderings.py; "auto" in this installation, which
                                may use SciPy's or CHOLMOD's orderings, is shown for reference)
  - dense LU of Nori's reduced (n_J + 2) system (tau and the two mu_z, eq. 23), for scale.
Also (table only) the exactly determined humanoid problem of the tests (square: sparse LU of
[D; D_Y] itself).

Second section, the set-up of Nori's own Fig. 2 code (iron76/bnt_time_varying,
experiments/computationalComplexity/SIE/compare with autoSensSIEfriction): a FIXED-base serial
chain, the square system [D; D_Y] with measured fx_1..fx_{N_B-1} (6 each), qdd_3..qdd_{N_B-2}, and
five components of f_1 and of fx_{N_B} (all but the moment about z: load cells + slippery floor,
eq. 24); unknown: every tau, qdd_1, qdd_2, qdd_{N_B-1}, qdd_{N_B}, the two moments about z, a, f.
Its pivots cannot all be always-nonzero entries (the unknown qdd are reached through the joint
transforms), so the planner is given every entry of the worst-case pattern as a pivot candidate
(generically nonzero; the online backward-error check catches a vanishing one). Columns:
  - unpermuted LU: natural column order (Nori's variable order a, f, tau, fx, qdd per link), rows
    only matched to the pivots (the row permutation P of MATLAB's [L, U, P] = lu([D; Y]))
  - permuted LU: the cheapest of sparsedyn's own fill-reducing orderings (P D Q = L U)
  - dense LU of the same n x n system, for scale.

Writes experiments/out/fig2.png and experiments/out/fig2.md.

    python experiments/fig2_estimation_flops.py [--max 40] [--step 3]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import sparsedyn as sd
from sparsedyn import IllPosedError
from sparsedyn import sensors as S
from sparsedyn.estimation import EstimationProblem, compile_estimation
from sparsedyn.files import atomic_path, atomic_write
from sparsedyn.model.joints import FreeFlyerJoint, RevoluteJoint
from sparsedyn.models import serial_chain
from sparsedyn.problems.plan import plan_system
from sparsedyn.system import NewtonEulerSystem

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from own_orderings import own_best, versions_line  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def floating_chain(n):
    b = sd.ModelBuilder(f"fchain{n}")
    I = np.diag([1e-3, 8e-3, 8e-3])
    parent = b.add_body("link1", -1, FreeFlyerJoint("root_joint"), mass=1.0, com=(0.15, 0, 0), inertia=I)
    for i in range(1, n):
        T = np.eye(4)
        T[0, 3] = 0.3
        parent = b.add_body(f"link{i + 1}", parent, RevoluteJoint(f"joint{i + 1}", np.eye(3)[(i - 1) % 2 + 1]),
                            placement=T, mass=1.0, com=(0.15, 0, 0), inertia=I)
    return b.build()


def dense_lu(n):
    return 2 * n ** 3 / 3 + 2 * n ** 2


def row_for(N):
    """One row of the table: the floating N_B-link chain with load cells at both ends."""
    model = floating_chain(N)
    ends = ["link1", f"link{N}"]
    cells = [S.JointAccelerations()] + [S.LoadCells(l) for l in ends]
    try:
        EstimationProblem(model, cells, unknown_wrenches=ends).check()
        remark5 = "solvable"
    except IllPosedError:
        remark5 = "ill-posed"
    problem = EstimationProblem(model, cells + [S.ZeroTangentialForce(l) for l in ends],
                                unknown_wrenches=ends)
    plan = compile_estimation(problem, method="lstsq", map_backend="lu")
    st = plan.stats
    own = own_best(plan.reference.factorization.table)
    n = problem.shape[1]
    return dict(N_B=N, rows=problem.shape[0], n=n, nnz_P=st["nnz_P"], sparse=own["flops"],
                ordering=own["name"], auto=f"{st['lu_flops']} ({st['lu_ordering']})",
                dense=dense_lu(n), reduced=dense_lu(N - 1 + 2), remark5=remark5)


def table_lines(rows):
    lines = ["| N_B | rows | unknowns | nnz(P) | sparse LU(P) | ordering | dense LU(P) | dense/sparse "
             "| dense LU reduced (eq. 23) | load cells alone | auto (this installation) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['N_B']} | {r['rows']} | {r['n']} | {r['nnz_P']} | {r['sparse']} | "
                     f"{r['ordering']} | {r['dense']:.0f} | {r['dense'] / r['sparse']:.1f} | "
                     f"{r['reduced']:.0f} | {r['remark5']} | {r['auto']} |")
    return lines


#: columns that depend on SciPy's / CHOLMOD's orderings (their versions)
VERSION_DEPENDENT = ("auto (this installation)",)

HUMANOID_LINKS = ["l_sole", "r_sole", "chest"]
SIE_NOTE = ("Unknown: every tau, qdd of joints 1, 2, N_B-1, N_B, the moment about z of f_1 and of "
            "fx_N_B, all a and f; measured: fx_1..fx_(N_B-1), qdd_3..qdd_(N_B-2), five components of "
            "f_1 and fx_N_B. LU flops per state (factorization + substitutions), pivots on generically "
            "nonzero entries. Unpermuted: natural column order, rows matched to the pivots only.")


def humanoid_line():
    """The exactly determined humanoid problem (F/T at both ankles), one sentence."""
    from sparsedyn.models import humanoid
    hm = humanoid()
    hp = EstimationProblem(hm, [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor"),
                                S.ForceTorque("r_foot_ft_sensor")], unknown_wrenches=HUMANOID_LINKS)
    own = own_best(compile_estimation(hp).reference.factorization.table)
    return (f"Humanoid, exactly determined (F/T at both ankles, unknown wrenches {HUMANOID_LINKS}): "
            f"[D; D_Y] {hp.shape[0]}x{hp.shape[1]}, nnz {hp.pattern.nnz}, sparse LU flops "
            f"{own['flops']} (fill {own['fill']}, ordering {own['name']}) vs dense LU "
            f"{dense_lu(hp.shape[1]):.3g}.")


#: five of f_1's and fx_N's six components, angular-first: all but the moment about z
#: (autoSensSIEfriction's selector of "f1_2D_friction" / "fxN_2D_friction")
SIE_SELECTOR = np.eye(6)[[0, 1, 3, 4, 5]]


def sie_system(N):
    """Nori's own Fig. 2 set-up: the fixed-base N-link chain with its square [D; D_Y] (N >= 4)."""
    measured = [("fx", i) for i in range(N - 1)] + [("qdd", i) for i in range(2, N - 2)]
    measured += [("f", 0, SIE_SELECTOR), ("fx", N - 1, SIE_SELECTOR)]
    return NewtonEulerSystem(serial_chain(N), measured)


def sie_row(N):
    system = sie_system(N)
    fact = plan_system(system, np.ones(system.nnz, dtype=bool), ordering="all")
    flops = {r["name"]: r["flops"] for r in fact.table if r["pivot_safe"]}
    own = own_best(fact.table)
    return dict(N_B=N, n=system.shape[0], nnz=system.nnz, natural=flops["natural"], permuted=own["flops"],
                ordering=own["name"], dense=dense_lu(system.shape[0]),
                auto=f"{fact.stats['flops']} ({fact.stats['ordering']})")


SIE_TITLE = "## Nori's own set-up: fixed base, square system, qdd of joints 1, 2, N_B-1, N_B unknown"
#: depend on SciPy's / CHOLMOD's orderings (their versions)
SIE_VERSION_DEPENDENT = ("auto (this installation)",)
#: depend on which of equally cheap pivot matchings SciPy's min_weight_full_bipartite_matching
#: returns (its version): the pivots are matched over the whole pattern here
SIE_MATCHING_DEPENDENT = ("unpermuted LU", "permuted LU", "ordering", "unpermuted / permuted")


def sie_lines(rows):
    lines = [SIE_TITLE, "",
             "| N_B | n | nnz | unpermuted LU | permuted LU | ordering | unpermuted / permuted | "
             "dense LU | auto (this installation) |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['N_B']} | {r['n']} | {r['nnz']} | {r['natural']} | {r['permuted']} | "
                     f"{r['ordering']} | {r['natural'] / r['permuted']:.2f} | {r['dense']:.0f} | {r['auto']} |")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--max", type=int, default=40)
    ap.add_argument("--step", type=int, default=3)
    args = ap.parse_args(argv)
    os.makedirs(OUT, exist_ok=True)
    rows = []
    for N in range(3, args.max + 1, args.step):
        rows.append(row_for(N))
        r = rows[-1]
        print(f"N_B={N:3d}  [D;D_Y] {r['rows']}x{r['n']}  sparse LU(P) {r['sparse']:9d} [{r['ordering']}]  "
              f"dense LU(P) {r['dense']:12.0f}  ratio {r['dense'] / r['sparse']:8.1f}  "
              f"load cells alone: {r['remark5']}")
    sie = [sie_row(N) for N in range(4, args.max + 1, 2)]
    with atomic_write(os.path.join(OUT, "fig2.md"), "w") as fh:
        fh.write("# Fig. 2: torque estimation, floating serial chain, load cells at both ends\n\n")
        fh.write("Slippery floor at both ends (load cells alone: Remark 5, ill-posed for every state).\n")
        fh.write("Flops per state of the LU of the normal matrix P = A^T A (the system is over-determined "
                 "by 4), under the planner's pick among the orderings sparsedyn computes itself; "
                 "'auto (this installation)' is what `compile` picks here, SciPy's and CHOLMOD's "
                 "orderings included (version-dependent). Generated by "
                 f"`python experiments/fig2_estimation_flops.py --max {args.max} --step {args.step}`.\n\n")
        fh.write(versions_line() + "\n\n")
        fh.write("\n".join(table_lines(rows)) + "\n")
        fh.write("\n" + humanoid_line() + "\n")
        fh.write("\n" + "\n".join(sie_lines(sie)) + "\n\n" + SIE_NOTE + "\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    N = [r["N_B"] for r in rows]
    plt.figure(figsize=(11, 4))
    plt.subplot(1, 2, 1)
    plt.semilogy(N, [r["dense"] for r in rows], "o-", label="dense LU of $A^TA$")
    plt.semilogy(N, [r["sparse"] for r in rows], "s-", label="permuted sparse LU of $A^TA$")
    plt.semilogy(N, [r["reduced"] for r in rows], "^--", label="dense LU, reduced eq. (23)")
    plt.xlabel("$N_B$")
    plt.ylabel("flops per state")
    plt.title("Torque estimation, load cells + slippery floor")
    plt.legend()
    plt.grid(True, which="both", alpha=0.3)
    plt.subplot(1, 2, 2)
    Ns = [r["N_B"] for r in sie]
    plt.plot(Ns, [r["natural"] for r in sie], "o-", label="unpermuted LU (natural columns)")
    plt.plot(Ns, [r["permuted"] for r in sie], "s-", label="permuted LU (own best ordering)")
    plt.xlabel("$N_B$")
    plt.ylabel("flops per state")
    plt.title("Nori's code set-up: fixed base, square", fontsize=10)
    plt.legend()
    plt.grid(True, alpha=0.3)
    plt.tight_layout()
    with atomic_path(os.path.join(OUT, "fig2.png")) as tmp:
        plt.savefig(tmp, dpi=120)
    print(f"wrote {OUT}/fig2.png and fig2.md")


if __name__ == "__main__":
    main()
