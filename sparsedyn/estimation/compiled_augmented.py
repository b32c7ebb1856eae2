"""The compiled MAP route through the augmented (quasi-definite) system instead of the normal
matrix N (solve_map.py's posterior, kernels/normal_numba.run_augmented):

    K [lam; x] = [r; -Sigma_d^-1 mu],   K = [[W^-1, A], [A^T, -Sigma_d^-1]],   lam = W (r - A x)

whose x block is the reference MAP's Sigma_d^-1 (x - mu) = A^T W (r - A x) (same prior mean, same
weights W: the dynamics rows are soft constraints with variance Sigma_D, as in MAPSolver). K keeps
A's entries (each twice) plus a constant diagonal; W^-1 > 0 and Sigma_d^-1 > 0 make it
quasi-definite, hence factorizable with diagonal pivots in any symmetric order: the planner's
candidates keep the safe diagonal (the matching prefers it, and every diagonal entry is a nonzero
constant), which `AugmentedMAP` asserts (row_perm == col_perm).

Stable-in-principle is not accurate-in-practice: the static LDL^T's growth is ~|A|^2 / (w^-1 p),
huge for BERDY's variances (1e-8 dynamics, 1e4 prior). Offline, the route is therefore run at
random states against the reference MAPSolver with 0, 1, ... refinement steps on K's residual;
it keeps the fewest steps that agree to CHECK_TOL, or is unavailable (AugmentedUnavailable).

Undetermined directions are flagged by the normal form's probe (compiled_map.probe_vectors),
not by pivots: in a fill-reducing order many x pivots are eliminated before their measurement
rows and carry no information about the likelihood.

The form needs a proper prior on every variable: with the uninformative default (a ridge of
1e-15, solve_map.py) K's static factorization has no usable accuracy and its refinement would
converge to the ridge-biased answer, so the form is unavailable then (AugmentedUnavailable).

Preconditions: a MAPSolver of the same problem (its weights, prior).
"""
from __future__ import annotations

import numpy as np

from ..system.combine import combine_parts
from .compiled_map import PROBE_TOL, probe_vectors
from .compiled_rows import sensor_assembly
from .routes import CompiledRoute

#: offline agreement (relative, max norm) of the augmented route with the reference MAP
CHECK_TOL = 1e-13
MAX_REFINE = 3


class AugmentedUnavailable(ValueError):
    """The augmented form cannot match the reference MAP to CHECK_TOL on this problem."""


def augmented_pattern(problem, reference):
    """CombinedPattern of K from three parts: A (rows, m + cols), A^T, the diagonal [W^-1; -p]."""
    m, n = problem.shape
    A = problem.pattern
    rows = A.indices.astype(np.int64)
    cols = np.repeat(np.arange(n), np.diff(A.indptr)).astype(np.int64)
    cv = problem.constant_values
    diag = np.r_[1.0 / reference.weights, -reference.prior_precision]
    return combine_parts((m + n, m + n), [(rows, m + cols, cv), (m + cols, rows, cv),
                                          (np.arange(m + n), np.arange(m + n), diag)])


class AugmentedMAP(CompiledRoute):
    """Fused assembly + static-pivot LU of K + probe + refinement for a batch of states."""

    JIT_KEY = "the augmented MAP estimation kernel"

    @staticmethod
    def jit_entry_points():
        from ..kernels.normal_numba import _aug_parallel, _aug_serial
        return _aug_serial, _aug_parallel

    def __init__(self, problem, reference, ordering="amd", assembly=None, refine=None,
                 factorization=None):
        from ..ir.fused import AssemblyArrays, ExtraRowArrays, RhsDestinations
        from ..kernels.assemble_numba import lanes_for
        from ..kernels.lu_numba import prepare
        from ..kernels.normal_numba import AugmentedArrays
        from ..planner import plan_factorization
        self.problem, self.reference = problem, reference
        if reference.ridge.any():
            raise AugmentedUnavailable(
                "map_form: the augmented form needs a proper prior on every variable "
                "(covariances['prior']); least squares and the uninformative default prior "
                "(a 1e-15 ridge) use map_form='normal'")
        m, n = problem.shape
        nA = problem.pattern.nnz
        K = augmented_pattern(problem, reference)
        self.pattern = K.pattern
        self.factorization = factorization if factorization is not None else plan_factorization(
            K.pattern, K.always_nonzero, K.constant_values, ordering=ordering)
        self.factorization.verify_pattern(K.pattern)
        p = self.factorization.program
        if not np.array_equal(p.row_perm, p.col_perm):
            raise AssertionError("the LU plan of K must pivot on the diagonal (symmetric order)")
        if not p.split:
            raise AssertionError("the LU plan of K must split factorization and substitution")
        # K's CSC position of each of A's entries in the A block and in the A^T block
        pos = np.empty(K.gather.size, dtype=np.int64)
        pos[K.gather] = np.arange(K.gather.size)
        dyn = np.flatnonzero(np.isnan(problem.constant_values))
        self.assembly = sensor_assembly(problem) if assembly is None else assembly
        rows = nA + np.arange(m)
        dest = RhsDestinations(*self.assembly.bind(rows, []))
        xr = ExtraRowArrays(*self.assembly.bind_extra(rows))
        a_const = np.setdiff1d(np.arange(nA), self.assembly.dynamic_index)
        inv = np.empty(m + n, dtype=np.int64)
        inv[p.row_perm] = np.arange(m + n)
        c, z_tol = probe_vectors(problem, reference)
        probe = np.r_[np.zeros(m), -c]
        A = problem.pattern
        loads = AugmentedArrays(
            a_const, self.assembly.template[a_const], A.indices.astype(np.int64),
            np.repeat(np.arange(n), np.diff(A.indptr)).astype(np.int64), dyn, pos[dyn],
            pos[nA + dyn], np.ascontiguousarray(1.0 / reference.weights),
            np.ascontiguousarray(reference.prior_precision),
            np.ascontiguousarray(reference.prior_precision * reference.prior_mean), probe,
            (p.rhs0 + inv).astype(np.int64), np.ascontiguousarray(z_tol, dtype=float))
        self._head = (AssemblyArrays(*self.assembly.model_arrays()), xr, dest, loads, prepare(p))
        self.lanes = lanes_for(p.n_slots + nA + 2 * (m + n))
        self.n, self.m = n, m
        self.refine = self._calibrate() if refine is None else int(refine)

    def _c_twin(self):
        raise NotImplementedError("backend 'c': the augmented MAP form runs on numba only; "
                                  "compile with map_form='normal'")

    def _calibrate(self, B=3, rng=0):
        """Fewest refinement steps with which the route matches the reference at random states."""
        problem = self.problem
        rng = np.random.default_rng(rng)
        q = problem.model.random_configuration(rng, batch=B)
        v = rng.normal(size=(B, problem.model.nv))
        readings = {s.name: rng.normal(size=(B, s.size)) for s in problem.sensors}
        y = problem.rows.readings_vector(problem.check_readings(readings, B), B)
        values, rhs, _, _ = problem.assemble(q, v, readings)
        x_ref, ok = self.reference.solve(values, rhs)[:2]
        err = np.inf
        for steps in range(MAX_REFINE + 1):
            x, flag = self.run(q, v, y, refine=steps)
            err = np.abs(x - x_ref).max() / np.abs(x_ref).max()
            if (flag == 1).any():
                break                       # static pivots fail: every state would be re-solved
            if ((flag == 2) != ~ok).any():
                # a prior comparable to the likelihood: the probe (N^-1 p delta) cannot tell
                # weakly from un-determined directions, every state would be re-solved
                raise AugmentedUnavailable(
                    f"map_form: with these covariances the augmented route's probe flags "
                    f"determined states of {problem.describe()} (prior precision within "
                    f"{1 / PROBE_TOL:.0e} of the likelihood); use map_form='normal'")
            if err <= CHECK_TOL:
                return steps
        raise AugmentedUnavailable(
            f"map_form: the augmented system's static factorization of {problem.describe()} "
            f"differs from the reference MAP by {err:.1e} after {steps} refinement steps or its "
            f"pivot checks fail (growth ~|A|^2 / (variance x prior precision)); use "
            f"map_form='normal'")

    @property
    def cost(self):
        """Counted flops per state: LU + substitutions (solution, probe, refinement), K's
        residual (2 flops per entry of A in each block, 2 per diagonal entry) per step."""
        s = self.factorization.stats
        nA, mn = self.problem.pattern.nnz, self.m + self.n
        return int(s["flops"] + s["solve_flops"] + self.refine * (s["solve_flops"] + 4 * nA + 2 * mn))

    @property
    def stats(self):
        return {**{"lu_" + k: v for k, v in self.factorization.stats.items()},
                "K_n": self.pattern.shape[0], "K_nnz": self.pattern.nnz, "refine": self.refine}

    def run(self, q, v, y, threads=1, refine=None):
        """(x (B, n), flag (B,) int: 0 solved, 1 pivot breakdown, 2 undetermined direction)
        for checked q (B, nq), v (B, nv), readings y (B, n_sensor_rows)."""
        from ..kernels.normal_numba import EstimateOutputs, run_augmented
        q, v, y = (np.ascontiguousarray(a, dtype=np.float64) for a in (q, v, y))
        B = q.shape[0]
        res = EstimateOutputs(np.empty((B, self.n)), np.zeros(B, dtype=np.int64))
        steps = self.refine if refine is None else int(refine)
        run_augmented((q, v, y) + self._head + (steps, res), B, self.lanes, threads)
        return res
