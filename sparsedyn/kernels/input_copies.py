"""A batch's rows copied and checked for NaN and inf in one pass (problems/input_copies.py): a
NumPy copy and then a sum over the copy read the memory twice."""
from __future__ import annotations

from numba import njit


@njit(nogil=True, cache=True)
def copy_checked(src, dst, lo, hi):
    """dst[lo:hi] = src[lo:hi] (C-contiguous float64 (B, n) arrays); True if every copied entry
    is finite. Releases the GIL (threads copy their ranges at once)."""
    finite = True
    for i in range(lo, hi):
        for j in range(src.shape[1]):
            x = src[i, j]
            dst[i, j] = x
            finite &= (x - x) == 0.0            # NaN exactly where x is inf or NaN
    return finite
