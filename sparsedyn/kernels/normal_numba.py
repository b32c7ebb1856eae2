"""Compiled online phase of MAP / weighted least-squares estimation (seed 001, Sec. VI, eq. 17 in
BERDY's Gaussian form): per group of `lanes` states, in one pass that stays in cache,
  1. assemble A = [D; D_Y] and r = [b; y - b_Y] with the assembly kernel (assemble_numba's
     _assemble_lanes driven by an embedded AssemblyProgram) into wA (slots: A's CSC entries, then
     A's rows);
  2. form the normal matrix N = A^T W A + diag(p) and g = A^T W r + p mu straight into the
     program's work array wN (slot e = N's CSC entry e) from the offline product program: for
     each pair k, N[pt_k] += pw_k A[pe1_k] A[pe2_k], pt_k in the permuted lower triangle (the
     only part the L D L^T program reads); g by the column sums of A;
  3. run the static-pivot L D L^T program of N (planner/symbolic_ldlt.py, lu_numba.run_lanes;
     diagonal pivots in a symmetric fill-reducing order, safe since N is SPD);
  4. one refinement step on the un-squared residual, dx = N^-1 (A^T W (r - A x) + p (mu - x)),
     by the program's substitution part only (as the reference MAPSolver's step);
  5. flag states for the caller's reference route: a failed pivot check or a non-finite x (1);
     a pivot that the likelihood hardly contributes to, d_j - p_j <= sing_tol (N_jj - p_j), i.e.
     a direction the measurements do not determine (2).

The augmented (quasi-definite) form (run_augmented, below) shares step 1 and replaces 2-5 by the
static-pivot LU of K = [[W^-1, A], [A^T, -diag(p)]], a probe substitution and refinement on K.

Preconditions: the extra rows' section (AssemblyProgram.bind_extra) passed as 9 flat arrays; the
AssemblyProgram's rows bound to slots nnz_A + row (assemble_batch's layout);
the L D L^T program planned on N's pattern with its lower triangle loaded (no constant values),
split into factorization and substitution (runs_f, runs_s: lu_numpy.split_runs); arrays
C-contiguous.
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from .assemble_numba import _assemble_lanes, _lane_indices, lane_scratch
from .lu_numba import lane_scales, run_lanes

OK, BROKEN, UNDETERMINED = 0, 1, 2


@njit(cache=True, error_model="numpy")
def _map_range(lo, hi, lanes, q, qd, y, y_dest, parent, rot_kind, rot_q, n_trans, trans_q,
               rot_basis, TR, Tp, tdir, s_ptr, s_row, s_col, s_val, i_ptr, i_row, i_col, i_val,
               gravity, x_ptr, x_dest, x_src, t_ptr, t_dest, t_src, t_coef, q_body, q_k, q_l,
               q_coef, q_dest, a_dest, f_dest, zero_dest, a_const, a_tpl,
               a_rows, a_cols, row_w, prior_p, prior_pmu, pe1, pe2, pw, pt, diag, g_slot, n_slots, rhs0, col_perm, runs_f, runs_s, t, a, b, check_of, chk_ptr,
               chk_entries, chk_const, tol, piv_slot, sing_tol, x, flag):
    N, nA, m, n = parent.shape[0], a_rows.shape[0], row_w.shape[0], prior_p.shape[0]
    # the extra rows' arrays arrive flat: parallel regions take no nested tuples
    xr = (t_ptr, t_dest, t_src, t_coef, q_body, q_k, q_l, q_coef, q_dest)
    wA = np.zeros((nA + m, lanes))
    for k in range(a_const.shape[0]):              # A's constants: never overwritten
        v0 = a_tpl[k]
        for s in range(lanes):
            wA[a_const[k], s] = v0
    w = np.zeros((n_slots, lanes))
    vel, E, r, tmp, vj, scale, idx, qT, bad = lane_scratch(N, q.shape[1] + qd.shape[1],
                                                          chk_const.shape[0], lanes)
    ldiag = np.zeros((n, lanes))
    xs = np.zeros((n, lanes))
    res = np.zeros((m, lanes))
    grad = np.zeros((n, lanes))
    for first in range(lo, hi, lanes):
        cnt = _lane_indices(first, hi, idx)
        _assemble_lanes(idx, q, qd, y, y_dest, parent, rot_kind, rot_q, n_trans, trans_q,
                        rot_basis, TR, Tp, tdir, s_ptr, s_row, s_col, s_val, i_ptr, i_row, i_col,
                        i_val, gravity, x_ptr, x_dest, x_src, xr, a_dest, f_dest, zero_dest, wA,
                        vel, E, r, tmp, vj, qT)
        # ---- N = A^T W A + diag(p): the program's (permuted lower) triangle from the pairs
        for k in range(n_slots):
            for s in range(lanes):
                w[k, s] = 0.0
        for k in range(pe1.shape[0]):
            d, e1, e2, c = pt[k], pe1[k], pe2[k], pw[k]
            for s in range(lanes):
                w[d, s] += c * wA[e1, s] * wA[e2, s]
        for j in range(n):
            d, p0 = diag[j], prior_p[j]
            for s in range(lanes):
                ldiag[j, s] = w[d, s]                 # the likelihood's diagonal (for the test)
                w[d, s] += p0
        # ---- g = A^T W r + p mu, in the program's permuted rhs slots
        for e in range(nA):
            row = a_rows[e]
            d, c, rr = g_slot[a_cols[e]], row_w[row], nA + row
            for s in range(lanes):
                w[d, s] += wA[e, s] * (wA[rr, s] * c)
        for j in range(n):
            d, c = g_slot[j], prior_pmu[j]
            for s in range(lanes):
                w[d, s] += c
        # ---- static-pivot L D L^T of N and the substitutions
        lane_scales(w, chk_ptr, chk_entries, chk_const, scale)
        for s in range(lanes):
            bad[s] = False
        run_lanes(w, runs_f, t, a, b, check_of, scale, tol, bad)
        run_lanes(w, runs_s, t, a, b, check_of, scale, tol, bad)
        for k in range(n):
            j = col_perm[k]
            for s in range(lanes):
                v = w[rhs0 + k, s]
                xs[j, s] = v
                if not np.isfinite(v):
                    bad[s] = True
        # ---- one refinement step on the un-squared residual (as the reference MAPSolver):
        # dx = N^-1 (A^T W (r - A x) + p (mu - x)); the normal equations square A's condition
        # number and N x = g's own backward error does not see that loss, so the step is
        # always taken; the split program makes it one more substitution
        for i in range(m):
            for s in range(lanes):
                res[i, s] = wA[nA + i, s]
        for e in range(nA):
            i, j = a_rows[e], a_cols[e]
            for s in range(lanes):
                res[i, s] -= wA[e, s] * xs[j, s]
        for j in range(n):
            c0, c1 = prior_pmu[j], prior_p[j]
            for s in range(lanes):
                grad[j, s] = c0 - c1 * xs[j, s]
        for e in range(nA):
            i, j = a_rows[e], a_cols[e]
            c = row_w[i]
            for s in range(lanes):
                grad[j, s] += wA[e, s] * (res[i, s] * c)
        for j in range(n):
            d = g_slot[j]
            for s in range(lanes):
                w[d, s] = grad[j, s]
        run_lanes(w, runs_s, t, a, b, check_of, scale, tol, bad)
        for k in range(n):
            j = col_perm[k]
            for s in range(lanes):
                xs[j, s] += w[rhs0 + k, s]
        for s in range(cnt):
            f = OK
            if bad[s]:
                f = BROKEN
            else:
                # d_j = 1 / w[piv_slot]: the pivot of variable j (its Schur complement)
                for j in range(n):
                    if 1.0 / w[piv_slot[j], s] - prior_p[j] <= sing_tol * ldiag[j, s]:
                        f = UNDETERMINED
                        break
            flag[first + s] = f
            for j in range(n):
                x[first + s, j] = xs[j, s]


@njit(cache=True, parallel=True, error_model="numpy")
def _map_parallel(groups, B, lanes, *args):
    # one contiguous range of whole lane groups per thread (as assemble_numba._fused_parallel)
    n_groups = (B + lanes - 1) // lanes
    per = (n_groups + groups - 1) // groups
    for g in prange(groups):
        lo = min(B, g * per * lanes)
        hi = min(B, (g + 1) * per * lanes)
        if lo < hi:
            _map_range(lo, hi, lanes, *args)


@njit(cache=True, error_model="numpy")
def _map_serial(B, lanes, *args):
    _map_range(0, B, lanes, *args)


def _split(B, lanes, threads):
    """(lanes, groups): fewer lanes for small batches, one group of lane groups per thread."""
    threads = max(1, int(threads))
    lanes = max(1, min(lanes, -(-B // threads)))
    return lanes, min(threads, (B + lanes - 1) // lanes)


def run_map(args, B, lanes, threads):
    """Run the kernel on a batch of B states: `args` as _map_range takes them after `lanes`."""
    lanes, groups = _split(B, lanes, threads)
    if groups > 1:
        _map_parallel(groups, B, lanes, *args)
    else:
        _map_serial(B, lanes, *args)


# ---------------------------------------------------------------------------------------------
# The augmented (quasi-definite) form: K [lam; x] = [r; -p mu], K = [[W^-1, A], [A^T, -diag(p)]]
# (estimation/compiled_augmented.py). Per group of lanes:
#   1. assemble A, r into wA as above;
#   2. load K into the LU program's work array: its constants (W^-1, -p and A's constant entries,
#      folded offline by the planner: init_slots) and each dynamic entry of A twice (A, A^T);
#   3. factorise once; substitute [r; -p mu] -> z, and the probe [0; -p delta] -> s = N^-1 p delta
#      (N = A^T W A + diag(p)): ~delta on a direction the measurements leave undetermined, ~p/L
#      elsewhere; a state with |s| > sens_tol is flagged UNDETERMINED (the quasi-definite pivots
#      of a fill-reducing order do not see it: an x pivot eliminated before its rows is -p_j);
#   4. `refine` steps on K's own residual (its static factorization grows with |A|^2 / (w^-1 p)):
#      z += K^-1 ([r; -p mu] - K z), one substitution each.

@njit(cache=True, error_model="numpy")
def _aug_range(lo, hi, lanes, q, qd, y, y_dest, parent, rot_kind, rot_q, n_trans, trans_q,
               rot_basis, TR, Tp, tdir, s_ptr, s_row, s_col, s_val, i_ptr, i_row, i_col, i_val,
               gravity, x_ptr, x_dest, x_src, t_ptr, t_dest, t_src, t_coef, q_body, q_k, q_l,
               q_coef, q_dest, a_dest, f_dest, zero_dest, a_const, a_tpl,
               a_rows, a_cols, dyn_e, dyn_a, dyn_t, init_slots, init_values, w_inv, prior_p,
               prior_pmu, probe, kslot, n_slots, runs_f, runs_s, t, a, b, check_of, chk_ptr,
               chk_entries, chk_const, tol, sens_tol, refine, x, flag):
    N, nA, m, n = parent.shape[0], a_rows.shape[0], w_inv.shape[0], prior_p.shape[0]
    xr = (t_ptr, t_dest, t_src, t_coef, q_body, q_k, q_l, q_coef, q_dest)
    wA = np.zeros((nA + m, lanes))
    for k in range(a_const.shape[0]):
        v0 = a_tpl[k]
        for s in range(lanes):
            wA[a_const[k], s] = v0
    w = np.zeros((n_slots, lanes))
    vel, E, r, tmp, vj, scale, idx, qT, bad = lane_scratch(N, q.shape[1] + qd.shape[1],
                                                          chk_const.shape[0], lanes)
    und = np.zeros(lanes, dtype=np.bool_)
    z = np.zeros((m + n, lanes))
    res = np.zeros((m + n, lanes))
    for first in range(lo, hi, lanes):
        cnt = _lane_indices(first, hi, idx)
        _assemble_lanes(idx, q, qd, y, y_dest, parent, rot_kind, rot_q, n_trans, trans_q,
                        rot_basis, TR, Tp, tdir, s_ptr, s_row, s_col, s_val, i_ptr, i_row, i_col,
                        i_val, gravity, x_ptr, x_dest, x_src, xr, a_dest, f_dest, zero_dest, wA,
                        vel, E, r, tmp, vj, qT)
        # ---- K's entries: the program's constants, then A's dynamic entries in both blocks
        for k in range(init_slots.shape[0]):
            d, v0 = init_slots[k], init_values[k]
            for s in range(lanes):
                w[d, s] = v0
        for k in range(dyn_e.shape[0]):
            e, da, dt = dyn_e[k], dyn_a[k], dyn_t[k]
            for s in range(lanes):
                w[da, s] = wA[e, s]
                w[dt, s] = wA[e, s]
        for i in range(m):
            d = kslot[i]
            for s in range(lanes):
                w[d, s] = wA[nA + i, s]
        for j in range(n):
            d, c = kslot[m + j], -prior_pmu[j]
            for s in range(lanes):
                w[d, s] = c
        lane_scales(w, chk_ptr, chk_entries, chk_const, scale)
        for s in range(lanes):
            bad[s] = False
            und[s] = False
        run_lanes(w, runs_f, t, a, b, check_of, scale, tol, bad)
        run_lanes(w, runs_s, t, a, b, check_of, scale, tol, bad)
        for i in range(m + n):
            d = kslot[i]
            for s in range(lanes):
                z[i, s] = w[d, s]
        # ---- the identifiability probe: s = N^-1 p delta (its lam part is ignored)
        for i in range(m + n):
            d, c = kslot[i], probe[i]
            for s in range(lanes):
                w[d, s] = c
        run_lanes(w, runs_s, t, a, b, check_of, scale, tol, bad)
        for j in range(n):
            d = kslot[m + j]
            for s in range(lanes):
                if not abs(w[d, s]) <= sens_tol:         # (NaN counts as undetermined too)
                    und[s] = True
        # ---- refinement on K's residual [r; -p mu] - K z
        for _ in range(refine):
            for i in range(m):
                c = w_inv[i]
                for s in range(lanes):
                    res[i, s] = wA[nA + i, s] - c * z[i, s]
            for j in range(n):
                c0, c1 = prior_pmu[j], prior_p[j]
                for s in range(lanes):
                    res[m + j, s] = c1 * z[m + j, s] - c0
            for e in range(nA):
                i, j = a_rows[e], m + a_cols[e]
                for s in range(lanes):
                    v = wA[e, s]
                    res[i, s] -= v * z[j, s]
                    res[j, s] -= v * z[i, s]
            for i in range(m + n):
                d = kslot[i]
                for s in range(lanes):
                    w[d, s] = res[i, s]
            run_lanes(w, runs_s, t, a, b, check_of, scale, tol, bad)
            for i in range(m + n):
                d = kslot[i]
                for s in range(lanes):
                    z[i, s] += w[d, s]
        for s in range(cnt):
            f = OK
            for j in range(n):
                if not np.isfinite(z[m + j, s]):
                    bad[s] = True
            if bad[s]:
                f = BROKEN
            elif und[s]:
                f = UNDETERMINED
            flag[first + s] = f
            for j in range(n):
                x[first + s, j] = z[m + j, s]


@njit(cache=True, parallel=True, error_model="numpy")
def _aug_parallel(groups, B, lanes, *args):
    n_groups = (B + lanes - 1) // lanes
    per = (n_groups + groups - 1) // groups
    for g in prange(groups):
        lo = min(B, g * per * lanes)
        hi = min(B, (g + 1) * per * lanes)
        if lo < hi:
            _aug_range(lo, hi, lanes, *args)


@njit(cache=True, error_model="numpy")
def _aug_serial(B, lanes, *args):
    _aug_range(0, B, lanes, *args)


def run_augmented(args, B, lanes, threads):
    """The augmented-form kernel on a batch of B states (`args` as _aug_range takes them after
    `lanes`); thread split as run_map."""
    lanes, groups = _split(B, lanes, threads)
    if groups > 1:
        _aug_parallel(groups, B, lanes, *args)
    else:
        _aug_serial(B, lanes, *args)
