"""What a spatial primitive costs under the papers' counting convention: the structure they exploit.

Featherstone (Rigid Body Dynamics Algorithms, 2008) counts the recursive algorithms with the
compact forms of Appendix A (Table A.? of the book: X m and X^T f 24m + 18a for a general (E, r),
I m 24m + 18a for a rigid-body inertia (m, h, Ibar)) and, in Sec. 10 (the closed forms of Table
10.?, e.g. ABA (224 N - 259) m + (205 N - 248) a), with the structure of the joints: a unit-axis
motion subspace makes S x and S^T f selections (0 flops), and a joint transform is a rotation about
a coordinate axis (4m + 2a per 3-vector) composed with a constant tree transform. The seeds'
tables (seed 002, appendix) count the same way, with symmetric 6x6 inertias (21 entries, 15 when a
joint's projection zeroes a row and column) and the 231-flop LDL^T factor-and-invert of a 6-DoF
pivot.

Here every such cost is derived from structural patterns, not assumed: a pattern is a boolean
array of entries that can be nonzero (`nz`) with those that are exactly +-1 for every state
(`unit`, a free multiplication). `linear_cost` counts the nonzero products of A x, one
multiplication per non-unit term and one addition per term beyond the first of each row.
Inertias are treated as general (their numeric zeros are data, not structure); the transforms'
patterns are in transform_costs.py.
"""
from __future__ import annotations

import numpy as np

FULL6 = np.ones(6, dtype=bool)


def linear_cost(nz, unit, x_nz):
    """(mul, add, output pattern) of A x for the structural pattern (nz, unit) of A and x_nz of x."""
    A = nz[:, x_nz]
    terms = A.sum(axis=1)
    mul = int((A & ~unit[:, x_nz]).sum())
    add = int(np.maximum(terms - 1, 0).sum())
    return mul, add, terms > 0


def product_cost(A_nz, A_unit, B_nz, B_unit, symmetric=False, mask=True):
    """(mul, add, pattern) of A B for structural patterns (a product with a +-1 factor is free);
    symmetric: the result is symmetric and only its upper triangle is computed; mask: the entries
    needed (others known to be zero)."""
    terms = A_nz[:, :, None] & B_nz[None, :, :]                       # (i, k, j)
    free = A_unit[:, :, None] | B_unit[None, :, :]
    keep = (np.triu(np.ones((A_nz.shape[0], B_nz.shape[1]), bool)) if symmetric else True) & mask
    t = terms.sum(axis=1)
    mul = int(((terms & ~free).sum(axis=1) * keep).sum())
    add = int((np.maximum(t - 1, 0) * keep).sum())
    return mul, add, t > 0


def zero_axes_after_projection(P, S):
    """Pattern of I^a = I^A - U D^-1 U^T from I^A's pattern P: I^a S = 0, so a unit column e_k of
    S zeroes row and column k (seed 002, appendix: 15 entries for a revolute joint)."""
    S = np.asarray(S, float)
    out = P.copy()
    for c in range(S.shape[1]):
        nz = np.flatnonzero(S[:, c])
        if nz.size == 1 and abs(S[nz[0], c]) == 1:
            out[nz[0], :] = False
            out[:, nz[0]] = False
    return out


def add_cost(p, q):
    """Additions of two vectors (or symmetric matrices' stored entries) of patterns p, q: only the
    entries nonzero in both cost anything."""
    return int((p & q).sum())


def skew_pattern(r_nz):
    """Pattern of rx for a 3-vector pattern r_nz: entry (i, j) holds r_k, {i, j, k} = {0, 1, 2}."""
    out = np.zeros((3, 3), dtype=bool)
    for i, j, k in ((0, 1, 2), (0, 2, 1), (1, 2, 0)):
        out[i, j] = out[j, i] = bool(r_nz[k])
    return out


def subspace_pattern(S):
    """(nz, unit) of a constant motion subspace S (6 x n)."""
    S = np.asarray(S, float)
    return S != 0, np.abs(S) == 1


def cross_cost(v_nz, m_nz, force=False):
    """(mul, add, pattern) of v x m (force=False, Featherstone eq. 2.31) or v x* f (eq. 2.32):
    one product per (nonzero v_k, nonzero m_j) pair of the cross-product terms."""
    w, vl = v_nz[:3], v_nz[3:]
    mw, mv = m_nz[:3], m_nz[3:]
    if not force:          # [w x mw; w x mv + vl x mw]
        blocks = [[(w, mw)], [(w, mv), (vl, mw)]]
    else:                  # [w x n + vl x f; w x f]
        blocks = [[(w, mw), (vl, mv)], [(w, mv)]]
    mul = add = 0
    out = np.zeros(6, dtype=bool)
    for b, pairs in enumerate(blocks):
        for i in range(3):
            j, k = (i + 1) % 3, (i + 2) % 3            # (a x c)_i = a_j c_k - a_k c_j
            t = sum(int(a[j] and c[k]) + int(a[k] and c[j]) for a, c in pairs)
            mul += t
            add += max(t - 1, 0)
            out[3 * b + i] = t > 0
    return mul, add, out


def rigid_inertia_cost(x_nz):
    """(mul, add, pattern) of I x for a rigid-body inertia in compact form (m, h, Ibar)
    (Featherstone, Appendix A: [Ibar w + h x v; m v - h x w], 24m + 18a for a dense x)."""
    w, vl = x_nz[:3], x_nz[3:]
    full = np.ones((3, 3), bool)
    none = np.zeros((3, 3), bool)
    m1, a1, p1 = linear_cost(full, none, w)                   # Ibar w
    m2, a2, p2 = _hx(vl)                                      # h x v
    m3, a3, p3 = (int(vl.sum()), 0, vl.copy())               # m v
    m4, a4, p4 = _hx(w)                                       # h x w
    mul = m1 + m2 + m3 + m4
    add = a1 + a2 + a3 + a4 + add_cost(p1, p2) + add_cost(p3, p4)
    return mul, add, np.r_[p1 | p2, p3 | p4]


def _hx(x_nz):
    """h x x for a dense h."""
    skew_full = ~np.eye(3, dtype=bool)
    return linear_cost(skew_full, np.zeros((3, 3), bool), x_nz)


def symmetric_matvec_cost(P, x_nz):
    """(mul, add, pattern) of I x for a symmetric 6x6 I of pattern P (an articulated inertia)."""
    return linear_cost(P, np.zeros((6, 6), bool), x_nz)


def ldlt_invert_cost(n):
    """(mul, add, div) of the LDL^T factor and invert of a dense symmetric n x n pivot D (seed 002,
    appendix: 231 flops for the floating base, n = 6):
      factor, column j: w_jk = l_jk d_k, d_j = a_jj - sum l_jk w_jk, 1/d_j, and for i > j
              l_ij = (a_ij - sum_k l_ik w_jk) / d_j (k < j);
      invert: L^-1 (unit lower: X_ij = -(l_ij + sum_{j<k<i} l_ik X_kj)), Y = D^-1 L^-1 below the
              diagonal, and the lower triangle of D^-1 = L^-T Y, entry (i, j) summing k >= i."""
    mul = add = div = 0
    for j in range(n):
        below = n - 1 - j
        mul += 2 * j + below * (j + 1)                  # w_jk, the d_j sum, l_ij sums and / d_j
        add += j + below * j
        div += 1
    for i in range(n):
        for j in range(i):
            mul += i - j - 1
            add += i - j - 1                            # L^-1 (the -l_ij term: one addition less)
    mul += n * (n - 1) // 2                             # Y = D^-1 L^-1 below the diagonal
    for i in range(n):
        mul += (i + 1) * (n - 1 - i)                    # (i + 1) entries of row i, X_ii = 1 free
        add += (i + 1) * (n - 1 - i)
    return mul, add, div
