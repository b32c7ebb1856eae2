"""Per-state time of the batched online phase (Nori Sec. IV-D, V-D: assemble D(q), b, then the
planned sparse LU) against peers measured in the same run, and its growth with the chain length.

Part 1, the embedded humanoid (nv = 49), inverse and forward dynamics without external wrenches,
B = 1, 64, 1024, 4096 states per call:
  - ours, compiled (`plan.solve`, backend "numba": input checks, fused assembly + LU, tau / qdd)
    with 1 thread and with all of numba's threads; ours through the NumPy path for reference;
  - pinocchio.rnea / pinocchio.aba called once per state from Python (the C++ recursive algorithms
    plus the per-call Python overhead a Python user pays), on min(B, 1024) states;
  - scipy.sparse.linalg.spsolve (SuperLU, own ordering, partial pivoting) on the very same D(q)
    and rhs, one state at a time (64 states; the assembly is excluded on its side).
Ratios ours / pinocchio < 1 mean ours is faster.

Part 2, serial revolute chains of N = 10 ... 1000 links (fixed orderings, so that only N changes:
"rnea" for ID, Nori's eq. 11-12, and "aba" for FD, his Appendix B order, which "auto" picks from
N ~ 20 on): compiled per-state time at B = 1024 and the time per state and link, which is flat
if the online phase is linear in N. The compiled kernels run the plan in its sweep layout
(sparsedyn/ir/layout.py: one sweep per elimination direction, slots shared by values whose
lives do not overlap). experiments/bench_chain_lanes.py follows FD past 1000 links at every lane
count.

Timings are the best of --repeat runs; the machine load (os.getloadavg) is printed with them.

    python experiments/bench_dynamics.py [--repeat 5] [--out experiments/out/bench_dynamics.md]
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numba
import numpy as np
import pinocchio as pin
import scipy.sparse as sp
import scipy.sparse.linalg

from sparsedyn.bench import pin_configuration
from sparsedyn.files import atomic_write
from sparsedyn.models import HUMANOID_URDF, humanoid, serial_chain
from sparsedyn.problems import compile, forward_dynamics, inverse_dynamics
from sparsedyn.spatial import inertia_parameters

BATCHES = (1, 64, 1024, 4096)
CHAINS = (10, 30, 100, 300, 1000)
PIN_STATES, SPSOLVE_STATES = 1024, 64
#: pinocchio.Data of a serial chain grows much faster than the chain (1.7 GB at 300 joints
#: measured here, a MemoryError at 1000 on this 24 GB machine): no Pinocchio peer beyond this
PIN_MAX_CHAIN = 300


def pin_chain(model):
    """Pinocchio twin of a revolute serial_chain (same placements, axes, inertias)."""
    pm = pin.Model()
    parent = 0
    for i, j in enumerate(model.joints):
        T = model.joint_placements[i]
        parent = pm.addJoint(parent, pin.JointModelRevoluteUnaligned(j.axis),
                             pin.SE3(T[:3, :3].copy(), T[:3, 3].copy()), j.name)
        mass, com, Ic = inertia_parameters(model.inertias[i])
        pm.appendBodyToJoint(parent, pin.Inertia(mass, com, Ic), pin.SE3.Identity())
    pm.gravity = pin.Motion(np.array(model.gravity), np.zeros(3))
    return pm


def best_time(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def per_state(fn, n, repeat):
    """Best time of fn() divided by the n states it handles, in microseconds."""
    return best_time(fn, repeat) / n * 1e6


def load():
    return "%.2f / %.2f / %.2f" % os.getloadavg()


def states(model, pmodel, B, rng):
    q = model.random_configuration(rng, batch=B)
    v, x = rng.normal(size=(2, B, model.nv))
    return q, v, x, np.array([pin_configuration(model, pmodel, qb) for qb in q[:PIN_STATES]])


def humanoid_table(repeat, threads, rng):
    model = humanoid()
    pmodel = pin.buildModelFromUrdf(HUMANOID_URDF, pin.JointModelFreeFlyer())
    pdata = pmodel.createData()
    q, v, x, pq = states(model, pmodel, max(BATCHES), rng)
    rows = []
    for kind, make, given, pin_fn in (("ID", inverse_dynamics, "qdd", pin.rnea),
                                      ("FD", forward_dynamics, "tau", pin.aba)):
        plan = compile(make(model))
        plan.solve(q[:64], v[:64], **{given: x[:64]})                       # JIT warm-up
        plan.solve(q[:64], v[:64], threads=1, **{given: x[:64]})
        plan.solve(q[:64], v[:64], backend="numpy", **{given: x[:64]})
        n_pin = PIN_STATES
        t_pin = per_state(lambda: [pin_fn(pmodel, pdata, pq[b], v[b], x[b]) for b in range(n_pin)],
                          n_pin, repeat)
        system = plan.system
        measured = plan._measured(x[:SPSOLVE_STATES], None)
        values, rhs = system.assemble(q[:SPSOLVE_STATES], v[:SPSOLVE_STATES], measured)
        P = system.pattern

        def spsolve_states():
            for b in range(SPSOLVE_STATES):
                D = sp.csc_matrix((values[b], P.indices, P.indptr), shape=P.shape)
                scipy.sparse.linalg.spsolve(D, rhs[b])
        t_sp = per_state(spsolve_states, SPSOLVE_STATES, 1)
        for B in BATCHES:
            qb, vb, xb = q[:B], v[:B], x[:B]
            r = repeat if B < 4096 else max(2, repeat // 2)
            t1 = per_state(lambda: plan.solve(qb, vb, threads=1, **{given: xb}), B, r)
            tn = per_state(lambda: plan.solve(qb, vb, threads=threads, **{given: xb}), B, r)
            t_np = per_state(lambda: plan.solve(qb, vb, backend="numpy", **{given: xb}), B,
                             max(1, r // 2))
            rows.append((kind, B, t1, tn, t_np, t_pin, t_sp))
            print(f"{kind} B={B:5d}: compiled {t1:7.2f} us (1 thr) {tn:7.2f} us ({threads} thr), "
                  f"numpy {t_np:7.1f}, pinocchio {t_pin:6.2f}, spsolve {t_sp:7.1f} | "
                  f"ratio {t1 / t_pin:.2f} / {tn / t_pin:.2f}  (load {load()})", flush=True)
        rows.append((kind, "plan", plan.stats["ordering"], plan.stats["flops"]))
    return rows


def chain_table(repeat, threads, rng, B=1024, seconds=0.0):
    """Chain sweep. seconds > 0: every (N, problem) case and its peers run in turn, round after
    round, for that long, and each keeps its fastest round: on a shared machine this is steadier
    than back-to-back repeats of one case (another process's burst hits every case alike). In a
    round each runs twice back to back and keeps the faster call: the steady state of a caller
    that calls it repeatedly, not the cold cache the previous case leaves (which costs a small
    chain's call ~0.3 ms, as much as its work at N = 10)."""
    cases = []
    for N in CHAINS:
        model = serial_chain(N)
        pmodel = pin_chain(model) if N <= PIN_MAX_CHAIN else None
        pdata = pmodel.createData() if pmodel is not None else None
        q = model.random_configuration(rng, batch=B)
        v, x = rng.normal(size=(2, B, model.nv))
        pq = q                              # chains have bounded revolute joints: same layout
        n_pin = min(B, 256)
        for kind, make, given, pin_fn, ordering in (
                ("ID", inverse_dynamics, "qdd", pin.rnea, "rnea"),
                ("FD", forward_dynamics, "tau", pin.aba, "aba")):
            plan = compile(make(model), ordering=ordering)
            plan.solve(q[:8], v[:8], **{given: x[:8]})

            def ours(plan=plan, q=q, v=v, x=x, given=given, t=1):
                return plan.solve(q, v, threads=t, **{given: x})

            def peer(pin_fn=pin_fn, pmodel=pmodel, pdata=pdata, pq=pq, v=v, x=x):
                return [pin_fn(pmodel, pdata, pq[b], v[b], x[b]) for b in range(n_pin)]
            fns = (ours, lambda ours=ours: ours(t=threads), None if pmodel is None else peer)
            cases.append(((kind, N, plan.stats["flops"]), fns, (B, B, n_pin)))
    best = {key: [np.inf] * 3 for key, _, _ in cases}
    rounds, t_end = 0, time.time() + seconds
    while rounds < repeat or time.time() < t_end:
        for key, fns, counts in cases:
            for j, (fn, n) in enumerate(zip(fns, counts)):
                if fn is not None:
                    best[key][j] = min(best[key][j], per_state(fn, n, 2))
        rounds += 1
    rows = []
    for key, _, _ in cases:
        kind, N, flops = key
        t1, tn, t_pin = (np.nan if t == np.inf else t for t in best[key])
        rows.append((kind, N, flops, t1, tn, t_pin))
        print(f"chain {N:5d} {kind}: {flops:7d} flops, compiled {t1:9.2f} us (1 thr) {tn:9.2f} us "
              f"({threads} thr) = {1e3 * t1 / N:6.1f} ns/link, pinocchio {t_pin:8.2f} us  "
              f"(load {load()})", flush=True)
    return rows


def write_markdown(path, hum, chains, threads, load_before, load_after, command):
    lines = ["# Online phase: compiled assembly + planned sparse LU vs Pinocchio", "",
             f"Generated by `{command}` on {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores, numba {numba.__version__} with {threads} threads "
             f"(NUMBA_NUM_THREADS), pinocchio {pin.__version__}. Load average (1/5/15 min) "
             f"before: {load_before}, after: {load_after}. Best of several runs; the 2 cores "
             "are shared, so treat differences below ~20% as noise.", "",
             "## Embedded humanoid (nv = 49), per-state time in microseconds", "",
             "Ours: `plan.solve` end to end (checks, assembly of D and b, LU, tau / qdd). "
             f"Pinocchio: `pin.rnea` / `pin.aba` called per state from Python ({PIN_STATES} "
             f"states). spsolve: SuperLU on the same D, per state ({SPSOLVE_STATES} states, "
             "assembly excluded). Ratio < 1: ours is faster.", "",
             "| problem | B | compiled 1 thread | compiled all threads | NumPy path | "
             "pinocchio per call | spsolve | 1 thread / pinocchio | all threads / pinocchio |",
             "|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for row in hum:
        if row[1] == "plan":
            notes.append(f"{row[0]}: ordering {row[2]!r}, {row[3]} LU flops per state")
            continue
        kind, B, t1, tn, t_np, t_pin, t_sp = row
        lines.append(f"| {kind} | {B} | {t1:.2f} | {tn:.2f} | {t_np:.1f} | {t_pin:.2f} | "
                     f"{t_sp:.1f} | {t1 / t_pin:.2f} | {tn / t_pin:.2f} |")
    at = {(r[0], r[1]): r for r in hum if r[1] == 4096}
    if ("ID", 4096) in at and ("FD", 4096) in at:
        rid, rfd = at[("ID", 4096)], at[("FD", 4096)]
        lines += ["", f"Issue #3 targets at B = 4096: ID <= 0.5 x pin.rnea (measured "
                  f"{rid[2] / rid[5]:.2f} with 1 thread, {rid[3] / rid[5]:.2f} with {threads}); "
                  f"FD <= 1.0 x pin.aba (measured {rfd[2] / rfd[5]:.2f} / {rfd[3] / rfd[5]:.2f})."]
    lines += ["", "Plans: " + "; ".join(notes) + ".", "",
              "## Serial chains, compiled, B = 1024, per-state time", "",
              "ID ordered by Nori's eq. (11)-(12) (zero fill), FD by his Appendix B ('aba') for "
              "every N. "
              "'ns per link' (1 thread) is flat when the online time is linear in N. No Pinocchio "
              f"peer beyond N = {PIN_MAX_CHAIN}: its Data for a 1000-joint chain does not fit in "
              "memory here.", "",
              "| problem | N | LU flops | compiled 1 thread (us) | compiled all threads (us) | "
              "ns per link (1 thread) | pinocchio per call (us) | 1 thread / pinocchio |",
              "|---|---|---|---|---|---|---|---|"]
    for kind, N, flops, t1, tn, t_pin in sorted(chains, key=lambda r: (r[0], r[1])):
        lines.append(f"| {kind} | {N} | {flops} | {t1:.2f} | {tn:.2f} | {1e3 * t1 / N:.1f} | "
                     f"{t_pin:.2f} | {t1 / t_pin:.2f} |")
    with atomic_write(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out",
                                                  "bench_dynamics.md"))
    ap.add_argument("--skip-chains", action="store_true")
    ap.add_argument("--chain-seconds", type=float, default=0.0,
                    help="run the chain cases in turn for this long, fastest round each "
                         "(steadier on a shared machine; default: --repeat rounds)")
    args = ap.parse_args(argv)
    threads = numba.get_num_threads()
    rng = np.random.default_rng(0)
    before = load()
    print(f"numba threads: {threads}; load average {before}")
    hum = humanoid_table(args.repeat, threads, rng)
    chains = [] if args.skip_chains else chain_table(args.repeat, threads, rng,
                                                      seconds=args.chain_seconds)
    after = load()
    command = "python experiments/bench_dynamics.py" + (" --skip-chains" if args.skip_chains else "")
    if args.chain_seconds:
        command += f" --chain-seconds {args.chain_seconds:g}"
    write_markdown(args.out, hum, chains, threads, before, after, command)
    print(f"written {args.out}; load average {after}")


if __name__ == "__main__":
    main()
