"""The package's one pool of worker threads, for work that releases the GIL (ctypes calls into
C, NumPy copies and reductions of large arrays): started once, grown on demand, shared by every
caller (starting a pool per call cost ~300 us)."""
from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

from .kernels.parallel import ParallelRegion

_pool, _pool_size, _pool_lock = None, 0, threading.Lock()


def pool(workers):
    """The pool, with at least `workers` threads."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool_size < workers:
            if _pool is not None:
                _pool.shutdown(wait=False)          # its queued ranges still run
            _pool, _pool_size = ThreadPoolExecutor(workers), workers
        return _pool


def run_ranges(edges, call):
    """call(lo, hi, k) for each range k of consecutive `edges` (non-empty ones only): the first
    on the calling thread, the others on the pool; returns their results in range order and
    re-raises the first exception. `call` must not wait on the pool itself (a range that ran
    run_ranges could wait for a worker that is running it)."""
    edges = [int(e) for e in edges]
    spans = [(edges[k], edges[k + 1], k) for k in range(len(edges) - 1)]
    results = [None] * len(spans)
    others = [(lo, hi, k) for lo, hi, k in spans[1:] if hi > lo]
    # a region while the pool's threads work (idle_cores counts them busy); none for one range
    with ParallelRegion() if others else contextlib.nullcontext():
        pending = [(k, pool(len(spans) - 1).submit(call, lo, hi, k)) for lo, hi, k in others]
        lo, hi, _ = spans[0]
        if hi > lo:
            results[0] = call(lo, hi, 0)
        for k, done in pending:
            results[k] = done.result()
    return results
