"""Reference interpreter of an LU program, vectorised over the batch axis with NumPy.

A program (built offline by sparsedyn.planner.symbolic) is a flat list of scalar operations on a
per-state work vector w: the stored entries of D (slot e = CSC entry e), fill-in slots, pivot
reciprocals, the right-hand side / solution, and a pool of known constants:

    RECIP  w[t] = 1 / w[a]          after checking |w[a]| > tol * scale of permuted row b
    MUL    w[t] = w[a] * w[b]
    FMS    w[t] = w[t] - w[a] * w[b]
    FMA    w[t] = w[t] + w[a] * w[b]
    SUB    w[t] = w[t] - w[a]
    ADD    w[t] = w[t] + w[a]
    NEG    w[t] = -w[t]
    MOV    w[t] = w[a]

Running it performs the static-pivot LU of P D Q and both triangular solves. Programs are stored
sorted by (dependency level, opcode) (`level_order`): ops of one level touch distinct slots and do
not read each other's results, so here each (level, opcode) group is one fancy-indexed NumPy
expression over a (B,) row per slot, while the numba interpreter runs the same ops one by one in
the same order; per slot the operations happen in the same order, so results agree bit for bit.
"""
from __future__ import annotations

import numpy as np

RECIP, MUL, FMS, FMA, SUB, ADD, NEG, MOV = range(8)
OP_NAMES = ("RECIP", "MUL", "FMS", "FMA", "SUB", "ADD", "NEG", "MOV")
#: per-op (mul, add, div) charged to the operation counter; NEG (a sign flip) and MOV (a copy)
#: are not floating-point arithmetic and are free
OP_COST = np.array([(0, 0, 1), (1, 0, 0), (1, 1, 0), (1, 1, 0), (0, 1, 0), (0, 1, 0), (0, 0, 0),
                    (0, 0, 0)], dtype=np.int64)

#: slots each opcode reads: the target itself (in-place ops), operand a, operand b
_READS_T = np.array([False, False, True, True, True, True, True, False])
_READS_A = np.array([True, True, True, True, True, True, False, True])
_READS_B = np.array([False, True, True, True, False, False, False, False])

WORK_BYTES = 32 * 2 ** 20  # chunk the batch so the (n_slots, chunk) work array stays this size


def dependency_levels(code, t, a, b, n_slots):
    """Earliest level of each op such that every slot sees its reads and writes in program order."""
    last_write = np.full(n_slots, -1, dtype=np.int64)
    last_read = np.full(n_slots, -1, dtype=np.int64)
    level = np.empty(code.size, dtype=np.int64)
    for o in range(code.size):
        c = code[o]
        reads = [t[o]] if _READS_T[c] else []
        if _READS_A[c]:
            reads.append(a[o])
        if _READS_B[c]:
            reads.append(b[o])
        lv = max(last_write[t[o]], last_read[t[o]])
        for r in reads:
            lv = max(lv, last_write[r])
        lv += 1
        level[o] = lv
        last_write[t[o]] = lv
        for r in reads:
            last_read[r] = max(last_read[r], lv)
    return level


def level_order(code, t, a, b, n_slots):
    """A permutation of the ops sorting them by (dependency level, opcode), stable: executing
    them in this order gives the same result bit for bit, with long runs of one opcode."""
    return np.lexsort((code, dependency_levels(code, t, a, b, n_slots)))


def runs(program):
    """Boundaries of the maximal runs of one opcode: (code, start, stop) rows, int64."""
    code = program.op_code
    if code.size == 0:
        return np.zeros((0, 3), dtype=np.int64)
    starts = np.concatenate([[0], np.flatnonzero(np.diff(code)) + 1])
    stops = np.concatenate([starts[1:], [code.size]])
    return np.stack([code[starts].astype(np.int64), starts, stops], axis=1)


def schedule(program):
    """Groups of mutually independent ops of one opcode, in execution order: (opcode, t, a, b)."""
    p = program
    level = dependency_levels(p.op_code, p.op_t, p.op_a, p.op_b, p.n_slots)
    key = level * 16 + p.op_code
    if key.size and (np.diff(key) < 0).any():
        raise ValueError("program: ops are not in (level, opcode) order")
    bounds = np.flatnonzero(np.diff(key)) + 1
    return [(int(p.op_code[idx[0]]), p.op_t[idx], p.op_a[idx], p.op_b[idx])
            for idx in np.split(np.arange(key.size), bounds) if idx.size]


def row_scales(program, values):
    """(B, n) max |entry| of each permuted row of D: the yardstick of the pivot check."""
    mags = np.abs(values[:, program.scale_entries])
    scale = np.broadcast_to(program.scale_const, (values.shape[0], program.n)).copy()
    nonempty = np.flatnonzero(np.diff(program.scale_ptr))
    if nonempty.size:
        starts = program.scale_ptr[nonempty]
        scale[:, nonempty] = np.maximum(scale[:, nonempty], np.maximum.reduceat(mags, starts, axis=1))
    return scale


def solve_numpy(program, groups, values, rhs):
    """Run the program for a batch: values (B, nnz), rhs (B, n) -> (x (B, n), broken (B,) bool)."""
    B = values.shape[0]
    x = np.empty((B, program.n))
    broken = np.zeros(B, dtype=bool)
    chunk = max(1, min(B, WORK_BYTES // (8 * max(program.n_slots, 1))))
    for lo in range(0, B, chunk):
        hi = min(B, lo + chunk)
        x[lo:hi], broken[lo:hi] = _solve_chunk(program, groups, values[lo:hi], rhs[lo:hi])
    return x, broken


def _solve_chunk(program, groups, values, rhs):
    B, n = values.shape[0], program.n
    w = np.empty((program.n_slots, B))
    w[program.init_slots] = program.init_values[:, None]
    w[program.load_entries] = values[:, program.load_entries].T
    w[program.rhs0:program.rhs0 + n] = rhs[:, program.row_perm].T
    scale = row_scales(program, values).T if program.has_checks else None
    broken = np.zeros(B, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for code, t, a, b in groups:
            if code == FMS:
                w[t] = w[t] - w[a] * w[b]
            elif code == FMA:
                w[t] = w[t] + w[a] * w[b]
            elif code == SUB:
                w[t] = w[t] - w[a]
            elif code == ADD:
                w[t] = w[t] + w[a]
            elif code == MUL:
                w[t] = w[a] * w[b]
            elif code == RECIP:
                pivots = w[a]
                bad = ~(np.abs(pivots) > program.tol * scale[b])
                broken |= bad.any(axis=0)
                w[t] = 1.0 / pivots
            elif code == NEG:
                w[t] = -w[t]
            elif code == MOV:
                w[t] = w[a]
        x = np.empty((B, n))
        x[:, program.col_perm] = w[program.rhs0:program.rhs0 + n].T
    broken |= ~np.isfinite(x).all(axis=1)
    return x, broken
