"""The joint protocol (Featherstone's jcalc, Table 4.1): what every consumer of a joint asks, in
one place per joint type, so that a new joint type is one file of this package.

A joint type is a subclass of Joint in its own module of sparsedyn.model.joints, found by kind
name (`KINDS`, also its URDF type names) without any if-chain. It defines
    nq, nv                 its coordinates and velocities;
    _subspace()            the CONSTANT motion subspace S (6 x nv, angular-first) in the successor
                           frame (velocities are successor-frame, as Pinocchio's: c_J = 0);
    placement(qj)          (R_J(q), p_J(q)) of the successor frame in the joint frame, batched;
    ROTATION, rotation_axis(), ROTATION_Q
                           R_J's structure: "none" (constant identity), "angle" (a rotation by
                           qj[ROTATION_Q] about rotation_axis()) or "quaternion" (the unit
                           quaternion x, y, z, w at qj[ROTATION_Q:ROTATION_Q + 4]);
    translation()          p_J's structure: [(q offset k, direction d)], p_J = sum qj[k] d;
    neutral(), random_configuration(), integrate()   the configuration manifold;
    parameters()           what else (besides the axis) determines the dynamics, for the model's
                           fingerprint.
The sparse system's pattern (system/pattern.py) and the compiled assembly
(ir/assembly.py) read only ROTATION, rotation_basis, ROTATION_Q and translation, and
the configuration checks read ROTATION == "quaternion".
"""
from __future__ import annotations

import numpy as np

from ...errors import ModelError
from ...spatial import skew


class Joint:
    """Base class. Subclasses define nq, nv, S (6 x nv, angular-first) and `placement(qj)`."""

    kind = "abstract"
    #: the names this joint type is made by (make_joint, URDF joint types)
    KINDS = ()
    nq = 0
    nv = 0
    ROTATION = "none"
    ROTATION_Q = 0

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

    def rotation_axis(self):
        """The axis of an "angle" rotation (unit 3-vector)."""
        raise NotImplementedError

    def translation(self):
        """[(q offset, direction (3,))]: p_J(q) = sum_k qj[offset_k] direction_k."""
        return []

    def rotation_basis(self):
        """R_J(q) = sum_a alpha_a(q) Ra[a] from ROTATION: (Ra (A, 3, 3), coefficients of the
        constant function 1 (A,)); the sparse system's pattern and the compiled assembly read
        it."""
        if self.ROTATION == "angle":
            k = self.rotation_axis()
            K = skew(k)
            # Rodrigues: I + s K + (1 - c) K^2 = k k^T + s K - c K^2   (basis 1, sin, cos)
            return np.stack((np.outer(k, k), K, -K @ K)), np.array([1.0, 0.0, 0.0])
        if self.ROTATION == "quaternion":
            return _quaternion_basis()
        if self.ROTATION == "none":
            return np.eye(3)[None], np.array([1.0])
        raise NotImplementedError(f"joint {self.name!r}: unknown rotation {self.ROTATION!r}")

    def parameters(self):
        """Bytes of what, besides the axis, determines the joint's dynamics (model fingerprint)."""
        return b""

    @classmethod
    def make(cls, name, axis=None, kind=None):
        """An instance from a kind name's arguments (make_joint, URDF): joints without an axis
        ignore it; `kind` is the name it was made by (one of KINDS), for types with several."""
        return cls(name)

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


def _unit_axis(name, axis):
    axis = np.asarray(axis, dtype=float).reshape(-1)
    n = np.linalg.norm(axis) if axis.shape == (3,) and np.all(np.isfinite(axis)) else 0.0
    if n < 1e-12:
        raise ModelError(f"joint {name!r}: axis {axis.tolist()} is not a non-zero 3-vector")
    return axis / n


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


def _quaternion_basis():
    """R(x, y, z, w) as a homogeneous quadratic form: (coefficients (10, 3, 3), constant (10,)).

    Monomials: x2 y2 z2 w2 xy xz xw yz yw zw; 1 = x2 + y2 + z2 + w2 on the unit sphere."""
    C = np.zeros((10, 3, 3))
    X2, Y2, Z2, W2, XY, XZ, XW, YZ, YW, ZW = range(10)
    # 1 - 2(y2 + z2) = x2 - y2 - z2 + w2, etc. (spatial.quaternion_to_rotation, homogenised)
    C[[X2, W2], 0, 0], C[[Y2, Z2], 0, 0] = 1, -1
    C[[Y2, W2], 1, 1], C[[X2, Z2], 1, 1] = 1, -1
    C[[Z2, W2], 2, 2], C[[X2, Y2], 2, 2] = 1, -1
    C[XY, 0, 1], C[ZW, 0, 1] = 2, -2
    C[XZ, 0, 2], C[YW, 0, 2] = 2, 2
    C[XY, 1, 0], C[ZW, 1, 0] = 2, 2
    C[YZ, 1, 2], C[XW, 1, 2] = 2, -2
    C[XZ, 2, 0], C[YW, 2, 0] = 2, -2
    C[YZ, 2, 1], C[XW, 2, 1] = 2, 2
    one = np.zeros(10)
    one[[X2, Y2, Z2, W2]] = 1.0
    return C, one
