"""Pieces shared by the recursive Delassus algorithms (PV-OSIM, PV-OSIMr, EFPA), batched, in
body-local coordinates and charged to the operation counter.

Notation (seed 000, eqs. (7)-(12), local-frame form): U_i = H^A_i S_i, D_i = S_i^T U_i,
Om_i = S_i D_i^-1 S_i^T, and the force propagator from link i to its parent, including the change
of coordinates X_i = iX_lambda(i):

    lambda(i)P_i = X_i^T (1 - U_i D_i^-1 S_i^T),  so  R lambda(i)P_i^T = (R - (R S_i) D_i^-1 U_i^T) X_i

for a stack of rows R (r x 6): every extended motion propagator (EMP, CEMP) is such a stack.

Structure (seed 000, eq. (8): P removes "the force component that causes the i-th joint's
motion", S_i^T P_i = 0 since D_i = S_i^T U_i; seed 002's appendix: kX_1^T "has a zero row"):
(1 - S D^-1 U^T) S = 0, so where S_i has a unit column e_k the propagated rows' column k is zero
before X_i is applied, set so and never computed (not with armature, which adds to D_i). The
paper count tracks every stack's structural pattern (nz, unit) through the sweeps and charges
each product on it (spatial_costs.product_cost); as written every product is dense.
"""
from __future__ import annotations

import numpy as np

from ..opcount import charge, counting, written_only
from ..rigid_congruence import merged_pattern
from ..spatial import cross3, inertia_to_parent, rows_times_transform, rows_transform_cost
from ..spatial_costs import (add_cost, ldlt_invert_cost, product_cost, skew_pattern,
                             subspace_pattern, zero_axes_after_projection)
from ..transform_costs import GENERAL, TransformStructure
from ._common import S_product, joint_armature
from .aba import check_articulated_pivots


def transform_times_columns(X, C):
    """X C for motion-vector columns C (B, 6, c) (X m, 24 mul + 18 add per column)."""
    c = C.shape[-1]
    if counting():
        mul, add, _ = X.structure_cost("X m", np.ones(6, bool))
        charge(mul * c, add * c, kind="X C", written=(24 * c, 18 * c))
    w = X.E @ C[:, :3]
    v = X.E @ (C[:, 3:] - cross3(X.r[:, None, :], C[:, :3].swapaxes(1, 2)).swapaxes(1, 2))
    return np.concatenate((w, v), axis=1)


class Pivot:
    """The articulated pivot of joint i (seed 000, eq. (7)-(9)): U = H^A_i S_i, D = S_i^T U,
    D^-1, batched, with the products every Delassus recursion needs."""

    def __init__(self, model, IA, i):
        self.S = model.joints[i].S
        n = self.n = self.S.shape[1]
        self.U = S_product(IA, self.S, kind="U = H S")          # unit-axis S: a selection
        D = S_product(self.U.swapaxes(1, 2), self.S, kind="D = S^T U")
        arm = joint_armature(model, i)
        if arm is not None:
            D = D + arm                                   # + diag(armature): rotor inertia
        check_articulated_pivots(model, D, i, IA)
        self.zero_cols = np.zeros(6, bool)                # module doc: (1 - S D^-1 U^T) e_k = 0
        if arm is None:
            nz, unit = subspace_pattern(self.S)
            for c in range(n):
                if nz[:, c].sum() == 1 and unit[:, c].any():
                    self.zero_cols[np.flatnonzero(nz[:, c])[0]] = True
        if n == 1:
            charge(div=1, kind="D^-1")
            self.Dinv = 1.0 / D
        else:                                                      # LDL^T factor and invert
            charge(*ldlt_invert_cost(n), kind="D^-1", written=(n ** 3, n ** 3, n))
            self.Dinv = np.linalg.inv(D)

    def articulated_to_parent(self, X, IA, by_axis=True):
        """X^T (I^A - U D^-1 U^T) X: the articulated inertia seen from the parent; by_axis: a
        rotation about a coordinate axis by double angles, as seed 002's appendix counts the
        Delassus recursions (spatial.inertia_to_parent)."""
        PIa = zero_axes_after_projection(np.ones((6, 6), bool), self.S) if counting() else None
        if PIa is not None:                                     # symmetric: 21 entries, fewer
            k = int(np.triu(PIa).sum())                         # when S has unit axes (I^a S = 0)
            charge(k * self.n, k * self.n, kind="U D^-1 U^T", written=(21 * self.n, 21 * self.n))
        return inertia_to_parent(X, IA - self.times_Dinv(self.U) @ self.U.swapaxes(1, 2), PIa,
                                 by_axis=by_axis)        # seed 002, appendix: 22m + 25a

    def S_times_columns(self, Y, kind="S Y"):
        """S Y for columns Y (B, n, c) -> (B, 6, c): paper count, the products with S's non-unit
        entries (a unit-axis S places rows: 0 flops)."""
        c = Y.shape[-1]
        if counting():
            nz, unit = subspace_pattern(self.S)
            mul, add, _ = product_cost(nz, unit, np.ones((self.n, c), bool), np.zeros((self.n, c), bool))
            charge(mul, add, kind=kind, written=(6 * self.n * c, 6 * (self.n - 1) * c))
        return self.S @ Y

    def times_Dinv(self, A, pattern=None):
        """A D^-1 for a stack A (B, r, n); pattern: A's (r x n) structural pattern (paper count:
        its zero rows stay zero)."""
        r, n = A.shape[1], self.n
        rows = r if pattern is None else int(pattern.any(axis=1).sum())
        if n == 1:
            charge(rows, kind="A D^-1", written=(r, 0))
            return A * self.Dinv
        charge(rows * n * n, rows * n * (n - 1), kind="A D^-1", written=(r * n * n, r * n * (n - 1)))
        return A @ self.Dinv

    def project_rows(self, R, pattern=None):
        """(R S, R S D^-1) for rows R (B, r, 6) (pattern: R's (nz, unit), rows_pattern)."""
        nz, unit = pattern if pattern is not None else (None, None)
        RS = S_product(R, self.S, A_pattern=nz, kind="R S", A_unit=unit)
        return RS, self.times_Dinv(RS, self.RS_pattern(pattern))

    def RS_pattern(self, pattern):
        """Structural pattern of R S from R's (nz, unit) (None: untracked)."""
        if pattern is None or not counting():
            return None
        return product_cost(pattern[0], pattern[1], *subspace_pattern(self.S))[2]

    def propagate_rows(self, X, R, RS_Dinv, pattern=None):
        """(R - R S D^-1 U^T) X: rows carried across joint i into parent coordinates (eq. 12),
        with (rows, their (nz, unit) pattern: None when not counting). Paper count on R's
        pattern: the update's products on R S's nonzero rows and the columns that do not vanish
        (module doc), subtractions where R is nonzero too, then X row by row."""
        r, n = R.shape[1], self.n
        M = R - RS_Dinv @ self.U.swapaxes(1, 2)
        M[..., self.zero_cols] = 0.0
        P = None
        if counting():
            nz, unit = pattern if pattern is not None else full_rows(r)
            keep = ~self.zero_cols
            full = np.ones((n, 6), bool)
            mul, add, upd = product_cost(self.RS_pattern((nz, unit)), np.zeros((r, n), bool), full, ~full,
                                         mask=keep)
            upd &= keep
            charge(mul, add + add_cost(nz & keep, upd), kind="R - RS D^-1 U^T",
                   written=(r * n * 6, r * (n - 1) * 6 + r * 6))
            P = (nz | upd) & keep
        out = rows_times_transform(X, M, P)
        return out, (None if P is None else (rows_transform_cost(X, P)[2], np.zeros((r, 6), bool)))

    def branch_propagator(self, X, S_Dinv, SD):
        """(1 - S D^-1 U^T) X at a branching link (iP_i = 1, seed 000 Alg. 3 lines 7 and 13),
        with its (nz, unit) pattern (None when not counting). SD: S D^-1's pattern. Paper count:
        (S D^-1) U^T on S D^-1's nonzero rows and the columns that do not vanish, one subtraction
        per diagonal entry it touches; a row that stays e_j^T is X's row j, read off (E, r): free
        for the angular rows, (E rx)'s row for the linear ones (merged_pattern)."""
        M = np.eye(6) - S_Dinv @ self.U.swapaxes(1, 2)
        M[..., self.zero_cols] = 0.0
        if not counting():
            return rows_times_transform(X, M), None
        n, keep, full = self.n, ~self.zero_cols, np.ones((self.n, 6), bool)
        mul, add, upd = product_cost(SD, np.zeros_like(SD), full, ~full, mask=keep)
        upd &= keep
        eye = np.eye(6, dtype=bool)
        charge(mul, add + int((upd & eye).sum()), kind="1 - S D^-1 U^T",
               written=(36 * n, 36 * (n - 1)))
        nz, unit = (eye | upd) & keep, eye & ~upd & keep
        plain = unit.any(axis=1) & (nz.sum(axis=1) == 1)       # rows e_j^T
        E_nz, E_unit, r_nz = merged_pattern(X.structure if X.structure is not None
                                            else TransformStructure((GENERAL,)))
        mul, add, out = rows_transform_cost(X, nz & ~plain[:, None])
        rx = skew_pattern(r_nz)
        for j in np.flatnonzero(plain):
            if j < 3:
                out[j] = np.r_[E_nz[j], np.zeros(3, bool)]
            else:
                m, a, Erx = product_cost(E_nz[j - 3:j - 2], E_unit[j - 3:j - 2], rx, np.zeros((3, 3), bool))
                mul, add, out[j] = mul + m, add + a, np.r_[Erx[0], E_nz[j - 3]]
        charge(mul, add, kind="R X", written=(0, 0))
        with written_only():
            R = rows_times_transform(X, M)
        return R, (out, np.zeros((6, 6), bool))

    def rank_update(self, Om, RS, RS_Dinv, pattern=None, Om_pattern=None):
        """Om + R S D^-1 S^T R^T (Om None: zero), with the result's pattern (None when not
        counting). pattern: R S's (r x n) pattern (its zero rows and columns cost nothing),
        Om_pattern: Om's (additions only where both terms are nonzero)."""
        r, n = RS.shape[1], self.n
        update = RS_Dinv @ RS.swapaxes(1, 2)
        if not counting():
            return (update if Om is None else Om + update), None
        P = np.ones((r, n), bool) if pattern is None else pattern
        Pd = P.any(axis=1)[:, None] & np.ones((1, n), bool)     # R S D^-1: D^-1 mixes columns
        mul, add, upd = product_cost(Pd, np.zeros_like(P), P.T, np.zeros_like(P.T), symmetric=True)
        old = np.zeros((r, r), bool) if Om is None else (np.ones((r, r), bool) if Om_pattern is None else Om_pattern)
        add += add_cost(np.triu(old), np.triu(upd))
        charge(mul, add, kind="Om + RS D^-1 SR^T", written=(n * r * (r + 1) // 2, n * r * (r + 1) // 2))
        return (update if Om is None else Om + update), old | upd


def full_rows(r):
    """(nz, unit) of r general rows."""
    return np.ones((r, 6), bool), np.zeros((r, 6), bool)


def rows_pattern(K):
    """(nz, unit) of a constant stack of rows K (a contact's selection, seed 000's K_i): its
    structural zeros and +-1 entries, which the paper count exploits where K enters unchanged."""
    K = np.asarray(K, float)
    return K != 0, np.abs(K) == 1


def stacked_pattern(patterns, blocks):
    """rows_pattern of a vertical stack of `blocks` whose constant ones have `patterns` (None:
    general rows)."""
    nz = [p[0] if p is not None else np.ones(b.shape[-2:], bool) for p, b in zip(patterns, blocks)]
    unit = [p[1] if p is not None else np.zeros(b.shape[-2:], bool) for p, b in zip(patterns, blocks)]
    return np.concatenate(nz), np.concatenate(unit)


def inertia_scale(model):
    """Reference size for the articulated pivot check (largest body inertia entry)."""
    return max(1.0, float(np.abs(model.inertias).max())) if model.nbodies else 1.0


def initial_inertias(model, B):
    return np.repeat(np.asarray(model.inertias)[None], B, axis=0).swapaxes(0, 1).copy()
