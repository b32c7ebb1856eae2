"""Many sparse right-hand sides per state through one LU program, each substitution pruned to
what its right-hand side and the wanted rows need (the plan: lu_pruned_plan.py): the
derivatives of the dynamics solve 2 nv right-hand sides that are mostly zero (a direction of q
or v moves only the rows of its joint's subtree) and need only the nv rows of the output. Kept
ops run in program order with the program's rounding, so each wanted entry equals
lu_multi_rhs's up to the sign of a zero.

States on the lanes: per group of LANES states the factorization part runs once on the lanes
(lu_numba.run_lanes, its pivot checks), the substitution's scalar slots are gathered into
W (slot, lane); then per group of columns each kept op runs over (the group's columns x LANES
states).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .lu_multi_rhs import (K_ADDS, K_ADDV, K_AXPY, K_MOVS, K_MOVV, K_MULS, K_MULV, K_NEG,
                           K_XTY)
from .lu_numba import lane_scales, run_lanes

#: states per lane group: R (n, columns x LANES) and W (slots, LANES) stay in the L2 cache
LANES = 16


@njit(cache=True, inline="always")
def _substitute_lanes(Q, lo, hi, W, R, m, nl):
    """The kept ops [lo, hi) on the first nl lanes of R[:, :m LANES] (column c, lane l at
    c LANES + l), program order and rounding as lu_multi_rhs._substitute; a scalar operand is
    W[slot, l]. Indices unsigned and nl a run-time count: numba then drops the negative-index
    wraparound and LLVM's loop vectoriser takes the lane loops (numba runs no SLP vectoriser,
    so a constant 16-lane loop is unrolled into scalar code instead)."""
    n = np.uint64(nl)
    for o in range(lo, hi):
        kind, sign = Q.kind[o], Q.sign[o]
        t = np.uint64(Q.t[o])
        if kind == K_AXPY:                   # t += sign * row a * scalar
            a, b = np.uint64(Q.a[o]), np.uint64(Q.b[o])
            for c in range(m):
                c0 = np.uint64(c * LANES)
                for l in range(n):
                    R[t, c0 + l] = R[t, c0 + l] + sign * (R[a, c0 + l] * W[b, l])
        elif kind == K_XTY:
            a, b = np.uint64(Q.a[o]), np.uint64(Q.b[o])
            for c in range(m):
                c0 = np.uint64(c * LANES)
                for l in range(n):
                    R[t, c0 + l] = R[t, c0 + l] + sign * (R[a, c0 + l] * R[b, c0 + l])
        elif kind == K_ADDV:
            a = np.uint64(Q.a[o])
            for c in range(m):
                c0 = np.uint64(c * LANES)
                for l in range(n):
                    R[t, c0 + l] = R[t, c0 + l] + sign * R[a, c0 + l]
        elif kind == K_NEG:
            for c in range(m):
                c0 = np.uint64(c * LANES)
                for l in range(n):
                    R[t, c0 + l] = -R[t, c0 + l]
        elif kind == K_MOVV:
            a = np.uint64(Q.a[o])
            for c in range(m):
                c0 = np.uint64(c * LANES)
                for l in range(n):
                    R[t, c0 + l] = R[a, c0 + l]
        elif kind == K_MULV:
            a, b = np.uint64(Q.a[o]), np.uint64(Q.b[o])
            for c in range(m):
                c0 = np.uint64(c * LANES)
                for l in range(n):
                    R[t, c0 + l] = R[a, c0 + l] * W[b, l]
        elif kind == K_MULS:
            a, b = np.uint64(Q.a[o]), np.uint64(Q.b[o])
            for c in range(m):
                c0 = np.uint64(c * LANES)
                for l in range(n):
                    R[t, c0 + l] = R[a, c0 + l] * R[b, c0 + l]
        else:                                # K_ADDS, K_MOVS: a scalar per lane
            ai, bi = Q.a[o], Q.b[o]
            for c in range(m):
                c0 = np.uint64(c * LANES)
                for l in range(n):
                    f = W[ai, l] if bi < 0 else W[ai, l] * W[bi, l]
                    R[t, c0 + l] = (R[t, c0 + l] + sign * f) if kind == K_ADDS else f


@njit(cache=True, error_model="numpy", nogil=True)
def solve_pruned(Q, values, rhs, out, broken):
    """out[s, i, j] = x[out_rows[i]] of D(values[s]) x = rhs[:, j, s] for rhs (n, k, B), states
    last (the lanes), zero outside the planned pattern, where (i, j) is wanted (others are left
    as they are); out (B, n_out, k); broken[s]: a failed pivot check or a non-finite wanted
    entry (out[s] NaN there)."""
    P = Q.P
    B = values.shape[0]
    w = np.zeros((P.n_slots, LANES))
    scale = np.zeros((P.chk_const.shape[0], LANES))
    bad = np.zeros(LANES, dtype=np.bool_)
    W = np.zeros((Q.slots.size, LANES))
    R = np.zeros((rhs.shape[0], Q.max_cols * LANES))
    ok = np.ones(LANES, dtype=np.bool_)
    nan = np.zeros(LANES)
    no_consts = np.zeros(0)
    for s0 in range(0, B, LANES):
        nl = min(LANES, B - s0)
        lanes, first = np.uint64(nl), np.uint64(s0)      # unsigned: see _substitute_lanes
        nan[:] = 0.0
        # the factorization on the lanes (lu_numba.run_lanes: the ops and pivot checks of
        # _batch_outer, bit-identical), lanes past nl on the previous group's entries
        for i in range(P.init_slots.shape[0]):
            w[P.init_slots[i]] = P.init_values[i]
        for i in range(P.load_entries.shape[0]):
            e = P.load_entries[i]
            for l in range(lanes):
                w[e, l] = values[first + l, e]
        lane_scales(w, P.chk_ptr, P.chk_entries, P.chk_const, scale)
        bad[:] = False
        run_lanes(w, P.runs_f, P.t, P.a, P.b_checked, scale, P.tol, bad, no_consts)
        for i in range(Q.slots.size):
            W[i] = w[Q.slots[i]]
        for l in range(nl):
            ok[l] = not bad[l]
        for g in range(Q.group_ptr.size - 1):
            c0, m = Q.group_ptr[g], Q.group_ptr[g + 1] - Q.group_ptr[g]
            for i in range(Q.load_ptr[g], Q.load_ptr[g + 1]):
                r = np.uint64(Q.load_rows[i])
                if Q.load_nz[i]:                # lanes past nl are neither set nor read
                    src = np.uint64(P.row_perm[r])
                    for c in range(m):
                        col, c1 = np.uint64(Q.group_cols[c0 + c]), np.uint64(c * LANES)
                        for l in range(lanes):
                            R[r, c1 + l] = rhs[src, col, first + l]
                else:
                    for c in range(m):
                        c1 = np.uint64(c * LANES)
                        for l in range(lanes):
                            R[r, c1 + l] = 0.0
            _substitute_lanes(Q, Q.op_ptr[g], Q.op_ptr[g + 1], W, R, m, nl)
            for i in range(Q.out_ptr[g], Q.out_ptr[g + 1]):
                r, at = np.uint64(Q.out_rows[i]), np.uint64(Q.out_index[i])
                for c in range(m):
                    col, c1 = np.uint64(Q.group_cols[c0 + c]), np.uint64(c * LANES)
                    for l in range(lanes):
                        v = R[r, c1 + l]
                        out[first + l, at, col] = v
                        nan[l] += v * 0.0       # NaN once any wanted entry is not finite
        for l in range(nl):
            broken[s0 + l] = not (ok[l] and nan[l] == 0.0)
            if broken[s0 + l]:
                out[s0 + l] = np.nan
