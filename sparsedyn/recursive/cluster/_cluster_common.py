"""Cluster spatial algebra shared by C-RNEA, C-ABA and C-EFPA (seed 003, Sec. V; Algorithm 1,
lines 4-19). Cluster vectors are stored per body, (B, n_b, 6) angular-first (flattened to (B, 6 n_b)
for the cluster matrices); a cluster's transform is a ClusterTransform (_cluster_transform.py).
Products are charged by the patterns of _cluster_patterns.py (patterns never change numerics).

    kX_lambda(k)  (eq. 17): block (i, j) = iX_j if j = Lambda(i) (one block per block row)
    S_k           (line 12): LambdaX_lambda block(S_i) G_k, LambdaX_lambda unit lower triangular
                             (eq. 20), evaluated by the in-cluster recursion instead of a matrix
    c_k       (lines 18-19): LambdaX_lambda (block(S_i) g_k + stack(v_i x S_i qd_i))  [notes erratum:
                             the printed line uses y_k for yd_k, X_I for LambdaX_lambda and drops
                             the v x (S qd) term]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import SingularModelError
from ...kinematics import joint_transforms
from ...opcount import charge, counting, suspended
from ...spatial import cross_force, cross_motion
from ...spatial_costs import cross_cost, linear_cost
from .._common import S_times, charge_sum, inertia_times, out_pattern, subspace_out_pattern, tracked
from ..aba import SINGULAR_TOLERANCE, articulated_scale
from ._cluster_patterns import cluster_patterns
from ._cluster_transform import apply_motion_columns, cluster_transform, motion



@dataclass
class ClusterPass:
    """Forward pass #1 results (Algorithm 1, lines 1-21) for one batch of states."""

    ct: list        # per cluster: its ClusterTransform kX_lambda(k) (eq. 17)
    S: list         # per cluster: (B, 6 n_b, m_k) cluster motion subspace
    c: list         # per cluster: (B, n_b, 6) velocity-product acceleration c_k
    v: list         # per cluster: (B, n_b, 6) body velocities
    qd: list        # per cluster: (B, n_k) spanning joint velocities G_k yd_k
    pc: list        # per cluster: (6 n_b,) structural pattern of c_k (None when not counting)
    pv: list        # per cluster: (n_b, 6) structural pattern of v_k (None when not counting)


def charge_adds(n):
    """Paper count of n vector-entry additions (the as-written count leaves them out, as
    _common.charge_sum does)."""
    if counting() and n:
        charge(add=int(n), kind="+", written=(0, 0))


def forward_pass(cm, q, yd, Xup=None):
    """Algorithm 1, forward pass #1 (lines 3-19): kX_lambda(k), S_k, c_k, v_k of every cluster."""
    model = cm.model
    B = q.shape[0]
    Xup = joint_transforms(model, q) if Xup is None else Xup                  # lines 5-6
    res = ClusterPass([], [], [], [], [], [], [])
    for k, c in enumerate(cm.clusters):
        lp = cm.local_parents[k]
        ct = cluster_transform(cm, k, q, Xup)                                  # lines 9-10 (eq. 17, 20)
        G, g = cm.cluster_explicit(k, q, yd)                                   # line 11
        ydk = yd[:, cm.y_slice(k)]
        qdk = ydk if G is None else np.einsum("bij,bj->bi", G, ydk)
        nb, m = len(c.bodies), c.ny
        S = np.zeros((B, nb, 6, m))                                            # line 12, by eq. 20's recursion
        col = 0
        with suspended():                                                      # charged from S_k's pattern
            for li, i in enumerate(c.bodies):
                rows = slice(col, col + model.joints[i].nv)
                col += model.joints[i].nv
                S[:, li] = model.joints[i].S if G is None else np.einsum("ij,bjk->bik", model.joints[i].S, G[:, rows])
                if lp[li] >= 0:
                    S[:, li] += apply_motion_columns(Xup[i], S[:, lp[li]])
        S = S.reshape(B, 6 * nb, m)
        if counting():
            pat = cluster_patterns(cm)[k]
            charge(*pat.build, kind="S_k", written=pat.written)
            charge(*linear_cost(pat.S_nz, pat.S_unit, np.ones(m, bool))[:2], kind="S yd",
                   written=(6 * nb * m, 6 * nb * (m - 1)))
        parent_v = (np.zeros((B, 6)) if cm.parents[k] < 0 else res.v[cm.parents[k]])
        vJ = np.einsum("bij,bj->bi", S, ydk).reshape(B, nb, 6)
        pJv = cluster_patterns(cm)[k].S_nz.any(1).reshape(nb, 6) if counting() else None
        if cm.parents[k] < 0:
            v, pv = vJ, pJv                                                    # line 13, v_0 = 0
        elif pJv is None:
            v, pv = motion(ct, parent_v) + vJ, None                            # line 13
        else:                                                                  # the root's zeros
            Xv, pXv = motion(ct, parent_v, res.pv[cm.parents[k]])              # carried outward
            v, pv = Xv + vJ, pXv | pJv
            charge_adds(int((pXv & pJv).sum()))
        ck = np.zeros((B, nb, 6))                                              # lines 18-19 (erratum)
        pc = [None] * nb
        g_nz = cluster_patterns(cm)[k].g_nz if counting() else None
        col = 0
        for li, i in enumerate(c.bodies):
            Si = model.joints[i].S
            rows = slice(col, col + Si.shape[1])
            col += Si.shape[1]
            pJ = tracked(subspace_out_pattern(Si))
            pvi = None if pv is None else pv[li]
            ck[:, li] = cross_motion(v[:, li], S_times(Si, qdk[:, rows]), pvi, pJ)   # v_i x S_i qd_i
            pc[li] = out_pattern(cross_cost, pvi, pJ)
            if g is not None:
                ck[:, li] += S_times(Si, g[:, rows])                           # S_i g_i
                if g_nz is not None and g_nz[rows].any():
                    pc[li] = charge_sum(pc[li], pJ)
            if lp[li] >= 0:
                ck[:, li] += Xup[i].apply_motion(ck[:, lp[li]], pc[lp[li]])    # LambdaX_lambda
                pc[li] = charge_sum(pc[li], out_pattern(Xup[i].structure_cost, "X m", pc[lp[li]]))
        res.ct.append(ct)
        res.S.append(S)
        res.c.append(ck)
        res.v.append(v)
        res.qd.append(qdk)
        res.pc.append(None if pc[0] is None else np.concatenate(pc))
        res.pv.append(pv)
    return res


def cluster_inertia(model, bodies, B):
    """block({I_i}) (eq. 14), (B, 6 n_b, 6 n_b)."""
    nb = len(bodies)
    out = np.zeros((B, 6 * nb, 6 * nb))
    for li, i in enumerate(bodies):
        out[:, 6 * li:6 * li + 6, 6 * li:6 * li + 6] = model.inertias[i]
    return out


def bias_forces(model, bodies, v, f_ext_body):
    """stack(v_i x* I_i v_i - f_ext_i) (line 21 / eq. 34), (B, n_b, 6)."""
    charge_adds(6 * sum(bool(f_ext_body[:, i].any()) for i in bodies))
    return np.stack([cross_force(v[:, li], inertia_times(model.inertias[i], v[:, li])) - f_ext_body[:, i]
                     for li, i in enumerate(bodies)], axis=1)


def check_cluster_pivots(cm, k, D, IA, S, armature=None):
    """SingularModelError (naming the cluster) if D_k = S_k^T I^A_k S_k (+ armature) is
    numerically singular: its smallest eigenvalue at most SINGULAR_TOLERANCE times
    max |I^A_k| max |S_k|^2 (aba.articulated_scale) plus the armature, i.e. relative to the
    cluster's own bodies, not to the heaviest body of the model."""
    scale = articulated_scale(IA, S)
    if armature is not None:
        scale = scale + np.abs(armature).max(initial=0.0)
    ev_min = np.linalg.eigvalsh(D).min(axis=-1) if D.shape[-1] > 1 else D[:, 0, 0]
    bad = np.flatnonzero(ev_min <= SINGULAR_TOLERANCE * scale)
    if bad.size:
        c = cm.clusters[k]
        raise SingularModelError(
            f"cluster {c.name!r}: its articulated inertia D_k = S_k^T I^A_k S_k is singular (massless "
            f"bodies or a singular loop configuration) at batch indices {bad[:10].tolist()}",
            bodies=[cm.model.link_names[i] for i in c.bodies], batch_indices=bad.tolist())
