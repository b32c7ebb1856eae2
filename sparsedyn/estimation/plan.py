"""compile_estimation(problem) -> EstimationPlan, and the Estimate it returns (seed 001, Sec. VI).

    plan = compile_estimation(problem)              # offline: check + LU plan or MAP normal pattern
    est = plan.solve(q, v, readings)                 # online, batched
    est["tau"], est.wrench("l_sole"), est.ok, est.covariance("tau"), est.residual("imu_gyro")

method: "exact" (square: permuted static-pivot LU, solve_exact.py), "map" (BERDY's MAP,
solve_map.py), "lstsq" (weighted least squares), "auto" (exact if square, else lstsq).

ok: est.ok[b] is True exactly when the data determine state b's estimate: the scaled data
information has no eigenvalue below 1e-12 (solve_map.Identifiability: the same test on every
route, with unit weights for "exact" and "lstsq", the plan's weights for "map"; it ignores the
prior). Otherwise ok[b] is False, est.undetermined(b) names the variables, a
SingularStateWarning says so, and the estimate is the prior-regularised one ("map", "lstsq";
"exact" with on_singular="map", the default) or NaN (on_singular="nan"; "raise" raises
SingularModelError). Without a user prior the default is uninformative (solve_map.py): on a
determined state "map" then gives the weighted least-squares estimate. A state whose assembled
system or estimate overflows (inputs too large for double precision) raises NonFiniteError
naming the batch indices and the inputs: no route returns a non-finite number with ok True.

Online backends: "numba" (default when numba imports) is the compiled route: the sensor rows are
part of the assembly program (compiled_rows.py); "exact" runs the fused assembly + LU kernel
(kernels/assemble_numba.FusedSolver), "map"/"lstsq" the fused assembly + pair-chain L D L^T of
the normal equations kernel (compiled_map.py, planner/chain_ldlt.py). States a kernel cannot vouch
for (pivot breakdown, singular or undetermined, refinement wanted) are re-solved by the "numpy"
reference route (NumPy assembly; LU with splu fallback, or MAP with CHOLMOD), which also names the
undetermined variables.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..batch import state
from ..errors import SingularStateWarning, check_assembled, nonfinite_error
from ..problems.plan import Result
from ..sensors import Gyroscope
from ..spatial import Transform, operator_to_linear_first
from .solve_exact import ExactSolver
from .solve_map import MAPSolver


def compile_estimation(problem, method="auto", covariances=None, ordering="auto", backend="auto",
                       map_backend="cholmod", check=True, compiled="auto", map_form="auto"):
    """Plan an EstimationProblem once (offline). `check` runs problem.check() first (raises
    IllPosedError naming undetermined variables). covariances (method "map"): {"dynamics": var,
    <sensor name>: var or (size,) vars, "prior": var, (n,) vars or {kind: var}, "prior_mean":
    value or (n,)}; a row without one gets solve_map.DEFAULT_VARIANCES, a variable without a
    prior the uninformative default (so that MAP without covariances is least squares).
    map_backend ("cholmod" or "lu") is the reference MAP route's factorization. compiled: "auto"
    also builds the compiled online route when numba imports and every sensor has a compiled
    form, True requires it, False skips it.
    map_form: the compiled MAP / lstsq route's system, "normal" (N = A^T W A + P), "augmented"
    (the quasi-definite [[W^-1, A], [A^T, -P]]) or "auto" (fewer counted flops; stats["map_form"])."""
    from .map_route import MAP_FORMS
    if map_form not in MAP_FORMS:
        raise ValueError(f"map_form: expected one of {MAP_FORMS}, got {map_form!r}")
    if check:
        problem.check()
    if compiled not in ("auto", True, False):
        raise ValueError(f"compiled: expected 'auto', True or False, got {compiled!r}")
    n_rows, n_cols = problem.shape
    if method == "auto":
        method = "exact" if n_rows == n_cols else "lstsq"
    if method == "exact":
        solver = ExactSolver(problem, ordering=ordering, backend=backend)
    elif method in ("map", "lstsq"):
        solver = MAPSolver(problem, covariances, method=method, backend=map_backend,
                           ordering="amd" if ordering == "auto" else ordering)
    else:
        raise ValueError(f"method: expected 'auto', 'exact', 'map' or 'lstsq', got {method!r}")
    fast = None
    if compiled is True or (compiled == "auto" and backend != "numpy"):
        try:
            fast = _compiled_route(problem, solver, ordering, map_form)
        except NotImplementedError:
            if compiled is True:
                raise
    return EstimationPlan(problem, solver, covariances, compiled=fast)


def _compiled_route(problem, solver, ordering, map_form="auto"):
    """The compiled online route of a planned solver (NotImplementedError naming a sensor whose
    rows have no compiled form)."""
    if solver.method == "exact":
        return solver.compiled(problem)
    from .map_route import compiled_map
    return compiled_map(problem, solver, ordering="amd" if ordering == "auto" else ordering,
                        form=map_form)


class EstimationPlan:
    """A compiled estimation problem: solve(q, v, readings) for batches of states."""

    def __init__(self, problem, solver, covariances=None, compiled=None):
        self.problem = problem
        self.model = problem.model
        self.system = problem.system
        self.solver = solver
        self.method = solver.method
        self.compiled = compiled
        self._covariances = covariances
        self._fallback = None

    @property
    def stats(self):
        out = dict(self.solver.stats)
        if self.compiled is not None and self.method != "exact":
            out.update({"compiled_" + k: v for k, v in self.compiled.stats.items()})
            out.update(map_form=self.compiled.form, **self.compiled.costs)
        out.update(n_rows=self.problem.shape[0], n_cols=self.problem.shape[1],
                   nnz=self.problem.pattern.nnz, method=self.method, backend=self.backend)
        return out

    @property
    def backend(self):
        """The default online route: "numba" (compiled) if it was built, else "numpy"."""
        return "numpy" if self.compiled is None else "numba"

    @property
    def sensors(self):
        return {s.name: s for s in self.problem.sensors}

    def fallback(self):
        """The MAP solver used for singular states of an exact plan (built on first use)."""
        if self._fallback is None:
            self._fallback = MAPSolver(self.problem, self._covariances, method="map")
        return self._fallback

    def solve(self, q, v, readings, on_singular="map", backend=None, threads=None):
        """Estimate for one state (q (nq,), v (nv,), readings {name: (size,)}) or a batch.

        Returns an Estimate; est.ok[b] is True exactly when the data determine state b's
        estimate (module docstring: a data-only, scale-invariant test, the same on every route
        and backend): an estimate with ok False has directions filled by the prior (or NaN) and
        est.undetermined(b) names them. Raises NonFiniteError (naming batch indices and inputs)
        where the system or the estimate overflows.
        on_singular ("map", "nan", "raise"): what an exact plan does with states that are not
        determined.
        backend: "numba" (compiled route, the default when built) or "numpy" (reference route);
        threads: for "numba", how many threads split the batch (default: all of numba's)."""
        if on_singular not in ("map", "nan", "raise"):
            raise ValueError(f"on_singular: expected 'map', 'nan' or 'raise', got {on_singular!r}")
        backend = self.backend if backend is None else backend
        if backend not in ("numba", "numpy"):
            raise ValueError(f"backend: expected 'numba' or 'numpy', got {backend!r}")
        if backend == "numba" and self.compiled is None:
            raise ValueError("backend: this plan has no compiled route (compile_estimation("
                             "..., compiled=True) says why)")
        model, problem = self.model, self.problem
        q, vecs, B, single = state(model, q, v=vecs_v(v))
        v = vecs["v"]
        single = single and all(np.ndim(r) == 1 for r in (readings or {}).values())
        readings = problem.check_readings(readings, B)
        if backend == "numba":
            threads = _check_threads(threads)
            y = problem.rows.readings_vector(readings, B)
            if self.method == "exact":
                _, x, flag = self.compiled.run(q, v, y, full=True, threads=threads)
            else:
                x, flag = self.compiled.run(q, v, y, threads=threads)
            redo = np.flatnonzero(flag)
            ok = np.ones(B, dtype=bool)
            mask = None
        else:
            redo = np.arange(B)
            x, ok, mask = np.empty((B, problem.shape[1])), np.ones(B, dtype=bool), None
        Pvals = None
        if redo.size:
            sub = {k: r[redo] for k, r in readings.items()}
            with np.errstate(over="ignore", invalid="ignore"):
                values, rhs, _, _ = problem.assemble(q[redo], v[redo], sub)
            check_assembled(problem.describe(), "[D; D_Y] or its right-hand side",
                            self._inputs(q, v, readings), values, rhs, indices=redo)
            xr, okr, maskr, Pr = self._solve_reference(values, rhs, on_singular, redo)
            x[redo], ok[redo] = xr, okr
            if maskr is not None:
                mask = np.zeros(x.shape, dtype=bool)
                mask[redo] = maskr
            if redo.size == B:
                Pvals = Pr
        overflow = np.flatnonzero(~np.isfinite(x).all(axis=1) & ok)
        if overflow.size:           # never a non-finite estimate called ok
            raise nonfinite_error(problem.describe(), "the estimate", overflow.tolist(),
                                  self._inputs(q, v, readings))
        if self.method != "exact" and Pvals is None:
            Pvals = (lambda: self.solver.normal_values(problem.assemble(q, v, readings)[0]))
        est = Estimate(self, x, single, ok, mask, Pvals, (q, v), readings)
        if not ok.all():
            what = {"map": "their MAP estimate is regularised by the prior",
                    "nan": "their estimate is NaN"}.get(on_singular, "")
            if self.method != "exact":
                what = "their estimate is regularised by the prior"
            bad = np.flatnonzero(~ok)
            names = est.undetermined(int(bad[0]))
            warnings.warn(SingularStateWarning(
                f"{len(bad)} of {len(ok)} states are numerically singular for this measurement set "
                f"(batch indices {bad[:10].tolist()}{'...' if len(bad) > 10 else ''}): {what}; "
                f"undetermined at index {bad[0]}: {', '.join(names[:8]) or 'see est.undetermined'}"),
                stacklevel=2)
        return est

    def _solve_reference(self, values, rhs, on_singular, index):
        """The reference route on assembled states (batch indices `index` of the caller's
        batch): (x, ok, undetermined mask or None, P values or None)."""
        Pvals = None
        if self.method == "exact":
            x, ok, undetermined_mask = self.solver.solve(values, rhs)
            bad = np.flatnonzero(~ok)
            if bad.size:
                if on_singular == "raise":
                    from ..errors import SingularModelError
                    where = index[bad].tolist()
                    raise SingularModelError(
                        f"{self.problem.describe()}: [D; D_Y] is numerically singular (the data "
                        f"do not determine the estimate) at batch indices {where[:20]}",
                        batch_indices=where)
                if on_singular == "map":
                    x[bad] = self.fallback().solve(values[bad], rhs[bad])[0]
        else:
            x, ok, undetermined_mask, Pvals = self.solver.solve(values, rhs)
        return x, ok, undetermined_mask, Pvals

    @staticmethod
    def _inputs(q, v, readings):
        """The call's batched inputs by name, for NonFiniteError."""
        return {"q": q, "v": v, **{f"readings[{k!r}]": r for k, r in readings.items()}}


def vecs_v(v):
    if v is None:
        raise ValueError("v: the joint velocities are needed (zeros for a static state)")
    return v


def _check_threads(threads):
    from ..problems.plan import Plan
    return Plan._check_threads(threads)


class Estimate(Result):
    """Estimated variables (problems.plan.Result: est["tau"], est["qdd"], est["f", link], ...)
    plus wrench(link), ok (B,) status, undetermined(b), covariance(kind) (MAP), residual(gyro).

    ok[b] (a bool for a single state) is True exactly when the data determine state b's
    estimate: the column-equilibrated information of the measurements, W^1/2 [D; D_Y] (unit
    weights for "exact" and "lstsq"), has no singular value below 1e-6 (solve_map.IDENTIFIABLE),
    whatever the prior; the estimate is then finite and, without a user prior, the (weighted)
    least-squares one. ok[b] False: some directions are filled by the prior (or NaN, exact
    route with on_singular="nan"); undetermined(b) names their variables."""

    def __init__(self, plan, x, single, ok, undetermined_mask, Pvals, state, readings):
        super().__init__(plan, x, single)
        self.ok = ok[0] if single else ok
        self._ok = ok
        self._undetermined_mask = undetermined_mask
        self._Pvals = Pvals            # (B, nnz_P), or a function computing them on first use
        self._state = state            # (q, v): kinematics for residual() on first use
        self._kin = None
        self._readings = readings

    def wrench(self, link):
        """External wrench on `link` (B, 6), linear-first, link frame: estimated or measured if
        the link has a wrench variable, zero (by assumption) otherwise."""
        model = self._plan.model
        if link not in model.frames:
            raise KeyError(f"model {model.name!r} has no link named {link!r}")
        body = model.frames[link].body
        if self._plan.problem.wrench_links.get(body) == link:
            return self.variable("fx", link)
        B = self.vector.shape[0]
        z = np.zeros((B, 6))
        return z[0] if self._single else z

    def undetermined(self, b=0):
        """Variable blocks that batch element b's measurements do not determine (empty if ok)."""
        if self._ok[b]:
            return []
        if self._undetermined_mask is not None:
            return self._plan.problem.blocks_of_columns(np.flatnonzero(self._undetermined_mask[b]))
        return ["(unknown: solve with on_singular='map' to locate them)"]

    def covariance(self, kind, link=None):
        """Posterior covariance (B, k, k) of tau/qdd (joint space) or of a block (kind, link)."""
        plan = self._plan
        solver = plan.solver if plan.method != "exact" else None
        if solver is None or self._Pvals is None:
            raise ValueError("covariance: only MAP / least-squares plans have a posterior "
                             "covariance (compile with method='map')")
        model, cols = plan.model, plan.system.columns
        if link is None:
            if kind not in ("tau", "qdd"):
                raise KeyError(f"covariance: {kind!r} needs a link name")
            idx = np.concatenate([cols[(kind, i)].indices for i in range(model.nbodies)])
        else:
            body = model.frames[link].body
            idx = cols[(kind, body)].indices
        if callable(self._Pvals):
            self._Pvals = self._Pvals()
        C = solver.covariance(self._Pvals, idx)
        if link is not None and kind in ("a", "f", "fx"):
            C = operator_to_linear_first(_to_link_frame(C, model.frames[link].placement, kind))
        return C[0] if self._single else C

    def residual(self, sensor_name):
        """Reading minus prediction of a Gyroscope (consistency check, no rows in D_Y)."""
        s = self._plan.sensors.get(sensor_name)
        if not isinstance(s, Gyroscope):
            raise KeyError(f"residual: {sensor_name!r} is not a gyroscope of this problem")
        if self._kin is None:
            from ..kinematics import forward_kinematics
            self._kin = forward_kinematics(self._plan.model, *self._state)
        r = self._readings[sensor_name] - s.predict(self._plan.model, self._kin)
        return r[0] if self._single else r


def _to_link_frame(C, placement, kind):
    """Covariances C (B, 6, 6) of a body's spatial vector (angular-first, body frame) in the frame
    of a link merged into it (placement: the link in the body), as Result.variable moves the
    vector itself: X C X^T with the motion transform X ("a") or the force transform X^-T."""
    if np.array_equal(placement, np.eye(4)):
        return C
    X = Transform.from_placement(placement[:3, :3], placement[:3, 3]).matrix()
    if kind != "a":
        X = np.linalg.inv(X).T
    return X @ C @ X.T
