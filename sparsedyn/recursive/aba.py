"""ABA: forward dynamics qdd = FD(q, qd, tau, f_ext), batched.

Featherstone, Table 7.1 (articulated-body algorithm; Nori Sec. V-A, eq. (13)-(15)). Preconditions:
a tree with parent(i) < i and every articulated joint inertia D_i = S_i^T I^A_i S_i invertible
(else SingularModelError naming the bodies and batch elements: the mass matrix is singular, e.g.
massless leaf links).
"""
from __future__ import annotations

import numpy as np

from ..batch import state, unbatch
from ..errors import SingularModelError
from ..kinematics import joint_transforms
from ..model.model import WORLD
from ..opcount import charge
from ..spatial import cross_force, cross_motion
from ._common import (S_times, S_transpose_times, external_forces, gravity_acceleration,
                      inertia_times, matmul)
from ..spatial import inertia_to_parent

#: relative size, against the largest body inertia entry, below which D_i counts as singular
SINGULAR_TOLERANCE = 1e-12


def _solve_small(D, rhs, kind):
    """D^-1 rhs for (B, n, n) SPD blocks (n <= 6); rhs (B, n) or (B, n, k)."""
    n = D.shape[-1]
    charge(n ** 3 // 3 + n * n, n ** 3 // 3, div=n, kind=kind)
    if n == 1:
        return rhs / (D[:, 0, 0][:, None] if rhs.ndim == 2 else D[:, :, :1])
    return np.linalg.solve(D, rhs[..., None])[..., 0] if rhs.ndim == 2 else np.linalg.solve(D, rhs)


def check_articulated_pivots(model, D, i, scale):
    """Raise SingularModelError if D_i is (numerically) singular for some batch elements."""
    ev_min = np.linalg.eigvalsh(D).min(axis=-1) if D.shape[-1] > 1 else D[:, 0, 0]
    bad = np.flatnonzero(ev_min <= SINGULAR_TOLERANCE * scale)
    if bad.size:
        sub = [model.link_names[k] for k in model.subtree(i)]
        raise SingularModelError(
            f"model {model.name!r}: the mass matrix is singular: joint {model.joints[i].name!r} moves "
            f"bodies {sub} whose articulated inertia about it is zero (massless links?) "
            f"at batch indices {bad[:10].tolist()}{'...' if bad.size > 10 else ''}",
            bodies=sub, batch_indices=bad.tolist())


def aba_sweeps(model, q, qd, tau, f_ext_body, Xup=None):
    """Three sweeps on batched arrays; returns qdd (B, nv) and body accelerations (B, N, 6)."""
    B, N = q.shape[0], model.nbodies
    Xup = joint_transforms(model, q) if Xup is None else Xup
    scale = max(1.0, float(np.abs(model.inertias).max()))
    v = np.zeros((B, N, 6))
    c = np.zeros((B, N, 6))
    IA = [np.broadcast_to(I, (B, 6, 6)).copy() for I in model.inertias]
    pA = np.zeros((B, N, 6))
    for i, joint in enumerate(model.joints):                       # pass 1: velocities, biases
        vJ = S_times(joint.S, qd[:, model.v_slice(i)])
        p = model.parents[i]
        if p == WORLD:
            v[:, i] = vJ
        else:
            v[:, i] = Xup[i].apply_motion(v[:, p]) + vJ
            c[:, i] = cross_motion(v[:, i], vJ)                     # c_i = v_i x S_i qd_i
        pA[:, i] = cross_force(v[:, i], inertia_times(model.inertias[i], v[:, i])) - f_ext_body[:, i]
    U, Dinv_u, D = [None] * N, [None] * N, [None] * N
    for i in range(N - 1, -1, -1):                                  # pass 2: articulated inertias
        S = model.joints[i].S
        U[i] = matmul(IA[i], np.broadcast_to(S, (B, 6, S.shape[1])))          # U_i = I^A_i S_i
        D[i] = matmul(np.broadcast_to(S.T, (B, S.shape[1], 6)), U[i])         # D_i = S_i^T U_i
        check_articulated_pivots(model, D[i], i, scale)
        u = tau[:, model.v_slice(i)] - S_transpose_times(S, pA[:, i])         # u_i = tau_i - S^T p^A
        Dinv_u[i] = _solve_small(D[i], u, "D^-1 u")
        p = model.parents[i]
        if p != WORLD:
            Dinv_Ut = _solve_small(D[i], np.swapaxes(U[i], -1, -2), "D^-1 U^T")
            Ia = IA[i] - matmul(U[i], Dinv_Ut)                     # I^a = I^A - U D^-1 U^T
            pa = (pA[:, i] + inertia_times(Ia, c[:, i])
                  + np.einsum("bij,bj->bi", U[i], Dinv_u[i]))      # p^a = p^A + I^a c + U D^-1 u
            IA[p] += inertia_to_parent(Xup[i], Ia)
            pA[:, p] += Xup[i].transpose_apply_force(pa)
    a0 = gravity_acceleration(model, B)
    a = np.zeros((B, N, 6))
    qdd = np.zeros((B, model.nv))
    for i, joint in enumerate(model.joints):                        # pass 3: accelerations
        p = model.parents[i]
        a_prime = Xup[i].apply_motion(a0 if p == WORLD else a[:, p]) + c[:, i]
        s = model.v_slice(i)
        qdd[:, s] = Dinv_u[i] - _solve_small(D[i], np.einsum("bji,bj->bi", U[i], a_prime), "D^-1 U^T a")
        a[:, i] = a_prime + S_times(joint.S, qdd[:, s])
    return qdd, a


def aba(model, q, v, tau, f_ext=None):
    """Joint accelerations (B, nv) (or (nv,)) produced by torques `tau` at state (q, v)."""
    q, vecs, B, single = state(model, q, v=v, tau=tau)
    qdd, _ = aba_sweeps(model, q, vecs["v"], vecs["tau"], external_forces(model, f_ext, B))
    return unbatch(qdd, single)
