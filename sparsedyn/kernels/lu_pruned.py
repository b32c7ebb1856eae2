"""Many sparse right-hand sides per state through one LU program, each substitution pruned to
what its right-hand side and the wanted rows need (Gilbert and Peierls' symbolic reach, planned
once): the derivatives of the dynamics solve 3 nv right-hand sides that are mostly zero (a
direction of q or v moves only the rows of its joint's subtree, a measurement direction one
row) and need only the nv rows of the output.

Planned per right-hand-side column (pruned_program), from its structural nonzero rows and the
wanted rows, over the substitution ops of lu_multi_rhs.multi_rhs_program in program order:
  - reach: a row is structurally nonzero once it is loaded nonzero or written from a nonzero
    row or a constant; an op that only adds a structural zero (t += s * 0 * f) is dropped;
  - liveness, backwards from the wanted rows: an op whose target is not read later by a kept
    op, nor wanted, is dropped (an overwriting op ends the target's liveness before it).
Columns with equal structure share one op list (a group). Kept ops run in program order with
the program's rounding, so each wanted entry equals lu_multi_rhs's up to the sign of a zero.

Online, states on the lanes: per state the factorization part runs once (lu_numba._run_serial,
its pivot checks), the substitution's scalar slots are gathered into W (slot, lane); then per
group each kept op runs over (the group's columns x LANES states).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .lu_multi_rhs import (K_ADDS, K_ADDV, K_AXPY, K_MOVS, K_MOVV, K_MULS, K_MULV, K_NEG,
                           K_XTY, MultiRhsProgram)
from .lu_numba import PreparedProgram, _run_serial

#: states per lane group: R (n, columns x LANES) and W (slots, LANES) stay in the L2 cache
LANES = 16
_SCALAR_B = (K_AXPY, K_MULV)        # b is a work slot
_SCALAR_AB = (K_ADDS, K_MOVS)       # a (and b if >= 0) are work slots
_TWO_ROWS = (K_XTY, K_MULS)         # a and b are rows
_OVERWRITE = (K_MOVV, K_MOVS, K_MULV, K_MULS)


class PrunedProgram(NamedTuple):
    P: PreparedProgram        # the factorization part and the state's loading
    slots: np.ndarray         # work slots the kept ops read as scalars (W's rows)
    group_ptr: np.ndarray     # CSR over groups of their columns
    group_cols: np.ndarray    # right-hand-side columns
    op_ptr: np.ndarray        # CSR over groups of their kept ops
    kind: np.ndarray          # K_* kinds of the kept ops; t, a, b rows or W rows as in
    t: np.ndarray             # MultiRhsProgram, scalar slots renumbered to W's rows
    a: np.ndarray
    b: np.ndarray
    sign: np.ndarray
    load_ptr: np.ndarray      # CSR over groups of the rows loaded from the right-hand side
    load_rows: np.ndarray     # (permuted rows: row r holds rhs row P.row_perm[r])
    load_nz: np.ndarray       # per loaded row: structurally nonzero (else set to 0)
    out_rows: np.ndarray      # permuted rows of the wanted solution entries, in wanted order
    max_cols: int


def _kept_ops(M, nz, out_rows):
    """(ops, rows touched) for one column: nz (n,) bool structural nonzeros (permuted rows)."""
    kind, t, a, b = M.kind, M.t, M.a, M.b
    nz = nz.copy()
    effective = np.zeros(kind.size, dtype=bool)
    for o in range(kind.size):                # forward: the symbolic reach
        k, ti, ai, bi = kind[o], t[o], a[o], b[o]
        if k in (K_AXPY, K_ADDV):
            effective[o] = nz[ai]
            nz[ti] |= nz[ai]
        elif k == K_XTY:
            effective[o] = nz[ai] and nz[bi]
            nz[ti] |= effective[o]
        elif k == K_NEG:
            effective[o] = nz[ti]
        elif k in (K_MOVV, K_MULV):
            effective[o] = nz[ai] or nz[ti]
            nz[ti] = nz[ai]
        elif k == K_MULS:
            effective[o] = nz[ai] and nz[bi] or nz[ti]
            nz[ti] = nz[ai] and nz[bi]
        else:                                 # K_ADDS, K_MOVS: a constant
            effective[o] = nz[ti] = True
    live = np.zeros(nz.size, dtype=bool)
    live[out_rows] = True
    keep = []
    for o in range(kind.size - 1, -1, -1):    # backward: liveness from the wanted rows
        k, ti = kind[o], t[o]
        if not (effective[o] and live[ti]):
            continue
        keep.append(o)
        if k in _OVERWRITE:
            live[ti] = False
        if k not in _SCALAR_AB and k != K_NEG:
            live[a[o]] = True
        if k in _TWO_ROWS:
            live[b[o]] = True
    keep = np.array(keep[::-1], dtype=np.int64)
    rows = [t[keep], out_rows]
    rows += [a[keep[~np.isin(kind[keep], _SCALAR_AB + (K_NEG,))]],
             b[keep[np.isin(kind[keep], _TWO_ROWS)]]]
    return keep, np.unique(np.concatenate(rows))


def pruned_program(M: MultiRhsProgram, pattern, out_rows):
    """The PrunedProgram of M for right-hand sides with structural nonzeros pattern (n, k) bool
    (rows in the right-hand side's own order) whose solution is wanted at x[out_rows] only."""
    P = M.P
    n, k = pattern.shape
    nz = np.asarray(pattern, dtype=bool)[P.row_perm]
    out_perm = np.argsort(P.col_perm)[np.asarray(out_rows, dtype=np.int64)]
    groups = {}
    for j in range(k):
        groups.setdefault(nz[:, j].tobytes(), []).append(j)
    lists, loads, cols, load_nz = [], [], [], []
    for members in groups.values():
        keep, rows = _kept_ops(M, nz[:, members[0]], out_perm)
        lists.append(keep), loads.append(rows), cols.append(members)
        load_nz.append(nz[rows, members[0]])
    keep = np.concatenate(lists + [np.zeros(0, dtype=np.int64)])
    kind, b, a = M.kind[keep], M.b[keep].copy(), M.a[keep].copy()
    scalar_b, scalar_a = np.isin(kind, _SCALAR_B + _SCALAR_AB) & (b >= 0), np.isin(kind, _SCALAR_AB)
    slots = np.unique(np.concatenate([b[scalar_b], a[scalar_a]]))
    b[scalar_b], a[scalar_a] = np.searchsorted(slots, b[scalar_b]), np.searchsorted(slots, a[scalar_a])
    ptr = (lambda parts: np.cumsum([0] + [len(p) for p in parts]).astype(np.int64))
    return PrunedProgram(P, slots.astype(np.int64), ptr(cols), np.concatenate(cols).astype(np.int64),
                         ptr(lists), kind, M.t[keep], a, b, M.sign[keep], ptr(loads),
                         np.concatenate(loads).astype(np.int64), np.concatenate(load_nz),
                         out_perm,
                         max(len(c) for c in cols))


@njit(cache=True)
def _substitute_lanes(Q, lo, hi, W, R, m):
    """The kept ops [lo, hi) on R[:, :m LANES] (column c, lane l at c LANES + l), program order
    and rounding as lu_multi_rhs._substitute; a scalar operand is W[slot, l]."""
    for o in range(lo, hi):
        kind, ti, ai, bi, sign = Q.kind[o], Q.t[o], Q.a[o], Q.b[o], Q.sign[o]
        if kind == K_AXPY:                   # t += sign * row ai * scalar
            for c in range(0, m * LANES, LANES):
                for l in range(LANES):
                    R[ti, c + l] = R[ti, c + l] + sign * (R[ai, c + l] * W[bi, l])
        elif kind == K_XTY:
            for j in range(m * LANES):
                R[ti, j] = R[ti, j] + sign * (R[ai, j] * R[bi, j])
        elif kind == K_ADDV:
            for j in range(m * LANES):
                R[ti, j] = R[ti, j] + sign * R[ai, j]
        elif kind == K_NEG:
            for j in range(m * LANES):
                R[ti, j] = -R[ti, j]
        elif kind == K_MOVV:
            for j in range(m * LANES):
                R[ti, j] = R[ai, j]
        elif kind == K_MULV:
            for c in range(0, m * LANES, LANES):
                for l in range(LANES):
                    R[ti, c + l] = R[ai, c + l] * W[bi, l]
        elif kind == K_MULS:
            for j in range(m * LANES):
                R[ti, j] = R[ai, j] * R[bi, j]
        else:                                # K_ADDS, K_MOVS: a scalar per lane
            for c in range(0, m * LANES, LANES):
                for l in range(LANES):
                    f = W[ai, l] if bi < 0 else W[ai, l] * W[bi, l]
                    R[ti, c + l] = (R[ti, c + l] + sign * f) if kind == K_ADDS else f


@njit(cache=True, error_model="numpy")
def solve_pruned(Q, values, rhs, out, broken):
    """out[s, i, j] = x[out_rows[i]] of D(values[s]) x = rhs[:, j, s] for rhs (n, k, B), states
    last (the lanes), zero outside the planned pattern; out (B, n_out, k); broken[s]: a failed
    pivot check or a non-finite wanted entry (out[s] NaN there)."""
    P = Q.P
    B = values.shape[0]
    w = np.zeros(P.n_slots)
    W = np.zeros((Q.slots.size, LANES))
    R = np.zeros((rhs.shape[0], Q.max_cols * LANES))
    ok = np.ones(LANES, dtype=np.bool_)
    for s0 in range(0, B, LANES):
        nl = min(LANES, B - s0)
        for l in range(nl):
            for i in range(P.init_slots.shape[0]):
                w[P.init_slots[i]] = P.init_values[i]
            for i in range(P.load_entries.shape[0]):
                w[P.load_entries[i]] = values[s0 + l, P.load_entries[i]]
            ok[l] = _run_serial(w, P.runs_f, P.t, P.a, P.b, values, s0 + l, P.scale_ptr,
                                P.scale_entries, P.scale_const, P.tol)
            for i in range(Q.slots.size):
                W[i, l] = w[Q.slots[i]]
        for g in range(Q.group_ptr.size - 1):
            c0, m = Q.group_ptr[g], Q.group_ptr[g + 1] - Q.group_ptr[g]
            for i in range(Q.load_ptr[g], Q.load_ptr[g + 1]):
                r = Q.load_rows[i]
                if Q.load_nz[i]:                # lanes past nl keep stale values, never read
                    src = P.row_perm[r]
                    for c in range(m):
                        col = Q.group_cols[c0 + c]
                        for l in range(nl):
                            R[r, c * LANES + l] = rhs[src, col, s0 + l]
                else:
                    for j in range(m * LANES):
                        R[r, j] = 0.0
            _substitute_lanes(Q, Q.op_ptr[g], Q.op_ptr[g + 1], W, R, m)
            for l in range(nl):
                for i in range(Q.out_rows.size):
                    r = Q.out_rows[i]
                    for c in range(m):
                        v = R[r, c * LANES + l]
                        out[s0 + l, i, Q.group_cols[c0 + c]] = v
                        if not np.isfinite(v):
                            ok[l] = False
        for l in range(nl):
            broken[s0 + l] = not ok[l]
            if not ok[l]:
                out[s0 + l] = np.nan
