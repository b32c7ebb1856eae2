"""The numba backend of an LU program (sparsedyn.ir: same semantics and operation order as the
NumPy backend lu_numpy).

Two loop nests over the same program: `batch_outer` runs the whole program for one state at a
time on a private work vector (fits in cache, stops early on a broken pivot); `batch_inner` runs
each operation for a chunk of states, one lane of a (n_slots, chunk) work array per state
(`run_lanes`, the inner loop vectorises). experiments/bench_kernels.py measures both;
`solve_numba` uses the faster one by default (DEFAULT_LOOP).

`run_lanes` is shared with the fused online path (sparsedyn.kernels.assemble_numba), which
assembles D and b straight into the work array. Its pivot checks use row scales computed once
from the freshly loaded entries, before any operation overwrites them (`pivot_checks`,
`lane_scales`: the same yardstick as _row_scale; RECIP adds the magnitude accumulated in its
target slot). Several right-hand sides per state (rhs (B, n, k)) run the factorization part of a
split program once and its substitution part once per right-hand side. run_lanes runs each run
of arithmetic operations of one opcode as explicit vector code (lane_vectors <op>_run: the whole
row as one vector at the fused kernels' lane counts, else blocks of 8 lanes): a plain loop over a
run-time lane count pays an overlap check and a remainder per operation, and a constant count is
unrolled by LLVM into scalar code.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from .lane_vectors import add_run, fma_run, fms_run, mov_run, mul_run, neg_run, sub_run
from ..ir.instructions import ABSADD, ABSFMA, ADD, FMA, FMS, MOV, MUL, NEG, RECIP, SET, SUB
from ..ir.lu_program import pivot_checks, split_runs

#: the faster loop nest (experiments/kernel_design.md)
DEFAULT_LOOP = "batch_inner"


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


class PreparedProgram(NamedTuple):
    """An LUProgram's arrays as the kernels read them (prepare): the ops (t, a, b), the
    factorization's and the substitution's runs, the work size, the first right-hand-side slot,
    the constants, the loaded entries, the permutations, the row scales of the pivot checks as
    stored (scale_*: _batch_outer) and as check tables (chk_*: run_lanes reads b_checked for
    b), the pivot tolerance."""
    t: np.ndarray
    a: np.ndarray
    b: np.ndarray
    runs_f: np.ndarray
    runs_s: np.ndarray
    n_slots: int
    rhs0: int
    init_slots: np.ndarray
    init_values: np.ndarray
    load_entries: np.ndarray
    row_perm: np.ndarray
    col_perm: np.ndarray
    scale_ptr: np.ndarray
    scale_entries: np.ndarray
    scale_const: np.ndarray
    b_checked: np.ndarray
    chk_ptr: np.ndarray
    chk_entries: np.ndarray
    chk_const: np.ndarray
    tol: float


@njit(cache=True)
def _batch_outer(P, values, rhs, x, broken):
    t, a, b, runs_f, runs_s, n_slots, rhs0 = P.t, P.a, P.b, P.runs_f, P.runs_s, P.n_slots, P.rhs0
    init_slots, init_values, load_entries = P.init_slots, P.init_values, P.load_entries
    row_perm, col_perm, tol = P.row_perm, P.col_perm, P.tol
    scale_ptr, scale_entries, scale_const = P.scale_ptr, P.scale_entries, P.scale_const
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
    arithmetic operations is one lane_vectors <op>_run; a RECIP's b is its check (pivot_checks:
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
def _batch_inner(P, values, rhs, x, broken, chunk):
    t, a, b, runs_f, runs_s, n_slots = P.t, P.a, P.b_checked, P.runs_f, P.runs_s, P.n_slots
    rhs0, init_slots, init_values, load_entries = P.rhs0, P.init_slots, P.init_values, P.load_entries
    row_perm, col_perm, tol = P.row_perm, P.col_perm, P.tol
    chk_ptr, chk_entries, chk_const = P.chk_ptr, P.chk_entries, P.chk_const
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


INNER_CHUNK = 128  # states per batch_inner chunk (experiments/kernel_design.md)


def prepare(program):
    """The PreparedProgram solve_numba runs, derived once per program (a caller that solves with
    it repeatedly keeps it: Factorization does)."""
    p = program
    runs_f, runs_s = split_runs(p)
    return PreparedProgram(p.op_t, p.op_a, p.op_b, runs_f, runs_s, int(p.n_slots), int(p.rhs0),
                           p.init_slots, p.init_values, p.load_entries, p.row_perm, p.col_perm,
                           p.scale_ptr, p.scale_entries, p.scale_const, *pivot_checks(p),
                           float(p.tol))


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
    P = prepare(program) if prepared is None else prepared
    if loop == "batch_outer":
        _batch_outer(P, values, rhs, x, broken)
    elif loop == "batch_inner":
        _batch_inner(P, values, rhs, x, broken, max(1, min(B, int(chunk))))
    else:
        raise ValueError(f"loop: expected 'batch_outer' or 'batch_inner', got {loop!r}")
    return x.reshape(shape), broken
