"""Compiled interpreter of an LU program (same semantics and operation order as lu_numpy).

Two loop nests over the same program: `batch_outer` runs the whole program for one state at a
time on a private work vector (fits in cache, stops early on a broken pivot); `batch_inner` runs
each operation for a chunk of states (the inner loop vectorises). experiments/bench_kernels.py
measures both; `solve_numba` uses the faster one by default (DEFAULT_LOOP).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .lu_numpy import ADD, FMA, FMS, MOV, MUL, NEG, RECIP, SUB, runs

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
def _batch_outer(code, t, a, b, runs, n_slots, rhs0, init_slots, init_values, load_entries,
                 row_perm, col_perm, scale_ptr, scale_entries, scale_const, tol,
                 values, rhs, x, broken):
    B = values.shape[0]
    n = row_perm.shape[0]
    w = np.zeros(n_slots)
    for s in range(B):
        for i in range(init_slots.shape[0]):
            w[init_slots[i]] = init_values[i]
        for i in range(load_entries.shape[0]):
            w[load_entries[i]] = values[s, load_entries[i]]
        for k in range(n):
            w[rhs0 + k] = rhs[s, row_perm[k]]
        ok = True
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
                    if not abs(p) > tol * scale:
                        ok = False
                        break
                    w[t[o]] = 1.0 / p
                if not ok:
                    break
            elif c == NEG:
                for o in range(lo, hi):
                    w[t[o]] = -w[t[o]]
            elif c == MOV:
                for o in range(lo, hi):
                    w[t[o]] = w[a[o]]
        for k in range(n):
            v = w[rhs0 + k]
            x[s, col_perm[k]] = v
            if not np.isfinite(v):
                ok = False
        broken[s] = not ok


@njit(cache=True, error_model="numpy")
def _batch_inner(code, t, a, b, runs, n_slots, rhs0, init_slots, init_values, load_entries,
                 row_perm, col_perm, scale_ptr, scale_entries, scale_const, tol,
                 values, rhs, x, broken, chunk):
    B = values.shape[0]
    n = row_perm.shape[0]
    w = np.zeros((n_slots, chunk))
    for first in range(0, B, chunk):
        m = min(chunk, B - first)
        for i in range(init_slots.shape[0]):
            for s in range(m):
                w[init_slots[i], s] = init_values[i]
        for i in range(load_entries.shape[0]):
            e = load_entries[i]
            for s in range(m):
                w[e, s] = values[first + s, e]
        for k in range(n):
            for s in range(m):
                w[rhs0 + k, s] = rhs[first + s, row_perm[k]]
        for r in range(runs.shape[0]):
            c, lo, hi = runs[r, 0], runs[r, 1], runs[r, 2]
            for o in range(lo, hi):
                wt, wa, wb = w[t[o]], w[a[o]], w[b[o]]
                if c == FMS:
                    for s in range(m):
                        wt[s] = wt[s] - wa[s] * wb[s]
                elif c == FMA:
                    for s in range(m):
                        wt[s] = wt[s] + wa[s] * wb[s]
                elif c == SUB:
                    for s in range(m):
                        wt[s] = wt[s] - wa[s]
                elif c == ADD:
                    for s in range(m):
                        wt[s] = wt[s] + wa[s]
                elif c == MUL:
                    for s in range(m):
                        wt[s] = wa[s] * wb[s]
                elif c == RECIP:
                    for s in range(m):
                        scale = _row_scale(values, first + s, b[o], scale_ptr, scale_entries,
                                           scale_const)
                        if not abs(wa[s]) > tol * scale:
                            broken[first + s] = True
                        wt[s] = 1.0 / wa[s]
                elif c == NEG:
                    for s in range(m):
                        wt[s] = -wt[s]
                elif c == MOV:
                    for s in range(m):
                        wt[s] = wa[s]
        for k in range(n):
            for s in range(m):
                v = w[rhs0 + k, s]
                x[first + s, col_perm[k]] = v
                if not np.isfinite(v):
                    broken[first + s] = True


INNER_CHUNK = 128  # states per batch_inner chunk (measured: 8..128 get faster, see the bench)


def solve_numba(program, values, rhs, loop=DEFAULT_LOOP, chunk=INNER_CHUNK):
    """Run the program for a batch: values (B, nnz), rhs (B, n) -> (x (B, n), broken (B,) bool)."""
    values = np.ascontiguousarray(values, dtype=float)
    rhs = np.ascontiguousarray(rhs, dtype=float)
    B = values.shape[0]
    x = np.empty((B, program.n))
    broken = np.zeros(B, dtype=np.bool_)
    args = (program.op_code, program.op_t, program.op_a, program.op_b, runs(program),
            program.n_slots, program.rhs0, program.init_slots, program.init_values,
            program.load_entries, program.row_perm, program.col_perm, program.scale_ptr,
            program.scale_entries, program.scale_const, program.tol, values, rhs, x, broken)
    if loop == "batch_outer":
        _batch_outer(*args)
    elif loop == "batch_inner":
        _batch_inner(*args, max(1, min(B, int(chunk))))
    else:
        raise ValueError(f"loop: expected 'batch_outer' or 'batch_inner', got {loop!r}")
    return x, broken
