"""The compiled online route of MAP / weighted least-squares estimation (solve_map.py's equations,
kernels/normal_numba.py's kernel): offline, N's pattern and the product program (the entry pairs
of solve_map.NormalEquations, retargeted to the plan's permuted lower triangle), a static-pivot
L D L^T plan of N (sparsedyn.planner, symmetric=True: N = A^T W A + diag(p) is SPD, diagonal
pivots) and the sensor rows' assembly program; online, one pass per batch.

One factorization per state: the refinement step reuses it (a substitution), and its pivots
flag the states whose measurements leave a direction undetermined. Those states, and any whose
static pivot breaks down, are re-solved by the reference MAPSolver (CHOLMOD, its refinement step
and its identifiability probe), which also names the undetermined variables.

compiled_map(..., form) chooses between this normal form and the augmented (quasi-definite) form
of compiled_augmented.py by counted flops per state ("auto"), or builds the one asked for.

Preconditions: a MAPSolver of the same problem (its weights, prior and NormalEquations).
"""
from __future__ import annotations

import numpy as np

from .compiled_rows import sensor_assembly

#: pivot test: d_j - p_j <= UNDETERMINED_TOL (N_jj - p_j) flags an undetermined direction. With a
#: likelihood null vector u (L u = 0) the pivot of its last-eliminated variable j is at most
#: u^T diag(p) u / u_j^2 (the prior alone); a determined state keeps d_j - p_j >= the smallest
#: eigenvalue of L scaled by its diagonal, i.e. above the reference probe's ~1e-9 threshold
UNDETERMINED_TOL = 1e-9


def _lookup(csc, r, c):
    from .solve_map import _lookup as lookup
    return lookup(csc, np.asarray(r, dtype=np.int64), np.asarray(c, dtype=np.int64))


MAP_FORMS = ("auto", "normal", "augmented")


def compiled_map(problem, reference, ordering="amd", form="auto"):
    """The compiled MAP route of `form`: "normal" (CompiledMAP, N = A^T W A + P), "augmented"
    (compiled_augmented.AugmentedMAP, the quasi-definite K), or "auto": the one with fewer counted
    flops per state among those that match the reference offline. The choice and both costs are
    in the route's stats (map_form, map_cost_normal, map_cost_augmented)."""
    from .compiled_augmented import AugmentedMAP, AugmentedUnavailable
    if form not in MAP_FORMS:
        raise ValueError(f"map_form: expected one of {MAP_FORMS}, got {form!r}")
    routes, costs = {}, {}
    if form in ("auto", "normal"):
        routes["normal"] = CompiledMAP(problem, reference, ordering=ordering)
    if form in ("auto", "augmented"):
        try:
            routes["augmented"] = AugmentedMAP(problem, reference, ordering=ordering,
                                               assembly=getattr(routes.get("normal"), "assembly",
                                                                None))
        except AugmentedUnavailable:
            if form == "augmented":
                raise
    for name, route in routes.items():
        costs[name] = route.cost
    chosen = min(costs, key=costs.get)
    route = routes[chosen]
    route.form = chosen
    route.costs = {"map_cost_" + k: costs.get(k, -1) for k in MAP_FORMS[1:]}
    return route


class CompiledMAP:
    """Fused assembly + normal equations + static-pivot L D L^T of N for a batch of states."""

    def __init__(self, problem, reference, ordering="amd"):
        from ..kernels.assemble_numba import lanes_for
        from ..kernels.lu_numba import lane_checks
        from ..kernels.lu_numpy import RECIP, split_runs
        from ..planner import plan_factorization
        self.problem, self.reference = problem, reference
        normal = reference.normal
        Np = normal.pattern
        n = Np.shape[0]
        is_diag = np.zeros(Np.nnz, dtype=bool)
        is_diag[normal.diag] = True
        self.factorization = plan_factorization(Np, is_diag, ordering=ordering, symmetric=True)
        p = self.factorization.program
        cols = np.repeat(np.arange(n), np.diff(Np.indptr))
        inv = np.empty(n, dtype=np.int64)
        inv[p.row_perm] = np.arange(n)
        in_lower = inv[Np.indices] >= inv[cols]       # the part of N the program reads
        if not (p.symmetric and np.array_equal(np.sort(p.load_entries), np.flatnonzero(in_lower))):
            raise AssertionError("the L D L^T plan of N must load its whole lower triangle "
                                 "(no constants)")
        if not p.split:
            raise AssertionError("the plan of N must split factorization and substitution")
        recips = np.flatnonzero(p.op_code == RECIP)
        piv_slot = np.full(n, -1, dtype=np.int64)
        piv_slot[p.row_perm[p.op_b[recips]]] = p.op_t[recips]
        if (piv_slot < 0).any() or recips.size != n:
            raise AssertionError("the plan of N must have one reciprocal pivot per variable")
        # each pair's product goes to whichever of N_ij, N_ji the program reads
        readable = np.where(in_lower, np.arange(Np.nnz), _lookup(Np, cols, Np.indices))
        self.assembly = sensor_assembly(problem)
        m, nA = problem.shape[0], problem.pattern.nnz
        rows = nA + np.arange(m)
        a_dest, f_dest, zero_dest, y_dest = self.assembly.bind(rows, [])
        xr = self.assembly.bind_extra(rows)
        a_const = np.setdiff1d(np.arange(nA), self.assembly.dynamic_index)
        self._bound = (y_dest, *self.assembly.model_arrays(), *xr, a_dest, f_dest, zero_dest,
                       a_const, self.assembly.template[a_const], normal.rows, normal.cols,
                       np.ascontiguousarray(reference.weights),
                       np.ascontiguousarray(reference.prior_precision),
                       np.ascontiguousarray(reference.prior_precision * reference.prior_mean),
                       normal.e1, normal.e2, np.ascontiguousarray(reference.weights[normal.prow]),
                       readable[normal.t1], normal.diag,
                       (p.rhs0 + inv).astype(np.int64), p.n_slots, p.rhs0, p.col_perm,
                       *split_runs(p),
                       p.op_t, p.op_a, p.op_b, *lane_checks(p), p.tol, piv_slot,
                       UNDETERMINED_TOL)
        self.lanes = lanes_for(p.n_slots + nA + m)
        self.n = n

    @property
    def cost(self):
        """Counted flops per state: N (3 per product pair, 1 per prior term), g (3 per entry of
        A, 1 per variable), the L D L^T with its first substitution, and the refinement step (residual
        2 and gradient 3 per entry of A, 2 per variable, one more substitution)."""
        s, nA = self.factorization.stats, self.problem.pattern.nnz
        pairs = self.reference.normal.e1.size
        return int(3 * pairs + 8 * nA + 4 * self.n + s["flops"] + s["solve_flops"])

    @property
    def stats(self):
        return {"lu_" + k: v for k, v in self.factorization.stats.items()}

    def run(self, q, v, y, threads=1):
        """(x (B, n), flag (B,) int: 0 solved, 1 pivot breakdown, 2 undetermined direction)
        for checked q (B, nq), v (B, nv), readings y (B, n_sensor_rows)."""
        from ..kernels.normal_numba import run_map
        q, v, y = (np.ascontiguousarray(a, dtype=np.float64) for a in (q, v, y))
        B = q.shape[0]
        x = np.empty((B, self.n))
        flag = np.zeros(B, dtype=np.int64)
        b = self._bound
        run_map((q, v, y) + b + (x, flag), B, self.lanes, threads)
        return x, flag
