"""ABA: forward dynamics qdd = FD(q, qd, tau, f_ext), batched.

Featherstone, Table 7.1 (articulated-body algorithm; Nori Sec. V-A, eq. (13)-(15)). Preconditions:
a tree with parent(i) < i and every articulated joint inertia D_i = S_i^T I^A_i S_i invertible
(else SingularModelError naming the bodies and batch elements: the mass matrix is singular, e.g.
massless leaf links).
"""
from __future__ import annotations

import numpy as np

from ..batch import state, unbatch
from ..errors import NonFiniteError, SingularModelError, check_finite
from ..kinematics import joint_transforms
from ..model.model import WORLD
from ..opcount import charge
from ..spatial import cross_force, cross_motion, inertia_to_parent
from ..spatial_costs import (FULL6, cross_cost, ldlt_invert_cost, rigid_inertia_cost,
                             symmetric_matvec_cost, zero_axes_after_projection)
from ._common import (S_product, S_times, S_transpose_times, articulated_times, charge_external,
                      charge_sum, column_times, external_forces, gravity_acceleration, joint_armature,
                      gravity_pattern, inertia_times, out_pattern, row_times, subspace_out_pattern,
                      symmetric_update, tracked)

#: relative size below which D_i = S_i^T I^A_i S_i counts as singular, against the size of the
#: articulated inertia I^A_i it is taken from (articulated_scale): relative to the bodies joint i
#: moves, so a 1e12 kg link elsewhere in the tree does not make light branches "singular"
SINGULAR_TOLERANCE = 1e-12


def _solve_small(D, rhs, kind):
    """D^-1 rhs for (B, n, n) SPD blocks (n <= 6); rhs (B, n) or (B, n, k). As written: a solve per
    call; paper count: a product with D^-1, inverted once per joint (charge_pivot_inverse)."""
    n = D.shape[-1]
    k = 1 if rhs.ndim == 2 else rhs.shape[-1]
    charge(n * n * k, n * (n - 1) * k, kind=kind, written=(n ** 3 // 3 + n * n, n ** 3 // 3, n))
    if n == 1:
        return rhs / (D[:, 0, 0][:, None] if rhs.ndim == 2 else D[:, :, :1])
    return np.linalg.solve(D, rhs[..., None])[..., 0] if rhs.ndim == 2 else np.linalg.solve(D, rhs)


def charge_pivot_inverse(n):
    """Paper count of inverting the n x n pivot D_i once: 1 division for n = 1, an LDL^T factor
    and invert otherwise (231 flops for a 6-DoF joint: seed 002, appendix)."""
    mul, add, div = ldlt_invert_cost(n)
    charge(mul, add, div, kind="D^-1", written=(0, 0))


def articulated_scale(IA, S):
    """(B,) the yardstick of the pivot D = S^T I^A S: max |I^A| times max |S|^2 (0 for a subtree
    without mass or inertia, whose pivot is singular at any scale)."""
    return np.abs(IA).max(axis=(-2, -1)) * np.abs(S).max(axis=(-2, -1)) ** 2


#: mass ratio within the bodies a joint moves beyond which a numerically singular pivot is put
#: down to the ratio (double precision resolves ~1e16 between the largest and smallest terms)
MASS_RATIO_CAUSE = 1e6


def singularity_cause(model, i, ev_min, scale):
    """(bodies moved by joint i, why its articulated inertia D_i = S^T I^A S is singular): no
    mass and no inertia at all; a negative D_i (inconsistent inertias); masses too far apart
    for double precision; else no inertia about the joint's motion."""
    sub = model.subtree(i)
    names = [model.link_names[k] for k in sub]
    if not np.any(model.inertias[sub]):
        return names, f"bodies {names}, which have no mass and no rotational inertia (massless links)"
    mass = float(model.masses[sub].sum())
    if ev_min < 0:
        return names, (f"bodies {names} ({mass:.3g} kg), whose articulated inertia about it is "
                       f"negative ({ev_min:.3g}): their inertias are not physically consistent "
                       f"(see the ModelWarning of load_urdf)")
    relative = f"S^T I^A S = {ev_min:.3g}, {ev_min / scale if scale else 0.0:.2g} of |I^A| = {scale:.3g}"
    ratio = mass_ratio_cause(model, sub)
    if ratio:
        return names, f"bodies {names}, numerically singular ({relative}): {ratio}"
    return names, (f"bodies {names} ({mass:.3g} kg), which have no inertia about its motion in "
                   f"these configurations ({relative}; e.g. point masses on its axis)")


def mass_ratio_cause(model, bodies):
    """'their masses differ too much ...' naming the heaviest and the lightest of `bodies` when
    their ratio exceeds MASS_RATIO_CAUSE, else None."""
    masses = model.masses[list(bodies)]
    heavy = bodies[int(np.argmax(masses))]
    light = [k for k in bodies if 0 < model.masses[k] < model.masses[heavy] / MASS_RATIO_CAUSE]
    if not light:
        return None
    lightest = min(light, key=lambda k: model.masses[k])
    return (f"their masses differ too much for double precision ({model.masses[heavy]:.3g} kg "
            f"for {model.link_names[heavy]!r} against {model.masses[lightest]:.3g} kg for "
            f"{model.link_names[lightest]!r})")


def structural_singularity_error(model, bodies):
    """The SingularModelError of a forward-dynamics system that is singular for every state (the
    planner found its D structurally singular at variables of `bodies`): names the topmost joints
    whose subtrees have no mass and no inertia (a massless leaf), else those bodies."""
    joints = []
    for b in sorted(set(bodies)):
        tops = [i for i in model.support(b) if not np.any(model.inertias[model.subtree(i)])]
        if tops and tops[-1] not in joints:
            joints.append(tops[-1])
    if joints:
        causes = [f"joint {model.joints[i].name!r} moves {singularity_cause(model, i, 0.0, 0.0)[1]}"
                  for i in joints]
        moved = sorted({k for i in joints for k in model.subtree(i)})
    else:
        moved = sorted(set(bodies))
        causes = [f"bodies {[model.link_names[k] for k in moved]} have no inertia along their "
                  f"joints' motion in the worst-case pattern (entries below 1e-12 of a body's "
                  f"largest count as zero)"]
    names = [model.link_names[k] for k in moved]
    return SingularModelError(f"model {model.name!r}: the mass matrix is singular for every state: "
                              + "; ".join(causes), bodies=names)


def check_articulated_pivots(model, D, i, IA):
    """Raise SingularModelError naming the bodies and the cause if D_i is (numerically) singular
    for some batch elements: smallest eigenvalue <= SINGULAR_TOLERANCE * articulated_scale.
    A D_i that is not finite (inertias or positions too large for double precision) raises
    NonFiniteError (a ValueError): it is an overflow, not a singular mass matrix."""
    S = model.joints[i].S
    scale = articulated_scale(IA, S)
    finite = np.isfinite(D).all(axis=(-2, -1)) & np.isfinite(scale)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise NonFiniteError(f"q: the articulated inertia about joint {model.joints[i].name!r} of "
                             f"model {model.name!r} overflows (inertias or positions too large "
                             f"for double precision) at batch indices {bad[:10].tolist()}"
                             f"{'...' if bad.size > 10 else ''}", arguments=("q",),
                             batch_indices=bad.tolist())
    ev_min = np.linalg.eigvalsh(D).min(axis=-1) if D.shape[-1] > 1 else D[:, 0, 0]
    bad = np.flatnonzero(ev_min <= SINGULAR_TOLERANCE * scale)
    if bad.size:
        sub, cause = singularity_cause(model, i, float(ev_min[bad[0]]), float(scale[bad[0]]))
        raise SingularModelError(
            f"model {model.name!r}: the mass matrix is singular: joint {model.joints[i].name!r} "
            f"moves {cause}, at batch indices {bad[:10].tolist()}{'...' if bad.size > 10 else ''}",
            bodies=sub, batch_indices=bad.tolist())


def aba_sweeps(model, q, qd, tau, f_ext_body, Xup=None):
    """Three sweeps on batched arrays; returns qdd (B, nv) and body accelerations (B, N, 6)."""
    B, N = q.shape[0], model.nbodies
    Xup = joint_transforms(model, q) if Xup is None else Xup
    v = np.zeros((B, N, 6))
    c = np.zeros((B, N, 6))
    IA = [np.broadcast_to(I, (B, 6, 6)).copy() for I in model.inertias]
    pA = np.zeros((B, N, 6))
    pv, pc, ppA = [None] * N, [None] * N, [None] * N              # structural patterns (counting)
    PIA = [tracked(np.ones((6, 6), bool))] * N                     # I^A_i: symmetric, general
    for i, joint in enumerate(model.joints):                       # pass 1: velocities, biases
        vJ = S_times(joint.S, qd[:, model.v_slice(i)])
        pJ = tracked(subspace_out_pattern(joint.S))
        p = model.parents[i]
        if p == WORLD:
            v[:, i], pv[i], pc[i] = vJ, pJ, tracked(np.zeros(6, bool))
        else:
            v[:, i] = Xup[i].apply_motion(v[:, p], pv[p]) + vJ
            pv[i] = charge_sum(out_pattern(Xup[i].structure_cost, "X m", pv[p]), pJ)
            c[:, i] = cross_motion(v[:, i], vJ, pv[i], pJ)         # c_i = v_i x S_i qd_i
            pc[i] = out_pattern(cross_cost, pv[i], pJ)
        pIv = out_pattern(rigid_inertia_cost, pv[i])
        pA[:, i] = cross_force(v[:, i], inertia_times(model.inertias[i], v[:, i], pv[i]),
                               pv[i], pIv) - f_ext_body[:, i]
        ppA[i] = charge_external(f_ext_body, i, out_pattern(cross_cost, pv[i], pIv, force=True))
    U, Dinv_u, D = [None] * N, [None] * N, [None] * N
    for i in range(N - 1, -1, -1):                                  # pass 2: articulated inertias
        S = model.joints[i].S
        n = S.shape[1]
        U[i] = S_product(IA[i], S, PIA[i])                         # U_i = I^A_i S_i
        D[i] = S_product(np.swapaxes(U[i], -1, -2), S)             # D_i = S_i^T U_i
        arm = joint_armature(model, i)
        if arm is not None:
            D[i] = D[i] + arm                                       # + diag(armature): rotor inertia
        check_articulated_pivots(model, D[i], i, IA[i])
        charge_pivot_inverse(n)
        u = tau[:, model.v_slice(i)] - S_transpose_times(S, pA[:, i], ppA[i])   # u_i = tau_i - S^T p^A
        charge(add=n, kind="tau - S^T p", written=(0, 0))
        Dinv_u[i] = _solve_small(D[i], u, "D^-1 u")
        p = model.parents[i]
        if p != WORLD:
            Dinv_Ut = _solve_small(D[i], np.swapaxes(U[i], -1, -2), "D^-1 U^T")
            PIa = tracked(zero_axes_after_projection(PIA[i], S) if PIA[i] is not None else None)
            Ia = IA[i] - symmetric_update(U[i], Dinv_Ut, PIa)       # I^a = I^A - U D^-1 U^T
            pa = (pA[:, i] + articulated_times(Ia, c[:, i], PIa, pc[i])
                  + column_times(U[i], Dinv_u[i]))                  # p^a = p^A + I^a c + U D^-1 u
            ppa = charge_sum(charge_sum(ppA[i], out_pattern(symmetric_matvec_cost, PIa, pc[i])),
                             tracked(FULL6))
            IA[p] += inertia_to_parent(Xup[i], Ia, PIa)
            if PIa is not None:
                Pc = Xup[i].structure.congruence_cost(PIa)[2] if Xup[i].structure else np.ones((6, 6), bool)
                charge(add=int(np.triu(PIA[p] & Pc).sum()), kind="I^A_p +", written=(0, 0))
                PIA[p] = PIA[p] | Pc
            pA[:, p] += Xup[i].transpose_apply_force(pa, ppa)
            ppA[p] = charge_sum(ppA[p], out_pattern(Xup[i].structure_cost, "X^T f", ppa))
    a0 = gravity_acceleration(model, B)
    a = np.zeros((B, N, 6))
    pa_ = [None] * N
    qdd = np.zeros((B, model.nv))
    for i, joint in enumerate(model.joints):                        # pass 3: accelerations
        p = model.parents[i]
        pin = gravity_pattern(model) if p == WORLD else pa_[p]
        a_prime = Xup[i].apply_motion(a0 if p == WORLD else a[:, p], pin) + c[:, i]
        ppr = charge_sum(out_pattern(Xup[i].structure_cost, "X m", pin), pc[i])
        s = model.v_slice(i)
        qdd[:, s] = Dinv_u[i] - _solve_small(D[i], row_times(U[i], a_prime, ppr), "D^-1 U^T a")
        charge(add=joint.nv, kind="D^-1 u - (.)", written=(0, 0))
        a[:, i] = a_prime + S_times(joint.S, qdd[:, s])
        pa_[i] = charge_sum(ppr, tracked(subspace_out_pattern(joint.S)))
    return qdd, a


def aba(model, q, v, tau, f_ext=None):
    """Joint accelerations (B, nv) (or (nv,)) produced by torques `tau` at state (q, v)."""
    q, vecs, B, single = state(model, q, v=v, tau=tau)
    fx = external_forces(model, f_ext, B)
    qdd, _ = aba_sweeps(model, q, vecs["v"], vecs["tau"], fx)
    check_finite(qdd, "aba", dict(q=q, **vecs, f_ext=fx), "qdd")
    return unbatch(qdd, single)
