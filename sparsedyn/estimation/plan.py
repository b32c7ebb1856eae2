"""compile_estimation(problem) -> EstimationPlan, and the Estimate it returns (seed 001, Sec. VI).

    plan = compile_estimation(problem)              # offline: check + LU plan or MAP normal pattern
    est = plan.solve(q, v, readings)                 # online, batched
    est["tau"], est.wrench("l_sole"), est.ok, est.covariance("tau"), est.residual("imu_gyro")

method: "exact" (square: permuted static-pivot LU, solve_exact.py), "map" (BERDY's MAP,
solve_map.py), "lstsq" (weighted least squares), "auto" (exact if square, else lstsq).
Numerically singular states: ok[b] = False; "exact" returns NaN for them unless
on_singular="map" (the default), which re-solves them with the MAP route and says so in a warning.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..problems.plan import Result
from ..sensors import Gyroscope
from .solve_exact import ExactSolver
from .solve_map import MAPSolver


class SingularStateWarning(RuntimeWarning):
    """Some states of a batch are numerically singular for the measurement set."""


def compile_estimation(problem, method="auto", covariances=None, ordering="auto", backend="auto",
                       map_backend="cholmod", check=True):
    """Plan an EstimationProblem once (offline). `check` runs problem.check() first (raises
    IllPosedError naming undetermined variables)."""
    if check:
        problem.check()
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
    return EstimationPlan(problem, solver, covariances)


class EstimationPlan:
    """A compiled estimation problem: solve(q, v, readings) for batches of states."""

    def __init__(self, problem, solver, covariances=None):
        self.problem = problem
        self.model = problem.model
        self.system = problem.system
        self.solver = solver
        self.method = solver.method
        self._covariances = covariances
        self._fallback = None

    @property
    def stats(self):
        out = dict(self.solver.stats)
        out.update(n_rows=self.problem.shape[0], n_cols=self.problem.shape[1],
                   nnz=self.problem.pattern.nnz, method=self.method)
        return out

    @property
    def sensors(self):
        return {s.name: s for s in self.problem.sensors}

    def fallback(self):
        """The MAP solver used for singular states of an exact plan (built on first use)."""
        if self._fallback is None:
            self._fallback = MAPSolver(self.problem, self._covariances, method="map")
        return self._fallback

    def solve(self, q, v, readings, on_singular="map"):
        """Estimate for one state (q (nq,), v (nv,), readings {name: (size,)}) or a batch.

        on_singular ("map", "nan", "raise"): what an exact plan does with singular states."""
        if on_singular not in ("map", "nan", "raise"):
            raise ValueError(f"on_singular: expected 'map', 'nan' or 'raise', got {on_singular!r}")
        values, rhs, kin, single = self.problem.assemble(q, v, readings)
        undetermined_mask = Pvals = None
        if self.method == "exact":
            x, ok = self.solver.solve(values, rhs)
            bad = np.flatnonzero(~ok)
            if bad.size:
                if on_singular == "raise":
                    from ..errors import SingularModelError
                    raise SingularModelError(
                        f"{self.problem.describe()}: [D; D_Y] is numerically singular at batch "
                        f"indices {bad[:20].tolist()}", batch_indices=bad.tolist())
                if on_singular == "map":
                    xm, _, pd, _ = self.fallback().solve(values[bad], rhs[bad])
                    x[bad] = xm
                    undetermined_mask = np.zeros(x.shape, bool)
                    undetermined_mask[bad] = pd
        else:
            x, ok, undetermined_mask, Pvals = self.solver.solve(values, rhs)
        est = Estimate(self, x, single, ok, undetermined_mask, Pvals, kin, readings)
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


class Estimate(Result):
    """Estimated variables (problems.plan.Result: est["tau"], est["qdd"], est["f", link], ...)
    plus wrench(link), ok (B,) status, undetermined(b), covariance(kind) (MAP), residual(gyro)."""

    def __init__(self, plan, x, single, ok, undetermined_mask, Pvals, kin, readings):
        super().__init__(plan, x, single)
        self.ok = ok[0] if single else ok
        self._ok = ok
        self._undetermined_mask = undetermined_mask
        self._Pvals = Pvals
        self._kin = kin
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
        C = solver.covariance(self._Pvals, idx)
        if link is not None and kind in ("a", "f", "fx"):
            C = C[:, np.r_[3:6, 0:3]][:, :, np.r_[3:6, 0:3]]      # linear-first, body frame
        return C[0] if self._single else C

    def residual(self, sensor_name):
        """Reading minus prediction of a Gyroscope (consistency check, no rows in D_Y)."""
        s = self._plan.sensors.get(sensor_name)
        if not isinstance(s, Gyroscope):
            raise KeyError(f"residual: {sensor_name!r} is not a gyroscope of this problem")
        r = self._readings[sensor_name] - s.predict(self._plan.model, self._kin)
        return r[0] if self._single else r
