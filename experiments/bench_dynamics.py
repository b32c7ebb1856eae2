"""Per-state time of the batched online sparse solve (Nori's online phase) on the embedded
humanoid, inverse and forward dynamics, B = 1..4096, against peers measured in the same run:

  - pinocchio.rnea / pinocchio.aba called once per state from Python (the C++ recursive
    algorithms plus the Python call overhead a Python user pays per state);
  - scipy.sparse.linalg.spsolve (SuperLU with its own ordering and partial pivoting) on the very
    same D(q) and rhs, one state at a time (assembly excluded on both sides).

Ours is reported in full (`plan.solve`: input checks, kinematics, assembly of D and b, compiled
LU kernel, unpacking) and split into assembly and kernel. Ratios > 1 mean ours is slower.

    python experiments/bench_dynamics.py [--max-batch 4096] [--repeat 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import pinocchio as pin
import scipy.sparse as sp
import scipy.sparse.linalg

from sparsedyn.models import HUMANOID_URDF, humanoid
from sparsedyn.problems import compile, forward_dynamics, inverse_dynamics


def to_pin_q(model, pmodel, q):
    """Our q (one angle per continuous joint) -> Pinocchio's (cos, sin) layout."""
    out = np.zeros(pmodel.nq)
    for i, joint in enumerate(model.joints):
        pj = pmodel.joints[pmodel.getJointId(joint.name)]
        qi = q[model.q_slice(i)]
        if pj.nq == 2 and joint.nq == 1:
            out[pj.idx_q:pj.idx_q + 2] = np.cos(qi[0]), np.sin(qi[0])
        else:
            out[pj.idx_q:pj.idx_q + pj.nq] = qi
    return out


def best_time(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def bench(kind, plan, model, pmodel, batches, repeat, rng):
    system, fact = plan.system, plan.factorization
    pdata = pmodel.createData()
    given = "qdd" if kind == "ID" else "tau"
    pin_fn = pin.rnea if kind == "ID" else pin.aba
    Bmax = max(batches)
    q = model.random_configuration(rng, batch=Bmax)
    v, x = rng.normal(size=(2, Bmax, model.nv))
    pq = np.array([to_pin_q(model, pmodel, qb) for qb in q])
    plan.solve(q[:2], v[:2], **{given: x[:2]})                     # JIT warm-up
    print(f"\n{kind} ({plan.problem!r}, ordering {plan.stats['ordering']}, "
          f"{plan.stats['flops']} kernel flops/state)")
    print(f"{'B':>5} {'ours us/state':>14} {'assembly':>9} {'kernel':>8} {'pinocchio':>10} "
          f"{'spsolve':>8} {'ours/pin':>9} {'kernel/spsolve':>15}")
    for B in batches:
        qb, vb, xb = q[:B], v[:B], x[:B]
        r = max(1, repeat if B < 1024 else 1)
        t_ours = best_time(lambda: plan.solve(qb, vb, **{given: xb}), r) / B
        measured = {(given, i): xb[:, model.v_slice(i)] for i in range(model.nbodies)}
        measured.update({("fx", i): np.zeros((B, 6)) for i in plan.problem.fx_bodies})
        values, rhs = system.assemble(qb, vb, measured)
        t_asm = best_time(lambda: system.assemble(qb, vb, measured), r) / B
        t_kernel = best_time(lambda: fact.solve(values, rhs), r) / B
        n_pin = min(B, 1024)
        t_pin = best_time(lambda: [pin_fn(pmodel, pdata, pq[b], vb[b], xb[b]) for b in range(n_pin)], r) / n_pin
        n_sp = min(B, 64)
        P = system.pattern

        def spsolve_states():
            for b in range(n_sp):
                D = sp.csc_matrix((values[b], P.indices, P.indptr), shape=P.shape)
                scipy.sparse.linalg.spsolve(D, rhs[b])
        t_sp = best_time(spsolve_states, 1) / n_sp
        print(f"{B:5d} {t_ours * 1e6:14.1f} {t_asm * 1e6:9.1f} {t_kernel * 1e6:8.2f} "
              f"{t_pin * 1e6:10.1f} {t_sp * 1e6:8.1f} {t_ours / t_pin:9.2f} {t_kernel / t_sp:15.4f}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-batch", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    batches = [b for b in (1, 4, 16, 64, 256, 1024, 4096) if b <= args.max_batch]
    model = humanoid()
    pmodel = pin.buildModelFromUrdf(HUMANOID_URDF, pin.JointModelFreeFlyer())
    rng = np.random.default_rng(0)
    print(f"embedded humanoid: {model.nbodies} bodies, nv = {model.nv}; times per state in us")
    for kind, make in (("ID", inverse_dynamics), ("FD", forward_dynamics)):
        plan = compile(make(model, f_ext=True))
        bench(kind, plan, model, pmodel, batches, args.repeat, rng)


if __name__ == "__main__":
    main()
