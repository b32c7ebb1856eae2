"""Per-state time of the batched static-pivot LU kernels against peers measured in the same run.

Peers: scipy.sparse.linalg.splu + solve per state, scipy.sparse.linalg.spsolve per state, dense
numpy.linalg.solve batched. Systems: Nori's forward-dynamics system of a 25-body random tree
(sparsedyn.system, n = 500) and a block-arrow matrix. Prints microseconds per state and ratios
(peer time / default kernel time; > 1 means the kernel is faster).

    python experiments/bench_kernels.py [--batch 4096] [--peer-batch 256] [--dense-batch 32] [--repeat 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu, spsolve

from sparsedyn.kinematics import forward_kinematics
from sparsedyn.kernels import schedule, solve_numba, solve_numpy
from sparsedyn.models import random_tree
from sparsedyn.planner import plan_factorization
from sparsedyn.system import NewtonEulerSystem


def robot_system(batch, rng):
    model = random_tree(25, seed=0)
    measured = [("tau", i) for i in range(model.nbodies)] + [("fx", i) for i in range(model.nbodies)]
    system = NewtonEulerSystem(model, measured=measured)
    q = model.random_configuration(rng, batch=batch)
    values = system.values(forward_kinematics(model, q, rng.normal(size=(batch, model.nv))).Xup)
    return "FD, 25-body random tree", system.pattern, system.always_nonzero, system.constant_values, values


def block_arrow(batch, rng, n_blocks=40, block=10, border=20):
    n = n_blocks * block + border
    dense = np.zeros((n, n), bool)
    for k in range(n_blocks):
        dense[k * block:(k + 1) * block, k * block:(k + 1) * block] = True
    dense[-border:, :] = dense[:, -border:] = True
    pattern = sp.csc_matrix(dense.astype(float))
    rows = pattern.indices
    cols = np.repeat(np.arange(n), np.diff(pattern.indptr))
    diag = rows == cols
    values = rng.normal(size=(batch, pattern.nnz))
    values[:, diag] += 2.0 * np.sqrt(n)
    return f"block arrow {n_blocks}x{block} + border {border}", pattern, diag, None, values


def best_time(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def bench(name, pattern, always, constants, values, rhs, peer_batch, dense_batch, repeat):
    fact = plan_factorization(pattern, always, constants)
    s = fact.stats
    n = pattern.shape[0]
    B = values.shape[0]
    print(f"\n== {name}: n={n}, nnz_D={s['nnz_D']}, nnz_LU={s['nnz_LU']}, flops/state={s['flops']}"
          f" ({s['ordering']}), batch {B}, sparse peers on {min(peer_batch, B)} states, dense on "
          f"{min(dense_batch, peer_batch, B)}")
    prog = fact.program
    groups = schedule(prog)
    solve_numba(prog, values[:2], rhs[:2], loop="batch_outer")   # compile (or load the cache)
    solve_numba(prog, values[:2], rhs[:2], loop="batch_inner")
    data = np.where(np.isnan(fact.constant_values), values, fact.constant_values)
    Bp = min(peer_batch, B)
    mats = [sp.csc_matrix((data[b], pattern.indices, pattern.indptr), shape=pattern.shape)
            for b in range(Bp)]
    Bd = min(dense_batch, Bp)
    dense = np.stack([m.toarray() for m in mats[:Bd]])

    ref = np.stack([splu(mats[b]).solve(rhs[b]) for b in range(Bp)])
    x = solve_numba(prog, values, rhs, loop="batch_inner")[0]
    err = np.abs(x[:Bp] - ref).max() / np.abs(ref).max()

    per_state = {
        "numba batch_inner (default)": best_time(lambda: solve_numba(prog, values, rhs, loop="batch_inner"), repeat) / B,
        "numba batch_outer": best_time(lambda: solve_numba(prog, values, rhs, loop="batch_outer"), repeat) / B,
        "numpy vectorised": best_time(lambda: solve_numpy(prog, groups, values, rhs), repeat) / B,
        "scipy splu+solve": best_time(lambda: [splu(m).solve(rhs[b]) for b, m in enumerate(mats)], repeat) / Bp,
        "scipy spsolve": best_time(lambda: [spsolve(m, rhs[b]) for b, m in enumerate(mats)], repeat) / Bp,
        "numpy.linalg.solve (dense, batched)": best_time(lambda: np.linalg.solve(dense, rhs[:Bd, :, None]), repeat) / Bd,
    }
    base = per_state["numba batch_inner (default)"]
    print(f"   max relative difference to splu: {err:.2e}")
    print(f"   {'kernel':38s} {'us/state':>10s} {'time / default':>15s}")
    for label, t in per_state.items():
        print(f"   {label:38s} {t * 1e6:10.2f} {t / base:15.2f}")
    return per_state


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--peer-batch", type=int, default=256)
    ap.add_argument("--dense-batch", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for make in (robot_system, block_arrow):
        name, pattern, always, constants, values = make(args.batch, rng)
        rhs = rng.normal(size=(args.batch, pattern.shape[0]))
        bench(name, pattern, always, constants, values, rhs, args.peer_batch, args.dense_batch,
              args.repeat)


if __name__ == "__main__":
    main()
