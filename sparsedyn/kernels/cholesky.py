"""Sparse Cholesky of SPD systems (normal equations, MAP estimation, Delassus) via CHOLMOD.

Simplicial L D L^T (the sizes here are small); the fill-reducing permutation is computed once for a fixed symmetric pattern and applied outside
CHOLMOD, so the stored plan is just (pattern, permutation) and the symbolic analysis of the
permuted pattern (natural order) is redone cheaply on load. Per state: factor(values), solve(rhs).

Preconditions: `pattern` square CSC with a symmetric structure (both triangles stored); values are
given in its data order and describe a symmetric positive definite matrix.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..batch import as_batch
from ..errors import SingularModelError
from ..serialization import check_format, stored_array, stored_scalar

FORMAT = "sparsedyn.cholesky_plan"
FORMAT_VERSION = 1
PD_TOLERANCE = 1e-14  # LDL^T pivot / its diagonal entry below which a state counts as singular
ORDERINGS = ("amd", "metis", "nesdis", "colamd", "natural", "default", "best")


class SparseCholesky:
    """L L^T = P A P^T with a stored permutation P and a reusable CHOLMOD symbolic analysis."""

    def __init__(self, pattern, ordering="amd", perm=None):
        from sksparse.cholmod import analyze
        if not sp.issparse(pattern):
            raise ValueError(f"pattern: expected a scipy.sparse matrix, got {type(pattern).__name__}")
        pattern = sp.csc_matrix(pattern, dtype=float)
        pattern.sum_duplicates()
        pattern.sort_indices()
        n = pattern.shape[0]
        if pattern.shape != (n, n):
            raise ValueError(f"pattern: expected a square matrix, got {pattern.shape}")
        struct = pattern.copy()
        struct.data[:] = 1.0
        if (abs(struct - struct.T)).nnz:
            raise ValueError("pattern: structure is not symmetric (store both triangles)")
        if perm is None:
            if ordering not in ORDERINGS:
                raise ValueError(f"ordering: unknown {ordering!r}; known: {', '.join(ORDERINGS)}")
            perm = analyze(struct + sp.identity(n, format="csc") * n, ordering_method=ordering).P()
        perm = np.asarray(perm, dtype=np.int64)
        if perm.shape != (n,) or not np.array_equal(np.sort(perm), np.arange(n)):
            raise ValueError(f"perm: not a permutation of 0..{n - 1}")
        self.pattern = pattern
        self.ordering = ordering
        self.perm = perm
        # Entry e of the pattern lands at data position _to_permuted[e] of P A P^T (canonical CSC).
        ids = pattern.copy()
        ids.data = np.arange(1, pattern.nnz + 1, dtype=float)
        permuted = ids[perm][:, perm].tocsc()
        permuted.sort_indices()
        self._to_permuted = np.empty(pattern.nnz, dtype=np.int64)
        self._to_permuted[permuted.data.astype(np.int64) - 1] = np.arange(pattern.nnz)
        self._permuted_indices, self._permuted_indptr = permuted.indices, permuted.indptr
        self._symbolic = analyze(self._permuted(np.ones(pattern.nnz) + np.where(
            pattern.indices == np.repeat(np.arange(n), np.diff(pattern.indptr)), n, 0.0)),
            mode="simplicial", ordering_method="natural")

    @property
    def n(self):
        return self.pattern.shape[0]

    def _permuted(self, values):
        data = np.empty(self.pattern.nnz)
        data[self._to_permuted] = values
        return sp.csc_matrix((data, self._permuted_indices, self._permuted_indptr),
                             shape=self.pattern.shape)

    def factor(self, values, state=None):
        """Numeric factorization for one state (values (nnz,)): a CholeskyFactor whose solve()
        uses it (the factor is per call, never stored here: calls from several threads do not
        share it)."""
        from sksparse.cholmod import CholmodNotPositiveDefiniteError
        values, _ = as_batch(values, self.pattern.nnz, "values")
        if values.shape[0] != 1:
            raise ValueError(f"values: factor takes one state, got a batch of {values.shape[0]} "
                             f"(use solve_batch)")
        where = "" if state is None else f" at batch index {state}"
        permuted = self._permuted(values[0])
        try:
            factor = self._symbolic.cholesky(permuted)
        except CholmodNotPositiveDefiniteError as exc:
            raise SingularModelError(f"values: matrix is not positive definite{where} ({exc})",
                                     batch_indices=() if state is None else (state,)) from None
        # Simplicial CHOLMOD computes L D L^T without complaint on indefinite input: check D,
        # each pivot against its own diagonal entry (d_k / A_kk >= the smallest eigenvalue of
        # the Jacobi-scaled matrix: a test independent of the variables' units)
        d, a = factor.D(), permuted.diagonal()
        ratio = d / np.where(a > 0, a, np.nan)
        if not (d.size == 0 or ratio.min() > PD_TOLERANCE):        # (NaN fails too)
            k = int(np.argmin(np.nan_to_num(ratio, nan=-np.inf)))
            raise SingularModelError(
                f"values: matrix is not (numerically) positive definite{where} "
                f"(pivot {d[k]:.3g} on a diagonal entry {a[k]:.3g})",
                batch_indices=() if state is None else (state,))
        return CholeskyFactor(factor, self.perm)

    def solve_batch(self, values, rhs):
        """Factor and solve each state: values (B, nnz), rhs (B, n) -> (B, n)."""
        v_arr, r_arr = np.asarray(values), np.asarray(rhs)
        B = max(v_arr.shape[0] if v_arr.ndim == 2 else 1, r_arr.shape[0] if r_arr.ndim == 2 else 1)
        values, v_single = as_batch(values, self.pattern.nnz, "values", batch=B)
        rhs, r_single = as_batch(rhs, self.n, "rhs", batch=B)
        x = np.empty((B, self.n))
        for b in range(B):
            x[b] = self.factor(values[b], state=b).solve(rhs[b])
        return x[0] if (v_single and r_single) else x

    def to_dict(self):
        return {"format": FORMAT, "version": FORMAT_VERSION,
                "shape": np.asarray(self.pattern.shape, dtype=np.int64),
                "pattern_indptr": self.pattern.indptr.astype(np.int64),
                "pattern_indices": self.pattern.indices.astype(np.int64),
                "perm": self.perm.copy(), "ordering": self.ordering}

    @classmethod
    def from_dict(cls, d):
        """Rebuild from to_dict(); ValueError on foreign or inconsistent input."""
        d = check_format(d, FORMAT, FORMAT_VERSION)
        try:
            shape = tuple(int(s) for s in stored_array(d, "shape", "int"))
            indices = stored_array(d, "pattern_indices", "int")
            pattern = sp.csc_matrix((np.ones(indices.size), indices,
                                     stored_array(d, "pattern_indptr", "int")), shape=shape)
            pattern.check_format(full_check=True)
            return cls(pattern, ordering=stored_scalar(d, "ordering", "str"),
                       perm=stored_array(d, "perm", "int"))
        except KeyError as exc:
            raise ValueError(f"d: missing key {exc}") from None
        except (TypeError, IndexError) as exc:
            raise ValueError(f"d: invalid content ({exc})") from None


class CholeskyFactor:
    """One state's numeric factor P A P^T = L D L^T (SparseCholesky.factor)."""

    def __init__(self, factor, perm):
        self._factor, self.perm = factor, perm

    def solve(self, rhs):
        """x with A x = rhs: rhs (n,) or (n, k)."""
        rhs = np.asarray(rhs, dtype=float)
        if rhs.shape[0] != self.perm.size or rhs.ndim > 2:
            raise ValueError(f"rhs: expected shape ({self.perm.size},) or ({self.perm.size}, k), "
                             f"got {rhs.shape}")
        out = np.empty_like(rhs)
        out[self.perm] = self._factor.solve_A(rhs[self.perm])
        return out
