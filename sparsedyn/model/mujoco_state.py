"""States between MuJoCo's conventions and ours, for models whose joints are in MuJoCo's order
(load_mjcf / from_mujoco models; hinge and slide joints need no conversion):

                     MuJoCo                                 sparsedyn (Pinocchio's)
    free   qpos      [p (3), qw qx qy qz]                   [p (3), qx qy qz qw]
           qvel      [p' in the world, omega in the body]   [R^T p', omega in the body]
           qacc      [p'' in the world, omega']             d/dt of v: [R^T p'' - omega x R^T p', omega']
           qfrc      [force in the world, torque (body)]    [R^T force, torque (body)]
    ball   qpos      [qw qx qy qz]                          [qx qy qz qw]
           qvel/qacc/qfrc: the same (local angular velocity)

R is the rotation of the free joint's quaternion. Forces are dual to velocities (qfrc . qvel =
tau . v), so mass matrices convert as M_mujoco = T^T M T with v = T qvel. Every function takes a
batch (B, n) or one state (n,), and B = 0 gives empty results.
"""
from __future__ import annotations

import numpy as np

from ..batch import as_batch, check_configuration
from ..errors import ModelError
from ..spatial import quaternion_to_rotation

_WXYZ_TO_XYZW = np.array([1, 2, 3, 0])
_XYZW_TO_WXYZ = np.array([3, 0, 1, 2])


def _joints(model):
    """[(q start, v start, kind)] of the quaternion joints; ModelError for joints MuJoCo lacks."""
    out = []
    for i, j in enumerate(model.joints):
        if j.kind not in ("free", "spherical", "revolute", "prismatic"):
            raise ModelError(f"joint {j.name!r}: MuJoCo has no {j.kind} joint (hinge, slide, ball "
                             f"and free only)")
        if j.kind in ("free", "spherical"):
            out.append((int(model.q_index[i]), int(model.v_index[i]), j.kind))
    return out


def _reorder(model, q, name, order):
    q, single = as_batch(q, model.nq, name)
    out = np.array(q)
    for qi, _, kind in _joints(model):
        k = qi + (3 if kind == "free" else 0)
        out[:, k:k + 4] = q[:, k:k + 4][:, order]
    return out[0] if single else out


def from_mujoco_q(model, qpos):
    """MuJoCo qpos (B, nq) or (nq,) -> our q: quaternions (w, x, y, z) -> (x, y, z, w)."""
    return _reorder(model, qpos, "qpos", _WXYZ_TO_XYZW)


def to_mujoco_q(model, q):
    """Our q -> MuJoCo qpos: quaternions (x, y, z, w) -> (w, x, y, z)."""
    return _reorder(model, q, "q", _XYZW_TO_WXYZ)


def _free_rotations(model, q):
    """[(v start, R (B, 3, 3))] of the free joints of our (checked) q."""
    return [(vi, quaternion_to_rotation(q[:, qi + 3:qi + 7]))
            for qi, vi, kind in _joints(model) if kind == "free"]


def _batch(model, q, x, names, ours):
    """(our q, a copy of x, free-joint rotations, single) for a configuration (ours, or MuJoCo's
    qpos) checked as every entry point checks it (unit quaternions, named) and x (B, nv)."""
    q, sq = as_batch(q, model.nq, names[0])
    q, _ = check_configuration(model, q if ours else from_mujoco_q(model, q), names[0])
    x, sx = as_batch(x, model.nv, names[1], batch=q.shape[0] if q.shape[0] != 1 else None)
    if q.shape[0] == 1 and x.shape[0] != 1:
        q = np.broadcast_to(q, (x.shape[0], model.nq))
    return q, np.array(x), _free_rotations(model, q), sq and sx


def _rotate(x, rotations, transpose):
    """x's free linear parts times R^T (transpose) or R."""
    for vi, R in rotations:
        x[:, vi:vi + 3] = np.einsum("bji,bj->bi" if transpose else "bij,bj->bi", R, x[:, vi:vi + 3])
    return x


def _rotated(model, state, x, names, ours, to_body):
    """x with every free joint's linear part rotated into the body (R^T) or the world (R)."""
    _, x, rot, single = _batch(model, state, x, names, ours)
    x = _rotate(x, rot, to_body)
    return x[0] if single else x


def from_mujoco_v(model, qpos, qvel):
    """MuJoCo qvel -> our v: a free joint's world linear velocity becomes the body's (R^T p')."""
    return _rotated(model, qpos, qvel, ("qpos", "qvel"), False, True)


def to_mujoco_v(model, q, v):
    """Our v -> MuJoCo qvel: a free joint's body linear velocity becomes the world's (R v)."""
    return _rotated(model, q, v, ("q", "v"), True, False)


def to_mujoco_tau(model, q, tau):
    """Our generalized forces -> MuJoCo's (qfrc_applied, mj_rne): a free joint's force in the
    body frame becomes the world's (R f)."""
    return _rotated(model, q, tau, ("q", "tau"), True, False)


def from_mujoco_tau(model, qpos, qfrc):
    """MuJoCo generalized forces -> ours: a free joint's world force becomes the body's (R^T f)."""
    return _rotated(model, qpos, qfrc, ("qpos", "qfrc"), False, True)


def _omega_cross_v(v, vi):
    """omega x v_linear of the free joint at v offset vi, with both in the body frame."""
    return np.cross(v[:, vi + 3:vi + 6], v[:, vi:vi + 3])


def from_mujoco_a(model, qpos, qvel, qacc):
    """MuJoCo qacc -> our a = dv/dt: for a free joint R^T p'' - omega x (R^T p')."""
    q, a, rot, single = _batch(model, qpos, qacc, ("qpos", "qacc"), False)
    v = _rotate(np.array(as_batch(qvel, model.nv, "qvel", batch=q.shape[0])[0]), rot, True)
    a = _rotate(a, rot, True)
    for vi, _ in rot:
        a[:, vi:vi + 3] -= _omega_cross_v(v, vi)
    return a[0] if single else a


def to_mujoco_a(model, q, v, a):
    """Our a -> MuJoCo qacc: for a free joint p'' = R (a_linear + omega x v_linear)."""
    q, a, rot, single = _batch(model, q, a, ("q", "a"), True)
    v = as_batch(v, model.nv, "v", batch=q.shape[0])[0]
    for vi, _ in rot:
        a[:, vi:vi + 3] += _omega_cross_v(v, vi)
    a = _rotate(a, rot, False)
    return a[0] if single else a
