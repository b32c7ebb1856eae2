"""Pieces shared by the recursive algorithms: joint-space products with S, body inertia products,
external wrenches and gravity, all batched and charged to the operation counter."""
from __future__ import annotations

import numpy as np

from ..batch import as_batch
from ..model.model import WORLD
from ..opcount import charge, charge_matmul, counting
from ..spatial import S_product, Transform, to_angular_first  # noqa: F401 (S_product re-exported)
from ..spatial_costs import (FULL6, add_cost, linear_cost, product_cost, rigid_inertia_cost,
                             subspace_pattern, symmetric_matvec_cost)


def S_times(S, x):
    """S x: joint-space (B, n) -> motion (B, 6). Paper count: the nonzero, non-unit products of S
    (a unit-axis S is a selection, 0 flops: Featherstone Sec. 10)."""
    n = S.shape[1]
    if counting():
        nz, unit = subspace_pattern(S)
        mul, add, _ = linear_cost(nz, unit, np.ones(n, bool))
        charge(mul, add, kind="S*x", written=(6 * n, 6 * (n - 1)))
    return x @ S.T


def S_transpose_times(S, f, pattern=None):
    """S^T f: force (B, 6) -> joint space (B, n)."""
    n = S.shape[1]
    if counting():
        nz, unit = subspace_pattern(S)
        mul, add, _ = linear_cost(nz.T, unit.T, FULL6 if pattern is None else pattern)
        charge(mul, add, kind="S^T*f", written=(6 * n, 5 * n))
    return f @ S


def subspace_out_pattern(S):
    """Structural pattern of S x (the rows of S that are not zero)."""
    return np.any(np.asarray(S) != 0, axis=1)


def inertia_times(I, m, pattern=None):
    """I m for a rigid-body spatial inertia (6,6) or (B,6,6) and motion (B,6): paper count, the
    compact form (m, h, Ibar) of Featherstone's Appendix A (24m + 18a dense) on m's pattern."""
    if counting():
        mul, add, _ = rigid_inertia_cost(FULL6 if pattern is None else pattern)
        charge(mul, add, kind="I*m", written=(36, 30))
    return np.einsum("...ij,...j->...i", I, m)


def articulated_times(IA, m, IA_pattern=None, pattern=None):
    """I^A m for a symmetric articulated inertia (B,6,6): paper count, the products of its
    structurally nonzero entries with m's."""
    if counting():
        P = np.ones((6, 6), bool) if IA_pattern is None else IA_pattern
        mul, add, _ = symmetric_matvec_cost(P, FULL6 if pattern is None else pattern)
        charge(mul, add, kind="I^A*m", written=(36, 30))
    return np.einsum("...ij,...j->...i", IA, m)


def symmetric_update(U, W, mask=None):
    """U W (B, 6, 6) for U (B, 6, n), W = D^-1 U^T (B, n, 6): the symmetric update U D^-1 U^T.
    Paper count: its upper triangle, on the entries of `mask` (I^a's pattern) only, with the
    subtraction from I^A there; as written: a dense product."""
    n = U.shape[-1]
    if counting():
        full = np.ones((6, n), bool)
        keep = np.ones((6, 6), bool) if mask is None else mask
        mul, add, _ = product_cost(full, ~full, full.T, ~full.T, symmetric=True, mask=keep)
        charge(mul, add + int(np.triu(keep).sum()), kind="U D^-1 U^T", written=(36 * n, 36 * (n - 1)))
    return U @ W


def column_times(U, x):
    """U x for U (B, 6, n), x (B, n) (paper count; uncharged as written)."""
    n = U.shape[-1]
    charge(6 * n, 6 * (n - 1), kind="U x", written=(0, 0))
    return np.einsum("bij,bj->bi", U, x)


def row_times(U, m, pattern=None):
    """U^T m for U (B, 6, n), m (B, 6) of pattern `pattern` (paper count; uncharged as written)."""
    n = U.shape[-1]
    if counting():
        P = FULL6 if pattern is None else pattern
        mul, add, _ = linear_cost(np.ones((n, 6), bool)[:, P], np.zeros((n, 6), bool)[:, P],
                                  np.ones(int(P.sum()), bool))
        charge(mul, add, kind="U^T m", written=(0, 0))
    return np.einsum("bji,bj->bi", U, m)


def charge_sum(p, q, kind="+"):
    """Paper count of adding two vectors of patterns p, q (the as-written count leaves vector
    additions out); returns the sum's pattern (None when not counting)."""
    if p is None or q is None:
        return None
    charge(add=add_cost(p, q), kind=kind, written=(0, 0))
    return p | q


def tracked(pattern):
    """The structural pattern to carry through a sweep: `pattern` when counting, else None (the
    primitives then skip all structure analysis)."""
    return pattern if counting() else None


def out_pattern(cost, *patterns, **kw):
    """Pattern of a primitive's result from its cost function (spatial_costs) and its operands'
    patterns; None when they are not tracked."""
    if any(p is None for p in patterns):
        return None
    return cost(*patterns, **kw)[2]


def charge_external(f_ext_body, i, pattern):
    """Paper count of subtracting body i's external wrench (6 additions when it has one)."""
    if pattern is not None and f_ext_body[:, i].any():
        charge(add=add_cost(pattern, FULL6), kind="- f_ext", written=(0, 0))
        return FULL6
    return pattern


def gravity_pattern(model):
    """Structural pattern of a_0 = -a_g (angular-first)."""
    return tracked(np.r_[np.zeros(3, bool), np.asarray(model.gravity) != 0])


def matmul(A, B, kind="matmul"):
    """Batched dense product with its cost charged (shapes (..., m, k) @ (..., k, n))."""
    charge_matmul(A.shape[-2], A.shape[-1], B.shape[-1], kind=kind)
    return A @ B


def gravity_acceleration(model, B):
    """a_0 = -a_g (Nori, Sec. IV-A): the world's fictitious upward acceleration, angular-first."""
    a0 = np.zeros((B, 6))
    a0[:, 3:] = -model.gravity
    return a0


def external_forces(model, f_ext, B):
    """{link name: wrench in the link frame, linear-first, (6,) or (B, 6)} -> (B, N, 6) body-frame
    wrenches, angular-first. Several links merged into one body add up; a wrench on a link welded
    to the fixed base acts on the world and is dropped, as in Pinocchio."""
    out = np.zeros((B, model.nbodies, 6))
    if not f_ext:
        return out
    if not isinstance(f_ext, dict):
        raise ValueError("f_ext: expected a dict {link name: wrench (6,) or (B, 6)}")
    for name, wrench in f_ext.items():
        if name not in model.frames:
            raise KeyError(f"f_ext: model {model.name!r} has no link named {name!r}")
        w, _ = as_batch(wrench, 6, f"f_ext[{name!r}]", batch=B)
        frame = model.frames[name]
        if frame.body == WORLD:
            continue
        T = frame.placement
        lXb = Transform.from_placement(np.broadcast_to(T[:3, :3], (B, 3, 3)),
                                       np.broadcast_to(T[:3, 3], (B, 3)))
        out[:, frame.body] += lXb.transpose_apply_force(to_angular_first(w))
    return out


def joint_armature(model, i):
    """diag(armature) (n_i, n_i) of joint i's velocity coordinates (Model.with_armature: the
    rotor inertia each adds to the joint-space inertia), or None where it is zero; charges the
    n_i additions it costs where it is used."""
    arm = model.armature[model.v_slice(i)]
    if not arm.any():
        return None
    charge(add=int(np.count_nonzero(arm)), kind="armature")
    return np.diag(arm)


def refuse_armature(model, algorithm, instead):
    """ModelError naming the joints if the model has armature, for an algorithm whose
    formulation has no joint-space inertia to add it to (a silent omission would change M)."""
    if not model.has_armature:
        return
    from ..errors import ModelError
    joints = model.joints_of_coordinates(np.flatnonzero(model.armature))
    raise ModelError(f"{algorithm}: model {model.name!r} has armature (rotor inertia) on joints "
                     f"{joints[:8]}{' ...' if len(joints) > 8 else ''}, which this formulation "
                     f"does not model; use {instead}, or model.with_armature(zeros) to drop it")
