"""Forward kinematics and LOCAL frame Jacobians, batched.

    iX_lambda(i) = X_J(q_i) X_T(i)                         (Featherstone eq. 4.29; Nori eq. 2)
    v_i = iX_lambda(i) v_lambda(i) + S_i qd_i              (Nori eq. 2)

Public outputs follow Pinocchio: placements are 4x4 homogeneous matrices in the world frame
(data.oMi / data.oMf), velocities and Jacobians are LOCAL and linear-first.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .batch import check_configuration, state, unbatch
from .errors import check_finite
from .model.model import WORLD
from .spatial import Transform, rows_to_linear_first, to_linear_first


def joint_transforms(model, q):
    """Parent-to-body motion transforms iX_lambda(i) (Transform with batch axis B) for q (B, nq)."""
    out = []
    for i, joint in enumerate(model.joints):
        RJ, pJ = joint.placement(q[:, model.q_slice(i)])
        T = model.joint_placements[i]
        R = T[:3, :3] @ RJ                      # placement of body i in its parent: X_T then X_J
        p = T[:3, 3] + pJ @ T[:3, :3].T
        out.append(Transform.from_placement(R, p))
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


def frame_jacobian(model, q, frame):
    """LOCAL Jacobian (B, 6, nv) of a link/frame, linear-first: v_frame = J v (Pinocchio's
    getFrameJacobian(..., LOCAL)). Column block of joint j in support(body):
    fX_j S_j = fX_0 (jX_0)^-1 S_j."""
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
    check_finite(J, "frame_jacobian", dict(q=q), "J")
    return unbatch(rows_to_linear_first(J), single)
