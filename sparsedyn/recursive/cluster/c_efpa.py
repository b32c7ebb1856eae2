"""C-EFPA: the inverse operational-space inertia Lambda^-1 of cluster end-effectors, batched.

Seed 003, Sec. VIII (cluster extended-force-propagator algorithm). Zero velocities and torques
(Sec. VIII-C). With L_k^T = 1 - U_k D_k^-1 S_k^T (eq. 61):

    backward: I^A_k, U_k, D_k as in C-ABA (Algorithm 1, lines 26-32);
              chi_k^e initialised at the cluster of e's body (eq. 57-58),
              chi_lambda(k)^e = chi_k^e L_k kX_lambda(k)                          (eq. 62)
    forward:  Omega_ke^-1 = L_k kX_lambda(k) Omega_lambda(k)e^-1 + S_k D_k^-1 S_k^T chi_k^eT
              for e in ES(C_k), Omega_0e^-1 = 0                                   (eq. 67)
    blocks:   Lambda^-1_e1e2 = chi_g^e1 Omega_ge2^-1 at the greatest common ancestor cluster g
              of the two end-effectors (zero if they only share the fixed world)  (Sec. VIII-D)

End-effectors are link or frame names (a frame's placement in its body is the constant eX_body).
Returns (B, 6m, 6m) (or (6m, 6m)) for LOCAL frame motion/force, linear-first, like
J (G^T H G)^-1 J^T with LOCAL frame Jacobians. Preconditions: q assembled, D_k invertible.
"""
from __future__ import annotations

import numpy as np

from ...batch import check_configuration, unbatch
from ...errors import check_finite
from ...kinematics import joint_transforms
from ...model.model import WORLD
from ...spatial import Transform
from .._common import matmul, refuse_armature
from ..aba import _solve_small, charge_pivot_inverse
from ._cluster_common import (apply_motion_columns, check_cluster_pivots, cluster_congruence, cluster_inertia,
                              forward_pass)


def _end_effector(model, name):
    frame = model.frames[name] if name in model.frames else model.joint_frames.get(name)
    if frame is None:
        raise KeyError(f"frames: model {model.name!r} has no link or frame named {name!r}")
    if frame.body == WORLD:
        raise ValueError(f"frames: {name!r} is welded to the fixed base (its inverse inertia is zero)")
    T = frame.placement
    return frame.body, Transform.from_placement(T[:3, :3], T[:3, 3]).matrix()   # eX_body


def _times_cluster_transform(chi, Xout, out_blocks, n_parent):
    """chi kX_lambda(k): row block (B, 6, 6 n_b) -> (B, 6, 6 n_p) (eq. 17's one block per row)."""
    out = np.zeros(chi.shape[:2] + (6 * n_parent,))
    for li, (X, ob) in enumerate(zip(Xout, out_blocks)):
        out[:, :, 6 * ob:6 * ob + 6] += matmul(chi[:, :, 6 * li:6 * li + 6], X.matrix(), kind="chi X")
    return out


def _cluster_motion_columns(Xout, out_blocks, M_parent):
    """kX_lambda(k) M for motion columns M_parent (B, 6 n_p, m) -> (B, 6 n_b, m)."""
    return np.concatenate([apply_motion_columns(X, M_parent[:, 6 * ob:6 * ob + 6])
                           for X, ob in zip(Xout, out_blocks)], axis=1)


def _ancestors(cm, k):
    out = []
    while k >= 0:
        out.append(k)
        k = int(cm.parents[k])
    return out


def c_efpa_sweeps(cm, q, frames, Xup=None, armature=None):
    model, B = cm.model, q.shape[0]
    fp = forward_pass(cm, q, np.zeros((B, cm.ny)), Xup)
    ees = [_end_effector(model, f) for f in frames]
    home = [int(cm.cluster_of[b]) for b, _ in ees]
    support = [_ancestors(cm, k) for k in home]                   # clusters supporting e (ES^-1)
    chi = [dict() for _ in ees]
    for e, ((b, eXb), k) in enumerate(zip(ees, home)):             # eq. (57)-(58)
        li = cm.clusters[k].bodies.index(b)
        chi[e][k] = np.zeros((B, 6, 6 * len(cm.clusters[k].bodies)))
        chi[e][k][:, :, 6 * li:6 * li + 6] = eXb
    IA = [cluster_inertia(model, c.bodies, B) for c in cm.clusters]
    U, D = [None] * cm.nclusters, [None] * cm.nclusters
    for k in range(cm.nclusters - 1, -1, -1):                     # backward pass
        S = fp.S[k]
        U[k] = matmul(IA[k], S, kind="U = IA S")
        D[k] = matmul(np.swapaxes(S, 1, 2), U[k], kind="D = S^T U")
        arm = None if armature is None else armature[cm.y_slice(k)]
        if arm is not None:                                        # H~ on the joint pivots
            D[k] = D[k] + np.diag(arm)
        check_cluster_pivots(cm, k, D[k], IA[k], S, arm)
        charge_pivot_inverse(D[k].shape[-1])                   # paper count: D^-1 once, then products
        p = cm.parents[k]
        if p < 0:
            continue
        n_parent = len(cm.clusters[p].bodies)
        Dinv_Ut = _solve_small(D[k], np.swapaxes(U[k], 1, 2), "D^-1 U^T")
        IA[p] += cluster_congruence(fp.Xout[k], cm.output_blocks[k],
                                    IA[k] - matmul(U[k], Dinv_Ut, kind="U D^-1 U^T"), n_parent)
        for e in range(len(ees)):
            if k in chi[e]:                                        # eq. (62): chi L_k kX
                chiL = chi[e][k] - matmul(matmul(chi[e][k], S, kind="chi S"), Dinv_Ut, kind="chi L")
                chi[e][p] = _times_cluster_transform(chiL, fp.Xout[k], cm.output_blocks[k], n_parent)
    Omega = [dict() for _ in ees]                                  # Omega[e][k]: (B, 6 n_b, 6)
    for k in range(cm.nclusters):                                  # forward pass, eq. (67)
        S, p = fp.S[k], cm.parents[k]
        for e in range(len(ees)):
            if k not in chi[e]:
                continue
            SDinvSt_chiT = matmul(S, _solve_small(D[k], matmul(np.swapaxes(S, 1, 2),
                                                               np.swapaxes(chi[e][k], 1, 2), kind="S^T chi^T"),
                                                  "D^-1 S^T chi^T"), kind="S D^-1 S^T chi^T")
            if p < 0:
                Omega[e][k] = SDinvSt_chiT
                continue
            t = _cluster_motion_columns(fp.Xout[k], cm.output_blocks[k], Omega[e][p])
            Lt = t - matmul(S, _solve_small(D[k], matmul(np.swapaxes(U[k], 1, 2), t, kind="U^T t"),
                                            "D^-1 U^T t"), kind="S D^-1 U^T t")
            Omega[e][k] = Lt + SDinvSt_chiT
    m = len(ees)
    out = np.zeros((B, 6 * m, 6 * m))
    for e1 in range(m):                                            # blocks at the common ancestor
        for e2 in range(e1, m):
            common = [k for k in support[e1] if k in support[e2]]
            if not common:
                continue
            g = common[0]
            blk = matmul(chi[e1][g], Omega[e2][g], kind="chi Omega")
            out[:, 6 * e1:6 * e1 + 6, 6 * e2:6 * e2 + 6] = blk
            out[:, 6 * e2:6 * e2 + 6, 6 * e1:6 * e1 + 6] = np.swapaxes(blk, 1, 2)
    swap = np.concatenate([6 * e + np.r_[3:6, 0:3] for e in range(m)])   # to linear-first
    return out[:, swap][:, :, swap]


def c_efpa(cm, q, frames, armature=None):
    """Inverse operational-space inertia (B, 6m, 6m) of the end-effector frames `frames` (names);
    armature (ny,): diagonal joint-space inertia added to the pivots (see the module doc); a
    model with its own (spanning-tree) armature is refused (ModelError naming the joints)."""
    refuse_armature(cm.model, "c_efpa", "c_efpa's armature argument (independent coordinates)")
    q, single = check_configuration(cm.model, q)
    if isinstance(frames, str):
        frames = [frames]
    arm = None if armature is None else np.asarray(armature, dtype=float).reshape(cm.ny)
    out = c_efpa_sweeps(cm, q, list(frames), joint_transforms(cm.model, q), arm)
    return unbatch(check_finite(out, "c_efpa", {"q": q}, "Lambda^-1"), single)


__all__ = ["c_efpa", "c_efpa_sweeps"]
