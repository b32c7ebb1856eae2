"""Free-flyer root joint: [p (3), quaternion x y z w], v = [linear, angular] local (Pinocchio's)."""
from __future__ import annotations

import numpy as np

from ...spatial import quaternion_to_rotation, skew
from .base import Joint, _quaternion_integrate, _random_unit_quaternion


class FreeFlyerJoint(Joint):
    """Six-DoF root joint: q = [p (3), quaternion x, y, z, w], S = identity (local frame)."""

    kind = "free"
    KINDS = ("free", "floating")
    nq, nv = 7, 6
    ROTATION = "quaternion"
    ROTATION_Q = 3

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

    def translation(self):
        return [(k, np.eye(3)[k]) for k in range(3)]
