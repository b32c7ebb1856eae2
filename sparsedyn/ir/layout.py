"""Sweep layout of an LU program for the fused single-right-hand-side kernels: the same operations
on the same values, in an order that crosses the matrix once per elimination sweep, on slots
renumbered in the order that sweep first touches them.

Why: a stored program is in dependency-level order (planner/symbolic.py), which gives long runs of
one opcode but interleaves independent operations of distant bodies: on a 1000-link chain every
early level touches the whole (n_slots, lanes) work array, which no longer fits in cache, and the
online time per link grows with N (experiments/bench_dynamics.py). Here the operations are sorted
by the elimination step that emitted them (LUProgram.op_stage: pivot k's factorization, then the
forward substitution of its column, then the back substitution from the last row up), and by
dependency level and opcode within a step (levels counted from the step's start: the global
levels of a long chain's program split a step's ops of one opcode into several runs, 70 runs
per link at 1000 links against 50 this way); with one right-hand side known before the
factorization (the fused kernels assemble it with D), the forward substitution rides along with
the factorization. Slots are then numbered by first touch, so each sweep walks the work array
almost sequentially and the cache holds what the next steps need.

Slots that always hold the same value and that no operation writes (the fused kernels' copies of
one transform component, `same`) are given one number, so the work array holds the value once.

Every slot sees its writes in the same order relative to all of its other accesses as in the
stored program (steps only depend on earlier steps; within a step the step's dependency levels
are respected), so results are bit-identical to the stored order.

`live_ops` drops the operations whose results reach neither the requested outputs nor a pivot
check (a solve for qdd alone does not need the joint wrenches' back substitution).

Preconditions: program.op_stage recorded (plans made by this version); otherwise only the slot
renumbering applies (the stored order is kept).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .instructions import READS_A, READS_B, READS_T, RECIP
from .lu_program import dependency_levels


@dataclass(frozen=True)
class SweepLayout:
    """op_code, op_t, op_a, op_b: the reordered program on renumbered slots (op_b of a RECIP stays
    its permuted row); order[j]: the stored op at position j; slot_of[s]: new number of slot s."""

    op_code: np.ndarray
    op_t: np.ndarray
    op_a: np.ndarray
    op_b: np.ndarray
    order: np.ndarray
    slot_of: np.ndarray

    def slots(self, stored):
        """New numbers of stored slot indices (any shape)."""
        return self.slot_of[np.asarray(stored, dtype=np.int64)]


def sweep_layout(program, same=None):
    """The SweepLayout of an LUProgram (see the module docstring). same: (n_slots,) stored slot ->
    a stored slot that always holds the same value (itself where none; the fused kernels' D
    entries copied from one component of a body's transform): such a slot gets the number of
    the other, so the work array holds the value once. No operation may write a slot that
    `same` maps elsewhere, or the one it maps to."""
    p = program
    code = p.op_code
    if same is not None:
        moved = np.flatnonzero(same != np.arange(p.n_slots))
        assert not np.isin(np.concatenate((moved, same[moved])), p.op_t).any(), \
            "a shared slot is written by the program"
        reads_a, reads_b = READS_A[code], READS_B[code]
        p = replace(p, op_a=np.where(reads_a, same[p.op_a], p.op_a),
                    op_b=np.where(reads_b, same[p.op_b], p.op_b))
    if p.op_stage.size == code.size and code.size:
        by_stage = np.argsort(p.op_stage, kind="stable")
        stage = p.op_stage[by_stage]
        level = dependency_levels(code[by_stage], p.op_t[by_stage], p.op_a[by_stage],
                                  p.op_b[by_stage], p.n_slots, stage)
        order = by_stage[np.lexsort((code[by_stage], level, stage))]
    else:
        order = np.arange(code.size)
    code, t, a, b = code[order], p.op_t[order], p.op_a[order], p.op_b[order]
    reads_a, reads_b = READS_A[code], READS_B[code]
    # first touch of each slot along the new order: operands before the target of each op
    touched = np.stack([np.where(reads_a, a, -1), np.where(reads_b, b, -1), t], axis=1).ravel()
    touched = touched[touched >= 0]
    slots, first = np.unique(touched, return_index=True)
    ranked = slots[np.argsort(first, kind="stable")]
    rest = np.setdiff1d(np.arange(p.n_slots), ranked, assume_unique=True)
    if same is not None:
        rest = rest[same[rest] == rest]            # the moved slots take their partner's number
    slot_of = np.empty(p.n_slots, dtype=np.int64)
    slot_of[np.concatenate((ranked, rest))] = np.arange(ranked.size + rest.size)
    if same is not None:
        slot_of[moved] = slot_of[same[moved]]
    return SweepLayout(op_code=code, op_t=slot_of[t], op_a=np.where(reads_a, slot_of[a], a),
                       op_b=np.where(reads_b, slot_of[b], b), order=order, slot_of=slot_of)


def reuse_slots(start, end, rank=None):
    """Physical slots for values live over [start[s], end[s]] (integer times; s unused where
    start < 0): a value takes a slot freed strictly before it starts, the most recently freed
    first (still in cache); values starting together are placed in `rank` order (default: s).
    Returns (physical slot per s (-1 where unused), number of slots)."""
    import heapq
    phys = np.full(start.size, -1, dtype=np.int64)
    live = np.flatnonzero(start >= 0)
    rank = np.arange(start.size) if rank is None else np.asarray(rank)
    active, free, count = [], [], 0
    for s in live[np.lexsort((rank[live], start[live]))]:
        while active and active[0][0] < start[s]:
            free.append(heapq.heappop(active)[1])
        if free:
            p = free.pop()
        else:
            p, count = count, count + 1
        phys[s] = p
        heapq.heappush(active, (int(end[s]), p))
    return phys, count


def live_ops(code, t, a, b, n_slots, read_after):
    """Mask of the operations (code, t, a, b in run order) that a run needs when only the slots
    `read_after` are read after it: every RECIP (its pivot check guards the whole solve) and,
    backwards, every operation writing a slot that a needed operation or the end reads later."""
    needed = np.zeros(n_slots, dtype=bool)
    needed[np.asarray(read_after, dtype=np.int64)] = True
    needed = needed.tolist()
    live = [False] * code.size
    reads_t, reads_a, reads_b = (r[code].tolist() for r in (READS_T, READS_A, READS_B))
    code_l, t_l, a_l, b_l = code.tolist(), t.tolist(), a.tolist(), b.tolist()
    for j in range(len(code_l) - 1, -1, -1):
        target = t_l[j]
        if code_l[j] == RECIP or needed[target]:
            live[j] = True
            needed[target] = reads_t[j]       # live before j only if j reads it too
            if reads_a[j]:
                needed[a_l[j]] = True
            if reads_b[j]:
                needed[b_l[j]] = True
    return np.array(live, dtype=bool)
