"""Revolute (and URDF continuous) joint: one angle about a unit axis, S = [axis; 0]."""
from __future__ import annotations

import numpy as np

from ...spatial import rotation_about_axis
from .base import Joint


class RevoluteJoint(Joint):
    kind = "revolute"
    KINDS = ("revolute", "continuous")
    nq = nv = 1
    ROTATION = "angle"

    def _subspace(self):
        return np.concatenate((self.axis, np.zeros(3)))[:, None]

    def placement(self, qj):
        R = rotation_about_axis(self.axis, qj[..., 0])
        return R, np.zeros(qj.shape[:-1] + (3,))

    def rotation_axis(self):
        return self.axis

    @classmethod
    def make(cls, name, axis=None):
        return cls(name, axis if axis is not None else [1.0, 0.0, 0.0])
