"""Offline planning of a static-pivot sparse LU for a fixed worst-case pattern, and the stored plan.

plan_factorization tries the candidate orderings (sparsedyn.planner.orderings, plus any structural
orders the system offers), bounds each one's flops from the structure of its factors
(estimate_numba.py), computes the exact symbolic factorization and kernel flop count of those
that can still be the cheapest (BUDGET, FOLDING_FLOOR), and keeps the cheapest pivot-safe one
(a structural order may declare its pivots trusted: see plan_factorization). With
symmetric=True the program is an L D L^T of a structurally symmetric pattern with diagonal
pivots (symbolic_ldlt.py), e.g. for an SPD normal matrix.
Factorization.solve runs the compiled program for a batch of states, with one or several
right-hand sides per state (one factorization each); states whose
static pivot breaks down (the program's cancellation-aware check, symbolic.py) are re-solved with
partial pivoting (splu), with a PivotBreakdownWarning; states that splu finds numerically singular
too (a tiny pivot, a non-finite solution or a large backward error) raise SingularModelError
naming their batch indices (or are reported in the status mask).

Preconditions: `pattern` square CSC with canonical indices; values are given in its data order.
"""
from __future__ import annotations

import hashlib
import time
import warnings

import numpy as np
import scipy.sparse as sp

from .. import opcount
from ..batch import as_batch
from ..errors import IllPosedError, NonFiniteError, PivotBreakdownWarning, SingularModelError
from ..ir.instructions import OP_COST, RECIP
from ..ir.lu_program import TRUSTED
from ..serialization import check_format, stored_array, stored_scalar
from .orderings import (
    KNOWN_ORDERINGS,
    OrderingUnavailable,
    column_order,
    matched_pair,
    safe_matching,
    unmatched_error,
)
from .estimate_numba import OVER_BUDGET, estimate
from .symbolic import LUProgram, UnsafePivot, symbolic_lu
from .symbolic_ldlt import symbolic_ldlt

FORMAT = "sparsedyn.lu_plan"
FORMAT_VERSION = 1
BACKENDS = ("auto", "numba", "numpy")
_TABLE_COLUMNS = ("name", "nnz_LU", "fill", "flops", "time_s", "pivot_safe", "note")

#: "auto" builds the program of a candidate ordering only if its structural flop bound
#: (estimate_numba.py, no ops emitted) is at most BUDGET times the lowest bound: the bound counts
#: every operation before constant folding, which removes at most about a third of them (see
#: FOLDING_FLOOR), so a candidate over the budget cannot be the cheapest; one whose fill
#: explodes (btf on a 1000-link chain: 60x the best) costs neither the time nor the memory of
#: its program, and its elimination is stopped as soon as it is over
BUDGET = 4
#: ... and only while it can still win: its bound times FOLDING_FLOOR must not exceed the online
#: flops of the cheapest program built so far. Folding removed 6-36 % of the bound's operations
#: on every candidate of the chains, trees and humanoid measured (the most: the natural order
#: of the humanoid's inverse dynamics), so a candidate above the floor cannot be the cheapest;
#: tests/test_offline_scale.py checks that "auto" plans what building every candidate plans
FOLDING_FLOOR = 0.5



#: largest |D_ij - D_ji| / max |D| a symmetric (L D L^T) plan accepts as round-off
SYMMETRY_TOL = 1e-12

#: normwise backward error |D x - rhs| / (|D| |x| + |rhs|) (infinity norms) above which a
#: fallback solution is not trusted: a backward-stable solve of a nonsingular D stays near eps
BACKWARD_TOL = 1e-10

#: row-wise backward error (Factorization.row_backward_error) above which a static-pivot solution
#: is re-solved with partial pivoting (checks_accuracy). Solutions by stable pivots stay near
#: eps (1e-17 .. 1e-15 on the embedded humanoid under every ordering); sparsity-chosen orders on
#: a chain with masses 1, 1e-6, 1, 1e6 reach 1e-11 .. 1e-8, with qdd off by up to 1e-3
ROW_BACKWARD_TOL = 1e-12

#: per-state status of Factorization.solve_status
OK, SINGULAR, OVERFLOW = 0, 1, 2


class _NoSafeMatching(Exception):
    """The always-nonzero entries have no perfect matching, so no fill-reducing ordering of the
    matched matrix is pivot-safe. D may still be nonsingular: a massless link between two massive
    ones leaves its acceleration block without an always-nonzero pivot, yet Nori's (trusted) ABA
    order pivots on the articulated inertias that fill creates. The candidates that need the
    matching are skipped; structural orders are still tried."""

    def __init__(self, cause):
        super().__init__(f"skipped: no pivot-safe matching ({cause})")
        self.cause = cause


def _no_plan_error(pattern, no_match, table):
    """The error when no candidate gave a plan: IllPosedError naming the rows and columns left
    unmatched when D is structurally singular (singular for every value of its entries), else
    the safe-matching failure, else a ValueError listing why each candidate failed."""
    err = unmatched_error(pattern, "(singular for every value of its entries)")
    if err is not None:
        return err
    if no_match is not None:
        return no_match.cause
    return ValueError("no ordering gave a pivot-safe plan: " + "; ".join(
        f"{r['name']}: {r['note']}" for r in table))


def _check_pattern(pattern):
    if not sp.issparse(pattern):
        raise ValueError(f"pattern: expected a scipy.sparse matrix, got {type(pattern).__name__}")
    pattern = sp.csc_matrix(pattern, dtype=float)
    n_rows, n_cols = pattern.shape
    if n_rows != n_cols:
        raise ValueError(f"pattern: LU needs a square matrix, got {n_rows}x{n_cols} (solve tall "
                         f"systems through their normal equations, sparsedyn.kernels.SparseCholesky)")
    if not pattern.has_canonical_format:
        raise ValueError("pattern: indices must be sorted without duplicates (canonical CSC)")
    return pattern


def _check_mask(mask, nnz, name, dtype):
    arr = np.asarray(mask, dtype=dtype)
    if arr.shape != (nnz,):
        raise ValueError(f"{name}: expected shape ({nnz},) (one per stored entry), got {arr.shape}")
    return arr


def _structural_order(pattern, always_nonzero, name, order):
    """(row_perm, col_perm, n_unsafe, trusted) of structural_orders[name]; n_unsafe counts the
    pivots that are not always-nonzero entries of D (structural zeros filled in by the
    elimination, or entries that vanish for some states)."""
    n = pattern.shape[0]
    label = f"structural_orders[{name!r}]"
    items = tuple(order) if isinstance(order, (tuple, list)) else ()
    if len(items) not in (2, 3) or (len(items) == 3 and not (isinstance(items[2], str)
                                                             and items[2] == TRUSTED)):
        raise ValueError(f"{label}: expected (row_perm, col_perm) or "
                         f"(row_perm, col_perm, {TRUSTED!r})")
    try:
        row_perm, col_perm = (np.asarray(p, dtype=np.int64) for p in items[:2])
    except (TypeError, ValueError):
        raise ValueError(f"{label}: row_perm and col_perm must be integer arrays") from None
    for which, perm in (("row_perm", row_perm), ("col_perm", col_perm)):
        if perm.shape != (n,) or not np.array_equal(np.sort(perm), np.arange(n)):
            raise ValueError(f"{label}: {which} is not a permutation of 0..{n - 1}")
    entry_id = pattern.copy()
    entry_id.data = np.arange(1, pattern.nnz + 1, dtype=float)
    diag = (np.asarray(entry_id.tocsr()[row_perm, col_perm]).ravel().astype(np.int64) - 1 if n
            else np.zeros(0, dtype=np.int64))
    stored = diag >= 0
    n_unsafe = int((~stored).sum() + (~always_nonzero[diag[stored]]).sum())
    return row_perm, col_perm, n_unsafe, len(items) == 3


def _transpose_map(pattern):
    """Index of the transpose of each stored entry; ValueError unless the pattern is
    structurally symmetric."""
    ids = pattern.copy()
    ids.data = np.arange(1, pattern.nnz + 1, dtype=float)
    t = sp.csc_matrix(ids.T)
    t.sort_indices()
    if not (np.array_equal(t.indptr, pattern.indptr) and np.array_equal(t.indices, pattern.indices)):
        raise ValueError("pattern: symmetric=True needs a structurally symmetric pattern")
    return t.data.astype(np.int64) - 1


def _check_symmetric_plan(pattern, always_nonzero, constant_values):
    """The conditions of an L D L^T plan (symmetric=True): symmetric pattern and constants, and
    an always-nonzero diagonal (its pivots)."""
    mirror = _transpose_map(pattern)
    rows = pattern.indices
    cols = np.repeat(np.arange(pattern.shape[0]), np.diff(pattern.indptr))
    diag = rows == cols
    missing = np.setdiff1d(np.arange(pattern.shape[0]), rows[diag & always_nonzero])
    if missing.size:
        raise ValueError(f"always_nonzero: symmetric=True pivots on the diagonal, but diagonal "
                         f"entries {missing[:20].tolist()} are not stored always-nonzero entries")
    if constant_values is not None:
        c, ct = constant_values, constant_values[mirror]
        if not ((c == ct) | (np.isnan(c) & np.isnan(ct))).all():
            raise ValueError("constant_values: symmetric=True needs symmetric constants")


def plan_factorization(pattern, always_nonzero, constant_values=None, ordering="auto",
                       structural_orders=None, backend="auto", progress=None, symmetric=False):
    """Choose permutations for the static-pivot LU of `pattern` and compile its online program.

    symmetric: plan an L D L^T instead (planner/symbolic_ldlt.py: about half the LU's
    factorization work) for a structurally symmetric pattern whose values are symmetric in
    every state, e.g. an SPD normal matrix: one permutation on both sides, diagonal pivots (which
    must be always-nonzero entries); solve() then checks that the values are symmetric.

    ordering: "auto" (fewest online flops among the usable candidates: the kernel's, plus the
    backward-error check's where the order's pivots need one (checks_accuracy); at equal cost an order
    whose pivots are all always-nonzero entries wins), "all" (the same choice, with every
    candidate's program built: the table's exact counts of every ordering), a name in
    KNOWN_ORDERINGS, or a key of structural_orders. "auto" first bounds each candidate's flops
    structurally (estimate_numba.py, without emitting a program) and builds only those within
    BUDGET times the lowest bound; the table keeps a row per candidate, a skipped one with
    flops -1, pivot_safe False and a note "skipped: over budget ...". The program of the
    cheapest candidate so far is the only one kept in memory.
    structural_orders: {name: (row_perm, col_perm)}, an order whose pivots must be always-nonzero
    entries of the pattern, or {name: (row_perm, col_perm, TRUSTED)}, an order whose provider
    vouches that its pivots, including those only fill creates (structural zeros of D), are
    nonzero for every state where D is nonsingular (e.g. Nori's ABA order, Appendix B: the
    articulated joint inertias S^T I^A S, positive when the mass matrix is positive definite).
    Every state-dependent pivot gets the cancellation-aware check either way, so a state
    breaking that promise takes the splu fallback or raises SingularModelError.
    progress: optional callable(name, index, total), called before each ordering is tried.
    When the always-nonzero entries have no perfect matching (e.g. a massless link between two
    massive ones), the fill-reducing candidates, which need one, are skipped (their table note
    says why) and "auto" picks among the structural orders. No usable candidate: IllPosedError
    naming the unmatched rows and columns if the pattern is structurally singular.
    """
    pattern = _check_pattern(pattern)
    nnz = pattern.nnz
    always_nonzero = _check_mask(always_nonzero, nnz, "always_nonzero", bool)
    if constant_values is not None:
        constant_values = _check_mask(constant_values, nnz, "constant_values", float)
        if np.isinf(constant_values).any():
            raise ValueError("constant_values: must be finite or NaN (state-dependent)")
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    if symmetric:
        _check_symmetric_plan(pattern, always_nonzero, constant_values)
    structural_orders = dict(structural_orders or {})
    for name in structural_orders:
        if name in KNOWN_ORDERINGS or name in ("auto", "all"):
            raise ValueError(f"structural_orders: name {name!r} clashes with a built-in ordering")
    if ordering in ("auto", "all"):
        names = list(KNOWN_ORDERINGS) + list(structural_orders)
    elif ordering in KNOWN_ORDERINGS or ordering in structural_orders:
        names = [ordering]
    else:
        raise ValueError(f"ordering: unknown name {ordering!r}; known: "
                         f"{', '.join(('auto', 'all') + KNOWN_ORDERINGS + tuple(structural_orders))}")

    # 1. every candidate's permutations and, under "auto", its structural flop bound (cheap)
    match = no_match = None
    table, perms, bound = [], {}, {}
    for index, name in enumerate(names):
        if progress is not None:
            progress(name, index, len(names))
        t0 = time.perf_counter()
        row = {"name": name, "nnz_LU": -1, "fill": -1, "flops": -1, "check_flops": -1,
               "pivot_safe": False, "note": ""}
        try:
            if name not in structural_orders and no_match is not None:
                raise no_match
            if name in structural_orders:
                row_perm, col_perm, n_unsafe, trusted = _structural_order(
                    pattern, always_nonzero, name, structural_orders[name])
                if symmetric and not np.array_equal(row_perm, col_perm):
                    raise UnsafePivot("symmetric=True needs the same permutation of rows and "
                                      "columns")
                if n_unsafe and not trusted:
                    raise UnsafePivot(f"a pivot is not an always-nonzero entry ({n_unsafe} such "
                                      f"pivots; an order may declare them {TRUSTED!r})")
                if n_unsafe:
                    row["note"] = (f"{TRUSTED}: {n_unsafe} pivots are not always-nonzero "
                                   f"entries (checked online)")
            else:
                if match is None:   # the diagonal itself when symmetric (checked above)
                    try:
                        match = (np.arange(pattern.shape[0], dtype=np.int64) if symmetric
                                 else safe_matching(pattern, always_nonzero))
                    except IllPosedError as exc:
                        no_match = _NoSafeMatching(exc)
                        raise no_match from exc
                matched = pattern[match, :]
                row_perm, col_perm = matched_pair(match, column_order(name, matched))
        except (OrderingUnavailable, UnsafePivot, _NoSafeMatching) as exc:
            _refuse(row, exc, ordering, structural_orders)
        else:
            perms[name] = (row_perm, col_perm)
            if ordering == "auto":
                best = min((b for b in bound.values() if b > 0), default=None)
                # the elimination visits one step per multiply-add of the LU: an LU bound has
                # two flops per step, an L D L^T's at least one
                cap = np.inf if best is None else BUDGET * best / (1 if symmetric else 2)
                bound[name], _ = estimate(pattern, row_perm, col_perm, cap, symmetric)
        row["time_s"] = time.perf_counter() - t0
        table.append(row)

    # 2. the full program of each candidate that can still win, by increasing bound (a cheap
    # plan built early rules the others out); only the cheapest program is kept
    best_bound = min((b for b in bound.values() if b > 0), default=None)
    best_key = best_row = sym = None
    by_bound = sorted((index for index, row in enumerate(table) if row["name"] in perms),
                      key=lambda index: max(bound.get(table[index]["name"], 0), 0))
    for index in by_bound:
        row = table[index]
        name = row["name"]
        t0 = time.perf_counter()
        b = bound.get(name, 0)
        if b == OVER_BUDGET or (b > 0 and b > BUDGET * best_bound):
            b_text = "elimination stopped" if b == OVER_BUDGET else f"{b} flops"
            row["note"] = (f"skipped: over budget (structural bound {b_text} > {BUDGET} x "
                           f"the lowest bound {best_bound}; ordering='all' builds it)")
        elif best_key is not None and FOLDING_FLOOR * b > best_key[0]:
            row["note"] = (f"skipped: cannot win (structural bound {b} flops, at least "
                           f"{FOLDING_FLOOR:g} x that once folded > {best_key[0]} online flops "
                           f"of {best_row['name']}; ordering='all' builds it)")
        else:
            b = None
        if b is not None:
            row["time_s"] += time.perf_counter() - t0
            continue
        row_perm, col_perm = perms.pop(name)
        try:
            candidate = (symbolic_ldlt(pattern, col_perm, constant_values) if symmetric
                         else symbolic_lu(pattern, row_perm, col_perm, constant_values))
        except UnsafePivot as exc:
            _refuse(row, exc, ordering, structural_orders)
        else:
            checked = checks_accuracy(pattern, candidate.program, row["note"].startswith(TRUSTED))
            row.update(nnz_LU=candidate.nnz_LU, fill=candidate.nnz_LU - nnz,
                       flops=candidate.program.costs()["flops"], pivot_safe=True,
                       check_flops=2 * nnz if checked else 0)
            # the online cost: the program, plus the row-wise backward error D x - b (a
            # multiply-add per entry of D) that orderings without stable pivots pay on every
            # state; the first of equal keys in the table wins
            key = (row["flops"] + row["check_flops"], row["nnz_LU"],
                   row["note"].startswith(TRUSTED), index)
            if best_key is None or key < best_key:
                best_key, best_row, sym = key, row, candidate
            del candidate
        row["time_s"] += time.perf_counter() - t0
    if best_row is None:
        raise _no_plan_error(pattern, no_match, table)
    return Factorization(pattern, always_nonzero, constant_values, sym.program,
                         ordering=best_row["name"], nnz_LU=sym.nnz_LU, table=table,
                         backend=backend)


def _refuse(row, exc, ordering, structural_orders):
    """Record why a candidate cannot be used in its table row; a named ordering raises instead."""
    row["note"] = str(exc)
    if ordering not in ("auto", "all"):
        if isinstance(exc, _NoSafeMatching) and not structural_orders:
            raise exc.cause       # the planner cannot do anything else: say why
        raise ValueError(f"ordering {ordering!r} cannot be used: {exc}") from exc


def checks_accuracy(pattern, program, trusted):
    """Whether the online path must check each state's row-wise backward error for this program
    of `pattern` (see Factorization.checks_accuracy); trusted: planned in a trusted structural
    order."""
    PDQ = pattern[program.row_perm][:, program.col_perm]
    triangular = sp.triu(PDQ, 1).nnz == 0 or sp.tril(PDQ, -1).nnz == 0
    constant_pivots = not (program.op_code == RECIP).any()
    return not (program.symmetric or constant_pivots or triangular or trusted)


def _lu_kernel_ready():
    """auto's check (sparsedyn/jit.py): the numba LU kernel runs without a JIT compile; else False,
    its compile started in the background (the NumPy backend gives the same numbers bit for bit)."""
    from .. import jit
    from ..kernels.lu_numba import _batch_inner
    return jit.ready("the assembly and LU kernels", (_batch_inner,))


class Factorization:
    """A compiled static-pivot LU plan: `solve(values, rhs)` for batches of states."""

    def __init__(self, pattern, always_nonzero, constant_values, program, ordering, nnz_LU,
                 table=(), backend="auto"):
        self.pattern = pattern
        self.always_nonzero = always_nonzero
        self.constant_values = (np.full(pattern.nnz, np.nan) if constant_values is None
                                else constant_values)
        self.program = program
        self.table = list(table)
        self.backend = backend
        self._groups = None               # the NumPy path's schedule, built on first use
        self._prepared = None             # the compiled path's (lu_numba.prepare), likewise
        self._mirror = None
        self._checks_accuracy = None      # checks_accuracy, decided on first use
        self._rows_csr = None             # row_backward_error's row grouping, likewise
        self._entries = None              # entries, likewise
        self.stats = {"n": program.n, "nnz_D": pattern.nnz, "nnz_LU": int(nnz_LU),
                      "fill": int(nnz_LU) - pattern.nnz, **program.costs(),
                      "n_ops": int(program.op_code.size), "ordering": ordering,
                      "backend": self._resolved_backend(backend),
                      "symmetric": bool(program.symmetric)}

    @staticmethod
    def _resolved_backend(backend):
        return "numba" if backend == "auto" else backend

    @property
    def row_perm(self):
        return self.program.row_perm

    @property
    def col_perm(self):
        return self.program.col_perm

    def __repr__(self):
        s = self.stats
        return (f"Factorization(n={s['n']}, nnz_D={s['nnz_D']}, nnz_LU={s['nnz_LU']}, "
                f"flops={s['flops']}, ordering={s['ordering']!r}, backend={s['backend']!r})")

    def verify_pattern(self, pattern):
        """Raise PlanMismatchError unless `pattern` is the one this plan was compiled for."""
        from ..errors import PlanMismatchError
        p = sp.csc_matrix(pattern)
        if (p.shape != self.pattern.shape or p.nnz != self.pattern.nnz
                or not np.array_equal(p.indptr, self.pattern.indptr)
                or not np.array_equal(p.indices, self.pattern.indices)):
            raise PlanMismatchError(f"pattern: {p.shape} with {p.nnz} entries does not match the "
                                    f"plan's {self.pattern.shape} with {self.pattern.nnz} entries")

    # ------------------------------------------------------------------ online
    def solve(self, values, rhs, return_status=False, backend=None):
        """x with D(values) x = rhs: values (B, nnz) or (nnz,); rhs (B, n) or (n,), or (B, n, k)
        for k right-hand sides per state that share one numeric factorization (B may be 1 on
        either side and broadcasts). x has rhs's shape (batched when either input is).

        States whose static pivot breaks down, or whose solution fails the accuracy check
        (checks_accuracy: row-wise backward error above ROW_BACKWARD_TOL), are re-solved with
        partial pivoting (splu and one step of iterative refinement), with a
        PivotBreakdownWarning. States that splu finds numerically singular raise
        SingularModelError, states whose solution overflows NonFiniteError, both naming the
        batch indices; with return_status=True they are flagged False in the status mask (x NaN).

        Counted cost per state: stats["flops"] for the first right-hand side, plus
        stats["solve_flops"] for each further one (the accuracy check is a safeguard, like the
        pivot checks, and not counted)."""
        x, status = self.solve_status(values, rhs, backend)
        if return_status:
            return x, status == OK
        _raise_for_status(status, "values, rhs")
        return x

    def solve_status(self, values, rhs, backend=None):
        """(x, status) as solve: status (B,) int8 per state, OK, SINGULAR or OVERFLOW (x NaN
        where not OK); raises nothing for the states' numerics."""
        backend = backend or self.backend
        if backend == "auto":
            backend = "numba" if _lu_kernel_ready() else "numpy"
        if backend not in ("numba", "numpy"):
            raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
        n, nnz = self.program.n, self.program.nnz
        v_arr, rhs_arr = np.asarray(values), np.asarray(rhs)
        if rhs_arr.ndim == 3:
            return self._solve_many(values, rhs_arr, backend)
        B = max(v_arr.shape[0] if v_arr.ndim == 2 else 1, rhs_arr.shape[0] if rhs_arr.ndim == 2 else 1)
        values, v_single = as_batch(values, nnz, "values", batch=B)
        rhs, r_single = as_batch(rhs, n, "rhs", batch=B)
        x, status = self._run(values, rhs, backend)
        return (x[0], status) if v_single and r_single else (x, status)

    def _solve_many(self, values, rhs, backend):
        n, nnz = self.program.n, self.program.nnz
        if rhs.shape[1] != n or rhs.shape[2] < 1:
            raise ValueError(f"rhs: expected shape (B, {n}, k) with k >= 1, got {rhs.shape}")
        v_arr = np.asarray(values)
        B = max(v_arr.shape[0] if v_arr.ndim == 2 else 1, rhs.shape[0])
        values, _ = as_batch(values, nnz, "values", batch=B)
        if rhs.shape[0] not in (1, B):
            raise ValueError(f"rhs: batch size {rhs.shape[0]} does not match {B}")
        k = rhs.shape[2]
        flat, _ = as_batch(rhs.reshape(rhs.shape[0], n * k), n * k, "rhs", batch=B)
        rhs = flat.reshape(B, n, k)
        if not self.program.split:
            # a program stored before the split: one full run per right-hand side
            cols = [self._run(values, rhs[:, :, j], backend) for j in range(k)]
            x = np.stack([c[0] for c in cols], axis=2)
            status = np.max([c[1] for c in cols], axis=0)
            x[status != OK] = np.nan
            return x, status
        return self._run(values, rhs, backend)

    def _run(self, values, rhs, backend):
        """(x, status) for batched values (B, nnz) and rhs (B, n) or (B, n, k)."""
        B = values.shape[0]
        if self.program.symmetric:
            self._check_symmetric_values(values)
        if backend == "numba":
            from ..kernels.lu_numba import prepare, solve_numba
            if self._prepared is None:
                self._prepared = prepare(self.program)
            x, broken = solve_numba(self.program, values, rhs, prepared=self._prepared)
        else:
            from ..kernels.lu_numpy import schedule, solve_numpy
            if self._groups is None:
                self._groups = schedule(self.program)
            x, broken = solve_numpy(self.program, self._groups, values, rhs)
        if opcount.counting():
            s, extra = self.stats, (rhs.shape[2] - 1 if rhs.ndim == 3 else 0)
            opcount.charge(mul=(s["mul"] + extra * s["solve_mul"]) * B,
                           add=(s["add"] + extra * s["solve_add"]) * B,
                           div=(s["div"] + extra * s["solve_div"]) * B, kind="sparse LU")
        inaccurate = np.zeros(B, dtype=bool)
        if self.checks_accuracy:
            inaccurate = ~broken & ~(self.row_backward_error(values, rhs, x) <= ROW_BACKWARD_TOL)
        status = np.zeros(B, dtype=np.int8)
        redo = np.flatnonzero(broken | inaccurate)
        if redo.size:
            status[redo] = self.pivoted_solve(values[redo], rhs[redo], x, redo)
            warn_resolved(redo[broken[redo] & (status[redo] == OK)],
                          redo[~broken[redo] & (status[redo] == OK)], stacklevel=4)
        return x, status

    @property
    def checks_accuracy(self):
        """Whether solve (and the compiled dynamics path) checks each state's row-wise backward
        error (row_backward_error): static pivots chosen for sparsity can lose accuracy on badly
        scaled D (masses 1e-6 next to 1e6) without ever being small enough for the pivot check.
        Not checked: an L D L^T (its diagonal pivots, for the SPD matrices it is planned for);
        a program without state-dependent pivots (all known constants, so no state makes one
        small: inverse dynamics under every ordering) or that eliminates nothing (P D Q
        triangular: substitution is componentwise backward stable); a trusted structural order
        (its provider vouches for its pivots: Nori's ABA order pivots on the ABA's articulated
        inertias and computes what the ABA computes)."""
        if self._checks_accuracy is None:
            trusted = any(r["name"] == self.stats["ordering"]
                          and str(r["note"]).startswith(TRUSTED) for r in self.table)
            self._checks_accuracy = checks_accuracy(self.pattern, self.program, trusted)
        return self._checks_accuracy

    @property
    def entries(self):
        """(rows, cols) (nnz,) int64: row and column of each stored entry of D (CSC order)."""
        if self._entries is None:
            P = self.pattern
            self._entries = (P.indices.astype(np.int64),
                             np.repeat(np.arange(P.shape[1], dtype=np.int64), np.diff(P.indptr)))
        return self._entries

    def verify_program(self, values, rhs):
        """ValueError unless the stored program, run as it is (no fallback), solves D x = rhs for
        these states (values (B, nnz), rhs (B, n)) to round-off: a program that passes every
        structural check can still have been edited within range (an operand, a constant)."""
        from ..kernels.lu_numpy import schedule, solve_numpy
        if self.program.n == 0:          # no unknowns (a robot with only fixed joints)
            return
        with np.errstate(all="ignore"):
            x, broken = solve_numpy(self.program, schedule(self.program), values, rhs)
            err = self.row_backward_error(values, rhs, x)
        if broken.any() or not (err <= 1e3 * ROW_BACKWARD_TOL).all():
            raise ValueError(f"the stored LU program does not solve its system (row-wise "
                             f"backward error {np.nanmax(err):.3g} on a test state)")

    def row_backward_error(self, values, rhs, x):
        """(B,) per state max_i |D x - rhs|_i / (max_j |D_ij| max|x| + |rhs_i|): the backward
        error of x with each row of D weighed by its own entries (a normwise backward error
        hides the light bodies' rows behind the heaviest's). Several right-hand sides: the
        worst. Non-finite x gives NaN."""
        if self._rows_csr is None:
            P = self.pattern
            order = np.argsort(P.indices, kind="stable")
            rows = P.indices[order]
            starts = np.flatnonzero(np.diff(rows, prepend=-1))
            cols = self.entries[1][order]
            self._rows_csr = (order, starts, cols, rows[starts])
        order, starts, cols, row_of = self._rows_csr
        const = self.constant_values[order]
        known = ~np.isnan(const)
        B, n = values.shape[0], self.program.n
        k = x.shape[2] if x.ndim == 3 else 1        # explicit: -1 is ambiguous when B = 0
        x3 = x.reshape(B, n, k)
        r3 = rhs.reshape(B, n, k)
        out = np.empty(B)
        chunk = max(1, 2 ** 22 // max(1, order.size * x3.shape[2]))
        with np.errstate(invalid="ignore", over="ignore"):
            for lo in range(0, B, chunk):
                hi = min(B, lo + chunk)
                data = np.where(known, const, values[lo:hi, order])
                res = -r3[lo:hi].copy()
                products = data[:, :, None] * x3[lo:hi, cols]
                res[:, row_of] += np.add.reduceat(products, starts, axis=1)
                scale = np.zeros((hi - lo, n))
                scale[:, row_of] = np.maximum.reduceat(np.abs(data), starts, axis=1)
                xmax = np.abs(x3[lo:hi]).max(axis=1)
                denom = scale[:, :, None] * xmax[:, None, :] + np.abs(r3[lo:hi])
                ratio = np.abs(res) / np.where(denom > 0, denom, 1.0)
                out[lo:hi] = ratio.reshape(hi - lo, -1).max(axis=1)
        return out

    def _check_symmetric_values(self, values):
        """An L D L^T program reads only the lower triangle: values that are not symmetric
        (beyond round-off) would silently solve another matrix."""
        if self._mirror is None:
            self._mirror = _transpose_map(self.pattern)
        dyn = np.flatnonzero(np.isnan(self.constant_values))
        if dyn.size == 0:
            return
        v = values[:, dyn]
        gap = np.abs(v - values[:, self._mirror[dyn]]).max(axis=1)
        bad = np.flatnonzero(gap > SYMMETRY_TOL * np.abs(v).max(axis=1))
        if bad.size:
            raise ValueError(f"values: this L D L^T plan needs symmetric values; not symmetric "
                             f"for batch indices {_short(bad.tolist())}")

    def assemble(self, values):
        """D for one state as CSC (known constants taken from constant_values)."""
        data = np.where(np.isnan(self.constant_values), values, self.constant_values)
        return sp.csc_matrix((data, self.pattern.indices, self.pattern.indptr),
                             shape=self.pattern.shape)

    def pivoted_solve(self, values, rhs, x=None, into=None):
        """Status (k,) of solving the k states values (k, nnz), rhs (k, n) or (k, n, m) with
        partial pivoting (splu) and one step of iterative refinement; each solution is written
        to x[into[j]] (NaN unless OK). SINGULAR: splu's pivots are numerically rank deficient
        or the backward error stays large; OVERFLOW: a pivot or the solution is not finite, or
        the state fails as SINGULAR with entries beyond sqrt(float max) (their products
        overflow: the inputs are out of range rather than D singular)."""
        from scipy.sparse.linalg import splu
        n = self.program.n
        status = np.zeros(values.shape[0], dtype=np.int8)
        huge = np.sqrt(np.finfo(float).max)
        for j in range(values.shape[0]):
            D = self.assemble(values[j])
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                try:
                    lu = splu(D)
                    diag = np.abs(lu.U.diagonal())
                except RuntimeError:                     # "Factor is exactly singular"
                    lu, diag = None, np.zeros(1)
                if not np.isfinite(diag).all():
                    status[j] = OVERFLOW
                elif not diag.min() > max(n, 10) * np.finfo(float).eps * diag.max():
                    status[j] = SINGULAR
                else:
                    xj = lu.solve(rhs[j])
                    xj = xj + lu.solve(rhs[j] - D @ xj)          # refinement
                    if not np.isfinite(xj).all():
                        status[j] = OVERFLOW
                    elif _backward_error(D, xj, rhs[j]) > BACKWARD_TOL:
                        status[j] = SINGULAR
            if status[j] == SINGULAR and not (abs(D).max() < huge and np.abs(rhs[j]).max() < huge):
                status[j] = OVERFLOW
            if x is not None:
                x[into[j]] = xj if status[j] == OK else np.nan
        return status

    # ------------------------------------------------------------------ storage
    def to_dict(self):
        """Plain numpy arrays and scalars (np.savez-able), with format name, version and checksum."""
        d = {"format": FORMAT, "version": FORMAT_VERSION,
             "shape": np.asarray(self.pattern.shape, dtype=np.int64),
             "pattern_indptr": self.pattern.indptr.astype(np.int64),
             "pattern_indices": self.pattern.indices.astype(np.int64),
             "always_nonzero": self.always_nonzero.astype(bool),
             "constant_values": self.constant_values.astype(float),
             "nnz_LU": self.stats["nnz_LU"], "ordering": self.stats["ordering"],
             "backend": self.backend}
        for key, val in self.program.arrays().items():
            d["program_" + key] = val
        for col in _TABLE_COLUMNS:
            d["table_" + col] = np.asarray([r[col] for r in self.table])
        d["checksum"] = _checksum(d)
        return d

    @classmethod
    def from_dict(cls, d):
        """Rebuild a plan from to_dict() output; ValueError on foreign, corrupt or inconsistent input."""
        d = check_format(d, FORMAT, FORMAT_VERSION)
        required = (["shape", "pattern_indptr", "pattern_indices", "always_nonzero",
                     "constant_values", "nnz_LU", "ordering", "backend", "checksum"]
                    + ["program_" + k for k in LUProgram.__dataclass_fields__
                       if k not in ("n_factor_ops", "symmetric", "op_stage")]
                    + ["table_" + c for c in _TABLE_COLUMNS])
        missing = [k for k in required if k not in d]
        if missing:
            raise ValueError(f"d: missing keys {missing}")
        if str(np.asarray(d["checksum"])) != _checksum(d):
            raise ValueError("d: checksum mismatch (corrupt or modified plan)")
        shape = tuple(stored_array(d, "shape", "int").tolist())
        if len(shape) != 2 or min(shape) < 0:
            raise ValueError(f"d['shape']: expected two sizes, got {shape}")
        indices = stored_array(d, "pattern_indices", "int")
        indptr = stored_array(d, "pattern_indptr", "int")
        try:
            pattern = sp.csc_matrix((np.ones(indices.size), indices, indptr), shape=shape)
            pattern.check_format(full_check=True)
        except (ValueError, TypeError, IndexError) as exc:
            raise ValueError(f"d: invalid pattern ({exc})") from None
        pattern = _check_pattern(pattern)
        nnz = pattern.nnz
        always_nonzero = _check_mask(stored_array(d, "always_nonzero", "bool"), nnz,
                                     "d['always_nonzero']", bool)
        constant_values = _check_mask(stored_array(d, "constant_values", "float"), nnz,
                                      "d['constant_values']", float)
        program = _program_from_dict(d, shape[0], nnz)
        if program.symmetric:
            if not np.array_equal(program.row_perm, program.col_perm):
                raise ValueError("d: invalid program: an L D L^T permutes rows and columns alike")
            _check_symmetric_plan(pattern, always_nonzero, constant_values)
        columns = [[] if np.size(d["table_" + c]) == 0 else   # to_dict of an empty table
                   stored_array(d, "table_" + c, "str" if c in ("name", "note") else
                                "bool" if c == "pivot_safe" else "float").tolist()
                   for c in _TABLE_COLUMNS]
        if len({len(c) for c in columns}) > 1:
            raise ValueError("d: the table's columns differ in length")
        table = [dict(zip(_TABLE_COLUMNS, vals)) for vals in zip(*columns)]
        for row in table:
            row.update({k: int(row[k]) for k in ("nnz_LU", "fill", "flops")})
        backend = stored_scalar(d, "backend", "str")
        if backend not in BACKENDS:
            raise ValueError(f"d: unknown backend {backend!r}")
        nnz_LU = stored_scalar(d, "nnz_LU", "int")
        return cls(pattern, always_nonzero, constant_values, program,
                   ordering=stored_scalar(d, "ordering", "str"), nnz_LU=nnz_LU,
                   table=table, backend=backend)


def _program_from_dict(d, n, nnz):
    """The stored LUProgram, every array checked for what the kernels index with (dtype, ranges,
    lengths, permutations): ValueError naming what is wrong, never an out-of-bounds access."""
    fields = LUProgram.__dataclass_fields__
    key = {k: "program_" + k for k in fields}
    legacy = key["n_factor_ops"] not in d   # stored before the factorization/substitution split
    kw = {k: stored_scalar(d, key[k], "int") for k in ("n", "nnz", "n_slots", "rhs0")}
    kw["n_factor_ops"] = -1 if legacy else stored_scalar(d, key["n_factor_ops"], "int")
    kw["tol"] = stored_scalar(d, key["tol"], "float")
    kw["symmetric"] = (key["symmetric"] in d            # LU before L D L^T existed
                       and stored_scalar(d, key["symmetric"], "bool"))
    for k in ("row_perm", "col_perm", "op_code", "op_t", "op_a", "op_b", "init_slots",
              "load_entries", "scale_ptr", "scale_entries"):
        kw[k] = stored_array(d, key[k], "int")
    kw["op_stage"] = (stored_array(d, key["op_stage"], "int") if key["op_stage"] in d
                      else np.zeros(0, dtype=np.int64))                      # older plans
    kw["init_values"] = stored_array(d, key["init_values"], "float")
    kw["scale_const"] = stored_array(d, key["scale_const"], "float")
    slots, m = kw["n_slots"], kw["op_code"].size
    code, t, a, b = kw["op_code"], kw["op_t"], kw["op_a"], kw["op_b"]

    def outside(arr, lo, hi):
        return arr.size > 0 and (arr.min() < lo or arr.max() >= hi)
    problems = []
    if (kw["n"], kw["nnz"], kw["rhs0"]) != (n, nnz, nnz):
        problems.append("program size does not match the pattern")
    if slots < nnz + n:
        problems.append("n_slots leaves no room for the entries and the right-hand side")
    if not (np.isfinite(kw["tol"]) and kw["tol"] >= 0):
        problems.append("tol is not a finite non-negative number")
    if not -1 <= kw["n_factor_ops"] <= m:
        problems.append("n_factor_ops out of range")
    for label in ("row_perm", "col_perm"):
        perm = kw[label]
        if perm.shape != (n,) or not np.array_equal(np.sort(perm), np.arange(n)):
            problems.append(f"{label} is not a permutation")
    if not (t.size == a.size == b.size == m):
        problems.append("op arrays differ in length")
    elif outside(code, 0, len(OP_COST)):
        problems.append("unknown opcode")
    else:
        for label, arr in (("op_t", t), ("op_a", a), ("op_b", b)):
            if outside(arr, 0, slots):
                problems.append(f"{label} out of range")
        if outside(b[code == RECIP], 0, n):          # a pivot check's b is its permuted row
            problems.append("op_b of a pivot check is not a row")
    if kw["op_stage"].size not in (0, m):
        problems.append("op_stage does not match the ops")
    if outside(kw["init_slots"], 0, slots):
        problems.append("init_slots out of range")
    if kw["init_values"].shape != kw["init_slots"].shape:
        problems.append("init_values/init_slots differ in length")
    elif not np.isfinite(kw["init_values"]).all():
        problems.append("init_values not finite")
    if outside(kw["load_entries"], 0, nnz):
        problems.append("load_entries out of range")
    ptr, const = kw["scale_ptr"], kw["scale_const"]
    if (ptr.shape != (n + 1,) or const.shape != (n,) or ptr[0] != 0
            or ptr[-1] != kw["scale_entries"].size or (np.diff(ptr) < 0).any()):
        problems.append("scale arrays inconsistent")
    elif outside(kw["scale_entries"], 0, nnz) or not (np.isfinite(const) & (const >= 0)).all():
        problems.append("scale entries out of range")
    if problems:
        raise ValueError("d: invalid program: " + "; ".join(problems))
    kw["op_code"] = code.astype(np.int8)
    if legacy:
        # RECIP now reads its target slot (the pivot's accumulated magnitude) before overwriting
        # it: such a program accumulates none, so its reciprocal slots start at 0
        recip_t = np.setdiff1d(t[code == RECIP], kw["init_slots"])
        kw["init_slots"] = np.concatenate((kw["init_slots"], recip_t))
        kw["init_values"] = np.concatenate((kw["init_values"], np.zeros(recip_t.size)))
    return LUProgram(**kw)


def _backward_error(D, x, rhs):
    """Normwise backward error of x for D x = rhs (per column for several right-hand sides)."""
    x2, r2 = x.reshape(x.shape[0], -1), rhs.reshape(rhs.shape[0], -1)
    res = np.abs(D @ x2 - r2).max(axis=0)
    norm_D = abs(D).sum(axis=1).max()
    denom = norm_D * np.abs(x2).max(axis=0) + np.abs(r2).max(axis=0)
    return float(np.max(np.where(denom > 0, res / np.where(denom > 0, denom, 1.0), 0.0)))


def _checksum(d):
    h = hashlib.sha256()
    for key in sorted(k for k in d if k != "checksum"):
        arr = np.asarray(d[key])
        kind = arr.dtype.kind
        h.update(key.encode() + kind.encode())
        if kind in "US":
            h.update("\x00".join(str(v) for v in np.atleast_1d(arr).tolist()).encode())
        else:  # independent of the integer width a round trip through a file may produce
            h.update(np.ascontiguousarray(arr, dtype=np.float64 if kind == "f" else np.int64).tobytes())
    return h.hexdigest()


def _short(indices, limit=20):
    head = ", ".join(str(i) for i in indices[:limit])
    return f"[{head}{', ...' if len(indices) > limit else ''}] ({len(indices)} states)"


def _raise_for_status(status, what):
    """SingularModelError (first) or NonFiniteError for the states of `status` that are not OK;
    `what`: the inputs to name."""
    singular = np.flatnonzero(status == SINGULAR).tolist()
    if singular:
        raise SingularModelError(f"values: D is singular for batch indices {_short(singular)}",
                                 batch_indices=singular)
    overflow = np.flatnonzero(status == OVERFLOW).tolist()
    if overflow:
        raise NonFiniteError(f"{what}: the solution of D x = rhs overflows (not finite) for batch "
                             f"indices {_short(overflow)}", arguments=what.split(", "),
                             batch_indices=overflow)


def warn_resolved(broken, inaccurate, stacklevel=2):
    """The PivotBreakdownWarning of states re-solved with partial pivoting: `broken` (a static
    pivot failed its check) and `inaccurate` (the accuracy check failed) batch indices."""
    for indices, why in ((broken, "static pivot broke down"),
                         (inaccurate, "static pivots lost accuracy (row-wise backward error "
                                      f"above {ROW_BACKWARD_TOL:g})")):
        if len(indices):
            warnings.warn(PivotBreakdownWarning(
                f"values: {why} for batch indices {_short([int(i) for i in indices])}; "
                f"re-solved with partial pivoting (splu)"), stacklevel=stacklevel + 1)
