"""Forward kinematics, frame Jacobians (LOCAL, WORLD, LOCAL_WORLD_ALIGNED), the centre of mass
and the centroidal momentum matrix, batched.

    iX_lambda(i) = X_J(q_i) X_T(i)                         (Featherstone eq. 4.29; Nori eq. 2)
    v_i = iX_lambda(i) v_lambda(i) + S_i qd_i              (Nori eq. 2)

Public outputs follow Pinocchio: placements are 4x4 homogeneous matrices in the world frame
(data.oMi / data.oMf), velocities are LOCAL, Jacobians LOCAL unless another of Pinocchio's
reference frames is asked for; spatial rows are linear-first.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .batch import check_configuration, state, unbatch
from .errors import ModelError, check_finite
from .model.model import WORLD
from .transform_costs import model_structures
from .spatial import Transform, inertia_to_parent, rows_to_linear_first, to_linear_first


def joint_transforms(model, q):
    """Parent-to-body motion transforms iX_lambda(i) (Transform with batch axis B) for q (B, nq)."""
    out = []
    structures = model_structures(model)
    for i, joint in enumerate(model.joints):
        RJ, pJ = joint.placement(q[:, model.q_slice(i)])
        T = model.joint_placements[i]
        R = T[:3, :3] @ RJ                      # placement of body i in its parent: X_T then X_J
        p = T[:3, 3] + pJ @ T[:3, :3].T
        X = Transform.from_placement(R, p)
        X.structure = structures[i]             # X_J(q) X_T's patterns, for the paper count
        out.append(X)
    return out


def body_velocities(model, Xup, v):
    """(B, N, 6) body velocities, angular-first (Nori eq. 2), for the joint transforms Xup and
    batched, checked joint velocities v (B, nv): no world transforms (assembly needs none)."""
    B = v.shape[0]
    vel = np.zeros((B, model.nbodies, 6))
    for i, joint in enumerate(model.joints):
        vJ = v[:, model.v_slice(i)] @ joint.S.T
        p = model.parents[i]
        vel[:, i] = vJ if p == WORLD else Xup[i].apply_motion(vel[:, p]) + vJ
    return vel


def world_transforms(model, Xup):
    """iX_0 for every body (motion transform world -> body i)."""
    Xworld = []
    for i, X in enumerate(Xup):
        p = model.parents[i]
        Xworld.append(X if p == WORLD else X.compose(Xworld[p]))
    return Xworld


def frame_transform(model, name, Xworld, B):
    """fX_0 for a link/frame name: (frame <- body) composed with (body <- world)."""
    frame = model.frames[name] if name in model.frames else model.joint_frames.get(name)
    if frame is None:
        raise KeyError(f"model {model.name!r} has no frame named {name!r}")
    T = frame.placement
    fXb = Transform.from_placement(np.broadcast_to(T[:3, :3], (B, 3, 3)), np.broadcast_to(T[:3, 3], (B, 3)))
    if frame.body == WORLD:
        return fXb, frame
    return fXb.compose(Xworld[frame.body]), frame


@dataclass
class Kinematics:
    """Per-call results of forward_kinematics (the model stays untouched)."""

    model: object
    Xup: list
    Xworld: list
    body_velocities: np.ndarray | None  # (B, N, 6) angular-first, internal
    single: bool
    batch: int | None = None            # B; None: the transforms' batch (there are bodies)

    @property
    def _batch(self):
        return self.batch if self.batch is not None else self.Xworld[0].E.shape[0]

    @property
    def placements(self):
        """(B, N, 4, 4) placements of the bodies in the world (Pinocchio's data.oMi[1:])."""
        P = np.stack([X.placement() for X in self.Xworld], axis=1) if self.Xworld else \
            np.zeros((self._batch, 0, 4, 4))
        return unbatch(P, self.single)

    @property
    def velocities(self):
        """(B, N, 6) LOCAL body velocities, linear-first (Pinocchio's data.v[1:])."""
        if self.body_velocities is None:
            raise ValueError("velocities need v: call forward_kinematics(model, q, v)")
        return unbatch(to_linear_first(self.body_velocities), self.single)

    def frame_placement(self, name):
        """(B, 4, 4) placement of a link/frame in the world (Pinocchio's data.oMf)."""
        fX0, _ = frame_transform(self.model, name, self.Xworld, self._batch)
        return unbatch(fX0.placement(), self.single)


def forward_kinematics(model, q, v=None):
    """Body placements (and LOCAL velocities if v is given) for one state or a batch."""
    q, vecs, B, single = state(model, q, v=v)
    Xup = joint_transforms(model, q)
    vel = None if vecs["v"] is None else body_velocities(model, Xup, vecs["v"])
    Xworld = world_transforms(model, Xup)
    origins = np.stack([X.r for X in Xworld], axis=1) if Xworld else np.zeros((B, 0, 3))
    check_finite(origins, "forward_kinematics", dict(q=q), "a body placement")
    if vel is not None:
        check_finite(vel, "forward_kinematics", dict(q=q, v=vecs["v"]), "a body velocity")
    return Kinematics(model, Xup, Xworld, vel, single, B)


#: Pinocchio's ReferenceFrame names, the frames a Jacobian's rows can be expressed in
REFERENCE_FRAMES = ("local", "world", "local_world_aligned")


def reference_frame_name(reference_frame):
    """"local", "world" or "local_world_aligned" from that name (any case) or a
    pinocchio.ReferenceFrame (its .name); ValueError naming the argument otherwise."""
    name = getattr(reference_frame, "name", reference_frame)
    if isinstance(name, str) and name.lower() in REFERENCE_FRAMES:
        return name.lower()
    raise ValueError(f"reference_frame: expected one of {', '.join(REFERENCE_FRAMES)} (or a "
                     f"pinocchio.ReferenceFrame), got {reference_frame!r}")


def frame_jacobian(model, q, frame, reference_frame="local"):
    """Jacobian (B, 6, nv) of a link/frame, linear-first, as Pinocchio's
    getFrameJacobian(..., reference_frame):
      "local" (default): the frame's twist in its own axes, about its origin;
      "world": the spatial twist in world axes, about the world origin (0X_f J_local);
      "local_world_aligned": the frame origin's velocity and the angular velocity, in world
        axes (diag(R, R) J_local).
    Column block of joint j in support(body): fX_j S_j = fX_0 (jX_0)^-1 S_j."""
    rf = reference_frame_name(reference_frame)
    q, single = check_configuration(model, q)
    B = q.shape[0]
    Xworld = world_transforms(model, joint_transforms(model, q))
    fX0, fr = frame_transform(model, frame, Xworld, B)
    J = np.zeros((B, 6, model.nv))
    for j in (model.support(fr.body) if fr.body != WORLD else []):
        fXj = fX0.compose(Xworld[j].inverse())
        S = model.joints[j].S
        cols = np.stack([fXj.apply_motion(np.broadcast_to(S[:, c], (B, 6))) for c in range(S.shape[1])], -1)
        J[:, :, model.v_slice(j)] = cols
    if rf != "local" and B:
        # to world axes (and, for "world", about the world origin): columns are motion vectors
        to_world = Transform(fX0.E[:, None], (fX0.r if rf == "world" else 0 * fX0.r)[:, None])
        J = np.swapaxes(to_world.inverse_apply_motion(np.swapaxes(J, 1, 2)), 1, 2)
    check_finite(J, "frame_jacobian", dict(q=q), "J")
    return unbatch(rows_to_linear_first(J), single)


def _subtree_inertias(model, Xworld, B):
    """Composite spatial inertias (B, 6, 6) of every body's subtree, in world coordinates about
    the world origin (angular-first), and of the whole tree."""
    Ic = [inertia_to_parent(X, I) for X, I in zip(Xworld, model.inertias)]
    total = np.zeros((B, 6, 6))
    for i in range(model.nbodies - 1, -1, -1):
        p = model.parents[i]
        if p == WORLD:
            total = total + Ic[i]
        else:
            Ic[p] = Ic[p] + Ic[i]
    return Ic, total


def _mass_and_com(model, total):
    m = total[:, 3, 3]
    if model.nbodies == 0 or not np.all(m > 0):
        raise ModelError(f"model {model.name!r} has no mass: its centre of mass is undefined")
    # the m cx block of I = [[., m cx], [m cx^T, m 1]] holds the centre of mass c
    return m, np.stack((total[:, 2, 4], total[:, 0, 5], total[:, 1, 3]), -1) / m[:, None]


def _centroidal(model, q, with_map=True):
    """(A_g (B, 6, nv) angular-first or None, mass (B,), COM (B, 3)) for checked q (B, nq)."""
    B = q.shape[0]
    if B == 0:
        return np.zeros((0, 6, model.nv)), np.zeros(0), np.zeros((0, 3))
    Xworld = world_transforms(model, joint_transforms(model, q))
    Ic, total = _subtree_inertias(model, Xworld, B)
    m, c = _mass_and_com(model, total)
    if not with_map:
        return None, m, c
    A = np.zeros((B, 6, model.nv))
    for j, joint in enumerate(model.joints):
        X = Transform(Xworld[j].E[:, None], Xworld[j].r[:, None])   # one per column of S
        S0 = X.inverse_apply_motion(np.broadcast_to(joint.S.T, (B,) + joint.S.T.shape))
        h0 = np.einsum("bij,bkj->bki", Ic[j], S0)               # (B, nv_j, 6): [n_0; f]
        n = h0[..., :3] - np.cross(c[:, None], h0[..., 3:])     # moment about the COM
        A[:, :, model.v_slice(j)] = np.swapaxes(np.concatenate((n, h0[..., 3:]), -1), 1, 2)
    return A, m, c


def center_of_mass(model, q):
    """(B, 3) centre of mass of the moving bodies in the world (Pinocchio's centerOfMass;
    a fixed base's welded root link is not part of the model, as in Pinocchio)."""
    q, single = check_configuration(model, q)
    return unbatch(_centroidal(model, q, with_map=False)[2], single)


def centroidal_map(model, q):
    """Centroidal momentum matrix A_g (B, 6, nv), linear-first: h_g = A_g v is the linear and
    the angular momentum about the centre of mass, in world axes (Pinocchio's
    computeCentroidalMap). Column block of joint j: the subtree's composite inertia times its
    motion subspace, both in world coordinates, then moved from the world origin to the COM."""
    q, single = check_configuration(model, q)
    A = _centroidal(model, q)[0]
    check_finite(A, "centroidal_map", dict(q=q), "A_g")
    return unbatch(rows_to_linear_first(A), single)


def com_jacobian(model, q):
    """(B, 3, nv) Jacobian of the centre of mass in world axes: v_com = J v (Pinocchio's
    jacobianCenterOfMass): the linear momentum rows of the centroidal map over the mass."""
    q, single = check_configuration(model, q)
    A, m, _ = _centroidal(model, q)
    J = A[:, 3:] / m[:, None, None]
    check_finite(J, "com_jacobian", dict(q=q), "J")
    return unbatch(J, single)
