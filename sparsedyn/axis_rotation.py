"""The congruence E^T M E of a 3x3 block by a rotation E about a coordinate axis k, by double angles.

Seed 002, appendix: at the floating base's privileged child, whose transform is a pure rotation
about a fixed axis, X^T I^a X costs 22m + 25a. That is this form on I^a's 15 entries (counted in
tests/test_opcount_conventions.py); the plain two-product form costs 68m + 34a.

With (i, j, k) cyclic, E[k, k] = 1, E[i, i] = E[j, j] = c, E[i, j] = -E[j, i] = s, the constants
sig = s^2, pi = c s, 2 pi and c2 = cos 2 theta = 1 - 2 sig (2m + 3a, once per transform), and for
the 2x2 block G = [[x, y], [w, z]] on (i, j), d = x - z, t = y + w:

    (E^T G E)_ii = x - delta,  (.)_jj = z + delta,  delta = d sig + t pi
    (.)_ij = y + eps,  (.)_ji = w + eps,            eps = d pi - t sig          (4m + 8a)
    symmetric G (w = y): (.)_ij = d pi + y c2, delta = d sig + y (2 pi)          (4m + 5a)

the k-column (M_ik, M_jk) and k-row rotate as 2-vectors (4m + 2a each), M_kk is unchanged. Proof
of the 2x2 formulas: expand E2^T G E2 with c^2 = 1 - sig (a rotation, E2 = [[c, s], [-s, c]]).
"""
from __future__ import annotations

import numpy as np

CONSTANTS = (2, 3)          # sig, pi (2m); 2 pi, c2 = 1 - sig - sig (3a)


def axis_indices(k):
    return (k + 1) % 3, (k + 2) % 3


def rotate_blocks(E, blocks, k):
    """E^T M E for each (M (..., 3, 3), symmetric) in blocks, E (..., 3, 3) a rotation about axis
    k (E[k, k] = 1); the symmetric ones are returned symmetric."""
    i, j = axis_indices(k)
    c, s = E[..., i, i], E[..., i, j]
    sig, pi = s * s, c * s
    pi2, c2 = pi + pi, 1.0 - sig - sig
    out = []
    for M, sym in blocks:
        R = np.empty(np.broadcast_shapes(M.shape, E.shape))
        R[..., k, k] = M[..., k, k]
        R[..., i, k] = c * M[..., i, k] - s * M[..., j, k]          # E2^T (M_ik, M_jk)
        R[..., j, k] = s * M[..., i, k] + c * M[..., j, k]
        x, z, y = M[..., i, i], M[..., j, j], M[..., i, j]
        d = x - z
        if sym:
            delta = d * sig + y * pi2
            R[..., i, j] = R[..., j, i] = d * pi + y * c2
            R[..., k, i], R[..., k, j] = R[..., i, k], R[..., j, k]
        else:
            w = M[..., j, i]
            t = y + w
            delta = d * sig + t * pi
            eps = d * pi - t * sig
            R[..., i, j], R[..., j, i] = y + eps, w + eps
            R[..., k, i] = c * M[..., k, i] - s * M[..., k, j]      # (M_ki, M_kj) E2
            R[..., k, j] = s * M[..., k, i] + c * M[..., k, j]
        R[..., i, i], R[..., j, j] = x - delta, z + delta
        out.append(R)
    return out


def _vector_cost(a, b):
    """A 2-vector (a, b) rotated: 4m + 2a, 2m if one entry is structurally zero, 0 if both."""
    n = int(a) + int(b)
    return (2 * n, 2 * (n == 2))


def rotate_cost(patterns, k):
    """(mul, add, output patterns) of rotate_blocks on 3x3 blocks of structural patterns
    [(nz, symmetric)]: the 2x2 block costs its whole formula when any entry is nonzero; the
    constants are charged once."""
    i, j = axis_indices(k)
    mul = add = 0
    out = []
    for nz, sym in patterns:
        P = np.zeros((3, 3), bool)
        P[k, k] = nz[k, k]
        vectors = [((i, k), (j, k))] if sym else [((i, k), (j, k)), ((k, i), (k, j))]   # column k, row k
        for a, b in vectors:
            m, ad = _vector_cost(nz[a], nz[b])
            mul, add = mul + m, add + ad
            P[a] = P[b] = nz[a] or nz[b]
        if sym:
            P[k, i], P[k, j] = P[i, k], P[j, k]
        block = np.ix_((i, j), (i, j))
        if nz[block].any():
            mul, add = mul + 4, add + (5 if sym else 8)
            P[block] = True
        out.append(P)
    if mul:
        mul, add = mul + CONSTANTS[0], add + CONSTANTS[1]
    return mul, add, out
