"""Dependency levels of a flat op list (ir/lu_program.dependency_levels), compiled by numba.

One pass over the ops with per-slot state (O(ops + slots) time and memory): a plan of a
10,000-link chain has tens of millions of ops, which a Python loop takes minutes over.

Level of op o (reads R_o: its target if it updates in place, its a and b operands as the opcode
says; writes its target t_o): one more than the latest level that wrote a slot it reads or
writes, or read its target. Ops of one level then touch distinct slots and do not read each
other's results, so running them in any order (as a vector) keeps every slot's history.
Within a stage (stage[o], non-decreasing) the levels restart: a slot first touched in a new
stage forgets its earlier writes and reads (the earlier stage is complete before it starts).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .. import jit
from .instructions import READS_A, READS_B, READS_T

#: op lists up to this size are levelled by the interpreter while numba compiles _levels
#: (sparsedyn/jit.py); longer ones wait for the compiler, a small part of their planning
INTERPRETED_OPS = 200_000


@njit(cache=True)
def _levels(code, t, a, b, stage, n_slots, reads_t, reads_a, reads_b):
    last_write = np.full(n_slots, -1, dtype=np.int64)
    last_read = np.full(n_slots, -1, dtype=np.int64)
    touched_in = np.full(n_slots, -1, dtype=np.int64)
    level = np.empty(code.size, dtype=np.int64)
    reads = np.empty(3, dtype=np.int64)
    for o in range(code.size):
        c, st, target = code[o], stage[o], t[o]
        n_reads = 0
        if reads_t[c]:
            reads[n_reads] = target
            n_reads += 1
        if reads_a[c]:
            reads[n_reads] = a[o]
            n_reads += 1
        if reads_b[c]:
            reads[n_reads] = b[o]
            n_reads += 1
        for k in range(n_reads + 1):          # the reads, then the target: reset on a new stage
            s = reads[k] if k < n_reads else target
            if touched_in[s] != st:
                touched_in[s] = st
                last_write[s] = -1
                last_read[s] = -1
        lv = max(last_write[target], last_read[target])   # write after write / after read
        for k in range(n_reads):
            lv = max(lv, last_write[reads[k]])              # read after write
        lv += 1
        level[o] = lv
        last_write[target] = lv
        for k in range(n_reads):
            r = reads[k]
            last_read[r] = max(last_read[r], lv)
    return level


def dependency_levels(code, t, a, b, n_slots, stage=None):
    """Level (int64) of each op; see the module docstring. stage: None (one stage)."""
    code = np.ascontiguousarray(code, dtype=np.int64)
    stage = (np.zeros(code.size, dtype=np.int64) if stage is None
             else np.ascontiguousarray(stage, dtype=np.int64))
    as_int = (lambda x: np.ascontiguousarray(x, dtype=np.int64))
    levels = _levels if code.size > INTERPRETED_OPS else jit.runnable_now(
        "the planner's kernels", _levels)
    return levels(code, as_int(t), as_int(a), as_int(b), stage, int(n_slots),
                  READS_T, READS_A, READS_B)
