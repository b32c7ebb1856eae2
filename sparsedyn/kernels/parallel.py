"""One guard around every launch of a numba parallel kernel.

numba's "omp" and "tbb" threading layers accept parallel launches from several Python threads at
once; its fallback "workqueue" layer does not (it aborts the process). Where the layer is
workqueue, or not yet chosen (before the first launch), launches are serialised by one lock, so
plans stay safe to call from several threads on any installation.
"""
from __future__ import annotations

import contextlib
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
