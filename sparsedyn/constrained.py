"""Forward dynamics with rigid contacts (Pinocchio's constraintDynamics, LOCAL frames) as one square
block system: Nori's forward-dynamics rows with the joint torques known (seed 001, eq. 15-17),
each contact link's external wrench an unknown (as an estimated contact wrench, Sec. VI), and per
contact the rows that fix its acceleration (as loop-closure rows fix a loop's, seed 003 Sec. II-D):

    6D contact at frame c of body b:   c_X_b a_b + [0; R_c^T g] = 0       the frame's spatial
                                       acceleration (a_b holds -a_g: Nori's a_0 = -a_g)
    3D contact:                        lin(c_X_b a_b) + R_c^T g + w_c x v_c = 0   the point's
                                       classical acceleration
                                       ang(c_X_b^* fx_b) = 0               a pure force at the point

The system is assembled and solved by the estimation machinery's exact route (problem rows as
pseudo-measurements with known readings), NumPy assembly: the gravity term R_c^T g is not of the
forms the compiled sensor rows take. A state whose contacts are redundant (a rank-deficient
contact Jacobian) is flagged not ok and gets the minimum-prior (ridge-regularised) contact
wrenches, never NaN: qdd stays the constrained motion, the split of the wrenches is arbitrary.

    plan = sd.constrained_forward_dynamics(model, [sd.Contact("l_sole", "6d"),
                                                    sd.Contact("r_sole", "3d")])
    res = plan.solve(q, v, tau)               # batched
    res["qdd"] (B, nv), res["lambda"] (B, m) (Pinocchio's lambda_c: per contact, linear-first,
    in the contact frame), res.wrench(link) (B, 6) in the link frame, res.ok (B,)
"""
from __future__ import annotations

import warnings

import numpy as np

from .batch import state, unbatch
from .contacts import Contact
from .errors import check_assembled
from .sensors import JointTorques, Sensor, Term, UnactuatedBase, _WrenchSensor, \
    _force_transform, _link_frame, _placement_transform
from .spatial import cross3


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

    def linear_map(self, model, kin, wrench_links):
        frame = _link_frame(model, self.link, f"contact {self.name!r}")
        b = frame.body
        Xc = _placement_transform(frame.placement @ self.contact.placement)   # c_X_b, angular-first
        gravity_c = np.einsum("ij,bjk,k->bi", Xc[:3, :3], kin.Xworld[b].E, model.gravity)
        if self.contact.dim == 6:
            bias = np.concatenate([np.zeros_like(gravity_c), gravity_c], axis=1)
            return [Term("a", b, Xc)], bias
        vc = kin.body_velocities[:, b] @ Xc.T
        return [Term("a", b, Xc[3:])], gravity_c + cross3(vc[:, :3], vc[:, 3:])


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
        from .estimation import compile_estimation
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # the NumPy route is this problem's route
            plan = compile_estimation(self.estimation, method="exact", ordering=ordering,
                                      compiled=False)
        return ConstrainedPlan(self, plan)

    def __repr__(self):
        kinds = ", ".join(f"{c.link}:{c.kind}" for c in self.contacts)
        return f"{self.name}({self.model.name!r}, contacts [{kinds}])"


def constrained_forward_dynamics(model, contacts):
    """The compiled plan of forward dynamics under rigid contacts (sparsedyn.Contact list; one
    per link, LOCAL frames): plan.solve(q, v, tau) -> ConstrainedResult."""
    return ConstrainedForwardDynamics(model, contacts).compile()


class ConstrainedPlan:
    """solve(q, v, tau) for batches of states (module docstring)."""

    def __init__(self, problem, estimation_plan):
        self.problem, self.model = problem, problem.model
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

    @property
    def stats(self):
        return dict(self.estimation_plan.stats, problem=self.problem.name,
                    contacts=[(c.link, c.kind) for c in self.contacts])

    def solve(self, q, v, tau):
        """ConstrainedResult of one state (q (nq,), v (nv,), tau (nv,)) or a batch."""
        from .estimation.plan import Estimate
        model = self.model
        q, vecs, B, single = state(model, q, v=v, tau=tau)
        tau = vecs["tau"]
        readings = {"tau": tau[:, 6:] if model.floating_base else tau}
        if model.floating_base:
            readings["base_unactuated"] = tau[:, :6]
        plan, problem = self.estimation_plan, self.problem.estimation
        readings = problem.check_readings(readings, B)
        if B == 0:
            return ConstrainedResult(self, Estimate(plan, np.zeros((0, problem.shape[1])), single,
                                                    np.ones(0, bool), None, None, (q, vecs["v"]),
                                                    readings), single)
        values, rhs, _, _ = problem.assemble(q, vecs["v"], readings)
        check_assembled(self.problem.name, "the constrained system or its right-hand side",
                        {"q": q, "v": vecs["v"], "tau": tau}, values, rhs)
        x, ok = plan.reference.solve_square(values, rhs)
        if not ok.all():
            bad = np.flatnonzero(~ok)
            x[bad] = plan.fallback().solve(values[bad], rhs[bad])[0]
            warnings.warn(RedundantContactsWarning(
                f"{len(bad)} of {len(ok)} states have redundant contacts (a rank-deficient "
                f"contact Jacobian; batch indices {bad[:10].tolist()}): their contact wrenches "
                f"are the ridge-regularised ones, qdd the constrained motion"), stacklevel=2)
        est = Estimate(plan, x, single, ok, None, None, (q, vecs["v"]), readings)
        return ConstrainedResult(self, est, single)


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
