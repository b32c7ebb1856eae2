"""Compiled interpreter of an LU program (same semantics and operation order as lu_numpy).

Two loop nests over the same program: `batch_outer` runs the whole program for one state at a
time on a private work vector (fits in cache, stops early on a broken pivot); `batch_inner` runs
each operation for a chunk of states, one lane of a (n_slots, chunk) work array per state
(`run_lanes`, the inner loop vectorises). experiments/bench_kernels.py measures both;
`solve_numba` uses the faster one by default (DEFAULT_LOOP).

`run_lanes` is shared with the fused online path (sparsedyn.kernels.assemble_numba), which
assembles D and b straight into the work array. Its pivot checks use row scales computed once
from the freshly loaded entries, before any operation overwrites them (`lane_checks`,
`lane_scales`: the same yardstick as _row_scale; RECIP adds the magnitude accumulated in its
target slot). Several right-hand sides per state (rhs (B, n, k)) run the factorization part of a
split program once and its substitution part once per right-hand side. run_lanes runs each run
of arithmetic operations of one opcode as explicit vector code (lane_vectors <op>_run: the whole
row as one vector at the fused kernels' lane counts, else blocks of 8 lanes): a plain loop over a
run-time lane count pays an overlap check and a remainder per operation, and a constant count is
unrolled by LLVM into scalar code.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .lane_vectors import add_run, fma_run, fms_run, mov_run, mul_run, neg_run, sub_run
from .lu_numpy import ABSADD, ABSFMA, ADD, FMA, FMS, MOV, MUL, NEG, RECIP, SUB, split_runs

#: lane programs only (never in a stored program): w[t] = consts[a] on every lane. The fused
#: kernels write constants this way just before the run that first touches them, instead of at
#: the start of every lane group, so that a constant holds a slot only from then on
SET = 10

DEFAULT_LOOP = "batch_inner"  # measured faster for B=4096, n=500 (experiments/bench_kernels.py)


@njit(cache=True)
def _row_scale(values, s, row, scale_ptr, scale_entries, scale_const):
    scale = scale_const[row]
    for q in range(scale_ptr[row], scale_ptr[row + 1]):
        v = abs(values[s, scale_entries[q]])
        if v > scale:
            scale = v
    return scale


@njit(cache=True)
def _run_serial(w, runs, t, a, b, values, s, scale_ptr, scale_entries, scale_const, tol):
    """Run the ops of `runs` on one state's work vector; False at the first failed pivot check."""
    for r in range(runs.shape[0]):
        c, lo, hi = runs[r, 0], runs[r, 1], runs[r, 2]
        if c == FMS:
            for o in range(lo, hi):
                w[t[o]] = w[t[o]] - w[a[o]] * w[b[o]]
        elif c == FMA:
            for o in range(lo, hi):
                w[t[o]] = w[t[o]] + w[a[o]] * w[b[o]]
        elif c == SUB:
            for o in range(lo, hi):
                w[t[o]] = w[t[o]] - w[a[o]]
        elif c == ADD:
            for o in range(lo, hi):
                w[t[o]] = w[t[o]] + w[a[o]]
        elif c == MUL:
            for o in range(lo, hi):
                w[t[o]] = w[a[o]] * w[b[o]]
        elif c == RECIP:
            for o in range(lo, hi):
                p = w[a[o]]
                scale = _row_scale(values, s, b[o], scale_ptr, scale_entries, scale_const)
                if not abs(p) > tol * (scale + w[t[o]]):
                    return False
                w[t[o]] = 1.0 / p
        elif c == NEG:
            for o in range(lo, hi):
                w[t[o]] = -w[t[o]]
        elif c == MOV:
            for o in range(lo, hi):
                w[t[o]] = w[a[o]]
        elif c == ABSFMA:
            for o in range(lo, hi):
                w[t[o]] = w[t[o]] + abs(w[a[o]] * w[b[o]])
        elif c == ABSADD:
            for o in range(lo, hi):
                w[t[o]] = w[t[o]] + abs(w[a[o]])
    return True


@njit(cache=True)
def _batch_outer(t, a, b, runs_f, runs_s, n_slots, rhs0, init_slots, init_values, load_entries,
                 row_perm, col_perm, scale_ptr, scale_entries, scale_const, tol,
                 values, rhs, x, broken):
    B, k_rhs = values.shape[0], rhs.shape[2]
    n = row_perm.shape[0]
    w = np.zeros(n_slots)
    for s in range(B):
        for i in range(init_slots.shape[0]):
            w[init_slots[i]] = init_values[i]
        for i in range(load_entries.shape[0]):
            w[load_entries[i]] = values[s, load_entries[i]]
        ok = True
        for j in range(k_rhs):
            for k in range(n):
                w[rhs0 + k] = rhs[s, row_perm[k], j]
            if j == 0:
                ok = _run_serial(w, runs_f, t, a, b, values, s, scale_ptr, scale_entries,
                                 scale_const, tol)
            ok = ok and _run_serial(w, runs_s, t, a, b, values, s, scale_ptr, scale_entries,
                                    scale_const, tol)
            if not ok:
                break
            for k in range(n):
                v = w[rhs0 + k]
                x[s, col_perm[k], j] = v
                if not np.isfinite(v):
                    ok = False
        if not ok:
            for k in range(n):
                for j in range(k_rhs):
                    x[s, k, j] = np.nan
        broken[s] = not ok


def lane_checks(program):
    """Pivot checks of a program for `run_lanes`: its op_b with each RECIP's entry replaced by
    the index of its check (a RECIP reads no b operand), and per check the row scale's data
    (ptr, dynamic entries, constant)."""
    code, rows = program.op_code, program.op_b
    recips = np.flatnonzero(code == RECIP)     # only RECIP reads check data (op_b: the row)
    checked, check_of_recip = np.unique(rows[recips], return_inverse=True)
    b = np.array(rows, dtype=np.int64)
    b[recips] = check_of_recip
    counts = program.scale_ptr[checked + 1] - program.scale_ptr[checked]
    ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    entries = (np.concatenate([program.scale_entries[program.scale_ptr[r]:program.scale_ptr[r + 1]]
                               for r in checked]) if checked.size else np.zeros(0))
    return b, ptr, entries.astype(np.int64), program.scale_const[checked].astype(float)


@njit(cache=True)
def lane_scales(w, ptr, entries, const, scale):
    """scale[c, s] = max(const[c], |entries of check c|) read from the freshly loaded work array
    (the same yardstick as _row_scale, before any operation overwrites the entries)."""
    lanes = w.shape[1]
    for c in range(const.shape[0]):
        for s in range(lanes):
            scale[c, s] = const[c]
        for e in range(ptr[c], ptr[c + 1]):
            slot = entries[e]
            for s in range(lanes):
                v = abs(w[slot, s])
                if v > scale[c, s]:
                    scale[c, s] = v


@njit(cache=True, error_model="numpy")
def run_lanes(w, runs, t, a, b, scale, tol, bad, consts):
    """Run the program on w (n_slots, lanes): same operations, same order per slot as
    _batch_outer / lu_numpy (bit-identical results); bad[s] |= a failed pivot check. Each run of
    arithmetic operations is one lane_vectors <op>_run; a RECIP's b is its check (lane_checks:
    the row scales in scale); a SET's a is its value's index in consts."""
    lanes = w.shape[1]
    for r in range(runs.shape[0]):
        c, lo, hi = runs[r, 0], runs[r, 1], runs[r, 2]
        if c == FMS:
            fms_run(w, t, a, b, lo, hi)
        elif c == FMA:
            fma_run(w, t, a, b, lo, hi)
        elif c == SUB:
            sub_run(w, t, a, b, lo, hi)
        elif c == ADD:
            add_run(w, t, a, b, lo, hi)
        elif c == MUL:
            mul_run(w, t, a, b, lo, hi)
        elif c == NEG:
            neg_run(w, t, a, b, lo, hi)
        elif c == MOV:
            mov_run(w, t, a, b, lo, hi)
        elif c == RECIP:
            for o in range(lo, hi):
                ti, ai, ch = t[o], a[o], b[o]
                for s in range(lanes):
                    p = w[ai, s]
                    if not abs(p) > tol * (scale[ch, s] + w[ti, s]):
                        bad[s] = True
                    w[ti, s] = 1.0 / p
        elif c == ABSFMA:
            for o in range(lo, hi):
                ti, ai, bi = t[o], a[o], b[o]
                for s in range(lanes):
                    w[ti, s] = w[ti, s] + abs(w[ai, s] * w[bi, s])
        elif c == ABSADD:
            for o in range(lo, hi):
                ti, ai = t[o], a[o]
                for s in range(lanes):
                    w[ti, s] = w[ti, s] + abs(w[ai, s])
        elif c == SET:
            for o in range(lo, hi):
                ti, v = t[o], consts[a[o]]
                for s in range(lanes):
                    w[ti, s] = v


def lane_split(B, lanes, threads):
    """(lanes, groups) for a batch of B states on `threads` threads: at most `lanes` (fewer for
    small batches, so that each thread gets a group); one range of lane groups per thread
    (assemble_numba.thread_range)."""
    threads = max(1, int(threads))
    lanes = max(1, min(lanes, -(-B // threads)))
    return lanes, min(threads, (B + lanes - 1) // lanes)


@njit(cache=True, error_model="numpy")
def _batch_inner(t, a, runs_f, runs_s, n_slots, rhs0, init_slots, init_values, load_entries,
                 row_perm, col_perm, b, chk_ptr, chk_entries, chk_const, tol, values, rhs,
                 x, broken, chunk):
    # chunks of states on the lanes of one work array, run by the lane interpreter: factorise
    # once, substitute each right-hand side
    B, k_rhs = values.shape[0], rhs.shape[2]
    n = row_perm.shape[0]
    w = np.zeros((n_slots, chunk))
    no_consts = np.zeros(0)
    scale = np.zeros((chk_const.shape[0], chunk))
    bad = np.zeros(chunk, dtype=np.bool_)
    for first in range(0, B, chunk):
        m = min(chunk, B - first)
        for i in range(init_slots.shape[0]):
            for s in range(chunk):
                w[init_slots[i], s] = init_values[i]
        for i in range(load_entries.shape[0]):
            e = load_entries[i]
            for s in range(m):
                w[e, s] = values[first + s, e]
        lane_scales(w, chk_ptr, chk_entries, chk_const, scale)
        for s in range(chunk):
            bad[s] = False
        for j in range(k_rhs):
            for k in range(n):
                for s in range(m):
                    w[rhs0 + k, s] = rhs[first + s, row_perm[k], j]
            if j == 0:
                run_lanes(w, runs_f, t, a, b, scale, tol, bad, no_consts)
            run_lanes(w, runs_s, t, a, b, scale, tol, bad, no_consts)
            for k in range(n):
                for s in range(m):
                    v = w[rhs0 + k, s]
                    x[first + s, col_perm[k], j] = v
                    if not np.isfinite(v):
                        bad[s] = True
        for s in range(m):
            broken[first + s] = bad[s]


INNER_CHUNK = 128  # states per batch_inner chunk (measured: 8..128 get faster, see the bench)


def prepare(program):
    """What solve_numba derives from a program, once per program (a caller that solves with it
    repeatedly keeps it: Factorization does): the factorization's and the substitution's runs,
    then lane_checks."""
    return split_runs(program) + lane_checks(program)


def solve_numba(program, values, rhs, loop=DEFAULT_LOOP, chunk=INNER_CHUNK, prepared=None):
    """Run the program for a batch: values (B, nnz), rhs (B, n) or (B, n, k) (k right-hand sides
    sharing one factorization; needs a split program when k > 1) -> (x shaped like rhs,
    broken (B,) bool). prepared: prepare(program), if kept."""
    values = np.ascontiguousarray(values, dtype=float)
    rhs = np.asarray(rhs, dtype=float)
    shape = rhs.shape
    rhs = np.ascontiguousarray(rhs if rhs.ndim == 3 else rhs[:, :, None])
    if rhs.shape[2] > 1 and not program.split:
        raise ValueError("rhs: several right-hand sides need a program split into factorization "
                         "and substitution (re-plan it)")
    B = values.shape[0]
    x = np.empty((B, program.n, rhs.shape[2]))
    broken = np.zeros(B, dtype=np.bool_)
    runs_f, runs_s, *checks = prepare(program) if prepared is None else prepared
    if loop == "batch_outer":
        _batch_outer(program.op_t, program.op_a, program.op_b, runs_f, runs_s,
                     program.n_slots, program.rhs0, program.init_slots, program.init_values,
                     program.load_entries, program.row_perm, program.col_perm, program.scale_ptr,
                     program.scale_entries, program.scale_const, program.tol, values, rhs, x,
                     broken)
    elif loop == "batch_inner":
        _batch_inner(program.op_t, program.op_a, runs_f, runs_s, program.n_slots,
                     program.rhs0, program.init_slots, program.init_values, program.load_entries,
                     program.row_perm, program.col_perm, *checks, program.tol,
                     values, rhs, x, broken, max(1, min(B, int(chunk))))
    else:
        raise ValueError(f"loop: expected 'batch_outer' or 'batch_inner', got {loop!r}")
    return x.reshape(shape), broken
