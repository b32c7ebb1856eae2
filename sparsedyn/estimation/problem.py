"""EstimationProblem: Nori's generic estimation system [D; D_Y] d + [b; b_Y] = 0 (seed 001, eq. 17)
for an arbitrary sensor set, on one worst-case CSC pattern, with a structural well-posedness check.

    D    the Newton-Euler rows (eq. 3a_i, 3f_i, 3tau_i) of sparsedyn.system.NewtonEulerSystem, with
         fx_i columns only for bodies whose external wrench is unknown or measured (every other
         external wrench is zero);
    D_Y  the sensor rows (estimation/rows.py); a floating base adds tau_root = 0 (unactuated).

check() decides STRUCTURAL solvability by a maximum bipartite matching of rows to columns: the
columns reachable from an unmatched column along alternating paths are the under-determined block
of the Dulmage-Mendelsohn decomposition, and are named in the IllPosedError. It also evaluates D at
random states: coefficient correlations the pattern cannot see (e.g. [H, X* H] in eq. 23) can make
the system singular for every state; such generic rank deficiency is reported the same way.
Per-state (numerical) singularity is detected online by the solvers.

Preconditions: a tree model (sparsedyn.Model); sensors from sparsedyn.sensors.
"""
from __future__ import annotations

import numpy as np
from scipy.sparse.csgraph import maximum_bipartite_matching

from ..batch import as_batch, state
from ..errors import IllPosedError
from ..kinematics import forward_kinematics
from ..sensors import JointAccelerations, Sensor, SensorError, UnactuatedBase
from ..system import NewtonEulerSystem
from ..system.combine import combine_parts
from .rows import MeasurementRows


class EstimationProblem:
    """Estimate every dynamic variable from `measurements` (a list of sparsedyn.sensors objects).

    unknown_wrenches  links carrying an unknown external wrench (one per body)
    unactuated_base   add the pseudo-measurement tau_root = 0 (default: True for a floating base)
    """

    def __init__(self, model, measurements, unknown_wrenches=(), unactuated_base=None):
        self.model = model
        sensors = list(measurements)
        for s in sensors:
            if not isinstance(s, Sensor):
                raise TypeError(f"measurements: expected sparsedyn.sensors objects, got "
                                f"{type(s).__name__}")
        if unactuated_base is None:
            unactuated_base = model.floating_base
        if unactuated_base and not any(isinstance(s, UnactuatedBase) for s in sensors):
            sensors.append(UnactuatedBase())
        names = [s.name for s in sensors]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise SensorError(f"measurements: sensor names {dup} are used twice (pass name=...)")
        for s in sensors:
            s.validate(model)
        self.sensors = sensors
        if isinstance(unknown_wrenches, str):
            unknown_wrenches = [unknown_wrenches]
        self.unknown_wrenches = tuple(dict.fromkeys(str(l) for l in unknown_wrenches))
        self.wrench_links = self._wrench_links()
        self.system = NewtonEulerSystem(model, (), fx_bodies=sorted(self.wrench_links))
        self.rows = MeasurementRows(model, sensors, self.system.columns, self.wrench_links)
        self._combine()

    # ------------------------------------------------------------------ construction
    def _wrench_links(self):
        model, out = self.model, {}
        links = list(self.unknown_wrenches)
        for s in self.sensors:
            links += [l for l in s.wrench_links(model) if l not in links]
        for link in links:
            if link not in model.frames:
                raise SensorError(f"unknown_wrenches: model {model.name!r} has no link named {link!r}")
            body = model.frames[link].body
            if body < 0:
                raise SensorError(f"unknown_wrenches: link {link!r} is welded to the fixed world")
            if body in out and out[body] != link:
                raise SensorError(
                    f"unknown_wrenches: links {out[body]!r} and {link!r} are merged into one body "
                    f"({model.link_names[body]!r}): their external wrenches cannot be told apart; "
                    f"declare one wrench per body")
            out[body] = link
        return out

    def _combine(self):
        """One CSC pattern for [D; D_Y] (system.combine.combine_parts: the Newton-Euler rows, then
        the sensor rows below them); `_gather` maps the concatenated per-part values into it."""
        P = self.system.pattern
        n_sys = P.shape[0]
        sys_cols = np.repeat(np.arange(P.shape[1]), np.diff(P.indptr))
        self.n_dynamics_rows = n_sys
        self.shape = (n_sys + self.rows.n_rows, P.shape[1])
        combined = combine_parts(self.shape, [
            (P.indices, sys_cols, self.system.constant_values),
            (n_sys + self.rows.rows, self.rows.cols, self.rows.constant_values)])
        self.pattern = combined.pattern
        self._gather = combined.gather
        self.constant_values = combined.constant_values
        self.always_nonzero = combined.always_nonzero

    # ------------------------------------------------------------------ names
    @property
    def columns(self):
        return self.system.columns

    def block_label(self, kind, body):
        model = self.model
        if kind in ("tau", "qdd"):
            return f"{kind}[{model.joints[body].name}]"
        if kind == "fx":
            return f"fx[{self.wrench_links[body]}]"
        return f"{kind}[{model.link_names[body]}]"

    def column_labels(self):
        out = []
        for b in self.columns.blocks:
            lab = self.block_label(b.kind, b.body)
            out += [f"{lab}[{k}]" for k in range(b.size)] if b.size > 1 else [lab]
        return out

    def row_labels(self):
        return self.system.rows.labels(self.model.link_names) + self.rows.labels()

    def blocks_of_columns(self, cols):
        """Block labels (in column order, each once) of the given column indices."""
        out = []
        for b in self.columns.blocks:
            if np.any((cols >= b.start) & (cols < b.stop)):
                out.append(self.block_label(b.kind, b.body))
        return out

    # ------------------------------------------------------------------ well-posedness
    def structural_rank(self):
        match = maximum_bipartite_matching(self.pattern.tocsr(), perm_type="row")
        return int((match >= 0).sum()), match

    def check(self, generic=True, rng=0, max_dense=3000):
        """Raise IllPosedError naming the variables the measurements cannot determine.

        Structural test first (Dulmage-Mendelsohn); then, if `generic` and the system is small
        enough for a dense SVD, the numerical rank at two random states. Returns self."""
        n_rows, n_cols = self.shape
        rank, col_match = self.structural_rank()
        if rank < n_cols:
            cols = self._underdetermined(col_match)
            names = self.blocks_of_columns(cols)
            raise IllPosedError(
                f"{self.describe()}: structurally ill-posed (structural rank {rank} < {n_cols} "
                f"unknowns): the measurements do not determine {_short(names)}"
                f"{self._base_hint(names)}", variables=names)
        if generic and n_cols <= max_dense:
            rng = np.random.default_rng(rng)
            best = None
            for _ in range(2):
                q = self.model.random_configuration(rng)
                kin = forward_kinematics(self.model, q, rng.normal(size=self.model.nv))
                A = self.dense(self.values(kin))[0]
                s_max = np.linalg.norm(A, ord=2)
                U, s, Vt = np.linalg.svd(A)
                null = Vt[np.sum(s > max(A.shape) * 1e-12 * s_max):]
                if best is None or len(null) < len(best):
                    best = null
                if not len(best):
                    break
            if len(best):
                cols = np.flatnonzero(np.abs(best).max(axis=0) > 1e-8)
                names = self.blocks_of_columns(cols)
                raise IllPosedError(
                    f"{self.describe()}: ill-posed for every state (numerical rank "
                    f"{n_cols - len(best)} < {n_cols} at random states although the pattern has "
                    f"full structural rank): the measurements do not determine "
                    f"{_short(names)}{self._base_hint(names)}", variables=names)
        return self

    def _base_hint(self, names):
        """Why the floating base's acceleration may be in `names` (sensors.py, "Floating base")."""
        if not self.model.floating_base or self.block_label("qdd", 0) not in names:
            return ""
        return (f" ({self.block_label('qdd', 0)} is the floating base's acceleration: measure it "
                f"(JointAccelerations(base=True) or an IMU on the base: Accelerometer + "
                f"AngularAccelerometer) or measure every external wrench)")

    def floating_base_state(self, q_joints, v_joints, base_omega):
        """(q, v) from what iDynTree's BERDY_FLOATING_BASE takes: joint positions and velocities
        (Pinocchio's order, root excluded: (nq-7,), (nv-6,) or batched) and the base angular
        velocity in the base frame (3,) (a gyroscope's, rotated into the base frame). The base
        pose is the identity and its linear velocity zero: neither enters the estimated tau, f,
        fx and joint qdd (but for a MAP prior's bias); the base's a is then its proper classical
        acceleration [R^T (p'' - g); omega'] (sensors.py, "Floating base"). ValueError if the
        model has no floating base or a JointAccelerations measures the base (its reading depends
        on both)."""
        model = self.model
        if not model.floating_base:
            raise ValueError(f"floating_base_state: model {model.name!r} has no floating base")
        for s in self.sensors:
            if isinstance(s, JointAccelerations) and s.base:
                raise ValueError(f"floating_base_state: sensor {s.name!r} measures the base "
                                 f"acceleration, whose reading depends on the base orientation "
                                 f"and linear velocity: pass the full state, or use "
                                 f"JointAccelerations(base=False)")
        nq0, nv0 = model.joints[0].nq, model.joints[0].nv            # the free-flyer's 7, 6
        args = {"q_joints": (q_joints, model.nq - nq0), "v_joints": (v_joints, model.nv - nv0),
                "base_omega": (base_omega, 3)}
        B = max(np.atleast_2d(x).shape[0] for x, _ in args.values())
        x = {k: as_batch(a, n, f"floating_base_state: {k}", batch=B) for k, (a, n) in args.items()}
        single = all(one for _, one in x.values())
        q = np.concatenate([np.tile(model.joints[0].neutral(), (B, 1)), x["q_joints"][0]], axis=1)
        v = np.concatenate([np.zeros((B, 3)), x["base_omega"][0], x["v_joints"][0]], axis=1)
        return (q[0], v[0]) if single else (q, v)

    def _underdetermined(self, col_match):
        """Columns reachable from unmatched columns along alternating paths."""
        A = self.pattern
        row_match = np.full(self.shape[0], -1)
        matched = np.flatnonzero(col_match >= 0)
        row_match[col_match[matched]] = matched
        seen = np.zeros(self.shape[1], bool)
        stack = list(np.flatnonzero(col_match < 0))
        seen[stack] = True
        while stack:
            c = stack.pop()
            for r in A.indices[A.indptr[c]:A.indptr[c + 1]]:
                c2 = row_match[r]
                if c2 >= 0 and not seen[c2]:
                    seen[c2] = True
                    stack.append(c2)
        return np.flatnonzero(seen)

    def describe(self):
        return (f"estimation problem on {self.model.name!r} with sensors "
                f"{[s.name for s in self.sensors]} and unknown wrenches {list(self.unknown_wrenches)}")

    # ------------------------------------------------------------------ online assembly
    def values(self, kin):
        """Entries of [D; D_Y] (B, nnz) in the pattern's CSC data order."""
        sys_vals = self.system.values(kin.Xup)
        y_vals, _ = self.rows.evaluate(kin)
        return np.concatenate((sys_vals, y_vals), axis=1)[:, self._gather]

    def assemble(self, q, v, readings):
        """(values (B, nnz), rhs (B, n_rows), kin, single) for a state batch and sensor readings
        {name: (B, size) or (size,)}; pseudo-measurements default to their known reading."""
        q, vecs, B, single = state(self.model, q, v=v)
        single = single and all(np.ndim(r) == 1 for r in (readings or {}).values())
        readings = self.check_readings(readings, B)
        kin = forward_kinematics(self.model, q, vecs["v"])
        sys_vals = self.system.values(kin.Xup)
        y_vals, bias = self.rows.evaluate(kin)
        values = np.concatenate((sys_vals, y_vals), axis=1)[:, self._gather]
        rhs_sys = self.system.rhs(kin.Xup, kin.body_velocities, vecs["v"])
        rhs_y = self.rows.readings_vector(readings, B) - bias        # D_Y d = y - bias
        return values, np.concatenate((rhs_sys, rhs_y), axis=1), kin, single

    def check_readings(self, readings, B):
        readings = dict(readings or {})
        known = {s.name: s for s in self.sensors}
        unknown = sorted(set(readings) - set(known))
        if unknown:
            raise KeyError(f"readings: no sensor named {unknown} in this problem "
                           f"(sensors: {sorted(known)})")
        out = {}
        Bs = B
        for s in self.sensors:
            if s.name not in readings:
                if s.default_reading is None:
                    raise KeyError(f"readings: missing the reading of sensor {s.name!r} "
                                   f"({type(s).__name__}, {s.size} values)")
                out[s.name] = np.full((Bs, s.size), float(s.default_reading))
                continue
            y, _ = as_batch(readings[s.name], s.size, f"readings[{s.name!r}]", batch=Bs)
            out[s.name] = y
        return out

    def dense(self, values):
        values = np.atleast_2d(values)
        P = self.pattern
        cols = np.repeat(np.arange(P.shape[1]), np.diff(P.indptr))
        out = np.zeros((values.shape[0],) + P.shape)
        out[:, P.indices, cols] = values
        return out

    def compile(self, ordering="auto", backend="auto", progress=None, method="auto", **options):
        """The EstimationPlan of this problem (sparsedyn.compile's protocol; `method` and
        `options` as sparsedyn.estimation.compile_estimation's; progress is not reported)."""
        from .plan import compile_estimation
        return compile_estimation(self, method=method, ordering=ordering, backend=backend,
                                  **options)

    def __repr__(self):
        return (f"EstimationProblem({self.model.name!r}: {self.shape[0]}x{self.shape[1]}, "
                f"{len(self.sensors)} sensors, unknown wrenches {list(self.unknown_wrenches)})")


def _short(names, limit=12):
    head = ", ".join(names[:limit])
    return head + (f", ... ({len(names)} blocks)" if len(names) > limit else "")
