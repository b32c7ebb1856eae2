"""Yamane-Nakamura O(N) forward dynamics by the principle of virtual work (seed 004), batched.

Every link is a free body, A_k a_k = t_k + Gamma^T n (eq. 15-18), and every joint m is a
constraint between its links (eq. 9, 13, 19):

    K_m (a_m - mX_p a_p) = K_m c_m,     c_m = v_m x S_m qd_m,   K_m = T_m^T (T_m: orthonormal
                                                                basis of the forces S_m^T f = 0)
    qdd_m = K_Jm (a_m - mX_p a_p - c_m),  K_Jm = (S_m^T S_m)^-1 S_m^T,  K_m K_Jm^T = 0 (eq. 10-11)

so Phi n = alpha with Phi = Gamma A^-1 Gamma^T (eq. 21), block-sparse over the joints that share a
link. Path 1 eliminates joints from the leaves to the root (eq. 36-41: M_j = (updated Phi_jj)^-1,
n'_j = M_j alpha_j); path 2 back-substitutes from the root (eq. 47: n_j = n'_j - M_j Phi_jr n_r);
then a = A^-1 (t + Gamma^T n) (eq. 48) and the joint accelerations (eq. 49). Errata (notes): the
constraint right-hand side a_m contains BOTH link terms, a_m = h_m + H_{m,m-1} A^-1_{m-1} t_{m-1}
- H_{m,m} A^-1_m t_m, and t_k contains every joint torque acting on link k (its own joint's and
the reactions of its children's). Link splitting (Sec. 4): a link carrying more than 3 joints is
split into (joints - 2) pieces welded by fixed joints (K = 1), each with an equal share of its
inertia, so no link carries more than 3 joints and the elimination stays O(N).

Preconditions: every link inertia invertible (else SingularModelError naming the link). The joint
wrenches K_J^T tau + K^T n equal RNEA's joint forces; they are returned on request.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..batch import state, unbatch
from ..errors import SingularModelError, check_finite
from ..kinematics import joint_transforms
from ..model.model import WORLD
from ..opcount import charge, counting
from ..spatial_costs import linear_cost
from ..spatial import cross_force, cross_motion, to_linear_first
from ._common import (S_times, S_transpose_times, external_forces, gravity_acceleration, inertia_times,
                      matmul, refuse_armature)
from .aba import _solve_small, charge_pivot_inverse


@dataclass
class _Joint:
    child: int                  # virtual link index (= joint index)
    parent: int                 # virtual link index, WORLD for the fixed base
    body: int | None            # model body whose tree joint this is; None for a fixed (split) joint
    K: np.ndarray               # (nc, 6) constraint rows
    K_child_Ainv: np.ndarray    # K A_child^-1 (constant)
    Phi_child: np.ndarray       # K A_child^-1 K^T (constant part of Phi_jj)
    remaining: list = field(default_factory=list)   # lower-index joints sharing a link (elim. order)


@dataclass
class VirtualWorkPlan:
    """The free-body system after link splitting (constant for a model)."""

    link_body: np.ndarray       # model body of each virtual link
    link_share: np.ndarray      # its share of the body's inertia
    Ainv: list                  # per virtual link: A^-1 (6, 6)
    joints: list                # _Joint per virtual link (its joint to its parent link)
    children: list              # per virtual link: tree joints (virtual indices) hanging from it
    body_link: np.ndarray       # model body -> virtual link carrying its own joint
    body_pieces: list           # model body -> its virtual links
    KJ_T: list                  # model body -> K_J^T = S (S^T S)^-1 (6, n): active-force subspace
    split: bool

    @property
    def nlinks(self):
        return len(self.link_body)

    @property
    def max_joints_per_link(self):
        return max(len(c) + 1 for c in self.children)


def _constraint_basis(S):
    """Orthonormal T with S^T T = 0 (the constraint-force subspace), as rows K = T^T."""
    u, _, _ = np.linalg.svd(S, full_matrices=True)
    return u[:, S.shape[1]:].T.copy()


def virtual_work_plan(model, split=True):
    """Virtual links and joints of `model`; split=True applies Yamane's link-splitting rule."""
    link_body, link_share, joint_specs, body_link = [], [], [], np.zeros(model.nbodies, int)
    child_piece = {}
    for b in range(model.nbodies):
        kids = list(model.children[b])
        n_joints = len(kids) + 1
        pieces = n_joints - 2 if (split and n_joints > 3) else 1
        first = len(link_body)
        for k in range(pieces):
            link_body.append(b)
            link_share.append(1.0 / pieces)
            if k == 0:
                p = int(model.parents[b])
                joint_specs.append((WORLD if p == WORLD else None, b))    # parent resolved below
            else:
                joint_specs.append((first + k - 1, None))                 # fixed joint to the previous piece
        body_link[b] = first
        for i, c in enumerate(kids):                                      # piece 0: own joint + 1 child,
            child_piece[c] = first + min(i, pieces - 1) if pieces > 1 else first   # last piece: 2 children
    joints, children = [], [[] for _ in link_body]
    Ainv = []
    for x, (b, share) in enumerate(zip(link_body, link_share)):
        I = share * model.inertias[b]
        try:
            Ainv.append(np.linalg.inv(np.linalg.cholesky(I)).T @ np.linalg.inv(np.linalg.cholesky(I)))
        except np.linalg.LinAlgError:
            raise SingularModelError(f"model {model.name!r}: link {model.link_names[b]!r} has a singular "
                                     f"spatial inertia; the virtual-work method needs every link's A^-1",
                                     bodies=[model.link_names[b]]) from None
    for x, (parent_spec, body) in enumerate(joint_specs):
        if body is None:                                                  # fixed (split) joint
            parent, K = parent_spec, np.eye(6)
        else:
            p = int(model.parents[body])
            parent = WORLD if p == WORLD else child_piece[body]
            K = _constraint_basis(model.joints[body].S)
            if parent != WORLD:
                children[parent].append(x)
        KA = K @ Ainv[x]
        joints.append(_Joint(x, parent, body, K, KA, KA @ K.T))
    for x, j in enumerate(joints):
        if j.body is None:
            children[j.parent].append(x)
    for j in joints:                                                      # Path-1 neighbours
        if j.parent != WORLD:
            j.remaining = [j.parent] + [l for l in children[j.parent] if l < j.child]
    link_body = np.array(link_body)
    return VirtualWorkPlan(link_body, np.array(link_share), Ainv, joints, [sorted(c) for c in children],
                           body_link, [np.flatnonzero(link_body == b) for b in range(model.nbodies)],
                           [np.linalg.pinv(j.S).T for j in model.joints], split)


_PLANS = {}


def _plan(model, split):
    key = (id(model), bool(split))
    hit = _PLANS.get(key)
    if hit is None or hit[0] is not model:
        hit = (model, virtual_work_plan(model, split))
        _PLANS[key] = hit
    return hit[1]


def _rows_times(K, X):
    """K X for constraint rows K (nc, 6) and a batched Transform X: rows of (X^T K^T)^T."""
    nc = K.shape[0]
    if nc == 0:
        return np.zeros((X.E.shape[0], 0, 6))
    return np.stack([X.transpose_apply_force(np.broadcast_to(K[r], (X.E.shape[0], 6))) for r in range(nc)], 1)


def _charge_mv(A, kind, transpose):
    """A x (or A^T x): as written dense; paper count with a constant A's (2-D: the plan's K,
    K A^-1, A^-1) structural zeros and +-1 entries, a state-dependent A general."""
    r, c = A.shape[-2:]
    written = (r * c, (c - 1 if not transpose else 0) * r + (0 if not transpose else (r - 1) * c))
    if A.ndim == 2 and counting():
        M = A.T if transpose else A
        mul, add, _ = linear_cost(M != 0, np.abs(M) == 1, np.ones(M.shape[1], bool))
        charge(mul, add, kind=kind, written=written)
    else:
        charge(*written, kind=kind)


def _mv(A, x, kind):
    _charge_mv(A, kind, False)
    return np.einsum("...ij,...j->...i", A, x)


def _mtv(A, x, kind):
    _charge_mv(A, kind, True)
    return np.einsum("...ji,...j->...i", A, x)


def yamane_sweeps(model, plan, q, qd, tau, f_ext_body, Xup=None):
    """Returns qdd (B, nv), body accelerations (B, N, 6) and joint wrenches (B, N, 6), internal
    angular-first."""
    B, N = q.shape[0], model.nbodies
    Xup = joint_transforms(model, q) if Xup is None else Xup
    a0 = gravity_acceleration(model, B)
    v = np.zeros((B, N, 6))
    c = np.zeros((B, N, 6))
    for i, joint in enumerate(model.joints):                      # link velocities, c_m = v_m x S qd
        vJ = S_times(joint.S, qd[:, model.v_slice(i)])
        p = model.parents[i]
        v[:, i] = vJ if p == WORLD else Xup[i].apply_motion(v[:, p]) + vJ
        if p != WORLD:
            c[:, i] = cross_motion(v[:, i], vJ)
    L = plan.nlinks
    t = np.zeros((B, L, 6))                                        # t_k (eq. 28, erratum: all torques)
    active = np.zeros((B, N, 6))                                   # K_J^T tau per tree joint
    for b in range(N):
        active[:, b] = S_times(plan.KJ_T[b], tau[:, model.v_slice(b)])
        bias = cross_force(v[:, b], inertia_times(model.inertias[b], v[:, b])) - f_ext_body[:, b]
        for x in plan.body_pieces[b]:
            t[:, x] -= plan.link_share[x] * bias
    for x, j in enumerate(plan.joints):
        if j.body is None:
            continue
        t[:, x] += active[:, j.body]                               # own joint torque
        if j.parent != WORLD:
            t[:, j.parent] -= Xup[j.body].transpose_apply_force(active[:, j.body])   # reaction
    KX = [None] * L                                                # K_j jX_parent
    P_parent = [None] * L                                          # K_j X_j A_parent^-1
    Phi, alpha = {}, [None] * L
    for x, j in enumerate(plan.joints):                            # Phi, alpha (eq. 21, 31-34)
        nc = j.K.shape[0]
        if nc == 0:
            continue
        X = Xup[j.body] if j.body is not None else None
        KX[x] = _rows_times(j.K, X) if X is not None else np.broadcast_to(j.K, (B, 6, 6))
        ck = c[:, j.body] if j.body is not None else np.zeros((B, 6))
        alpha[x] = _mv(j.K, ck, "K c") - _mv(j.K_child_Ainv, t[:, x], "K A^-1 t")
        if j.parent == WORLD:
            alpha[x] = alpha[x] + _mv(KX[x], a0, "K X a0")
            Phi[(x, x)] = np.broadcast_to(j.Phi_child, (B, nc, nc)).copy()
        else:
            P_parent[x] = matmul(KX[x], np.broadcast_to(plan.Ainv[j.parent], (B, 6, 6)), kind="K X A^-1")
            alpha[x] = alpha[x] + _mv(P_parent[x], t[:, j.parent], "K X A^-1 t")   # erratum term
            Phi[(x, x)] = j.Phi_child + matmul(P_parent[x], np.swapaxes(KX[x], 1, 2), kind="Phi_jj")
    for x, j in enumerate(plan.joints):                            # off-diagonal blocks (eq. 38-39)
        if KX[x] is None or j.parent == WORLD:
            continue
        for r in j.remaining:
            if KX[r] is None:
                continue
            if r == j.parent:                                      # S_{j,p} = -K_j X_j A_p^-1 K_p^T
                Phi[(x, r)] = -matmul(P_parent[x], np.broadcast_to(plan.joints[r].K.T, (B, 6, KX[r].shape[1])),
                                      kind="Phi_jp")
            else:                                                  # siblings share the parent link
                Phi[(x, r)] = matmul(P_parent[x], np.swapaxes(KX[r], 1, 2), kind="Phi_jl")

    def block(r, s):
        return Phi[(r, s)] if (r, s) in Phi else np.swapaxes(Phi[(s, r)], 1, 2) if (s, r) in Phi else None

    n_prime, W = [None] * L, [dict() for _ in range(L)]
    for x in range(L - 1, -1, -1):                                 # Path 1, leaves -> root (eq. 36-41)
        if KX[x] is None:
            continue
        Pjj = Phi[(x, x)]
        charge_pivot_inverse(Pjj.shape[-1])                        # paper count: M_j once, then products
        n_prime[x] = _solve_small(Pjj, alpha[x], "M_j alpha_j")   # n'_j = M_j alpha_j (eq. 40)
        R = [r for r in plan.joints[x].remaining if KX[r] is not None and block(x, r) is not None]
        for r in R:
            W[x][r] = _solve_small(Pjj, block(x, r), "M_j Phi_jr")      # M_j Phi_jr
            alpha[r] = alpha[r] - _mtv(block(x, r), n_prime[x], "alpha_r")
        for ir, r in enumerate(R):                                 # Schur update among neighbours (eq. 41)
            for s in R[:ir + 1]:
                upd = matmul(np.swapaxes(block(x, r), 1, 2), W[x][s], kind="Phi_rj M_j Phi_js")
                if (r, s) in Phi:
                    Phi[(r, s)] = Phi[(r, s)] - upd
                elif (s, r) in Phi:
                    Phi[(s, r)] = Phi[(s, r)] - np.swapaxes(upd, 1, 2)
                else:
                    Phi[(r, s)] = -upd                             # fill inside a link's clique
    n = [None] * L
    for x in range(L):                                             # Path 2, root -> leaves (eq. 47)
        if KX[x] is None:
            continue
        n[x] = n_prime[x]
        for r, Wr in W[x].items():
            n[x] = n[x] - _mv(Wr, n[r], "M_j Phi_jr n_r")
    acc = np.zeros((B, L, 6))
    for x, j in enumerate(plan.joints):                            # eq. (48): a = A^-1 (t + Gamma^T n)
        acc[:, x] += _mv(np.broadcast_to(plan.Ainv[x], (B, 6, 6)), t[:, x], "A^-1 t")
        if n[x] is not None:
            acc[:, x] += _mtv(j.K_child_Ainv, n[x], "A^-1 K^T n")
            if j.parent != WORLD:
                acc[:, j.parent] -= _mtv(P_parent[x], n[x], "A^-1 X^T K^T n")
    qdd = np.zeros((B, model.nv))
    a_body = np.zeros((B, N, 6))
    wrench = np.zeros((B, N, 6))
    for b in range(N):                                             # eq. (49): qdd = K_J (a - X a_p - c)
        x = plan.body_link[b]
        p = int(model.parents[b])
        a_body[:, b] = acc[:, x]
        rel = acc[:, x] - Xup[b].apply_motion(a0 if p == WORLD else a_body[:, p]) - c[:, b]
        qdd[:, model.v_slice(b)] = S_transpose_times(plan.KJ_T[b], rel)
        j = plan.joints[x]
        wrench[:, b] = active[:, b] + (0.0 if n[x] is None else _mtv(j.K, n[x], "K^T n"))
    return qdd, a_body, wrench


def yamane_forward_dynamics(model, q, v, tau, f_ext=None, split=True, return_wrenches=False):
    """Joint accelerations (B, nv) (or (nv,)) by Yamane-Nakamura's virtual-work method.

    split: apply the link-splitting rule (links carrying > 3 joints). return_wrenches: also return
    the joint wrenches (B, N, 6): the LOCAL wrench each body receives through its joint,
    linear-first (Pinocchio's data.f, RNEA's joint forces)."""
    refuse_armature(model, "yamane_forward_dynamics", "sd.aba or a forward_dynamics plan")
    q, vecs, B, single = state(model, q, v=v, tau=tau)
    plan = _plan(model, split)
    fx = external_forces(model, f_ext, B)
    qdd, _, wrench = yamane_sweeps(model, plan, q, vecs["v"], vecs["tau"], fx)
    check_finite(qdd, "yamane_forward_dynamics", dict(q=q, **vecs, f_ext=fx), "qdd")
    if return_wrenches:
        check_finite(wrench, "yamane_forward_dynamics", dict(q=q, **vecs, f_ext=fx), "wrenches")
        return unbatch(qdd, single), unbatch(to_linear_first(wrench), single)
    return unbatch(qdd, single)
