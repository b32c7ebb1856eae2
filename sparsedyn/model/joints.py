"""Joint models (Featherstone, Table 4.1): configuration -> joint transform, motion subspace S.

Every joint here has a CONSTANT motion subspace S (6 x n_v, angular-first) in the successor frame
and zero joint bias velocity c_J, because velocities are expressed in the successor frame as
Pinocchio does (free-flyer: local linear and angular velocity; spherical: local angular velocity;
planar: local (vx, vy, wz)). Configurations:

    revolute / continuous : 1 angle              (one coordinate, not Pinocchio's cos/sin)
    prismatic             : 1 displacement
    spherical             : quaternion (x, y, z, w),               n_v = 3
    planar                : (x, y, theta) in the joint's xy-plane,  n_v = 3 (vx, vy, wz local)
    free (free-flyer)     : position (3) + quaternion (x, y, z, w), n_v = 6 ([v; omega], local
                            frame, Pinocchio's layout; S permutes it into angular-first motion)
    fixed                 : merged into the parent body by the model builder (never instantiated
                            as a movable joint).
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..spatial import quaternion_to_rotation, rotation_about_axis, skew


class Joint:
    """Base class. Subclasses define nq, nv, S (6 x nv, angular-first) and `placement(qj)`."""

    kind = "abstract"
    nq = 0
    nv = 0

    def __init__(self, name, axis=None):
        self.name = name
        self.axis = None if axis is None else _unit_axis(name, axis)
        self.S = self._subspace()
        self.S.setflags(write=False)

    def _subspace(self):
        raise NotImplementedError

    def placement(self, qj):
        """(R, p) of the successor frame in the predecessor (joint) frame, for qj of shape (B, nq)."""
        raise NotImplementedError

    def neutral(self):
        return np.zeros(self.nq)

    def random_configuration(self, rng, lower=None, upper=None):
        lo = -np.pi if lower is None or not np.isfinite(lower) else lower
        hi = np.pi if upper is None or not np.isfinite(upper) else upper
        return rng.uniform(lo, hi, size=self.nq)

    def integrate(self, qj, vj_dt):
        """q (+) v dt on the joint's configuration manifold (batched)."""
        return qj + vj_dt

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


def _unit_axis(name, axis):
    axis = np.asarray(axis, dtype=float).reshape(-1)
    n = np.linalg.norm(axis) if axis.shape == (3,) and np.all(np.isfinite(axis)) else 0.0
    if n < 1e-12:
        raise ModelError(f"joint {name!r}: axis {axis.tolist()} is not a non-zero 3-vector")
    return axis / n


class RevoluteJoint(Joint):
    kind = "revolute"
    nq = nv = 1

    def _subspace(self):
        return np.concatenate((self.axis, np.zeros(3)))[:, None]

    def placement(self, qj):
        R = rotation_about_axis(self.axis, qj[..., 0])
        return R, np.zeros(qj.shape[:-1] + (3,))


class PrismaticJoint(Joint):
    kind = "prismatic"
    nq = nv = 1

    def _subspace(self):
        return np.concatenate((np.zeros(3), self.axis))[:, None]

    def placement(self, qj):
        R = np.broadcast_to(np.eye(3), qj.shape[:-1] + (3, 3))
        return R, qj[..., 0:1] * self.axis

    def random_configuration(self, rng, lower=None, upper=None):
        lo = -0.5 if lower is None or not np.isfinite(lower) else lower
        hi = 0.5 if upper is None or not np.isfinite(upper) else upper
        return rng.uniform(lo, hi, size=1)


def _random_unit_quaternion(rng):
    quat = rng.normal(size=4)
    return quat / np.linalg.norm(quat)


def _quaternion_integrate(quat, omega_dt):
    """Right-multiply the unit quaternion (x, y, z, w) by exp(omega_dt / 2) (local increment)."""
    angle = np.linalg.norm(omega_dt, axis=-1, keepdims=True)
    half = 0.5 * angle
    safe = np.where(angle > 1e-12, angle, 1.0)
    axis_s = np.where(angle > 1e-12, np.sin(half) / safe, 0.5) * omega_dt
    dq = np.concatenate((axis_s, np.cos(half)), axis=-1)
    x1, y1, z1, w1 = np.moveaxis(quat, -1, 0)
    x2, y2, z2, w2 = np.moveaxis(dq, -1, 0)
    return np.stack((w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
                     w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
                     w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2), axis=-1)


class SphericalJoint(Joint):
    kind = "spherical"
    nq, nv = 4, 3

    def _subspace(self):
        return np.vstack((np.eye(3), np.zeros((3, 3))))

    def placement(self, qj):
        return quaternion_to_rotation(qj), np.zeros(qj.shape[:-1] + (3,))

    def neutral(self):
        return np.array([0.0, 0.0, 0.0, 1.0])

    def random_configuration(self, rng, lower=None, upper=None):
        return _random_unit_quaternion(rng)

    def integrate(self, qj, vj_dt):
        return _quaternion_integrate(qj, vj_dt)


class PlanarJoint(Joint):
    """Motion in the joint frame's xy-plane: q = (x, y, theta), v = (vx, vy, wz) in the successor
    frame (Pinocchio's JointModelPlanar velocity; one angle instead of its cos/sin pair)."""

    kind = "planar"
    nq, nv = 3, 3

    def _subspace(self):
        S = np.zeros((6, 3))
        S[3, 0] = S[4, 1] = S[2, 2] = 1.0
        return S

    def placement(self, qj):
        R = rotation_about_axis([0.0, 0.0, 1.0], qj[..., 2])
        p = np.concatenate((qj[..., 0:2], np.zeros(qj.shape[:-1] + (1,))), axis=-1)
        return R, p

    def random_configuration(self, rng, lower=None, upper=None):
        return np.array([rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-np.pi, np.pi)])

    def integrate(self, qj, vj_dt):
        # exact SE(2) exponential of the local twist (vx, vy, wz) dt
        th = vj_dt[..., 2]
        small = np.abs(th) < 1e-9
        ths = np.where(small, 1.0, th)
        a = np.where(small, 1.0 - th ** 2 / 6, np.sin(ths) / ths)
        b = np.where(small, th / 2, (1.0 - np.cos(ths)) / ths)
        dx = a * vj_dt[..., 0] - b * vj_dt[..., 1]
        dy = b * vj_dt[..., 0] + a * vj_dt[..., 1]
        c, s = np.cos(qj[..., 2]), np.sin(qj[..., 2])
        return np.stack((qj[..., 0] + c * dx - s * dy, qj[..., 1] + s * dx + c * dy, qj[..., 2] + th), -1)


class FreeFlyerJoint(Joint):
    """Six-DoF root joint: q = [p (3), quaternion x, y, z, w], S = identity (local frame)."""

    kind = "free"
    nq, nv = 7, 6

    def _subspace(self):
        # public v = [linear; angular] (Pinocchio) mapped onto internal [angular; linear] motion:
        # S itself is the one conversion at the boundary, so tau = S^T f comes out [force; torque]
        S = np.zeros((6, 6))
        S[3:, :3] = np.eye(3)
        S[:3, 3:] = np.eye(3)
        return S

    def placement(self, qj):
        return quaternion_to_rotation(qj[..., 3:7]), qj[..., 0:3]

    def neutral(self):
        return np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0])

    def random_configuration(self, rng, lower=None, upper=None):
        return np.concatenate((rng.uniform(-1, 1, size=3), _random_unit_quaternion(rng)))

    def integrate(self, qj, vj_dt):
        # SE(3) exponential of the local twist (linear, angular) dt (Pinocchio's integrate)
        v, w = vj_dt[..., 0:3], vj_dt[..., 3:6]
        th = np.linalg.norm(w, axis=-1)[..., None, None]
        small = th < 1e-8
        ths = np.where(small, 1.0, th)
        K = skew(w)
        a = np.where(small, 0.5 - th ** 2 / 24, (1 - np.cos(ths)) / ths ** 2)
        b = np.where(small, 1.0 / 6 - th ** 2 / 120, (ths - np.sin(ths)) / ths ** 3)
        V = np.eye(3) + a * K + b * (K @ K)
        R = quaternion_to_rotation(qj[..., 3:7])
        p = qj[..., 0:3] + np.einsum("...ij,...j->...i", R, np.einsum("...ij,...j->...i", V, v))
        return np.concatenate((p, _quaternion_integrate(qj[..., 3:7], w)), axis=-1)


JOINT_TYPES = {
    "revolute": RevoluteJoint,
    "continuous": RevoluteJoint,
    "prismatic": PrismaticJoint,
    "spherical": SphericalJoint,
    "planar": PlanarJoint,
    "floating": FreeFlyerJoint,
    "free": FreeFlyerJoint,
}


def make_joint(kind, name, axis=None):
    """Instantiate a movable joint by URDF/Python type name; unknown types raise ModelError."""
    try:
        cls = JOINT_TYPES[kind]
    except KeyError:
        raise ModelError(f"joint {name!r}: unknown joint type {kind!r} "
                         f"(known: {', '.join(sorted(JOINT_TYPES))}, fixed)") from None
    if cls in (RevoluteJoint, PrismaticJoint):
        return cls(name, axis if axis is not None else [1.0, 0.0, 0.0])
    return cls(name)
