"""Offline planning at scale (issue #20 item 5): compile time and memory of forward dynamics of
an n-link serial chain with the default settings, sd.compile(sd.forward_dynamics(serial_chain(n)))
("auto" ordering: every candidate's structural flop bound, then the programs of the candidates
that can still win, sparsedyn.planner.factorization.BUDGET and FOLDING_FLOOR).

Each n is compiled in its own process (a fresh interpreter; a 5-link chain compiled first, so
that imports and the numba kernels loaded from the cache are not counted), which reports:
  time      wall time of compile (s)
  peak MB   its peak resident memory (VmHWM of /proc/self/status: Linux)
  plan MB   peak minus the resident memory just before compile: what planning allocated at most
  per link  plan MB / n, in kB: constant when the planner's memory grows linearly with the chain
plus the chosen ordering, the size of D and the counted flops of the plan, and how many
candidates were built in full or skipped over budget.

    python experiments/offline_scale.py [--sizes 100 300 1000 3000] [--big]   (--big adds 10000)
Output: experiments/out/offline_scale.md
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "experiments", "out")
SIZES = (100, 300, 1000, 3000)
BIG = 10_000

_CHILD = r"""
import json, sys, time
import sparsedyn as sd
from sparsedyn.models import serial_chain

def status_mb(key):        # VmRSS: resident now, VmHWM: its peak (this process image only:
    with open("/proc/self/status") as fh:      # getrusage's maxrss keeps the parent's across exec)
        line = next(line for line in fh if line.startswith(key + ":"))
    return int(line.split()[1]) / 1024

n = int(sys.argv[1])
sd.compile(sd.forward_dynamics(serial_chain(5)))          # imports, cached kernels
model = serial_chain(n)
before = status_mb("VmRSS")
t0 = time.perf_counter()
plan = sd.compile(sd.forward_dynamics(model))
seconds = time.perf_counter() - t0
peak = status_mb("VmHWM")
f = plan.factorization
print(json.dumps({"n": n, "seconds": seconds, "peak_mb": peak, "plan_mb": peak - before,
                  "ordering": f.stats["ordering"], "n_D": int(f.pattern.shape[0]),
                  "nnz_D": int(f.pattern.nnz), "flops": int(f.stats["flops"]),
                  "built": sum(r["pivot_safe"] for r in f.table),
                  "skipped": [r["name"] for r in f.table if r["note"].startswith("skipped: over")],
                  "ruled_out": sum(r["note"].startswith("skipped: cannot") for r in f.table)}))
"""


def measure(n):
    """One compile of the n-link chain in a fresh process: its json record (see the docstring)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", _CHILD, str(n)], capture_output=True, text=True,
                         env=env, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def table_lines(rows):
    lines = ["| links | D size | nnz D | ordering | LU flops | built | cannot win | over budget "
             "| time (s) | peak MB | plan MB | plan kB per link |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n']} | {r['n_D']} | {r['nnz_D']} | {r['ordering']} | {r['flops']} "
                     f"| {r['built']} | {r['ruled_out']} | {', '.join(r['skipped']) or '-'} | {r['seconds']:.1f} "
                     f"| {r['peak_mb']:.0f} | {r['plan_mb']:.0f} "
                     f"| {1024 * r['plan_mb'] / r['n']:.0f} |")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--big", action="store_true", help=f"also {BIG} links (minutes, GBs)")
    args = ap.parse_args(argv)
    sizes = list(args.sizes) + ([BIG] if args.big else [])
    rows = []
    for n in sizes:
        rows.append(measure(n))
        print(table_lines(rows)[-1], flush=True)
    load = os.getloadavg()
    text = "\n".join([
        "# Offline planning at scale: forward dynamics of a serial chain, default settings",
        "",
        "`sd.compile(sd.forward_dynamics(serial_chain(n)))`, one fresh process per size (a "
        "5-link chain compiled first: imports and cached kernels are not counted). 'plan MB': "
        "peak resident memory minus the resident memory just before compile. 'built': "
        "candidate orderings whose program was built in full; 'cannot win': those whose "
        "structural flop bound, even after folding (x FOLDING_FLOOR), exceeds the flops of a "
        "program already built; 'over budget': those whose bound exceeds BUDGET x the lowest "
        "(their elimination stopped). "
        f"Load average during the run: {load[0]:.1f} (timings on a shared machine). "
        "Generated by `python experiments/offline_scale.py"
        + (" --big" if args.big else "") + "`.",
        "", *table_lines(rows), ""])
    os.makedirs(OUT, exist_ok=True)
    from sparsedyn.files import atomic_write
    with atomic_write(os.path.join(OUT, "offline_scale.md"), "w") as fh:
        fh.write(text)
    return rows


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    main()
