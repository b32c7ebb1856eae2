"""The instruction set of an LU program: a flat list of scalar operations on a per-state work
vector w (built offline by sparsedyn.planner.symbolic, run by every backend: sparsedyn.kernels
(NumPy, numba), sparsedyn.backends.c). Slots hold the stored entries of D (slot e = CSC entry e),
fill-in, pivot reciprocals, the right-hand side / solution and a pool of known constants:

    RECIP   w[t] = 1 / w[a]   after checking |w[a]| > tol * (scale of permuted row b + w[t]):
                              w[t] holds, until then, the magnitude accumulated for the pivot
    MUL     w[t] = w[a] * w[b]
    FMS     w[t] = w[t] - w[a] * w[b]
    FMA     w[t] = w[t] + w[a] * w[b]
    SUB     w[t] = w[t] - w[a]
    ADD     w[t] = w[t] + w[a]
    NEG     w[t] = -w[t]
    MOV     w[t] = w[a]
    ABSFMA  w[t] = w[t] + |w[a] * w[b]|     (pivot magnitudes: check ops, not flops)
    ABSADD  w[t] = w[t] + |w[a]|
    SET     w[t] = consts[a]                (scheduled programs only, never stored: a constant
                                             written just before the run that first touches it)

A product is rounded before the sum (no fused multiply-add), so every backend that runs the ops
of one slot in program order gives the same bits.
"""
from __future__ import annotations

import numpy as np

RECIP, MUL, FMS, FMA, SUB, ADD, NEG, MOV, ABSFMA, ABSADD = range(10)
OP_NAMES = ("RECIP", "MUL", "FMS", "FMA", "SUB", "ADD", "NEG", "MOV", "ABSFMA", "ABSADD")
#: per-op (mul, add, div) charged to the operation counter; NEG (a sign flip) and MOV (a copy)
#: are not floating-point arithmetic and are free; the pivot-magnitude ops are safeguards,
#: counted apart (CHECK_COST), so that flops stay the factorization's and the solves' own
OP_COST = np.array([(0, 0, 1), (1, 0, 0), (1, 1, 0), (1, 1, 0), (0, 1, 0), (0, 1, 0), (0, 0, 0),
                    (0, 0, 0), (0, 0, 0), (0, 0, 0)], dtype=np.int64)
CHECK_COST = np.array([0, 0, 0, 0, 0, 0, 0, 0, 2, 1], dtype=np.int64)

#: slots each opcode reads: the target itself (in-place ops), operand a, operand b
READS_T = np.array([True, False, True, True, True, True, True, False, True, True])
READS_A = np.array([True, True, True, True, True, True, False, True, True, True])
READS_B = np.array([False, True, True, True, False, False, False, False, True, False])

SET = 10
