"""Planar joint: (x, y, theta) in the joint frame's xy-plane, local (vx, vy, wz)."""
from __future__ import annotations

import numpy as np

from ...spatial import rotation_about_axis
from .base import Joint


class PlanarJoint(Joint):
    """Motion in the joint frame's xy-plane: q = (x, y, theta), v = (vx, vy, wz) in the successor
    frame (Pinocchio's JointModelPlanar velocity; one angle instead of its cos/sin pair)."""

    kind = "planar"
    KINDS = ("planar",)
    nq, nv = 3, 3
    ROTATION = "angle"
    ROTATION_Q = 2

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

    def rotation_axis(self):
        return np.array([0.0, 0.0, 1.0])

    def translation(self):
        return [(0, np.array([1.0, 0.0, 0.0])), (1, np.array([0.0, 1.0, 0.0]))]
