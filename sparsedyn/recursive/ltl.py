"""Featherstone's sparse L^T L and L^T D L factorizations of the joint-space inertia matrix, batched.

Featherstone, Sec. 6.5, Tables 6.3 (factorization) and 6.4 (back/forward substitution). With the
expanded parent array lambda over DoFs (lambda(k) < k; model.expanded_parents()), M_ki != 0 only
if i in anc(k) U {k}; factorizing from the tips towards the base keeps L in exactly that pattern
(no fill-in), whereas an ordinary L L^T Cholesky would fill in.

    ltl(model, M)   -> L       with M = L^T L, L lower triangular (positive diagonal)
    ltdl(model, M)  -> (L, d)  with M = L^T diag(d) L, L unit lower triangular
    solve_lower(model, L, x)           = L^-1 x   (Table 6.4, forward over i = 1..n)
    solve_lower_transpose(model, L, x) = L^-T x   (Table 6.4, backward over i = n..1)

Preconditions: M (B, nv, nv) or (nv, nv) symmetric with the model's branch-induced sparsity
(e.g. from crba); a non-positive pivot raises SingularModelError naming the DoF and joint.
"""
from __future__ import annotations

import numpy as np

from ..errors import SingularModelError, check_finite
from ..opcount import charge
from .aba import SINGULAR_TOLERANCE, mass_ratio_cause


class _Pattern:
    """The q-independent index sets the sweeps use, cached per model."""

    def __init__(self, model):
        lam = model.expanded_parents()
        self.n = len(lam)
        self.ancestors = []                        # anc(k) as an index array, nearest first
        for k in range(self.n):
            a, j = [], int(lam[k])
            while j >= 0:
                a.append(j)
                j = int(lam[j])
            self.ancestors.append(np.array(a, dtype=int))
        self.lower_tri = []                        # (i, j) with i in anc(k), j in anc_incl(i)
        for a in self.ancestors:
            ii, jj = np.tril_indices(len(a))       # ancestors run base-wards, so reverse order
            rev = a[::-1]
            self.lower_tri.append((rev[ii], rev[jj]))
        self.mask = np.eye(self.n, dtype=bool)
        for k, a in enumerate(self.ancestors):
            self.mask[k, a] = True
        self.dof_owner = np.concatenate([[i] * j.nv for i, j in enumerate(model.joints)]).astype(int) \
            if self.n else np.zeros(0, int)
        self.parents = np.asarray(lam, dtype=np.int64).reshape(-1)   # lambda as int64
        self.last = np.arange(self.n, dtype=np.int64)  # largest-numbered DoF of k's subtree
        for k in range(self.n - 1, -1, -1):            # lambda(k) < k: children first
            if lam[k] >= 0:
                self.last[lam[k]] = max(self.last[lam[k]], self.last[k])


_PATTERNS = {}


def pattern(model):
    key = id(model)
    pat = _PATTERNS.get(key)
    if pat is None or pat[0] is not model:
        pat = (model, _Pattern(model))
        _PATTERNS[key] = pat
    return pat[1]


def _as_batch_matrix(M, n):
    M = np.asarray(M, dtype=float)
    single = M.ndim == 2
    if single:
        M = M[None]
    if M.ndim != 3 or M.shape[1:] != (n, n):
        raise ValueError(f"M: expected shape ({n}, {n}) or (B, {n}, {n}), got {np.shape(M)}")
    bad = np.flatnonzero(~np.isfinite(M).reshape(M.shape[0], n * n).all(axis=1))
    if bad.size:      # NaN fails every pivot test: it would read as a singular mass matrix
        raise ValueError(f"M: non-finite entries at batch indices {bad[:10].tolist()}"
                         f"{'...' if bad.size > 10 else ''}")
    return M, single


def _check_pivot(model, pat, piv, k, scale):
    bad = np.flatnonzero(~(piv > SINGULAR_TOLERANCE * scale))
    if bad.size:
        body = int(pat.dof_owner[k])
        joint = model.joints[body]
        local = k - int(model.v_index[body])
        ratio = mass_ratio_cause(model, model.subtree(body))
        cause = f" (numerically: the bodies it moves, {ratio})" if ratio else ""
        raise SingularModelError(
            f"model {model.name!r}: a pivot of the L^T L factorization is not positive (at most "
            f"{SINGULAR_TOLERANCE:g} of M_kk) at DoF {k} "
            f"(coordinate {local} of joint {joint.name!r}, body {model.link_names[body]!r}): the mass "
            f"matrix is not positive definite at batch indices {bad[:10].tolist()}"
            f"{'...' if bad.size > 10 else ''}{cause}",
            bodies=[model.link_names[body]], batch_indices=bad.tolist())


def _factorize(model, M, sqrt_pivots):
    pat = pattern(model)
    H, single = _as_batch_matrix(M, model.nv)
    H = H.copy()
    # each pivot against its own diagonal entry M_kk before the updates (cancellation-aware and
    # relative to the bodies that DoF moves, not to the heaviest body of the model)
    scale = np.abs(np.diagonal(H, axis1=1, axis2=2)).copy()
    d = np.empty((H.shape[0], model.nv))
    for k in range(model.nv - 1, -1, -1):                          # k = n..1, tips first
        a = pat.ancestors[k]
        piv = H[:, k, k]
        _check_pivot(model, pat, piv, k, scale[:, k])
        ii, jj = pat.lower_tri[k]
        if sqrt_pivots:                                            # Table 6.3 (L^T L)
            charge(sqrt=1, div=len(a), kind="LTL")
            charge(len(ii), len(ii), kind="LTL")
            H[:, k, k] = np.sqrt(piv)                              # H_kk = sqrt(H_kk)
            H[:, k, a] /= H[:, k, k][:, None]                      # H_ki = H_ki / H_kk
            H[:, ii, jj] -= H[:, k, ii] * H[:, k, jj]              # H_ij -= H_ki H_kj
        else:                                                      # Table 6.3, L^T D L variant
            charge(len(ii), len(ii), div=len(a), kind="LTDL")
            d[:, k] = piv
            raw = H[:, k, :].copy()                                # the unscaled H_kj
            H[:, k, a] = raw[:, a] / piv[:, None]                  # L_ki = H_ki / H_kk
            H[:, ii, jj] -= H[:, k, ii] * raw[:, jj]               # H_ij -= L_ki H_kj
            H[:, k, k] = 1.0
    L = np.where(pat.mask, H, 0.0)                                 # drop the (stale) upper triangle
    return L, d, single


def ltl(model, M):
    """M = L^T L with L lower triangular in the expanded-parent pattern (B, nv, nv) or (nv, nv)."""
    L, _, single = _factorize(model, M, sqrt_pivots=True)
    check_finite(L, "ltl", {"M": M if not single else np.asarray(M)[None]}, "L")
    return L[0] if single else L


def ltdl(model, M):
    """M = L^T diag(d) L, L unit lower triangular in the expanded-parent pattern. Returns (L, d)."""
    L, d, single = _factorize(model, M, sqrt_pivots=False)
    M = np.asarray(M)[None] if single else M
    check_finite(L, "ltdl", {"M": M}, "L")
    check_finite(d, "ltdl", {"M": M}, "d")
    return (L[0], d[0]) if single else (L, d)


def _as_batch_rhs(L, x, n):
    L = np.asarray(L, dtype=float)
    x = np.array(x, dtype=float)
    single = L.ndim == 2
    if single:
        L, x = L[None], x[None]
    if L.shape[1:] != (n, n) or x.ndim not in (2, 3) or x.shape[1] != n or x.shape[0] != L.shape[0]:
        raise ValueError(f"L, x: expected L (B, {n}, {n}) with x (B, {n}) or (B, {n}, k) "
                         f"(or without the batch axis), got {L.shape if not single else L.shape[1:]} "
                         f"and {np.shape(x)}")
    return L, x, single


def solve_lower(model, L, x, unit_diagonal=False):
    """L^-1 x using L's sparsity: for i = 1..n: x_i = (x_i - sum_{j in anc(i)} L_ij x_j) / L_ii."""
    pat = pattern(model)
    L, x, single = _as_batch_rhs(L, x, model.nv)
    cols = x.shape[2] if x.ndim == 3 else 1
    for i in range(model.nv):
        a = pat.ancestors[i]
        if len(a):
            charge(len(a) * cols, len(a) * cols, kind="L^-1 x")
            x[:, i] -= np.einsum("bj,bj...->b...", L[:, i, a], x[:, a])
        if not unit_diagonal:
            charge(div=cols, kind="L^-1 x")
            x[:, i] /= L[:, i, i] if x.ndim == 2 else L[:, i, i][:, None]
    return x[0] if single else x


def solve_lower_transpose(model, L, x, unit_diagonal=False, deepest=None):
    """L^-T x using L's sparsity: for i = n..1: x_i /= L_ii; x_anc(i) -= L_i,anc(i) x_i.

    `deepest`: if x is known to vanish outside {deepest} U anc(deepest) (a Jacobian row of a body
    whose last DoF is `deepest`), only that chain is visited (Featherstone's LTL-OSIM, J L^-1)."""
    pat = pattern(model)
    L, x, single = _as_batch_rhs(L, x, model.nv)
    cols = x.shape[2] if x.ndim == 3 else 1
    order = range(model.nv - 1, -1, -1) if deepest is None else \
        np.concatenate(([deepest], pat.ancestors[deepest])).astype(int)
    for i in order:
        if not unit_diagonal:
            charge(div=cols, kind="L^-T x")
            x[:, i] /= L[:, i, i] if x.ndim == 2 else L[:, i, i][:, None]
        a = pat.ancestors[i]
        if len(a):
            charge(len(a) * cols, len(a) * cols, kind="L^-T x")
            x[:, a] -= L[:, i, a][..., None] * x[:, i][:, None] if x.ndim == 3 else L[:, i, a] * x[:, i][:, None]
    return x[0] if single else x
