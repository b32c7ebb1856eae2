"""Closed kinematic chains by cut joints (seed 004, Sec. 2, eq. 1-7), batched, with Yamane's O(N)
forward dynamics (yamane.py) of the virtual open chain.

Each loop is cut at one joint (Fig. 1): the frames a (on link_a, body i) and b (on link_b,
body j) formerly joined by it coincide while the loop is closed. Their relative spatial velocity
in a's axes, r_C = aX_b v_b - v_a (angular-first internally), is held by K r_C = 0 (eq. 2; K,
N_C x 6, the directions the cut joint blocks; public K rows are linear-first). With the joint
coordinates q of the open chain and S_k the motion subspace of joint k:

    H = K r_C / qd: column block of joint k = K aX_0 (kX_0)^-1 S_k times +1 if k supports j
        only, -1 if it supports i only (common ancestors cancel)             (eq. 3-4)
    H qdd = -K (aX_j a_j - aX_i a_i - v_a x r_C) with a_i, a_j the body accelerations at
        qdd = 0                                                                (eq. 5)

(K is constant in a's axes and d/dt of a vector in moving axes is its absolute derivative minus
v_a x it; the gravity term -a_g that RNEA's a_i and a_j carry is aX_0 a_0 in both: it cancels.)
Eq. (6)-(7), A qdd - H^T tau_C = tau_W - b, is solved through its Schur complement with A^-1
applied by Yamane's virtual-work forward dynamics:

    qdd_0 = FD(q, qd, tau_W),  Y = A^-1 H^T = FD(q, 0, H^T) - FD(q, 0, 0)   (N_C + 2 O(N) passes)
    (H Y) tau_C = -K (...) - H qdd_0,   qdd = qdd_0 + Y tau_C

O(N N_C + N_C^3) per state. Preconditions: q closes every loop (frames a and b coincide where K
blocks), qd satisfies H qd = 0, the rows of H are independent (else SingularModelError).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..batch import check_configuration, state, unbatch
from ..errors import SingularModelError, check_finite
from ..kinematics import joint_transforms, world_transforms
from ..model.model import WORLD
from ..opcount import charge
from ..spatial import Transform, cross_motion
from ._common import gravity_acceleration, matmul, refuse_armature
from .rnea import rnea_sweeps
from .yamane import yamane_forward_dynamics

_ANGULAR_FIRST = np.r_[3:6, 0:3]


@dataclass(frozen=True)
class CutJoint:
    """A joint of a closed chain cut open: frame a = `placement_a` (4x4, default identity) in the
    frame of link `link_a`, frame b likewise on `link_b`, and K (N_C x 6, linear-first rows over
    the relative twist of b w.r.t. a in a's axes): e.g. the 3 linear rows for a spherical joint,
    5 rows (all but the angular one about the axis) for a revolute one."""

    link_a: str
    link_b: str
    K: np.ndarray
    placement_a: np.ndarray | None = None
    placement_b: np.ndarray | None = None


def _frame(model, link, T, B):
    """(body, aX_body Transform batched) of a cut frame."""
    fr = model.frames[link]             # KeyError naming a missing link
    P = fr.placement @ (np.eye(4) if T is None else np.asarray(T, dtype=float))
    return fr.body, Transform.from_placement(np.broadcast_to(P[:3, :3], (B, 3, 3)), np.broadcast_to(P[:3, 3], (B, 3)))


def _loop_rows(model, q, qd, cut, Xup):
    """(H (B, N_C, nv), h (B, N_C)) with H qdd = h the cut's acceleration constraint (eq. 4-5)."""
    B = q.shape[0]
    Xw = world_transforms(model, Xup)
    _, v, a, _ = rnea_sweeps(model, q, qd, np.zeros_like(qd), np.zeros((B, model.nbodies, 6)), Xup)
    K = np.asarray(cut.K, dtype=float)[:, _ANGULAR_FIRST]
    H = np.zeros((B, K.shape[0], model.nv))
    rel, acc = np.zeros((B, 6)), np.zeros((B, 6))
    (bi, aXi), (bj, bXj) = _frame(model, cut.link_a, cut.placement_a, B), _frame(model, cut.link_b, cut.placement_b, B)
    aX0 = aXi if bi == WORLD else aXi.compose(Xw[bi])
    for body, fX, sign in ((bi, aXi, -1.0), (bj, None, 1.0)):
        if body == WORLD:                      # the ground: v = 0, a = a_0 (= -a_g)
            acc += sign * aX0.apply_motion(gravity_acceleration(model, B))
            continue
        aXbody = aX0.compose(Xw[body].inverse())
        vb = aXbody.apply_motion(v[:, body])
        rel, acc = rel + sign * vb, acc + sign * aXbody.apply_motion(a[:, body])
        for k in model.support(body):          # column blocks of the joints supporting the body
            aXk = aX0.compose(Xw[k].inverse())
            S = model.joints[k].S
            cols = np.stack([aXk.apply_motion(np.broadcast_to(S[:, c], (B, 6))) for c in range(S.shape[1])], -1)
            H[:, :, model.v_slice(k)] += sign * matmul(np.broadcast_to(K, (B,) + K.shape), cols, kind="K aX_k S_k")
    v_a = rel * 0 if bi == WORLD else aXi.apply_motion(v[:, bi])
    h = -np.einsum("ij,bj->bi", K, acc - cross_motion(v_a, rel))
    return H, h


def cut_constraint(model, q, qd, cut):
    """(H (B, N_C, nv), h (B, N_C)) (or unbatched) of the cut: H qd = 0 and H qdd = h (eq. 4-5)."""
    q, vecs, B, single = state(model, q, v=qd)
    H, h = _loop_rows(model, q, vecs["v"], cut, joint_transforms(model, q))
    return unbatch(H, single), unbatch(h, single)


def closure_residual(model, q, cut):
    """(B, N_C) the blocked components K e of the cut frames' offset, e = [R_a^T (p_b - p_a);
    vee(R - R^T) / 2 of R = R_a^T R_b] (linear-first, in a's axes): zero on a closed loop."""
    q, single = check_configuration(model, q)
    B = q.shape[0]
    Xw = world_transforms(model, joint_transforms(model, q))
    P = []
    for link, T in ((cut.link_a, cut.placement_a), (cut.link_b, cut.placement_b)):
        body, fX = _frame(model, link, T, B)
        P.append((fX if body == WORLD else fX.compose(Xw[body])).placement())      # (B, 4, 4)
    Ra, pa, Rb, pb = P[0][:, :3, :3], P[0][:, :3, 3], P[1][:, :3, :3], P[1][:, :3, 3]
    R = np.swapaxes(Ra, 1, 2) @ Rb
    e = np.concatenate((np.einsum("bji,bj->bi", Ra, pb - pa),
                        0.5 * np.stack((R[:, 2, 1] - R[:, 1, 2], R[:, 0, 2] - R[:, 2, 0], R[:, 1, 0] - R[:, 0, 1]), -1)), 1)
    return unbatch(e @ np.asarray(cut.K, dtype=float).T, single)


#: largest closure residual (m or rad) accepted as a closed loop
CLOSURE_TOLERANCE = 1e-8


def closed_chain_forward_dynamics(model, q, qd, tau, cuts, f_ext=None, return_forces=False):
    """Joint accelerations (B, nv) (or (nv,)) of the closed chain made of `model` (the virtual
    open chain) and the cut joints `cuts` (CutJoint list); tau: the joint torques tau_W (nv).
    return_forces: also the constraint forces tau_C (B, sum N_C), cut by cut, in K's rows."""
    refuse_armature(model, "closed_chain_forward_dynamics",
                    "sd.loop_forward_dynamics on a ClusterModel")
    q, vecs, B, single = state(model, q, v=qd, tau=tau)
    qd, tau = vecs["v"], vecs["tau"]
    for c in cuts:
        gap = np.abs(closure_residual(model, q, c)).max(axis=1)
        if np.any(gap > CLOSURE_TOLERANCE):
            raise ValueError(f"q: the cut joint {c.link_a}/{c.link_b} is open by {gap.max():.3g} at batch "
                             f"indices {np.flatnonzero(gap > CLOSURE_TOLERANCE)[:10].tolist()} (q must close "
                             "every loop)")
    Xup = joint_transforms(model, q)
    rows = [_loop_rows(model, q, qd, c, Xup) for c in cuts]
    H = np.concatenate([r[0] for r in rows], axis=1)
    h = np.concatenate([r[1] for r in rows], axis=1)
    nc = H.shape[1]
    qdd0 = yamane_forward_dynamics(model, q, qd, tau, f_ext=f_ext)
    # A^-1 H^T column by column: the response to the generalized force H^T e_c (row c of H)
    # without velocity, less the response to gravity alone
    q_rep = np.repeat(q, nc, axis=0)
    Y = (yamane_forward_dynamics(model, q_rep, np.zeros((B * nc, model.nv)), H.reshape(B * nc, model.nv))
         - np.repeat(yamane_forward_dynamics(model, q, np.zeros_like(qd), np.zeros_like(tau)), nc, axis=0))
    Y = np.swapaxes(Y.reshape(B, nc, model.nv), 1, 2)                             # (B, nv, nc)
    inputs = dict(q=q, qd=qd, tau=tau)
    HY = check_finite(matmul(H, Y, kind="H A^-1 H^T"), "closed_chain_forward_dynamics", inputs, "H A^-1 H^T")
    ev = np.linalg.eigvalsh(HY)
    bad = np.flatnonzero(ev[:, 0] <= 1e-12 * np.abs(ev).max(axis=1))
    if bad.size:
        names = [f"{c.link_a}/{c.link_b}" for c in cuts]
        raise SingularModelError(f"cut joints {names}: their constraint rows H = K dr_C/dq are dependent "
                                 f"(redundant rows of K, or a singular configuration) at batch indices "
                                 f"{bad[:10].tolist()}", batch_indices=bad.tolist())
    charge(nc ** 3 // 3 + nc * nc, nc ** 3 // 3 + nc * nc, div=nc, kind="LU(H A^-1 H^T)")
    tau_C = np.linalg.solve(HY, (h - np.einsum("bij,bj->bi", H, qdd0))[..., None])[..., 0]
    qdd = qdd0 + np.einsum("bij,bj->bi", Y, tau_C)
    check_finite(qdd, "closed_chain_forward_dynamics", inputs, "qdd")
    return (unbatch(qdd, single), unbatch(tau_C, single)) if return_forces else unbatch(qdd, single)
