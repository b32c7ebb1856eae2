"""Worst-case sparsity pattern of the tree transforms iX_lambda(i)(q), derived structurally
(seed 001, Sec. IV-D and Remark 4).

The body placement in its parent is R = T_R R_J(q), p = T_p + T_R p_J(q) (fixed tree placement
T then joint motion), so with E = R^T, r = p (spatial.py's compact form)

    iX_lambda(i) = [[E, 0], [-E rx, E]],   E = R_J(q)^T T_R^T,   r = T_p + T_R p_J(q).

Every joint type writes R_J(q) = sum_a alpha_a(q) Ra_a and p_J(q) = sum_b beta_b(q) pb_b with
basis functions that are linearly independent on the joint's configuration manifold
(Featherstone, Table 4.1):

    revolute   alpha = (1, sin, cos)                (R_J = k k^T + sin K - cos K^2)   beta = (1)
    prismatic  alpha = (1)                                                            beta = (1, d)
    planar     alpha = (1, sin, cos) about z                                          beta = (1, x, y)
    spherical  alpha = the 10 quadratic monomials of the unit quaternion (R_J is a homogeneous
               quadratic form in it; such forms vanish on the unit sphere only if they vanish)
    free       alpha = as spherical                                                   beta = (1, px, py, pz)

The rotational and translational coordinates of each joint are independent, so the products
alpha_a beta_b are again linearly independent and

    iX_lambda(i)(q) = sum_(a,b) alpha_a(q) beta_b(q) C_(a,b)          (C: constant 6x6)

An entry is nonzero for some q iff its coefficient vector (C_k[m, n])_k is nonzero; it is then a
nonzero analytic function of q, zero only on a measure-zero set. It is constant iff its
coefficient vector is a multiple of the coefficients of the constant function 1 (for the
quaternion basis: x^2 + y^2 + z^2 + w^2). Coefficients below STRUCTURAL_TOLERANCE (relative) are
round-off of exact zeros in the URDF placements (e.g. cos(pi/2) = 6e-17) and count as zero.
"""
from __future__ import annotations

import numpy as np
from scipy.sparse import csc_matrix

from ..model.model import WORLD
from ..spatial import skew

STRUCTURAL_TOLERANCE = 1e-12


def _translation_basis(joint):
    """p_J(q) = sum_b beta_b(q) pb[b] from the joint's translation(): returns (pb (Bn, 3),
    coefficients of 1 (Bn,)): the constant 0, then one direction per coordinate it reads."""
    dirs = [np.asarray(d, dtype=float) for _, d in joint.translation()]
    return np.vstack([np.zeros(3)] + dirs), np.r_[1.0, np.zeros(len(dirs))]


def transform_coefficients(joint, placement):
    """Coefficients of iX_lambda(i)(q) on the product basis alpha_a beta_b.

    Returns (C (K, 6, 6), one (K,)): iX = sum_k phi_k(q) C[k], and the constant function 1 has
    coefficients `one`. `placement` is the joint's fixed 4x4 tree placement T (X_T)."""
    Ra, alpha_one = joint.rotation_basis()
    pb, beta_one = _translation_basis(joint)
    TR, Tp = placement[:3, :3], placement[:3, 3]
    A, Bn = len(Ra), len(pb)
    C = np.zeros((A, Bn, 6, 6))
    for a in range(A):
        E_a = Ra[a].T @ TR.T                                  # E = R_J^T T_R^T
        for b in range(Bn):
            # r = T_p + T_R p_J: the constant T_p rides on the basis function beta = 1
            r_b = TR @ pb[b] + (Tp if beta_one[b] else 0.0)
            C[a, b, 3:, :3] = -E_a @ skew(r_b)                # -E rx (Featherstone eq. 2.24)
        # the E blocks carry beta = 1 (beta_one has a single unit entry)
        b1 = int(np.flatnonzero(beta_one)[0])
        C[a, b1, :3, :3] = E_a
        C[a, b1, 3:, 3:] = E_a
    return C.reshape(A * Bn, 6, 6), np.outer(alpha_one, beta_one).reshape(-1)


def transform_structure(joint, placement, tol=STRUCTURAL_TOLERANCE):
    """Worst-case structure of the 6x6 transform iX_lambda(i):

    nonzero  (6, 6) bool: entries that are nonzero for some configuration,
    constant (6, 6) float: the value of entries that do not depend on q, NaN for the others
             (zero entries have constant 0)."""
    C, one = transform_coefficients(joint, placement)
    scale = max(1.0, float(np.abs(C).max()))
    C = np.where(np.abs(C) > tol * scale, C, 0.0)
    coeff = C.reshape(len(C), 36).T                           # (36, K) coefficient vectors
    nonzero = np.any(coeff != 0.0, axis=1)
    # constant iff the coefficient vector is lambda * one
    lam = coeff @ one / (one @ one)
    residual = np.abs(coeff - np.outer(lam, one)).max(axis=1)
    constant = np.where(residual <= tol * scale, lam, np.nan)
    return nonzero.reshape(6, 6), constant.reshape(6, 6)


# --------------------------------------------------------------------------------------------
# The pattern of the whole D (eq. 5a-5e, 9a-9b, 15): one canonical CSC matrix, its constant
# entries, and where the state-dependent entries come from


class SystemPattern:
    """Worst-case pattern of D for given row/column block layouts (and measurement selectors
    {(kind, body): constant matrix or None for identity}).

    pattern          csc_matrix, every stored entry 1.0, canonical
    constant_values  (nnz,) value of q-independent entries, NaN for state-dependent ones
    always_nonzero   (nnz,) bool: constant (hence nonzero for every state) entries
    dynamic_index    (m,) data positions of the state-dependent entries
    dynamic_source   (m,) flat index into the (N, 6, 6) stack of transforms iX_lambda(i) that
                     fills each of them (eq. 5a uses iX_lambda(i), eq. 5d its transpose)
    """

    def __init__(self, model, rows, cols, selectors=None, tol=STRUCTURAL_TOLERANCE):
        R, C, K, S = [], [], [], []

        def add(row_key, col_key, mask, value, source=None):
            if row_key not in rows or col_key not in cols:
                return
            r, c = np.nonzero(mask)
            R.append(rows[row_key].start + r)
            C.append(cols[col_key].start + c)
            K.append(np.asarray(value, dtype=float)[r, c])
            S.append(np.full(len(r), -1) if source is None else source[r, c])

        eye6 = np.eye(6)
        flat = np.arange(36).reshape(6, 6)
        for i, joint in enumerate(model.joints):
            n = joint.nv
            Sj = np.where(np.abs(joint.S) > tol, joint.S, 0.0)
            I = model.inertias[i]
            # round-off zeros relative to the body's own inertia (no absolute floor: a 1e-9 kg
            # link's entries are real, and dropping them would silently change D)
            I = np.where(np.abs(I) > tol * np.abs(I).max(), I, 0.0)
            add(("ne_a", i), ("a", i), eye6, -eye6)                         # (5a) -1_6
            p = int(model.parents[i])
            if p != WORLD:
                nz, const = transform_structure(joint, model.joint_placements[i], tol)
                add(("ne_a", i), ("a", p), nz, const, 36 * i + flat)       # (5a) iX_lambda(i)
                # (5d) in the parent's row: lambda(i)X*_i = (iX_lambda(i))^T
                add(("ne_f", p), ("f", i), nz.T, const.T, 36 * i + flat.T)
            add(("ne_a", i), ("qdd", i), Sj != 0, Sj)                       # (5b) S_i
            add(("ne_f", i), ("f", i), eye6, -eye6)                         # (5c) -1_6
            add(("ne_f", i), ("a", i), I != 0, I)                           # (5c) I_i
            add(("ne_f", i), ("fx", i), eye6, -eye6)                        # (5d) -1_6
            add(("ne_tau", i), ("tau", i), np.eye(n), -np.eye(n))           # (5e) -1_{n_i}
            add(("ne_tau", i), ("f", i), Sj.T != 0, Sj.T)                   # (5e) S_i^T
            arm = np.diag(model.armature[model.v_slice(i)])                 # (5e) + diag(armature)
            add(("ne_tau", i), ("qdd", i), arm != 0, arm)                   #      qdd_i: rotor inertia
            for kind in ("fx", "qdd", "tau", "a", "f"):                     # (9a), (9b), (15)
                if ("y_" + kind, i) in rows:
                    sel = (selectors or {}).get((kind, i))
                    if sel is None:
                        sel = np.eye(cols[(kind, i)].size)
                    sel = np.where(np.abs(sel) > tol * np.abs(sel).max(initial=0.0), sel, 0.0)
                    add(("y_" + kind, i), (kind, i), sel != 0, sel)         # (17) D_Y, constant
        R, C, K, S = (np.concatenate(x + [np.zeros(0, dtype=x0)])
                      for x, x0 in ((R, int), (C, int), (K, float), (S, int)))   # [] for no bodies
        order = np.lexsort((R, C))                                         # CSC: by column, then row
        R, C, K, S = R[order], C[order], K[order], S[order]
        if np.any((np.diff(C) == 0) & (np.diff(R) == 0)):
            raise AssertionError("two blocks of D overlap")                 # blocks are disjoint
        nnz = len(R)
        self.pattern = csc_matrix((np.ones(nnz), (R, C)), shape=(rows.size, cols.size))
        self.pattern.sort_indices()
        assert self.pattern.nnz == nnz and np.array_equal(self.pattern.indices, R)
        self.constant_values = K
        self.always_nonzero = ~np.isnan(K)
        self.dynamic_index = np.flatnonzero(np.isnan(K))
        self.dynamic_source = S[self.dynamic_index]
        self.row_of_entry = R
        self.col_of_entry = C
