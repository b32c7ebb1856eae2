"""Over-determined or singular estimation: weighted least squares / Gaussian MAP on [D; D_Y]
(seed 001, eq. 17, solved in BERDY's probabilistic form: Latella et al., Sensors 2016).

    prior          d ~ N(mu_d, Sigma_d)                          (diagonal)
    dynamics       D d + b ~ N(0, Sigma_D)      the Newton-Euler rows, small covariance
    measurements   y = D_Y d + b_Y + N(0, Sigma_y)

    posterior      P = Sigma_d^-1 + A^T W A,   P mu = Sigma_d^-1 mu_d + A^T W r,   Cov = P^-1
                   A = [D; D_Y], r = -[b; b_Y - y], W = diag(Sigma_D^-1, Sigma_y^-1)

Weighted least squares is the limit of a vanishing prior ("lstsq": unit weights and a ridge of
1e-15 of the largest weight, which only selects the minimum-norm answer in singular directions).

The normal matrix P has a fixed worst-case pattern (union of A^T A and the diagonal): its entries
are accumulated for a whole batch by a numba kernel from precomputed entry pairs, and each state
is factored by CHOLMOD with a stored symbolic analysis (sparsedyn.kernels.SparseCholesky), or, with
backend "lu", by the planner's batched static-pivot LU (pivot-safe: P is SPD, pivots on its
diagonal). One step of iterative refinement on the un-squared residual keeps the accuracy of the
normal equations close to that of a QR solve.

Per-state identifiability: with L = A^T W A (the likelihood alone) and a tiny ridge rho, the
response s = (L + rho)^-1 rho delta (rho = 1e-12 diag(L)) to a fixed random delta is ~delta on the directions the
measurements do not determine and ~rho/lambda (negligible) elsewhere (for "lstsq", P is that
matrix; for "map" it costs one more factorization per state). Those states get ok = False and
the variables are listed; their MAP answer is the prior-regularised one, as BERDY's.

Preconditions: problem (EstimationProblem) assembled; variances positive.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..errors import SingularModelError

try:
    from numba import njit
except ImportError:                                          # pragma: no cover
    njit = None

SENSITIVITY_TOL = 1e-3
LSTSQ_RIDGE = 1e-15
LIKELIHOOD_RIDGE = 1e-12
DEFAULT_VARIANCES = {"dynamics": 1e-8, "sensor": 1e-4, "prior": 1e4}


def _kernel(fn):
    return njit(cache=True)(fn) if njit is not None else fn


@_kernel
def _normal_values(A, w, p, e1, e2, prow, t1, t2, diag, out):
    """out[b] = entries of diag(p) + A_b^T diag(w) A_b (both triangles)."""
    B = A.shape[0]
    for b in range(B):
        for k in range(out.shape[1]):
            out[b, k] = 0.0
        for k in range(e1.shape[0]):
            val = w[prow[k]] * A[b, e1[k]] * A[b, e2[k]]
            out[b, t1[k]] += val
            if t2[k] != t1[k]:
                out[b, t2[k]] += val
        for c in range(diag.shape[0]):
            out[b, diag[c]] += p[c]


@_kernel
def _transpose_times(A, rows, cols, y, n, out):
    """out[b] = A_b^T y[b]."""
    for b in range(A.shape[0]):
        for c in range(n):
            out[b, c] = 0.0
        for e in range(rows.shape[0]):
            out[b, cols[e]] += A[b, e] * y[b, rows[e]]


@_kernel
def _times(A, rows, cols, x, m, out):
    """out[b] = A_b x[b]."""
    for b in range(A.shape[0]):
        for r in range(m):
            out[b, r] = 0.0
        for e in range(rows.shape[0]):
            out[b, rows[e]] += A[b, e] * x[b, cols[e]]


class NormalEquations:
    """Pattern of P = diag + A^T W A for a fixed CSC pattern of A and the entry-pair program."""

    def __init__(self, pattern):
        A = sp.csc_matrix(pattern)
        m, n = A.shape
        self.m, self.n = m, n
        self.rows = A.indices.astype(np.int64)
        self.cols = np.repeat(np.arange(n), np.diff(A.indptr)).astype(np.int64)
        ids = sp.csr_matrix((np.arange(A.nnz, dtype=float) + 1, (self.rows, self.cols)), shape=(m, n))
        e1, e2, prow = [], [], []
        for r in range(m):
            e = ids.data[ids.indptr[r]:ids.indptr[r + 1]].astype(np.int64) - 1
            i, j = np.triu_indices(len(e))
            e1.append(e[i]), e2.append(e[j]), prow.append(np.full(len(i), r))
        e1, e2, prow = (np.concatenate(x) if x else np.zeros(0, np.int64) for x in (e1, e2, prow))
        c1, c2 = self.cols[e1], self.cols[e2]
        struct = sp.csc_matrix((np.ones(len(c1) * 2 + n), (np.r_[c1, c2, np.arange(n)],
                                                          np.r_[c2, c1, np.arange(n)])), shape=(n, n))
        struct.sum_duplicates()
        struct.sort_indices()
        struct.data[:] = 1.0
        self.pattern = struct
        self.e1, self.e2, self.prow = e1, e2, prow.astype(np.int64)
        self.t1 = _lookup(struct, c1, c2)
        self.t2 = _lookup(struct, c2, c1)
        self.diag = _lookup(struct, np.arange(n), np.arange(n))

    def values(self, A_values, w, p):
        out = np.empty((A_values.shape[0], self.pattern.nnz))
        _normal_values(np.ascontiguousarray(A_values), w, p, self.e1, self.e2, self.prow,
                       self.t1, self.t2, self.diag, out)
        return out

    def transpose_times(self, A_values, y):
        out = np.empty((A_values.shape[0], self.n))
        _transpose_times(np.ascontiguousarray(A_values), self.rows, self.cols,
                         np.ascontiguousarray(y), self.n, out)
        return out

    def times(self, A_values, x):
        out = np.empty((A_values.shape[0], self.m))
        _times(np.ascontiguousarray(A_values), self.rows, self.cols, np.ascontiguousarray(x),
               self.m, out)
        return out


def _lookup(csc, r, c):
    """Data positions of entries (r, c) of a canonical CSC matrix."""
    start = csc.indptr[c]
    out = np.empty(len(r), dtype=np.int64)
    for k in range(len(r)):
        seg = csc.indices[start[k]:csc.indptr[c[k] + 1]]
        out[k] = start[k] + np.searchsorted(seg, r[k])
    return out


def _cholmod_direct(pattern, values, rhs, diag):
    """One SPD solve through CHOLMOD (supernodal L L^T, own analysis) for the states whose P has
    pivots spread wider than SparseCholesky's singularity test admits (a MAP prior can be 1e-15
    of a dynamics weight and still be exact). If P is numerically singular (least squares on a
    singular state) a ridge of 1e-10 of its largest diagonal entry is added. Returns (X, ridged)."""
    from sksparse.cholmod import CholmodNotPositiveDefiniteError, cholesky
    P = sp.csc_matrix((values, pattern.indices, pattern.indptr), shape=pattern.shape)
    try:
        return cholesky(P, ordering_method="amd")(rhs), False
    except CholmodNotPositiveDefiniteError:
        beta = 1e-10 * float(values[diag].max())
        return cholesky(P, beta=beta, ordering_method="amd")(rhs), True


def _variances(problem, covariances, method):
    """Row weights (1/variance) and prior (precision, mean, std) from the user's covariances."""
    covariances = dict(covariances or {})
    known = {s.name for s in problem.sensors} | {"dynamics", "prior", "prior_mean"}
    unknown = sorted(set(covariances) - known)
    if unknown:
        raise KeyError(f"covariances: no sensor named {unknown} (sensors: "
                       f"{sorted(s.name for s in problem.sensors)}; also 'dynamics', 'prior')")
    m, n = problem.shape
    var = np.empty(m)
    lstsq = method == "lstsq"
    var[:problem.n_dynamics_rows] = 1.0 if lstsq else covariances.get("dynamics", DEFAULT_VARIANCES["dynamics"])
    for s in problem.rows.sensors:
        sl = slice(problem.n_dynamics_rows + problem.rows.row_slices[s.name].start,
                   problem.n_dynamics_rows + problem.rows.row_slices[s.name].stop)
        v = covariances.get(s.name, 1.0 if lstsq else DEFAULT_VARIANCES["sensor"])
        v = np.broadcast_to(np.asarray(v, dtype=float), (s.size,)) if np.ndim(v) <= 1 else None
        if v is None:
            raise ValueError(f"covariances[{s.name!r}]: expected a variance or ({s.size},) variances")
        var[sl] = v
    prior = covariances.get("prior", DEFAULT_VARIANCES["prior"])
    if isinstance(prior, dict):
        pv = np.empty(n)
        for b in problem.columns.blocks:
            pv[b.slice] = prior.get(b.kind, DEFAULT_VARIANCES["prior"])
    else:
        pv = np.broadcast_to(np.asarray(prior, dtype=float), (n,)).copy()
    for name, arr in (("dynamics/sensor variances", var), ("prior variances", pv)):
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise ValueError(f"covariances: {name} must be finite and positive")
    w = 1.0 / var
    if lstsq:
        pv = np.full(n, 1.0 / (LSTSQ_RIDGE * w.max()))  # a ridge: only fixes singular directions
    mean = np.zeros(n) if covariances.get("prior_mean") is None else np.broadcast_to(
        np.asarray(covariances["prior_mean"], dtype=float), (n,)).copy()
    return w, 1.0 / pv, mean, np.sqrt(pv)


class MAPSolver:
    """Batched Gaussian MAP (or weighted least squares) on [D; D_Y]."""

    def __init__(self, problem, covariances=None, method="map", backend="cholmod",
                 ordering="amd", refine=1):
        if method not in ("map", "lstsq"):
            raise ValueError(f"method: expected 'map' or 'lstsq', got {method!r}")
        if backend not in ("cholmod", "lu"):
            raise ValueError(f"backend: expected 'cholmod' or 'lu', got {backend!r}")
        self.method = method
        self.backend = backend
        self.refine = int(refine)
        self.weights, self.prior_precision, self.prior_mean, self.prior_std = _variances(
            problem, covariances, method)
        self.normal = NormalEquations(problem.pattern)
        # a fixed random direction probing which variables the measurements leave undetermined
        self._delta = np.random.default_rng(12345).normal(size=problem.shape[1])
        if backend == "cholmod":
            from ..kernels import SparseCholesky
            self.cholesky = SparseCholesky(self.normal.pattern, ordering=ordering)
            self.factorization = None
        else:
            from ..planner import plan_factorization
            diag = np.zeros(self.normal.pattern.nnz, bool)
            diag[self.normal.diag] = True
            self.factorization = plan_factorization(self.normal.pattern, diag, ordering="auto")
            self.cholesky = None

    @property
    def stats(self):
        P = self.normal.pattern
        out = {"method": self.method, "backend": self.backend, "n": P.shape[0], "nnz_P": P.nnz}
        if self.factorization is not None:
            out.update({"lu_" + k: v for k, v in self.factorization.stats.items()})
        return out

    def normal_values(self, values):
        return self.normal.values(values, self.weights, self.prior_precision)

    def _solve_spd(self, Pvals, rhs_list, regularised=None):
        """Solve P_b X = [rhs_1 ... rhs_k][b] for every state b; returns a list of (B, n).

        `regularised` (B,) bool, if given, is set for states whose P was numerically singular
        and had to be solved with an extra ridge (only possible for method "lstsq")."""
        B, n = Pvals.shape[0], self.normal.n
        if self.cholesky is not None:
            out = [np.empty((B, n)) for _ in rhs_list]
            stacked = np.stack(rhs_list, axis=-1)                # (B, n, k)
            for b in range(B):
                try:
                    X = self.cholesky.factor(Pvals[b], state=b).solve(stacked[b])
                except SingularModelError:
                    X, ridged = _cholmod_direct(self.normal.pattern, Pvals[b], stacked[b],
                                                self.normal.diag)
                    if regularised is not None:
                        regularised[b] |= ridged
                for k in range(len(rhs_list)):
                    out[k][b] = X[:, k]
            return out
        k = len(rhs_list)
        X = self.factorization.solve(np.tile(Pvals, (k, 1)), np.concatenate(rhs_list, axis=0))
        return [X[i * B:(i + 1) * B] for i in range(k)]

    def solve(self, values, rhs):
        """(x (B, n), ok (B,), undetermined (B, n) bool, P values (B, nnz_P))."""
        values = np.ascontiguousarray(values)
        w, p = self.weights, self.prior_precision
        Pvals = self.normal_values(values)
        g = self.normal.transpose_times(values, rhs * w) + p * self.prior_mean
        ridged = np.zeros(values.shape[0], bool)
        if self.method == "lstsq":
            # P is the likelihood plus a ridge already: one solve gives both answers
            x, sens = self._solve_spd(Pvals, [g, np.broadcast_to(p * self._delta, g.shape)], ridged)
        else:
            x = self._solve_spd(Pvals, [g])[0]
            sens = self._likelihood_sensitivity(values, ridged)
        for _ in range(self.refine):
            # r = A^T W (rhs - A x) + Sigma_d^-1 (mu - x): the gradient at x, a correction step
            res = rhs - self.normal.times(values, x)
            corr = self.normal.transpose_times(values, res * w) + p * (self.prior_mean - x)
            x = x + self._solve_spd(Pvals, [corr])[0]
        undetermined = np.abs(sens) > SENSITIVITY_TOL * np.abs(self._delta).max()
        if ridged.any():
            # an extra ridge damps the response: locate the singular directions relatively
            rel = np.abs(sens[ridged]) / np.abs(sens[ridged]).max(axis=1, keepdims=True)
            undetermined[ridged] = rel > SENSITIVITY_TOL
        ok = ~undetermined.any(axis=1)
        return x, ok, undetermined, Pvals

    def _likelihood_sensitivity(self, values, ridged):
        """s = (L + rho)^-1 rho delta with L = A^T W A (no prior) and rho = 1e-12 diag(L) (scale
        invariant): ~delta on the directions the measurements do not determine, ~0 elsewhere."""
        L = self.normal.values(values, self.weights, np.zeros(self.normal.n))
        rho = LIKELIHOOD_RIDGE * L[:, self.normal.diag]
        L[:, self.normal.diag] += rho
        return self._solve_spd(L, [rho * self._delta], ridged)[0]

    def covariance(self, Pvals, cols):
        """Posterior covariance block (B, k, k) of the columns `cols`."""
        B, n = Pvals.shape[0], self.normal.n
        E = np.zeros((n, len(cols)))
        E[cols, np.arange(len(cols))] = 1.0
        out = np.empty((B, len(cols), len(cols)))
        if self.cholesky is not None:
            for b in range(B):
                out[b] = self.cholesky.factor(Pvals[b], state=b).solve(E)[cols]
            return out
        for k in range(len(cols)):
            X = self.factorization.solve(Pvals, np.broadcast_to(E[:, k], (B, n)))
            out[:, :, k] = X[:, cols]
        return out
