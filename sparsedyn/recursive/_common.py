"""Pieces shared by the recursive algorithms: joint-space products with S, body inertia products,
external wrenches and gravity, all batched and charged to the operation counter."""
from __future__ import annotations

import numpy as np

from ..batch import as_batch
from ..model.model import WORLD
from ..opcount import charge, charge_matmul
from ..spatial import Transform, to_angular_first


def S_times(S, x):
    """S x: joint-space (B, n) -> motion (B, 6)."""
    n = S.shape[1]
    charge(6 * n, 6 * (n - 1), kind="S*x")
    return x @ S.T


def S_transpose_times(S, f):
    """S^T f: force (B, 6) -> joint space (B, n)."""
    n = S.shape[1]
    charge(6 * n, 5 * n, kind="S^T*f")
    return f @ S


def inertia_times(I, m):
    """I m for a spatial inertia (6,6) or (B,6,6) and motion (B,6)."""
    charge(36, 30, kind="I*m")
    return np.einsum("...ij,...j->...i", I, m)


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
