"""X^T I X for a rigid-body (or composite) inertia in its 10-parameter form (m, h, Ibar).

Featherstone, Table 2.5 (rigid-body inertia transform), with X = BX_A = (E, r), I in B:

    m' = m,   y = E^T h,   h' = y + m r,   Ibar' = E^T Ibar E - rx yx - h'x rx

(h = m c, I = [[Ibar, hx], [hx^T, m 1]]). Only Ibar's upper triangle and the 3 + 1 other
parameters are formed, against 21 entries of a general symmetric 6x6 (spatial.inertia_to_parent):
the CRBA's composite inertias are rigid (a sum of rigid inertias), so its congruence costs what an
optimised CRBA pays. Where E is a rotation about a coordinate axis (X.structure.axis) E^T Ibar E
is done by double angles (axis_rotation.py) and E^T h as a 2-vector rotation (4m + 2a).
Paper count: products with structurally nonzero entries of E and r (transform_costs.py); as
written: the general compact form's 198m + 144a.
"""
from __future__ import annotations

import numpy as np

from .axis_rotation import axis_indices, rotate_blocks, rotate_cost
from .opcount import charge, counting
from .spatial import skew
from .spatial_costs import add_cost, linear_cost, product_cost, skew_pattern
from .transform_costs import GENERAL, TransformStructure

FULL3 = np.ones(3, dtype=bool)
NONE33 = np.zeros((3, 3), dtype=bool)


def rigid_inertia_to_parent(X, I):
    """X^T I X (..., 6, 6) for rigid-body inertias I (..., 6, 6) (Table 2.5 form, module doc)."""
    st = X.structure if X.structure is not None else TransformStructure((GENERAL,))
    if counting():
        mul, add = rigid_congruence_cost(st)
        charge(mul, add, kind="X^T I X", written=(198, 144))
    m = I[..., 3, 3]
    h = np.stack((I[..., 2, 4], I[..., 0, 5], I[..., 1, 3]), axis=-1)   # hx = I[:3, 3:]
    E, r = X.E, X.r
    if st.axis is not None:
        i, j = axis_indices(st.axis)
        c, s = E[..., i, i], E[..., i, j]
        y = np.empty(np.broadcast_shapes(h.shape, E.shape[:-1]))
        y[..., st.axis] = h[..., st.axis]
        y[..., i] = c * h[..., i] - s * h[..., j]                    # E2^T (h_i, h_j)
        y[..., j] = s * h[..., i] + c * h[..., j]
        Ibar = rotate_blocks(E, [(I[..., :3, :3], True)], st.axis)[0]
    else:
        y = np.einsum("...ji,...j->...i", E, h)
        Ibar = np.swapaxes(E, -1, -2) @ I[..., :3, :3] @ E
    z = y + m[..., None] * r                                         # h'
    rx = skew(r)
    Ibar = Ibar - rx @ skew(y) - skew(z) @ rx
    out = np.empty(np.broadcast_shapes(I.shape, E.shape[:-2] + (6, 6)))
    out[..., :3, :3] = Ibar
    out[..., :3, 3:] = skew(z)
    out[..., 3:, :3] = np.swapaxes(out[..., :3, 3:], -1, -2)
    out[..., 3:, 3:] = m[..., None, None] * np.eye(3)             # broadcast over E's batch
    return out


def rigid_congruence_cost(st):
    """(mul, add) of rigid_inertia_to_parent for the transform structure st (m, h, Ibar general)."""
    cache = st.__dict__.setdefault("_cache", {})
    if "rigid" not in cache:
        E_nz, E_unit, r_nz = merged_pattern(st)
        if st.axis is not None:
            mul, add, _ = rotate_cost([(np.ones((3, 3), bool), True)], st.axis)
            mul, add = mul + 4, add + 2                              # E^T h: a 2-vector rotated
        else:
            mul, add, _ = linear_cost(E_nz.T, E_unit.T, FULL3)       # y = E^T h
            m1, a1, G = product_cost(np.ones((3, 3), bool), NONE33, E_nz, E_unit)       # Ibar E
            m2, a2, _ = product_cost(E_nz.T, E_unit.T, G, NONE33, symmetric=True)     # E^T (.)
            mul, add = mul + m1 + m2, add + a1 + a2
        k = int(r_nz.sum())                                          # h' = y + m r
        mul, add = mul + k, add + k
        rx = skew_pattern(r_nz)
        full = skew_pattern(FULL3)
        m1, a1, P1 = product_cost(rx, NONE33, full, NONE33, symmetric=True)   # rx yx, upper
        m2, a2, P2 = product_cost(full, NONE33, rx, NONE33, symmetric=True)   # h'x rx, upper
        upper = np.triu(np.ones((3, 3), bool))
        adds = add_cost(upper, P1 & upper) + add_cost(upper, P2 & upper)      # Ibar - (.) - (.)
        cache["rigid"] = (mul + m1 + m2, add + a1 + a2 + adds)
    return cache["rigid"]


def merged_pattern(st):
    """(E nz, E unit, r nz) of the product of st's factors, X = X_J X_T: E = E_J E_T,
    r = r_T + E_T^T r_J."""
    E_nz, E_unit, r_nz = np.eye(3, dtype=bool), np.eye(3, dtype=bool), np.zeros(3, dtype=bool)
    for f in st.factors:                                             # X_T first
        terms = f.E_nz.astype(int) @ E_nz.astype(int)
        one = (f.E_unit.astype(int) @ E_unit.astype(int)) == 1
        r_nz = r_nz | (E_nz.T.astype(int) @ f.r_nz.astype(int) > 0)
        E_nz, E_unit = terms > 0, (terms == 1) & one
    return E_nz, E_unit, r_nz
