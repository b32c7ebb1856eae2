"""C-ABA: constrained forward dynamics ydd = FD(q, yd, tau_y, f_ext) on a cluster tree, batched.

Seed 003, Algorithm 1 (cluster-based articulated-body algorithm), with the typos of lines 18-19
fixed as in the notes (c_k = LambdaX_lambda (block(S_i) g_k + stack(v_i x S_i qd_i)), see
_cluster_common). Preconditions: q assembled (loop closures satisfied), every cluster's
D_k = S_k^T I^A_k S_k invertible (else SingularModelError naming the cluster). Costs O(N_C l^3)
for clusters of at most l bodies. `armature` (ny,) adds diag(armature) to D_k: with the
independent-tree model of `baselines.reflected_inertia_model` that is the approximate ABA.
"""
from __future__ import annotations

import numpy as np

from ...batch import unbatch
from ...errors import check_finite
from ...opcount import charge, counting
from .._common import external_forces, gravity_acceleration, refuse_armature
from ..aba import _solve_small
from ._articulation import articulate
from ._cluster_common import bias_forces, charge_adds, cluster_inertia, forward_pass
from ._cluster_patterns import charged_product, cluster_patterns, dense
from ._cluster_transform import force_to_parent, motion


def c_aba_sweeps(cm, q, yd, tau, f_ext_body, armature=None, Xup=None):
    """Algorithm 1 on batched arrays; returns ydd (B, ny) and cluster accelerations (list of
    (B, n_b, 6)). Products are charged by the patterns of S_k and I^A_k (_cluster_patterns)."""
    model, B = cm.model, q.shape[0]
    fp = forward_pass(cm, q, yd, Xup)                                              # lines 1-19
    pats = cluster_patterns(cm) if counting() else None
    IA = [cluster_inertia(model, c.bodies, B) for c in cm.clusters]                # line 20
    PIA = [pt.I_nz for pt in pats] if pats else [None] * cm.nclusters           # its pattern
    pA = [bias_forces(model, c.bodies, fp.v[k], f_ext_body).reshape(B, -1)         # line 21
          for k, c in enumerate(cm.clusters)]
    art, Dinv_u = [None] * cm.nclusters, [None] * cm.nclusters
    for k in range(cm.nclusters - 1, -1, -1):                                      # lines 25-35
        ak = art[k] = articulate(cm, k, fp, IA, PIA, pats, armature)               # lines 26-27, 29-30, 32
        m = fp.S[k].shape[2]
        St = None if pats is None else (pats[k].S_nz.T, pats[k].S_unit.T)
        Stp, _ = charged_product(np.swapaxes(fp.S[k], 1, 2), pA[k][..., None], St, None, "u = tau - S^T pA")
        u = tau[:, cm.y_slice(k)] - Stp[..., 0]                                    # line 28
        charge(add=m, kind="u = tau - S^T pA")
        Dinv_u[k] = _solve_small(ak.D, u, "D^-1 u")
        p = cm.parents[k]
        if p >= 0:
            Iac, _ = charged_product(ak.Ia, fp.c[k].reshape(B, -1, 1), dense(ak.PIa),
                                     dense(None if fp.pc[k] is None else fp.pc[k][:, None]), "pa")
            UDu, _ = charged_product(ak.U, Dinv_u[k][..., None], dense(ak.PU), None, "pa")
            pa = pA[k] + Iac[..., 0] + UDu[..., 0]                                 # line 31
            charge(add=2 * pa.shape[1], kind="pa")
            pA[p] += force_to_parent(fp.ct[k], pa.reshape(B, -1, 6), len(cm.clusters[p].bodies)).reshape(B, -1)  # line 33
    a0 = gravity_acceleration(model, B)                                            # line 38
    ydd = np.zeros((B, cm.ny))
    acc = [None] * cm.nclusters
    for k, c in enumerate(cm.clusters):                                            # lines 39-43
        p = cm.parents[k]
        a_prime = (motion(fp.ct[k], a0 if p < 0 else acc[p])
                   + fp.c[k]).reshape(B, -1)                                       # line 40
        charge_adds(fp.pc[k] is not None and fp.pc[k].sum())
        PS = None if pats is None else (pats[k].S_nz, pats[k].S_unit)
        ak = art[k]
        Uta, _ = charged_product(np.swapaxes(ak.U, 1, 2), a_prime[..., None],
                                 dense(None if ak.PU is None else ak.PU.T), None, "U^T a', S ydd")
        rhs = Dinv_u[k] - _solve_small(ak.D, Uta[..., 0], "D^-1 U^T a")
        ydd[:, cm.y_slice(k)] = rhs                                                # line 41
        Sy, _ = charged_product(fp.S[k], rhs[..., None], PS, None, "U^T a', S ydd")
        acc[k] = (a_prime + Sy[..., 0]).reshape(B, -1, 6)                          # line 42
        n6, m = fp.S[k].shape[1:]
        charge(add=m + (int(PS[0].any(1).sum()) if PS else n6), kind="U^T a', S ydd", written=(0, m + n6))
    return ydd, acc


def c_aba(cm, q, yd, tau, f_ext=None, armature=None):
    """Independent accelerations ydd (B, ny) (or (ny,)) of the cluster model `cm` at spanning
    configuration q (B, nq) and independent velocities yd under independent torques tau (B, ny).

    f_ext: {link name: wrench on that link in its frame, linear-first}, as in sparsedyn.aba.
    The rotor inertia is this `armature` (ny,), on the independent coordinates; a model with
    its own (spanning-tree) armature is refused (ModelError naming the joints)."""
    refuse_armature(cm.model, "c_aba", "c_aba's armature argument (independent coordinates) "
                    "or sd.projection_fd")
    q, yd, tau, B, single = cm._state(q, yd=yd, tau=tau)
    if B == 0:
        return np.zeros((0, cm.ny))
    arm = None if armature is None else np.asarray(armature, dtype=float).reshape(cm.ny)
    fx = external_forces(cm.model, f_ext, B)
    ydd, _ = c_aba_sweeps(cm, q, yd, tau, fx, arm)
    check_finite(ydd, "c_aba", dict(q=q, yd=yd, tau=tau, f_ext=fx), "ydd")
    return unbatch(ydd, single)
