"""The NumPy backend of an LU program (sparsedyn.ir.lu_program), vectorised over the batch axis.

Each (dependency level, opcode) group of the program is one fancy-indexed NumPy expression over a
(B,) row per slot; the numba interpreter (lu_numba) runs the same ops one by one in the same
order; per slot the operations happen in the same order, so results agree bit for bit. Several
right-hand sides per state reuse one factorization: the substitution part runs once per
right-hand side.
"""
from __future__ import annotations

import numpy as np

from ..ir.instructions import ABSADD, ABSFMA, ADD, FMA, FMS, MOV, MUL, NEG, RECIP, SUB
from ..ir.lu_program import dependency_levels, program_parts

WORK_BYTES = 32 * 2 ** 20  # chunk the batch so the (n_slots, chunk) work array stays this size


def schedule(program):
    """Groups of mutually independent ops of one opcode, in execution order, for the
    factorization and the substitution part: ([(opcode, t, a, b)], [(opcode, t, a, b)])."""
    p = program
    groups = []
    for lo, hi in program_parts(p):
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
