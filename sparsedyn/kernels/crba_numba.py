"""Compiled mass matrix: CRBA (Featherstone Table 6.2) and its L^T L factor (Table 6.3) for a
batch of configurations, `lanes` states at a time with the batch innermost (SIMD) dimension.

Per lane group (ir/mass_matrix.py has the program and why the root frame):
  1. forward over bodies: the joint transform (E, r) (assemble_numba's formulas), the
     body's placement in its root's frame R_i = R_p E^T, p_i = p_p + R_p r (root: identity), its
     inertia there (Featherstone Table 2.5, X^T I X with X = (R^T, p)):
         m' = m, h' = R h + m p,
         Ibar' = R Ibar R^T - px (R h)x - h'x px
               = R Ibar R^T + (p.(R h) + p.h') 1 - (R h) p^T - p h'^T        (ax bx = b a^T - a.b 1)
     and the motions of its DoFs J_k = [R S_w; R S_v + p x R S_w] (angular-first);
  2. backward over bodies: F_k = I^c_i J_k = [Ibar w + h x v; m v - h x w] for the DoFs k of
     body i, M_kj = J_j . F_k for j in lambda-ancestors(k) U {k} (Table 6.2's H_ij, every J in
     one frame), then I^c_parent += I^c_i (same frame: no transform);
  3. optionally the L^T L program on the compact vector (a pivot must be above tol * |M_kk|,
     as in recursive/ltl.py), then the gather of each state's output (dense or packed).
Per state, `status` reports -1 (fine), the first DoF (in the factorisation's order) whose
pivot check failed, or NONFINITE (an output is not finite).

Preconditions: q (B, nq) C-contiguous float64, checked (finite, unit quaternions).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..ir.assembly import ROT_ANGLE, ROT_QUAT
from .assemble_numba import _lane_indices, _sincos_lanes, thread_range
from .lu_numba import lane_split
from .parallel import parallel_launch


#: status of a state whose output is not finite
NONFINITE = -2


class CrbaScratch(NamedTuple):
    """Per lane group: placements R (N, 9, L), p (N, 3, L); composite inertias IC (N, 10, L);
    DoF motions J (nv, 6, L); the compact M (n_pairs + 1, L, last row zero), its diagonal
    (nv, L) for the pivot checks; E (9, L), r (3, L), tmp (9, L), F (6, L), hR (3, L), q rows
    qT (nq, L), lane states idx and the first failed pivot fail (L,) (-1: none)."""
    R: np.ndarray
    p: np.ndarray
    IC: np.ndarray
    J: np.ndarray
    Mc: np.ndarray
    diag: np.ndarray
    E: np.ndarray
    r: np.ndarray
    tmp: np.ndarray
    F: np.ndarray
    hR: np.ndarray
    qT: np.ndarray
    idx: np.ndarray
    fail: np.ndarray


@njit(cache=True)
def crba_scratch(N, nv, nq, n_pairs, lanes):
    Mc = np.zeros((n_pairs + 1, lanes))
    return CrbaScratch(np.zeros((N, 9, lanes)), np.zeros((N, 3, lanes)),
                       np.zeros((N, 10, lanes)), np.zeros((nv, 6, lanes)), Mc,
                       np.zeros((nv, lanes)), np.zeros((9, lanes)), np.zeros((3, lanes)),
                       np.zeros((9, lanes)), np.zeros((6, lanes)), np.zeros((3, lanes)),
                       np.zeros((nq, lanes)), np.zeros(lanes, dtype=np.int64),
                       np.zeros(lanes, dtype=np.int64))


@njit(cache=True, error_model="numpy")
def crba_lanes(idx, q, jt, mm, sc):
    """The compact M of the states idx (lanes,) into sc.Mc (steps 1-2 of the module doc).

    One function, bundles unpacked once: a helper (even numba-inlined) that takes arrays costs a
    reference count update per array and call, i.e. per body and lane group, which is as much
    as a body's arithmetic on a few lanes (the fused assembly measured 15% slower with its joint
    transform as such a helper); views (R[i]) likewise, hence whole arrays and indices."""
    parent, rot_kind, rot_q, n_trans, trans_q, rot_basis, TR, Tp, tdir = jt
    inertia, body_dofs, s_ptr, s_row, s_val = mm.inertia, mm.body_dofs, mm.s_ptr, mm.s_row, mm.s_val
    pair_ptr, pair_col, pair_row, pair_val = mm.pair_ptr, mm.pair_col, mm.pair_row, mm.pair_val
    armature = mm.armature
    qT, R, P, IC, J, Mc = sc.qT, sc.R, sc.p, sc.IC, sc.J, sc.Mc
    E, r, tmp, F, hR = sc.E, sc.r, sc.tmp, sc.F, sc.hR
    L = qT.shape[1]
    for col in range(q.shape[1]):
        for s in range(L):
            qT[col, s] = q[idx[s], col]
    N = parent.shape[0]
    for i in range(N):
        par = parent[i]
        if par < 0:                               # a root: its own frame
            for s in range(L):
                R[i, 0, s], R[i, 1, s], R[i, 2, s] = 1.0, 0.0, 0.0
                R[i, 3, s], R[i, 4, s], R[i, 5, s] = 0.0, 1.0, 0.0
                R[i, 6, s], R[i, 7, s], R[i, 8, s] = 0.0, 0.0, 1.0
                P[i, 0, s], P[i, 1, s], P[i, 2, s] = 0.0, 0.0, 0.0
        else:
            # ---- iX_lambda(i) = (E, r): the formulas of assemble_numba._assemble_lanes
            # (kinematics.joint_transforms) on the same ir.assembly.JointTransformArrays, written
            # out again: experiments/kernel_design.md, "Joint transforms in the CRBA kernel"
            kind = rot_kind[i]
            if kind == ROT_ANGLE:
                _sincos_lanes(qT, rot_q[i], tmp)
                for e in range(9):
                    b0, b1, b2 = rot_basis[i, 0, e], rot_basis[i, 1, e], rot_basis[i, 2, e]
                    for s in range(L):
                        E[e, s] = b0 + tmp[0, s] * b1 + tmp[1, s] * b2
            elif kind == ROT_QUAT:
                col = rot_q[i]
                for s in range(L):                # R_J (spatial.quaternion_to_rotation)
                    x, yq, z, qw = qT[col, s], qT[col + 1, s], qT[col + 2, s], qT[col + 3, s]
                    tmp[0, s] = 1 - 2 * (yq * yq + z * z)
                    tmp[1, s] = 2 * (x * yq - z * qw)
                    tmp[2, s] = 2 * (x * z + yq * qw)
                    tmp[3, s] = 2 * (x * yq + z * qw)
                    tmp[4, s] = 1 - 2 * (x * x + z * z)
                    tmp[5, s] = 2 * (yq * z - x * qw)
                    tmp[6, s] = 2 * (x * z - yq * qw)
                    tmp[7, s] = 2 * (yq * z + x * qw)
                    tmp[8, s] = 1 - 2 * (x * x + yq * yq)
                for a_ in range(3):               # E = (TR R_J)^T
                    for b_ in range(3):
                        t0, t1, t2 = TR[i, 3 * b_], TR[i, 3 * b_ + 1], TR[i, 3 * b_ + 2]
                        for s in range(L):
                            E[3 * a_ + b_, s] = (t0 * tmp[a_, s] + t1 * tmp[3 + a_, s]
                                                 + t2 * tmp[6 + a_, s])
            else:
                for e in range(9):
                    b0 = rot_basis[i, 0, e]
                    for s in range(L):
                        E[e, s] = b0
            for k in range(3):
                p0 = Tp[i, k]
                for s in range(L):
                    r[k, s] = p0
            for j in range(n_trans[i]):
                col = trans_q[i] + j
                for k in range(3):
                    d = tdir[i, j, k]
                    for s in range(L):
                        r[k, s] += qT[col, s] * d
            # ---- R_i = R_p E^T, p_i = p_p + R_p r (one lane loop per row: few arrays each,
            # the vectoriser's overlap checks stay cheap)
            for a in range(3):
                for s in range(L):
                    x0, x1, x2 = R[par, 3 * a, s], R[par, 3 * a + 1, s], R[par, 3 * a + 2, s]
                    R[i, 3 * a, s] = x0 * E[0, s] + x1 * E[1, s] + x2 * E[2, s]
                    R[i, 3 * a + 1, s] = x0 * E[3, s] + x1 * E[4, s] + x2 * E[5, s]
                    R[i, 3 * a + 2, s] = x0 * E[6, s] + x1 * E[7, s] + x2 * E[8, s]
                for s in range(L):
                    P[i, a, s] = (P[par, a, s] + R[par, 3 * a, s] * r[0, s]
                                  + R[par, 3 * a + 1, s] * r[1, s] + R[par, 3 * a + 2, s] * r[2, s])
        # ---- body inertia in the root frame: T = R Ibar, hR = R h, then IC[i] (module doc)
        m = inertia[i, 0]
        h0, h1, h2 = inertia[i, 1], inertia[i, 2], inertia[i, 3]
        xx, xy, xz, yy, yz, zz = (inertia[i, 4], inertia[i, 5], inertia[i, 6], inertia[i, 7],
                                  inertia[i, 8], inertia[i, 9])
        for a in range(3):
            for s in range(L):
                r0, r1, r2 = R[i, 3 * a, s], R[i, 3 * a + 1, s], R[i, 3 * a + 2, s]
                tmp[3 * a, s] = r0 * xx + r1 * xy + r2 * xz
                tmp[3 * a + 1, s] = r0 * xy + r1 * yy + r2 * yz
                tmp[3 * a + 2, s] = r0 * xz + r1 * yz + r2 * zz
                hR[a, s] = r0 * h0 + r1 * h1 + r2 * h2
        for s in range(L):
            p0, p1, p2 = P[i, 0, s], P[i, 1, s], P[i, 2, s]
            u0, u1, u2 = hR[0, s], hR[1, s], hR[2, s]
            w0, w1, w2 = u0 + m * p0, u1 + m * p1, u2 + m * p2       # h' = R h + m p
            d = p0 * u0 + p1 * u1 + p2 * u2 + p0 * w0 + p1 * w1 + p2 * w2
            IC[i, 0, s] = m
            IC[i, 1, s] = w0
            IC[i, 2, s] = w1
            IC[i, 3, s] = w2
            # Ibar'_ab = (T R^T)_ab + d 1_ab - u_a p_b - p_a w_b
            IC[i, 4, s] = (tmp[0, s] * R[i, 0, s] + tmp[1, s] * R[i, 1, s]
                           + tmp[2, s] * R[i, 2, s] + d - u0 * p0 - p0 * w0)
            IC[i, 5, s] = (tmp[0, s] * R[i, 3, s] + tmp[1, s] * R[i, 4, s]
                           + tmp[2, s] * R[i, 5, s] - u0 * p1 - p0 * w1)
            IC[i, 6, s] = (tmp[0, s] * R[i, 6, s] + tmp[1, s] * R[i, 7, s]
                           + tmp[2, s] * R[i, 8, s] - u0 * p2 - p0 * w2)
            IC[i, 7, s] = (tmp[3, s] * R[i, 3, s] + tmp[4, s] * R[i, 4, s]
                           + tmp[5, s] * R[i, 5, s] + d - u1 * p1 - p1 * w1)
            IC[i, 8, s] = (tmp[3, s] * R[i, 6, s] + tmp[4, s] * R[i, 7, s]
                           + tmp[5, s] * R[i, 8, s] - u1 * p2 - p1 * w2)
            IC[i, 9, s] = (tmp[6, s] * R[i, 6, s] + tmp[7, s] * R[i, 7, s]
                           + tmp[8, s] * R[i, 8, s] + d - u2 * p2 - p2 * w2)
        # ---- J_k = [R S_w; R S_v + p x (R S_w)] for the DoFs k of body i (sparse S)
        for k in range(body_dofs[i, 0], body_dofs[i, 0] + body_dofs[i, 1]):
            for s in range(L):
                J[k, 0, s], J[k, 1, s], J[k, 2, s] = 0.0, 0.0, 0.0
                J[k, 3, s], J[k, 4, s], J[k, 5, s] = 0.0, 0.0, 0.0
            for e in range(s_ptr[k], s_ptr[k + 1]):
                row, val = s_row[e], s_val[e]
                off, c = 3 * (row // 3), row % 3      # angular rows 0..2 -> J_w, 3..5 -> J_v
                for s in range(L):
                    J[k, off, s] += val * R[i, c, s]
                    J[k, off + 1, s] += val * R[i, 3 + c, s]
                    J[k, off + 2, s] += val * R[i, 6 + c, s]
            for s in range(L):
                w0, w1, w2 = J[k, 0, s], J[k, 1, s], J[k, 2, s]
                p0, p1, p2 = P[i, 0, s], P[i, 1, s], P[i, 2, s]
                J[k, 3, s] += p1 * w2 - p2 * w1
                J[k, 4, s] += p2 * w0 - p0 * w2
                J[k, 5, s] += p0 * w1 - p1 * w0
    for i in range(N - 1, -1, -1):
        # ---- M_kj = J_j . (I^c_i J_k), F = I^c_i J_k = [Ibar w + h x v; m v - h x w]
        for k in range(body_dofs[i, 0], body_dofs[i, 0] + body_dofs[i, 1]):
            for s in range(L):
                m, h0, h1, h2 = IC[i, 0, s], IC[i, 1, s], IC[i, 2, s], IC[i, 3, s]
                w0, w1, w2 = J[k, 0, s], J[k, 1, s], J[k, 2, s]
                v0, v1, v2 = J[k, 3, s], J[k, 4, s], J[k, 5, s]
                F[0, s] = (IC[i, 4, s] * w0 + IC[i, 5, s] * w1 + IC[i, 6, s] * w2
                           + (h1 * v2 - h2 * v1))
                F[1, s] = (IC[i, 5, s] * w0 + IC[i, 7, s] * w1 + IC[i, 8, s] * w2
                           + (h2 * v0 - h0 * v2))
                F[2, s] = (IC[i, 6, s] * w0 + IC[i, 8, s] * w1 + IC[i, 9, s] * w2
                           + (h0 * v1 - h1 * v0))
                F[3, s] = m * v0 - (h1 * w2 - h2 * w1)
                F[4, s] = m * v1 - (h2 * w0 - h0 * w2)
                F[5, s] = m * v2 - (h0 * w1 - h1 * w0)
            for e in range(pair_ptr[k], pair_ptr[k + 1]):
                sel = pair_row[e]
                if sel >= 0:                      # J_j = S_j, one nonzero
                    val = pair_val[e]
                    for s in range(L):
                        Mc[e, s] = val * F[sel, s]
                    continue
                j = pair_col[e]
                for s in range(L):
                    Mc[e, s] = (J[j, 0, s] * F[0, s] + J[j, 1, s] * F[1, s]
                                + J[j, 2, s] * F[2, s] + J[j, 3, s] * F[3, s]
                                + J[j, 4, s] * F[4, s] + J[j, 5, s] * F[5, s])
            if armature[k] != 0.0:                # H_kk += armature_k (rotor inertia)
                d = pair_ptr[k + 1] - 1
                for s in range(L):
                    Mc[d, s] += armature[k]
        par = parent[i]
        if par >= 0:                              # I^c_parent += I^c_i, same frame
            for c in range(10):
                for s in range(L):
                    IC[par, c, s] += IC[i, c, s]


@njit(cache=True, error_model="numpy")
def ltl_lanes(fa, Mc, diag, tol, fail):
    """Table 6.3 on the compact vector, in place: M = L^T L. fail[s]: the first DoF k whose
    pivot is not above tol * |M_kk| (diag: |M_kk| before the factorisation), if still -1."""
    order, piv, anc_ptr, anc_slot, upd_ptr, upd_dest, upd_a, upd_b = fa    # once: see crba_lanes
    L = Mc.shape[1]
    for t in range(order.shape[0]):
        k = order[t]
        pk = piv[k]
        for s in range(L):
            ok = Mc[pk, s] > tol * diag[k, s]
            if not ok and fail[s] == -1:
                fail[s] = k
            Mc[pk, s] = math.sqrt(Mc[pk, s]) if ok else 1.0        # H_kk = sqrt(H_kk)
        for e in range(anc_ptr[k], anc_ptr[k + 1]):
            x = anc_slot[e]
            for s in range(L):
                Mc[x, s] /= Mc[pk, s]                               # H_ki = H_ki / H_kk
        for e in range(upd_ptr[k], upd_ptr[k + 1]):
            d, a, b = upd_dest[e], upd_a[e], upd_b[e]
            for s in range(L):
                Mc[d, s] -= Mc[a, s] * Mc[b, s]                     # H_ij -= H_ki H_kj


@njit(cache=True, error_model="numpy")
def _nonfinite(Mc, acc):
    """acc[s] = sum_e (Mc[e, s] - Mc[e, s]): 0 if the lane's values are finite, else NaN (one
    vectorised sweep)."""
    for s in range(Mc.shape[1]):
        acc[s] = 0.0
    for e in range(Mc.shape[0]):
        for s in range(Mc.shape[1]):
            acc[s] += Mc[e, s] - Mc[e, s]


@njit(cache=True, error_model="numpy")
def _range(lo, hi, lanes, q, jt, mm, fa, tol, factor, gather, out, status):
    """States lo..hi-1, a lane group at a time: M (or its factor L), compact, gathered by
    `gather` (2, G): out[b, gather[0, c]] = compact[gather[1, c]] (out (B, width))."""
    nv = mm.body_dofs[:, 1].sum()
    n_pairs = mm.pair_col.shape[0]
    sc = crba_scratch(jt.parent.shape[0], nv, q.shape[1], n_pairs, lanes)
    idx, fail, Mc, diag = sc.idx, sc.fail, sc.Mc, sc.diag
    acc = np.zeros(lanes)
    for first in range(lo, hi, lanes):
        m = _lane_indices(first, hi, idx)
        crba_lanes(idx, q, jt, mm, sc)
        _nonfinite(Mc, acc)                   # M's first: a NaN pivot is no singularity
        for s in range(lanes):
            fail[s] = NONFINITE if acc[s] != 0.0 else -1
        if factor:
            piv = fa.piv
            for k in range(nv):
                pk = piv[k]
                for s in range(lanes):
                    diag[k, s] = abs(Mc[pk, s])
            ltl_lanes(fa, Mc, diag, tol, fail)
            _nonfinite(Mc, acc)
            for s in range(lanes):
                if fail[s] == -1 and acc[s] != 0.0:
                    fail[s] = NONFINITE
        # entry-major: each source row is read whole, and the m destination rows fill up
        # cache line by cache line together (state-major reads one lane of every row)
        for c in range(gather.shape[1]):
            dest, g = gather[0, c], gather[1, c]
            for s in range(m):
                out[first + s, dest] = Mc[g, s]
        for s in range(m):
            status[first + s] = fail[s]


@njit(cache=True, parallel=True, error_model="numpy")
def _parallel(groups, lanes, q, jt, mm, fa, tol, factor, gather, out, status):
    B = q.shape[0]
    for g in prange(groups):
        lo, hi = thread_range(g, groups, B, lanes)
        if lo < hi:
            _range(lo, hi, lanes, q, jt, mm, fa, tol, factor, gather, out, status)


@njit(cache=True, error_model="numpy")
def _serial(groups, lanes, q, jt, mm, fa, tol, factor, gather, out, status):
    _range(0, q.shape[0], lanes, q, jt, mm, fa, tol, factor, gather, out, status)


#: states per lane group: humanoid, B = 4096, one thread, CPU time per state (one interleaved
#: run, load 3): 2.96 / 2.86 / 2.64 / 2.87 us on 24 / 32 / 48 / 64 lanes, 3.4 on 16 and 8.0 on
#: 128 (the scratch, ~15 KB per lane for nv = 49, out of L2): 32 keeps it near 0.5 MB
LANES = 32


def run(program, q, factor=False, tol=0.0, threads=1, lanes=LANES, packed=False, out=None):
    """(out, status (B,) int: see the module doc): M(q), or with `factor` its L^T L factor L, for
    checked q (B, nq): out (B, nv, nv), or with `packed` (B, n_pairs) the nonzeros of M's (L's)
    lower triangle in the program's pair order; `out`: an array of that shape to write into
    (C-contiguous float64). threads > 1 splits the batch into one range of lane groups per
    thread; `tol` the pivot tolerance relative to |M_kk|."""
    q = np.ascontiguousarray(q, dtype=np.float64)
    B, nv = q.shape[0], program.nv
    mm = program.arrays
    shape = (B, program.n_pairs) if packed else (B, nv, nv)
    if out is None:
        # a fresh array: zeroed (by the system, as it maps the pages), then only the nonzeros
        # written: M's zeros are most of a dense M
        out = np.zeros(shape)
        kind = "packed" if packed else "nonzero"
    elif out.shape != shape or out.dtype != np.float64 or not out.flags.c_contiguous:
        raise ValueError(f"out: expected a C-contiguous float64 array of shape {shape}, got "
                         f"{out.dtype} {out.shape}")
    else:
        kind = "packed" if packed else "every"
    gather = program.gathers[("L" if factor else "M", kind)]
    flat = out.reshape(B, program.n_pairs if packed else nv * nv)
    status = np.full(B, -1, dtype=np.int64)
    if B:
        lanes, groups = lane_split(B, lanes, threads)
        args = (groups, lanes, q, program.joints, mm, program.factor_arrays, float(tol),
                bool(factor), gather, flat, status)
        if groups > 1:
            with parallel_launch():
                _parallel(*args)
        else:
            _serial(*args)
    return out, status
