"""Compiled online phase of MAP / weighted least-squares estimation (seed 001, Sec. VI, eq. 17 in
BERDY's Gaussian form): per group of `lanes` states, in one pass that stays in cache,
  1. assemble A = [D; D_Y] and r = [b; y - b_Y] with the assembly kernel (assemble_numba's
     _assemble_lanes driven by an embedded AssemblyProgram) straight into the chain program's
     work array w (its destinations bound to the program's slots of A's dynamic entries and rows);
  2. run the pair-chain program (planner/chain_ldlt.py: the Crout L D L^T of N = A^T W A +
     diag(p) with N formed inside its chains; each chain one lane_vectors.chain_block per block
     of lanes): factor; x = 0; solve (x = N^-1 g); residual r - A x; solve again (one refinement
     step on the un-squared residual, as the reference MAPSolver's); the probe z = N^-1 c;
  3. flag states for the caller's reference route: a pivot d_j that is not positive or a
     non-finite x or z (1); a pivot that the likelihood hardly contributes to,
     d_j - p_j <= sing_tol (N_jj - p_j), or a probe response |z_j| > z_tol_j, i.e. a direction
     the measurements may not determine (2: estimation/compiled_map.py);
  4. if the probe alone flagged a state of the group: the probe's second step z = N^-1 (J z)
     and a second refinement step (on r - A x2 = (r - A x1) - A dx, dx left in y's rows); a
     state whose second response stays under z2_tol (and its other tests pass) is accepted
     with that x.

The augmented (quasi-definite) form (run_augmented, below) shares step 1 (into its own array)
and replaces 2-3 by the static-pivot LU of K = [[W^-1, A], [A^T, -diag(p)]], a probe
substitution and refinement on K.

Preconditions: the extra rows' section (AssemblyProgram.bind_extra) passed as 9 flat arrays;
for run_map, every destination of the AssemblyProgram bound to the chain program's slots, x's
slots consecutive; arrays C-contiguous.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .assemble_numba import _assemble_lanes, _lane_indices, lane_scratch, thread_range
from .lane_vectors import BLOCKS, chain_block_8, chain_block_32, chain_block_64
from .lu_numba import lane_scales, lane_split, run_lanes
from .parallel import parallel_launch

OK, BROKEN, UNDETERMINED = 0, 1, 2
_V64, _V32, _V8 = BLOCKS            # the lanes of chain_block_64, _32, _8


@njit(cache=True, error_model="numpy")
def run_chains(w, lo, hi, prog):
    """Instructions lo..hi-1 of a chain program (ChainArrays) on the lanes of w
    (lane_vectors.chain_block_V in blocks of the largest V that divides the lane count)."""
    ins_t, ins_src, ins_c0, ins_row, ins_q, ins_k, ins_kmid = (
        prog.ins_t, prog.ins_src, prog.ins_c0, prog.ins_row, prog.ins_q, prog.ins_k, prog.ins_kmid)
    ins_mid, ins_mode, ins_t2, ins_r2, pa, pb, pc = (
        prog.ins_mid, prog.ins_mode, prog.ins_t2, prog.ins_r2, prog.pa, prog.pb, prog.pc)
    lanes = w.shape[1]
    block = _V64 if lanes % _V64 == 0 else (_V32 if lanes % _V32 == 0 else _V8)
    for i in range(lo, hi):
        t, src, c0, fr, q, k, kmid = (ins_t[i], ins_src[i], ins_c0[i], ins_row[i], ins_q[i],
                                      ins_k[i], ins_kmid[i])
        mid, mode, t2, r2 = ins_mid[i], ins_mode[i], ins_t2[i], ins_r2[i]
        if block == _V64:
            for s in range(0, lanes, _V64):
                chain_block_64(w, t, src, c0, fr, pa, pb, pc, q, k, kmid, mid, mode, t2, r2, s)
        elif block == _V32:
            for s in range(0, lanes, _V32):
                chain_block_32(w, t, src, c0, fr, pa, pb, pc, q, k, kmid, mid, mode, t2, r2, s)
        else:
            for s in range(0, lanes, _V8):
                chain_block_8(w, t, src, c0, fr, pa, pb, pc, q, k, kmid, mid, mode, t2, r2, s)


class MapSlots(NamedTuple):
    """The MAP kernel's parts of a chain program (the ONE slot, where its factor, solve, resid
    and probe parts end), the slots it reads per variable (x, d, N_kk, the probe's z, the
    solve's y) and the undetermined-pivot tolerance."""
    one: int
    factor_end: int
    solve_end: int
    resid_end: int
    probe_end: int
    x_slot: np.ndarray
    d_slot: np.ndarray
    nkk_slot: np.ndarray
    z_slot: np.ndarray
    y_slot: np.ndarray
    sing_tol: float


class SampleInputs(NamedTuple):
    """The numbers of a MAP kernel's call that may change from state to state.

    A per-sample program (planner/chain_ldlt.py, per_sample=True; A's entries all written per
    state, unit weights in the chains) reads, per state b:
      A'_e = A_e row_scale[b, row_e] col_scale[b, col_e] into slot e_slot[e] (A_e: e_value[e],
             or the assembled value where e_value[e] is NaN), r'_r = r_r row_scale[b, r] (row
             slots row_slot): W^1/2 A and W^1/2 r with row_scale = sqrt(w), a variable with
             col_scale 0 (an inactive contact's wrench) cut out of every row;
      prior[b, i, j] into prior_slot[i, j] (chain_program.PRIOR_ROWS: p, p_gradient, p mu, c, J).
    Every program's flags read test_p (the prior precision in N), z_tol and z2_tol (the probe's
    tolerances after its first and second step; z2_tol < 0 where the second step may not
    accept a state: compiled_map.py) and col_scale (a variable scaled to 0 is known, not
    tested), each with one row per state or a single row for all. A program without per-sample
    numbers passes empty e_* / row_slot / prior_slot."""
    e_slot: np.ndarray
    e_row: np.ndarray
    e_col: np.ndarray
    e_value: np.ndarray
    row_slot: np.ndarray
    prior_slot: np.ndarray
    row_scale: np.ndarray
    col_scale: np.ndarray
    prior: np.ndarray
    test_p: np.ndarray
    z_tol: np.ndarray
    z2_tol: np.ndarray


class EstimateOutputs(NamedTuple):
    """Per state: the estimate x (B, n) and its flag (B,) (OK, BROKEN, UNDETERMINED)."""
    x: np.ndarray
    flag: np.ndarray


@njit(cache=True, error_model="numpy")
def _scale_samples(w, idx, sd):
    """A' = W^1/2 A diag(col_scale), r' = W^1/2 r and the prior's numbers into their slots, per
    lane (SampleInputs; nothing for a program without per-sample numbers)."""
    lanes = w.shape[1]
    rs, cs, prior = sd.row_scale, sd.col_scale, sd.prior
    for e in range(sd.e_slot.shape[0]):
        t, r, c, val = sd.e_slot[e], sd.e_row[e], sd.e_col[e], sd.e_value[e]
        if val == val:                                     # a constant entry of A
            for s in range(lanes):
                w[t, s] = val * rs[idx[s], r] * cs[idx[s], c]
        else:                                              # assembled for this state
            for s in range(lanes):
                w[t, s] *= rs[idx[s], r] * cs[idx[s], c]
    for r in range(sd.row_slot.shape[0]):
        t = sd.row_slot[r]
        for s in range(lanes):
            w[t, s] *= rs[idx[s], r]
    for i in range(sd.prior_slot.shape[0]):
        for j in range(sd.prior_slot.shape[1]):
            t = sd.prior_slot[i, j]
            if t >= 0:
                for s in range(lanes):
                    w[t, s] = prior[idx[s], i, j]


@njit(cache=True, error_model="numpy")
def _map_range(lo, hi, w, q, qd, y, model, xr, dest, prog, ms, sd, res):
    """States lo..hi-1 on the work array w, a lane group at a time: model, xr, dest the sensor
    assembly's bundles, prog the ChainArrays, ms the MapSlots, sd the SampleInputs, res the
    EstimateOutputs."""
    one, factor_end, solve_end, resid_end = ms.one, ms.factor_end, ms.solve_end, ms.resid_end
    probe_end = ms.probe_end
    x_slot, d_slot, nkk_slot, z_slot = ms.x_slot, ms.d_slot, ms.nkk_slot, ms.z_slot
    sing_tol, test_p, z_tol, col_scale = ms.sing_tol, sd.test_p, sd.z_tol, sd.col_scale
    per_p, per_c = test_p.shape[0] > 1, col_scale.shape[0] > 1
    x, flag = res
    N, n, n_ins, lanes = model.parent.shape[0], x_slot.shape[0], prog.ins_t.shape[0], w.shape[1]
    for s in range(lanes):
        w[one, s] = 1.0
    sc = lane_scratch(N, q.shape[1] + qd.shape[1], 0, lanes)
    idx = sc.idx
    nbad = np.zeros(lanes)
    nund = np.zeros(lanes)
    nprobe = np.zeros(lanes)
    x_kept = np.empty((n, lanes))
    for first in range(lo, hi, lanes):
        cnt = _lane_indices(first, hi, idx)
        _assemble_lanes(idx, q, qd, y, model, xr, dest, w, sc)
        _scale_samples(w, idx, sd)
        for j in range(n):
            d = x_slot[j]
            for s in range(lanes):
                w[d, s] = 0.0
        run_chains(w, 0, factor_end, prog)
        run_chains(w, factor_end, solve_end, prog)
        run_chains(w, solve_end, resid_end, prog)     # r -= A x, in place
        run_chains(w, factor_end, solve_end, prog)
        run_chains(w, resid_end, probe_end, prog)     # the probe z = N^-1 c
        # ---- flags, branch-free over whole rows of w (the lanes are contiguous): counts of
        # failed pivot / finiteness checks, undetermined pivots and probe responses per lane
        _map_flags(w, idx, ms, sd, z_tol, nbad, nund, nprobe)
        x0 = x_slot[0]                                 # x's rows are consecutive
        again = False
        for s in range(cnt):
            flag[first + s] = (BROKEN if nbad[s] > 0 else
                               (UNDETERMINED if nund[s] + nprobe[s] > 0 else OK))
            again |= nbad[s] + nund[s] == 0 and nprobe[s] > 0
        for j in range(n):
            for s in range(cnt):
                x[first + s, j] = w[x0 + j, s]
        if again and probe_end < n_ins:
            _second_step(w, ms, prog, solve_end, resid_end, probe_end, n_ins, x_kept)
            _map_flags(w, idx, ms, sd, sd.z2_tol, nbad, nund, nprobe)
            for s in range(cnt):
                if flag[first + s] == UNDETERMINED and nbad[s] + nund[s] + nprobe[s] == 0:
                    flag[first + s] = OK
                    for j in range(n):
                        x[first + s, j] = w[x0 + j, s]


@njit(cache=True, error_model="numpy")
def _map_flags(w, idx, ms, sd, z_tol, nbad, nund, nprobe):
    """Per lane: nbad, a pivot not positive or x or z not finite; nund, a pivot the likelihood
    hardly contributes to (d_j - p_j <= sing_tol (N_jj - p_j)); nprobe, a probe response
    |z_j| > z_tol_j (z_tol: SampleInputs' z_tol or z2_tol). Known variables are not tested."""
    test_p, col_scale, sing_tol = sd.test_p, sd.col_scale, ms.sing_tol
    per_p, per_c = test_p.shape[0] > 1, col_scale.shape[0] > 1
    lanes = w.shape[1]
    for s in range(lanes):
        nbad[s] = 0.0
        nund[s] = 0.0
        nprobe[s] = 0.0
    for j in range(ms.x_slot.shape[0]):
        d, nk, xs, zs = ms.d_slot[j], ms.nkk_slot[j], ms.x_slot[j], ms.z_slot[j]
        for s in range(lanes):
            bp = idx[s] if per_p else 0
            p0, zt = test_p[bp, j], z_tol[bp, j]
            known = col_scale[idx[s] if per_c else 0, j] == 0.0
            dj, xj, zj = w[d, s], w[xs, s], w[zs, s]
            # x - x: NaN unless finite
            nbad[s] += (not dj > 0.0) + (xj - xj != 0.0) + (zj - zj != 0.0)
            nund[s] += (not known) * (dj - p0 <= sing_tol * (w[nk, s] - p0))
            nprobe[s] += (not known) * (abs(zj) > zt)


@njit(cache=True, error_model="numpy")
def _second_step(w, ms, prog, solve_end, resid_end, probe_end, n_ins, x_kept):
    """The probe's second step z = N^-1 (J z) and a second refinement step: r - A x2 from the
    residual r - A x1 the first step left, as (r - A x1) - A dx with dx in y's rows."""
    x_slot, y_slot = ms.x_slot, ms.y_slot
    lanes = w.shape[1]
    run_chains(w, probe_end, n_ins, prog)
    for j in range(x_slot.shape[0]):
        xs, ys = x_slot[j], y_slot[j]
        for s in range(lanes):
            x_kept[j, s] = w[xs, s]
            w[xs, s] = w[ys, s]
    run_chains(w, solve_end, resid_end, prog)
    for j in range(x_slot.shape[0]):
        xs = x_slot[j]
        for s in range(lanes):
            w[xs, s] = x_kept[j, s]
    run_chains(w, ms.factor_end, solve_end, prog)


@njit(cache=True, parallel=True, error_model="numpy")
def _map_parallel(B, work, q, qd, y, model, xr, dest, prog, ms, sd, res):
    # each thread on its own work array; the bundles arrive one by one (parallel regions take
    # no nested tuples)
    groups, lanes = work.shape[0], work.shape[2]
    for g in prange(groups):
        lo, hi = thread_range(g, groups, B, lanes)
        if lo < hi:
            _map_range(lo, hi, work[g], q, qd, y, model, xr, dest, prog, ms, sd, res)


@njit(cache=True, error_model="numpy")
def _map_serial(B, work, q, qd, y, model, xr, dest, prog, ms, sd, res):
    _map_range(0, B, work[0], q, qd, y, model, xr, dest, prog, ms, sd, res)


def map_lanes(B, lanes, threads):
    """(lanes, groups) of run_map: at most `lanes`, a multiple of the largest block of
    lane_vectors.BLOCKS not above it (small batches: fewer, a multiple of the smallest), one
    group of lane groups per thread."""
    lanes, _ = lane_split(B, lanes, threads)
    block = next((v for v in BLOCKS if v <= lanes), BLOCKS[-1])
    lanes = max(block, lanes // block * block)
    return lanes, min(max(1, int(threads)), (B + lanes - 1) // lanes)


def run_map(args, B, work):
    """Run the kernel on a batch of B states: args = (q, qd, y, model, xr, dest, ChainArrays,
    MapSlots, SampleInputs, EstimateOutputs) as _map_range takes them after `w`, work
    (groups, n_slots, lanes) one work array per thread (map_lanes), kept between calls: its
    contents need no initialisation (the kernel sets ONE and x; the assembly and the chains
    write every other slot before reading it, per lane group)."""
    if work.shape[0] > 1:
        with parallel_launch():
            _map_parallel(B, work, *args)
    else:
        _map_serial(B, work, *args)


# ---------------------------------------------------------------------------------------------
# The augmented (quasi-definite) form: K [lam; x] = [r; -p mu], K = [[W^-1, A], [A^T, -diag(p)]]
# (estimation/compiled_augmented.py). Per group of lanes:
#   1. assemble A, r into wA as above;
#   2. load K into the LU program's work array: its constants (W^-1, -p and A's constant entries,
#      folded offline by the planner: init_slots) and each dynamic entry of A twice (A, A^T);
#   3. factorise once; substitute [r; -p mu] -> z, and the probe [0; -c] -> s = N^-1 c
#      (N = A^T W A + diag(p), c: compiled_map.probe_vectors); a state with |s_j| > sens_tol_j
#      for some j is flagged UNDETERMINED (the quasi-definite pivots of a fill-reducing order do
#      not see it: an x pivot eliminated before its rows is -p_j);
#   4. `refine` steps on K's own residual (its static factorization grows with |A|^2 / (w^-1 p)):
#      z += K^-1 ([r; -p mu] - K z), one substitution each.

class AugmentedArrays(NamedTuple):
    """How the augmented kernel loads K from A: A's constant entries (a_const, their values
    a_tpl), A's rows and columns per entry, its dynamic entries (dyn_e) and their slots in the A
    and A^T blocks (dyn_a, dyn_t), W^-1 (w_inv), the prior (prior_p, prior_pmu = p mu), the
    probe's right-hand side, the slot of each of K's rows (kslot) and the probe tolerances."""
    a_const: np.ndarray
    a_tpl: np.ndarray
    a_rows: np.ndarray
    a_cols: np.ndarray
    dyn_e: np.ndarray
    dyn_a: np.ndarray
    dyn_t: np.ndarray
    w_inv: np.ndarray
    prior_p: np.ndarray
    prior_pmu: np.ndarray
    probe: np.ndarray
    kslot: np.ndarray
    sens_tol: np.ndarray


@njit(cache=True, error_model="numpy")
def _aug_range(lo, hi, lanes, q, qd, y, model, xr, dest, ka, P, refine, res):
    """States lo..hi-1, a lane group at a time: model, xr, dest the sensor assembly's bundles,
    ka the AugmentedArrays, P K's PreparedProgram (lu_numba), refine the refinement steps, res
    the EstimateOutputs."""
    a_const, a_tpl, a_rows, a_cols = ka.a_const, ka.a_tpl, ka.a_rows, ka.a_cols
    dyn_e, dyn_a, dyn_t, w_inv, prior_p = ka.dyn_e, ka.dyn_a, ka.dyn_t, ka.w_inv, ka.prior_p
    prior_pmu, probe, kslot, sens_tol = ka.prior_pmu, ka.probe, ka.kslot, ka.sens_tol
    init_slots, init_values, n_slots, runs_f, runs_s = (P.init_slots, P.init_values, P.n_slots,
                                                        P.runs_f, P.runs_s)
    t, a, b, tol = P.t, P.a, P.b_checked, P.tol
    chk_ptr, chk_entries, chk_const = P.chk_ptr, P.chk_entries, P.chk_const
    x, flag = res
    N, nA, m, n = model.parent.shape[0], a_rows.shape[0], w_inv.shape[0], prior_p.shape[0]
    wA = np.zeros((nA + m, lanes))
    for k in range(a_const.shape[0]):
        v0 = a_tpl[k]
        for s in range(lanes):
            wA[a_const[k], s] = v0
    w = np.zeros((n_slots, lanes))
    no_consts = np.zeros(0)
    sc = lane_scratch(N, q.shape[1] + qd.shape[1], chk_const.shape[0], lanes)
    scale, idx, bad = sc.scale, sc.idx, sc.bad
    und = np.zeros(lanes, dtype=np.bool_)
    z = np.zeros((m + n, lanes))
    resid = np.zeros((m + n, lanes))
    for first in range(lo, hi, lanes):
        cnt = _lane_indices(first, hi, idx)
        _assemble_lanes(idx, q, qd, y, model, xr, dest, wA, sc)
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
        run_lanes(w, runs_f, t, a, b, scale, tol, bad, no_consts)
        run_lanes(w, runs_s, t, a, b, scale, tol, bad, no_consts)
        for i in range(m + n):
            d = kslot[i]
            for s in range(lanes):
                z[i, s] = w[d, s]
        # ---- the identifiability probe: s = N^-1 p delta (its lam part is ignored)
        for i in range(m + n):
            d, c = kslot[i], probe[i]
            for s in range(lanes):
                w[d, s] = c
        run_lanes(w, runs_s, t, a, b, scale, tol, bad, no_consts)
        for j in range(n):
            d, zt = kslot[m + j], sens_tol[j]
            for s in range(lanes):
                if not abs(w[d, s]) <= zt:               # (NaN counts as undetermined too)
                    und[s] = True
        # ---- refinement on K's residual [r; -p mu] - K z
        for _ in range(refine):
            for i in range(m):
                c = w_inv[i]
                for s in range(lanes):
                    resid[i, s] = wA[nA + i, s] - c * z[i, s]
            for j in range(n):
                c0, c1 = prior_pmu[j], prior_p[j]
                for s in range(lanes):
                    resid[m + j, s] = c1 * z[m + j, s] - c0
            for e in range(nA):
                i, j = a_rows[e], m + a_cols[e]
                for s in range(lanes):
                    v = wA[e, s]
                    resid[i, s] -= v * z[j, s]
                    resid[j, s] -= v * z[i, s]
            for i in range(m + n):
                d = kslot[i]
                for s in range(lanes):
                    w[d, s] = resid[i, s]
            run_lanes(w, runs_s, t, a, b, scale, tol, bad, no_consts)
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
def _aug_parallel(groups, B, lanes, q, qd, y, model, xr, dest, ka, P, refine, res):
    for g in prange(groups):
        lo, hi = thread_range(g, groups, B, lanes)
        if lo < hi:
            _aug_range(lo, hi, lanes, q, qd, y, model, xr, dest, ka, P, refine, res)


@njit(cache=True, error_model="numpy")
def _aug_serial(B, lanes, q, qd, y, model, xr, dest, ka, P, refine, res):
    _aug_range(0, B, lanes, q, qd, y, model, xr, dest, ka, P, refine, res)


def run_augmented(args, B, lanes, threads):
    """The augmented-form kernel on a batch of B states: args = (q, qd, y, model, xr, dest,
    AugmentedArrays, PreparedProgram, refine, EstimateOutputs) as _aug_range takes them after
    `lanes`; thread split as run_map."""
    lanes, groups = lane_split(B, lanes, threads)
    if groups > 1:
        with parallel_launch():
            _aug_parallel(groups, B, lanes, *args)
    else:
        _aug_serial(B, lanes, *args)
