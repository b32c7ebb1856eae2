"""Exactly determined estimation: the permuted static-pivot sparse LU of [D; D_Y] (seed 001,
Sec. VI: eq. 17 solved with the offline/online split of Sec. IV-D, V-D).

Offline: pivots from a magnitude-weighted matching (magnitude_matching), then sparsedyn.planner's
fill-reducing column order with minimum flops for the worst-case pattern. Online: one batched
numeric LU + substitutions per state. A state whose static pivot vanishes is re-solved by the
planner with partial pivoting. A state that is singular or nearly so (e.g. both feet flat and
parallel under the slippery-floor assumption, a stretched knee) is reported in the status mask
with NaN in its solution — never a garbage number: the reference route (solve) applies the MAP
route's data-only identifiability test (solve_map.Identifiability, unit weights, as least
squares) to every state. The compiled route (CompiledExact) cannot see it in its pivots (a
static pivot of a nearly singular state need not be small: on a stretched chain it scales with
the square root of the smallest singular value), so it solves each batch twice, the second time
with the readings perturbed by a fixed random delta, and sends every state whose response
(x' - x, in units of each variable's typical data information) exceeds PROBE_GAIN |delta| to
the reference route: the response to a random delta is ~|delta| / sigma_min.

Preconditions: the problem is square (as many rows as unknowns) and structurally well-posed.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import min_weight_full_bipartite_matching

from ..errors import IllPosedError
from ..kinematics import forward_kinematics
from .routes import CompiledRoute

#: backward error max|A x - b| / (max|A| max|x| + max|b|) above which a solution is not trusted
#: (a small but nonzero generic pivot): the state is re-solved with partial pivoting
BACKWARD_TOL = 1e-11

#: the compiled route's probe: a response above PROBE_GAIN max|delta| (sigma_min of the
#: column-equilibrated [D; D_Y] below ~1e-4, the reference test's threshold being 1e-6) sends the
#: state to the reference route
PROBE_GAIN = 1e3


def magnitude_matching(problem, rng=0, n_states=3):
    """Mask (nnz,) of one entry per row and column maximising the product of |entry| / column max
    over the median magnitudes at a few random states (Duff-Koster MC64 weighting)."""
    rng = np.random.default_rng(rng)
    model, P = problem.model, problem.pattern
    mags = []
    for _ in range(n_states):
        kin = forward_kinematics(model, model.random_configuration(rng), rng.normal(size=model.nv))
        mags.append(np.abs(problem.values(kin)[0]))
    mag = np.maximum(np.median(mags, axis=0), 1e-300)
    cols = np.repeat(np.arange(P.shape[1]), np.diff(P.indptr))
    colmax = np.maximum.reduceat(mag, P.indptr[:-1])
    weight = np.log(colmax[cols]) - np.log(mag) + 1.0          # >= 1: every entry stays an edge
    r, c = min_weight_full_bipartite_matching(sp.csr_matrix((weight, (P.indices, cols)), shape=P.shape))
    ids = sp.csc_matrix((np.arange(1, P.nnz + 1, dtype=float), P.indices, P.indptr), shape=P.shape)
    chosen = np.asarray(ids[r, c]).ravel().astype(np.int64) - 1
    mask = np.zeros(P.nnz, bool)
    mask[chosen] = True
    return mask


class ExactSolver:
    """Static-pivot LU plan of a square estimation problem."""

    method = "exact"

    def __init__(self, problem, ordering="auto", backend="auto", rng=0, factorization=None):
        from ..planner import plan_factorization
        n_rows, n_cols = problem.shape
        if n_rows != n_cols:
            raise IllPosedError(
                f"{problem.describe()}: {n_rows} equations for {n_cols} unknowns: the exact (LU) "
                f"route needs a square system; use method='map' or 'lstsq'")
        # Pivots: a maximum-product matching on typical magnitudes (MC64 style). Restricting
        # pivots to q-independent entries (the planner's default) is impossible here (the pivot
        # chain from tau_root = 0 to an unknown hand wrench runs through joint transforms) and
        # unwise (URDF round-off leaves 1e-11 constants); Nori's plan (Remark 4) pivots on
        # worst-case entries, nonzero except on a measure-zero set of states. The planner's
        # breakdown test and the backward-error test below catch the states where such a pivot
        # is (nearly) zero.
        self.problem = problem
        if factorization is None:            # else a stored plan's (estimation/storage.py)
            factorization = plan_factorization(problem.pattern, magnitude_matching(problem, rng),
                                               constant_values=problem.constant_values,
                                               ordering=ordering, backend=backend)
        self.factorization = factorization
        self._rows, self._cols = self.factorization.entries
        self._identifiability = None

    @property
    def stats(self):
        return dict(self.factorization.stats)

    def compiled(self, problem):
        """The compiled route (CompiledExact): assembly of [D; D_Y] fused with this LU program
        and the same backward-error test, and the conditioning probe."""
        from ..ir.fused import FusedProgram
        from ..kernels.assemble_numba import FusedSolver
        from .compiled_rows import sensor_assembly
        from .solve_map import typical_information
        fused = FusedSolver(FusedProgram(sensor_assembly(problem), self.factorization.program, [],
                                         [], residual=(self._rows, self._cols, BACKWARD_TOL)))
        scale = np.sqrt(typical_information(problem, np.ones(problem.shape[0])))
        delta = np.random.default_rng(12345).normal(size=problem.rows.n_rows)
        return CompiledExact(fused, delta, scale)

    @property
    def identifiability(self):
        """The data-only identifiability test of least squares (unit weights), built on use."""
        if self._identifiability is None:
            from .solve_map import Identifiability, NormalEquations
            self._identifiability = Identifiability(NormalEquations(self.problem.pattern),
                                                    np.ones(self.problem.shape[0]))
        return self._identifiability

    def solve_square(self, values, rhs):
        """(x (B, n), ok (B,)) of the LU with its pivot and backward-error checks alone (states
        that fail them re-solved with partial pivoting, ok False where that finds the matrix
        singular), for a caller that decides determination itself (a dynamics problem whose
        system is nonsingular wherever its physics is, however ill-conditioned)."""
        x, ok = self.factorization.solve(values, rhs, return_status=True)
        x, ok = np.array(x), np.array(ok)
        self._backward_error_check(values, rhs, x, ok)
        return x, ok & np.isfinite(x).all(axis=1)

    def solve(self, values, rhs):
        """(x (B, n), ok (B,), undetermined (B, n) bool): x is NaN where ok is False (a
        singular state, or one the data do not determine: solve_map.Identifiability)."""
        x, ok = self.solve_square(values, rhs)
        determined, undetermined, _ = self.identifiability(values)
        ok &= determined
        x[~ok] = np.nan
        return x, ok, undetermined

    def _backward_error_check(self, values, rhs, x, ok):
        """Re-solve with partial pivoting (splu, with the planner's rank test) every state whose
        residual is not at round-off level: a small but nonzero generic pivot loses accuracy."""
        from scipy.sparse.linalg import splu
        from .solve_map import scatter
        n_entries = len(self._rows)
        res = (scatter(np.arange(n_entries), self._rows, n_entries, rhs.shape[1])
               @ (values * np.nan_to_num(x)[:, self._cols]).T).T - rhs
        scale = np.abs(values).max(axis=1) * np.abs(x).max(axis=1) + np.abs(rhs).max(axis=1)
        suspect = np.flatnonzero(ok & ~(np.abs(res).max(axis=1) <= BACKWARD_TOL * scale))
        n = x.shape[1]
        for b in suspect:
            lu = splu(self.factorization.assemble(values[b]))
            diag = np.abs(lu.U.diagonal())
            if diag.min() > max(n, 10) * np.finfo(float).eps * diag.max():
                x[b] = lu.solve(rhs[b])
            else:
                ok[b], x[b] = False, np.nan


class CompiledExact(CompiledRoute):
    """The compiled exact route: the fused kernel (FusedSolver) on the readings y and on
    y + delta; run() flags, besides the kernel's broken states, those whose response to delta
    says they are nearly singular (module docstring)."""

    def __init__(self, fused, delta, scale):
        self.fused, self.delta, self.scale = fused, delta, scale
        self.threshold = PROBE_GAIN * float(np.abs(delta).max())

    def ready(self):
        return self.fused.ready()

    def _c_twin(self):
        """The same route on the fused program as generated C (backends/generated_c.py)."""
        from ..backends.generated_c import CKernel
        return CompiledExact(CKernel(self.fused.ir), self.delta, self.scale)

    def run(self, q, v, y, full=True, threads=1):
        """(out, x (B, n), flag (B,) bool) for checked q, v and readings y (B, n_sensor_rows):
        flag marks states the reference route must solve (FusedSolver.run's, plus the probe)."""
        out, x, broken = self.fused.run(q, v, y, full=True, threads=threads)
        _, x2, broken2 = self.fused.run(q, v, y + self.delta, full=True, threads=threads)
        with np.errstate(invalid="ignore", over="ignore"):     # (inf - inf: NaN, suspect)
            response = np.abs(x2 - x) * self.scale
        suspect = ~(response.max(axis=1) <= self.threshold)
        return out, x, broken | broken2 | suspect
