"""Prismatic joint: one displacement along a unit axis, S = [0; axis]."""
from __future__ import annotations

import numpy as np

from .base import Joint


class PrismaticJoint(Joint):
    kind = "prismatic"
    KINDS = ("prismatic",)
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

    def translation(self):
        return [(0, self.axis)]

    @classmethod
    def make(cls, name, axis=None, kind=None):
        return cls(name, axis if axis is not None else [1.0, 0.0, 0.0])
