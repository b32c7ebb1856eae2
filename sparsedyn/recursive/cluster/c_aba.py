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
from ...opcount import charge
from .._common import external_forces, gravity_acceleration, matmul, refuse_armature
from ..aba import _solve_small, charge_pivot_inverse
from ._cluster_common import (bias_forces, check_cluster_pivots, cluster_congruence, cluster_force_to_parent,
                              cluster_inertia, cluster_motion, forward_pass)


def c_aba_sweeps(cm, q, yd, tau, f_ext_body, armature=None, Xup=None):
    """Algorithm 1 on batched arrays; returns ydd (B, ny) and cluster accelerations (list of
    (B, n_b, 6))."""
    model, B = cm.model, q.shape[0]
    fp = forward_pass(cm, q, yd, Xup)                                              # lines 1-19
    IA = [cluster_inertia(model, c.bodies, B) for c in cm.clusters]                # line 20
    pA = [bias_forces(model, c.bodies, fp.v[k], f_ext_body).reshape(B, -1)         # line 21
          for k, c in enumerate(cm.clusters)]
    U, D, Dinv_u = [None] * cm.nclusters, [None] * cm.nclusters, [None] * cm.nclusters
    for k in range(cm.nclusters - 1, -1, -1):                                      # lines 25-35
        S = fp.S[k]
        U[k] = matmul(IA[k], S, kind="U = IA S")                                   # line 26
        D[k] = matmul(np.swapaxes(S, 1, 2), U[k], kind="D = S^T U")                # line 27
        if armature is not None:
            D[k] = D[k] + np.diag(armature[cm.y_slice(k)])
        check_cluster_pivots(cm, k, D[k], IA[k], S,
                             None if armature is None else armature[cm.y_slice(k)])
        charge_pivot_inverse(D[k].shape[-1])                   # paper count: D^-1 once, then products
        u = tau[:, cm.y_slice(k)] - np.einsum("bji,bj->bi", S, pA[k])              # line 28
        charge(S.shape[1] * S.shape[2], S.shape[1] * S.shape[2], kind="u = tau - S^T pA")
        Dinv_u[k] = _solve_small(D[k], u, "D^-1 u")
        p = cm.parents[k]
        if p >= 0:                                                                 # line 29
            Dinv_Ut = _solve_small(D[k], np.swapaxes(U[k], 1, 2), "D^-1 U^T")
            Ia = IA[k] - matmul(U[k], Dinv_Ut, kind="U D^-1 U^T")                  # line 30
            pa = (pA[k] + np.einsum("bij,bj->bi", Ia, fp.c[k].reshape(B, -1))      # line 31
                  + np.einsum("bij,bj->bi", U[k], Dinv_u[k]))
            n6 = Ia.shape[1]
            charge(n6 * n6 + n6 * S.shape[2], n6 * n6 + n6 * S.shape[2], kind="pa")
            n_parent = len(cm.clusters[p].bodies)
            Xo, ob = fp.Xout[k], cm.output_blocks[k]
            IA[p] += cluster_congruence(Xo, ob, Ia, n_parent)                      # line 32
            pA[p] += cluster_force_to_parent(Xo, ob, pa.reshape(B, -1, 6), n_parent).reshape(B, -1)  # line 33
    a0 = gravity_acceleration(model, B)                                            # line 38
    ydd = np.zeros((B, cm.ny))
    acc = [None] * cm.nclusters
    for k, c in enumerate(cm.clusters):                                            # lines 39-43
        p = cm.parents[k]
        a_prime = (cluster_motion(fp.Xout[k], cm.output_blocks[k], a0 if p < 0 else acc[p])
                   + fp.c[k]).reshape(B, -1)                                       # line 40
        rhs = Dinv_u[k] - _solve_small(D[k], np.einsum("bji,bj->bi", U[k], a_prime), "D^-1 U^T a")
        ydd[:, cm.y_slice(k)] = rhs                                                # line 41
        acc[k] = (a_prime + np.einsum("bij,bj->bi", fp.S[k], rhs)).reshape(B, -1, 6)   # line 42
        n6, m = fp.S[k].shape[1:]
        charge(2 * n6 * m, 2 * n6 * m, kind="U^T a', S ydd")
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
