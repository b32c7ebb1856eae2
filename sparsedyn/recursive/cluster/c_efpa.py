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

Paper count: chi's and Omega's structural patterns are tracked through both passes (S_k's
pattern, the cluster transform applied column by column, additions where both terms are
nonzero), and a diagonal block Lambda^-1_ee, symmetric, is charged on its upper triangle.

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
from ...opcount import charge, counting
from ...spatial import Transform
from ...spatial_costs import add_cost
from .._common import refuse_armature
from ..aba import _solve_small
from ._articulation import articulate
from ._cluster_common import cluster_inertia, forward_pass
from ._cluster_patterns import charged_product, cluster_patterns, dense
from ._cluster_transform import motion_columns, rows_times


def _end_effector(model, name):
    frame = model.frames[name] if name in model.frames else model.joint_frames.get(name)
    if frame is None:
        raise KeyError(f"frames: model {model.name!r} has no link or frame named {name!r}")
    if frame.body == WORLD:
        raise ValueError(f"frames: {name!r} is welded to the fixed base (its inverse inertia is zero)")
    T = frame.placement
    return frame.body, Transform.from_placement(T[:3, :3], T[:3, 3]).matrix()   # eX_body


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
    pats = cluster_patterns(cm) if counting() else None
    Pchi = [{k: np.kron(np.eye(1, len(cm.clusters[k].bodies), cm.clusters[k].bodies.index(b), dtype=bool),
                        np.ones((6, 6), bool))} if pats else {} for (b, _), k in zip(ees, home)]
    IA = [cluster_inertia(model, c.bodies, B) for c in cm.clusters]
    PIA = [pt.I_nz for pt in pats] if pats else [None] * cm.nclusters
    art = [None] * cm.nclusters
    for k in range(cm.nclusters - 1, -1, -1):                     # backward pass
        ak = art[k] = articulate(cm, k, fp, IA, PIA, pats, armature)
        p = cm.parents[k]
        if p < 0:
            continue
        PS = None if pats is None else (pats[k].S_nz, pats[k].S_unit)
        PDU = None if ak.PU is None else np.broadcast_to(ak.PU.any(1), ak.Dinv_Ut.shape[1:])
        for e in range(len(ees)):
            if k in chi[e]:                                        # eq. (62): chi L_k kX
                Pc = Pchi[e].get(k)
                chiS, PcS = charged_product(chi[e][k], fp.S[k], dense(Pc), PS, "chi S")
                chiSDU, Pm = charged_product(chiS, ak.Dinv_Ut, dense(PcS), dense(PDU), "chi L")
                chiL = chi[e][k] - chiSDU
                if Pm is not None:
                    charge(add=int((Pc & Pm).sum()), kind="chi L", written=(0, 0))
                chi[e][p], Pp = rows_times(fp.ct[k], chiL, len(cm.clusters[p].bodies),
                                           None if Pm is None else Pc | Pm)
                if Pp is not None:
                    Pchi[e][p] = Pp
    Omega = [dict() for _ in ees]                                  # Omega[e][k]: (B, 6 n_b, 6)
    PO = [dict() for _ in ees]                                     # its pattern (paper count)
    for k in range(cm.nclusters):                                  # forward pass, eq. (67)
        S, p, ak = fp.S[k], cm.parents[k], art[k]
        PS = None if pats is None else (pats[k].S_nz, pats[k].S_unit)
        St = None if PS is None else (PS[0].T, PS[1].T)
        for e in range(len(ees)):
            if k not in chi[e]:
                continue
            Pc = Pchi[e].get(k)
            StcT, _ = charged_product(np.swapaxes(S, 1, 2), np.swapaxes(chi[e][k], 1, 2), St,
                                      dense(None if Pc is None else Pc.T), "S^T chi^T")
            SDinvSt_chiT, Pk = charged_product(S, _solve_small(ak.D, StcT, "D^-1 S^T chi^T"), PS, None,
                                               "S D^-1 S^T chi^T")
            if p < 0:
                Omega[e][k], PO[e][k] = SDinvSt_chiT, Pk
                continue
            if Pk is None:
                t, Pt = motion_columns(fp.ct[k], Omega[e][p]), None
            else:
                t, Pt = motion_columns(fp.ct[k], Omega[e][p], PO[e][p])
            Ut_t, PUt = charged_product(np.swapaxes(ak.U, 1, 2), t, dense(None if ak.PU is None else ak.PU.T),
                                        dense(Pt), "U^T t")
            SDUt, PSD = charged_product(S, _solve_small(ak.D, Ut_t, "D^-1 U^T t"), PS,
                                        dense(None if PUt is None else np.broadcast_to(PUt.any(0), PUt.shape)),
                                        "S D^-1 U^T t")
            Omega[e][k] = t - SDUt + SDinvSt_chiT
            if Pt is None:
                charge(add=2 * t.shape[1] * t.shape[2], kind="Omega", written=(0, 0))
            else:                                                  # additions where both are nonzero
                charge(add=add_cost(Pt, PSD) + add_cost(Pt | PSD, Pk), kind="Omega", written=(0, 0))
                PO[e][k] = Pt | PSD | Pk
    m = len(ees)
    out = np.zeros((B, 6 * m, 6 * m))
    for e1 in range(m):                                            # blocks at the common ancestor
        for e2 in range(e1, m):
            common = [k for k in support[e1] if k in support[e2]]
            if not common:
                continue
            g = common[0]
            blk, _ = charged_product(chi[e1][g], Omega[e2][g], dense(Pchi[e1].get(g)), dense(PO[e2].get(g)),
                                     "chi Omega", symmetric=e1 == e2)   # a diagonal block: upper triangle
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
