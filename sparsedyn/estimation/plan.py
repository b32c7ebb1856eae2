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

Per-sample data ("map", "lstsq"): est = plan.solve(..., contacts={link: (B,) bool},
covariances={...}) switches the unknown external wrenches on and off and changes the
covariances per state, without replanning (compile with per_sample=True for the compiled route;
solve_map.SampleData, compiled_map.CompiledMAP).

Online backends: "numba" (default when numba imports) is the compiled route: the sensor rows are
part of the assembly program (compiled_rows.py); "exact" runs the fused assembly + LU kernel
(kernels/assemble_numba.FusedSolver), "map"/"lstsq" the fused assembly + pair-chain L D L^T of
the normal equations kernel (compiled_map.py, planner/chain_ldlt.py). States a kernel cannot vouch
for (pivot breakdown, singular or undetermined, refinement wanted) are re-solved by the "numpy"
reference route (NumPy assembly; LU with splu fallback, or MAP with CHOLMOD), which also names the
undetermined variables.
"""
from __future__ import annotations

import threading
import warnings

import numpy as np
import scipy.sparse as sp

from ..batch import state
from ..contacts import contact_flags
from ..errors import SingularStateWarning, check_assembled, nonfinite_error
from ..problems.base import PlanBase
from ..problems.plan import AUTO_C_MAX_BATCH, Result
from ..sensors import Gyroscope
from ..spatial import Transform, operator_to_linear_first
from .solve_exact import CompiledExact, ExactSolver
from .storage import save_estimation_plan

#: the online backends of EstimationPlan.solve: "numba" (the compiled route's lane kernels),
#: "c" (its program as generated C: one sample costs its arithmetic), "numpy" (the reference)
ONLINE_BACKENDS = ("numba", "c", "numpy")
from .solve_map import MAPSolver


def compile_estimation(problem, method="auto", covariances=None, ordering="auto", backend="auto",
                       map_backend="cholmod", check=True, compiled="auto", map_form="auto",
                       per_sample=False):
    """Plan an EstimationProblem once (offline). `check` runs problem.check() first (raises
    IllPosedError naming undetermined variables). covariances (method "map"): {"dynamics": var,
    <sensor name>: var or (size,) vars, "prior": var, (n,) vars or {kind: var}, "prior_mean":
    value or (n,)}; a row without one gets solve_map.DEFAULT_VARIANCES (a pseudo-measurement:
    UnactuatedBase, ZeroTangentialForce, the dynamics' variance), a variable without a prior the
    uninformative default (so that MAP without covariances is least squares).
    map_backend ("cholmod" or "lu") is the reference MAP route's factorization. compiled: "auto"
    also builds the compiled online route when numba imports and every sensor has a compiled
    form, True requires it, False skips it.
    map_form: the compiled MAP / lstsq route's system, "normal" (N = A^T W A + P), "augmented"
    (the quasi-definite [[W^-1, A], [A^T, -P]]) or "auto" (fewer counted flops; stats["map_form"]).
    per_sample ("map" and "lstsq"): the compiled route also takes, per call and per state, which
    of the unknown wrenches are in contact and the covariances (EstimationPlan.solve's
    `contacts` and `covariances`): one plan for the superset of contacts and sensors, the
    numbers change, not the plan (its program reads every entry of A and the prior per state:
    more flops than a plan whose weights and prior are folded in; the normal form)."""
    from .map_route import MAP_FORMS
    if map_form not in MAP_FORMS:
        raise ValueError(f"map_form: expected one of {MAP_FORMS}, got {map_form!r}")
    if per_sample not in (True, False):
        raise ValueError(f"per_sample: expected True or False, got {per_sample!r}")
    if per_sample and map_form == "augmented":
        raise ValueError("map_form: a per_sample plan uses the normal form ('normal' or 'auto')")
    if check:
        problem.check()
    if compiled not in ("auto", True, False):
        raise ValueError(f"compiled: expected 'auto', True or False, got {compiled!r}")
    n_rows, n_cols = problem.shape
    if method == "auto":
        method = "exact" if n_rows == n_cols and not per_sample else "lstsq"
    if per_sample and method == "exact":
        raise ValueError("per_sample: per-sample contacts and covariances need method 'map' or "
                         "'lstsq' (an inactive contact makes a square system over-determined)")
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
            fast = _compiled_route(problem, solver, ordering, map_form, per_sample)
        except NotImplementedError:
            if compiled is True:
                raise
    return EstimationPlan(problem, solver, covariances, compiled=fast, per_sample=per_sample)


def _compiled_route(problem, solver, ordering, map_form="auto", per_sample=False):
    """The compiled online route of a planned solver (NotImplementedError naming a sensor whose
    rows have no compiled form)."""
    if solver.method == "exact":
        return solver.compiled(problem)
    from .map_route import compiled_map
    return compiled_map(problem, solver, ordering="amd" if ordering == "auto" else ordering,
                        form="normal" if per_sample else map_form, per_sample=per_sample)


class EstimationPlan(PlanBase):
    """A compiled estimation problem: solve(q, v, readings) for batches of states."""

    backends = ONLINE_BACKENDS

    def __init__(self, problem, solver, covariances=None, compiled=None, per_sample=False):
        super().__init__(problem)
        self.per_sample = per_sample
        self.system = problem.system
        self.reference = solver
        self.method = solver.method
        self.compiled = compiled
        self._covariances = covariances
        self._fallback = None
        self._local = threading.local()      # each thread's one-sample C solver (_one_sample)

    @property
    def stats(self):
        out = dict(self.reference.stats)
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

    def auto_backend(self, B):
        """What solve() runs B states on by default: the C route for up to AUTO_C_MAX_BATCH
        states once it exists and its library is built (plan.solver() or backend="c" built it:
        auto never starts a compiler), else self.backend once its numba kernels run without a
        JIT compile, else "numpy" while they compile in the background."""
        twin = getattr(self.compiled, "_c", None)
        if twin is not None and B <= AUTO_C_MAX_BATCH:
            built = (twin.fused.ready(twin.fused.batch_kind(B, True))
                     if isinstance(twin, CompiledExact) else twin.ready())
            if built:
                return "c"
        if self.compiled is not None and not self.compiled.ready():
            return "numpy"     # while numba compiles the route in the background (sparsedyn/jit.py)
        return self.backend

    @property
    def sensors(self):
        return {s.name: s for s in self.problem.sensors}

    def fallback(self):
        """The MAP solver used for singular states of an exact plan (built on first use)."""
        if self._fallback is None:
            self._fallback = MAPSolver(self.problem, self._covariances, method="map")
        return self._fallback

    def save(self, path):
        """Write the plan to a versioned .npz file (estimation/storage.py), atomically; read it
        back with sparsedyn.load_estimation_plan(path, model)."""
        save_estimation_plan(self, path)

    def route(self, backend):
        """The compiled route on `backend` ("numba" or "c"; ValueError saying why a route has
        no C form: per-sample MAP and the augmented MAP form run on numba only)."""
        try:
            return self.compiled.on_backend(backend)
        except NotImplementedError as exc:
            raise ValueError(str(exc)) from None

    def solver(self, backend="c"):
        """A callable for one sample at a time (EstimateSolver), buffers allocated once."""
        return EstimateSolver(self, backend)

    def sample_data(self, contacts, covariances, B):
        """The per-state numbers (solve_map.SampleData) of a call's `contacts` and `covariances`,
        or None when the call has neither."""
        if contacts is None and covariances is None:
            return None
        if self.method == "exact":
            raise ValueError("contacts/covariances: per-sample contacts and covariances need a "
                             "plan with method 'map' or 'lstsq' (compile_estimation(..., "
                             "method='map', per_sample=True))")
        if covariances is not None and self.method == "lstsq":
            raise ValueError("covariances: a 'lstsq' plan weighs every row alike; per-sample "
                             "covariances need method 'map'")
        active = None
        if contacts is not None:
            active = np.ones((B, self.problem.shape[1]), dtype=bool)
            cols = self.system.columns
            for link, flag in contact_flags(dict(contacts), self.problem.unknown_wrenches, B,
                                            "this problem's unknown wrenches (only they can "
                                            "be switched):").items():
                active[:, cols[("fx", self.model.frames[link].body)].indices] = flag[:, None]
        return self.reference.sample_data(covariances, B, active)

    def solve(self, q, v, readings, on_singular="map", backend=None, threads=None,
              contacts=None, covariances=None):
        """Estimate for one state (q (nq,), v (nv,), readings {name: (size,)}) or a batch.

        Returns an Estimate; est.ok[b] is True exactly when the data determine state b's
        estimate (module docstring: a data-only, scale-invariant test, the same on every route
        and backend): an estimate with ok False has directions filled by the prior (or NaN) and
        est.undetermined(b) names them. Raises NonFiniteError (naming batch indices and inputs)
        where the system or the estimate overflows.
        on_singular ("map", "nan", "raise"): what an exact plan does with states that are not
        determined.
        backend: "numba" (compiled route, the default when built), "c" (the same route as
        generated C; the default for up to AUTO_C_MAX_BATCH states once built: auto_backend) or
        "numpy" (reference route);
        threads: for "numba" and "c", how many threads split the batch (default: numba's, but
        no more than the cores idle at the call, MIN_STATES_PER_THREAD states each:
        kernels.parallel.default_threads).
        contacts {link: bool or (B,) bool} ("map"/"lstsq" plans): whether each unknown external
        wrench acts in each state; an inactive one is zero (not estimated; est.wrench gives 0).
        covariances (a "map" plan): per-state values of compile_estimation's covariances (a
        scalar or (size,) for every state, (B, size) or (B, 1) per state; "prior" also
        {kind: value or (B, 1)}, "prior_mean" (n,) or (B, n)); keys not given keep the plan's.
        The compiled route takes both when the plan was compiled with per_sample=True; the
        "numpy" route always."""
        if contacts is None and covariances is None and threads in (None, 1):
            fast = self._one_sample(q, v, readings, backend)
            if fast is not None:
                return fast
        if on_singular not in ("map", "nan", "raise"):
            raise ValueError(f"on_singular: expected 'map', 'nan' or 'raise', got {on_singular!r}")
        self.check_threads(threads)                 # a bad value is named on every route
        auto = backend is None
        backend = self.check_backend(self.auto_backend(len(np.atleast_2d(q))) if auto else backend)
        if backend != "numpy" and self.compiled is None:
            raise ValueError("backend: this plan has no compiled route (compile_estimation("
                             "..., compiled=True) says why)")
        model, problem = self.model, self.problem
        q, vecs, B, single = state(model, q, v=vecs_v(v))
        v = vecs["v"]
        single = single and all(np.ndim(r) == 1 for r in (readings or {}).values())
        readings = problem.check_readings(readings, B)
        sample = self.sample_data(contacts, covariances, B)
        compiled_route = backend != "numpy" or (auto and self.compiled is not None)
        if compiled_route and sample is not None and not self.per_sample:
            raise ValueError("contacts/covariances: this plan's compiled route folds the plan's "
                             "covariances and contacts in; compile with per_sample=True (or "
                             "solve with backend='numpy')")
        if backend != "numpy":
            threads = self.threads_for(threads, B, cap=False)
            y = problem.rows.readings_vector(readings, B)
            route = self.route(backend)
            if self.method == "exact":
                _, x, flag = route.run(q, v, y, full=True, threads=threads)
            else:
                x, flag = route.run(q, v, y, threads=threads, **(
                    {} if sample is None else {"sample": sample}))
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
            xr, okr, maskr, Pr = self._solve_reference(
                values, rhs, on_singular, redo, None if sample is None else sample.take(redo))
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
            Pvals = (lambda: self._normal_values(problem.assemble(q, v, readings)[0], sample))
        est = Estimate(self, x, single, ok, mask, Pvals, (q, v), readings, sample)
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

    def _normal_values(self, values, sample):
        if sample is None:
            return self.reference.normal_values(values)
        return self.reference.normal_values(self.reference.scaled(values, None, sample)[0], sample)

    def _solve_reference(self, values, rhs, on_singular, index, sample=None):
        """The reference route on assembled states (batch indices `index` of the caller's
        batch, their per-state numbers `sample`): (x, ok, undetermined mask or None, P values
        or None)."""
        Pvals = None
        if self.method == "exact":
            x, ok, undetermined_mask = self.reference.solve(values, rhs)
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
            x, ok, undetermined_mask, Pvals = self.reference.solve(values, rhs, sample)
        return x, ok, undetermined_mask, Pvals

    def _one_sample(self, q, v, readings, backend):
        """The Estimate of one sample on the C route's one-sample function (EstimateSolver, one
        per thread), or None where the general path runs: not exactly 1-D float64 arrays of
        the model's and sensors' sizes, another backend, the default backend before the C
        library is built. The checks are the route's: a sample it flags (a non-unit
        quaternion, a reading that is not finite, a failed pivot, a direction the data may not
        determine) returns None, and the general path raises or re-solves it and decides ok."""
        model = self.model
        if backend is None:
            if self.compiled is None or self.auto_backend(1) != "c":
                return None
        elif backend != "c":
            return None
        if type(readings) is not dict:
            return None
        for arr, size in ((q, model.nq), (v, model.nv)):
            if type(arr) is not np.ndarray or arr.shape != (size,) or arr.dtype != np.float64:
                return None
        sizes = self._reading_sizes
        for name, arr in readings.items():
            if (type(arr) is not np.ndarray or arr.dtype != np.float64
                    or arr.shape != sizes.get(name)):
                return None
        solver = getattr(self._local, "sample_solver", None)
        if solver is None:
            solver = self._local.sample_solver = EstimateSolver(self, "c")
        x = solver.unchecked(q, v, readings)
        if x is None:
            return None
        full = {s.name: (readings[s.name] if s.name in readings else
                         np.full(s.size, float(s.default_reading)))[None].copy()
                for s in self.problem.sensors}
        q1, v1 = q[None].copy(), v[None].copy()
        Pvals = None if self.method == "exact" else (
            lambda: self._normal_values(self.problem.assemble(q1, v1, full)[0], None))
        return Estimate(self, x[None], True, np.ones(1, dtype=bool), None, Pvals, (q1, v1),
                        full, None)

    @property
    def _reading_sizes(self):
        """{sensor name: (size,)} of the readings a one-sample call takes."""
        sizes = getattr(self, "_sizes", None)
        if sizes is None:
            sizes = self._sizes = {s.name: (s.size,) for s in self.problem.sensors}
        return sizes

    @staticmethod
    def _inputs(q, v, readings):
        """The call's batched inputs by name, for NonFiniteError."""
        return {"q": q, "v": v, **{f"readings[{k!r}]": r for k, r in readings.items()}}


class EstimateSolver:
    """EstimationPlan.solver(): one sample per call, for an estimator running on the robot. The
    inputs are copied into buffers allocated once and the compiled route runs on them without
    plan.solve's per-call checks; a sample the route flags (a quaternion that is not unit-norm,
    a failed pivot, a direction the data may not determine, a result that is not finite) is
    handed to plan.solve, which raises the typed error naming the argument or re-solves it on
    the reference route and decides `ok`: a flagged call is slower, never wrong. The buffers
    are the solver's own: solvers run concurrently, one solver is for one thread at a time.

        solve = plan.solver()                  # backend "c": compiled on first use, then cached
        x = solve(q, v, y)                     # q (nq,), v (nv,), y (n_y,) in readings_order
        solve.ok                               # the last sample's status (est.ok)
        x[solve.tau_columns]                   # the joint torques (nv,), Pinocchio's order
        solve.estimate(x)                      # the Estimate of one sample (all accessors)
        solve.set_sample(contacts={"r_foot": False})   # per-sample plans: until changed again
    y may also be a dict {sensor name: (size,)} as plan.solve takes readings."""

    def __init__(self, plan, backend="c"):
        if backend not in ("c", "numba"):
            raise ValueError(f"backend: expected 'c' or 'numba', got {backend!r}")
        if plan.compiled is None:
            raise ValueError("backend: this plan has no compiled route (compile_estimation("
                             "..., compiled=True) says why)")
        self.plan, self.backend = plan, backend
        model, problem = plan.model, plan.problem
        rows = problem.rows
        #: (sensor name, size) in the order of y's entries
        self.readings_order = [(s.name, s.size) for s in rows.sensors
                               if rows.row_slices[s.name].stop > rows.row_slices[s.name].start]
        self._slices = {s.name: rows.row_slices[s.name] for s in rows.sensors}
        n_y = sum(size for _, size in self.readings_order)
        # q, v and y side by side: a call copies its three inputs with one concatenate
        self._in = np.zeros(model.nq + model.nv + n_y)
        self._q, self._v, self._y = np.split(self._in, [model.nq, model.nq + model.nv])
        self._shapes = (self._q.shape, self._v.shape, self._y.shape)
        self._kinds = self._shapes + (self._in.dtype,) * 3
        self._x = np.zeros(problem.shape[1])
        for s in rows.sensors:
            if s.default_reading is not None:
                self._y[self._slices[s.name]] = s.default_reading
        self._defaults = self._y.copy()
        #: the sensors whose reading a dict of readings must give (no default)
        self._required = frozenset(s.name for s in rows.sensors if s.default_reading is None)
        probe = Estimate(plan, np.arange(problem.shape[1], dtype=float)[None], True,
                         np.ones(1, dtype=bool), None, None, None, {})
        #: columns of x holding the joint torques / accelerations (Pinocchio's v order)
        self.tau_columns, self.qdd_columns = (_columns(probe[k]) for k in ("tau", "qdd"))
        self.ok = True
        route = plan.route(backend)
        self._contacts = self._covariances = None
        self._sample = plan.reference.sample_data(None, 1) if plan.per_sample else None
        if backend == "c" and plan.method != "exact":
            self._work = np.zeros(route.work_doubles)
            self._samp = np.zeros(route.sizes["n_samp"])
            ptrs = [a.ctypes.data for a in (self._q, self._v, self._y)]
            ptrs += [self._samp.ctypes.data if self._samp.size else None, self._x.ctypes.data,
                     self._work.ctypes.data]
            self._run = route.bound(ptrs)
            if self._sample is not None:
                self._samp[:] = route.sample_rows(self._sample)[0]
        else:
            q2, v2, y2 = (a[None] for a in (self._q, self._v, self._y))

            def run():
                kw = {} if self._sample is None else {"sample": self._sample}
                out = route.run(q2, v2, y2, threads=1, **kw)
                x, flag = (out[1], out[2]) if plan.method == "exact" else out
                self._x[:] = x[0]
                return int(flag[0])
            self._run = run
        self._route = route

    def set_sample(self, contacts=None, covariances=None):
        """The contacts and covariances of the next calls (plan.solve's per-sample arguments,
        one sample's values; None: the plan's), for a plan compiled with per_sample=True:
        set when feet touch down or lift off, not per call."""
        if not self.plan.per_sample:
            raise ValueError("contacts/covariances: this plan was compiled without "
                             "per_sample=True")
        self._sample = self.plan.sample_data(contacts, covariances, 1) or \
            self.plan.reference.sample_data(None, 1)
        self._contacts, self._covariances = contacts, covariances
        if hasattr(self, "_samp"):
            self._samp[:] = self._route.sample_rows(self._sample)[0]

    def __call__(self, q, v, y, out=None):
        """The estimate x (n,) of one sample (copied, or written into `out`)."""
        if isinstance(y, dict):
            readings = y
            if not self._required.issubset(readings):
                return self._checked(q, v, readings, out)      # plan.solve names the missing one
            y = self._defaults.copy()
            try:
                for name, value in readings.items():
                    y[self._slices[name]] = value
            except (KeyError, ValueError):
                return self._checked(q, v, readings, out)      # plan.solve names the problem
        else:
            readings = None
        # float64 arrays of the buffers' shapes: three copies into them (half a concatenate's
        # cost); other arrays: the shapes compared, then one concatenate casting as it does
        try:
            if (q.shape, v.shape, y.shape, q.dtype, v.dtype, y.dtype) == self._kinds:
                self._q[...] = q
                self._v[...] = v
                self._y[...] = y
            elif (q.shape, v.shape, y.shape) != self._shapes:
                raise ValueError        # concatenate would take any split of the same total
            else:
                np.concatenate((q, v, y), out=self._in)
        except (AttributeError, TypeError, ValueError):   # not arrays, shapes, dtypes
            return self._checked(q, v, readings if readings is not None else y, out)
        if self._run() != 0:
            return self._checked(q, v, readings if readings is not None else y, out)
        self.ok = True
        if out is None:
            return self._x.copy()
        out[:] = self._x
        return out

    def unchecked(self, q, v, readings):
        """x (a new (n,) array) of one sample for arrays of exactly (nq,), (nv,) and a dict of
        readings of exactly their sizes, or None: a required reading missing, an unknown
        name, or a sample the route flags (plan.solve then raises or re-solves it)."""
        if not self._required.issubset(readings):
            return None
        y = self._defaults.copy()
        slices = self._slices
        for name, value in readings.items():
            if name not in slices:
                return None
            y[slices[name]] = value
        x = self._unchecked_vector(q, v, y)
        return None if x is None else x.copy()

    def _unchecked_vector(self, q, v, y):
        """The route's x buffer after one run on q, v, y, or None if it flagged the sample."""
        np.concatenate((q, v, y), out=self._in)
        return None if self._run() != 0 else self._x

    def _checked(self, q, v, y, out):
        if not isinstance(y, dict):
            y = np.asarray(y, dtype=float)
            if y.shape != self._y.shape:
                raise ValueError(f"y: expected ({self._y.size},) readings in readings_order "
                                 f"{self.readings_order}, got shape {y.shape}")
            start, readings = 0, {}
            for name, size in self.readings_order:
                readings[name] = y[start:start + size]
                start += size
            y = readings
        est = self.plan.solve(q, v, y, backend="numba", threads=1, contacts=self._contacts,
                              covariances=self._covariances)
        self.ok = bool(est.ok)
        value = est.vector[0]
        if out is None:
            return value.copy()
        out[:] = value
        return out

    def estimate(self, x):
        """The Estimate (single sample) of a vector x returned by this solver."""
        return Estimate(self.plan, np.asarray(x, dtype=float)[None], True,
                        np.array([self.ok]), None, None, None, {})


def _columns(picked):
    """The columns of x that a joint-space output reads (it must be a selection of x's
    entries: Result extracts tau and qdd by copying blocks)."""
    cols = np.asarray(picked)
    if not (np.array_equal(cols, np.round(cols)) and np.unique(cols).size == cols.size):
        raise AssertionError("joint-space outputs are a selection of the solution's entries")
    return cols.astype(np.int64)


def vecs_v(v):
    if v is None:
        raise ValueError("v: the joint velocities are needed (zeros for a static state)")
    return v


class Estimate(Result):
    """Estimated variables (problems.plan.Result: est["tau"], est["qdd"], est["f", link], ...)
    plus wrench(link), ok (B,) status, undetermined(b), covariance(kind) (MAP), residual(gyro).

    ok[b] (a bool for a single state) is True exactly when the data determine state b's
    estimate: the column-equilibrated information of the measurements, W^1/2 [D; D_Y] (unit
    weights for "exact" and "lstsq"), has no singular value below 1e-6 (solve_map.IDENTIFIABLE),
    whatever the prior; the estimate is then finite and, without a user prior, the (weighted)
    least-squares one. ok[b] False: some directions are filled by the prior (or NaN, exact
    route with on_singular="nan"); undetermined(b) names their variables."""

    def __init__(self, plan, x, single, ok, undetermined_mask, Pvals, state, readings,
                 sample=None):
        super().__init__(plan, x, single)
        self._sample = sample          # the call's per-sample numbers (SampleData) or None
        self._active = None if sample is None else sample.active
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
        solver = plan.reference if plan.method != "exact" else None
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
        values = plan.problem.assemble(*self._state, self._readings)[0]
        C = solver.covariance(self._Pvals, idx, values, self._sample)
        if self._active is not None:       # an inactive contact's wrench is known: zero
            a = self._active[:, idx]
            C = C * (a[:, :, None] & a[:, None, :])
        if link is not None and kind in ("a", "f", "fx"):
            C = operator_to_linear_first(_to_link_frame(C, model.frames[link].placement, kind))
        return C[0] if self._single else C

    def consistency(self):
        """(chi2 (B,), dof, p (B,)): the weighted residual of every row of [D; D_Y],
        chi2_b = sum_r w_r (A_b x_b - r_b)_r^2 (w: the plan's or the call's 1/variance; 1 for
        "exact" and "lstsq"), its degrees of freedom (rows - estimated variables) and the
        probability of a chi2 at least as large (scipy.stats.chi2.sf; NaN when dof is 0: a
        square system has no redundancy to check). A small p says the readings do not fit the
        model and the covariances: a sensor with the wrong sign or frame, a wrong variance, an
        unmodelled contact (residual(name) has each sensor's share). Single states: floats."""
        from scipy.stats import chi2 as chi2_dist
        parts = self._weighted_residual()
        chi2 = parts.sum(axis=1)
        m, n = self._plan.problem.shape
        # a switched-off contact's variables are not estimated
        dof = m - n if self._active is None else m - self._active.sum(axis=1)
        p = np.where(np.asarray(dof) > 0, chi2_dist.sf(chi2, np.maximum(dof, 1)), np.nan)
        if self._single:
            return float(chi2[0]), int(np.asarray(dof).ravel()[0]), float(p[0])
        return chi2, dof, p

    def _row_residual(self):
        """r - A x per state and row (B, m) (readings minus prediction on the sensor rows),
        computed once (NumPy assembly)."""
        if getattr(self, "_res", None) is None:
            if self._state is None:
                raise ValueError("consistency/residual: this estimate carries no state "
                                 "(EstimateSolver.estimate); plan.solve's estimates do")
            problem = self._plan.problem
            q, v = self._state
            values, rhs, _, _ = problem.assemble(q, v, self._readings)
            P = problem.pattern
            cols = np.repeat(np.arange(P.shape[1]), np.diff(P.indptr))
            rows = sp.csr_matrix((np.ones(P.nnz), (np.arange(P.nnz), P.indices)),
                                 shape=(P.nnz, P.shape[0]))
            self._res = rhs - np.asarray(rows.T @ (values * self.vector[:, cols]).T).T
        return self._res

    def _weighted_residual(self):
        """w_r (r - A x)_r^2 per state and row (B, m)."""
        plan = self._plan
        if plan.method == "map":
            w = plan.reference.weights if self._sample is None else self._sample.weights
        else:
            w = 1.0
        res = self._row_residual()
        return w * res * res

    def residual(self, sensor_name):
        """Reading minus prediction (B, size) of a sensor at the estimate: its rows of
        r - [D; D_Y] x, or, for a Gyroscope (no rows: it carries no information on the
        variables), its reading minus the angular velocity of (q, v)."""
        s = self._plan.sensors.get(sensor_name)
        if s is None:
            raise KeyError(f"residual: no sensor named {sensor_name!r} in this problem")
        if not isinstance(s, Gyroscope):
            problem = self._plan.problem
            sl = problem.rows.row_slices[sensor_name]
            r = self._row_residual()[:, problem.n_dynamics_rows + sl.start:
                                     problem.n_dynamics_rows + sl.stop]
            return r[0] if self._single else r
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
