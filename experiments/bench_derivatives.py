"""Per-state time of the analytical derivatives of the dynamics through a plan (issue #22:
plan.solve(..., derivatives=True), i.e. sd.rnea_derivatives / sd.aba_derivatives) against
Pinocchio's computeRNEADerivatives / computeABADerivatives, measured in the same run.

  - ours: the compiled route (backend "numba", one thread), B states per call: the fused pass
    for the solution d*, the tangent right-hand sides (kernels/tangent_numba.py), one numeric
    LU of D(q) and 3 nv pruned substitutions (kernels/lu_pruned.py) per group of CHUNK states, and
    apart, the two compiled pieces alone (tangent, multi-right-hand-side LU) on the same states;
  - Pinocchio: called once per state from Python (the C++ algorithm plus the per-call Python
    overhead a Python user pays);
  - counted flops per state of ours (opcount: the NumPy route's count; the tangent part there
    visits every direction, the compiled kernel only each body's support).
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
from sparsedyn.kinematics import body_velocities, joint_transforms
from sparsedyn.models import HAND_URDF, HUMANOID_URDF
from sparsedyn.problems.derivative_layout import measurement_columns, tangent_data
from sparsedyn.problems.derivative_solves import solve_outputs
from sparsedyn.problems.plan_derivatives import CHUNK
from sparsedyn.kernels.tangent_numba import tangent_rhs


def pin_model(path, floating):
    return (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating
            else pin.buildModelFromUrdf(path))


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
        x = plan.solve(q, v, outputs="all", **{given: y}).vector
        Xup = joint_transforms(model, q)
        vel = body_velocities(model, Xup, v)
        kin = np.ascontiguousarray(np.stack([np.concatenate((X.E.reshape(B, 9), X.r), 1)
                                             for X in Xup], axis=1))
        values = plan.system.values(Xup)
        nv, T = model.nv, tangent_data(plan)
        # as plan_derivatives: groups of CHUNK states, right-hand sides states last
        groups = [(lo, min(B, lo + CHUNK)) for lo in range(0, B, CHUNK)]
        chunks = [np.zeros((plan.system.rows.size, 3 * nv, CHUNK)) for _ in groups]
        for c in chunks:
            c[:, 2 * nv:] = measurement_columns(plan)[:, :, None]
        runs = {
            "ours": lambda: plan.solve(q, v, threads=1, backend="numba", derivatives=True,
                                       **{given: y}),
            "tangent": lambda: [tangent_rhs(T, kin[lo:hi], vel[lo:hi], v[lo:hi], x[lo:hi], c)
                                for (lo, hi), c in zip(groups, chunks)],
            "LU": lambda: [solve_outputs(plan, values[lo:hi], c)
                           for (lo, hi), c in zip(groups, chunks)],
            "pin": lambda: [peer(pm, pd, pq[b], v[b], y[b]) for b in range(B)],
        }
        for fn in runs.values():
            fn()
        best = dict.fromkeys(runs, np.inf)
        for _ in range(repeat):
            for key, fn in runs.items():
                t0 = time.perf_counter()
                fn()
                best[key] = min(best[key], (time.perf_counter() - t0) / B * 1e6)
        with sd.count_operations() as ops:
            plan.solve(q[:1], v[:1], backend="numpy", derivatives=True, **{given: y[:1]})
        out.append(f"| {name} | {model.nv} | {kind} | {best['ours']:.0f} | {best['tangent']:.0f} | "
                   f"{best['LU']:.0f} | {best['pin']:.1f} | {best['ours'] / best['pin']:.0f} | "
                   f"{ops.flops} |")
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
    print("| robot | nv | problem | ours | of which tangent | of which LU (3 nv pruned rhs) | "
          "Pinocchio | ours / Pinocchio | counted flops (ours) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, path, floating in robots:
        for line in rows(name, path, floating, args.batch, args.repeat):
            print(line)


if __name__ == "__main__":
    main()
