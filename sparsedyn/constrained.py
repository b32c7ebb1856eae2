"""Forward dynamics with rigid contacts (Pinocchio's constraintDynamics, LOCAL frames) as one square
block system: Nori's forward-dynamics rows with the joint torques known (seed 001, eq. 15-17),
each contact link's external wrench an unknown (as an estimated contact wrench, Sec. VI), and per
contact the rows that fix its acceleration (as loop-closure rows fix a loop's, seed 003 Sec. II-D):

    6D contact at frame c of body b:   c_X_b a_b + [0; R_c^T g] = 0       the frame's spatial
                                       acceleration (a_b holds -a_g: Nori's a_0 = -a_g)
    3D contact:                        lin(c_X_b a_b) + R_c^T g + w_c x v_c = 0   the point's
                                       classical acceleration
                                       ang(c_X_b^* fx_b) = 0               a pure force at the point

With Baumgarte corrections the right-hand side 0 of a contact's acceleration rows becomes
Pinocchio's corrected acceleration (Kp times the placement error minus Kd times the velocity).

The system is assembled and solved by the estimation machinery's exact route (problem rows as
pseudo-measurements with known readings): compiled (the fused kernel; the gravity term R_c^T g
is the sensor's gravity term, Sensor.gravity_terms, propagated by the kernel) for states with
every contact held, NumPy otherwise. A state whose contacts are redundant (a rank-deficient
contact Jacobian) is flagged not ok and gets the minimum-prior (ridge-regularised) contact
wrenches, never NaN: qdd stays the constrained motion, the split of the wrenches is arbitrary.

Releasing a contact (per state, one plan for every contact set): the plan factorizes the system
with every contact held; a released contact's acceleration rows get extra right-hand sides on
the same factorization, whose combination zeroing its wrench is the released solution
(ConstrainedPlan._released), exact as a re-planned system would be.

    plan = sd.constrained_forward_dynamics(model, [sd.Contact("l_sole", "6d"),
                                                    sd.Contact("r_sole", "3d")])
    res = plan.solve(q, v, tau)               # batched
    res["qdd"] (B, nv), res["lambda"] (B, m) (Pinocchio's lambda_c: per contact, linear-first,
    in the contact frame), res.wrench(link) (B, 6) in the link frame, res.ok (B,)
    plan.solve(q, v, tau, contacts={"r_sole": swing}, baumgarte=(Kp, Kd),
               reference={"l_sole": oMref, "r_sole": oMref2})
"""
from __future__ import annotations

import threading
import warnings

import numpy as np

from .batch import state, unbatch
from .contacts import Contact, contact_flags
from .errors import PivotBreakdownWarning, check_assembled, nonfinite_error
from .kinematics import forward_kinematics
from .problems.base import PlanBase
from .sensors import JointTorques, Sensor, Term, UnactuatedBase, _WrenchSensor, \
    _force_transform, _link_frame, _placement_transform
from .spatial import cross3, log6


class ContactAcceleration(Sensor):
    """Pseudo-measurement of a rigid contact (module docstring): reading 0."""

    default_reading = 0.0

    def __init__(self, contact):
        super().__init__(f"{contact.link}_contact")
        self.contact = contact
        self.link = contact.link
        self.size = contact.dim

    def validate(self, model):
        _link_frame(model, self.link, f"contact {self.name!r}")

    def gravity_terms(self, model):
        """[(body, G)]: the rows' gravity term is G times g in the body's coordinates (G: the
        contact frame's rotation c_E_b in the linear rows)."""
        frame = _link_frame(model, self.link, f"contact {self.name!r}")
        E = _placement_transform(frame.placement @ self.contact.placement)[:3, :3]    # c_E_b
        return [(frame.body, E if self.contact.dim == 3 else np.vstack([np.zeros((3, 3)), E]))]

    def linear_map(self, model, kin, wrench_links):
        frame = _link_frame(model, self.link, f"contact {self.name!r}")
        b = frame.body
        Xc = _placement_transform(frame.placement @ self.contact.placement)   # c_X_b, angular-first
        (_, G), = self.gravity_terms(model)
        bias = np.einsum("ij,bjk,k->bi", G, kin.Xworld[b].E, model.gravity)   # G E_b0 g
        if self.contact.dim == 6:
            return [Term("a", b, Xc)], bias
        vc = kin.body_velocities[:, b] @ Xc.T
        return [Term("a", b, Xc[3:])], bias + cross3(vc[:, :3], vc[:, 3:])


class PointForce(_WrenchSensor):
    """Pseudo-measurement of a 3D contact: the wrench's moment about the contact point is 0."""

    rows_af = np.array([0, 1, 2])
    default_reading = 0.0

    def __init__(self, contact):
        super().__init__(contact.link, contact.placement, f"{contact.link}_point_force")


class ConstrainedForwardDynamics:
    """qdd and contact wrenches from (q, v, tau) under rigid contacts (module docstring)."""

    name = "constrained_forward_dynamics"

    def __init__(self, model, contacts):
        contacts = [c if isinstance(c, Contact) else Contact(*c) for c in contacts]
        if not contacts:
            raise ValueError("contacts: give at least one sparsedyn.Contact (without contacts, "
                             "forward_dynamics is the problem)")
        links = [c.link for c in contacts]
        twice = sorted({n for n in links if links.count(n) > 1})
        if twice:
            raise ValueError(f"contacts: one contact per link (links {twice} have several; "
                             f"place one contact frame on each link)")
        for c in contacts:
            _link_frame(model, c.link, f"contact on {c.link!r}")
        bodies = {}
        for c in contacts:
            bodies.setdefault(model.frames[c.link].body, []).append(c.link)
        shared = [links for links in bodies.values() if len(links) > 1]
        if shared:
            raise ValueError(f"contacts: links {shared[0]} are one rigid body (merged by fixed "
                             f"joints): give that body one contact (a 6D contact already fixes "
                             f"every point of it)")
        from .estimation import EstimationProblem
        self.model, self.contacts = model, contacts
        sensors = [JointTorques()] + ([UnactuatedBase()] if model.floating_base else [])
        for c in contacts:
            sensors.append(ContactAcceleration(c))
            if c.dim == 3:
                sensors.append(PointForce(c))
        self.estimation = EstimationProblem(model, sensors, unknown_wrenches=links)
        if self.estimation.shape[0] != self.estimation.shape[1]:
            raise AssertionError("the constrained system is square by construction")

    def compile(self, ordering="auto", backend="auto", progress=None):
        """The plan: the static-pivot LU of the all-contacts system, with its compiled route
        (assembly and LU in one kernel) unless backend is "numpy"."""
        from .estimation import compile_estimation
        plan = compile_estimation(self.estimation, method="exact", ordering=ordering,
                                  compiled=backend != "numpy")
        return ConstrainedPlan(self, plan)

    def __repr__(self):
        kinds = ", ".join(f"{c.link}:{c.kind}" for c in self.contacts)
        return f"{self.name}({self.model.name!r}, contacts [{kinds}])"


def constrained_forward_dynamics(model, contacts):
    """The compiled plan of forward dynamics under rigid contacts (sparsedyn.Contact list; one
    per link, LOCAL frames): plan.solve(q, v, tau) -> ConstrainedResult."""
    return ConstrainedForwardDynamics(model, contacts).compile()


class ConstrainedPlan(PlanBase):
    """solve(q, v, tau) for batches of states (module docstring)."""

    backends = ("numba", "c", "numpy")

    def __init__(self, problem, estimation_plan):
        super().__init__(problem)
        self.estimation_plan = estimation_plan
        self.contacts = problem.contacts
        #: (contact, force transform from the link frame to the contact frame (6, 6), rows of
        #: lambda) per contact (estimates give a link's wrench in the link's own frame)
        self._frames = []
        start = 0
        for c in self.contacts:
            self._frames.append((c, _force_transform(c.placement), slice(start, start + c.dim)))
            start += c.dim
        self.n_lambda = start
        self._local = threading.local()      # each thread's one-state C buffers (_one_state)

    @property
    def stats(self):
        return dict(self.estimation_plan.stats, problem=self.problem.name,
                    contacts=[(c.link, c.kind) for c in self.contacts])

    def solve(self, q, v, tau, contacts=None, baumgarte=None, reference=None, backend=None,
              threads=None):
        """ConstrainedResult of one state (q (nq,), v (nv,), tau (nv,)) or a batch.

        contacts {link: bool or (B,) bool}: which contacts hold in each state (default: all);
            a released contact's wrench is zero and its acceleration free. The plan is the
            same for every set (module docstring, "Releasing a contact").
        baumgarte (Kp, Kd) for every contact, or {link: (Kp, Kd)} (each a scalar or (B,)):
            Pinocchio's Baumgarte corrector. The contact frame's LOCAL acceleration is held to
            Kp log6(c^M_ref) - Kd v_c (6D; linear-first) or Kp c^p_ref - Kd v_c,lin (3D) instead
            of zero, c^M_ref the reference placement seen from the contact frame.
        reference {link: (4, 4) or (B, 4, 4)}: the world placement each contact is held to
            (Pinocchio's joint2_placement on the world), needed where Kp != 0.
        backend: "numba" or "c" (the compiled route: states with every contact held), "numpy"
            (the reference route), None: as EstimationPlan.solve picks. States the compiled
            route flags (a static pivot or the backward error), and those with released
            contacts, take the reference route.
        threads: for "numba" and "c" (default: kernels.parallel.default_threads)."""
        from .estimation.plan import Estimate
        if contacts is None and baumgarte is None and reference is None and threads in (None, 1):
            fast = self._one_state(q, v, tau, backend)
            if fast is not None:
                return fast
        model = self.model
        self.check_threads(threads)                 # a bad value is named on every route
        q, vecs, B, single = state(model, q, v=v, tau=tau)
        tau, v = vecs["tau"], vecs["v"]
        active = self._active(contacts, B)
        gains = self._gains(baumgarte, reference, B)
        readings = {"tau": tau[:, 6:] if model.floating_base else tau}
        if model.floating_base:
            readings["base_unactuated"] = tau[:, :6]
        if gains is not None:
            readings.update(self._corrections(forward_kinematics(model, q, v), gains))
        plan, problem = self.estimation_plan, self.problem.estimation
        readings = problem.check_readings(readings, B)
        if B == 0:
            return ConstrainedResult(self, Estimate(plan, np.zeros((0, problem.shape[1])), single,
                                                    np.ones(0, bool), None, None, (q, v),
                                                    readings), single)
        backend = self.check_backend(plan.auto_backend(B) if backend is None else backend)
        ok = np.ones(B, dtype=bool)
        every = bool(active.all())
        held = np.arange(B) if every else np.flatnonzero(active.all(axis=1))
        x = None
        if backend != "numpy" and held.size:
            if plan.compiled is None:
                raise ValueError("backend: this plan was compiled with backend='numpy' (no "
                                 "compiled route)")
            threads = self.threads_for(threads, held.size, cap=False)
            sub = readings if every else {k: r[held] for k, r in readings.items()}
            # the fused kernel's pivot, backward-error and finiteness checks, without the
            # estimation route's conditioning probe: as solve_square below, a dynamics system is
            # trusted wherever its physics is nonsingular, however ill-conditioned
            _, xh, flag = plan.route(backend).fused.run(
                q if every else q[held], v if every else v[held],
                problem.rows.readings_vector(sub, held.size), full=True, threads=threads)
            if every:
                x = xh
            else:
                x = np.empty((B, problem.shape[1]))
                x[held] = xh
            held = held[flag]
        if x is None:
            x = np.empty((B, problem.shape[1]))
        released = np.flatnonzero(~active.all(axis=1))
        if held.size or released.size:
            redo = np.concatenate([held, released])
            values, rhs, _, _ = problem.assemble(q[redo], v[redo],
                                                 {k: r[redo] for k, r in readings.items()})
            check_assembled(self.problem.name, "the constrained system or its right-hand side",
                            {"q": q, "v": v, "tau": tau}, values, rhs, indices=redo)
            k = held.size
            if k:
                x[held], ok[held] = plan.reference.solve_square(values[:k], rhs[:k])
                bad = np.flatnonzero(~ok[held])
                if bad.size:
                    x[held[bad]] = plan.fallback().solve(values[bad], rhs[bad])[0]
            if released.size:
                x[released], ok[released] = self._released(values[k:], rhs[k:],
                                                            active[released])
            overflow = redo[~np.isfinite(x[redo]).all(axis=1)]   # (the kernel's are checked)
            if overflow.size:
                raise nonfinite_error(self.problem.name, "the solution", overflow.tolist(),
                                      {"q": q, "v": v, "tau": tau})
        if not ok.all():
            bad = np.flatnonzero(~ok)
            warnings.warn(RedundantContactsWarning(
                f"{len(bad)} of {len(ok)} states have redundant contacts (a rank-deficient "
                f"contact Jacobian; batch indices {bad[:10].tolist()}): their contact wrenches "
                f"are regularised ones (the least), qdd the constrained motion"), stacklevel=2)
        est = Estimate(plan, x, single, ok, None, None, (q, vecs["v"]), readings)
        return ConstrainedResult(self, est, single)

    def _one_state(self, q, v, tau, backend):
        """The result of one state with every contact held on the C route's single-state
        function (buffers bound once per thread), or None where the general path runs: not
        exactly 1-D float64 arrays of the model's sizes, another backend, "auto" before the C
        library is built, or a state the kernel flags (a non-unit quaternion, a failed pivot or
        backward-error check, a result that is not finite: the general path raises or re-solves
        it)."""
        model = self.model
        for arr, size in ((q, model.nq), (v, model.nv), (tau, model.nv)):
            if type(arr) is not np.ndarray or arr.shape != (size,) or arr.dtype != np.float64:
                return None
        plan = self.estimation_plan
        if (backend if backend is not None else plan.auto_backend(1)) != "c" or \
                plan.compiled is None:
            return None
        one = getattr(self._local, "one", None)
        if one is None:
            from .backends.generated_c import single_state
            problem = self.problem.estimation
            kernel = plan.route("c").fused
            rows = problem.rows
            bufs = (np.zeros(model.nq), np.zeros(model.nv), np.zeros(rows.n_rows), np.zeros(0),
                    np.zeros(problem.shape[1]), np.zeros(kernel.work_doubles))
            fn = single_state(kernel, "full")
            ptrs = [a.ctypes.data if a.size else None for a in bufs]
            # y: the sensors' rows in order (the contact rows' reading 0: held, no correction)
            tau_rows = rows.row_slices["tau"]
            base_rows = rows.row_slices.get("base_unactuated")
            one = self._local.one = (lambda: fn(*ptrs), bufs, tau_rows, base_rows)
        run, (qb, vb, yb, _, xb, _), tau_rows, base_rows = one
        qb[:], vb[:] = q, v
        if base_rows is not None:
            yb[tau_rows] = tau[6:]
            yb[base_rows] = tau[:6]
        else:
            yb[tau_rows] = tau
        if run() != 0:
            return None
        from .estimation.plan import Estimate
        est = Estimate(plan, xb[None].copy(), True, np.ones(1, dtype=bool), None, None,
                       (q[None].copy(), v[None].copy()), None)
        return ConstrainedResult(self, est, True)

    # ------------------------------------------------------------------ per-call data
    def _active(self, contacts, B):
        """(B, k) bool: contact j holds in state b."""
        active = np.ones((B, len(self.contacts)), dtype=bool)
        if contacts is None:
            return active
        index = {c.link: j for j, c in enumerate(self.contacts)}
        for link, flag in contact_flags(contacts, index, B, "this plan's contacts").items():
            active[:, index[link]] = flag
        return active

    def _gains(self, baumgarte, reference, B):
        """Per contact (Kp (B,), Kd (B,), reference (B, 4, 4) or None), or None without
        corrections."""
        if baumgarte is None:
            if reference:
                raise ValueError("reference: a reference placement acts through Baumgarte "
                                 "gains; give baumgarte=(Kp, Kd)")
            return None
        links = [c.link for c in self.contacts]
        per = baumgarte if isinstance(baumgarte, dict) else {link: baumgarte for link in links}
        unknown = sorted(set(per) - set(links))
        if unknown:
            raise KeyError(f"baumgarte: {unknown} are not this plan's contacts {links}")
        reference = dict(reference or {})
        unknown = sorted(set(reference) - set(links))
        if unknown:
            raise KeyError(f"reference: {unknown} are not this plan's contacts {links}")
        out = []
        for c in self.contacts:
            Kp, Kd = per.get(c.link, (0.0, 0.0))
            Kp, Kd = (np.broadcast_to(np.asarray(k, dtype=float), (B,)) if np.ndim(k) in (0, 1)
                      and np.size(k) in (1, B) else None for k in (Kp, Kd))
            if Kp is None or Kd is None or not (np.isfinite(Kp).all() and np.isfinite(Kd).all()):
                raise ValueError(f"baumgarte[{c.link!r}]: expected finite (Kp, Kd), each a "
                                 f"scalar or ({B},)")
            ref = reference.get(c.link)
            if ref is None and np.any(Kp != 0.0):
                raise ValueError(f"reference[{c.link!r}]: Kp != 0 holds the contact to a "
                                 f"reference placement; give its world placement (4, 4)")
            if ref is not None:
                ref = np.asarray(ref, dtype=float)
                if ref.shape not in ((4, 4), (B, 4, 4)) or not np.isfinite(ref).all():
                    raise ValueError(f"reference[{c.link!r}]: expected a finite (4, 4) or "
                                     f"({B}, 4, 4) placement, got shape {ref.shape}")
                ref = np.broadcast_to(ref, (B, 4, 4))
            out.append((Kp, Kd, ref))
        return out

    def _corrections(self, kin, gains):
        """{contact row name: (B, dim)}: each contact's corrected acceleration (Pinocchio's
        contact_acceleration_error, constrained-dynamics.hxx), angular-first, the reading its
        rows hold the contact frame's acceleration at instead of zero."""
        model, out = self.model, {}
        for c, (Kp, Kd, ref) in zip(self.contacts, gains):
            frame = model.frames[c.link]
            T = frame.placement @ c.placement
            vc = kin.body_velocities[:, frame.body] @ _placement_transform(T).T   # [w; v], LOCAL
            err = -Kd[:, None] * np.concatenate([vc[:, 3:], vc[:, :3]], axis=1)  # linear-first
            if ref is not None:
                oMc = kin.Xworld[frame.body].placement() @ T
                Rt = np.swapaxes(oMc[:, :3, :3], 1, 2)
                t = np.einsum("bij,bj->bi", Rt, ref[:, :3, 3] - oMc[:, :3, 3])    # c^p_ref
                if c.dim == 6:
                    err += Kp[:, None] * log6(Rt @ ref[:, :3, :3], t)
                else:
                    err[:, :3] += Kp[:, None] * t
            out[f"{c.link}_contact"] = (err[:, :3] if c.dim == 3
                                        else np.concatenate([err[:, 3:], err[:, :3]], 1))
        return out

    # ------------------------------------------------------------------ releasing contacts
    def _released(self, values, rhs, active):
        """(x, ok) of states where some contacts are released, on the all-contacts plan.

        With x0 the all-contacts solution and Z = D^-1 E_r (E_r: unit right-hand sides on the
        released contacts' acceleration rows, the same factorization), x0 + Z delta solves the
        system whose released rows hold accelerations changed by delta, i.e. free; delta is the
        one that zeroes the released wrenches: C delta = -fx_r(x0), C = fx_r(Z) (square: per
        released contact, as many free accelerations as zeroed wrench components; C is the
        inverse operational-space inertia's counterpart, invertible wherever the held contacts
        leave the released one's motion free). A state where C or the all-contacts system is
        singular is solved alone on the system with the released rows replaced by fx_r = 0,
        in the least-norm sense (ok False when that system is singular)."""
        problem = self.problem.estimation
        n = problem.shape[1]
        first = problem.shape[0] - problem.rows.n_rows
        cols = problem.system.columns
        release_rows, zero_cols = [], []
        for c in self.contacts:
            rows = problem.rows.row_slices[f"{c.link}_contact"]
            release_rows.append(np.arange(first + rows.start, first + rows.stop))
            fx = np.asarray(cols[("fx", self.model.frames[c.link].body)].indices)
            zero_cols.append(fx if c.dim == 6 else fx[3:])      # 3D: the force (moment held 0)
        E = np.zeros((n, sum(len(r) for r in release_rows)))
        E[np.concatenate(release_rows), np.arange(E.shape[1])] = 1.0
        offsets = np.cumsum([0] + [len(r) for r in release_rows])
        factorization = self.estimation_plan.reference.factorization
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PivotBreakdownWarning)    # re-solved with pivoting
            X, solved = factorization.solve(
                values, np.concatenate([rhs[:, :, None], np.broadcast_to(E, (len(rhs),) + E.shape)],
                                       axis=2), return_status=True)
        x = np.empty((len(rhs), n))
        ok = np.ones(len(rhs), dtype=bool)
        alone = []
        for pattern in np.unique(active, axis=0):
            sel = np.flatnonzero((active == pattern).all(axis=1))
            off = np.flatnonzero(~pattern)
            r = np.concatenate([np.arange(offsets[j], offsets[j + 1]) for j in off])
            z = np.concatenate([zero_cols[j] for j in off])
            x0, Z = X[sel, :, 0], X[sel][:, :, 1 + r]
            C = Z[:, z, :]
            good = solved[sel].copy()                 # (an unsolved state's Z is NaN)
            good[good] = np.linalg.cond(C[good]) < 1.0 / (n * np.finfo(float).eps)
            g = sel[good]
            delta = np.linalg.solve(C[good], -x0[good][:, z, None])
            x[g] = x0[good] + (Z[good] @ delta)[:, :, 0]
            alone += [(b, np.concatenate([release_rows[j] for j in off]), z) for b in sel[~good]]
        for b, rows, z in alone:
            K = factorization.assemble(values[b]).toarray()
            y = rhs[b].copy()
            K[rows] = 0.0
            K[rows, z] = 1.0
            y[rows] = 0.0
            x[b], _, rank, _ = np.linalg.lstsq(K, y, rcond=None)
            ok[b] = rank == n
        return x, ok


class RedundantContactsWarning(UserWarning):
    """Some states' contacts do not determine their wrenches (ConstrainedPlan.solve)."""


class ConstrainedResult:
    """result["qdd"] (B, nv); result["lambda"] (B, m): per contact, in the plan's contact order,
    linear-first in the contact frame (force (3,) of a 3D contact, [force; torque] of a 6D one),
    Pinocchio's lambda_c; result.wrench(link) (B, 6) linear-first in the link frame; ok (B,)."""

    def __init__(self, plan, estimate, single):
        self._plan, self._est, self._single = plan, estimate, single
        self.ok = estimate.ok

    def wrench(self, link):
        return self._est.wrench(link)

    def __getitem__(self, key):
        if key == "qdd":
            return self._est["qdd"]
        if key == "lambda":
            out = []
            for c, Xf, _ in self._plan._frames:
                w = np.atleast_2d(self._est.wrench(c.link))          # linear-first, link frame
                af = np.concatenate([w[:, 3:], w[:, :3]], axis=1)     # angular-first
                wc = af @ Xf.T                                        # in the contact frame
                out.append(wc[:, 3:] if c.dim == 3 else np.concatenate([wc[:, 3:], wc[:, :3]], 1))
            lam = np.concatenate(out, axis=1)
            return unbatch(lam, self._single)
        raise KeyError(f"{key!r}: a ConstrainedResult has 'qdd' and 'lambda' (and wrench(link))")
