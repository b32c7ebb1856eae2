"""Over-determined or singular estimation: weighted least squares / Gaussian MAP on [D; D_Y]
(seed 001, eq. 17, solved in BERDY's probabilistic form: Latella et al., Sensors 2016).

    prior          d ~ N(mu_d, Sigma_d)                          (diagonal)
    dynamics       D d + b ~ N(0, Sigma_D)      the Newton-Euler rows, small covariance
    measurements   y = D_Y d + b_Y + N(0, Sigma_y)

    posterior      P = Sigma_d^-1 + A^T W A,   P mu = Sigma_d^-1 mu_d + A^T W r,   Cov = P^-1
                   A = [D; D_Y], r = -[b; b_Y - y], W = diag(Sigma_D^-1, Sigma_y^-1)

The prior is the user's (covariances["prior"], BERDY's Sigma_d) where given. Elsewhere, and for
"lstsq" (unit weights), the default is uninformative: a ridge of RIDGE times the variable's
typical data information (the median of diag(A^T W A) over random states: scale-invariant, fixed
per plan) that only selects an answer in directions the data leave undetermined. It stays out of
the refinement's gradient, so on a determined state the estimate is the weighted least-squares
one (the ridge's bias, RIDGE / lambda, is squared by the refinement step). Rows without a given
variance share one default, so "map" without covariances is least squares.

The normal matrix P has a fixed worst-case pattern (union of A^T A and the diagonal): its entries
are accumulated for a whole batch by a numba kernel from precomputed entry pairs, and each state
is factored by CHOLMOD with a stored symbolic analysis (sparsedyn.kernels.SparseCholesky), or, with
backend "lu", by the planner's batched static-pivot LU (pivot-safe: P is SPD, pivots on its
diagonal). One step of iterative refinement on the un-squared residual keeps the accuracy of the
normal equations close to that of a QR solve.

Identifiability (ok), from the data alone and scale-invariantly (Identifiability): with
S = J^-1/2 (A^T W A) J^-1/2, J its diagonal (every variable in the unit of its own data
information), a state is determined when the smallest eigenvalue of S is at least IDENTIFIABLE
(the column-equilibrated W^1/2 A has no singular value below 1e-6); it is found by shifted
inverse iteration, and the variables of the near-null vector are the undetermined ones. Whether
the data determine a state does not depend on the (positive) weights, only how well: where the
weighted test finds an eigenvalue below WELL_CONDITIONED (sensors 1e8 times more or less precise
than the dynamics rows), the same test with unit weights (the exact and least-squares routes'
test, solve_exact.py) decides too, and either finding the state determined makes it ok. Such a
state's estimate comes from the augmented system K [lam; x] = [r; -Sigma_d^-1 mu],
K = [[W^-1, A], [A^T, -Sigma_d^-1]] (the user's prior only, no ridge) factored with partial
pivoting (augmented_solve), accurate at any weight ratio where the normal equations' squared
condition is not. An estimate that is not determined is the prior-regularised one (BERDY's) and
its state has ok = False.

Preconditions: problem (EstimationProblem) assembled; variances positive.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import SingularModelError
from ..kinematics import forward_kinematics


#: the uninformative default prior's precision, relative to each variable's typical information
RIDGE = 1e-15
#: smallest eigenvalue of the scaled data information S of a determined state
IDENTIFIABLE = 1e-12
#: inverse iteration on S + PROBE_SHIFT (above S's round-off, below IDENTIFIABLE), this many steps:
#: a direction with eigenvalue <= IDENTIFIABLE gains >= (1 / 1.1e-12)^k on one of order 1
PROBE_SHIFT = 1e-13
PROBE_STEPS = 3
#: an undetermined state's undetermined variables: near-null vector components above this share
SENSITIVITY_TOL = 1e-3
#: a state whose weighted scaled information has an eigenvalue below this is solved on the
#: augmented system (augmented_solve) instead of the normal equations, whose refined error grows
#: like (eps / lambda)^2: ~1e-11 at this threshold
WELL_CONDITIONED = 1e-8
#: row variances where the covariances give none: one value for every row, so that with the
#: default (uninformative) prior "map" is least squares (BERDY's setting gives its own, e.g. 1e-8
#: for the dynamics: a weight spread the normal equations pay for in accuracy)
DEFAULT_VARIANCES = {"dynamics": 1e-4, "sensor": 1e-4}


class NormalEquations:
    """Pattern of P = diag + A^T W A for a fixed CSC pattern of A and the entry-pair program."""

    def __init__(self, pattern):
        A = sp.csc_matrix(pattern)
        m, n = A.shape
        self.m, self.n = m, n
        self.rows = A.indices.astype(np.int64)
        self.cols = np.repeat(np.arange(n), np.diff(A.indptr)).astype(np.int64)
        ids = sp.csr_matrix((np.arange(A.nnz, dtype=float) + 1, (self.rows, self.cols)), shape=(m, n))
        entry = ids.data.astype(np.int64) - 1                # A's entries, row by row
        lens = np.diff(ids.indptr)
        e1, e2, prow = [], [], []
        for length in np.unique(lens):                       # the rows of one length together
            rows_l = np.flatnonzero(lens == length)
            i, j = np.triu_indices(length)
            E = entry[ids.indptr[rows_l][:, None] + np.arange(length)]
            e1.append(E[:, i].ravel()), e2.append(E[:, j].ravel())
            prow.append(np.repeat(rows_l, len(i)))
        e1, e2, prow = (np.concatenate(x) if x else np.zeros(0, np.int64) for x in (e1, e2, prow))
        order = np.argsort(prow, kind="stable")              # row by row, as the normal matrix sums
        e1, e2, prow = e1[order], e2[order], prow[order]
        c1, c2 = self.cols[e1], self.cols[e2]
        struct = sp.csc_matrix((np.ones(len(c1) * 2 + n), (np.r_[c1, c2, np.arange(n)],
                                                          np.r_[c2, c1, np.arange(n)])), shape=(n, n))
        struct.sum_duplicates()
        struct.sort_indices()
        struct.data[:] = 1.0
        self.pattern = struct
        self.e1, self.e2, self.prow = e1, e2, prow.astype(np.int64)
        t1, t2 = _lookup(struct, c1, c2), _lookup(struct, c2, c1)
        self.diag = _lookup(struct, np.arange(n), np.arange(n))
        # sums as sparse products (scatter matrices of 0/1), pair by pair in the order above:
        # the entries' of N add up as in the entry-pair program of the compiled routes
        pairs, off = np.arange(len(t1)), t2 != t1
        self._pairs_to_N = scatter(np.r_[pairs, pairs[off]], np.r_[t1, t2[off]], len(t1),
                                    struct.nnz)
        self._entries_to_cols = scatter(np.arange(A.nnz), self.cols, A.nnz, n)
        self._entries_to_rows = scatter(np.arange(A.nnz), self.rows, A.nnz, m)

    def values(self, A_values, w, p):
        """(B, nnz(N)) entries of diag(p) + A_b^T diag(w) A_b (both triangles)."""
        A_values = np.asarray(A_values)
        out = np.empty((A_values.shape[0], self.pattern.nnz))
        for lo, hi in _chunks(A_values.shape[0], len(self.e1)):
            pair = w[self.prow] * A_values[lo:hi, self.e1] * A_values[lo:hi, self.e2]
            out[lo:hi] = (self._pairs_to_N @ pair.T).T
        out[:, self.diag] += p
        return out

    def transpose_times(self, A_values, y):
        """(B, n): A_b^T y[b]."""
        return (self._entries_to_cols @ (np.asarray(A_values) * y[:, self.rows]).T).T

    def times(self, A_values, x):
        """(B, m): A_b x[b]."""
        return (self._entries_to_rows @ (np.asarray(A_values) * x[:, self.cols]).T).T


def scatter(src, dst, n_src, n_dst):
    """(n_dst, n_src) CSR matrix of ones at (dst[k], src[k]): out = S @ v sums v's entries into
    their destinations, each row in increasing src order."""
    S = sp.csr_matrix((np.ones(len(src)), (dst, src)), shape=(n_dst, n_src))
    S.sort_indices()
    return S


def _chunks(B, width, budget=4 * 2 ** 20):
    """(lo, hi) ranges of states whose (states, width) float arrays take about `budget` items."""
    step = max(1, budget // max(width, 1))
    return [(lo, min(B, lo + step)) for lo in range(0, B, step)]


def _lookup(csc, r, c):
    """Data positions of entries (r, c) of a canonical CSC matrix (sorted indices: the keys
    column * n_rows + row of its entries are increasing)."""
    n_rows = csc.shape[0]
    cols = np.repeat(np.arange(csc.shape[1], dtype=np.int64), np.diff(csc.indptr))
    keys = cols * n_rows + csc.indices
    return np.searchsorted(keys, np.asarray(c, dtype=np.int64) * n_rows
                           + np.asarray(r, dtype=np.int64)).astype(np.int64)


def _cholmod_direct(pattern, values, rhs, diag):
    """One SPD solve through CHOLMOD (supernodal L L^T, own analysis) for the states that
    SparseCholesky's singularity test refuses (a ridge prior on an undetermined state). If P is
    not numerically positive definite, 1e-10 of each diagonal entry is added (a Jacobi-relative,
    scale-invariant ridge; such a state is undetermined, the identifiability test says so)."""
    from sksparse.cholmod import CholmodNotPositiveDefiniteError, cholesky
    P = sp.csc_matrix((values, pattern.indices, pattern.indptr), shape=pattern.shape)
    try:
        return cholesky(P, ordering_method="amd")(rhs)
    except CholmodNotPositiveDefiniteError:
        ridged = np.array(values, dtype=float)
        ridged[diag] *= 1.0 + 1e-10
        P = sp.csc_matrix((ridged, pattern.indices, pattern.indptr), shape=pattern.shape)
        return cholesky(P, ordering_method="amd")(rhs)


def typical_information(problem, weights, rng=0, n_states=3):
    """Each variable's typical data information (n,): the median of diag(A^T W A) over a few
    random states (the scale of the uninformative prior and of the compiled routes' probe)."""
    rng = np.random.default_rng(rng)
    model, P = problem.model, problem.pattern
    cols = np.repeat(np.arange(P.shape[1]), np.diff(P.indptr))
    out = []
    for _ in range(n_states):
        kin = forward_kinematics(model, model.random_configuration(rng), rng.normal(size=model.nv))
        A = problem.values(kin)[0]
        out.append(np.bincount(cols, weights[P.indices] * A * A, minlength=P.shape[1]))
    d = np.median(out, axis=0)
    # a variable without data at the sampled states takes the smallest positive scale
    return np.where(d > 0, d, d[d > 0].min() if (d > 0).any() else 1.0)


def _variance_array(value, shape, batch, what):
    """A variance value as an array of `shape` (size,) or, per sample, (batch, size): a scalar
    or (size,) applies to every sample, (batch, size) or (batch, 1) gives one row per sample."""
    arr = np.asarray(value, dtype=float)
    if arr.ndim <= 1 and arr.size in (1, shape[-1]):
        return np.broadcast_to(arr.reshape(-1)[0] if arr.size == 1 else arr, shape)
    if batch is not None and arr.ndim == 2 and arr.shape[0] == batch and arr.shape[1] in (1, shape[-1]):
        return np.broadcast_to(arr, shape)
    per = f" or per sample ({batch}, {shape[-1]}) / ({batch}, 1)" if batch is not None else ""
    raise ValueError(f"covariances[{what!r}]: expected a value or ({shape[-1]},) values{per}, "
                     f"got shape {arr.shape}")


def _variances(problem, covariances, method, batch=None, ridge=None):
    """(row weights 1/variance (m,), prior precision in P (n,), prior precision in the gradient
    (n,): 0 where the prior is the uninformative ridge, prior mean (n,)) from the covariances.
    batch B: the same per sample, each (B, .) (values as _variance_array takes them), with the
    uninformative ridge `ridge` (n,) where no prior is given."""
    covariances = dict(covariances or {})
    known = {s.name for s in problem.sensors} | {"dynamics", "prior", "prior_mean"}
    unknown = sorted(set(covariances) - known)
    if unknown:
        raise KeyError(f"covariances: no sensor named {unknown} (sensors: "
                       f"{sorted(s.name for s in problem.sensors)}; also 'dynamics', 'prior')")
    m, n = problem.shape
    lead = () if batch is None else (batch,)
    var = np.empty(lead + (m,))
    lstsq = method == "lstsq"
    nd = problem.n_dynamics_rows
    dynamics = covariances.get("dynamics", DEFAULT_VARIANCES["dynamics"])
    var[..., :nd] = _variance_array(1.0 if lstsq else dynamics, lead + (nd,), batch, "dynamics")
    for s in problem.rows.sensors:
        sl = problem.rows.row_slices[s.name]
        # a pseudo-measurement (tau_root = 0, a slippery floor) is a modelling assumption as
        # exact as the dynamics, not a sensor: the dynamics' variance unless given
        v = covariances.get(s.name, 1.0 if lstsq else dynamics if s.default_reading is not None
                            else DEFAULT_VARIANCES["sensor"])
        var[..., nd + sl.start:nd + sl.stop] = _variance_array(v, lead + (s.size,), batch, s.name)
    prior = None if lstsq else covariances.get("prior")
    pv = np.full(lead + (n,), np.nan)                     # NaN: no prior given, the ridge
    if isinstance(prior, dict):
        kinds = sorted({b.kind for b in problem.columns.blocks})
        extra = sorted(set(prior) - set(kinds))
        if extra:
            raise KeyError(f"covariances['prior']: no variable kind {extra} (kinds: {kinds})")
        for b in problem.columns.blocks:
            if b.kind in prior:
                pv[..., b.slice] = _variance_array(prior[b.kind], lead + (b.size,), batch,
                                                   f"prior[{b.kind!r}]")
    elif prior is not None:
        pv[...] = _variance_array(prior, lead + (n,), batch, "prior")
    given = ~np.isnan(pv)
    for name, arr in (("dynamics/sensor variances", var), ("prior variances", pv[given])):
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise ValueError(f"covariances: {name} must be finite and positive")
    w = 1.0 / var
    p_grad = np.where(given, 1.0 / np.where(given, pv, 1.0), 0.0)
    if given.all():
        p = p_grad
    else:
        ridge = RIDGE * typical_information(problem, w) if ridge is None else ridge
        p = np.where(given, p_grad, ridge)
    mean = covariances.get("prior_mean")
    mean = np.zeros(lead + (n,)) if mean is None else np.array(
        _variance_array(mean, lead + (n,), batch, "prior_mean"))
    if not np.all(np.isfinite(mean)):
        raise ValueError("covariances['prior_mean'] must be finite")
    return w, p, p_grad, mean


class Identifiability:
    """Which variables the data alone determine at each state (module docstring): the smallest
    eigenvalue of the scaled information S = J^-1/2 (A^T W A) J^-1/2 by inverse iteration."""

    def __init__(self, normal, weights, ordering="amd"):
        from ..kernels import SparseCholesky
        self.normal, self.weights = normal, np.asarray(weights, dtype=float)
        P = normal.pattern
        self.cholesky = SparseCholesky(P, ordering=ordering)
        self._rows = P.indices.astype(np.int64)
        self._cols = np.repeat(np.arange(P.shape[1]), np.diff(P.indptr))
        # a fixed random start: generic, so it is never orthogonal to a null direction
        self._start = np.random.default_rng(12345).normal(size=normal.n)

    def __call__(self, values, weights=None, known=None):
        """(determined (B,) bool, undetermined variables (B, n) bool, smallest eigenvalue of S
        (B,)) for A's values (B, nnz); a state whose information is not finite is undetermined.
        weights: the rows' weights (default: the plan's); known (B, n) bool: variables known
        per state (an inactive contact's wrench: its column of `values` is zero), not tested."""
        normal = self.normal
        L = normal.values(np.ascontiguousarray(values),
                          self.weights if weights is None else weights, np.zeros(normal.n))
        if known is not None:
            L[:, normal.diag] = np.where(known, 1.0, L[:, normal.diag])
        diag = L[:, normal.diag]
        # a variable without data at this state keeps S_jj = 0 (its scale is immaterial)
        inv = 1.0 / np.sqrt(np.where(diag > 0, diag, 1.0))
        S = L * inv[:, self._rows] * inv[:, self._cols]
        B = S.shape[0]
        lam = np.empty(B)
        undetermined = np.zeros((B, normal.n), dtype=bool)
        for b in range(B):
            lam[b], s = self._smallest(S[b], b)
            if not lam[b] >= IDENTIFIABLE:
                undetermined[b] = ~(np.abs(s) <= SENSITIVITY_TOL * np.abs(s).max())
        return lam >= IDENTIFIABLE, undetermined, lam

    def _smallest(self, values, state):
        """(smallest eigenvalue, its vector) of one state's S (values in the pattern's order)."""
        P = self.normal.pattern
        if not np.isfinite(values).all():
            return np.nan, np.ones(P.shape[0])
        S = sp.csc_matrix((values, P.indices, P.indptr), shape=P.shape)
        shifted = np.array(values)
        shifted[self.normal.diag] += PROBE_SHIFT
        try:
            factor = self.cholesky.factor(shifted, state=state)
        except SingularModelError:          # not expected above round-off: the dense spectrum
            lam, vec = np.linalg.eigh(S.toarray())
            return lam[0], vec[:, 0]
        s = self._start
        for _ in range(PROBE_STEPS):
            s = factor.solve(s)
            s = s / np.abs(s).max()
        return float(s @ (S @ s)) / float(s @ s), s


def augmented_factor(pattern, values, weights, gradient_prior, known=None):
    """SuperLU factor (partial pivoting) of one state's augmented matrix
    K = [[W^-1, A], [A^T, -diag(p)]] (p the user's prior precision, 0 under the uninformative
    default; -1 on a variable known to be 0), and K; None if K is exactly singular.
    values: A's entries in `pattern`'s CSC order; known (n,) bool."""
    import scipy.sparse.linalg as spl
    m, n = pattern.shape
    A = sp.csc_matrix((values, pattern.indices, pattern.indptr), shape=(m, n))
    p = np.asarray(gradient_prior, dtype=float)
    corner = -p if known is None else -np.where(known, 1.0, p)
    K = sp.bmat([[sp.diags(1.0 / np.asarray(weights, dtype=float)), A],
                 [A.T, sp.diags(corner)]], format="csc")
    try:
        return spl.splu(K), K
    except RuntimeError:
        return None


def augmented_solve(pattern, values, rhs, weights, gradient_prior, mean, known=None):
    """One state's MAP / weighted least-squares estimate (n,) from the augmented system
    K [lam; x] = [r; -p mu] (augmented_factor; lam = W (r - A x)) plus one refinement step;
    None if K is singular or the result not finite."""
    factored = augmented_factor(pattern, values, weights, gradient_prior, known)
    if factored is None:
        return None
    lu, K = factored
    f = np.concatenate([rhs, -gradient_prior * mean])
    if known is not None:
        f[pattern.shape[0]:][known] = 0.0
    z = lu.solve(f)
    z = z + lu.solve(f - K @ z)
    return z[pattern.shape[0]:] if np.isfinite(z).all() else None


@dataclass(frozen=True)
class SampleData:
    """Per-state numbers of a MAP call (MAPSolver.sample_data): row weights 1/variance (B, m),
    the prior precision in P and in the gradient (B, n), the prior mean (B, n), and `active`
    (B, n) bool, False where a variable is known to be zero (an inactive contact's wrench)."""
    weights: np.ndarray
    prior: np.ndarray
    gradient: np.ndarray
    mean: np.ndarray
    active: np.ndarray

    def take(self, index):
        """The numbers of the states `index`."""
        return SampleData(*(getattr(self, f)[index] for f in
                            ("weights", "prior", "gradient", "mean", "active")))


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
        self.problem, self.covariances = problem, covariances
        # the row weights first (no ridge needed for them), then each variable's typical data
        # information under them, once: the ridge, the compiled routes' probe and per-sample
        # calls all read it
        weights = _variances(problem, covariances, method, ridge=np.zeros(problem.shape[1]))[0]
        #: each variable's typical data information under the plan's weights
        self.information = typical_information(problem, weights)
        #: the uninformative prior of a variable without one, also for per-sample calls
        self.ridge_precision = RIDGE * self.information
        (self.weights, self.prior_precision, self.gradient_precision,
         self.prior_mean) = _variances(problem, covariances, method, ridge=self.ridge_precision)
        self.normal = NormalEquations(problem.pattern)
        self.identifiability = Identifiability(self.normal, self.weights, ordering=ordering)
        self._ordering = ordering
        self._unit_identifiability = None
        if backend == "cholmod":
            self.cholesky = self.identifiability.cholesky       # same pattern and ordering
            self.factorization = None
        else:
            from ..planner import plan_factorization
            diag = np.zeros(self.normal.pattern.nnz, bool)
            diag[self.normal.diag] = True
            self.factorization = plan_factorization(self.normal.pattern, diag, ordering="auto")
            self.cholesky = None

    @property
    def ridge(self):
        """(n,) bool: variables whose prior is the uninformative default (no user prior)."""
        return self.gradient_precision == 0.0

    @property
    def stats(self):
        P = self.normal.pattern
        out = {"method": self.method, "backend": self.backend, "n": P.shape[0], "nnz_P": P.nnz}
        if self.factorization is not None:
            out.update({"lu_" + k: v for k, v in self.factorization.stats.items()})
        return out

    def normal_values(self, values, sample=None):
        """Entries of P = A^T W A + diag(p) (B, nnz_P); with a SampleData, `values` are its
        scaled W^1/2 A (MAPSolver.scaled) and p its per-state prior."""
        if sample is None:
            return self.normal.values(values, self.weights, self.prior_precision)
        out = self.normal.values(values, np.ones(self.normal.m), np.zeros(self.normal.n))
        out[:, self.normal.diag] += sample.prior
        return out

    def _solve_spd(self, Pvals, rhs_list):
        """Solve P_b X = [rhs_1 ... rhs_k][b] for every state b; returns a list of (B, n)."""
        B, n = Pvals.shape[0], self.normal.n
        if self.cholesky is not None:
            out = [np.empty((B, n)) for _ in rhs_list]
            stacked = np.stack(rhs_list, axis=-1)                # (B, n, k)
            for b in range(B):
                try:
                    X = self.cholesky.factor(Pvals[b], state=b).solve(stacked[b])
                except SingularModelError:
                    X = _cholmod_direct(self.normal.pattern, Pvals[b], stacked[b],
                                        self.normal.diag)
                for k in range(len(rhs_list)):
                    out[k][b] = X[:, k]
            return out
        k = len(rhs_list)
        rhs = np.concatenate(rhs_list, axis=0)
        X, good = self.factorization.solve(np.tile(Pvals, (k, 1)), rhs, return_status=True)
        X = np.array(X)
        for i in np.flatnonzero(~np.asarray(good)):       # singular P (a ridge prior): CHOLMOD
            X[i] = _cholmod_direct(self.normal.pattern, Pvals[i % B], rhs[i], self.normal.diag)
        return [X[i * B:(i + 1) * B] for i in range(k)]

    def sample_data(self, covariances, batch, active=None):
        """The per-state numbers (SampleData) of a batch of `batch` states: `covariances` as
        compile_estimation's, with per-sample values (_variance_array), the plan's where a key
        is missing; active (B, n) bool: False for a variable known to be zero in that state (an
        inactive contact's wrench). A known variable gets prior mean 0 and, in N, its typical
        data information as precision (a well-scaled pivot of a decoupled column)."""
        merged = {**(self.covariances or {}), **(covariances or {})}
        w, p, pg, mu = _variances(self.problem, merged, self.method, batch=batch,
                                  ridge=self.ridge_precision)
        active = np.ones((batch, self.normal.n), bool) if active is None else np.asarray(active)
        if not active.all():
            scale = self.ridge_precision / RIDGE
            p = np.where(active, p, scale)
            pg = np.where(active, pg, 0.0)
            mu = np.where(active, mu, 0.0)
        return SampleData(np.ascontiguousarray(w), np.ascontiguousarray(p),
                          np.ascontiguousarray(pg), np.ascontiguousarray(mu), active)

    def scaled(self, values, rhs, sample):
        """W^1/2 A diag(active) and W^1/2 r per state (the unit-weight form of a SampleData)."""
        sw = np.sqrt(sample.weights)
        cols = self.normal.cols
        A = values * sw[:, self.normal.rows] * sample.active[:, cols]
        return np.ascontiguousarray(A), None if rhs is None else rhs * sw

    def solve(self, values, rhs, sample=None):
        """(x (B, n), ok (B,), undetermined (B, n) bool, P values (B, nnz_P)): ok[b] is the
        data-only identifiability of state b (module docstring), whatever the prior.
        sample: per-state weights, prior and active variables (SampleData), else the plan's."""
        values = np.ascontiguousarray(values)
        raw_values, raw_rhs = values, rhs
        if sample is None:
            w, p, pg, mu = (self.weights, self.prior_precision, self.gradient_precision,
                            self.prior_mean)
            known = None
        else:
            values, rhs = self.scaled(values, rhs, sample)
            w, p, pg, mu = 1.0, sample.prior, sample.gradient, sample.mean
            known = ~sample.active
        Pvals = self.normal_values(values, sample)
        x = self._solve_spd(Pvals, [self.normal.transpose_times(values, rhs * w) + p * mu])[0]
        for _ in range(self.refine):
            # the gradient at x (the user's prior in it, the ridge not), a correction step
            res = rhs - self.normal.times(values, x)
            corr = self.normal.transpose_times(values, res * w) + pg * (mu - x)
            x = x + self._solve_spd(Pvals, [corr])[0]
        ok, undetermined, lam = self.identifiability(
            values, None if sample is None else np.ones(self.normal.m), known)
        poor = np.flatnonzero(~(lam >= WELL_CONDITIONED))
        if poor.size:
            self._poorly_conditioned(poor, raw_values, raw_rhs, sample, x, ok, undetermined)
        if known is not None:
            undetermined &= ~known
        return x, ok, undetermined, Pvals

    def unit_identifiability(self):
        """The identifiability test with unit weights (least squares'), built on first use."""
        if self._unit_identifiability is None:
            self._unit_identifiability = Identifiability(self.normal, np.ones(self.normal.m),
                                                         ordering=self._ordering)
        return self._unit_identifiability

    def _poorly_conditioned(self, index, values, rhs, sample, x, ok, undetermined):
        """The states `index` whose weighted information is poorly conditioned: determined if
        the weighted or the unit-weight test says so (module docstring), then solved on the
        augmented system; updates x, ok, undetermined in place."""
        known = None if sample is None else ~sample.active[index]
        A = values[index] if known is None else values[index] * ~known[:, self.normal.cols]
        unit_ok = self.unit_identifiability()(A, None, known)[0]
        for k, b in enumerate(index):
            if not (ok[b] or unit_ok[k]):
                continue
            if sample is None:
                w, pg, mu = self.weights, self.gradient_precision, self.prior_mean
            else:
                w, pg, mu = sample.weights[b], sample.gradient[b], sample.mean[b]
            xb = augmented_solve(self.problem.pattern, A[k], rhs[b], w, pg, mu,
                                 None if known is None else known[k])
            if xb is not None:
                x[b], ok[b] = xb, True
                undetermined[b] = False

    def covariance(self, Pvals, cols, values=None, sample=None):
        """Posterior covariance block (B, k, k) of the columns `cols`. values: A's entries
        (B, nnz) of the same states (sample: their SampleData), to compute the covariance of a
        poorly conditioned state (solve: WELL_CONDITIONED) from its augmented matrix, where
        K^-1's x block is -P^-1 (P's explicit normal form has lost those digits)."""
        out = self._normal_covariance(Pvals, cols)
        if values is None:
            return out
        known = None if sample is None else ~sample.active
        weighted = values if sample is None else self.scaled(values, None, sample)[0]
        lam = self.identifiability(weighted, None if sample is None else np.ones(self.normal.m),
                                   known)[2]
        m = self.normal.m
        for b in np.flatnonzero(~(lam >= WELL_CONDITIONED)):
            A = values[b] if known is None else values[b] * ~known[b][self.normal.cols]
            w, pg = ((self.weights, self.gradient_precision) if sample is None
                     else (sample.weights[b], sample.gradient[b]))
            factored = augmented_factor(self.problem.pattern, A, w, pg,
                                        None if known is None else known[b])
            if factored is None:            # not determined: the prior-regularised P^-1 stays
                continue
            E = np.zeros((m + self.normal.n, len(cols)))
            E[m + np.asarray(cols), np.arange(len(cols))] = 1.0
            C = -factored[0].solve(E)[m:][cols]
            if np.isfinite(C).all():
                out[b] = C
        return out

    def _normal_covariance(self, Pvals, cols):
        B, n = Pvals.shape[0], self.normal.n
        E = np.zeros((n, len(cols)))
        E[cols, np.arange(len(cols))] = 1.0
        out = np.empty((B, len(cols), len(cols)))
        if self.cholesky is not None:
            for b in range(B):
                try:
                    out[b] = self.cholesky.factor(Pvals[b], state=b).solve(E)[cols]
                except SingularModelError:
                    raise SingularModelError(
                        f"covariance: unbounded at batch index {b}: the data do not determine "
                        f"that state (its ok is False) and no prior covers the undetermined "
                        f"directions", batch_indices=(b,)) from None
            return out
        for k in range(len(cols)):
            X, good = self.factorization.solve(Pvals, np.broadcast_to(E[:, k], (B, n)),
                                               return_status=True)
            if not np.all(good):
                b = int(np.flatnonzero(~np.asarray(good))[0])
                raise SingularModelError(
                    f"covariance: unbounded at batch index {b}: the data do not determine "
                    f"that state (its ok is False) and no prior covers the undetermined "
                    f"directions", batch_indices=(b,))
            out[:, :, k] = np.asarray(X)[:, cols]
        return out
