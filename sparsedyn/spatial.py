"""Batched spatial (6D) algebra, Featherstone's notation, vectorised over a leading batch axis.

Internal convention (as in the seeds and Featherstone's book, Ch. 2): spatial vectors are
ANGULAR-FIRST, m = [omega; v], f = [n; f]. The public API is linear-first; `to_linear_first` /
`to_angular_first` do the one conversion at the boundary.

A Plucker transform from frame A to frame B is stored compactly as (E, r) (Featherstone, eq. 2.24):
E rotates A-coordinates into B-coordinates, r is the origin of B expressed in A-coordinates, and

    BX_A = [[E, 0], [-E rx, E]],     BX_A^* = [[E, -E rx], [0, E]].

Costs of the compact forms (book, Table 2.2 / Appendix A) are what the operation counter charges
under its "as_written" convention; under the default "paper" convention the primitives charge the
same compact forms with the structure of the operands exploited (spatial_costs.py): the transform's
structural patterns (Transform.structure, set by kinematics.joint_transforms) and the optional
`pattern` (structurally nonzero entries) of the vector operand.
All functions accept arrays with any number of leading batch axes.
"""
from __future__ import annotations

import numpy as np

from .axis_rotation import rotate_blocks
from .opcount import charge, charge_matmul, counting
from .spatial_costs import FULL6, cross_cost, product_cost, subspace_pattern
from .transform_costs import GENERAL, TransformStructure

# --------------------------------------------------------------------------------------------
# 3D helpers


def skew(v):
    """(...,3) -> (...,3,3) matrix with skew(v) @ w == cross(v, w)."""
    v = np.asarray(v, dtype=float)
    out = np.zeros(v.shape + (3,), dtype=float)
    out[..., 0, 1] = -v[..., 2]
    out[..., 0, 2] = v[..., 1]
    out[..., 1, 0] = v[..., 2]
    out[..., 1, 2] = -v[..., 0]
    out[..., 2, 0] = -v[..., 1]
    out[..., 2, 1] = v[..., 0]
    return out


def cross3(a, b):
    """Cross product of (...,3) arrays (explicit components: faster than np.cross on batches)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1)


def matvec3(R, v):
    """R @ v for stacks: (...,3,3), (...,3) -> (...,3)."""
    return np.einsum("...ij,...j->...i", R, v)


def mat_t_vec3(R, v):
    """R^T @ v for stacks."""
    return np.einsum("...ji,...j->...i", R, v)


def rotation_about_axis(axis, angle):
    """Rodrigues: rotation matrices (...,3,3) of `angle` (...) about the unit `axis` (3,)."""
    axis = np.asarray(axis, dtype=float)
    angle = np.asarray(angle, dtype=float)
    c, s = np.cos(angle)[..., None, None], np.sin(angle)[..., None, None]
    K = skew(axis)
    return np.eye(3) + s * K + (1.0 - c) * (K @ K)


def log3(R):
    """Rotation vectors w (...,3) with exp(skew(w)) = R (...,3,3), |w| <= pi.

    Below pi/2 from the skew part, w = theta / (2 sin theta) vee(R - R^T) (its series below
    1e-4); above, where sin theta vanishes, the axis from the symmetric part,
    a a^T = ((R + R^T)/2 - cos theta I) / (1 - cos theta), signed by vee(R - R^T)."""
    R = np.asarray(R, dtype=float)
    vee = np.stack((R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0],
                    R[..., 1, 0] - R[..., 0, 1]), axis=-1)
    cos = np.clip((np.trace(R, axis1=-2, axis2=-1) - 1.0) / 2.0, -1.0, 1.0)
    theta = np.arctan2(0.5 * np.linalg.norm(vee, axis=-1), cos)    # (arccos loses digits near pi)
    small = theta < 1e-4
    with np.errstate(divide="ignore", invalid="ignore"):
        gain = np.where(small, 0.5 + theta ** 2 / 12.0, theta / (2.0 * np.sin(theta)))
    w = gain[..., None] * vee
    big = theta > np.pi / 2
    if np.any(big):
        sym = (R[big] + np.swapaxes(R[big], -1, -2)) / 2.0
        aaT = (sym - cos[big][:, None, None] * np.eye(3)) / (1.0 - cos[big])[:, None, None]
        k = np.argmax(np.diagonal(aaT, axis1=-2, axis2=-1), axis=-1)
        axis = aaT[np.arange(len(k)), :, k] / np.sqrt(aaT[np.arange(len(k)), k, k])[:, None]
        sign = np.where(np.einsum("bi,bi->b", axis, vee[big]) < 0.0, -1.0, 1.0)
        w[big] = (sign * theta[big])[:, None] * axis
    return w


def log6(R, t):
    """SE(3) logarithm of the placements (R (...,3,3), t (...,3)): the twist (...,6),
    linear-first [v; w], with exp([w]x, v) = (R, t): w = log3(R), v = V(w)^-1 t where
    V^-1 = I - W/2 + (1 - (theta/2) cot(theta/2)) / theta^2 W^2, W = skew(w) (its series
    1/12 + theta^2/720 + theta^4/30240 below 1e-2, where the difference cancels)."""
    w = log3(R)
    theta = np.linalg.norm(w, axis=-1)
    small = theta < 1e-2
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(small, 1.0 / 12.0 + theta ** 2 / 720.0 + theta ** 4 / 30240.0,
                     (1.0 - 0.5 * theta / np.tan(0.5 * theta)) / theta ** 2)
    t = np.asarray(t, dtype=float)
    wxt = cross3(w, t)
    v = t - 0.5 * wxt + c[..., None] * cross3(w, wxt)
    return np.concatenate((v, w), axis=-1)


def quaternion_to_rotation(quat_xyzw):
    """Unit quaternions (...,4) in Pinocchio's/Eigen's (x, y, z, w) order -> (...,3,3)."""
    q = np.asarray(quat_xyzw, dtype=float)
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    R = np.empty(q.shape[:-1] + (3, 3))
    R[..., 0, 0] = 1 - 2 * (y * y + z * z)
    R[..., 0, 1] = 2 * (x * y - z * w)
    R[..., 0, 2] = 2 * (x * z + y * w)
    R[..., 1, 0] = 2 * (x * y + z * w)
    R[..., 1, 1] = 1 - 2 * (x * x + z * z)
    R[..., 1, 2] = 2 * (y * z - x * w)
    R[..., 2, 0] = 2 * (x * z - y * w)
    R[..., 2, 1] = 2 * (y * z + x * w)
    R[..., 2, 2] = 1 - 2 * (x * x + y * y)
    return R


def rpy_to_rotation(rpy):
    """URDF fixed-axis roll-pitch-yaw: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    r, p, y = (float(a) for a in rpy)
    return (rotation_about_axis([0, 0, 1], y) @ rotation_about_axis([0, 1, 0], p)
            @ rotation_about_axis([1, 0, 0], r))


# --------------------------------------------------------------------------------------------
# Conversions at the public boundary (linear-first <-> angular-first)


def to_angular_first(x):
    """Public linear-first 6-vectors (...,6) -> internal angular-first (same swap both ways)."""
    x = np.asarray(x, dtype=float)
    return np.concatenate((x[..., 3:6], x[..., 0:3]), axis=-1)


to_linear_first = to_angular_first  # swapping the halves is its own inverse

_SWAP = np.r_[3:6, 0:3]


def rows_to_linear_first(M):
    """Re-order the 6 rows of (...,6,k) blocks (a Jacobian: rows are spatial, columns are not)
    between the two conventions, whatever k is (k = 6 included)."""
    M = np.asarray(M)
    if M.shape[-2] != 6:
        raise ValueError(f"expected (..., 6, k) blocks, got shape {M.shape}")
    return M[..., _SWAP, :]


def operator_to_linear_first(M):
    """Re-order rows and columns of (...,6,6) spatial operators (inertias, transforms,
    covariances of spatial vectors) between the two conventions."""
    M = np.asarray(M)
    if M.shape[-2:] != (6, 6):
        raise ValueError(f"expected (..., 6, 6) spatial operators, got shape {M.shape}")
    return M[..., _SWAP, :][..., :, _SWAP]


# --------------------------------------------------------------------------------------------
# Spatial cross products (book eq. 2.31-2.33)


def _charge_cross(kind, v_pattern, m_pattern, force):
    if counting():
        mul, add, _ = cross_cost(FULL6 if v_pattern is None else v_pattern,
                                 FULL6 if m_pattern is None else m_pattern, force)
        charge(mul, add, kind=kind, written=(18, 15))


def cross_motion(v, m, v_pattern=None, m_pattern=None):
    """v x m for motion vectors (...,6) (patterns: their structurally nonzero entries)."""
    _charge_cross("v x m", v_pattern, m_pattern, False)
    w, vl = v[..., :3], v[..., 3:]
    mw, mv = m[..., :3], m[..., 3:]
    return np.concatenate((cross3(w, mw), cross3(w, mv) + cross3(vl, mw)), axis=-1)


def cross_force(v, f, v_pattern=None, f_pattern=None):
    """v x* f for a motion vector v and force vector f (...,6)."""
    _charge_cross("v x* f", v_pattern, f_pattern, True)
    w, vl = v[..., :3], v[..., 3:]
    n, fl = f[..., :3], f[..., 3:]
    return np.concatenate((cross3(w, n) + cross3(vl, fl), cross3(w, fl)), axis=-1)


def crm(v):
    """6x6 matrix of v x (motion cross product operator), batched."""
    w, vl = v[..., :3], v[..., 3:]
    out = np.zeros(v.shape[:-1] + (6, 6))
    out[..., :3, :3] = skew(w)
    out[..., 3:, 3:] = skew(w)
    out[..., 3:, :3] = skew(vl)
    return out


def crf(v):
    """6x6 matrix of v x* = -crm(v)^T."""
    return -np.swapaxes(crm(v), -1, -2)


# --------------------------------------------------------------------------------------------
# Plucker transforms in compact (E, r) form


class Transform:
    """Batched Plucker transform BX_A = (E, r). E: (...,3,3), r: (...,3)."""

    __slots__ = ("E", "r", "structure")

    def __init__(self, E, r, structure=None):
        self.E = E
        self.r = r
        self.structure = structure          # TransformStructure (patterns) or None: general

    def _charge(self, op, pattern, kind):
        if counting():
            st = self.structure if self.structure is not None else TransformStructure((GENERAL,))
            mul, add, _ = st.apply_cost(op, FULL6 if pattern is None else pattern)
            charge(mul, add, kind=kind, written=(24, 18))

    def structure_cost(self, op, pattern):
        """(mul, add, result pattern) of `op` ('X m', 'X* f', 'X^-1 m', 'X^T f') on a vector of
        structural pattern `pattern` (spatial_costs.TransformStructure.apply_cost)."""
        st = self.structure if self.structure is not None else TransformStructure((GENERAL,))
        return st.apply_cost(op, pattern)

    @classmethod
    def from_placement(cls, R, p):
        """Transform from parent coords to child coords, given the child's placement (R, p) in
        the parent (R: child axes in parent coords, p: child origin in parent coords)."""
        return cls(np.swapaxes(R, -1, -2), p)

    @classmethod
    def identity(cls, batch_shape=()):
        return cls(np.broadcast_to(np.eye(3), batch_shape + (3, 3)).copy(), np.zeros(batch_shape + (3,)))

    def apply_motion(self, m, pattern=None):
        """BX_A m (24 mul, 18 add per state)."""
        self._charge("X m", pattern, "X*m")
        w = matvec3(self.E, m[..., :3])
        v = matvec3(self.E, m[..., 3:] - cross3(self.r, m[..., :3]))
        return np.concatenate((w, v), axis=-1)

    def apply_force(self, f, pattern=None):
        """BX_A^* f: force from A-coordinates to B-coordinates."""
        self._charge("X* f", pattern, "X*f")
        n = matvec3(self.E, f[..., :3] - cross3(self.r, f[..., 3:]))
        fl = matvec3(self.E, f[..., 3:])
        return np.concatenate((n, fl), axis=-1)

    def inverse_apply_motion(self, m, pattern=None):
        """AX_B m = (BX_A)^-1 m."""
        self._charge("X^-1 m", pattern, "X^-1*m")
        w = mat_t_vec3(self.E, m[..., :3])
        v = mat_t_vec3(self.E, m[..., 3:]) + cross3(self.r, w)
        return np.concatenate((w, v), axis=-1)

    def transpose_apply_force(self, f, pattern=None):
        """(BX_A)^T f = AX_B^* f: a force in B-coordinates expressed in A-coordinates."""
        self._charge("X^T f", pattern, "X^T*f")
        fl = mat_t_vec3(self.E, f[..., 3:])
        n = mat_t_vec3(self.E, f[..., :3]) + cross3(self.r, fl)
        return np.concatenate((n, fl), axis=-1)

    def compose(self, other):
        """self * other: if other = BX_A and self = CX_B, returns CX_A."""
        charge(36, 27, kind="X*X")
        E = self.E @ other.E
        r = other.r + mat_t_vec3(other.E, self.r)
        return Transform(E, r)

    def inverse(self):
        Et = np.swapaxes(self.E, -1, -2)
        return Transform(Et, -matvec3(self.E, self.r))

    def matrix(self):
        """6x6 motion-transform matrices (...,6,6)."""
        out = np.zeros(self.E.shape[:-2] + (6, 6))
        out[..., :3, :3] = self.E
        out[..., 3:, 3:] = self.E
        out[..., 3:, :3] = -self.E @ skew(self.r)
        return out

    def placement(self):
        """Homogeneous placement (...,4,4) of frame B in frame A."""
        out = np.zeros(self.E.shape[:-2] + (4, 4))
        out[..., :3, :3] = np.swapaxes(self.E, -1, -2)
        out[..., :3, 3] = self.r
        out[..., 3, 3] = 1.0
        return out

    def __getitem__(self, idx):
        return Transform(self.E[idx], self.r[idx], self.structure)


def transform_inertia(X, I):
    """Congruence BX_A^* I AX_B: a spatial inertia (...,6,6) given in A-coordinates, expressed in
    B-coordinates (book eq. 2.66)."""
    Xinv = X.inverse().matrix()
    charge_matmul(6, 6, 6, kind="X^T I X")
    charge_matmul(6, 6, 6, kind="X^T I X")
    return np.swapaxes(Xinv, -1, -2) @ I @ Xinv


def inertia_to_parent(X, I, pattern=None, by_axis=False):
    """X^T I X: a symmetric spatial (or articulated) inertia (...,6,6) in child (B) coordinates
    expressed in parent (A) coordinates, X = BX_A = (E, r) (book eq. 2.66, frames swapped).

    Compact form: with the blocks of I = [[A, B], [B^T, C]] rotated into parent axes
    (A1 = E^T A E, ...), X^T I X = [[A1 + rx B1^T - B2 rx, B2], [B2^T, C1]], B2 = B1 + rx C1
    (198 mul + 144 add instead of two dense 6x6 products). pattern: I's structural pattern (6x6
    bool, symmetric), for the "paper" convention's count. by_axis: where E is a rotation about a
    coordinate axis (X.structure.axis), the blocks are rotated by double angles
    (axis_rotation.py, seed 002's appendix form: 22m + 25a for a revolute's I^a)."""
    st = X.structure if X.structure is not None else TransformStructure((GENERAL,))
    axis = st.axis if by_axis else None
    if counting():
        mul, add, _ = st.congruence_cost(np.ones((6, 6), bool) if pattern is None else pattern, by_axis)
        charge(mul, add, kind="X^T I X", written=(198, 144))
    E = X.E
    if axis is not None:
        A1, B1, C1 = rotate_blocks(E, [(I[..., :3, :3], True), (I[..., :3, 3:], False),
                                       (I[..., 3:, 3:], True)], axis)
    else:
        Et = np.swapaxes(E, -1, -2)
        A1 = Et @ I[..., :3, :3] @ E
        B1 = Et @ I[..., :3, 3:] @ E
        C1 = Et @ I[..., 3:, 3:] @ E
    rx = skew(X.r)
    B2 = B1 + rx @ C1
    out = np.empty(np.broadcast_shapes(I.shape, E.shape[:-2] + (6, 6)))
    out[..., :3, :3] = A1 + rx @ np.swapaxes(B1, -1, -2) - B2 @ rx
    out[..., :3, 3:] = B2
    out[..., 3:, :3] = np.swapaxes(B2, -1, -2)
    out[..., 3:, 3:] = C1
    return out



def motion_congruence(X, M, pattern=None):
    """X M X^T for a symmetric M (..., 6, 6) mapping forces to motions (a Delassus block), X =
    BX_A = rot(E) xlt(r) (eq. 2.24): first T M T^T with T = [[1, 0], [-rx, 1]], i.e. B' = A rx + B,
    C' = C - rx B' + B^T rx, then E M' E^T, by double angles where E is a rotation about a
    coordinate axis (axis_rotation.py; seed 002's appendix charges X Lambda X^T 63m + 54a at the
    privileged child). pattern: M's structural pattern, for the paper count."""
    st = X.structure if X.structure is not None else TransformStructure((GENERAL,))
    if counting():
        mul, add, _ = st.motion_congruence_cost(np.ones((6, 6), bool) if pattern is None else pattern)
        charge(mul, add, kind="X M X^T", written=(198, 144))
    A, B, C = M[..., :3, :3], M[..., :3, 3:], M[..., 3:, 3:]
    rx = skew(X.r)
    B1 = A @ rx + B                                           # (T M)^T's upper right: A rx + B
    C1 = C - rx @ B1 + np.swapaxes(B, -1, -2) @ rx            # (-rx A + B^T) rx - rx B + C
    E = X.E
    Et = np.swapaxes(E, -1, -2)
    if st.axis is not None:                                   # E M' E^T = (E^T)^T M' (E^T)
        A2, B2, C2 = rotate_blocks(Et, [(A, True), (B1, False), (C1, True)], st.axis)
    else:
        A2, B2, C2 = E @ A @ Et, E @ B1 @ Et, E @ C1 @ Et
    out = np.empty(np.broadcast_shapes(M.shape, E.shape[:-2] + (6, 6)))
    out[..., :3, :3] = A2
    out[..., :3, 3:] = B2
    out[..., 3:, :3] = np.swapaxes(B2, -1, -2)
    out[..., 3:, 3:] = C2
    return out

# --------------------------------------------------------------------------------------------
# Rigid-body inertia


def spatial_inertia(mass, com, inertia_com):
    """Rigid-body spatial inertia about the body origin (book eq. 2.63), angular-first:
    [[Ic + m cx cx^T, m cx], [m cx^T, m 1]]."""
    mass = float(mass)
    com = np.asarray(com, dtype=float)
    C = skew(com)
    out = np.zeros((6, 6))
    out[:3, :3] = np.asarray(inertia_com, dtype=float) + mass * C @ C.T
    out[:3, 3:] = mass * C
    out[3:, :3] = mass * C.T
    out[3:, 3:] = mass * np.eye(3)
    return out


def inertia_parameters(I):
    """Inverse of spatial_inertia for one 6x6 matrix: (mass, com, inertia about com)."""
    mass = I[3, 3]
    if mass <= 0.0:
        return 0.0, np.zeros(3), I[:3, :3].copy()
    mC = I[:3, 3:]
    com = np.array([mC[2, 1], mC[0, 2], mC[1, 0]]) / mass
    C = skew(com)
    return mass, com, I[:3, :3] - mass * C @ C.T


def rows_times_transform(X, R, pattern=None):
    """R X for rows R (B, r, 6) and the motion transform X = (E, r) (compact form, Featherstone
    Table 2.2: each row costs what X^T f costs, 24 mul + 18 add). pattern: R's structural
    pattern (r x 6) for the paper count, row by row (rows_transform_cost)."""
    r = R.shape[-2]
    if counting():
        mul, add, _ = rows_transform_cost(X, np.ones((r, 6), bool) if pattern is None else pattern)
        charge(mul, add, kind="R X", written=(24 * r, 18 * r))
    RlE = R[..., 3:] @ X.E
    Ra = R[..., :3] @ X.E - cross3(RlE, X.r[:, None, :])
    return np.concatenate((Ra, RlE), axis=-1)


def rows_transform_cost(X, pattern):
    """(mul, add, pattern) of R X for rows of structural pattern `pattern` (r x 6): each nonzero
    row an X^T f on its pattern (TransformStructure.apply_cost); zero rows stay zero."""
    st = X.structure if X.structure is not None else TransformStructure((GENERAL,))
    mul = add = 0
    out = np.zeros(pattern.shape, bool)
    for j, row in enumerate(pattern):
        if row.any():
            m, a, out[j] = st.apply_cost("X^T f", row)
            mul, add = mul + m, add + a
    return mul, add, out


def S_product(A, S, A_pattern=None, kind="A S", A_unit=None):
    """A S for (B, r, 6) blocks A (an articulated inertia, or U^T) and a constant S (6 x n). Paper
    count: the products with S's non-unit entries (a unit-axis S selects columns: 0 flops)."""
    r, n = A.shape[-2], S.shape[1]
    if counting():
        nz, unit = subspace_pattern(S)
        P = np.ones((r, 6), bool) if A_pattern is None else A_pattern
        mul, add, _ = product_cost(P, np.zeros_like(P) if A_unit is None else A_unit, nz, unit)
        charge(mul, add, kind=kind, written=(r * 6 * n, r * 5 * n))
    return A @ S
