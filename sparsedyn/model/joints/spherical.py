"""Spherical joint: a unit quaternion (x, y, z, w), local angular velocity, S = [I; 0]."""
from __future__ import annotations

import numpy as np

from ...spatial import quaternion_to_rotation
from .base import Joint, _quaternion_integrate, _random_unit_quaternion


class SphericalJoint(Joint):
    kind = "spherical"
    KINDS = ("spherical",)
    nq, nv = 4, 3
    ROTATION = "quaternion"

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
