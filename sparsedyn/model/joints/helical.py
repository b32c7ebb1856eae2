"""Helical (screw) joint: one angle theta about a unit axis with the translation pitch * theta
along it; S = [axis; pitch axis] (angular-first). pitch is the translation per radian, as
Pinocchio's JointModelHelical / JointModelHelicalUnaligned. URDF has no helical joint type (nor
does Pinocchio's URDF parser): build it with ModelBuilder."""
from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...spatial import rotation_about_axis
from .base import Joint


class HelicalJoint(Joint):
    kind = "helical"
    KINDS = ("helical",)
    nq = nv = 1
    ROTATION = "angle"

    def __init__(self, name, axis, pitch):
        pitch = float(pitch)
        if not np.isfinite(pitch):
            raise ModelError(f"joint {name!r}: pitch {pitch!r} is not finite")
        self.pitch = pitch
        super().__init__(name, axis)

    def _subspace(self):
        return np.concatenate((self.axis, self.pitch * self.axis))[:, None]

    def placement(self, qj):
        theta = qj[..., 0]
        return rotation_about_axis(self.axis, theta), (self.pitch * theta)[..., None] * self.axis

    def rotation_axis(self):
        return self.axis

    def translation(self):
        return [(0, self.pitch * self.axis)]

    def parameters(self):
        return np.float64(self.pitch).tobytes()

    @classmethod
    def make(cls, name, axis=None, kind=None):
        raise ModelError(f"joint {name!r}: a helical joint needs its pitch: "
                         f"HelicalJoint(name, axis, pitch) with ModelBuilder")
