"""Throughput of estimate_log's two preprocessing stages (issue #17 item 6) on a synthetic
100 000-row log: linear alignment of a 12-column stream logged at 400 Hz in a 1 kHz log
(estimation/log_align.py) and the Savitzky-Golay derivative of 35 velocities, window 21,
order 3 (estimation/log_derivative.py), in chunks of 1024 and 4096 rows. Prints rows/s and the
load average (the stages are not the bottleneck next to the solve).

    python experiments/bench_log_stages.py
"""
import os
import time

import numpy as np
import scipy.signal  # noqa: F401  - imported before timing (its import takes seconds)

from sparsedyn.estimation.log_align import Stream, align_streams
from sparsedyn.estimation.log_derivative import differentiate


def chunks(block, size):
    n = len(block)
    return ((s, None, block[s:s + size].copy(), np.ones(min(size, n - s), bool))
            for s in range(0, n, size))


def main(N=100_000, nv=35):
    print(f"load average {os.getloadavg()}")
    t = 1e-3 * np.arange(N)
    block = np.column_stack([t, np.random.default_rng(0).normal(size=(N, nv + 12))])
    between = np.ones(N, bool)
    between[::5] = between[2::5] = False               # samples at rows 0, 2, 5, 7, ...: 400 Hz
    block[between, 1 + nv:] = np.nan
    stream = [Stream("ft", np.arange(1 + nv, 13 + nv), "linear", [])]
    for size in (1024, 4096):
        t0 = time.perf_counter()
        n = sum(len(c[3]) for c in align_streams(chunks(block, size), stream, 0, []))
        t1 = time.perf_counter()
        m = sum(len(c[3]) for c in differentiate(chunks(block, size), np.arange(1, 1 + nv), 0,
                                                 21, 3, 1e-3, []))
        t2 = time.perf_counter()
        assert n == m == N
        print(f"chunks of {size}: linear alignment {N / (t1 - t0):.3g} rows/s, "
              f"Savitzky-Golay ({nv} velocities, window 21) {N / (t2 - t1):.3g} rows/s")


if __name__ == "__main__":
    main()
