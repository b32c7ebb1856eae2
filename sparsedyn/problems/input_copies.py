"""A plan's private copies of its inputs, checked in the same pass.

plan.solve computes the joint-space output now and the other variables on first access, from
the inputs of the call: the caller may have reused its arrays in the meantime, so the plan keeps
copies of them (in memory of its own, reused once no result refers to it). A compiled kernel
that can writes them as it reads its inputs and flags the states that are not finite (the
backends' copies_inputs: plan._kernel_copies, then raise_for_inputs); otherwise state_copies
copies them before the solve and checks them for NaN and inf in that pass (kernels/
input_copies.py: one read of the memory instead of a copy and a sum), split over the call's
threads.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

from .. import jit
from ..batch import _check_quaternions, as_batch, check_configuration, state
from ..kernels.input_copies import copy_checked
from ..threads import run_ranges

#: fewest doubles a thread copies: below, handing a range to another thread (tens of
#: microseconds) costs about what copying it does
COPY_MIN_DOUBLES_PER_THREAD = 1 << 16


def _numpy_rows(src, dst, lo, hi):
    """copy_checked in NumPy: a copy, then a sum over it (finite only if every entry is; a
    finite sum that overflowed sends the caller to its checks, which then pass)."""
    dst[lo:hi] = src[lo:hi]
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(np.sum(dst[lo:hi])))


def state_copies(model, q, blocks, threads=1, **vectors):
    """batch.state(), with q and the vectors returned as private copies (views of one block of
    `blocks`, a CopyBlocks) checked for NaN, inf and unit quaternions; a failed check raises what
    state() raises. threads: the most threads that copy ranges of states (an int, or a function
    of B giving it), COPY_MIN_DOUBLES_PER_THREAD each at least."""
    return copy_state(model, *state(model, q, checked=False, **vectors), blocks, threads)


def copy_state(model, q, out, B, single, blocks, threads=1):
    """state_copies on what batch.state(..., checked=False) returned."""
    keys = [k for k, v in out.items() if v is not None]
    arrays = [q] + [out[k] for k in keys]                  # float64 (as_batch), maybe views
    copies = copy_views(blocks, arrays)
    # the compiled pass where it runs without a JIT compile (its compile starts in the
    # background with the fused kernel's) and the source is of the one array type it was
    # compiled for (another would compile now)
    compiled = jit.ready("the fused ID/FD kernel", (copy_checked,))
    rows = [copy_checked if compiled and a.flags.c_contiguous and a.flags.writeable
            and a.flags.aligned else _numpy_rows for a in arrays]

    def copy_range(lo, hi, _k):
        return all([copy(a, view, lo, hi) for copy, a, view in zip(rows, arrays, copies)])

    threads = threads(B) if callable(threads) else threads
    size = sum(a.size for a in arrays)
    parts = max(1, min(int(threads), B, size // COPY_MIN_DOUBLES_PER_THREAD))
    if parts == 1:                  # one range (one state, a small batch): no split to plan
        finite = copy_range(0, B, 0) if B else True
    else:
        finite = all(run_ranges(np.linspace(0, B, parts + 1).astype(int), copy_range))
    raise_for_inputs(model, copies[0], dict(zip(keys, copies[1:])), finite=finite)
    out.update(zip(keys, copies[1:]))
    return copies[0], out, B, single


def copy_views(blocks, arrays):
    """Views of one block of `blocks` (a CopyBlocks) shaped as `arrays`, one after the other:
    where their copies go."""
    block = blocks.get(sum(a.size for a in arrays))
    views, start = [], 0
    for a in arrays:
        views.append(block[start:start + a.size].reshape(a.shape))
        start += a.size
    return views


def raise_for_inputs(model, q, vectors, finite=False, quaternions=True):
    """state()'s checks on copies of its inputs, in state()'s order, when the copying pass found
    a non-finite value (finite False): the first non-finite argument, or a quaternion of q
    before a later argument, is named; then q's quaternions (quaternions True). vectors: {name:
    (B, nv) copy}."""
    if not finite:
        check_configuration(model, q)
        for key, arr in vectors.items():
            as_batch(arr, model.nv, key)
    if quaternions:
        _check_quaternions(model, q, "q")


class CopyBlocks:
    """Blocks of memory for state_copies, each reused once no copy made in it is referenced: a
    fresh block per call would be page-faulted in every time (the allocator hands blocks of
    megabytes back to the system when they are freed; experiments/kernel_design.md, "Input
    copies of plan.solve"). Holds at most `keep` unreferenced blocks; thread-safe."""

    def __init__(self, keep=4):
        self.keep = keep
        self._blocks = []
        self._lock = threading.Lock()

    def get(self, size):
        """A float64 block of `size` that nothing else references."""
        with self._lock:
            for k in range(len(self._blocks)):
                block = self._blocks[k]
                # references: the list, `block` and getrefcount's argument; a copy (a view)
                # made in it adds one
                if sys.getrefcount(block) == 3:
                    if block.size == size:
                        return block
                    del self._blocks[k]              # unreferenced, of another size
                    break
            block = np.empty(size)
            if len(self._blocks) < self.keep:
                self._blocks.append(block)
            return block
