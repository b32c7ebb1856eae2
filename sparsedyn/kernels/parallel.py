"""One guard around every parallel region of the package (numba's parallel kernels, C's OpenMP
teams, the Python pool's ranges), and the thread count of a call that did not choose one.

numba's "omp" and "tbb" threading layers accept parallel launches from several Python threads at
once; its fallback "workqueue" layer does not (it aborts the process). Where the layer is
workqueue, or not yet chosen (before the first launch), launches are serialised by one lock, so
plans stay safe to call from several threads on any installation.

OpenMP's workers (numba's omp layer and C's teams share GCC's libgomp) wait spinning for a while
after a region ends (libgomp: 300,000 rounds unless GOMP_SPINCOUNT / OMP_WAIT_POLICY say
otherwise; ~5 ms seen here), and the kernel counts them as running: idle_cores counts this
process's running threads as idle while no region of ours is in flight and the last ended less
than WORKERS_SPIN_SECONDS ago (a loop of default calls otherwise ran every other call, or two
in three, on one thread).
"""
from __future__ import annotations

import os
import threading
import time

_LOCK = threading.Lock()
_SAFE_LAYERS = ("omp", "tbb")
_REGIONS = threading.Lock()
_in_flight, _last_end = 0, float("-inf")
#: how long after a parallel region ends its idle workers may still be running, spinning
WORKERS_SPIN_SECONDS = 0.05


class ParallelRegion:
    """Context of one parallel region: holds `lock` (None: no lock) while it runs and keeps the
    count of regions in flight and when the last one ended (idle_cores)."""

    def __init__(self, lock=None):
        self.lock = lock

    def __enter__(self):
        global _in_flight
        if self.lock is not None:
            self.lock.acquire()
        with _REGIONS:
            _in_flight += 1
        return self

    def __exit__(self, *exc):
        global _in_flight, _last_end
        with _REGIONS:
            _in_flight -= 1
            _last_end = time.monotonic()
        if self.lock is not None:
            self.lock.release()
        return False


def parallel_launch():
    """The ParallelRegion to hold while a numba parallel kernel runs (with a lock where the
    threading layer is not thread-safe)."""
    import numba
    try:
        layer = numba.threading_layer()
    except ValueError:              # no parallel kernel has run yet: the layer is unknown
        layer = None
    return ParallelRegion(None if layer in _SAFE_LAYERS else _LOCK)


#: the fewest states a thread of a default call (threads=None) gets: below, waking a second
#: thread costs about as much as the states it would take
MIN_STATES_PER_THREAD = 32


def idle_cores():
    """Cores of this process's affinity that no other thread is running on right now (Linux:
    /proc/loadavg's count of runnable threads, less the calling one; this process's own running
    threads counted idle while they may be OpenMP workers spinning after a region of ours: the
    module doc), or None where unknown."""
    counts = runnable()
    if counts is None:
        return None
    running, cores = counts
    idle = max(0, cores - (running - 1))
    if idle < cores:
        with _REGIONS:
            spinning = _in_flight == 0 and time.monotonic() - _last_end < WORKERS_SPIN_SECONDS
        if spinning:
            idle = min(cores, idle + own_running_threads())
    return idle


def runnable():
    """(threads runnable now, system-wide: /proc/loadavg; cores of this process's affinity), or
    None where unknown."""
    try:
        with open("/proc/loadavg") as fh:
            running = int(fh.read().split()[3].split("/")[0])
        return running, len(os.sched_getaffinity(0))
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def own_running_threads():
    """This process's threads other than the calling one that are running (Linux: state R in
    /proc/self/task/*/stat), 0 where unknown."""
    me, count = threading.get_native_id(), 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 0
    for tid in tasks:
        if tid == str(me):
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:                     # the thread ended meanwhile
            continue
        count += stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3] == b"R"
    return count


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
