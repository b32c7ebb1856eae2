"""Directional derivatives of Nori's residual r(q, v, d) = D(q) d + b(q, v) (seed 001, eq. 3, 5)
along the tangent space of q and along v, at a solution d*: the right-hand sides of the
analytical derivatives of the dynamics (issue #22; Carpentier & Mansard 2018, RSS).

The solution d*(q, v, y) of D(q) d + b(q, v, y) = 0 moves as dd = -D^-1 (dD d* + db) for every
direction: one substitution per direction with the factorization the plan already has.

Tangent directions are Pinocchio's: q (+) e_k moves the successor frame of joint j by
exp(e_k S_j[:, k]) (pinocchio.integrate; S is constant in the successor frame), so

    d iX_lambda(j) / dq_jk = -(s x) iX_lambda(j),      s = S_j[:, k]     (Featherstone eq. 2.31)

and the transposed block of eq. (5d) moves as (iX_lambda(j))^T (s x*). Every other entry of D
is constant. b depends on q and v through the body velocities of eq. (2),
v_i = iX_lambda(i) v_lambda(i) + S_i qd_i, so dv_i is carried down the subtree:

    dv_j = -(s x)(v_j - S_j qd_j)  (q-direction of j),   dv_j = s  (v-direction of j),
    dv_i = iX_lambda(i) dv_lambda(i)   for the descendants i of j,

and moves c_i = v_i x S_i qd_i (3a_i, non-roots) and nu_i = v_i x* I_i v_i (3f_i); at a root the
bias of (3a_i) is iX_0 a_0 (gravity, Sec. III-A), which moves with q_i only. Measurement rows
(eq. 8, 15) and (3tau_i) do not depend on q or v. Internal convention: angular-first, body
frames; the directions are the columns of v in Pinocchio's layout.
"""
from __future__ import annotations

import numpy as np

from ..model.model import WORLD
from ..opcount import charge, count_operations, counting
from ..recursive._common import gravity_acceleration, inertia_times
from ..spatial import Transform, cross_force, cross_motion


def _per_direction(X):
    """A batched transform (B, ...) that broadcasts over a directions axis: (B, 1, ...)."""
    return Transform(X.E[:, None], X.r[:, None], X.structure)


def each(k, primitive, *args):
    """primitive(*args) for k directions at once: the spatial primitives charge one vector's
    cost per call (opcount), so the other k - 1 are charged here."""
    if not counting():
        return primitive(*args)
    with count_operations() as unit, count_operations("as_written") as unit_w:
        out = primitive(*args)
    charge(unit.mul * (k - 1), unit.add * (k - 1), kind="tangent",
           written=(unit_w.mul * (k - 1), unit_w.add * (k - 1)))
    return out


def residual_tangents(system, Xup, velocities, qd, x):
    """(dr_dq, dr_dv), each (B, n_rows, nv): column k is the derivative of the residual
    D(q) d + b(q, v) at d = x along tangent direction k of q (resp. along v_k).

    system: the NewtonEulerSystem; Xup its joint transforms (kinematics.joint_transforms);
    velocities (B, N, 6) the body velocities (eq. 2); qd (B, nv); x (B, n_cols) the solution."""
    model = system.model
    B, N, nv = qd.shape[0], model.nbodies, model.nv
    blocks = system.unpack(x)
    a0 = gravity_acceleration(model, B)
    # rows along the last axis while filling: one (B, nv, 6) slab per body and row block
    dr_q = np.zeros((B, nv, system.rows.size))
    dr_v = np.zeros((B, nv, system.rows.size))
    dv_q = np.zeros((B, nv, N, 6))                  # dv_i along every q direction
    dv_v = np.zeros((B, nv, N, 6))                  # dv_i along every v direction
    for i, joint in enumerate(model.joints):
        own, n = model.v_slice(i), joint.nv
        St = np.broadcast_to(joint.S.T, (B, n, 6))             # the directions s of joint i
        vJ = qd[:, own] @ joint.S.T                              # S_i qd_i
        p = int(model.parents[i])
        rows_a = system.rows[("ne_a", i)].slice
        rows_f = system.rows[("ne_f", i)].slice
        # (3a_i): d(iX_lambda a_lambda) = -s x (iX_lambda a_lambda); a_lambda = a_0 at a root
        X_a = Xup[i].apply_motion(a0 if p == WORLD else blocks[("a", p)])
        dr_q[:, own, rows_a] -= each(n, cross_motion, St, X_a[:, None])
        if p != WORLD:
            # (5d) in the parent's (3f) row: d(iX_lambda^T) f_i = iX_lambda^T (s x* f_i)
            X = _per_direction(Xup[i])
            rows_fp = system.rows[("ne_f", p)].slice
            dr_q[:, own, rows_fp] += each(n, X.transpose_apply_force,
                                          each(n, cross_force, St, blocks[("f", i)][:, None]))
            # eq. (2) carried down: dv_i = iX_lambda dv_lambda, plus joint i's own directions
            dv_q[:, :, i] = each(nv, X.apply_motion, dv_q[:, :, p])
            dv_v[:, :, i] = each(nv, X.apply_motion, dv_v[:, :, p])
            dv_q[:, own, i] -= each(n, cross_motion, St, (velocities[:, i] - vJ)[:, None])
        dv_v[:, own, i] += St
        v_i = velocities[:, i][:, None]
        if p != WORLD:
            # c_i = v_i x S_i qd_i (3a_i); at a root c_i = 0 identically (v_i = S_i qd_i)
            dr_q[:, :, rows_a] += each(nv, cross_motion, dv_q[:, :, i], vJ[:, None])
            dr_v[:, :, rows_a] += each(nv, cross_motion, dv_v[:, :, i], vJ[:, None])
            dr_v[:, own, rows_a] += each(n, cross_motion, v_i, St)
        # nu_i = v_i x* I_i v_i (3f_i)
        I = model.inertias[i]
        Iv = inertia_times(I, v_i)
        for dv, dr in ((dv_q, dr_q), (dv_v, dr_v)):
            I_dv = each(nv, inertia_times, I, dv[:, :, i])
            dr[:, :, rows_f] += (each(nv, cross_force, dv[:, :, i], Iv)
                                 + each(nv, cross_force, v_i, I_dv))
    return np.swapaxes(dr_q, 1, 2), np.swapaxes(dr_v, 1, 2)
