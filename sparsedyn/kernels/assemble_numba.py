"""Compiled online phase (Nori Sec. IV-D, V-D): assemble D(q), b(q, qd) from an AssemblyProgram and
run the LU program, a group of `lanes` states at a time, in one pass that stays in cache.

Per group of states (the lanes of its work arrays) the fused kernel
  1. writes the state-dependent entries of D (the joint transforms iX_lambda(i) and their
     transposes: each component once where the program only reads it, ir/fused.py) and the
     permuted right-hand side -b, y straight into the program's work array (no values array
     exists), body by body;
  2. computes the pivot-check row scales from the fresh entries, runs the LU program (run_lanes)
     in its sweep layout (ir/layout.py: one pass per elimination direction, the forward
     substitution riding along with the factorization, on slots shared by values whose lives do
     not overlap); the program's constants are written by SETs just before the run that first
     touches them; a call that wants the outputs alone (e.g. qdd) runs only the operations they
     or a pivot check need (ir.fused.FusedProgram.schedule);
  3. copies the requested outputs (e.g. tau in the public layout) and, if asked, the whole
     solution vector, and flags states whose pivot check failed or whose solution is not finite
     or, with a residual check (FusedProgram residual=: the estimation's exact route, dynamics
     plans whose Factorization.checks_accuracy), whose backward error is above its tolerance.
`assemble_batch` runs step 1 alone into (values, rhs) arrays in the layout NewtonEulerSystem.values
/ rhs produce (for tests and for peers that need D, b).

Batches are split into one contiguous range per thread (prange; each thread its own work array,
kept between calls: kernels/work_memory.py); `threads=1` runs the serial entry point. The formulas
are the batched NumPy ones of kinematics.joint_transforms, spatial.py and NewtonEulerSystem.rhs,
written per lane.

Preconditions: q (B, nq) checked (unit quaternions), qd (B, nv), y (B, m) all C-contiguous float64;
destinations from AssemblyProgram.bind.
"""
from __future__ import annotations

import math
import weakref
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..ir.fused import (INPUT_NOT_FINITE, AssemblyArrays, ExtraRowArrays, ProgramArrays,
                        ResidualArrays, RhsDestinations)
from ..ir.assembly import ROT_ANGLE, ROT_QUAT
from .. import jit
from .input_copies import copy_checked
from .lu_numba import lane_scales, lane_split, run_lanes
from .parallel import parallel_launch
from .work_memory import WorkArrays

#: lane counts of a work group (see lanes_for) and the budget of its work array. The
#: interpreter's cost per operation and the op stream, read once per group, are amortised over
#: the lanes, so more lanes pay, up to work arrays of about this size (then memory dominates:
#: experiments/kernel_design.md); smaller batches get fewer lanes (lu_numba.lane_split)
MIN_LANES, MAX_LANES = 16, 64
LANE_BYTES = 8 * 2 ** 20


# Cephes (sin.c, cos.c) sine and cosine, branch-free so the lane loop vectorises: numba has no
# vector libm here (no SVML), and a scalar math.sin + math.cos per joint and state cost as much
# as the rest of the kinematics. x = y pi/4 + z with y even and |z| <= pi/4 (Cody-Waite with pi/4
# in three parts), then the minimax polynomials on z; |error| ~ 1 ulp for |x| < SINCOS_RANGE
# (tests/test_compiled.py checks it against numpy), math.sin/cos beyond.
SINCOS_RANGE = 1.0e8
_FOPI = 1.27323954473516268615
_DP1, _DP2, _DP3 = 7.85398125648498535156e-1, 3.77489470793079817668e-8, 2.69515142907905952645e-15
_S0, _S1, _S2, _S3, _S4, _S5 = (1.58962301576546568060e-10, -2.50507477628578072866e-8,
                                2.75573136213857245213e-6, -1.98412698295895385996e-4,
                                8.33333333332211858878e-3, -1.66666666666666307295e-1)
_C0, _C1, _C2, _C3, _C4, _C5 = (-1.13585365213876817300e-11, 2.08757008419747316778e-9,
                                -2.75573141792967388112e-7, 2.48015872888517045348e-5,
                                -1.38888888888730564116e-3, 4.16666666666665929218e-2)


@njit(cache=True, inline="always")
def sincos(x):
    """(sin x, cos x) for |x| < SINCOS_RANGE (see above)."""
    ax = abs(x)
    j = np.int64(ax * _FOPI)
    j += j & 1
    y = np.float64(j)
    z = ((ax - y * _DP1) - y * _DP2) - y * _DP3
    zz = z * z
    ps = z + z * zz * (((((_S0 * zz + _S1) * zz + _S2) * zz + _S3) * zz + _S4) * zz + _S5)
    pc = 1.0 - 0.5 * zz + zz * zz * (((((_C0 * zz + _C1) * zz + _C2) * zz + _C3) * zz + _C4) * zz
                                     + _C5)
    octant = j & 7                                    # 0, 2, 4, 6: which quarter turn
    swap = (octant & 2) != 0
    sn = pc if swap else ps
    cs = ps if swap else pc
    sn = -sn if octant >= 4 else sn
    cs = -cs if (octant == 2 or octant == 4) else cs
    return (-sn if x < 0 else sn), cs


@njit(cache=True, error_model="numpy")
def _sincos_lanes(qT, row, out):
    """out[0] = sin, out[1] = cos of qT[row] for every lane."""
    L = qT.shape[1]
    big = False
    for s in range(L):
        big |= not abs(qT[row, s]) < SINCOS_RANGE
    if big:
        for s in range(L):
            out[0, s] = math.sin(qT[row, s])
            out[1, s] = math.cos(qT[row, s])
    else:
        for s in range(L):
            out[0, s], out[1, s] = sincos(qT[row, s])


@njit(cache=True, error_model="numpy")
def _assemble_lanes(idx, q, qd, y, model, xr, dest, w, sc):
    """Write D's state-dependent entries and rhs = [-c, -nu, 0, y] for the states idx (lanes,) into
    w[slot, lane]: model (AssemblyArrays), xr (ExtraRowArrays: the program's extra rows, empty
    for the dynamics plans), dest (RhsDestinations), sc (LaneScratch). Spatial vectors
    angular-first (spatial.py)."""
    (parent, rot_kind, rot_q, n_trans, trans_q, rot_basis, TR, Tp, tdir, s_ptr, s_row, s_col,
     s_val, i_ptr, i_row, i_col, i_val, gravity, x_ptr, x_dest, x_src) = model
    (t_ptr, t_dest, t_src, t_coef, q_body, q_k, q_l, q_coef, q_dest, g_need, g_body, g_k, g_coef,
     g_dest) = xr
    a_dest, f_dest, zero_dest, y_dest = dest
    vel, E, r, tmp, vj, qT, grav = sc.vel, sc.E, sc.r, sc.tmp, sc.vj, sc.qT, sc.grav
    N, L = parent.shape[0], w.shape[1]
    # this group's coordinates and velocities as contiguous rows (nq + nv, lanes): every loop
    # below then reads whole rows instead of gathering from the (B, nq) / (B, nv) inputs
    nq = q.shape[1]
    for col in range(nq):
        for s in range(L):
            qT[col, s] = q[idx[s], col]
    for col in range(qd.shape[1]):
        for s in range(L):
            qT[nq + col, s] = qd[idx[s], col]
    for i in range(N):
        # ---- joint transform iX_lambda(i) = (E, r) (kinematics.joint_transforms); written out
        # here and in crba_numba.crba_lanes, not a shared helper: experiments/kernel_design.md,
        # "Joint transforms in the CRBA kernel" (a helper's array arguments cost ~15%)
        kind = rot_kind[i]
        if kind == ROT_ANGLE:
            _sincos_lanes(qT, rot_q[i], tmp)
            for e in range(9):
                b0, b1, b2 = rot_basis[i, 0, e], rot_basis[i, 1, e], rot_basis[i, 2, e]
                for s in range(L):
                    E[e, s] = b0 + tmp[0, s] * b1 + tmp[1, s] * b2
        elif kind == ROT_QUAT:
            col = rot_q[i]
            for s in range(L):
                # R_J from the unit quaternion (x, y, z, w): mirrors spatial.quaternion_to_rotation
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
            # E = (TR R_J)^T: E[a, b] = sum_k TR[b, k] R_J[k, a]
            for a_ in range(3):
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
        if g_need[i]:
            # g_i = E_i g_parent (the world's g at the root): gravity in body coordinates
            gi = grav[i]
            if parent[i] >= 0:
                gp = grav[parent[i]]
                for k in range(3):
                    for s in range(L):
                        gi[k, s] = (E[3 * k, s] * gp[0, s] + E[3 * k + 1, s] * gp[1, s]
                                    + E[3 * k + 2, s] * gp[2, s])
            else:
                for k in range(3):
                    for s in range(L):
                        gi[k, s] = (E[3 * k, s] * gravity[0] + E[3 * k + 1, s] * gravity[1]
                                    + E[3 * k + 2, s] * gravity[2])
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
        if sc.kin.shape[0] > 0:                  # kept for the caller (assemble_batch)
            kin = sc.kin[i]
            for e in range(9):
                for s in range(L):
                    kin[e, s] = E[e, s]
            for k in range(3):
                for s in range(L):
                    kin[9 + k, s] = r[k, s]
        # ---- joint velocity S_i qd_i (sparse S)
        for k in range(6):
            for s in range(L):
                vj[k, s] = 0.0
        for e in range(s_ptr[i], s_ptr[i + 1]):
            row, col, val = s_row[e], nq + s_col[e], s_val[e]
            for s in range(L):
                vj[row, s] += val * qT[col, s]
        # destination rows in locals: LLVM cannot tell that stores into w leave the index
        # arrays alone, and would reload them on every lane (and not vectorise)
        d0, d1, d2, d3, d4, d5 = a_dest[i, 0], a_dest[i, 1], a_dest[i, 2], a_dest[i, 3], \
            a_dest[i, 4], a_dest[i, 5]
        vi = vel[i]
        p = parent[i]
        if p >= 0:
            vp = vel[p]
            for s in range(L):
                # v_i = iX_p v_p + S_i qd_i (Transform.apply_motion)
                w0, w1, w2 = vp[0, s], vp[1, s], vp[2, s]
                r0, r1, r2 = r[0, s], r[1, s], r[2, s]
                u0 = vp[3, s] - (r1 * w2 - r2 * w1)
                u1 = vp[4, s] - (r2 * w0 - r0 * w2)
                u2 = vp[5, s] - (r0 * w1 - r1 * w0)
                vi[0, s] = E[0, s] * w0 + E[1, s] * w1 + E[2, s] * w2 + vj[0, s]
                vi[1, s] = E[3, s] * w0 + E[4, s] * w1 + E[5, s] * w2 + vj[1, s]
                vi[2, s] = E[6, s] * w0 + E[7, s] * w1 + E[8, s] * w2 + vj[2, s]
                vi[3, s] = E[0, s] * u0 + E[1, s] * u1 + E[2, s] * u2 + vj[3, s]
                vi[4, s] = E[3, s] * u0 + E[4, s] * u1 + E[5, s] * u2 + vj[4, s]
                vi[5, s] = E[6, s] * u0 + E[7, s] * u1 + E[8, s] * u2 + vj[5, s]
            for s in range(L):
                # c_i = v_i x S_i qd_i (spatial.cross_motion: [w x mw; w x mv + vl x mw]); -c
                a0, a1, a2 = vi[0, s], vi[1, s], vi[2, s]
                l0, l1, l2 = vi[3, s], vi[4, s], vi[5, s]
                m0, m1, m2 = vj[0, s], vj[1, s], vj[2, s]
                n0, n1, n2 = vj[3, s], vj[4, s], vj[5, s]
                w[d0, s] = -(a1 * m2 - a2 * m1)
                w[d1, s] = -(a2 * m0 - a0 * m2)
                w[d2, s] = -(a0 * m1 - a1 * m0)
                w[d3, s] = -((a1 * n2 - a2 * n1) + (l1 * m2 - l2 * m1))
                w[d4, s] = -((a2 * n0 - a0 * n2) + (l2 * m0 - l0 * m2))
                w[d5, s] = -((a0 * n1 - a1 * n0) + (l0 * m1 - l1 * m0))
        else:
            g0, g1, g2 = gravity[0], gravity[1], gravity[2]
            for k in range(6):
                for s in range(L):
                    vi[k, s] = vj[k, s]
            for s in range(L):
                # root: c_i = iX_0 a_0 with a_0 = [0; -g], i.e. [0; -E g]; rhs = -c
                w[d0, s] = 0.0
                w[d1, s] = 0.0
                w[d2, s] = 0.0
                w[d3, s] = E[0, s] * g0 + E[1, s] * g1 + E[2, s] * g2
                w[d4, s] = E[3, s] * g0 + E[4, s] * g1 + E[5, s] * g2
                w[d5, s] = E[6, s] * g0 + E[7, s] * g1 + E[8, s] * g2
        # ---- nu_i = v_i x* I_i v_i (sparse I; spatial.cross_force); rhs = -nu
        for k in range(6):
            for s in range(L):
                vj[k, s] = 0.0                                   # vj now holds I_i v_i
        for e in range(i_ptr[i], i_ptr[i + 1]):
            row, col, val = i_row[e], i_col[e], i_val[e]
            for s in range(L):
                vj[row, s] += val * vi[col, s]
        d0, d1, d2, d3, d4, d5 = f_dest[i, 0], f_dest[i, 1], f_dest[i, 2], f_dest[i, 3], \
            f_dest[i, 4], f_dest[i, 5]
        for s in range(L):
            a0, a1, a2 = vi[0, s], vi[1, s], vi[2, s]
            l0, l1, l2 = vi[3, s], vi[4, s], vi[5, s]
            n0, n1, n2 = vj[0, s], vj[1, s], vj[2, s]
            f0, f1, f2 = vj[3, s], vj[4, s], vj[5, s]
            w[d0, s] = -((a1 * n2 - a2 * n1) + (l1 * f2 - l2 * f1))
            w[d1, s] = -((a2 * n0 - a0 * n2) + (l2 * f0 - l0 * f2))
            w[d2, s] = -((a0 * n1 - a1 * n0) + (l0 * f1 - l1 * f0))
            w[d3, s] = -(a1 * f2 - a2 * f1)
            w[d4, s] = -(a2 * f0 - a0 * f2)
            w[d5, s] = -(a0 * f1 - a1 * f0)
        # ---- state-dependent entries of D: E and -E rx (row m of -E rx is r x E[m]); extra
        # rows' entries are constant combinations of the same 18 components
        if x_ptr[i] < x_ptr[i + 1] or t_ptr[i] < t_ptr[i + 1]:
            for m in range(3):
                for s in range(L):
                    r0, r1, r2 = r[0, s], r[1, s], r[2, s]
                    e0, e1, e2 = E[3 * m, s], E[3 * m + 1, s], E[3 * m + 2, s]
                    tmp[3 * m, s] = r1 * e2 - r2 * e1
                    tmp[3 * m + 1, s] = r2 * e0 - r0 * e2
                    tmp[3 * m + 2, s] = r0 * e1 - r1 * e0
            for e in range(x_ptr[i], x_ptr[i + 1]):
                dest, src = x_dest[e], x_src[e]
                if src < 9:
                    for s in range(L):
                        w[dest, s] = E[src, s]
                else:
                    for s in range(L):
                        w[dest, s] = tmp[src - 9, s]
            # one destination's terms all belong to this body: zero, then accumulate
            for e in range(t_ptr[i], t_ptr[i + 1]):
                dest = t_dest[e]
                for s in range(L):
                    w[dest, s] = 0.0
            for e in range(t_ptr[i], t_ptr[i + 1]):
                dest, src, c = t_dest[e], t_src[e], t_coef[e]
                if src < 9:
                    for s in range(L):
                        w[dest, s] += c * E[src, s]
                else:
                    for s in range(L):
                        w[dest, s] += c * tmp[src - 9, s]
    for k in range(zero_dest.shape[0]):
        for s in range(L):
            w[zero_dest[k], s] = 0.0
    for j in range(y.shape[1]):
        d = y_dest[j]
        for s in range(L):
            w[d, s] = y[idx[s], j]
    # extra rows' bias, quadratic in one body's velocity: rhs = y - sum c v_b[k] v_b[l]
    for e in range(q_dest.shape[0]):
        d, c, k, l_ = q_dest[e], q_coef[e], q_k[e], q_l[e]
        vb = vel[q_body[e]]
        for s in range(L):
            w[d, s] -= c * vb[k, s] * vb[l_, s]
    # and linear in one body's gravity vector: rhs -= c g_b[k]
    for e in range(g_dest.shape[0]):
        d, c, gb = g_dest[e], g_coef[e], grav[g_body[e], g_k[e]]
        for s in range(L):
            w[d, s] -= c * gb[s]


@njit(cache=True)
def _lane_indices(first, stop, idx):
    """States of the lane group starting at `first`; unused lanes repeat the last state (valid
    data, never reported). Returns the number of real lanes."""
    lanes = idx.shape[0]
    m = min(lanes, stop - first)
    for s in range(lanes):
        idx[s] = first + min(s, m - 1)
    return m


def lanes_for(n_slots, budget=LANE_BYTES):
    """Lanes per group: the most (a power of two in MIN_LANES..MAX_LANES) whose work array
    (n_slots, lanes) fits `budget` bytes."""
    lanes = MIN_LANES
    while lanes < MAX_LANES and n_slots * 2 * lanes * 8 <= budget:
        lanes *= 2
    return lanes


# ------------------------------------------------------------------------- assembly only


class LaneScratch(NamedTuple):
    """Per-lane-group scratch of _assemble_lanes and the pivot checks (sizes per lane): body
    velocities vel (N, 6), the joint transform's E (9) and r (3), tmp (9), vj (6), the check
    scales (n_checks), the lane state indices idx, q and qd as rows qT (nq + nv), the
    breakdown flags bad, the bodies' gravity vectors grav (N, 3; extra rows' g terms) and, if
    kept, each body's joint transform kin (N, 12: E row-major, then r; else (0, 12))."""
    vel: np.ndarray
    E: np.ndarray
    r: np.ndarray
    tmp: np.ndarray
    vj: np.ndarray
    scale: np.ndarray
    idx: np.ndarray
    qT: np.ndarray
    bad: np.ndarray
    grav: np.ndarray
    kin: np.ndarray


@njit(cache=True)
def lane_scratch(N, n_qv, n_checks, lanes, keep=False):
    """A LaneScratch for N bodies, nq + nv = n_qv, n_checks pivot checks and `lanes` lanes;
    keep: it keeps the joint transforms (kin)."""
    return LaneScratch(np.zeros((N, 6, lanes)), np.zeros((9, lanes)), np.zeros((3, lanes)),
                       np.zeros((9, lanes)), np.zeros((6, lanes)), np.zeros((n_checks, lanes)),
                       np.zeros(lanes, dtype=np.int64), np.zeros((n_qv, lanes)),
                       np.zeros(lanes, dtype=np.bool_), np.zeros((N, 3, lanes)),
                       np.zeros((N if keep else 0, 12, lanes)))


@njit(cache=True, error_model="numpy", nogil=True)
def _assemble_range(lo, hi, lanes, q, qd, y, model, xr, dest, values, rhs, kin, vel):
    """values, rhs of states lo..hi-1 and, where kin (B, N, 12) and vel (B, N, 6) are not
    empty, each body's joint transform (E row-major, r) and velocity."""
    nnz, n_rows, N = values.shape[1], rhs.shape[1], model.parent.shape[0]
    x_dest, t_dest = model.x_dest, xr.t_dest
    keep = kin.shape[0] > 0
    w = np.zeros((nnz + n_rows, lanes))            # slots: values entries, then nnz + rhs row
    sc = lane_scratch(N, q.shape[1] + qd.shape[1], 0, lanes, keep)
    idx = sc.idx
    for first in range(lo, hi, lanes):
        m = _lane_indices(first, hi, idx)
        _assemble_lanes(idx, q, qd, y, model, xr, dest, w, sc)
        for s in range(m):
            for e in range(x_dest.shape[0]):
                values[first + s, x_dest[e]] = w[x_dest[e], s]
            for e in range(t_dest.shape[0]):
                values[first + s, t_dest[e]] = w[t_dest[e], s]
            for k in range(n_rows):
                rhs[first + s, k] = w[nnz + k, s]
            for i in range(N if keep else 0):
                for k in range(12):
                    kin[first + s, i, k] = sc.kin[i, k, s]
                for k in range(6):
                    vel[first + s, i, k] = sc.vel[i, k, s]


def assemble_batch(program, q, qd, y, measured_order, interpret_while_compiling=False,
                   kinematics=False):
    """(values (B, nnz), rhs (B, n_rows)) of NewtonEulerSystem.assemble, compiled: y (B, m) holds
    the measured blocks' values concatenated in measured_order (AssemblyProgram.bind).
    interpret_while_compiling: for a few states, run the kernel's interpreted twin while it would
    have to compile (sparsedyn/jit.py). kinematics: also (kin (B, N, 12), vel (B, N, 6)), the
    joint transforms iX_lambda(i) (E row-major, then r) and body velocities of the same pass,
    as kinematics.joint_transforms / body_velocities compute them."""
    q, qd, y = _contiguous(q, qd, y)
    B, N = q.shape[0], program.nbodies
    model, xr, dest = _bound(program, tuple(measured_order))
    values = np.repeat(program.template[None], B, axis=0)          # constants in place
    rhs = np.empty((B, program.n_rows))
    kin = np.empty((B if kinematics else 0, N, 12))
    vel = np.empty((B if kinematics else 0, N, 6))
    run = _assemble_range if not interpret_while_compiling else jit.runnable_now(
        "the assembly and LU kernels", _assemble_range)
    run(0, B, min(MIN_LANES, B), q, qd, y, model, xr, dest, values, rhs, kin, vel)
    return (values, rhs, kin, vel) if kinematics else (values, rhs)


_BOUND = weakref.WeakKeyDictionary()      # AssemblyProgram -> {measured_order: bundles}


def _bound(program, measured_order):
    """The kernel's (AssemblyArrays, ExtraRowArrays, RhsDestinations) of a program for rhs rows
    in natural order, built once per (program, measured_order)."""
    cache = _BOUND.setdefault(program, {})
    if measured_order not in cache:
        slots = program.nnz + np.arange(program.n_rows)
        cache[measured_order] = (AssemblyArrays(*program.model_arrays()),
                                 ExtraRowArrays(*program.bind_extra(slots)),
                                 RhsDestinations(*program.bind(slots, list(measured_order))))
    return cache[measured_order]


def _contiguous(*arrays):
    return tuple(np.ascontiguousarray(a, dtype=np.float64) for a in arrays)


# ------------------------------------------------------------------------- fused solve


@njit(cache=True, error_model="numpy")
def _fused_range(lo, hi, w, q, qd, y, model, xr, dest, prog, rc, slots, res):
    """States lo..hi-1 on the work array w (n_slots, lanes), a lane group at a time: the
    bundles of a FusedKernel, res the FusedOutputs."""
    init_slots, init_values, sol_slot, out_slot, col_perm, tol = slots
    runs, t, a, b, chk_ptr, chk_entries, chk_const, consts = prog
    out, x, broken, qc, qdc, yc, not_finite = res
    n = col_perm.shape[0]
    full = x.shape[0] > 0
    copying = qc.shape[0] > 0
    lanes = w.shape[1]
    sc = lane_scratch(model.parent.shape[0], q.shape[1] + qd.shape[1], chk_const.shape[0], lanes)
    scale, idx, bad = sc.scale, sc.idx, sc.bad
    acc = np.zeros(lanes)
    # optional backward-error check (FusedProgram residual): copies of D's state-dependent
    # entries and of b, taken before the program overwrites them
    r_slot, r_row, r_col, c_row, c_col, c_val, r_tol, c_rowmax = rc
    check_res = r_tol.shape[0] > 0
    nr = r_slot.shape[0] if check_res else 0
    saved = np.zeros((nr, lanes))
    bsave = np.zeros((n if check_res else 0, lanes))
    res_ = np.zeros((n if check_res else 0, lanes))
    rmax = np.zeros((c_rowmax.shape[0], lanes))
    norms = np.zeros((4, lanes))
    for first in range(lo, hi, lanes):
        m = _lane_indices(first, hi, idx)
        if copying:     # the group's inputs, copied and checked while the assembly reads them
            for s in range(m):
                not_finite[first + s] = not (copy_checked(q, qc, first + s, first + s + 1)
                                             & copy_checked(qd, qdc, first + s, first + s + 1)
                                             & copy_checked(y, yc, first + s, first + s + 1))
        # the constants read before the program (the rest: its SETs), then the assembly
        for k in range(init_slots.shape[0]):
            v0 = init_values[k]
            for s in range(lanes):
                w[init_slots[k], s] = v0
        _assemble_lanes(idx, q, qd, y, model, xr, dest, w, sc)
        lane_scales(w, chk_ptr, chk_entries, chk_const, scale)
        for k in range(nr):
            for s in range(lanes):
                saved[k, s] = w[r_slot[k], s]
        for k in range(bsave.shape[0]):
            for s in range(lanes):
                bsave[k, s] = w[sol_slot[k], s]
        for s in range(lanes):
            bad[s] = False
        run_lanes(w, runs, t, a, b, scale, tol, bad, consts)
        if check_res:
            _residual_check(w, sol_slot, saved, r_row, r_col, c_row, c_col, c_val, c_rowmax,
                            bsave, res_, rmax, r_tol[0], norms, bad)
        # x - x is 0 for finite x and NaN for inf/NaN: one vectorised sweep per solution slot
        for s in range(lanes):
            acc[s] = 0.0
        for k in range(sol_slot.shape[0]):
            for s in range(lanes):
                acc[s] += w[sol_slot[k], s] - w[sol_slot[k], s]
        for s in range(m):
            if acc[s] != 0.0:
                bad[s] = True
            for j in range(out_slot.shape[0]):
                out[first + s, j] = w[out_slot[j], s]
            if full:
                for k in range(n):
                    x[first + s, col_perm[k]] = w[sol_slot[k], s]
            broken[first + s] = bad[s]


@njit(cache=True, error_model="numpy")
def _residual_check(w, sol_slot, saved, r_row, r_col, c_row, c_col, c_val, c_rowmax, bsave, res,
                    rmax, tol, norms, bad):
    """bad[s] |= the backward error of the solve exceeds tol: row-wise when c_rowmax holds each
    row's largest constant |entry| (|D x - b|_i > tol (max_j |D_ij| max|x| + |b_i|) for some row
    i), else normwise (max|D x - b| > tol (max|D| max|x| + max|b|)). Rows in the program's
    permuted order, columns as solution slots (permuted unknown k in slot sol_slot[k]); every
    loop runs over the lanes innermost. norms: (4, lanes) scratch; non-finite x is left to the
    caller's finiteness check."""
    lanes = w.shape[1]
    n = bsave.shape[0]
    rowwise = c_rowmax.shape[0] > 0
    xmax, amax, excess, bmax = norms[0], norms[1], norms[2], norms[3]
    for s in range(lanes):
        xmax[s] = 0.0
        amax[s] = 0.0
        bmax[s] = 0.0
        excess[s] = 0.0
    for k in range(n):
        c = c_rowmax[k] if rowwise else 0.0
        for s in range(lanes):
            res[k, s] = -bsave[k, s]
        if rowwise:
            for s in range(lanes):
                rmax[k, s] = c
    for e in range(c_row.shape[0]):
        i, j, c = c_row[e], c_col[e], c_val[e]
        for s in range(lanes):
            res[i, s] += c * w[j, s]
    # the state-dependent entries: their product and their size in one pass
    for e in range(r_row.shape[0]):
        i, j = r_row[e], r_col[e]
        if rowwise:
            for s in range(lanes):
                d = saved[e, s]
                res[i, s] += d * w[j, s]
                rmax[i, s] = max(rmax[i, s], abs(d))
        else:
            for s in range(lanes):
                d = saved[e, s]
                res[i, s] += d * w[j, s]
                amax[s] = max(amax[s], abs(d))
    for k in range(n):
        slot = sol_slot[k]
        for s in range(lanes):
            xmax[s] = max(xmax[s], abs(w[slot, s]))
    if rowwise:
        for k in range(n):
            for s in range(lanes):
                excess[s] = max(excess[s], abs(res[k, s])
                                - tol * (rmax[k, s] * xmax[s] + abs(bsave[k, s])))
    else:
        for e in range(c_row.shape[0]):
            c = abs(c_val[e])
            for s in range(lanes):
                amax[s] = max(amax[s], c)
        for k in range(n):
            for s in range(lanes):
                bmax[s] = max(bmax[s], abs(bsave[k, s]))
                excess[s] = max(excess[s], abs(res[k, s]))
        for s in range(lanes):
            excess[s] -= tol * (amax[s] * xmax[s] + bmax[s])
    for s in range(lanes):
        if excess[s] > 0.0:
            bad[s] = True


@njit(cache=True, inline="always")
def thread_range(g, groups, B, lanes):
    """States [lo, hi) of thread g of `groups`: one contiguous range of whole lane groups per
    thread, so that each thread uses one work array (and one set of scratch arrays)."""
    per = ((B + lanes - 1) // lanes + groups - 1) // groups
    return min(B, g * per * lanes), min(B, (g + 1) * per * lanes)


@njit(cache=True, parallel=True, error_model="numpy")
def _fused_parallel(B, work, q, qd, y, model, xr, dest, prog, rc, slots, res):
    # the bundles arrive one by one: parallel regions take no nested tuples
    groups, lanes = work.shape[0], work.shape[2]
    for g in prange(groups):
        lo, hi = thread_range(g, groups, B, lanes)
        if lo < hi:
            _fused_range(lo, hi, work[g], q, qd, y, model, xr, dest, prog, rc, slots, res)


@njit(cache=True, error_model="numpy")
def _fused_serial(B, work, q, qd, y, model, xr, dest, prog, rc, slots, res):
    _fused_range(0, B, work[0], q, qd, y, model, xr, dest, prog, rc, slots, res)


class FusedSlots(NamedTuple):
    """The constants written before the assembly (init_slots, init_values), the solution's slots
    (sol_slot, in permuted column order: natural column col_perm[k] is in sol_slot[k]), the
    outputs' slots and the pivot tolerance."""
    init_slots: np.ndarray
    init_values: np.ndarray
    sol_slot: np.ndarray
    out_slot: np.ndarray
    col_perm: np.ndarray
    tol: float


class FusedKernel(NamedTuple):
    """A Schedule as the fused kernel reads it (sparsedyn.ir.fused), bundle by bundle."""
    model: AssemblyArrays
    xr: ExtraRowArrays
    dest: RhsDestinations
    prog: ProgramArrays
    rc: ResidualArrays
    slots: FusedSlots


class FusedOutputs(NamedTuple):
    """What the fused kernel writes per state: the outputs (B, n_out), the whole solution (B, n)
    or (0, n), the states to re-solve (B,); copies of q, qd and y as it reads them (their
    shapes, or no rows: no copies) and the states whose inputs are not all finite (B,)."""
    out: np.ndarray
    x: np.ndarray
    broken: np.ndarray
    qc: np.ndarray
    qdc: np.ndarray
    yc: np.ndarray
    not_finite: np.ndarray


class FusedSolver:
    """The numba backend's kernel of a FusedProgram (sparsedyn.ir.fused): `run` solves a batch,
    `lanes` states per group of a work array (None: lanes_for the schedule's work size)."""

    def __init__(self, ir, lanes=None):
        self.ir = ir
        self._lanes = lanes
        self._kernels = {}
        self._work = WorkArrays()

    def lanes(self, schedule):
        """States per lane group for a schedule."""
        return lanes_for(schedule.n_slots) if self._lanes is None else int(self._lanes)

    def kernel(self, full):
        """(Schedule, FusedKernel) of a call reading the whole solution (full) or the outputs."""
        full = bool(full) or self.ir.checks_residual
        if full not in self._kernels:
            sch = self.ir.schedule(full)
            self._kernels[full] = sch, FusedKernel(
                sch.model_arrays, sch.xr, sch.dest, sch.prog, sch.rc,
                FusedSlots(sch.init_slots, sch.init_values, sch.sol_slot, sch.out_slot,
                           self.ir.program.col_perm, float(self.ir.program.tol)))
        return self._kernels[full]

    def ready(self):
        """True if run() needs no JIT compile now; else False, with its compile (compile_kernels
        on some plan: every plan's fused kernel has the same argument types) started in the
        background (sparsedyn/jit.py)."""
        return jit.ready("the fused ID/FD kernel", (_fused_serial, _fused_parallel))

    def compile_kernels(self):
        """Run the serial and the parallel kernel once each, on two states of zeros (their
        non-unit quaternions are flagged, which does not matter here)."""
        sizes, (sch, _) = self.ir.assembly, self.kernel(False)
        q, qd = np.zeros((2, sizes.nq)), np.zeros((2, sizes.nv))
        y = np.zeros((2, sch.dest.y.shape[0]))
        self.run(q, qd, y, threads=1)
        self.run(q, qd, y, threads=2)

    def copies_inputs(self, B, full=False):
        """run(..., copies=...) copies the inputs of any batch (the backends' protocol)."""
        return True

    def run(self, q, qd, y, full=False, threads=1, copies=None):
        """(out (B, n_out), x (B, n) or None, broken (B,) bool) for checked, batched q, qd and the
        measured values y (B, m). threads: 1 runs the serial kernel, k > 1 splits the batch into
        k ranges run by numba's thread pool (at most NUMBA_NUM_THREADS at once). Without full,
        the finiteness check covers the outputs (the other unknowns are not computed).
        copies: (qc, qdc, yc), C-contiguous float64 arrays of the inputs' shapes the kernel
        copies q, qd and y into as it reads them (q then unchecked: broken holds the protocol's
        codes, INPUT_NOT_FINITE for a state with NaN or inf inputs; quaternions unchecked)."""
        q, qd, y = _contiguous(q, qd, y)
        B, n = q.shape[0], self.ir.program.n
        sch, kern = self.kernel(full)
        none = np.empty((0, 0))
        qc, qdc, yc = (none, none, none) if copies is None else copies
        res = FusedOutputs(np.empty((B, sch.out_slot.size)),
                           np.empty((B, n)) if full else np.empty((0, n)),
                           np.zeros(B, dtype=np.bool_), qc, qdc, yc,
                           np.zeros(B if copies is not None else 0, dtype=np.bool_))
        lanes, groups = lane_split(B, self.lanes(sch), threads)
        args = (B, self._work.get(groups, sch.n_slots, lanes), q, qd, y, *kern, res)
        if groups > 1:
            with parallel_launch():
                _fused_parallel(*args)
        else:
            _fused_serial(*args)
        if copies is None:
            return res.out, (res.x if full else None), res.broken
        codes = res.broken.astype(np.uint8) | (res.not_finite.astype(np.uint8) * INPUT_NOT_FINITE)
        return res.out, (res.x if full else None), codes
