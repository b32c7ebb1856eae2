"""Per-state time of every C vector unit at two vector widths (backends/c_vector.LANES, set per
process by SPARSEDYN_C_LANES): the plan's unit (inverse and forward dynamics, constrained forward
dynamics with both soles 6D), the mass matrix's (packed) and PV-OSIMr's Delassus kernel (soles
6D + six fingertips 3D), humanoid, one thread, B states. Widths alternate process by process,
round after round; each process prints its best of --calls calls per unit, and the table keeps
each width's best over rounds. Prints only (kernel_design.md, "C vectors as wide as the CPU's
register", quotes a run).

    python experiments/bench_c_lanes.py [--widths 8 4] [--batch 4096] [--rounds 2] [--calls 7]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
UNITS = ("inverse dynamics", "forward dynamics", "constrained FD", "mass matrix, packed",
         "PV-OSIMr Delassus kernel")


def one_width(B, calls):
    """{unit: best us per state} at this process's LANES."""
    import numba
    import numpy as np

    import sparsedyn as sd
    from bench_delassus import TIPS
    from bench_peers import humanoid_states
    from sparsedyn.backends.c_pv_osimr import library, run_lanes
    from sparsedyn.contacts import resolve_contacts
    from sparsedyn.kernels.pv_osimr_numba import program_for
    model, _, _, q, v, a, _, tau = humanoid_states(B)
    id_plan = sd.compile(sd.inverse_dynamics(model))
    fd_plan = sd.compile(sd.forward_dynamics(model))
    cd_plan = sd.constrained_forward_dynamics(model, [sd.Contact(s, "6d")
                                                      for s in ("l_sole", "r_sole")])
    mm_plan = sd.compile(sd.mass_matrix(model))
    contacts = [sd.Contact("l_sole"), sd.Contact("r_sole")] + [sd.Contact(t, "3d") for t in TIPS]
    program = program_for(model, resolve_contacts(model, contacts))
    library()
    numba.set_num_threads(1)
    fns = dict(zip(UNITS, (
        lambda: id_plan.solve(q, v, qdd=a, backend="c", threads=1),
        lambda: fd_plan.solve(q, v, tau=tau, backend="c", threads=1),
        lambda: cd_plan.solve(q, v, tau, backend="c", threads=1),
        lambda: mm_plan.solve(q, packed=True, backend="c", threads=1),
        lambda: run_lanes(program, q, threads=1))))
    best = {}
    for fn in fns.values():
        fn()
    for _ in range(calls):
        for unit, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[unit] = min(best.get(unit, np.inf), (time.perf_counter() - t0) / B * 1e6)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--widths", type=int, nargs="+", default=[8, 4])
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=7)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    sys.path.insert(0, HERE)
    if args.one:
        print(json.dumps(one_width(args.batch, args.calls)))
        return
    from sparsedyn.backends.c_vector import cpu_vectors
    print(f"{cpu_vectors()} vectors; load average before: {os.getloadavg()[0]:.2f}", flush=True)
    best = {w: {} for w in args.widths}
    for _ in range(args.rounds):
        for w in args.widths:
            out = subprocess.run([sys.executable, __file__, "--one", "--batch", str(args.batch),
                                  "--calls", str(args.calls)], check=True, capture_output=True,
                                 text=True, env=dict(os.environ, SPARSEDYN_C_LANES=str(w)))
            for unit, t in json.loads(out.stdout.splitlines()[-1]).items():
                best[w][unit] = min(best[w].get(unit, float("inf")), t)
    print(f"load average after: {os.getloadavg()[0]:.2f}; B = {args.batch}, 1 thread, us per "
          f"state (best of {args.rounds} x {args.calls} calls)")
    print("| unit | " + " | ".join(f"{w} lanes" for w in args.widths) + " |")
    print("|---|" + "---|" * len(args.widths))
    for unit in UNITS:
        print(f"| {unit} | " + " | ".join(f"{best[w][unit]:.2f}" for w in args.widths) + " |")


if __name__ == "__main__":
    main()
