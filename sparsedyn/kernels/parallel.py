"""One guard around every launch of a numba parallel kernel, and the thread count of a call that
did not choose one.

numba's "omp" and "tbb" threading layers accept parallel launches from several Python threads at
once; its fallback "workqueue" layer does not (it aborts the process). Where the layer is
workqueue, or not yet chosen (before the first launch), launches are serialised by one lock, so
plans stay safe to call from several threads on any installation.
"""
from __future__ import annotations

import contextlib
import os
import threading

_LOCK = threading.Lock()
_SAFE_LAYERS = ("omp", "tbb")


def parallel_launch():
    """Context manager to hold while a parallel kernel runs."""
    import numba
    try:
        layer = numba.threading_layer()
    except ValueError:              # no parallel kernel has run yet: the layer is unknown
        layer = None
    return contextlib.nullcontext() if layer in _SAFE_LAYERS else _LOCK


#: the fewest states a thread of a default call (threads=None) gets: below, waking a second
#: thread costs about as much as the states it would take
MIN_STATES_PER_THREAD = 32


def idle_cores():
    """Cores of this process's affinity that no other thread is running on right now (Linux:
    /proc/loadavg's count of runnable threads, less the calling one), or None where unknown."""
    try:
        with open("/proc/loadavg") as fh:
            running = int(fh.read().split()[3].split("/")[0])
        cores = len(os.sched_getaffinity(0))
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return max(0, cores - (running - 1))


def default_threads(B, available):
    """Threads for a call of B states that did not choose: at most `available` (numba's), each
    with MIN_STATES_PER_THREAD states at least, and no more than the cores idle right now
    (idle_cores, the caller's own counted): a parallel launch waits for its slowest thread, and
    a thread that has to wait for a busy core made calls 2-40x slower than one thread did
    (experiments/kernel_design.md)."""
    threads = min(int(available), B // MIN_STATES_PER_THREAD)
    if threads <= 1:
        return 1
    idle = idle_cores()
    return threads if idle is None else max(1, min(threads, idle))
