"""Symbolic static-pivot L D L^T of P A P^T for a structurally symmetric A, and its online program.

The symmetric counterpart of symbolic.py, for SPD patterns such as the normal matrix
N = A^T W A + P of MAP estimation: with the same permutation on both sides the pivots are A's
diagonal, U = D L^T, and only the permuted lower triangle needs computing. Per pivot k (column
c = the pivot's column below the diagonal, after the earlier updates):
  1 checked reciprocal r_k = 1 / d_k (cancellation-aware, as symbolic.py: the magnitude
  accumulated on d_k by ABSFMA/ABSADD is the LU's, since |l_ik c_i| = |l_ik u_ki|),
  |c| scalings l = c r_k into new slots (c itself is still needed by the updates),
  |c| (|c| + 1) / 2 updates a_ij -= l_i c_j of the lower Schur complement (i >= j),
against the LU's min(|L_k|, |U_k|) scalings and |L_k| |U_k| updates. The substitutions are
forward (L), diagonal (r_k) and backward (L^T): 2 nnz(L) updates and n scalings, as the LU's.
Known constants are folded as in symbolic.py (the same _Emitter); the op codes are the LU's, so
every kernel runs the program unchanged. Upper-triangle entries are never read (not even
loaded): the program is marked `symmetric` and its callers must give symmetric values.

Preconditions: pattern structurally symmetric, `perm` a permutation, every diagonal entry stored
(the caller, sparsedyn.planner.factorization, checks them).
"""
from __future__ import annotations

import numpy as np

from .symbolic import (PIVOT_TOL, SymbolicLU, UnsafePivot, _invert_pivot, _pattern_matrix,
                       _program, _Setup)


def symbolic_ldlt(pattern, perm, constant_values=None, tol=PIVOT_TOL):
    """Symbolic factorization + program for the static-pivot L D L^T of pattern[perm][:, perm].
    nnz_LU counts L + D + L^T, the LU's measure of the same factors."""
    setup = _Setup(pattern, perm, perm, constant_values)
    n, em, rhs0, pr, pc = setup.n, setup.em, setup.rhs0, setup.pr, setup.pc
    lower = pr >= pc
    col_rows = [dict() for _ in range(n)]   # permuted col j -> {permuted row i >= j: slot}
    for e in np.flatnonzero(lower):
        col_rows[pc[e]][pr[e]] = int(e)

    factor = []
    for k in range(n):
        if k not in col_rows[k]:
            raise UnsafePivot(f"pivot {k}: no stored diagonal entry")
        em.current_stage = 2 * k
        inv = _invert_pivot(em, k, col_rows[k][k], setup.const_scale, tol)
        Lk = sorted(i for i in col_rows[k] if i > k)
        cs = [em.operand(col_rows[k][i]) for i in Lk]
        ls = [em.scaled(col_rows[k][i], inv) for i in Lk]
        for jj, j in enumerate(Lk):
            target = col_rows[j]
            for ii in range(jj, len(Lk)):
                i = Lk[ii]
                if i not in target:
                    slot = em.new_slot()
                    target[i] = slot
                    em.known[slot] = 0.0
                if i == j:
                    em.accumulate(i, ls[ii], cs[jj])
                em.update(target[i], ls[ii], cs[jj])
        factor.append((list(zip(Lk, ls)), inv))

    # forward substitution with L (column-oriented; y_k is final once reached, then scaled by
    # 1/d_k), back substitution with L^T (row-oriented)
    n_factor_ops = len(em.code)
    for k in range(n):
        em.current_stage = 2 * k + 1
        yk = em.operand(rhs0 + k)
        for i, li in factor[k][0]:
            em.update(rhs0 + i, li, yk)
        em.scale_solution(rhs0 + k, factor[k][1])
    for k in range(n - 1, -1, -1):
        em.current_stage = 3 * n - 1 - k
        for i, li in factor[k][0]:
            em.update(rhs0 + k, li, em.operand(rhs0 + i))

    # loaded: the dynamic lower entries; a row's check scale is its largest |entry|, which by
    # symmetry is the largest over its lower part and its column's (both loaded)
    loaded = lower & np.isnan(setup.known_init)
    dyn = np.flatnonzero(loaded)
    off = dyn[pr[dyn] != pc[dyn]]
    program = _program(setup, n_factor_ops, tol, loaded, np.concatenate((pr[dyn], pc[off])),
                       np.concatenate((dyn, off)), symmetric=True)
    L = _pattern_matrix(n, [(i, k) for k in range(n) for i, _ in factor[k][0]])
    U = _pattern_matrix(n, [(k, i) for k in range(n) for i in [k] + [i for i, _ in factor[k][0]]])
    entries = [(i, k, li) for k in range(n) for i, li in factor[k][0]]
    return SymbolicLU(program=program, L=L, U=U, nnz_LU=L.nnz + U.nnz,
                      ldlt=(entries, [inv for _, inv in factor]))
