"""Compiled tangent right-hand sides of the dynamics derivatives: the per-state loops of
system/tangent.py (its docstring has the equations: Featherstone eq. 2.31 for dX/dq, Nori
eq. 2, 3a, 3f, 5d) in numba, one state per prange iteration, writing -dr straight into the
multi-right-hand-side array of the solve.

Only the directions that move a body are visited: those of the joints on its path to the root
(the support, `support_ptr` / `support_dirs`); the others leave its velocity and its rows at 0.

Preconditions: arrays from TangentData (built by problems/plan_derivatives.py), E (B, N, 3, 3)
and r (B, N, 3) of the joint transforms iX_lambda(i) (kinematics.joint_transforms), body
velocities (B, N, 6) and the solution x (B, n_cols), all float64 C-contiguous; out (B, n_rows,
k >= 2 nv) (any strides) zero in its first 2 nv columns outside rhs_pattern (the kernel clears
the pattern's entries itself).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit


class TangentData(NamedTuple):
    """The model and the system layout the kernel reads (constant per plan)."""
    parents: np.ndarray       # (N,) int64, -1 at a root
    S: np.ndarray             # (N, 6, max nv_i) motion subspaces, angular-first, zero-padded
    v_start: np.ndarray       # (N,) first column of v of each joint
    v_size: np.ndarray        # (N,) nv_i
    inertias: np.ndarray      # (N, 6, 6) angular-first
    a0: np.ndarray            # (6,) -a_g
    col_a: np.ndarray         # (N,) first column of a_i in x
    col_f: np.ndarray         # (N,) first column of f_i in x
    row_a: np.ndarray         # (N,) first row of (3a_i)
    row_f: np.ndarray         # (N,) first row of (3f_i)
    support_ptr: np.ndarray   # (N + 1,) CSR over bodies of the directions that move them
    support_dirs: np.ndarray  # the v columns of the joints on the path root .. i


@njit(cache=True, inline="always")
def _x_motion(E, r, m, out):
    """out = X m for X = (E, r) (Featherstone eq. 2.24): [E w; E (v - r x w)]."""
    u0 = m[3] - (r[1] * m[2] - r[2] * m[1])
    u1 = m[4] - (r[2] * m[0] - r[0] * m[2])
    u2 = m[5] - (r[0] * m[1] - r[1] * m[0])
    for k in range(3):
        out[k] = E[k, 0] * m[0] + E[k, 1] * m[1] + E[k, 2] * m[2]
        out[3 + k] = E[k, 0] * u0 + E[k, 1] * u1 + E[k, 2] * u2


@njit(cache=True, inline="always")
def _xt_force(E, r, f, out):
    """out = X^T f: [E^T n + r x E^T fl; E^T fl] (the transpose of eq. 2.24 on forces)."""
    for k in range(3):
        out[k] = E[0, k] * f[0] + E[1, k] * f[1] + E[2, k] * f[2]
        out[3 + k] = E[0, k] * f[3] + E[1, k] * f[4] + E[2, k] * f[5]
    out[0] += r[1] * out[5] - r[2] * out[4]
    out[1] += r[2] * out[3] - r[0] * out[5]
    out[2] += r[0] * out[4] - r[1] * out[3]


@njit(cache=True, inline="always")
def _cross_motion(v, m, out, sign):
    """out += sign (v x m) (eq. 2.31)."""
    out[0] += sign * (v[1] * m[2] - v[2] * m[1])
    out[1] += sign * (v[2] * m[0] - v[0] * m[2])
    out[2] += sign * (v[0] * m[1] - v[1] * m[0])
    out[3] += sign * (v[1] * m[5] - v[2] * m[4] + v[4] * m[2] - v[5] * m[1])
    out[4] += sign * (v[2] * m[3] - v[0] * m[5] + v[5] * m[0] - v[3] * m[2])
    out[5] += sign * (v[0] * m[4] - v[1] * m[3] + v[3] * m[1] - v[4] * m[0])


@njit(cache=True, inline="always")
def _cross_force(v, f, out, sign):
    """out += sign (v x* f) (eq. 2.32)."""
    out[0] += sign * (v[1] * f[2] - v[2] * f[1] + v[4] * f[5] - v[5] * f[4])
    out[1] += sign * (v[2] * f[0] - v[0] * f[2] + v[5] * f[3] - v[3] * f[5])
    out[2] += sign * (v[0] * f[1] - v[1] * f[0] + v[3] * f[4] - v[4] * f[3])
    out[3] += sign * (v[1] * f[5] - v[2] * f[4])
    out[4] += sign * (v[2] * f[3] - v[0] * f[5])
    out[5] += sign * (v[0] * f[4] - v[1] * f[3])


@njit(cache=True, inline="always")
def _inertia_times(I, m, out):
    """out = I m (6x6 times 6)."""
    for k in range(6):
        out[k] = (I[k, 0] * m[0] + I[k, 1] * m[1] + I[k, 2] * m[2] + I[k, 3] * m[3]
                  + I[k, 4] * m[4] + I[k, 5] * m[5])


@njit(cache=True)
def _one_state(T, E, r, vel, qd, x, out, dv, buf):
    """-dr_dq into out[:, :nv], -dr_dv into out[:, nv:2nv] for one state; dv (2, N, nv, 6) (no
    need to be zero: only support entries are read, each after it is written); buf (5, 6)."""
    N, nv = T.parents.size, qd.size
    tmp, tmp2, vJ, Iv, Idv = buf[0], buf[1], buf[2], buf[3], buf[4]
    for i in range(N):
        p, n, v0 = T.parents[i], T.v_size[i], T.v_start[i]
        ra, rf = T.row_a[i], T.row_f[i]
        vJ[:] = 0.0
        for k in range(n):
            for m in range(6):
                vJ[m] += T.S[i, m, k] * qd[v0 + k]
        # (3a_i): -s x (iX_lambda a_lambda); -dr is written, so the sign flips
        for m in range(6):
            tmp2[m] = T.a0[m] if p < 0 else x[T.col_a[p] + m]
        _x_motion(E[i], r[i], tmp2, tmp)
        for k in range(n):
            tmp2[:] = 0.0
            _cross_motion(T.S[i, :, k], tmp, tmp2, 1.0)
            for m in range(6):
                out[ra + m, v0 + k] += tmp2[m]
        lo, hi = T.support_ptr[i], T.support_ptr[i + 1]
        if p >= 0:
            # (5d): iX_lambda^T (s x* f_i) in the parent's (3f) rows
            rp = T.row_f[p]
            for k in range(n):
                tmp2[:] = 0.0
                _cross_force(T.S[i, :, k], x[T.col_f[i]:T.col_f[i] + 6], tmp2, 1.0)
                _xt_force(E[i], r[i], tmp2, tmp)
                for m in range(6):
                    out[rp + m, v0 + k] -= tmp[m]
            # eq. (2) carried down the support: dv_i = iX_lambda dv_lambda
            for j in range(lo, hi):
                d = T.support_dirs[j]
                if d < v0 or d >= v0 + n:
                    _x_motion(E[i], r[i], dv[0, p, d], dv[0, i, d])
                    _x_motion(E[i], r[i], dv[1, p, d], dv[1, i, d])
        for m in range(6):
            tmp2[m] = vel[i, m] - vJ[m]             # iX_lambda v_lambda (0 at a root)
        for k in range(n):
            dv[0, i, v0 + k, :] = 0.0
            if p >= 0:
                _cross_motion(T.S[i, :, k], tmp2, dv[0, i, v0 + k], -1.0)
            dv[1, i, v0 + k, :] = T.S[i, :, k]
        _inertia_times(T.inertias[i], vel[i], Iv)
        for j in range(lo, hi):
            d = T.support_dirs[j]
            for w in range(2):
                col = d + w * nv
                tmp[:] = 0.0
                if p >= 0:                     # c_i = v_i x S_i qd_i (0 at a root)
                    _cross_motion(dv[w, i, d], vJ, tmp, 1.0)
                    if w == 1 and v0 <= d < v0 + n:
                        _cross_motion(vel[i], T.S[i, :, d - v0], tmp, 1.0)
                    for m in range(6):
                        out[ra + m, col] -= tmp[m]
                    tmp[:] = 0.0
                # nu_i = v_i x* I_i v_i
                _cross_force(dv[w, i, d], Iv, tmp, 1.0)
                _inertia_times(T.inertias[i], dv[w, i, d], Idv)
                _cross_force(vel[i], Idv, tmp, 1.0)
                for m in range(6):
                    out[rf + m, col] -= tmp[m]


@njit(cache=True)
def _zero_pattern(T, out, nv):
    """out[rows, cols] = 0 on rhs_pattern's entries (the only ones _one_state adds to)."""
    for i in range(T.parents.size):
        p, v0 = T.parents[i], T.v_start[i]
        for j in range(T.support_ptr[i], T.support_ptr[i + 1]):
            d = T.support_dirs[j]
            for m in range(6):
                out[T.row_a[i] + m, d] = out[T.row_a[i] + m, nv + d] = 0.0
                out[T.row_f[i] + m, d] = out[T.row_f[i] + m, nv + d] = 0.0
        for k in range(T.v_size[i] if p >= 0 else 0):
            for m in range(6):
                out[T.row_f[p] + m, v0 + k] = out[T.row_f[p] + m, nv + v0 + k] = 0.0


@njit(cache=True)
def tangent_rhs(T, E, r, vel, qd, x, out):
    """out[b, :, :2 nv] = -(dr/dq, dr/dv) for every state b (see the module doc), serially: the
    substitutions that follow cost ten times more, and run serially too."""
    dv = np.empty((2, T.parents.size, qd.shape[1], 6))
    buf = np.empty((5, 6))
    for b in range(qd.shape[0]):
        _zero_pattern(T, out[b], qd.shape[1])
        _one_state(T, E[b], r[b], vel[b], qd[b], x[b], out[b], dv, buf)


def rhs_pattern(T, n_rows, nv):
    """(n_rows, 2 nv) bool: rows tangent_rhs may write (_zero_pattern clears them) in the column
    of each direction of q (first nv) and of v (next nv), both the union: (3a_i) and (3f_i) of
    every body the direction moves (its support holds it), and the parent's (3f) of the
    joint's own directions (5d)."""
    pattern = np.zeros((n_rows, nv), dtype=np.bool_)
    for i in range(T.parents.size):
        dirs = T.support_dirs[T.support_ptr[i]:T.support_ptr[i + 1]]
        for row in (T.row_a[i], T.row_f[i]):
            pattern[row:row + 6, dirs] = True
        if T.parents[i] >= 0:
            own = T.v_start[i] + np.arange(T.v_size[i])
            pattern[T.row_f[T.parents[i]]:T.row_f[T.parents[i]] + 6, own] = True
    return np.concatenate((pattern, pattern), axis=1)
