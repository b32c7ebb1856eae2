"""Work arrays of the lane kernels (fused solve, MAP), allocated by NumPy and kept between calls.

A lane kernel's work array (n_slots, lanes) per thread is the largest thing it touches (on a
1000-link chain ~5 MB for qdd). Kept between calls, it is neither allocated nor zeroed per call (the
kernels write every slot before reading it: tests/test_layout.py replays that). Aligned to a
transparent huge page (2 MiB), which NumPy requests for large arrays: every block of 8 lanes is
then one cache line, and the array is covered by huge pages where the system grants them.
"""
from __future__ import annotations

import threading

import numpy as np

#: the work array's alignment: one transparent huge page (2 MiB)
WORK_ALIGN = 2 ** 21


def work_buffer(size):
    """An uninitialised float64 vector of `size`, WORK_ALIGN-aligned."""
    buf = np.empty(size + WORK_ALIGN // 8)
    start = (-buf.ctypes.data % WORK_ALIGN) // 8
    return buf[start:start + size]


class WorkArrays:
    """(groups, n_slots, lanes) work arrays, one per lane-group range (numba thread), reusing
    the buffer of earlier calls. The buffer belongs to the calling Python thread: calls of one
    plan from several threads (a server, a data loader) never share work memory."""

    def __init__(self):
        self._local = threading.local()

    def get(self, groups, n_slots, lanes):
        size = groups * n_slots * lanes
        buf = getattr(self._local, "buffer", None)
        if buf is None or buf.size < size:
            buf = self._local.buffer = work_buffer(size)
        return buf[:size].reshape(groups, n_slots, lanes)
