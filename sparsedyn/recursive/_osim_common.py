"""Pieces shared by the recursive Delassus algorithms (PV-OSIM, PV-OSIMr, EFPA), batched, in
body-local coordinates and charged to the operation counter.

Notation (seed 000, eqs. (7)-(12), local-frame form): U_i = H^A_i S_i, D_i = S_i^T U_i,
Om_i = S_i D_i^-1 S_i^T, and the force propagator from link i to its parent, including the change
of coordinates X_i = iX_lambda(i):

    lambda(i)P_i = X_i^T (1 - U_i D_i^-1 S_i^T),  so  R lambda(i)P_i^T = (R - (R S_i) D_i^-1 U_i^T) X_i

for a stack of rows R (r x 6): every extended motion propagator (EMP, CEMP) is such a stack.
"""
from __future__ import annotations

import numpy as np

from ..opcount import charge, charge_matmul, counting
from ..spatial import cross3, inertia_to_parent, rows_times_transform
from ..spatial_costs import (ldlt_invert_cost, product_cost, subspace_pattern,
                             zero_axes_after_projection)
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

    def times_Dinv(self, A):
        """A D^-1 for a stack A (B, r, n)."""
        if self.n == 1:
            charge(A.shape[1], kind="A D^-1")
            return A * self.Dinv
        charge_matmul(A.shape[1], self.n, self.n, kind="A D^-1")
        return A @ self.Dinv

    def project_rows(self, R, pattern=None):
        """(R S, R S D^-1) for rows R (B, r, 6) (pattern: R's constant (nz, unit), rows_pattern)."""
        nz, unit = pattern if pattern is not None else (None, None)
        RS = S_product(R, self.S, A_pattern=nz, kind="R S", A_unit=unit)
        return RS, self.times_Dinv(RS)

    def propagate_rows(self, X, R, RS_Dinv, pattern=None):
        """(R - R S D^-1 U^T) X: rows carried across joint i into parent coordinates (eq. 12);
        paper count: subtracting from R's structural zeros is free (pattern: rows_pattern)."""
        charge_matmul(R.shape[1], self.n, 6, kind="R - RS D^-1 U^T")
        sub = R.shape[1] * 6 if pattern is None else int(pattern[0].sum())
        charge(add=sub, kind="R - RS D^-1 U^T", written=(0, R.shape[1] * 6))
        return rows_times_transform(X, R - RS_Dinv @ self.U.swapaxes(1, 2))

    def rank_update(self, Om, RS, RS_Dinv):
        """Om + R S D^-1 S^T R^T (Om None: zero)."""
        r = RS.shape[1]
        charge(self.n * r * (r + 1) // 2, self.n * r * (r + 1) // 2, kind="Om + RS D^-1 SR^T")
        update = RS_Dinv @ RS.swapaxes(1, 2)
        return update if Om is None else Om + update


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
