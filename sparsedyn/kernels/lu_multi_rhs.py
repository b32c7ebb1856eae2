"""Many right-hand sides per state through one LU program (sparsedyn.ir), right-hand sides on
the lanes: the derivatives of the dynamics solve 2 nv of them with one factorization where the
plan does not allow pruning them (kernels/lu_pruned.py).

lu_numba runs a program on lanes of states, one right-hand side after the other; here, per
state, the factorization part runs once on the state's work vector (lu_numba._run_serial, with
its pivot checks), then every substitution op runs across a block of right-hand sides at once:
the substitution writes only right-hand-side slots, so each operand is either such a slot (a
vector over the block, R) or a factor / constant slot of the work vector (one number). The
inner loops run over contiguous right-hand sides. Per right-hand side the ops run in program
order with the program's rounding, so each solution is bit-identical to lu_numba's and
lu_numpy's.

multi_rhs_program(program) is None when the program does not have this shape (unsplit, a
check op or a target outside the right-hand-side slots in its substitution part): the caller
then uses Factorization.solve.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from ..ir.instructions import ADD, FMA, FMS, MOV, MUL, NEG, SUB
from ..ir.lu_program import program_parts
from .lu_numba import PreparedProgram, _run_serial, prepare

#: right-hand sides per block: the op stream is read once per block (its decoding is most of the
#: cost below ~32 lanes), the block's (n, BLOCK) vectors stay in the L2 cache
BLOCK = 64
_SUPPORTED = (MUL, FMS, FMA, SUB, ADD, NEG, MOV)
#: substitution op kinds (multi_rhs_program): the opcode and which operands are vectors (rows
#: of R) or scalars (slots of the state's work vector); FMS / SUB carry sign -1
K_AXPY, K_XTY, K_ADDV, K_ADDS, K_NEG, K_MOVV, K_MOVS, K_MULV, K_MULS = range(9)


class MultiRhsProgram(NamedTuple):
    P: PreparedProgram        # the factorization part (runs_f) and the state's loading
    kind: np.ndarray          # substitution ops in program order, as K_* kinds
    t: np.ndarray             # target: a right-hand-side row (slot - rhs0)
    a: np.ndarray             # the vector operand's row (or, for scalar kinds, a slot)
    b: np.ndarray             # the scalar's slot (or a second row / slot; -1: none)
    sign: np.ndarray          # +1.0 or -1.0 (FMS, SUB)


def multi_rhs_program(program):
    """The MultiRhsProgram of a split LU program, or None (see the module doc)."""
    p = program
    if not p.split:
        return None
    (_, _), (lo, hi) = program_parts(p)
    code, t, a, b = p.op_code[lo:hi], p.op_t[lo:hi], p.op_a[lo:hi], p.op_b[lo:hi]
    row = (lambda s: s - p.rhs0 if p.rhs0 <= s < p.rhs0 + p.n else -1)
    if not (np.isin(code, _SUPPORTED).all() and all(row(x) >= 0 for x in t)):
        return None
    ops = []
    for c, ti, ai, bi in zip(code.tolist(), t.tolist(), a.tolist(), b.tolist()):
        ra, rb, sign = row(ai), row(bi), (-1.0 if c in (FMS, SUB) else 1.0)
        if c in (FMS, FMA):
            if ra >= 0 and rb >= 0:
                ops.append((K_XTY, ra, rb, sign))
            elif ra >= 0 or rb >= 0:        # the vector first, the scalar's slot second
                ops.append((K_AXPY, ra, bi, sign) if ra >= 0 else (K_AXPY, rb, ai, sign))
            else:
                ops.append((K_ADDS, ai, bi, sign))
        elif c in (SUB, ADD):
            ops.append((K_ADDV, ra, -1, sign) if ra >= 0 else (K_ADDS, ai, -1, sign))
        elif c == NEG:
            ops.append((K_NEG, -1, -1, 1.0))
        elif c == MOV:
            ops.append((K_MOVV, ra, -1, 1.0) if ra >= 0 else (K_MOVS, ai, -1, 1.0))
        elif ra >= 0 and rb >= 0:           # MUL
            ops.append((K_MULS, ra, rb, 1.0))
        elif ra >= 0 or rb >= 0:
            ops.append((K_MULV, ra, bi, 1.0) if ra >= 0 else (K_MULV, rb, ai, 1.0))
        else:
            ops.append((K_MOVS, ai, bi, 1.0))
    kind, a2, b2, sign = (np.array(x) for x in zip(*ops)) if ops else (np.zeros(0),) * 4
    return MultiRhsProgram(prepare(p), kind.astype(np.int64), (t - p.rhs0).astype(np.int64),
                           a2.astype(np.int64), b2.astype(np.int64), sign.astype(float))



@njit(cache=True)
def _substitute(kinds, ts, as_, bs, signs, w, R, width):
    """The substitution ops on the right-hand sides R[:, :width] of one state, each as one
    loop over the block (sign, scalar and rows resolved before it, so it vectorises; plain
    2-d indexing: a row view per op would cost a reference count)."""
    for o in range(kinds.size):
        kind, ti, ai, bi, sign = kinds[o], ts[o], as_[o], bs[o], signs[o]
        if kind == K_AXPY:                   # t += sign * (scalar w[bi]) * row ai
            f = w[bi]
            for j in range(width):
                R[ti, j] = R[ti, j] + sign * (R[ai, j] * f)
        elif kind == K_XTY:                  # t += sign * row ai * row bi
            for j in range(width):
                R[ti, j] = R[ti, j] + sign * (R[ai, j] * R[bi, j])
        elif kind == K_ADDV:                 # t += sign * row ai
            for j in range(width):
                R[ti, j] = R[ti, j] + sign * R[ai, j]
        elif kind == K_ADDS:                 # t += sign * (scalar: w[ai], or w[ai] * w[bi])
            f = w[ai] if bi < 0 else w[ai] * w[bi]
            for j in range(width):
                R[ti, j] = R[ti, j] + sign * f
        elif kind == K_NEG:
            for j in range(width):
                R[ti, j] = -R[ti, j]
        elif kind == K_MOVV:
            for j in range(width):
                R[ti, j] = R[ai, j]
        elif kind == K_MOVS:                 # t = w[ai], or w[ai] * w[bi]
            f = w[ai] if bi < 0 else w[ai] * w[bi]
            for j in range(width):
                R[ti, j] = f
        elif kind == K_MULV:                 # t = row ai * scalar w[bi]
            f = w[bi]
            for j in range(width):
                R[ti, j] = R[ai, j] * f
        elif kind == K_MULS:                 # t = row ai * row bi
            for j in range(width):
                R[ti, j] = R[ai, j] * R[bi, j]


@njit(cache=True, inline="always")
def factor_state(P, values, s, w):
    """The factorization part of the PreparedProgram P on state s's work vector w (its
    constants, then D's entries values[s]); False at the first failed pivot check."""
    for i in range(P.init_slots.shape[0]):
        w[P.init_slots[i]] = P.init_values[i]
    for i in range(P.load_entries.shape[0]):
        w[P.load_entries[i]] = values[s, P.load_entries[i]]
    return _run_serial(w, P.runs_f, P.t, P.a, P.b, values, s, P.scale_ptr, P.scale_entries,
                       P.scale_const, P.tol)


@njit(cache=True, error_model="numpy", nogil=True)
def solve_multi_rhs(M, values, rhs, x, broken):
    """x[s] with D(values[s]) x[s] = rhs[s] for rhs (B, n, k); broken[s]: a failed pivot check
    or a non-finite solution (x NaN there)."""
    P = M.P
    B, n, k = rhs.shape
    w = np.zeros(P.n_slots)
    R = np.empty((n, min(k, BLOCK)))
    for s in range(B):
        ok = factor_state(P, values, s, w)
        for j0 in range(0, k, BLOCK):
            if not ok:
                break
            width = min(BLOCK, k - j0)
            for r in range(n):
                src = P.row_perm[r]
                for j in range(width):
                    R[r, j] = rhs[s, src, j0 + j]
            _substitute(M.kind, M.t, M.a, M.b, M.sign, w, R, width)
            for r in range(n):
                dst = P.col_perm[r]
                for j in range(width):
                    v = R[r, j]
                    x[s, dst, j0 + j] = v
                    if not np.isfinite(v):
                        ok = False
        if not ok:
            x[s] = np.nan
        broken[s] = not ok
