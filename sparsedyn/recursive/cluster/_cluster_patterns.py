"""Structural patterns of the cluster quantities, for the operation counter's "paper" convention
(opcount.py): the cluster algorithms are charged with the structure seed 003 exploits, as the
tree baselines are charged with their joints' (spatial_costs.py).

    block(S_i) G_k   (eq. 24): a unit-axis S_i selects rows of G_k (0 flops); G_k's pattern is
                     probed at random assembled states (constant for gears and belts, q-dependent
                     entries for differentials and four-bars)
    S_k              (eq. 24, 20): LambdaX_lambda is unit lower triangular, so body i's block of
                     S_k is S_i G_k[rows of i] plus iX_lambda(i) times the block of lambda(i)
    block(I_i)       (eq. 14): block diagonal; a child cluster adds X^T I^a X at the blocks of its
                     output bodies only (eq. 17: one nonzero block per block row)
    symmetric products (D, U D^-1 U^T, X^T I X): the upper triangle only

A pattern is (nz, unit): entries that can be nonzero, and those that are exactly +-1 in every
state (a free multiplication), as in spatial_costs.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ...opcount import charge, counting, suspended
from ...spatial_costs import add_cost, product_cost, subspace_pattern
from ..aba import _solve_small
from ..ltl import pattern as ltl_pattern
from ...transform_costs import TransformStructure, model_structures

PROBES = 4          # random assembled states probed for G_k's pattern


@dataclass(frozen=True)
class ClusterPattern:
    """Constant patterns of cluster k: S_k (6 n_b x m), block(I_i) (6 n_b square) and what
    building S_k costs (S_i G_k and the in-cluster transforms of eq. 20)."""

    S_nz: np.ndarray
    S_unit: np.ndarray
    g_nz: np.ndarray        # (n,) g_k's structurally nonzero entries (None: no constraint)
    I_nz: np.ndarray
    build: tuple            # (mul, add) of S_k from G_k
    written: tuple          # (mul, add) of the dense form of the same


def product_pattern(A_nz, A_unit, B_nz, B_unit):
    """(nz, unit) of A B: an entry is a unit when it is one product of two units."""
    terms = A_nz[:, :, None] & B_nz[None, :, :]
    units = terms & A_unit[:, :, None] & B_unit[None, :, :]
    one = terms.sum(axis=1) == 1
    return terms.any(axis=1), one & units.any(axis=1)


def _probe_G(cm, k):
    """(nz, unit) of G_k and the nz of g_k over PROBES random assembled states (None for G = 1)."""
    with suspended():
        q, yd, _ = cm.random_state(12345 + k, batch=PROBES)
        G, g = cm.cluster_explicit(k, q, yd)
    if G is None:
        return None, None
    return (np.any(G != 0, axis=0), np.all(np.abs(G) == 1, axis=0)), np.any(np.asarray(g) != 0, axis=0)


def _cluster_pattern(cm, k, structures):
    model, c = cm.model, cm.clusters[k]
    nb, m = len(c.bodies), c.ny
    G, g_nz = _probe_G(cm, k)
    S_nz, S_unit = np.zeros((6 * nb, m), bool), np.zeros((6 * nb, m), bool)
    mul = add = wmul = wadd = col = 0
    for li, i in enumerate(c.bodies):
        nz, unit = subspace_pattern(model.joints[i].S)
        rows, blk = slice(col, col + nz.shape[1]), slice(6 * li, 6 * li + 6)
        col += nz.shape[1]
        if G is None:
            S_nz[blk, rows], S_unit[blk, rows] = nz, unit
        else:
            dm, da, _ = product_cost(nz, unit, G[0][rows], G[1][rows])
            mul, add = mul + dm, add + da
            wmul, wadd = wmul + 6 * nz.shape[1] * m, wadd + 6 * (nz.shape[1] - 1) * m
            S_nz[blk], S_unit[blk] = product_pattern(nz, unit, G[0][rows], G[1][rows])
        lp = cm.local_parents[k][li]
        if lp < 0:
            continue
        for j in range(m):                          # + iX_lambda(i) (column j of lambda(i)'s block)
            parent = S_nz[6 * lp:6 * lp + 6, j]
            if not parent.any():
                continue
            dm, da, out = structures[i].apply_cost("X m", parent)
            own = S_nz[blk, j].copy()
            mul, add = mul + dm, add + da + add_cost(own, out)
            S_nz[blk, j] = own | out
            S_unit[blk, j] &= ~out
        wmul, wadd = wmul + 24 * m, wadd + 18 * m
    I_nz = np.kron(np.eye(nb, dtype=bool), np.ones((6, 6), bool))
    return ClusterPattern(S_nz, S_unit, g_nz, I_nz, (mul, add), (wmul, wadd))


_PATTERNS = weakref.WeakKeyDictionary()


def cluster_patterns(cm):
    """ClusterPattern of every cluster of `cm` (cached per cluster model)."""
    hit = _PATTERNS.get(cm)
    if hit is None:
        structures = model_structures(cm.model)
        hit = _PATTERNS[cm] = tuple(_cluster_pattern(cm, k, structures) for k in range(cm.nclusters))
    return hit


def composed_structure(X_child, X_parent):
    """Structure of iX_lambda(i) lambda(i)X_Lambda as the sequence of both transforms' factors
    (applied first to last: the parent's first)."""
    a, b = X_parent.structure, X_child.structure
    if a is None or b is None:
        return None
    return TransformStructure(tuple(a.factors) + tuple(b.factors))


def zero_axes(P, S_nz, S_unit):
    """Pattern of I^a = I^A - U D^-1 U^T: I^a S = 0, so a column of S_k with one structural
    nonzero that is a unit zeroes that row and column (spatial_costs.zero_axes_after_projection
    for a cluster)."""
    out = P.copy()
    for j in range(S_nz.shape[1]):
        rows = np.flatnonzero(S_nz[:, j])
        if rows.size == 1 and S_unit[rows[0], j]:
            out[rows[0], :] = False
            out[:, rows[0]] = False
    return out


def rows_of(nz):
    """Rows of a pattern that can be nonzero."""
    return np.flatnonzero(nz.any(axis=1))


def charged_product(A, B, A_pat, B_pat, kind, symmetric=False, mask=True):
    """A @ B (batched, computed dense) charged by the patterns (nz, unit) of A and B (None: dense,
    no units); symmetric: the result is symmetric, its upper triangle (on `mask`) is charged.
    Returns (A B, its nz pattern, None when not counting)."""
    if not counting():
        return A @ B, None
    r, k, n = A.shape[-2], A.shape[-1], B.shape[-1]
    full = (np.ones((r, k), bool), np.zeros((r, k), bool)), (np.ones((k, n), bool), np.zeros((k, n), bool))
    mul, add, out = product_cost(*(full[0] if A_pat is None else A_pat), *(full[1] if B_pat is None else B_pat),
                                 symmetric=symmetric, mask=mask)
    charge(mul, add, kind=kind, written=(r * k * n, r * (k - 1) * n))
    return A @ B, out


def dense(nz):
    """(nz, no units) for a pattern nz of computed (not constant) entries; None stays None."""
    return None if nz is None else (nz, np.zeros_like(nz))


def solve_rows(D, Ut, rows, kind):
    """D^-1 Ut for (B, m, m) pivots and Ut (B, m, n): paper count, the product with D^-1 (inverted
    once, aba.charge_pivot_inverse) on the columns `rows` of Ut that can be nonzero (all: None)."""
    m, n = D.shape[-1], Ut.shape[-1]
    r = n if rows is None else len(rows)
    charge(m * m * r, m * (m - 1) * r, kind=kind, written=(m ** 3 // 3 + m * m, m ** 3 // 3, m))
    with suspended():
        return _solve_small(D, Ut, kind)


_EXPLICIT = weakref.WeakKeyDictionary()


def explicit_pattern(cm):
    """((G nz, G unit), g nz) of the global G (nv x ny), g (nv) (ClusterModel.explicit): each
    cluster's probed block, the identity for clusters without constraint (cached per model)."""
    if cm not in _EXPLICIT:
        _EXPLICIT[cm] = _explicit_pattern(cm)
    return _EXPLICIT[cm]


def _explicit_pattern(cm):
    m = cm.model
    G_nz, G_unit = np.zeros((m.nv, cm.ny), bool), np.zeros((m.nv, cm.ny), bool)
    g_nz = np.zeros(m.nv, bool)
    for k, c in enumerate(cm.clusters):
        (Gk, gk) = _probe_G(cm, k)
        rows, cols = cm.v_indices[k][:, None], np.arange(cm.y_index[k], cm.y_index[k] + c.ny)
        if Gk is None:
            G_nz[rows, cols] = G_unit[rows, cols] = np.eye(c.nv, dtype=bool)
        else:
            G_nz[rows, cols], G_unit[rows, cols] = Gk
            g_nz[cm.v_indices[k]] = gk
    return (G_nz, G_unit), g_nz


def jacobian_pattern(model, frames):
    """(6 m x nv) pattern of stacked frame Jacobians: the columns of the joints supporting each
    frame's body (the others are zero)."""
    out = np.zeros((6 * len(frames), model.nv), bool)
    for f, name in enumerate(frames):
        frame = model.frames[name] if name in model.frames else model.joint_frames[name]
        for i in model.support(frame.body):
            out[6 * f:6 * f + 6, model.v_slice(i)] = True
    return out


def mass_matrix_pattern(model):
    """(nv x nv) branch-induced pattern of H = CRBA: H_ij can be nonzero only if one of the DoFs
    i, j supports the other (Featherstone; the no-fill pattern ltl.py factorizes in)."""
    m = ltl_pattern(model).mask
    return m | m.T


_IMPLICIT = weakref.WeakKeyDictionary()


def implicit_pattern(cm):
    """(nc x nv) pattern of the global loop Jacobian K (ClusterModel.implicit): each cluster's rows
    on its own DoFs, probed at PROBES random assembled states (cached per model)."""
    if cm not in _IMPLICIT:
        with suspended():
            q, yd, _ = cm.random_state(54321, batch=PROBES)
            K, _ = cm.implicit(q, cm.spanning_velocity(q, yd))
        _IMPLICIT[cm] = np.any(K != 0, axis=0)
    return _IMPLICIT[cm]

