"""Compiled PV-OSIMr: the Delassus matrix Lambda^-1 = J M^-1 J^T of seed 000, Algorithm 3, one
state at a time, for a batch of configurations q (B, nq) -> (B, m, m).

The kernel walks a FlatProgram (pv_osimr_program.build_program) and is generic over joint types
(codes, sparse S), so it compiles once for every model and contact set. Per state it computes the
joint transforms X_i = (E, r) on the fly inside the backward sweep (each is used only there), the
articulated inertias (lines 8-11), the span recursions (16)-(17), then (18) over N, (19) and the
assembly (13) straight into the output, in the public convention (rows of K_k are linear-first in
the LOCAL contact frame, as in recursive/pv_osimr.py whose local-frame form it mirrors; spatial
formulas mirror sparsedyn/spatial.py). Structure used: compact (E, r) transforms, S as <= 3
non-zeros per column, 1-DoF pivots as scalars, multi-DoF pivots by Cholesky (they are SPD),
symmetric updates computed on one triangle.

Preconditions: a program from build_program; q rows with unit quaternions (batch.check_configuration).
A pivot <= program.tol (singular mass matrix) stops that state and reports the body in `status`;
`pv_osimr_compiled` then lets the NumPy reference raise the typed SingularModelError.
"""
from __future__ import annotations

import numpy as np
from numba import get_num_threads, njit, prange, typeof

from ..identity_cache import IdentityCache
from ..opcount import counting
from .parallel import idle_cores, parallel_launch
from .pv_osimr_program import JOINT_CODES, build_program

REVOLUTE, PRISMATIC, SPHERICAL, PLANAR, FREE = (JOINT_CODES[k] for k in
                                                ("revolute", "prismatic", "spherical", "planar", "free"))


# The per-body steps of the backward sweep are written out in _state's body loop: a helper taking
# arrays, even numba-inlined, costs a reference count update (an atomic NRT_incref/decref call)
# per array and body (experiments/kernel_design.md, "Reference counts in the PV-OSIMr kernel").
# The two helpers left run only off the revolute path (multi-DoF joints, quaternions).
_INLINE = dict(cache=True, inline="always")


@njit(**_INLINE)
def _quat_to_rotation(x, y, z, w, R):
    """Mirrors spatial.quaternion_to_rotation ((x, y, z, w) order)."""
    R[0, 0] = 1 - 2 * (y * y + z * z)
    R[0, 1] = 2 * (x * y - z * w)
    R[0, 2] = 2 * (x * z + y * w)
    R[1, 0] = 2 * (x * y + z * w)
    R[1, 1] = 1 - 2 * (x * x + z * z)
    R[1, 2] = 2 * (y * z - x * w)
    R[2, 0] = 2 * (x * z - y * w)
    R[2, 1] = 2 * (y * z + x * w)
    R[2, 2] = 1 - 2 * (x * x + y * y)


@njit(**_INLINE)
def _pivot(n, i, S_idx, S_val, S_nnz, armature, tol, IA, U, D, Dinv):
    """U = H^A_i S_i, D_i = S_i^T U + diag(armature_i), D_i^-1 (Algorithm 3 line 8; seed eq.
    (7)-(9); the armature is the joints' rotor inertia, Model.armature). Column a of S_i has
    S_nnz[i, a] <= 3 non-zeros. Returns False if D_i is singular (a pivot <= tol)."""
    for a in range(n):
        for row in range(6):
            acc = 0.0
            for t in range(S_nnz[i, a]):
                acc += IA[i, row, S_idx[i, a, t]] * S_val[i, a, t]
            U[row, a] = acc
    for a in range(n):
        for b in range(n):
            acc = 0.0
            for t in range(S_nnz[i, a]):
                acc += S_val[i, a, t] * U[S_idx[i, a, t], b]
            D[a, b] = acc
        D[a, a] += armature[i, a]
    if n == 1:                                       # 1-DoF: the pivot is the scalar d_i
        if not D[0, 0] > tol:
            return False
        Dinv[0, 0] = 1.0 / D[0, 0]
        return True
    for k in range(n):                               # SPD: in-place Cholesky D = L L^T (lower)
        v = D[k, k]
        for t in range(k):
            v -= D[k, t] * D[k, t]
        if not v > tol:                              # a Cholesky pivot bounds lambda_min from above
            return False
        v = np.sqrt(v)
        D[k, k] = v
        for j in range(k + 1, n):
            w = D[j, k]
            for t in range(k):
                w -= D[j, t] * D[k, t]
            D[j, k] = w / v
    for k in range(n):                               # Dinv (lower) = L^-1
        Dinv[k, k] = 1.0 / D[k, k]
        for j in range(k + 1, n):
            w = 0.0
            for t in range(k, j):
                w -= D[j, t] * Dinv[t, k]
            Dinv[j, k] = w / D[j, j]
    for a in range(n):                               # D^-1 = L^-T L^-1 (upper of D), symmetric
        for b in range(a, n):
            w = 0.0
            for t in range(b, n):
                w += Dinv[t, a] * Dinv[t, b]
            D[a, b] = w
    for a in range(n):
        for b in range(a, n):
            Dinv[a, b] = D[a, b]
            Dinv[b, a] = D[a, b]
    return True


@njit(cache=True)
def _state(P, q, out, IA, Rst, Om, Om0, Kst, Wst, E, r, RJ, pJ, U, D, Dinv, V, RS, RSD, T):
    """Algorithm 3 for one configuration q into out (m, m). Returns -1, or the body whose
    articulated pivot is singular."""
    jtype, parent, qidx, axis, XT_R, XT_p = P.jtype, P.parent, P.qidx, P.axis, P.XT_R, P.XT_p
    nvj, S_idx, S_val, S_nnz, tol = P.nvj, P.S_idx, P.S_val, P.S_nnz, P.tol
    armature = P.armature
    d_slot, branching, rows, ee_slot, half = P.d_slot, P.branching, P.rows, P.ee_slot, P.half
    K0, a_slot, pair_rows, offsets = P.K0, P.a_slot, P.pair_rows, P.offsets
    kc_dst, kc_src, kc_rslot, w_slot, w_pair = P.kc_dst, P.kc_src, P.kc_rslot, P.w_slot, P.w_pair
    blk_k1, blk_k2, blk_p1, blk_w = P.blk_k1, P.blk_k2, P.blk_p1, P.blk_w
    nb = jtype.shape[0]
    inertia = P.inertia                              # line 2: H^A_i = H_i, elementwise (the
    for i in range(inertia.shape[0]):                # slice assignment's generic loop is ~3x
        for a in range(6):                           # slower)
            for b in range(6):
                IA[i, a, b] = inertia[i, a, b]
    for k in range(ee_slot.shape[0]):                # line 4: lambda(i)P_i = K_i^T, Om_i = 0
        e = ee_slot[k]                               # (elementwise: a view per slot costs a
        for row in range(6):                         # reference count update)
            for col in range(6):
                Rst[e, row, col] = K0[k, row, col]
                Om[e, row, col] = 0.0
    for i in range(nb - 1, -1, -1):                  # line 5: backward sweep
        # X_i = iX_lambda(i) = X_J(q_i) X_T(i) as (E, r) (kinematics.joint_transforms, Featherstone
        # eq. 4.29): R = R_T R_J, p = p_T + R_T p_J, E = R^T, r = p; q_i = q[k:k + nq_i]
        jt, k = jtype[i], qidx[i]
        pJ[0] = 0.0
        pJ[1] = 0.0
        pJ[2] = 0.0
        if jt == REVOLUTE or jt == PLANAR:           # Rodrigues (spatial.rotation_about_axis)
            if jt == REVOLUTE:
                a0, a1, a2, th = axis[i, 0], axis[i, 1], axis[i, 2], q[k]
            else:                                    # planar: rotation theta about z, p = (x, y, 0)
                a0, a1, a2, th = 0.0, 0.0, 1.0, q[k + 2]
                pJ[0] = q[k]
                pJ[1] = q[k + 1]
            sn, c1 = np.sin(th), 1.0 - np.cos(th)
            RJ[0, 0] = 1.0 - c1 * (a1 * a1 + a2 * a2)   # 1 + s K + (1 - c) K^2, K = skew(a)
            RJ[1, 1] = 1.0 - c1 * (a0 * a0 + a2 * a2)
            RJ[2, 2] = 1.0 - c1 * (a0 * a0 + a1 * a1)
            RJ[0, 1] = -sn * a2 + c1 * a0 * a1
            RJ[1, 0] = sn * a2 + c1 * a0 * a1
            RJ[0, 2] = sn * a1 + c1 * a0 * a2
            RJ[2, 0] = -sn * a1 + c1 * a0 * a2
            RJ[1, 2] = -sn * a0 + c1 * a1 * a2
            RJ[2, 1] = sn * a0 + c1 * a1 * a2
        elif jt == PRISMATIC:
            for a in range(3):
                for b in range(3):
                    RJ[a, b] = 1.0 if a == b else 0.0
                pJ[a] = q[k] * axis[i, a]
        elif jt == SPHERICAL:
            _quat_to_rotation(q[k], q[k + 1], q[k + 2], q[k + 3], RJ)
        else:                                        # FREE: position then quaternion
            _quat_to_rotation(q[k + 3], q[k + 4], q[k + 5], q[k + 6], RJ)
            for a in range(3):
                pJ[a] = q[k + a]
        for a in range(3):
            r[a] = (XT_p[i, a] + XT_R[i, a, 0] * pJ[0] + XT_R[i, a, 1] * pJ[1]
                    + XT_R[i, a, 2] * pJ[2])
            for b in range(3):
                E[b, a] = (XT_R[i, a, 0] * RJ[0, b] + XT_R[i, a, 1] * RJ[1, b]
                           + XT_R[i, a, 2] * RJ[2, b])
        e00, e01, e02, e10, e11, e12, e20, e21, e22 = (E[0, 0], E[0, 1], E[0, 2], E[1, 0], E[1, 1],
                                                       E[1, 2], E[2, 0], E[2, 1], E[2, 2])
        r0, r1, r2 = r[0], r[1], r[2]
        n = nvj[i]
        p = parent[i]
        h = half[i]
        dinv = 0.0
        if n == 1:                                   # 1-DoF: S_i = axis on rows h..h+2, U[:, 0] = u
            a0, a1, a2 = axis[i, 0], axis[i, 1], axis[i, 2]
            for row in range(6):                     # line 8: u = H^A s, pivot d_i = s^T u
                U[row, 0] = IA[i, row, h] * a0 + IA[i, row, h + 1] * a1 + IA[i, row, h + 2] * a2
            dd = U[h, 0] * a0 + U[h + 1, 0] * a1 + U[h + 2, 0] * a2 + armature[i, 0]
            if not dd > tol:                         # aba.check_articulated_pivots
                return i
            dinv = 1.0 / dd
            if p >= 0:                               # lines 10-11: H^A - u u^T / d
                for row in range(6):
                    v = U[row, 0] * dinv
                    for col in range(row, 6):
                        IA[i, row, col] -= v * U[col, 0]
                        IA[i, col, row] = IA[i, row, col]
        else:
            if not _pivot(n, i, S_idx, S_val, S_nnz, armature, tol, IA, U, D, Dinv):   # line 8
                return i
            for row in range(6):                     # V = U D^-1
                for a in range(n):
                    acc = 0.0
                    for b in range(n):
                        acc += U[row, b] * Dinv[b, a]
                    V[row, a] = acc
            if p >= 0:                               # lines 10-11: H^A - U D^-1 U^T
                for row in range(6):
                    for col in range(row, 6):
                        acc = 0.0
                        for a in range(n):
                            acc += V[row, a] * U[col, a]
                        IA[i, row, col] -= acc
                        IA[i, col, row] = IA[i, row, col]
        if p >= 0:
            # IA[p] += X^T IA[i] X for X = (E, r) and a symmetric IA[i]; mirrors
            # spatial.inertia_to_parent: with A1 = E^T A E, B1 = E^T B E, C1 = E^T C E
            # (IA[i] = [[A, B], [B^T, C]]), B2 = B1 + rx C1,
            # X^T IA X = [[A1 + rx B1^T - B2 rx, B2], [B2^T, C1]]
            for blk in range(3):                     # T[0..2] = A1, B1, C1
                ro = 3 if blk == 2 else 0
                co = 0 if blk == 0 else 3
                for a in range(3):                   # T[3] = block E
                    x0, x1, x2 = IA[i, ro + a, co], IA[i, ro + a, co + 1], IA[i, ro + a, co + 2]
                    T[3, a, 0] = x0 * e00 + x1 * e10 + x2 * e20
                    T[3, a, 1] = x0 * e01 + x1 * e11 + x2 * e21
                    T[3, a, 2] = x0 * e02 + x1 * e12 + x2 * e22
                for b in range(3):
                    w0, w1, w2 = T[3, 0, b], T[3, 1, b], T[3, 2, b]
                    T[blk, 0, b] = e00 * w0 + e10 * w1 + e20 * w2
                    T[blk, 1, b] = e01 * w0 + e11 * w1 + e21 * w2
                    T[blk, 2, b] = e02 * w0 + e12 * w1 + e22 * w2
            for a in range(3):                       # T[3] = B2 = B1 + rx C1, column by column
                c0, c1, c2 = T[2, 0, a], T[2, 1, a], T[2, 2, a]
                T[3, 0, a] = T[1, 0, a] + r1 * c2 - r2 * c1
                T[3, 1, a] = T[1, 1, a] + r2 * c0 - r0 * c2
                T[3, 2, a] = T[1, 2, a] + r0 * c1 - r1 * c0
            for a in range(3):
                # (rx B1^T)[:, a] = r x B1[a, :];  (B2 rx)[a, :] = -(r x B2[a, :])
                b0, b1, b2 = T[1, a, 0], T[1, a, 1], T[1, a, 2]
                c0, c1, c2 = T[3, a, 0], T[3, a, 1], T[3, a, 2]
                T[0, 0, a] += r1 * b2 - r2 * b1
                T[0, 1, a] += r2 * b0 - r0 * b2
                T[0, 2, a] += r0 * b1 - r1 * b0
                T[0, a, 0] += r1 * c2 - r2 * c1
                T[0, a, 1] += r2 * c0 - r0 * c2
                T[0, a, 2] += r0 * c1 - r1 * c0
            for a in range(3):
                for b in range(3):
                    IA[p, a, b] += T[0, a, b]
                    IA[p, a, 3 + b] += T[3, a, b]
                    IA[p, 3 + b, a] += T[3, a, b]
                    IA[p, 3 + a, 3 + b] += T[2, a, b]
        d = d_slot[i]
        if d < 0:                                    # line 14: ES(i) empty
            continue
        c = 6                                        # rows of R[d] that X multiplies below
        if branching[i] and n == 1:                  # line 7 then 15: Om = s s^T / d
            for row in range(6):
                for col in range(6):
                    Om[d, row, col] = 0.0
                    Rst[d, row, col] = 1.0 if row == col else 0.0
            for a in range(3):
                for b in range(3):
                    Om[d, h + a, h + b] = axis[i, a] * dinv * axis[i, b]
            if p >= 0:                               # line 13: (1 - s u^T / d) X
                for a in range(3):
                    f = axis[i, a] * dinv
                    for col in range(6):
                        Rst[d, h + a, col] -= f * U[col, 0]
        elif branching[i]:                           # line 7: iP_i = 1, iOm_i = 0
            for row in range(6):                     # line 15: S D^-1 S^T
                for col in range(6):
                    Om[d, row, col] = 0.0
            for a in range(n):
                for b in range(n):
                    for t in range(S_nnz[i, a]):
                        for u in range(S_nnz[i, b]):
                            Om[d, S_idx[i, a, t], S_idx[i, b, u]] += (
                                S_val[i, a, t] * Dinv[a, b] * S_val[i, b, u])
            if p >= 0:                               # line 13: (1 - S D^-1 U^T) X, S D^-1 U^T = S V^T
                for row in range(6):
                    for col in range(6):
                        Rst[d, row, col] = 1.0 if row == col else 0.0
                for a in range(n):
                    for t in range(S_nnz[i, a]):
                        sv, row = S_val[i, a, t], S_idx[i, a, t]
                        for col in range(6):
                            Rst[d, row, col] -= sv * V[col, a]
        elif n == 1:
            c = rows[d]
            a0, a1, a2 = axis[i, 0], axis[i, 1], axis[i, 2]
            for k in range(c):                       # R s, kept in U's second column
                U[k, 1] = Rst[d, k, h] * a0 + Rst[d, k, h + 1] * a1 + Rst[d, k, h + 2] * a2
            for k in range(c):                       # eq. (16): Om += (R s)(R s)^T / d
                f = U[k, 1] * dinv                   # (upper triangle: eq. (18) reads no more)
                for l in range(k, c):
                    Om[d, k, l] += f * U[l, 1]
            if p >= 0:                               # eq. (17): R <- (R - (R s / d) u^T) X
                for k in range(c):
                    f = U[k, 1] * dinv
                    for col in range(6):
                        Rst[d, k, col] -= f * U[col, 0]
        else:
            c = rows[d]
            for k in range(c):                       # RS = R S, RSD = R S D^-1
                for a in range(n):
                    acc = 0.0
                    for t in range(S_nnz[i, a]):
                        acc += Rst[d, k, S_idx[i, a, t]] * S_val[i, a, t]
                    RS[k, a] = acc
                for a in range(n):
                    acc = 0.0
                    for b in range(n):
                        acc += RS[k, b] * Dinv[b, a]
                    RSD[k, a] = acc
            for k in range(c):                       # eq. (16): Om += RS D^-1 (RS)^T
                for l in range(k, c):                # (upper triangle: eq. (18) reads no more)
                    acc = 0.0
                    for a in range(n):
                        acc += RSD[k, a] * RS[l, a]
                    Om[d, k, l] += acc
            if p >= 0:                               # eq. (17): R <- R - RS D^-1 U^T
                for k in range(c):
                    for col in range(6):
                        acc = 0.0
                        for a in range(n):
                            acc += RSD[k, a] * U[col, a]
                        Rst[d, k, col] -= acc
        if p >= 0:
            # R[d, :c] <- R[d, :c] X for the motion transform X = (E, r); mirrors
            # spatial.rows_times_transform: [Ra E - (Rl E) x r, Rl E] (24 mul + 18 add per row)
            for k in range(c):
                x0, x1, x2 = Rst[d, k, 0], Rst[d, k, 1], Rst[d, k, 2]
                x3, x4, x5 = Rst[d, k, 3], Rst[d, k, 4], Rst[d, k, 5]
                l0 = x3 * e00 + x4 * e10 + x5 * e20
                l1 = x3 * e01 + x4 * e11 + x5 * e21
                l2 = x3 * e02 + x4 * e12 + x5 * e22
                Rst[d, k, 0] = x0 * e00 + x1 * e10 + x2 * e20 - (l1 * r2 - l2 * r1)
                Rst[d, k, 1] = x0 * e01 + x1 * e11 + x2 * e21 - (l2 * r0 - l0 * r2)
                Rst[d, k, 2] = x0 * e02 + x1 * e12 + x2 * e22 - (l0 * r1 - l1 * r0)
                Rst[d, k, 3] = l0
                Rst[d, k, 4] = l1
                Rst[d, k, 5] = l2
    for s in range(P.nslots):                        # lines 16-17, eq. (18), forward over N
        a = a_slot[s]
        c = rows[s]
        if a < 0:                                    # Om's upper triangle, mirrored
            for k in range(c):
                for l in range(k, c):
                    Om0[s, k, l] = Om[s, k, l]
                    Om0[s, l, k] = Om[s, k, l]
            continue
        for k in range(c):                           # T = R Om0[A(d)] (c x 6)
            x0, x1, x2 = Rst[s, k, 0], Rst[s, k, 1], Rst[s, k, 2]   # row k in registers
            x3, x4, x5 = Rst[s, k, 3], Rst[s, k, 4], Rst[s, k, 5]
            for col in range(6):
                RSD[k, col] = (x0 * Om0[a, 0, col] + x1 * Om0[a, 1, col] + x2 * Om0[a, 2, col]
                               + x3 * Om0[a, 3, col] + x4 * Om0[a, 4, col] + x5 * Om0[a, 5, col])
        for k in range(c):                           # Om0 = Om + T R^T, symmetric
            x0, x1, x2 = RSD[k, 0], RSD[k, 1], RSD[k, 2]
            x3, x4, x5 = RSD[k, 3], RSD[k, 4], RSD[k, 5]
            for l in range(k, c):
                acc = Om[s, k, l] + (x0 * Rst[s, l, 0] + x1 * Rst[s, l, 1] + x2 * Rst[s, l, 2]
                                     + x3 * Rst[s, l, 3] + x4 * Rst[s, l, 4] + x5 * Rst[s, l, 5])
                Om0[s, k, l] = acc
                Om0[s, l, k] = acc
    for t in range(kc_dst.shape[0]):               # lines 18-22, eq. (19)
        dst, src, rs = kc_dst[t], kc_src[t], kc_rslot[t]
        if src < 0:                                  # line 20: A(e)K_e = A(e)P_e^T
            for k in range(6):
                for col in range(6):
                    Kst[dst, k, col] = Rst[rs, k, col]
            continue
        for k in range(pair_rows[dst]):            # line 22: K[(A(c), e)] = K[(c, e)] R[c]
            x0, x1, x2 = Kst[src, k, 0], Kst[src, k, 1], Kst[src, k, 2]
            x3, x4, x5 = Kst[src, k, 3], Kst[src, k, 4], Kst[src, k, 5]
            for col in range(6):
                Kst[dst, k, col] = (x0 * Rst[rs, 0, col] + x1 * Rst[rs, 1, col]
                                    + x2 * Rst[rs, 2, col] + x3 * Rst[rs, 3, col]
                                    + x4 * Rst[rs, 4, col] + x5 * Rst[rs, 5, col])
    for k in range(ee_slot.shape[0]):                # line 28: diagonal blocks 0Om_e
        o, c, e = offsets[k], rows[ee_slot[k]], ee_slot[k]
        for a in range(c):
            for b in range(c):
                out[o + a, o + b] = Om0[e, a, b]
    for w in range(w_slot.shape[0]):               # 0Om_c cK_e2^T, once per (c, e2)
        oc, pr = w_slot[w], w_pair[w]
        for row in range(6):
            x0, x1, x2 = Om0[oc, row, 0], Om0[oc, row, 1], Om0[oc, row, 2]
            x3, x4, x5 = Om0[oc, row, 3], Om0[oc, row, 4], Om0[oc, row, 5]
            for b in range(pair_rows[pr]):
                Wst[w, row, b] = (x0 * Kst[pr, b, 0] + x1 * Kst[pr, b, 1] + x2 * Kst[pr, b, 2]
                                  + x3 * Kst[pr, b, 3] + x4 * Kst[pr, b, 4] + x5 * Kst[pr, b, 5])
    for t in range(blk_k1.shape[0]):               # lines 25-26, eq. (13)
        k1, k2, p1, w = blk_k1[t], blk_k2[t], blk_p1[t], blk_w[t]
        o1, o2 = offsets[k1], offsets[k2]
        for a in range(offsets[k1 + 1] - o1):
            x0, x1, x2 = Kst[p1, a, 0], Kst[p1, a, 1], Kst[p1, a, 2]
            x3, x4, x5 = Kst[p1, a, 3], Kst[p1, a, 4], Kst[p1, a, 5]
            for b in range(offsets[k2 + 1] - o2):
                acc = (x0 * Wst[w, 0, b] + x1 * Wst[w, 1, b] + x2 * Wst[w, 2, b]
                       + x3 * Wst[w, 3, b] + x4 * Wst[w, 4, b] + x5 * Wst[w, 5, b])
                out[o1 + a, o2 + b] = acc
                out[o2 + b, o1 + a] = acc
    return -1


@njit(cache=True)
def _chunk(P, q, out, status, lo, hi):
    """States lo..hi-1 on one private workspace (a few kB: stays in L1/L2), one allocation."""
    nb, ns, npr, nw = P.jtype.shape[0], P.nslots, P.npairs, P.w_slot.shape[0]
    sizes = np.array([nb * 36, ns * 36, ns * 36, ns * 36, npr * 36, nw * 36,
                      9, 3, 9, 3, 36, 36, 36, 36, 36, 36, 36])
    buf = np.zeros(sizes.sum())
    o = np.concatenate((np.zeros(1, np.int64), np.cumsum(sizes)))
    IA = buf[o[0]:o[1]].reshape((nb, 6, 6))
    Rst = buf[o[1]:o[2]].reshape((ns, 6, 6))
    Om = buf[o[2]:o[3]].reshape((ns, 6, 6))
    Om0 = buf[o[3]:o[4]].reshape((ns, 6, 6))
    Kst = buf[o[4]:o[5]].reshape((npr, 6, 6))
    Wst = buf[o[5]:o[6]].reshape((nw, 6, 6))
    E = buf[o[6]:o[7]].reshape((3, 3))
    r = buf[o[7]:o[8]]
    RJ = buf[o[8]:o[9]].reshape((3, 3))
    pJ = buf[o[9]:o[10]]
    U = buf[o[10]:o[11]].reshape((6, 6))
    D = buf[o[11]:o[12]].reshape((6, 6))
    Dinv = buf[o[12]:o[13]].reshape((6, 6))
    V = buf[o[13]:o[14]].reshape((6, 6))
    RS = buf[o[14]:o[15]].reshape((6, 6))
    RSD = buf[o[15]:o[16]].reshape((6, 6))
    T = buf[o[16]:o[17]].reshape((4, 3, 3))
    for s in range(lo, hi):
        status[s] = _state(P, q[s], out[s], IA, Rst, Om, Om0, Kst, Wst, E, r, RJ, pJ,
                           U, D, Dinv, V, RS, RSD, T)


@njit(cache=True, parallel=True)
def _run_parallel(P, q, out, status, nchunks):
    B = q.shape[0]
    for c in prange(nchunks):                        # one chunk per thread: no shared writes
        _chunk(P, q, out, status, c * B // nchunks, (c + 1) * B // nchunks)


@njit(cache=True)
def _run_serial(P, q, out, status):
    _chunk(P, q, out, status, 0, q.shape[0])


_PROGRAMS = {}
_BY_RC = IdentityCache()      # program_for's per-(model, rc) shortcut


def program_for(model, rc):
    """build_program, cached per (model, contact bodies, K_k): the offline part runs once; and
    per (model, rc) object, which skips building that key (sparsedyn.delassus resolves each
    contact list once: the same rc object comes back for the same contacts)."""
    fast = _BY_RC.get((model, rc))
    if fast is not None:
        return fast
    key = (id(model), rc.bodies, b"".join(K.tobytes() for K in rc.K))
    hit = _PROGRAMS.get(key)
    if hit is None or hit[0] is not model:
        if len(_PROGRAMS) >= 256:
            _PROGRAMS.clear()
        hit = (model, build_program(model, rc))      # holds the model: its id stays unique
        _PROGRAMS[key] = hit
    return _BY_RC.put((model, rc), hit[1])


def run(program, q, parallel=None):
    """(out (B, m, m), status (B,)) for checked configurations q (B, nq). parallel=None: use the
    numba thread pool (NUMBA_NUM_THREADS / numba.set_num_threads) on the cores idle at the call
    when B >= 8 per thread (below, waking the pool costs about as much as the states it would
    share out)."""
    q = np.ascontiguousarray(q, dtype=np.float64)
    B = q.shape[0]
    out = np.zeros((B, program.m, program.m))
    status = np.empty(B, np.int64)
    threads = get_num_threads()
    if parallel is None:        # and only onto idle cores (kernels/parallel.default_threads)
        # below 16 states no thread count passes the test: skip reading /proc (~15 us)
        idle = idle_cores() if B >= 16 and threads > 1 else None
        threads = threads if idle is None else max(1, min(threads, idle))
        parallel = threads > 1 and B >= 8 * threads
    if parallel and B > 1:
        with parallel_launch():
            _run_parallel(program.flat, q, out, status, min(B, threads))
    elif q.flags.writeable and q.flags.aligned:
        serial_entry(program)(program.flat, q, out, status)
    else:
        _run_serial(program.flat, q, out, status)
    return out, status


_ENTRIES = IdentityCache()


def serial_entry(program):
    """_run_serial's compiled entry point for the program's argument types (fresh float64 q,
    out and status arrays: C-contiguous, aligned, writable), looked up once per program: the
    dispatcher re-types the ~35-field FlatProgram on every call. The dispatcher itself until
    that overload exists (its first call compiles or loads it)."""
    hit = _ENTRIES.get((program,))
    if hit is not None:
        return hit
    args = (program.flat, np.zeros((1, program.nq)), np.zeros((1, program.m, program.m)),
            np.zeros(1, np.int64))
    compiled = _run_serial.overloads.get(tuple(typeof(a) for a in args))
    if compiled is None:
        return _run_serial
    return _ENTRIES.put((program,), compiled.entry_point)


def pv_osimr_compiled(model, q, rc, reference, runner=run):
    """(B, m, m) Delassus matrix of the resolved contacts rc (all on movable bodies) at the checked
    configurations q (B, nq). `reference(model, q, rc)` is the NumPy PV-OSIMr: it charges the
    per-state operation count when counting (the counts are q-independent, so one state suffices)
    and raises the typed SingularModelError (bodies, batch indices) when a pivot failed here.
    runner: run's contract (backends/c_pv_osimr.run: the same algorithm on vectors of states)."""
    program = program_for(model, rc)
    if counting():
        reference(model, q[:1], rc)
    out, status = runner(program, q)
    if (status >= 0).any():
        # the reference's eigenvalue test flags every state flagged here (a Cholesky pivot is
        # >= lambda_min); should rounding let it pass, its result is the answer
        return reference(model, q, rc)
    return out
