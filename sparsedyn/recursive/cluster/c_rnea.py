"""C-RNEA: constrained inverse dynamics tau_y = ID(q, yd, ydd, f_ext) on a cluster tree, batched.

Seed 003, Sec. VI: forward pass eq. (33) (v_k = kX v_lambda(k) + S_k yd_k, a_k = kX a_lambda(k) +
c_k + S_k ydd_k, with c_k of Algorithm 1 lines 18-19 as corrected in the notes) and eq. (34)
(f_k = I_k a_k + v_k x* I_k v_k); backward pass eq. (35) (f_lambda(k) += lambda(k)X_k^* f_k) and
eq. (31) (tau_k = S_k^T f_k). Preconditions: q assembled. Returns the torques on the independent
coordinates (the spanning torques projected by G^T).
"""
from __future__ import annotations

import numpy as np

from ...batch import unbatch
from ...errors import check_finite
from ...opcount import charge, counting
from ...spatial import cross_force
from .._common import external_forces, gravity_acceleration, gravity_pattern, inertia_times, refuse_armature
from ...spatial_costs import add_cost
from ._cluster_common import charge_adds, forward_pass
from ._cluster_patterns import charged_product, cluster_patterns
from ._cluster_transform import force_to_parent, motion


def c_rnea_sweeps(cm, q, yd, ydd, f_ext_body, Xup=None):
    """Returns tau_y (B, ny) and the cluster joint forces f_k^J (list of (B, n_b, 6))."""
    model, B = cm.model, q.shape[0]
    fp = forward_pass(cm, q, yd, Xup)
    a0 = gravity_acceleration(model, B)
    pats = cluster_patterns(cm) if counting() else None
    acc, f = [None] * cm.nclusters, [None] * cm.nclusters
    pa = [None] * cm.nclusters                                                     # acc's patterns
    for k, c in enumerate(cm.clusters):                                            # forward pass
        p = cm.parents[k]
        S = fp.S[k]
        nb = len(c.bodies)
        Sydd, _ = charged_product(S, ydd[:, cm.y_slice(k), None], None if pats is None else
                                  (pats[k].S_nz, pats[k].S_unit), None, "S ydd")
        if pats is None:
            acc[k] = motion(fp.ct[k], a0 if p < 0 else acc[p]) + fp.c[k] + Sydd.reshape(B, -1, 6)   # eq. (33)
        else:                                     # the world's a_0 = -a_g and the root's zeros outward
            Xa, pXa = motion(fp.ct[k], a0 if p < 0 else acc[p], gravity_pattern(model) if p < 0 else pa[p])
            acc[k] = Xa + fp.c[k] + Sydd.reshape(B, -1, 6)                         # eq. (33)
            pS, pc = pats[k].S_nz.any(1).reshape(nb, 6), fp.pc[k].reshape(nb, 6)
            charge(add=add_cost(pXa, pS) + add_cost(pXa | pS, pc), kind="S ydd", written=(0, S.shape[1]))
            pa[k] = pXa | pS | pc
        f[k] = np.stack([inertia_times(model.inertias[i], acc[k][:, li], None if pats is None else pa[k][li])
                         + cross_force(fp.v[k][:, li], inertia_times(model.inertias[i], fp.v[k][:, li],
                                                                      None if pats is None else fp.pv[k][li]),
                                       None if pats is None else fp.pv[k][li])
                         - f_ext_body[:, i] for li, i in enumerate(c.bodies)], axis=1)     # eq. (34)
        charge_adds(sum(6 + 6 * bool(f_ext_body[:, i].any()) for i in c.bodies))
    tau = np.zeros((B, cm.ny))
    for k in range(cm.nclusters - 1, -1, -1):                                      # backward pass
        S = fp.S[k]
        Stf, _ = charged_product(np.swapaxes(S, 1, 2), f[k].reshape(B, -1, 1), None if pats is None else
                                 (pats[k].S_nz.T, pats[k].S_unit.T), None, "S^T f")
        tau[:, cm.y_slice(k)] = Stf[..., 0]                                        # eq. (31)
        p = cm.parents[k]
        if p >= 0:
            f[p] += force_to_parent(fp.ct[k], f[k],
                                            len(cm.clusters[p].bodies))            # eq. (35)
    return tau, f


def c_rnea(cm, q, yd, ydd, f_ext=None):
    """Independent torques tau_y (B, ny) (or (ny,)) realising ydd at state (q, yd)."""
    refuse_armature(cm.model, "c_rnea", "sd.projected_rnea (spanning-tree armature projected)")
    q, yd, ydd, B, single = cm._state(q, yd=yd, ydd=ydd)
    if B == 0:
        return np.zeros((0, cm.ny))
    fx = external_forces(cm.model, f_ext, B)
    tau, _ = c_rnea_sweeps(cm, q, yd, ydd, fx)
    check_finite(tau, "c_rnea", dict(q=q, yd=yd, ydd=ydd, f_ext=fx), "tau")
    return unbatch(tau, single)
