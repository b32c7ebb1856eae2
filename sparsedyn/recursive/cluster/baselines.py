"""Baselines the cluster algorithms are compared with (seed 003, Sec. II-C..E), batched.

All work on the spanning tree with the global loop constraints of a ClusterModel:

    projected_rnea      tau_y = G^T RNEA(q, G yd, G ydd + g)                       (Sec. II-C)
    projection_fd       (G^T H G) ydd = tau_y - G^T (C + H g)                       (Sec. II-D)
    lagrange_fd         [[H, K^T], [K, 0]] [qdd; -lambda] = [tau - C; k]            (Sec. II-D)
                        method="dense": one LU of the KKT matrix; method="ltl": Featherstone's
                        sparse H = L^T L (sparsedyn.recursive.ltl) and the c x c Schur complement
                        K H^-1 K^T = Y^T Y, Y = L^-T K^T
    projection_inverse_osim  Lambda^-1 = J G (G^T H G)^-1 G^T J^T                   (Sec. II-E)
    approximate_rnea / approximate_aba / approximate_efpa: the independent tree with the rotor
                        inertia reflected onto the joint diagonal (N^2 I_rot; gyroscopic coupling
                        ignored, Sec. II-C..E)

H from CRBA, C = RNEA(q, qd, 0) (bias and gravity). The products with G, g, H and J are charged
dense, as the paper's C++ (ROAM-Lab-ND/generalized_rbda) forms them with dense Eigen matrices
(A = G^T H G, b = tau - G^T (C + H g)); sparse_G=True charges them by G's, g's and J's
structural zeros (ClusterModel patterns probed as in _cluster_patterns), H's branch-induced
sparsity and the symmetric products' upper triangles: the equally optimised variant. The
Lagrange method with L^T L (not in the paper) charges its K products on K's probed pattern and
Y = L^-T K^T's (the DoFs supporting K's), Y^T Y's upper triangle.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...batch import as_batch, unbatch
from ...errors import ModelError, check_finite
from ...kinematics import frame_jacobian, joint_transforms
from ...loops.cluster_model import ClusterModel
from ...model.model import WORLD, ModelBuilder
from ...opcount import charge, counting
from ...spatial import Transform, inertia_to_parent
from .._common import external_forces
from ..crba import crba_sweeps
from ..ltl import ltl, pattern as ltl_pattern, solve_lower, solve_lower_transpose
from ..rnea import rnea, rnea_sweeps
from .c_aba import c_aba
from .c_efpa import c_efpa
from ._cluster_patterns import (charged_product, dense, explicit_pattern, implicit_pattern, jacobian_pattern,
                                mass_matrix_pattern)


def _dense_cholesky_solve(A, b, kind):
    """A^-1 b for SPD (B, n, n), b (B, n) or (B, n, k): Cholesky + two triangular solves."""
    n = A.shape[-1]
    k = 1 if b.ndim == 2 else b.shape[-1]
    charge(n ** 3 // 6 + n * n * k, n ** 3 // 6 + n * n * k, div=n, sqrt=n, kind=kind)
    L = np.linalg.cholesky(A)
    rhs = b[..., None] if b.ndim == 2 else b
    x = np.linalg.solve(np.swapaxes(L, 1, 2), np.linalg.solve(L, rhs))
    return x[..., 0] if b.ndim == 2 else x


def _matvec(A, x, kind, pattern=None, x_nz=None):
    """A x, charged by A's pattern (nz, unit) (None: dense) and x's structural nonzeros."""
    return charged_product(A, x[..., None], pattern, dense(None if x_nz is None else x_nz[:, None]), kind)[0][..., 0]


def _matTvec(A, x, kind, pattern=None):
    """A^T x, charged by A's pattern (None: dense)."""
    At = None if pattern is None else (pattern[0].T, pattern[1].T)
    return charged_product(np.swapaxes(A, 1, 2), x[..., None], At, None, kind)[0][..., 0]


def _patterns(cm, sparse_G):
    """(G's pattern, g's nonzeros) when counting with sparse_G, else (None, None): dense G."""
    return explicit_pattern(cm) if counting() and sparse_G else (None, None)


def _H_pattern(model, PG):
    """H's branch-induced pattern when the products are counted sparse (PG given), else None."""
    return None if PG is None else dense(mass_matrix_pattern(model))


def _reduced_inertia(H, G, PG, PH=None):
    """G^T H G: with G's pattern PG (and H's, PH), charged by their nonzeros and the symmetric
    result's upper triangle; with PG None, as two dense products (module doc)."""
    HG, PHG = charged_product(H, G, PH, PG, "H G")
    Gt = None if PG is None else (PG[0].T, PG[1].T)
    return charged_product(np.swapaxes(G, 1, 2), HG, Gt, dense(PHG), "G^T H G", symmetric=PG is not None)[0]


# ---------------------------------------------------------------------------- inverse dynamics

def projected_rnea(cm, q, yd, ydd, f_ext=None, sparse_G=False):
    """tau_y = G^T RNEA(q, G yd, G ydd + g) (seed 003, Sec. II-C); sparse_G: see the module doc."""
    q, yd, ydd, B, single = cm._state(q, yd=yd, ydd=ydd)
    G, g = cm.explicit(q, yd)
    PG, g_nz = _patterns(cm, sparse_G)
    qd = _matvec(G, yd, "G yd", PG)
    qdd = _matvec(G, ydd, "G ydd", PG) + g
    charge(add=0 if g_nz is None else int(g_nz.sum()), kind="G ydd", written=(0, 0))     # + g
    fx = external_forces(cm.model, f_ext, B)
    tau, *_ = rnea_sweeps(cm.model, q, qd, qdd, fx)
    tau_y = check_finite(_matTvec(G, tau, "G^T tau", PG), "projected_rnea",
                         dict(q=q, yd=yd, ydd=ydd, f_ext=fx), "tau")
    return unbatch(tau_y, single)


# ---------------------------------------------------------------------------- forward dynamics

def projection_fd(cm, q, yd, tau, f_ext=None, sparse_G=False):
    """Projection method: (G^T H G) ydd = tau_y - G^T (C + H g) (seed 003, Sec. II-D); sparse_G:
    see the module doc."""
    q, yd, tau, B, single = cm._state(q, yd=yd, tau=tau)
    model = cm.model
    Xup = joint_transforms(model, q)
    G, g = cm.explicit(q, yd)
    PG, g_nz = _patterns(cm, sparse_G)
    qd = _matvec(G, yd, "G yd", PG)
    inputs = dict(q=q, yd=yd, tau=tau, f_ext=external_forces(model, f_ext, B))
    H = crba_sweeps(model, q, Xup)
    C, *_ = rnea_sweeps(model, q, qd, np.zeros_like(qd), inputs["f_ext"], Xup)
    Hy = _reduced_inertia(H, G, PG, _H_pattern(model, PG))
    rhs = tau - _matTvec(G, C + _matvec(H, g, "H g", _H_pattern(model, PG), x_nz=g_nz), "G^T (C + H g)", PG)
    if sparse_G:
        charge(add=cm.ny + (model.nv if g_nz is None or g_nz.any() else 0), kind="G^T (C + H g)", written=(0, 0))
    ydd = _dense_cholesky_solve(check_finite(Hy, "projection_fd", inputs, "G^T H G"), rhs,
                                "chol(G^T H G)")
    return unbatch(check_finite(ydd, "projection_fd", inputs, "ydd"), single)


def lagrange_fd(cm, q, qd, tau, f_ext=None, method="ltl"):
    """Lagrange multipliers on the spanning tree; q, qd SPANNING (qd satisfying K qd = 0), tau the
    independent torques. Returns (ydd, qdd). method: "dense" (LU of the KKT matrix) or "ltl"."""
    model = cm.model
    q, qd, tau, B, single = cm._state(q, qd=qd, tau=tau)
    Xup = joint_transforms(model, q)
    inputs = dict(q=q, qd=qd, tau=tau, f_ext=external_forces(model, f_ext, B))
    H = check_finite(crba_sweeps(model, q, Xup), "lagrange_fd", inputs, "the mass matrix")
    C, *_ = rnea_sweeps(model, q, qd, np.zeros_like(qd), inputs["f_ext"], Xup)
    K, k = cm.implicit(q, qd)
    rhs_q = cm.spanning_torque(tau) - C
    n, c = model.nv, cm.nc
    if method == "dense":
        A = np.zeros((B, n + c, n + c))
        A[:, :n, :n] = H
        A[:, :n, n:] = np.swapaxes(K, 1, 2)
        A[:, n:, :n] = K
        N = n + c
        charge(N ** 3 // 3 + N * N, N ** 3 // 3 + N * N, div=N, kind="LU(KKT)")
        x = np.linalg.solve(A, np.concatenate((rhs_q, k), axis=1)[..., None])[..., 0]
        qdd = x[:, :n]
    elif method == "ltl":
        L = ltl(model, H)                                          # H = L^T L
        qdd0 = solve_lower(model, L, solve_lower_transpose(model, L, rhs_q))    # H^-1 (tau - C)
        if c:                                    # K's pattern; Y's reaches the DoFs supporting K's
            PK = implicit_pattern(cm) if counting() else None
            PY = None if PK is None else (ltl_pattern(model).mask.T.astype(int) @ PK.T.astype(int)) > 0
            Y = solve_lower_transpose(model, L, np.swapaxes(K, 1, 2).copy())     # Y = L^-T K^T
            A, _ = charged_product(np.swapaxes(Y, 1, 2), Y, dense(None if PY is None else PY.T), dense(PY),
                                   "Y^T Y", symmetric=PY is not None)        # K H^-1 K^T
            lam = _dense_cholesky_solve(A, k - _matvec(K, qdd0, "K qdd0", dense(PK)), "chol(K H^-1 K^T)")
            qdd = qdd0 + solve_lower(model, L, _matvec(Y, lam, "Y lambda", dense(PY)))
        else:
            qdd = qdd0
    else:
        raise ValueError(f"method: expected 'dense' or 'ltl', got {method!r}")
    check_finite(qdd, "lagrange_fd", inputs, "qdd")
    ydd = qdd[:, cm.independent_v]
    return (unbatch(ydd, single), unbatch(qdd, single))


# ---------------------------------------------------------------------------- inverse OSIM

def projection_inverse_osim(cm, q, frames, sparse_G=False):
    """Lambda^-1 = J G (G^T H G)^-1 G^T J^T for LOCAL frame Jacobians (linear-first), (B, 6m, 6m);
    sparse_G: see the module doc (J's zero columns and the symmetric result exploited too)."""
    model = cm.model
    q, single = as_batch(q, model.nq, "q")
    B = q.shape[0]
    G, _ = cm.explicit(q, np.zeros((B, cm.ny)))
    H = crba_sweeps(model, q)
    J = np.concatenate([frame_jacobian(model, q, f) for f in frames], axis=1)    # (B, 6m, nv)
    PG, _ = _patterns(cm, sparse_G)
    Hy = _reduced_inertia(H, G, PG, _H_pattern(model, PG))
    JG, PJG = charged_product(J, G, dense(None if PG is None else jacobian_pattern(model, frames)), PG, "J G")
    X = _dense_cholesky_solve(check_finite(Hy, "projection_inverse_osim", {"q": q}, "G^T H G"),
                              np.swapaxes(JG, 1, 2), "chol(G^T H G)")
    out, _ = charged_product(JG, X, dense(PJG), None, "J G Hy^-1 G^T J^T", symmetric=PG is not None)
    return unbatch(check_finite(out, "projection_inverse_osim", {"q": q}, "Lambda^-1"), single)


# ---------------------------------------------------------------------------- approximations

@dataclass(frozen=True)
class ReflectedInertiaModel:
    """The independent tree (the bodies carrying independent coordinates) with rotor masses welded
    to their parents and the rotor inertia reflected onto the joint diagonal (`armature`, ny)."""

    model: object
    armature: np.ndarray    # (ny,) in the tree's v order
    q_index: np.ndarray     # spanning q entries that form the independent tree's q
    y_order: np.ndarray     # tree v entry j is the cluster model's independent coordinate y_order[j]
    tree_clusters: object   # ClusterModel of single-body clusters over `model` (for the ABA)


def reflected_inertia_model(cm, reflect=True):
    """Build the approximate model of seed 003, Sec. II-C: H~ = diag(N^2 I_rot) on the independent
    tree. Dependent bodies that are not rotors (e.g. four-bar couplers) are dropped (H~ = 0).
    reflect=False keeps H~ = 0 everywhere: the unconstrained algorithms of Sec. II-C."""
    m = cm.model
    independent_bodies, rotors = set(), {}
    armature = np.zeros(cm.ny)
    for k, c in enumerate(cm.clusters):
        indep_local = set(c.independent_local.tolist())
        col = 0
        for i in c.bodies:
            if set(range(col, col + m.joints[i].nv)) <= indep_local:
                independent_bodies.add(i)
            col += m.joints[i].nv
        if c.kind == "unconstrained" or not c.rotor_roles:
            continue
        G_role = c.G_role
        for r in c.rotor_roles:
            body = int(c.role_bodies[r])
            axis = m.joints[body].axis
            I_axis = float(axis @ m.inertias[body][:3, :3] @ axis)
            rotors[body] = True
            # reflected inertia N^2 I_rot on the diagonal of the independent coordinates it follows
            armature[cm.y_slice(k)] += G_role[r] ** 2 * I_axis
    armature = armature if reflect else np.zeros(cm.ny)
    b = ModelBuilder(f"{m.name}-reflected", gravity=m.gravity)
    for i in range(m.nbodies):
        p = int(m.parents[i])
        if i in independent_bodies:
            if p != WORLD and p not in independent_bodies:
                raise ModelError(f"link {m.link_names[i]!r}: its parent {m.link_names[p]!r} is a dependent "
                                 f"body; the reflected-inertia approximation needs independent parents")
            b.add_body(m.link_names[i], WORLD if p == WORLD else m.link_names[p], m.joints[i],
                       placement=m.joint_placements[i], spatial=m.inertias[i])
        elif i in rotors and p != WORLD:
            T = m.joint_placements[i]
            X = Transform.from_placement(T[:3, :3], T[:3, 3])      # rotor at angle 0 in its parent
            b.add_inertia(b._index(m.link_names[p]), inertia_to_parent(X, m.inertias[i]))
    tree = b.build()
    q_index = np.concatenate([np.arange(m.q_index[m.link_names.index(n)],
                                        m.q_index[m.link_names.index(n)] + j.nq)
                              for n, j in zip(tree.link_names, tree.joints)])
    v_index = np.concatenate([np.arange(m.v_index[m.link_names.index(n)],
                                        m.v_index[m.link_names.index(n)] + j.nv)
                              for n, j in zip(tree.link_names, tree.joints)])
    # armature is in cluster (y) order; the tree's v order is body order: permute
    y_of_v = {int(v): y for y, v in enumerate(cm.independent_v)}
    perm = np.array([y_of_v[int(v)] for v in v_index])
    return ReflectedInertiaModel(tree, armature[perm], q_index, perm, ClusterModel(tree))


def _tree_state(approx, q, *ys):
    return (np.asarray(q, dtype=float)[..., approx.q_index],
            *(np.asarray(y, dtype=float)[..., approx.y_order] for y in ys))


def _cluster_order(approx, x):
    out = np.empty_like(x)
    out[..., approx.y_order] = x
    return out


def approximate_rnea(approx, q, yd, ydd):
    """tau_y ~ RNEA(independent tree) + H~ ydd; q spanning, yd/ydd/tau in the cluster model's order."""
    qt, ydt, yddt = _tree_state(approx, q, yd, ydd)
    charge(approx.armature.size, approx.armature.size, kind="H~ ydd")
    return _cluster_order(approx, rnea(approx.model, qt, ydt, yddt) + approx.armature * yddt)


def approximate_aba(approx, q, yd, tau):
    """ABA on the independent tree with diag(H~) added to the joint pivots D_i (C-ABA on
    single-body clusters with `armature`)."""
    qt, ydt, taut = _tree_state(approx, q, yd, tau)
    return _cluster_order(approx, c_aba(approx.tree_clusters, qt, ydt, taut, armature=approx.armature))


def approximate_efpa(approx, q, frames):
    """Lambda^-1 ~ J_ind (H_ind + H~)^-1 J_ind^T (seed 003, Sec. II-E): EFPA on the independent
    tree with diag(H~) added to the joint pivots (C-EFPA on single-body clusters with
    `armature`); q spanning, frames on independent bodies."""
    return c_efpa(approx.tree_clusters, np.asarray(q, dtype=float)[..., approx.q_index], frames,
                  armature=approx.armature)
