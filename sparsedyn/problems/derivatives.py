"""Analytical derivatives of inverse and forward dynamics (Pinocchio's computeRNEADerivatives and
computeABADerivatives), through compiled plans of Nori's system (issue #22):

    dtau_dq, dtau_dv, dtau_da = rnea_derivatives(model, q, v, a, f_ext)   # dtau_da = M
    dqdd_dq, dqdd_dv, dqdd_dtau = aba_derivatives(model, q, v, tau, f_ext) # dqdd_dtau = M^-1

Derivatives with respect to q live in Pinocchio's tangent space (q (+) dq as pinocchio.integrate
moves it: a free-flyer's dq is the local twist [linear, angular] of the base). Each is
(B, nv, nv), (nv, nv) for a single state, (0, nv, nv) for B = 0. f_ext: {link name: linear-first
wrench in the link frame}, constant in that frame. The plan of each (model, problem, f_ext links)
is compiled once and cached (plans are built offline, Nori Sec. IV-D); the work per call is
plan_derivatives': on the C route (backend "c", "auto" once built) Carpentier and
Mansard's recursion and, for forward dynamics, M^-1 through L^T L on vectors of states; on the
numba route one numeric factorization of inverse dynamics' D(q) and 2 nv pruned substitutions,
and the mass-matrix plan's M (forward dynamics: its L^T L, then M^-1 applied); on the NumPy
reference route the plan's own D and 3 nv substitutions.
"""
from __future__ import annotations

import weakref

from .dynamics import forward_dynamics, inverse_dynamics
from .plan import compile

_PLANS = weakref.WeakKeyDictionary()     # model -> {(problem name, f_ext links): Plan}


def derivative_plan(model, name, f_ext):
    """The cached compiled plan of `name` ("inverse_dynamics" / "forward_dynamics") with an
    external-wrench variable on each link named in f_ext (a dict, or None)."""
    if f_ext is not None and not isinstance(f_ext, dict):
        raise ValueError("f_ext: expected a dict {link name: wrench (6,) or (B, 6)}")
    links = tuple(sorted(f_ext or ()))
    cache = _PLANS.setdefault(model, {})
    key = (name, links)
    if key not in cache:
        make = inverse_dynamics if name == "inverse_dynamics" else forward_dynamics
        cache[key] = compile(make(model, f_ext=list(links) or False))
    return cache[key]


def rnea_derivatives(model, q, v, a, f_ext=None, backend=None):
    """(dtau/dq, dtau/dv, dtau/da) of inverse dynamics at (q, v, a[, f_ext]), as Pinocchio's
    computeRNEADerivatives (dtau/da = M, both triangles). backend: the plan's ("auto", "c",
    "numba", "numpy": the NumPy reference route)."""
    plan = derivative_plan(model, "inverse_dynamics", f_ext)
    return plan.solve(q, v, qdd=a, f_ext=f_ext, backend=backend, derivatives=True).derivatives


def aba_derivatives(model, q, v, tau, f_ext=None, backend=None):
    """(dqdd/dq, dqdd/dv, dqdd/dtau) of forward dynamics at (q, v, tau[, f_ext]), as Pinocchio's
    computeABADerivatives (dqdd/dtau = M^-1, both triangles). backend as rnea_derivatives."""
    plan = derivative_plan(model, "forward_dynamics", f_ext)
    return plan.solve(q, v, tau=tau, f_ext=f_ext, backend=backend, derivatives=True).derivatives
