"""CRBA: the joint-space inertia matrix M(q) (full, symmetric), batched.

Featherstone, Table 6.2 (composite-rigid-body algorithm); a composite inertia is a rigid-body
inertia, transformed and summed in its 10-parameter form (m, h, Ibar; Table 2.5,
rigid_congruence.py). Preconditions: a tree with
parent(i) < i. Returns (B, nv, nv) (or (nv, nv)) in Pinocchio's v layout.
"""
from __future__ import annotations

import numpy as np

from ..batch import check_configuration, unbatch
from ..errors import check_finite
from ..kinematics import joint_transforms
from ..model.model import WORLD
from ..opcount import charge
from ..rigid_congruence import rigid_inertia_to_parent
from ._common import S_product, joint_armature


def crba_sweeps(model, q, Xup=None):
    B = q.shape[0]
    Xup = joint_transforms(model, q) if Xup is None else Xup
    IC = [np.broadcast_to(I, (B, 6, 6)).copy() for I in model.inertias]
    for i in range(model.nbodies - 1, -1, -1):                     # composite inertias, tips first
        p = model.parents[i]
        if p != WORLD:
            IC[p] += rigid_inertia_to_parent(Xup[i], IC[i])       # I^c_p += X^T I^c_i X
            charge(add=10, kind="I^c_p +", written=(0, 21))       # m, h, Ibar's upper triangle
    M = np.zeros((B, model.nv, model.nv))
    for i, joint in enumerate(model.joints):
        si = model.v_slice(i)
        F = S_product(IC[i], joint.S)                              # F = I^c_i S_i
        M[:, si, si] = S_product(np.swapaxes(F, -1, -2), joint.S)  # H_ii = S_i^T F (= F^T S_i)
        arm = joint_armature(model, i)
        if arm is not None:
            M[:, si, si] += arm                                     # + diag(armature): rotor inertia
        j = i
        while model.parents[j] != WORLD:
            F = np.stack([Xup[j].transpose_apply_force(F[:, :, c]) for c in range(joint.nv)], -1)
            j = int(model.parents[j])                              # F = jX_i^T F up the support
            sj = model.v_slice(j)
            Hji = np.swapaxes(S_product(np.swapaxes(F, -1, -2), model.joints[j].S), -1, -2)
            M[:, sj, si] = Hji
            M[:, si, sj] = np.swapaxes(Hji, -1, -2)
    return M


def crba(model, q):
    """Joint-space inertia matrix M(q)."""
    q, single = check_configuration(model, q)
    return unbatch(check_finite(crba_sweeps(model, q), "crba", {"q": q}, "M"), single)
