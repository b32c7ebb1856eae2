"""Per-state time of the analytical derivatives of the dynamics through plans (issue #22:
plan.solve(..., derivatives=True), i.e. sd.rnea_derivatives / sd.aba_derivatives) against
Pinocchio's computeRNEADerivatives / computeABADerivatives, measured in the same run, and where
our time goes.

  - ours: the compiled route (backend "numba", one thread), B states per call: the fused pass
    for the solution d*, then through inverse dynamics' plan (problems/plan_derivatives.py) the
    tangent right-hand sides (kernels/tangent_numba.py), one numeric LU of its D(q) and 2 nv
    pruned substitutions (kernels/lu_pruned.py) per group of CHUNK states, and the mass-matrix
    plan's M (inverse dynamics) or L^T L with M^-1 applied to [-dtau/dq, -dtau/dv, I]
    (forward dynamics, kernels/ltl_derivatives.py); and apart, the three compiled pieces alone
    on the same states;
  - Pinocchio: called once per state from Python (the C++ algorithm plus the per-call Python
    overhead a Python user pays);
  - multiply-adds per state of the two substitution parts: the pruned program's (operation,
    column) pairs, and the L^T L passes' row updates times the columns they touch.
Interleaved rounds, best of --repeat; the load average is printed with the table.

    python experiments/bench_derivatives.py [--batch 128] [--repeat 5] [--urdf PATH [--fixed-base]]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pinocchio as pin

import sparsedyn as sd
from sparsedyn.kernels.ltl_derivatives import forward_from_inverse
from sparsedyn.kernels.tangent_numba import tangent_rhs
from sparsedyn.models import HAND_URDF, HUMANOID_URDF
from sparsedyn.problems.derivative_layout import compiled_values, tangent_data
from sparsedyn.problems.derivative_solves import pruned_derivative_program, solve_outputs
from sparsedyn.problems.plan_derivatives import CHUNK, _twin_columns
from sparsedyn.recursive.ltl import pattern


def pin_model(path, floating):
    return (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating
            else pin.buildModelFromUrdf(path))


def ltl_multiply_adds(model):
    """Row updates of kernels/ltl_derivatives.py per state times the columns each touches."""
    tree, nv = pattern(model), model.nv
    return sum(len(tree.ancestors[i]) * ((2 * nv + tree.last[i] - i + 1) + 3 * nv)
               for i in range(nv))


def rows(name, path, floating, B, repeat):
    model = sd.load_urdf(path, floating_base=floating)
    pm = pin_model(path, floating)
    pd = pm.createData()
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng, batch=B)
    v, y = rng.normal(size=(2, B, model.nv))
    pq = [sd.to_pinocchio_q(model, x, pm) for x in q]
    out = []
    for kind, given, peer in (("inverse_dynamics", "qdd", pin.computeRNEADerivatives),
                              ("forward_dynamics", "tau", pin.computeABADerivatives)):
        plan = sd.compile(getattr(sd, kind)(model))
        base, mass = plan.derivative_plans()
        x = plan.solve(q, v, outputs="all", **{given: y}).vector
        if base is not plan:
            x = np.ascontiguousarray(x[:, _twin_columns(plan, base)])
        values, kin, vel = compiled_values(base, q, v)
        nv, T = model.nv, tangent_data(base)
        # as plan_derivatives: groups of CHUNK states, right-hand sides states last
        groups = [(lo, min(B, lo + CHUNK)) for lo in range(0, B, CHUNK)]
        chunks = [np.zeros((base.system.rows.size, 2 * nv, CHUNK)) for _ in groups]
        dtau = [solve_outputs(base, values[lo:hi], c)[0] for (lo, hi), c in zip(groups, chunks)]
        L = mass.factor(q, backend="numba")
        lam, last = pattern(model).parents, pattern(model).last
        res = np.empty((3, B, nv, nv))
        runs = {
            "ours": lambda: plan.solve(q, v, threads=1, backend="numba", derivatives=True,
                                       **{given: y}),
            "tangent": lambda: [tangent_rhs(T, kin[lo:hi], vel[lo:hi], v[lo:hi], x[lo:hi], c)
                                for (lo, hi), c in zip(groups, chunks)],
            "LU": lambda: [solve_outputs(base, values[lo:hi], c)
                           for (lo, hi), c in zip(groups, chunks)],
            "Minv": lambda: [forward_from_inverse(lam, last, L[lo:hi], d, res[0, lo:hi],
                                                  res[1, lo:hi], res[2, lo:hi])
                             for (lo, hi), d in zip(groups, dtau)],
            "pin": lambda: [peer(pm, pd, pq[b], v[b], y[b]) for b in range(B)],
        }
        if base is plan:
            del runs["Minv"]
        for fn in runs.values():
            fn()
        best = dict.fromkeys(runs, np.inf)
        for _ in range(repeat):
            for key, fn in runs.items():
                t0 = time.perf_counter()
                fn()
                best[key] = min(best[key], (time.perf_counter() - t0) / B * 1e6)
        Q = pruned_derivative_program(base)
        pairs = int((np.diff(Q.group_ptr) * np.diff(Q.op_ptr)).sum())
        ltl = ltl_multiply_adds(model) if base is not plan else 0
        minv = f"{best['Minv']:.0f}" if "Minv" in best else "-"
        out.append(f"| {name} | {model.nv} | {kind} | {best['ours']:.0f} | {best['tangent']:.0f} | "
                   f"{best['LU']:.0f} | {minv} | {best['pin']:.1f} | "
                   f"{best['ours'] / best['pin']:.1f} | {pairs} + {ltl} |")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--urdf", help="another robot (floating base unless --fixed-base)")
    parser.add_argument("--fixed-base", action="store_true")
    args = parser.parse_args()
    robots = [("hand (fixed)", HAND_URDF, False), ("humanoid (floating)", HUMANOID_URDF, True)]
    if args.urdf:
        robots.append((os.path.basename(args.urdf), args.urdf, not args.fixed_base))
    print(f"B = {args.batch} states per call, best of {args.repeat}, load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}; times in us per state\n")
    print("| robot | nv | problem | ours | of which tangent | of which LU (2 nv pruned rhs) | "
          "of which M^-1 pass | Pinocchio | ours / Pinocchio | multiply-adds (pruned + L^T L) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, path, floating in robots:
        for line in rows(name, path, floating, args.batch, args.repeat):
            print(line)


if __name__ == "__main__":
    main()
