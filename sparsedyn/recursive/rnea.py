"""RNEA: inverse dynamics tau = ID(q, qd, qdd, f_ext), batched.

Featherstone, Table 5.1 (= [2, Algorithm 5.7] cited by Nori); the same sweeps are Nori's
equations (2), (3a_i) outward and (3f_i), (3tau_i) inward, with a_0 = -a_g (Sec. IV-A).
Preconditions: a kinematic tree with parent(i) < i. Returns tau in Pinocchio's layout (B, nv).
"""
from __future__ import annotations

import numpy as np

from ..batch import state, unbatch
from ..errors import check_finite
from ..kinematics import joint_transforms
from ..model.model import WORLD
from ..opcount import charge
from ..spatial import cross_force, cross_motion
from ..spatial_costs import cross_cost, rigid_inertia_cost
from ._common import (S_times, S_transpose_times, charge_external, charge_sum, external_forces,
                      gravity_acceleration, gravity_pattern, inertia_times, joint_armature,
                      out_pattern, subspace_out_pattern, tracked)


def rnea_sweeps(model, q, qd, qdd, f_ext_body, Xup=None):
    """The two sweeps on already-batched arrays. Returns (tau, v, a, f) with v, a, f (B, N, 6)
    angular-first: body velocities, accelerations (including -a_g) and joint wrenches."""
    B, N = q.shape[0], model.nbodies
    Xup = joint_transforms(model, q) if Xup is None else Xup
    a0 = gravity_acceleration(model, B)
    v = np.zeros((B, N, 6))
    a = np.zeros((B, N, 6))
    f = np.zeros((B, N, 6))
    pv, pa, pf = [None] * N, [None] * N, [None] * N                # structural patterns (counting)
    for i, joint in enumerate(model.joints):                       # outward sweep
        s = model.v_slice(i)
        vJ = S_times(joint.S, qd[:, s])
        pJ = tracked(subspace_out_pattern(joint.S))
        p = model.parents[i]
        if p == WORLD:
            v[:, i], pv[i] = vJ, pJ                                 # eq. (2), v_0 = 0
            pg = gravity_pattern(model)
            a[:, i] = Xup[i].apply_motion(a0, pg) + S_times(joint.S, qdd[:, s])
            pa[i] = charge_sum(out_pattern(Xup[i].structure_cost, "X m", pg), pJ)
        else:
            v[:, i] = Xup[i].apply_motion(v[:, p], pv[p]) + vJ          # eq. (2)
            pv[i] = charge_sum(out_pattern(Xup[i].structure_cost, "X m", pv[p]), pJ)
            a[:, i] = (Xup[i].apply_motion(a[:, p], pa[p]) + S_times(joint.S, qdd[:, s])
                       + cross_motion(v[:, i], vJ, pv[i], pJ))      # eq. (3a_i), c_i = v_i x S_i qd_i
            pa[i] = charge_sum(charge_sum(out_pattern(Xup[i].structure_cost, "X m", pa[p]), pJ),
                               out_pattern(cross_cost, pv[i], pJ))
        I = model.inertias[i]
        pIv = out_pattern(rigid_inertia_cost, pv[i])
        f[:, i] = (inertia_times(I, a[:, i], pa[i]) + cross_force(v[:, i], inertia_times(I, v[:, i], pv[i]),
                                                                   pv[i], pIv)
                   - f_ext_body[:, i])                              # eq. (3f_i) before children
        pf[i] = charge_sum(out_pattern(rigid_inertia_cost, pa[i]), out_pattern(cross_cost, pv[i], pIv, force=True))
        pf[i] = charge_external(f_ext_body, i, pf[i])
    tau = np.zeros((B, model.nv))
    for i in range(N - 1, -1, -1):                                  # inward sweep
        tau[:, model.v_slice(i)] = S_transpose_times(model.joints[i].S, f[:, i], pf[i])  # eq. (3tau_i)
        arm = joint_armature(model, i)
        if arm is not None:                                          # + diag(armature) qdd_i
            tau[:, model.v_slice(i)] += qdd[:, model.v_slice(i)] @ arm
            charge(mul=int(np.count_nonzero(arm)), kind="armature")
        p = model.parents[i]
        if p != WORLD:
            f[:, p] += Xup[i].transpose_apply_force(f[:, i], pf[i])   # eq. (3f_i): sum over mu(i)
            pf[p] = charge_sum(pf[p], out_pattern(Xup[i].structure_cost, "X^T f", pf[i]))
    return tau, v, a, f


def rnea(model, q, v, a, f_ext=None):
    """Joint torques (B, nv) (or (nv,)) realising accelerations `a` at state (q, v).

    f_ext: {link name: wrench on that link in its frame, linear-first [force; torque]}."""
    q, vecs, B, single = state(model, q, v=v, a=a)
    fx = external_forces(model, f_ext, B)
    tau, *_ = rnea_sweeps(model, q, vecs["v"], vecs["a"], fx)
    check_finite(tau, "rnea", dict(q=q, **vecs, f_ext=fx), "tau")
    return unbatch(tau, single)
