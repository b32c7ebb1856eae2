"""The compiled online route of MAP / weighted least-squares estimation (solve_map.py's equations,
kernels/normal_numba.py's kernel): offline, a fill-reducing order of N = A^T W A + diag(p) (SPD:
diagonal pivots are stable in any order), the pair-chain program of its Crout L D L^T with N
formed inside the chains (planner/chain_ldlt.py) and the sensor rows' assembly program bound to the
program's slots; online, one pass per batch.

One factorization per state: the refinement step reuses it (a substitution), and so does the
identifiability probe z = N^-1 c (probe_vectors): a state is flagged for the reference route when
the probe responds on some variable, or when a pivot hardly gets anything from the likelihood.
Where only the probe responds (a poorly conditioned state: BERDY's variances, dynamics rows 1e8
times more precise than the sensors, put typical walking states there), its second step of
inverse iteration (PROBE2_TOL) tells a determined direction of eigenvalue above ~1e-9 from an
undetermined one; such a state is accepted with a second refinement step.
The probe is conservative (it flags every state the reference's data-only test calls
undetermined, and some determined ones near the threshold); flagged states, and any whose static
pivot breaks down or whose result is not finite, are re-solved by the reference MAPSolver
(CHOLMOD, its refinement step and its identifiability test), which decides ok and names the
undetermined variables.

map_route.compiled_map(..., form) chooses between this normal form and the augmented
(quasi-definite) form of compiled_augmented.py.

Preconditions: a MAPSolver of the same problem (its weights, prior and NormalEquations).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..kinematics import forward_kinematics
from ..kernels.work_memory import WorkArrays
from ..ir.chain_program import PRIOR_ROWS
from .compiled_rows import sensor_assembly
from .routes import CompiledRoute

#: pivot test: d_j - p_j <= UNDETERMINED_TOL (N_jj - p_j) flags a direction the likelihood hardly
#: determines (d_j / N_jj is at least the smallest eigenvalue of the Jacobi-scaled matrix, so a
#: determined state of the reference test, >= solve_map.IDENTIFIABLE = 1e-12, is flagged only
#: when its pivots say it is within 1e3 of the threshold)
UNDETERMINED_TOL = 1e-9
#: the probe z = N^-1 c, c_j = max(p_j, PROBE_RIDGE J_j) delta_j / sqrt(J_j) (J: the typical data
#: information, delta: random), flags |z_j| sqrt(J_j) > PROBE_TOL max|delta|. In J's units a
#: direction of eigenvalue lambda responds ~ max(p, PROBE_RIDGE) / (lambda + p): ~1 or more on an
#: undetermined direction whatever the prior, 0.1 at the reference's threshold for the normal
#: equations, lambda = solve_map.WELL_CONDITIONED = 1e-8 (flagged unless the direction hides
#: from delta; the reference then decides ok and solves), under PROBE_TOL above ~1e-6
PROBE_RIDGE = 1e-9
PROBE_TOL = 1e-3
#: where the probe responds, its second step z2 = N^-1 (J z) (inverse iteration in J's units)
#: responds ~ PROBE_RIDGE / (lambda + p)^2: under PROBE2_TOL for lambda above ~1e-9 (the
#: normal equations, refined twice, still accurate there: solve_map.WELL_CONDITIONED), above
#: it by >= 1e5 on a direction the data do not determine (lambda < solve_map.IDENTIFIABLE),
#: provided every variable's prior is under PRIOR2_MAX in J's units (else the step accepts
#: nothing: a strong prior hides an undetermined direction from inverse iteration)
PROBE2_TOL = 1e9
PRIOR2_MAX = 2e-12


def probe_vectors(problem, reference):
    """(c (n,), z_tol (n,)) of the compiled routes' probe for a MAPSolver of `problem`:
    z = N^-1 c flags a state where |z_j| > z_tol_j for some j (see PROBE_RIDGE)."""
    J = reference.information
    delta = np.random.default_rng(12345).normal(size=J.size)
    scale = np.sqrt(J)
    c = np.maximum(reference.prior_precision, PROBE_RIDGE * J) * delta / scale
    return c, PROBE_TOL * float(np.abs(delta).max()) / scale


def second_step_tolerances(z_tol, prior, J, active):
    """z2_tol (B, n) of the probe's second step (PROBE2_TOL) from the first step's z_tol (B, n),
    or -1 in every column of a state where an active variable's prior precision exceeds
    PRIOR2_MAX J (the second step may not accept it)."""
    eligible = ~((prior > PRIOR2_MAX * J) & active).any(axis=1, keepdims=True)
    return np.where(eligible, z_tol * (PROBE2_TOL / PROBE_TOL), -1.0)


def typical_squares(problem, rng=0, n_states=3):
    """Each entry's typical square A_e^2 (nnz,), the median over a few random states: with row
    weights w, the typical information of variable j is sum_(e in column j) w_row(e) A_e^2 (the
    per-sample probe's scale, as solve_map.typical_information is the plan's)."""
    rng = np.random.default_rng(rng)
    model = problem.model
    out = []
    for _ in range(n_states):
        kin = forward_kinematics(model, model.random_configuration(rng), rng.normal(size=model.nv))
        out.append(problem.values(kin)[0] ** 2)
    return np.median(out, axis=0)


class CompiledMAP(CompiledRoute):
    """Fused assembly + pair-chain L D L^T of N (planner/chain_ldlt.py) for a batch of states.

    per_sample: the program reads the row weights, the prior and which variables are active
    per state (run(..., sample=SampleData)): every entry of A is written per state as
    W^1/2 A diag(active), the prior's numbers into their slots (kernels/normal_numba.py,
    SampleInputs); the pattern, the order and the program are the same for every sample."""

    JIT_KEY = "the MAP estimation kernel"

    @staticmethod
    def jit_entry_points():
        from ..kernels.normal_numba import _map_parallel, _map_serial
        return _map_serial, _map_parallel

    def __init__(self, problem, reference, ordering="amd", per_sample=False, program=None):
        from ..ir.fused import AssemblyArrays, ExtraRowArrays, RhsDestinations
        from ..kernels.assemble_numba import lanes_for
        from ..kernels.normal_numba import MapSlots
        from ..planner.orderings import column_order
        from ..planner.chain_ldlt import plan_chains
        self.problem, self.reference = problem, reference
        normal = reference.normal
        self.ordering = ordering
        # N's diagonal is its safe matching; a stored plan (estimation/storage.py) brings its
        # program
        perm = None if program is not None else column_order(ordering, normal.pattern)
        self.assembly = sensor_assembly(problem)
        A = problem.pattern
        m, n = problem.shape
        assembled = np.zeros(A.nnz, dtype=bool)
        assembled[self.assembly.dynamic_index] = True
        self.per_sample = bool(per_sample)
        p = reference.prior_precision
        probe, z_tol = probe_vectors(problem, reference)
        if program is not None:
            self.program = prog = program
        elif self.per_sample:       # every entry and prior number read per state, unit weights
            ones = np.ones(n)
            self.program = prog = plan_chains(
                A, np.ones(A.nnz, dtype=bool), self.assembly.template, np.ones(m), ones, ones,
                perm, normal.pattern, gradient_prior=ones, probe=ones, per_sample=True,
                probe_scale=ones)
        else:
            self.program = prog = plan_chains(
                A, assembled, self.assembly.template, reference.weights, p,
                p * reference.prior_mean, perm, normal.pattern,
                gradient_prior=reference.gradient_precision, probe=probe,
                probe_scale=reference.information)
        # the assembly writes A's dynamic entries and rows straight into the program's slots
        slot_of = np.concatenate([prog.entry_slot, prog.row_slot])
        dest = RhsDestinations(*self.assembly.bind(prog.row_slot, []))
        xr = ExtraRowArrays(*self.assembly.bind_extra(prog.row_slot))
        xr = xr._replace(t_dest=slot_of[xr.t_dest])                 # entries of A
        model = AssemblyArrays(*self.assembly.model_arrays())
        model = model._replace(x_dest=slot_of[model.x_dest])        # entries of A
        if (xr.t_dest < 0).any() or (model.x_dest < 0).any():
            raise AssertionError("the assembly writes only A's dynamic entries")
        slots = MapSlots(int(prog.one), int(prog.factor_end), int(prog.solve_end),
                         int(prog.resid_end), int(prog.probe_end), prog.x_slot, prog.d_slot,
                         prog.nkk_slot, prog.z_slot, prog.y_slot, float(UNDETERMINED_TOL))
        self._bound = (model, xr, dest, prog.chains, slots)
        i64, f64 = np.zeros(0, dtype=np.int64), np.zeros(0)
        if self.per_sample:
            e_value = np.array(self.assembly.template, dtype=float)
            e_value[assembled] = np.nan                      # written by the assembly
            self.sample_slots = (prog.entry_slot, A.indices.astype(np.int64),
                                  np.repeat(np.arange(n), np.diff(A.indptr)).astype(np.int64),
                                  e_value, prog.row_slot, prog.prior_slot)
            # J_b = (typical squares of A's entries, (m, n))^T w_b
            self.entry_squares = typical_squares(problem)
            self._typical_squares = sp.csr_matrix(
                (self.entry_squares, (A.indices, self.sample_slots[2])), shape=(m, n))
            self.delta = np.random.default_rng(12345).normal(size=n)
            self.sample_tol = PROBE_TOL * float(np.abs(self.delta).max())   # z_tol = this / sqrt(J)
            self.sample_tol2 = self.sample_tol * (PROBE2_TOL / PROBE_TOL)   # z2_tol likewise
            self.probe_ridge, self.prior2_max = PROBE_RIDGE, PRIOR2_MAX
        else:
            self.sample_slots = (i64, i64, i64, f64, i64,
                                 np.zeros((len(PRIOR_ROWS), 0), dtype=np.int64))
            z_tol = np.ascontiguousarray(z_tol, dtype=float)[None]
            z2_tol = second_step_tolerances(z_tol, p[None], reference.information[None],
                                            np.ones((1, n), dtype=bool))
            self._static_tests = (np.zeros((1, 0)), np.ones((1, n)),
                                  np.zeros((1, len(PRIOR_ROWS), 0)),
                                  np.ascontiguousarray(p, dtype=float)[None], z_tol,
                                  np.ascontiguousarray(z2_tol))
        self.lanes = lanes_for(prog.n_slots)
        self.n = problem.shape[1]
        # the kernel's work arrays, views of one buffer kept between calls: a fresh
        # multi-megabyte array would cost its page faults on every call
        self._work = WorkArrays()

    def _c_twin(self):
        """The program as generated C (backends/c_chains.py)."""
        from ..backends.c_chains import CMapKernel
        return CMapKernel(self)

    @property
    def cost(self):
        """Counted flops per state: the chain program's factor part (N formed inside it), two
        solves, one residual and the probe (planner/chain_ldlt.py)."""
        f = self.program.flops
        return int(f["factor"] + 2 * f["solve"] + f["resid"] + f["probe"])

    @property
    def stats(self):
        prog = self.program
        return {"chain_factor_flops": int(prog.flops["factor"]),
                "chain_solve_flops": int(prog.flops["solve"]),
                "chain_resid_flops": int(prog.flops["resid"]),
                "chain_probe_flops": int(prog.flops["probe"]),
                "chain_probe2_flops": int(prog.flops.get("probe2", 0)), "chain_nnz_L": prog.nnz_L,
                "chain_pairs": int(prog.chains.pa.size),
                "chain_instructions": int(prog.chains.ins_t.size),
                "chain_slots": prog.n_slots, "chain_ordering": self.ordering}

    def sample_inputs(self, sample):
        """The kernel's SampleInputs of a per-sample call (a SampleData of B states): sqrt of
        the row weights, the active columns, the prior's numbers (PRIOR_ROWS) and the probe's
        right-hand side and tolerances, scaled by each state's typical information (as
        probe_vectors does with the plan's)."""
        from ..kernels.normal_numba import SampleInputs
        active = sample.active.astype(float)
        J = np.asarray(self._typical_squares.T @ sample.weights.T).T      # (B, n)
        smallest = np.where(J > 0, J, np.inf).min(axis=1, keepdims=True)
        J = np.where(J > 0, J, np.where(np.isfinite(smallest), smallest, 1.0))
        scale = np.sqrt(J)
        c = np.maximum(sample.prior, self.probe_ridge * J) * self.delta / scale * active
        z_tol = self.sample_tol / scale
        z2_tol = second_step_tolerances(z_tol, sample.prior, J, sample.active)
        prior = np.stack((sample.prior, sample.gradient, sample.prior * sample.mean, c, J),
                         axis=1)
        return SampleInputs(*self.sample_slots, np.ascontiguousarray(np.sqrt(sample.weights)),
                            np.ascontiguousarray(active), np.ascontiguousarray(prior),
                            np.ascontiguousarray(sample.prior), np.ascontiguousarray(z_tol),
                            np.ascontiguousarray(z2_tol))

    def run(self, q, v, y, threads=1, sample=None):
        """(x (B, n), flag (B,) int: 0 solved, 1 pivot breakdown or a result not finite, 2 a
        direction the data may not determine) for checked q (B, nq), v (B, nv), readings
        y (B, n_sensor_rows); sample: the per-state numbers (solve_map.SampleData) of a
        per-sample route (default: the plan's)."""
        from ..kernels.normal_numba import EstimateOutputs, SampleInputs, map_lanes, run_map
        q, v, y = (np.ascontiguousarray(a, dtype=np.float64) for a in (q, v, y))
        B = q.shape[0]
        if self.per_sample:
            if sample is None:
                sample = self.reference.sample_data(None, B)
            sd = self.sample_inputs(sample)
        elif sample is not None:
            raise ValueError("this compiled route was planned without per_sample=True: it takes "
                             "no per-sample weights, prior or contacts")
        else:
            sd = SampleInputs(*self.sample_slots, *self._static_tests)
        res = EstimateOutputs(np.empty((B, self.n)), np.zeros(B, dtype=np.int64))
        lanes, groups = map_lanes(B, self.lanes, threads)
        work = self._work.get(groups, self.program.n_slots, lanes)
        run_map((q, v, y) + self._bound + (sd, res), B, work)
        return res
