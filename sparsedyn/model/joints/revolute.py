"""Revolute (and URDF continuous) joint: one angle about a unit axis, S = [axis; 0].

`unbounded` (URDF continuous, Pinocchio's RevoluteUnbounded) changes nothing in the dynamics or
in q here (one angle either way); it records that Pinocchio stores the joint as (cos, sin), so
that sparsedyn.to_pinocchio_q can convert q without a Pinocchio model at hand."""
from __future__ import annotations

import numpy as np

from ...spatial import rotation_about_axis
from .base import Joint


class RevoluteJoint(Joint):
    kind = "revolute"
    KINDS = ("revolute", "continuous")
    nq = nv = 1
    ROTATION = "angle"

    def __init__(self, name, axis, unbounded=False):
        self.unbounded = bool(unbounded)
        super().__init__(name, axis)

    def _subspace(self):
        return np.concatenate((self.axis, np.zeros(3)))[:, None]

    def placement(self, qj):
        R = rotation_about_axis(self.axis, qj[..., 0])
        return R, np.zeros(qj.shape[:-1] + (3,))

    def rotation_axis(self):
        return self.axis

    @classmethod
    def make(cls, name, axis=None, kind=None):
        return cls(name, axis if axis is not None else [1.0, 0.0, 0.0],
                   unbounded=kind == "continuous")
