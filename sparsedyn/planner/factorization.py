"""Offline planning of a static-pivot sparse LU for a fixed worst-case pattern, and the stored plan.

plan_factorization tries the candidate orderings (sparsedyn.planner.orderings, plus any structural
orders the system offers), computes each one's exact symbolic factorization and kernel flop count,
and keeps the cheapest pivot-safe one (a structural order may declare its pivots trusted: see
plan_factorization). With symmetric=True the program is an L D L^T of a structurally symmetric
pattern with diagonal pivots (symbolic_ldlt.py), e.g. for an SPD normal matrix.
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
from ..errors import SingularModelError
from ..kernels.lu_numpy import OP_COST, RECIP
from ..serialization import check_format
from .orderings import (
    KNOWN_ORDERINGS,
    OrderingUnavailable,
    column_order,
    matched_pair,
    safe_matching,
)
from .symbolic import LUProgram, UnsafePivot, symbolic_lu
from .symbolic_ldlt import symbolic_ldlt

FORMAT = "sparsedyn.lu_plan"
FORMAT_VERSION = 1
BACKENDS = ("auto", "numba", "numpy")
_TABLE_COLUMNS = ("name", "nnz_LU", "fill", "flops", "time_s", "pivot_safe", "note")


#: the optional third element of a structural order (row_perm, col_perm, TRUSTED): its pivots need
#: not be always-nonzero entries (plan_factorization)
TRUSTED = "trusted"

#: largest |D_ij - D_ji| / max |D| a symmetric (L D L^T) plan accepts as round-off
SYMMETRY_TOL = 1e-12

#: normwise backward error |D x - rhs| / (|D| |x| + |rhs|) (infinity norms) above which a
#: fallback solution is not trusted: a backward-stable solve of a nonsingular D stays near eps
BACKWARD_TOL = 1e-10


class PivotBreakdownWarning(RuntimeWarning):
    """A static pivot was (numerically) zero for some states; they were re-solved with pivoting."""


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
    diag = np.asarray(entry_id.tocsr()[row_perm, col_perm]).ravel().astype(np.int64) - 1
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

    ordering: "auto" (fewest kernel flops among the usable candidates; at equal cost an order
    whose pivots are all always-nonzero entries wins), a name in KNOWN_ORDERINGS, or a key of
    structural_orders.
    structural_orders: {name: (row_perm, col_perm)}, an order whose pivots must be always-nonzero
    entries of the pattern, or {name: (row_perm, col_perm, TRUSTED)}, an order whose provider
    vouches that its pivots, including those only fill creates (structural zeros of D), are
    nonzero for every state where D is nonsingular (e.g. Nori's ABA order, Appendix B: the
    articulated joint inertias S^T I^A S, positive when the mass matrix is positive definite).
    Every state-dependent pivot gets the cancellation-aware check either way, so a state
    breaking that promise takes the splu fallback or raises SingularModelError.
    progress: optional callable(name, index, total), called before each ordering is tried.
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
        if name in KNOWN_ORDERINGS or name == "auto":
            raise ValueError(f"structural_orders: name {name!r} clashes with a built-in ordering")
    if ordering == "auto":
        names = list(KNOWN_ORDERINGS) + list(structural_orders)
    elif ordering in KNOWN_ORDERINGS or ordering in structural_orders:
        names = [ordering]
    else:
        raise ValueError(f"ordering: unknown name {ordering!r}; known: "
                         f"{', '.join(('auto',) + KNOWN_ORDERINGS + tuple(structural_orders))}")

    match = None
    table, plans = [], {}
    for index, name in enumerate(names):
        if progress is not None:
            progress(name, index, len(names))
        t0 = time.perf_counter()
        row = {"name": name, "nnz_LU": -1, "fill": -1, "flops": -1, "pivot_safe": False, "note": ""}
        try:
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
                    match = (np.arange(pattern.shape[0], dtype=np.int64) if symmetric
                             else safe_matching(pattern, always_nonzero))
                matched = pattern[match, :]
                row_perm, col_perm = matched_pair(match, column_order(name, matched))
            sym = (symbolic_ldlt(pattern, col_perm, constant_values) if symmetric
                   else symbolic_lu(pattern, row_perm, col_perm, constant_values))
        except (OrderingUnavailable, UnsafePivot) as exc:
            row["note"] = str(exc)
            if ordering != "auto":
                raise ValueError(f"ordering {name!r} cannot be used: {exc}") from exc
        else:
            row.update(nnz_LU=sym.nnz_LU, fill=sym.nnz_LU - nnz,
                       flops=sym.program.costs()["flops"], pivot_safe=True)
            plans[name] = sym
        row["time_s"] = time.perf_counter() - t0
        table.append(row)
    best = min((r for r in table if r["pivot_safe"]),
               key=lambda r: (r["flops"], r["nnz_LU"], r["note"].startswith(TRUSTED)))
    sym = plans[best["name"]]
    return Factorization(pattern, always_nonzero, constant_values, sym.program,
                         ordering=best["name"], nnz_LU=sym.nnz_LU, table=table, backend=backend)


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

        Counted cost per state: stats["flops"] for the first right-hand side, plus
        stats["solve_flops"] for each further one."""
        backend = self._resolved_backend(backend or self.backend)
        if backend not in ("numba", "numpy"):
            raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
        n, nnz = self.program.n, self.program.nnz
        v_arr, rhs_arr = np.asarray(values), np.asarray(rhs)
        if rhs_arr.ndim == 3:
            return self._solve_many(values, rhs_arr, return_status, backend)
        B = max(v_arr.shape[0] if v_arr.ndim == 2 else 1, rhs_arr.shape[0] if rhs_arr.ndim == 2 else 1)
        values, v_single = as_batch(values, nnz, "values", batch=B)
        rhs, r_single = as_batch(rhs, n, "rhs", batch=B)
        single = v_single and r_single
        x, ok = self._run(values, rhs, return_status, backend)
        if return_status:
            return (x[0], ok) if single else (x, ok)
        return x[0] if single else x

    def _solve_many(self, values, rhs, return_status, backend):
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
            cols = [self._run(values, rhs[:, :, j], return_status, backend) for j in range(k)]
            x = np.stack([c[0] for c in cols], axis=2)
            ok = np.logical_and.reduce([c[1] for c in cols])
        else:
            x, ok = self._run(values, rhs, return_status, backend)
        return (x, ok) if return_status else x

    def _run(self, values, rhs, return_status, backend):
        """(x, ok) for batched values (B, nnz) and rhs (B, n) or (B, n, k)."""
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
        ok = np.ones(B, dtype=bool)
        if broken.any():
            ok = self._resolve_broken(values, rhs, x, np.flatnonzero(broken), return_status)
        return x, ok

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

    def _resolve_broken(self, values, rhs, x, broken, return_status):
        from scipy.sparse.linalg import splu
        n = self.program.n
        ok = np.ones(values.shape[0], dtype=bool)
        for b in broken:
            try:
                D = self.assemble(values[b])
                lu = splu(D)
                diag = np.abs(lu.U.diagonal())
                if not diag.min() > max(n, 10) * np.finfo(float).eps * diag.max():
                    raise RuntimeError("numerically rank deficient")
                xb = lu.solve(rhs[b])
                if not np.isfinite(xb).all():
                    raise RuntimeError("non-finite solution")
                if _backward_error(D, xb, rhs[b]) > BACKWARD_TOL:
                    raise RuntimeError("large backward error")
                x[b] = xb
            except RuntimeError:
                ok[b] = False
                x[b] = np.nan
        resolved = [int(b) for b in broken if ok[b]]
        singular = [int(b) for b in broken if not ok[b]]
        if resolved:
            warnings.warn(PivotBreakdownWarning(
                f"values: static pivot broke down for batch indices {_short(resolved)}; "
                f"re-solved with partial pivoting (splu)"), stacklevel=3)
        if singular and not return_status:
            raise SingularModelError(f"values: D is singular for batch indices {_short(singular)}",
                                     batch_indices=singular)
        return ok

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
        shape = tuple(int(s) for s in np.asarray(d["shape"]))
        try:
            pattern = sp.csc_matrix((np.ones(len(d["pattern_indices"])),
                                     np.asarray(d["pattern_indices"], dtype=np.int64),
                                     np.asarray(d["pattern_indptr"], dtype=np.int64)), shape=shape)
            pattern.check_format(full_check=True)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"d: invalid pattern ({exc})") from None
        pattern = _check_pattern(pattern)
        nnz = pattern.nnz
        always_nonzero = _check_mask(d["always_nonzero"], nnz, "d['always_nonzero']", bool)
        constant_values = _check_mask(d["constant_values"], nnz, "d['constant_values']", float)
        program = _program_from_dict(d, shape[0], nnz)
        table = [dict(zip(_TABLE_COLUMNS, vals)) for vals in
                 zip(*(np.asarray(d["table_" + c]).tolist() for c in _TABLE_COLUMNS))]
        backend = str(np.asarray(d["backend"]))
        if backend not in BACKENDS:
            raise ValueError(f"d: unknown backend {backend!r}")
        return cls(pattern, always_nonzero, constant_values, program,
                   ordering=str(np.asarray(d["ordering"])), nnz_LU=int(np.asarray(d["nnz_LU"])),
                   table=table, backend=backend)


def _program_from_dict(d, n, nnz):
    kw = {k: d["program_" + k] for k in LUProgram.__dataclass_fields__ if "program_" + k in d}
    legacy = "n_factor_ops" not in kw      # stored before the factorization/substitution split
    kw.setdefault("n_factor_ops", -1)
    ints = ("n", "nnz", "n_slots", "rhs0", "n_factor_ops")
    for k in ints:
        kw[k] = int(np.asarray(kw[k]))
    kw["tol"] = float(np.asarray(kw["tol"]))
    kw["symmetric"] = bool(np.asarray(kw.get("symmetric", False)))   # LU before L D L^T existed
    for k in ("row_perm", "col_perm", "op_t", "op_a", "op_b", "init_slots", "load_entries",
              "scale_ptr", "scale_entries"):
        kw[k] = np.asarray(kw[k], dtype=np.int64)
    kw["op_code"] = np.asarray(kw["op_code"], dtype=np.int8)
    kw["op_stage"] = np.asarray(kw.get("op_stage", np.zeros(0)), dtype=np.int64)  # older plans
    kw["init_values"] = np.asarray(kw["init_values"], dtype=float)
    kw["scale_const"] = np.asarray(kw["scale_const"], dtype=float)
    if legacy:
        # RECIP now reads its target slot (the pivot's accumulated magnitude) before overwriting
        # it: such a program accumulates none, so its reciprocal slots start at 0
        recip_t = np.setdiff1d(kw["op_t"][kw["op_code"] == RECIP], kw["init_slots"])
        kw["init_slots"] = np.concatenate((kw["init_slots"], recip_t))
        kw["init_values"] = np.concatenate((kw["init_values"], np.zeros(recip_t.size)))
    p = LUProgram(**kw)
    slots = p.n_slots
    problems = []
    if not -1 <= p.n_factor_ops <= p.op_code.size:
        problems.append("n_factor_ops out of range")
    if (p.n, p.nnz, p.rhs0) != (n, nnz, nnz):
        problems.append("program size does not match the pattern")
    for label, perm in (("row_perm", p.row_perm), ("col_perm", p.col_perm)):
        if perm.shape != (n,) or not np.array_equal(np.sort(perm), np.arange(n)):
            problems.append(f"{label} is not a permutation")
    m = p.op_code.size
    if not (p.op_t.size == p.op_a.size == p.op_b.size == m):
        problems.append("op arrays differ in length")
    elif m and (p.op_code.min() < 0 or p.op_code.max() >= len(OP_COST)):
        problems.append("unknown opcode")
    for label, arr in (("op_t", p.op_t), ("op_a", p.op_a), ("op_b", p.op_b),
                       ("init_slots", p.init_slots)):
        if arr.size and (arr.min() < 0 or arr.max() >= slots):
            problems.append(f"{label} out of range")
    if p.init_values.shape != p.init_slots.shape:
        problems.append("init_values/init_slots differ in length")
    if p.op_stage.size not in (0, m):
        problems.append("op_stage does not match the ops")
    if p.load_entries.size and (p.load_entries.min() < 0 or p.load_entries.max() >= nnz):
        problems.append("load_entries out of range")
    if (p.scale_ptr.shape != (n + 1,) or p.scale_const.shape != (n,)
            or p.scale_ptr[-1] != p.scale_entries.size or (np.diff(p.scale_ptr) < 0).any()):
        problems.append("scale arrays inconsistent")
    if problems:
        raise ValueError("d: invalid program: " + "; ".join(problems))
    return p


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
