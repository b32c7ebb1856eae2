"""The plan of kernels/lu_pruned.py: which substitution ops each sparse right-hand side needs
(Gilbert and Peierls' symbolic reach plus liveness from the wanted rows), once per plan.

Per right-hand-side column, over the substitution ops of lu_multi_rhs.multi_rhs_program in
program order:
  - reach: a row is structurally nonzero once it is loaded nonzero or written from a nonzero
    row or a constant; an op that only adds a structural zero (t += s * 0 * f) is dropped;
  - liveness, backwards from the wanted rows: an op whose target is not read later by a kept
    op, nor wanted, is dropped (an overwriting op ends the target's liveness before it).
Columns with equal structure share one op list (a group); or the caller's blocks of columns
do, each running the ops any of its columns needs (the union of their structures and wanted
rows: an op another column needs adds an exact zero to this one, or writes a row it leaves
unread). The rows a group touches are loaded from the right-hand side where structurally
nonzero, else set to 0.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .lu_multi_rhs import (K_ADDS, K_ADDV, K_AXPY, K_MOVS, K_MOVV, K_MULS, K_MULV, K_NEG,
                           K_XTY, MultiRhsProgram)
from .lu_numba import PreparedProgram

_SCALAR_B = (K_AXPY, K_MULV)        # b is a work slot
_SCALAR_AB = (K_ADDS, K_MOVS)       # a (and b if >= 0) are work slots
_TWO_ROWS = (K_XTY, K_MULS)         # a and b are rows


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
    out_ptr: np.ndarray       # CSR over groups of their wanted entries:
    out_index: np.ndarray     # the entry's index in out_rows (pruned_program's argument)
    out_rows: np.ndarray      # and its permuted row
    max_cols: int


@njit(cache=True)
def kept_mask(kind, t, a, b, nz, out_rows):
    """keep (ops,) bool for one column: nz (n,) bool structural nonzeros (permuted rows)."""
    nz = nz.copy()
    effective = np.zeros(kind.size, dtype=np.bool_)
    for o in range(kind.size):                # forward: the symbolic reach
        k, ti, ai, bi = kind[o], t[o], a[o], b[o]
        if k == K_AXPY or k == K_ADDV:
            effective[o] = nz[ai]
            nz[ti] |= nz[ai]
        elif k == K_XTY:
            effective[o] = nz[ai] and nz[bi]
            nz[ti] |= effective[o]
        elif k == K_NEG:
            effective[o] = nz[ti]
        elif k == K_MOVV or k == K_MULV:
            effective[o] = nz[ai] or nz[ti]
            nz[ti] = nz[ai]
        elif k == K_MULS:
            effective[o] = (nz[ai] and nz[bi]) or nz[ti]
            nz[ti] = nz[ai] and nz[bi]
        else:                                 # K_ADDS, K_MOVS: a constant
            effective[o] = True
            nz[ti] = True
    live = np.zeros(nz.size, dtype=np.bool_)
    live[out_rows] = True
    keep = np.zeros(kind.size, dtype=np.bool_)
    for o in range(kind.size - 1, -1, -1):    # backward: liveness from the wanted rows
        k, ti = kind[o], t[o]
        if not (effective[o] and live[ti]):
            continue
        keep[o] = True
        if k == K_MOVV or k == K_MOVS or k == K_MULV or k == K_MULS:     # overwrites
            live[ti] = False
        if not (k == K_ADDS or k == K_MOVS or k == K_NEG):              # a is a row
            live[a[o]] = True
        if k == K_XTY or k == K_MULS:                                   # so is b
            live[b[o]] = True
    return keep


def _kept_ops(M, nz, out_rows):
    """(ops, rows touched) for one column: nz (n,) bool structural nonzeros (permuted rows)."""
    kind, t, a, b = M.kind, M.t, M.a, M.b
    keep = np.flatnonzero(kept_mask(kind, t, a, b, nz, out_rows))
    rows = [t[keep], out_rows]
    rows += [a[keep[~np.isin(kind[keep], _SCALAR_AB + (K_NEG,))]],
             b[keep[np.isin(kind[keep], _TWO_ROWS)]]]
    return keep, np.unique(np.concatenate(rows))


def pruned_program(M: MultiRhsProgram, pattern, out_rows, wanted=None, groups=None):
    """The PrunedProgram of M for right-hand sides with structural nonzeros pattern (n, k) bool
    (rows in the right-hand side's own order) whose solution is wanted at x[out_rows] only, and
    per column only where wanted (len(out_rows), k) bool (None: everywhere); groups: lists of
    columns sharing one op list (None: the columns of equal structure)."""
    P = M.P
    n, k = pattern.shape
    nz = np.asarray(pattern, dtype=bool)[P.row_perm]
    out_perm = np.argsort(P.col_perm)[np.asarray(out_rows, dtype=np.int64)]
    wanted = np.ones((out_perm.size, k), dtype=bool) if wanted is None else wanted
    if groups is None:
        same = {}
        for j in range(k):
            same.setdefault(nz[:, j].tobytes() + wanted[:, j].tobytes(), []).append(j)
        groups = list(same.values())
    lists, loads, cols, load_nz, outs = [], [], [], [], []
    for members in groups:
        members = [int(j) for j in members]
        reach = nz[:, members].any(axis=1)
        outs.append(np.flatnonzero(wanted[:, members].any(axis=1)))
        keep, rows = _kept_ops(M, reach, out_perm[outs[-1]])
        lists.append(keep), loads.append(rows), cols.append(members)
        load_nz.append(reach[rows])
    keep = np.concatenate(lists + [np.zeros(0, dtype=np.int64)])
    kind, b, a = M.kind[keep], M.b[keep].copy(), M.a[keep].copy()
    scalar_b = np.isin(kind, _SCALAR_B + _SCALAR_AB) & (b >= 0)
    scalar_a = np.isin(kind, _SCALAR_AB)
    slots = np.unique(np.concatenate([b[scalar_b], a[scalar_a]]))
    b[scalar_b] = np.searchsorted(slots, b[scalar_b])          # W's rows
    a[scalar_a] = np.searchsorted(slots, a[scalar_a])
    ptr = (lambda parts: np.cumsum([0] + [len(p) for p in parts]).astype(np.int64))
    flat = (lambda parts: np.concatenate(parts + [np.zeros(0, dtype=np.int64)]).astype(np.int64))
    return PrunedProgram(P, slots.astype(np.int64), ptr(cols), flat(cols), ptr(lists), kind,
                         M.t[keep], a, b, M.sign[keep], ptr(loads), flat(loads),
                         np.concatenate(load_nz), ptr(outs), flat(outs),
                         out_perm[flat(outs)], max(len(c) for c in cols))
