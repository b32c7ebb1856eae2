"""Compiled tangent right-hand sides of the dynamics derivatives: the per-state loops of
system/tangent.py (its docstring has the equations: Featherstone eq. 2.31 for dX/dq, Nori
eq. 2, 3a, 3f, 5d) in numba, writing -dr straight into the multi-right-hand-side array of the
solve. States on the lanes (innermost, as kernels/lu_pruned.py reads them): every spatial
primitive runs once over LANES states (one state alone: over one lane); per state the
arithmetic (its order too) is the scalar recursion's.

Only the directions that move a body are visited: those of the joints on its path to the root
(the support, `support_ptr` / `support_dirs`); the others leave its velocity and its rows at 0.
dv is kept per support entry: entry j of body i carries dv_i along support_dirs[j], from the
parent's entry support_up[j] (-1: a direction of joint i itself). A root joint's q directions
move no velocity (v_root = S qd: eq. 2 has no parent term), so no body's v along them: of their
columns only the root's (3a) rows are nonzero (-s x a_0, gravity; q_moves[j] False) and the
kernel visits nothing else for them.

Preconditions: arrays from TangentData (built by problems/derivative_layout.py), kin (B, N, 12)
the joint transforms iX_lambda(i), E row-major then r (kinematics.joint_transforms), body
velocities (B, N, 6) and the solution x (B, n_cols), all float64 C-contiguous; out (n_rows, k,
>= B), k >= 2 nv, states last (any strides), zero in its first 2 nv columns outside
rhs_pattern (the kernel writes each of the pattern's entries once, nothing else).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

#: states per vector of the kernel (its scratch arrays' last axis)
LANES = 16


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
    support_up: np.ndarray    # per entry: the parent's entry of the same direction, or -1
    q_moves: np.ndarray       # per entry: its q direction moves v_i (False: a root joint's)


@njit(cache=True, inline="always")
def _x_motion(E, r, m, out, L):
    """out = X m for X = (E, r) (Featherstone eq. 2.24): [E w; E (v - r x w)], per lane."""
    for l in range(L):
        u0 = m[3, l] - (r[1, l] * m[2, l] - r[2, l] * m[1, l])
        u1 = m[4, l] - (r[2, l] * m[0, l] - r[0, l] * m[2, l])
        u2 = m[5, l] - (r[0, l] * m[1, l] - r[1, l] * m[0, l])
        for k in range(3):
            out[k, l] = E[k, 0, l] * m[0, l] + E[k, 1, l] * m[1, l] + E[k, 2, l] * m[2, l]
            out[3 + k, l] = E[k, 0, l] * u0 + E[k, 1, l] * u1 + E[k, 2, l] * u2


@njit(cache=True, inline="always")
def _xt_force(E, r, f, out, L):
    """out = X^T f: [E^T n + r x E^T fl; E^T fl] (the transpose of eq. 2.24 on forces)."""
    for l in range(L):
        for k in range(3):
            out[k, l] = E[0, k, l] * f[0, l] + E[1, k, l] * f[1, l] + E[2, k, l] * f[2, l]
            out[3 + k, l] = E[0, k, l] * f[3, l] + E[1, k, l] * f[4, l] + E[2, k, l] * f[5, l]
        out[0, l] += r[1, l] * out[5, l] - r[2, l] * out[4, l]
        out[1, l] += r[2, l] * out[3, l] - r[0, l] * out[5, l]
        out[2, l] += r[0, l] * out[4, l] - r[1, l] * out[3, l]


@njit(cache=True, inline="always")
def _cross_motion(v, m, out, sign, L):
    """out += sign (v x m) (eq. 2.31), per lane."""
    for l in range(L):
        out[0, l] += sign * (v[1, l] * m[2, l] - v[2, l] * m[1, l])
        out[1, l] += sign * (v[2, l] * m[0, l] - v[0, l] * m[2, l])
        out[2, l] += sign * (v[0, l] * m[1, l] - v[1, l] * m[0, l])
        out[3, l] += sign * (v[1, l] * m[5, l] - v[2, l] * m[4, l] + v[4, l] * m[2, l]
                             - v[5, l] * m[1, l])
        out[4, l] += sign * (v[2, l] * m[3, l] - v[0, l] * m[5, l] + v[5, l] * m[0, l]
                             - v[3, l] * m[2, l])
        out[5, l] += sign * (v[0, l] * m[4, l] - v[1, l] * m[3, l] + v[3, l] * m[1, l]
                             - v[4, l] * m[0, l])


@njit(cache=True, inline="always")
def _cross_force(v, f, out, sign, L):
    """out += sign (v x* f) (eq. 2.32), per lane."""
    for l in range(L):
        out[0, l] += sign * (v[1, l] * f[2, l] - v[2, l] * f[1, l] + v[4, l] * f[5, l]
                             - v[5, l] * f[4, l])
        out[1, l] += sign * (v[2, l] * f[0, l] - v[0, l] * f[2, l] + v[5, l] * f[3, l]
                             - v[3, l] * f[5, l])
        out[2, l] += sign * (v[0, l] * f[1, l] - v[1, l] * f[0, l] + v[3, l] * f[4, l]
                             - v[4, l] * f[3, l])
        out[3, l] += sign * (v[1, l] * f[5, l] - v[2, l] * f[4, l])
        out[4, l] += sign * (v[2, l] * f[3, l] - v[0, l] * f[5, l])
        out[5, l] += sign * (v[0, l] * f[4, l] - v[1, l] * f[3, l])


@njit(cache=True, inline="always")
def _inertia_times(I, m, out, L):
    """out = I m (a 6x6 constant times 6 per lane)."""
    for l in range(L):
        for k in range(6):
            out[k, l] = (I[k, 0] * m[0, l] + I[k, 1] * m[1, l] + I[k, 2] * m[2, l]
                         + I[k, 3] * m[3, l] + I[k, 4] * m[4, l] + I[k, 5] * m[5, l])


@njit(cache=True, inline="always")
def _store(out, row, col, s0, nl, vec, sign):
    """out[row:row + 6, col, s0 + l] = sign vec[:, l] for the group's nl states."""
    for m in range(6):
        for l in range(nl):
            out[row + m, col, s0 + l] = sign * vec[m, l]


@njit(cache=True, inline="always")
def _gather(src, s0, nl, i, start, size, dst):
    """dst[m, l] = src[s0 + l, i, start + m] for m < size (lanes past nl keep old values)."""
    for m in range(size):
        for l in range(nl):
            dst[m, l] = src[s0 + l, i, start + m]


#: lane counts as tuple lengths, which numba compiles as constants: the lane loops then have a
#: constant trip count (unrolled), as with LANES itself; a single state on 16 lanes would pay
#: for 16
_ONE, _GROUP = (0,), (0,) * LANES


def tangent_rhs(T, kin, vel, qd, x, out):
    """out[:, :2 nv, b] = -(dr/dq, dr/dv) for every state b (see the module doc), LANES states
    at a time, serially; a single state on one lane."""
    tangent_lanes(T, kin, vel, qd, x, out, _ONE if qd.shape[0] == 1 else _GROUP)


@njit(cache=True, nogil=True)
def tangent_lanes(T, kin, vel, qd, x, out, lanes):
    """tangent_rhs on len(lanes) lanes (one compiled instance per lane count)."""
    B, N, nv, L = qd.shape[0], T.parents.size, qd.shape[1], len(lanes)
    dv = np.zeros((2, T.support_dirs.size, 6, L))
    Ei9, ri, vi = np.zeros((9, L)), np.zeros((3, L)), np.zeros((6, L))
    Ei = Ei9.reshape((3, 3, L))
    Sl, qdl = np.zeros((T.S.shape[2], 6, L)), np.zeros((T.S.shape[2], L))
    buf = np.zeros((6, 6, L))
    tmp, tmp2, vJ, Iv, Idv, fi = buf[0], buf[1], buf[2], buf[3], buf[4], buf[5]
    own_a = np.zeros((T.S.shape[2], 6, L))      # (3a_i)'s term of each own direction of q
    # every input as (B, bodies or 1, entries), gathered per body into (entries, lanes)
    x3, qd3 = x.reshape((B, 1, x.shape[1])), qd.reshape((B, 1, nv))
    for s0 in range(0, B, L):
        nl = min(L, B - s0)
        for i in range(N):
            p, n, v0 = T.parents[i], T.v_size[i], T.v_start[i]
            ra, rf = T.row_a[i], T.row_f[i]
            _gather(kin, s0, nl, i, 0, 9, Ei9)
            _gather(kin, s0, nl, i, 9, 3, ri)
            _gather(vel, s0, nl, i, 0, 6, vi)
            _gather(qd3, s0, nl, 0, v0, n, qdl)
            for k in range(n):
                for m in range(6):
                    for l in range(L):
                        Sl[k, m, l] = T.S[i, m, k]
            vJ[:] = 0.0
            for k in range(n):
                for m in range(6):
                    for l in range(L):
                        vJ[m, l] += T.S[i, m, k] * qdl[k, l]
            # (3a_i): -s x (iX_lambda a_lambda); -dr is written, so the sign flips
            if p < 0:
                for m in range(6):
                    for l in range(L):
                        tmp2[m, l] = T.a0[m]
            else:
                _gather(x3, s0, nl, 0, T.col_a[p], 6, tmp2)
            _x_motion(Ei, ri, tmp2, tmp, L)
            for k in range(n):                 # stored with c_i's term below (at a root: now)
                own_a[k] = 0.0
                _cross_motion(Sl[k], tmp, own_a[k], 1.0, L)
                if p < 0:
                    _store(out, ra, v0 + k, s0, nl, own_a[k], 1.0)
            lo, hi = T.support_ptr[i], T.support_ptr[i + 1]
            if p >= 0:
                # (5d): iX_lambda^T (s x* f_i) in the parent's (3f) rows
                _gather(x3, s0, nl, 0, T.col_f[i], 6, fi)
                for k in range(n):
                    tmp2[:] = 0.0
                    _cross_force(Sl[k], fi, tmp2, 1.0, L)
                    _xt_force(Ei, ri, tmp2, tmp, L)
                    _store(out, T.row_f[p], v0 + k, s0, nl, tmp, -1.0)
                # eq. (2) carried down the support: dv_i = iX_lambda dv_lambda
                for j in range(lo, hi):
                    u = T.support_up[j]
                    if u >= 0:
                        if T.q_moves[j]:
                            _x_motion(Ei, ri, dv[0, u], dv[0, j], L)
                        _x_motion(Ei, ri, dv[1, u], dv[1, j], L)
            for m in range(6):
                for l in range(L):
                    tmp2[m, l] = vi[m, l] - vJ[m, l]     # iX_lambda v_lambda (0 at a root)
            for j in range(lo, hi):
                if T.support_up[j] < 0:
                    k = T.support_dirs[j] - v0
                    dv[0, j] = 0.0
                    if p >= 0:
                        _cross_motion(Sl[k], tmp2, dv[0, j], -1.0, L)
                    dv[1, j] = Sl[k]
            _inertia_times(T.inertias[i], vi, Iv, L)
            for j in range(lo, hi):
                d = T.support_dirs[j]
                for w in range(0 if T.q_moves[j] else 1, 2):
                    col = d + w * nv
                    tmp[:] = 0.0
                    if p >= 0:                     # c_i = v_i x S_i qd_i (0 at a root)
                        _cross_motion(dv[w, j], vJ, tmp, 1.0, L)
                        if w == 1 and T.support_up[j] < 0:
                            _cross_motion(vi, Sl[d - v0], tmp, 1.0, L)
                        if w == 0 and T.support_up[j] < 0:     # with the own (3a_i) term
                            for m in range(6):
                                for l in range(L):
                                    tmp[m, l] = own_a[d - v0, m, l] - tmp[m, l]
                            _store(out, ra, col, s0, nl, tmp, 1.0)
                        else:
                            _store(out, ra, col, s0, nl, tmp, -1.0)
                        tmp[:] = 0.0
                    # nu_i = v_i x* I_i v_i
                    _cross_force(dv[w, j], Iv, tmp, 1.0, L)
                    _inertia_times(T.inertias[i], dv[w, j], Idv, L)
                    _cross_force(vi, Idv, tmp, 1.0, L)
                    _store(out, rf, col, s0, nl, tmp, -1.0)


def rhs_pattern(T, n_rows, nv):
    """(n_rows, 2 nv) bool: the entries tangent_rhs writes (each exactly once; it writes
    nothing else), in the column of each direction of q (first nv) and of v (next nv): (3f_i)
    of every body the direction moves (its support holds it), (3a_i) of those where c_i moves
    (not at a root) and in the q columns of joint i's own directions (the -s x iX a term), and
    the parent's (3f) in the q columns of the joint's own directions (5d); a root joint's q
    directions move no velocity, so only the root's (3a) rows."""
    pattern = np.zeros((n_rows, 2 * nv), dtype=np.bool_)
    for i in range(T.parents.size):
        entries = slice(T.support_ptr[i], T.support_ptr[i + 1])
        dirs, moves = T.support_dirs[entries], T.q_moves[entries]
        own = T.support_up[entries] < 0
        ra, rf, p = T.row_a[i], T.row_f[i], T.parents[i]
        pattern[ra:ra + 6, dirs[own | moves]] = True
        pattern[rf:rf + 6, dirs[moves]] = True
        pattern[rf:rf + 6, nv + dirs] = True
        if p >= 0:
            pattern[ra:ra + 6, nv + dirs] = True
            own_dirs = T.v_start[i] + np.arange(T.v_size[i])
            pattern[T.row_f[p]:T.row_f[p] + 6, own_dirs] = True
    return pattern
