"""The pruned substitutions of kernels/lu_pruned.py one state at a time, the columns of a group
on the lanes: for few states (one per call), where lu_pruned's lanes of states would stay
mostly empty and lu_multi_rhs runs every op on every right-hand side.

Per state the factorization part runs once on the state's work vector
(lu_multi_rhs.factor_state: lu_numba._run_serial, its pivot checks); then per group of columns
(a PrunedProgram planned with blocks of columns: lu_pruned_plan.pruned_program's `groups`, each
running the ops any of its columns needs) the group's rows are loaded, its kept ops run over its
columns at once (lu_multi_rhs._substitute: each op one loop over the columns, as lu_multi_rhs
runs it over a block of right-hand sides) and its wanted rows stored. Kept ops run in program
order with the program's rounding; an op a column does not need adds an exact zero to it or
writes a row no wanted entry of it reads, so each wanted entry equals lu_multi_rhs's up to the
sign of a zero.

Precondition (beyond lu_pruned's): the right-hand sides are zero outside their pattern, since a
block loads the rows of its columns' union (the derivatives' buffer: built zero, the tangent
kernel writes only its pattern).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .lu_multi_rhs import _substitute, factor_state


@njit(cache=True, error_model="numpy", nogil=True)
def solve_pruned_columns(Q, values, rhs, out, broken):
    """As lu_pruned.solve_pruned (the same arguments: rhs (n, k, >= B) states last, out
    (B, n_out, k)), a state at a time, each group's columns on the lanes."""
    P = Q.P
    B = values.shape[0]
    w = np.zeros(P.n_slots)
    W = np.zeros(Q.slots.size)
    R = np.zeros((rhs.shape[0], Q.max_cols))
    for s in range(B):
        ok = factor_state(P, values, s, w)
        for i in range(Q.slots.size):
            W[i] = w[Q.slots[i]]
        nan = 0.0
        for g in range(Q.group_ptr.size - 1 if ok else 0):
            c0, m = Q.group_ptr[g], Q.group_ptr[g + 1] - Q.group_ptr[g]
            for i in range(Q.load_ptr[g], Q.load_ptr[g + 1]):
                r = Q.load_rows[i]
                if Q.load_nz[i]:
                    src = P.row_perm[r]
                    for c in range(m):
                        R[r, c] = rhs[src, Q.group_cols[c0 + c], s]
                else:
                    for c in range(m):
                        R[r, c] = 0.0
            lo, hi = Q.op_ptr[g], Q.op_ptr[g + 1]
            _substitute(Q.kind[lo:hi], Q.t[lo:hi], Q.a[lo:hi], Q.b[lo:hi], Q.sign[lo:hi], W, R,
                        m)
            for i in range(Q.out_ptr[g], Q.out_ptr[g + 1]):
                r, at = Q.out_rows[i], Q.out_index[i]
                for c in range(m):
                    v = R[r, c]
                    out[s, at, Q.group_cols[c0 + c]] = v
                    nan += v * 0.0              # NaN once any wanted entry is not finite
        broken[s] = not (ok and nan == 0.0)
        if broken[s]:
            out[s] = np.nan
