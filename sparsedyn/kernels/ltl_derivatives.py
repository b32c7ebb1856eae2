"""The forward-dynamics derivatives from inverse dynamics' through the L^T L factor of the
joint-space inertia matrix (Featherstone Sec. 6.5, Table 6.4), in numba, per state:

    dqdd/dq = -M^-1 dtau/dq,   dqdd/dv = -M^-1 dtau/dv,   dqdd/dtau = M^-1

(Carpentier and Mansard 2018; problems/plan_derivatives.py), one pass over the rows of
Y = [-dtau/dq, -dtau/dv, I] (nv x 3 nv, in the cache: a state at a time).

L keeps M's branch-induced sparsity (recursive/ltl.py: L_kj != 0 only for j in anc(k) U {k}),
so each substitution walks a DoF's ancestors through the expanded parent array lambda; a row
operation acts on the row's columns at once. In the identity's block, L^-T e_j is nonzero only
at j and its ancestors, so the backward pass touches, in row i, only columns [i, last[i]]
(last[i]: the largest-numbered DoF of i's subtree; as lambda(k) < k, the range holds every
descendant, and the others in it stay exactly 0); M^-1's lower triangle is mirrored into its
upper one (the result is exactly symmetric).

Preconditions: lam (nv,) int64 the expanded parents (-1 at a root DoF), last (nv,) int64 (both
recursive.ltl.pattern(model)'s parents and last),
L (B, nv, nv) float64 lower with a positive diagonal (MassMatrixPlan.factor), dtau (B, nv,
2 nv) [dtau/dq, dtau/dv]; out_q, out_v, out_minv (B, nv, nv).
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, error_model="numpy")
def forward_from_inverse(lam, last, L, dtau, out_q, out_v, out_minv):
    """out_q[s], out_v[s], out_minv[s] = -M_s^-1 dtau[s][:, :nv], -M_s^-1 dtau[s][:, nv:],
    M_s^-1 for M_s = L[s]^T L[s], every state s."""
    B, n = L.shape[0], L.shape[1]
    k = 3 * n
    Y = np.empty((n, k))
    for s in range(B):
        for i in range(n):
            for c in range(2 * n):
                Y[i, c] = -dtau[s, i, c]
            for c in range(2 * n, k):
                Y[i, c] = 0.0
            Y[i, 2 * n + i] = 1.0
        for i in range(n - 1, -1, -1):          # L^-T y, i = n..1: y_i /= L_ii;
            r = 1.0 / L[s, i, i]                #   y_anc(i) -= L_i,anc(i) y_i
            hi = 2 * n + last[i] + 1            # (identity block: i's subtree columns only)
            for c in range(2 * n):
                Y[i, c] *= r
            for c in range(2 * n + i, hi):
                Y[i, c] *= r
            j = lam[i]
            while j >= 0:
                f = L[s, i, j]
                for c in range(2 * n):
                    Y[j, c] -= f * Y[i, c]
                for c in range(2 * n + i, hi):
                    Y[j, c] -= f * Y[i, c]
                j = lam[j]
        for i in range(n):                      # L^-1 y, i = 1..n:
            j = lam[i]                          #   y_i = (y_i - L_i,anc(i) y_anc(i)) / L_ii
            while j >= 0:
                f = L[s, i, j]
                for c in range(k):
                    Y[i, c] -= f * Y[j, c]
                j = lam[j]
            r = 1.0 / L[s, i, i]
            for c in range(k):
                Y[i, c] *= r
        for i in range(n):
            for c in range(n):
                out_q[s, i, c] = Y[i, c]
                out_v[s, i, c] = Y[i, n + c]
            for c in range(i + 1):
                out_minv[s, i, c] = out_minv[s, c, i] = Y[i, 2 * n + c]
