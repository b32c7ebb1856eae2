"""Reference interpreter of an LU program, vectorised over the batch axis with NumPy.

A program (built offline by sparsedyn.planner.symbolic) is a flat list of scalar operations on a
per-state work vector w: the stored entries of D (slot e = CSC entry e), fill-in slots, pivot
reciprocals, the right-hand side / solution, and a pool of known constants:

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

Running it performs the static-pivot LU of P D Q and both triangular solves. A split program
(program.n_factor_ops >= 0) holds the factorization ops first and the substitution ops after;
each part is sorted by (dependency level, opcode) (`level_order`): ops of one level touch
distinct slots and do not read each other's results, so here each (level, opcode) group is one
fancy-indexed NumPy expression over a (B,) row per slot, while the numba interpreter runs the same
ops one by one in the same order; per slot the operations happen in the same order, so results
agree bit for bit. Several right-hand sides per state reuse one factorization: the substitution
part runs once per right-hand side.
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
_READS_T = np.array([True, False, True, True, True, True, True, False, True, True])
_READS_A = np.array([True, True, True, True, True, True, False, True, True, True])
_READS_B = np.array([False, True, True, True, False, False, False, False, True, False])

WORK_BYTES = 32 * 2 ** 20  # chunk the batch so the (n_slots, chunk) work array stays this size


def dependency_levels(code, t, a, b, n_slots, stage=None):
    """Earliest level of each op such that every slot sees its reads and writes in program order.
    With `stage` (non-decreasing per op), levels count within a stage: what earlier stages did
    to a slot is done before the stage starts."""
    last_write = np.full(n_slots, -1, dtype=np.int64)
    last_read = np.full(n_slots, -1, dtype=np.int64)
    touched_in = np.full(n_slots, -1, dtype=np.int64)
    stage = np.zeros(code.size, dtype=np.int64) if stage is None else stage
    level = np.empty(code.size, dtype=np.int64)
    for o in range(code.size):
        c, st = code[o], stage[o]
        reads = [t[o]] if _READS_T[c] else []
        if _READS_A[c]:
            reads.append(a[o])
        if _READS_B[c]:
            reads.append(b[o])
        for s in reads + [t[o]]:
            if touched_in[s] != st:
                touched_in[s], last_write[s], last_read[s] = st, -1, -1
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


def _parts(program):
    """(start, stop) op ranges of the factorization and the substitution part (an undivided
    program is all factorization)."""
    m = program.op_code.size
    k = program.n_factor_ops if program.n_factor_ops >= 0 else m
    return (0, k), (k, m)


def runs(program):
    """Boundaries of the maximal runs of one opcode that stay within one part of the program:
    (code, start, stop) rows, int64."""
    return opcode_runs(program.op_code, (program.n_factor_ops,))


def opcode_runs(code, cuts=()):
    """(code, start, stop) rows (int64) of the maximal runs of one opcode in `code`, also cut at
    the op indices `cuts`."""
    if code.size == 0:
        return np.zeros((0, 3), dtype=np.int64)
    cut = [k for k in cuts if 0 < k < code.size]
    starts = np.union1d(np.concatenate([[0], np.flatnonzero(np.diff(code)) + 1]),
                        np.asarray(cut, dtype=np.int64)).astype(np.int64)
    stops = np.concatenate([starts[1:], [code.size]])
    return np.stack([code[starts].astype(np.int64), starts, stops], axis=1)


def split_runs(program):
    """runs(program) divided into the factorization's and the substitution's runs."""
    r = runs(program)
    k = _parts(program)[0][1]
    return np.ascontiguousarray(r[r[:, 1] < k]), np.ascontiguousarray(r[r[:, 1] >= k])


def schedule(program):
    """Groups of mutually independent ops of one opcode, in execution order, for the
    factorization and the substitution part: ([(opcode, t, a, b)], [(opcode, t, a, b)])."""
    p = program
    groups = []
    for lo, hi in _parts(p):
        code, t, a, b = p.op_code[lo:hi], p.op_t[lo:hi], p.op_a[lo:hi], p.op_b[lo:hi]
        key = dependency_levels(code, t, a, b, p.n_slots) * 16 + code
        if key.size and (np.diff(key) < 0).any():
            raise ValueError("program: ops are not in (level, opcode) order")
        bounds = np.flatnonzero(np.diff(key)) + 1
        groups.append([(int(code[idx[0]]), t[idx], a[idx], b[idx])
                       for idx in np.split(np.arange(key.size), bounds) if idx.size])
    return tuple(groups)


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
    """Run the program for a batch: values (B, nnz), rhs (B, n) or (B, n, k) (k right-hand sides
    sharing one factorization; needs a split program when k > 1) -> (x shaped like rhs,
    broken (B,) bool)."""
    B = values.shape[0]
    x = np.empty(rhs.shape)
    broken = np.zeros(B, dtype=bool)
    chunk = max(1, min(B, WORK_BYTES // (8 * max(program.n_slots, 1))))
    r3, x3 = (rhs, x) if rhs.ndim == 3 else (rhs[:, :, None], x[:, :, None])
    if r3.shape[2] > 1 and not program.split:
        raise ValueError("rhs: several right-hand sides need a program split into factorization "
                         "and substitution (re-plan it)")
    for lo in range(0, B, chunk):
        hi = min(B, lo + chunk)
        broken[lo:hi] = _solve_chunk(program, groups, values[lo:hi], r3[lo:hi], x3[lo:hi])
    return x, broken


def _run_groups(w, groups, scale, tol, broken):
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
            bad = ~(np.abs(pivots) > tol * (scale[b] + w[t]))
            broken |= bad.any(axis=0)
            w[t] = 1.0 / pivots
        elif code == NEG:
            w[t] = -w[t]
        elif code == MOV:
            w[t] = w[a]
        elif code == ABSFMA:
            w[t] = w[t] + np.abs(w[a] * w[b])
        elif code == ABSADD:
            w[t] = w[t] + np.abs(w[a])


def _solve_chunk(program, groups, values, rhs, x):
    """Factorise once, then substitute each of the k right-hand sides rhs (B, n, k) into x."""
    B, n = values.shape[0], program.n
    factor_groups, solve_groups = groups
    w = np.empty((program.n_slots, B))
    w[program.init_slots] = program.init_values[:, None]
    w[program.load_entries] = values[:, program.load_entries].T
    rows = slice(program.rhs0, program.rhs0 + n)
    scale = row_scales(program, values).T if program.has_checks else None
    broken = np.zeros(B, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for j in range(rhs.shape[2]):
            w[rows] = rhs[:, program.row_perm, j].T
            if j == 0:
                _run_groups(w, factor_groups, scale, program.tol, broken)
            _run_groups(w, solve_groups, scale, program.tol, broken)
            x[:, program.col_perm, j] = w[rows].T
    broken |= ~np.isfinite(x).all(axis=(1, 2))
    return broken
