"""The derivatives of a dynamics plan's joint-space output through plans of the model (issue
#22): for inverse dynamics (dtau/dq, dtau/dv, dtau/dqdd), for forward dynamics (dqdd/dq, dqdd/dv,
dqdd/dtau), derivatives with respect to q in Pinocchio's tangent space.

The solution d* of D(q) d + b(q, v, y) = 0 (seed 001, eq. 3 with the measurement rows of eq. 8
or 15) moves as

    dd/dq_k = -D^-1 (dD/dq_k d* + db/dq_k),   dd/dv_k = -D^-1 db/dv_k,   dd/dy_k = D^-1 e_k

(e_k: the measurement row of y_k, where the residual is d_block - y). The reference route
(backend "numpy") solves exactly that on the plan's own D: the 3 nv right-hand sides (the first
2 nv from system/tangent.py) share one numeric factorization per state (Factorization.solve).

The compiled route solves the q and v directions on inverse dynamics' D, whose
substitutions reach far less of D than forward dynamics' (each direction's subtree and its
path to the root), and the rest through the mass-matrix plan (CRBA and Featherstone's L^T L):

    inverse dynamics:  dtau/dq, dtau/dv from the 2 nv right-hand sides,  dtau/dqdd = M
    forward dynamics:  dqdd/dq = -M^-1 dtau/dq,  dqdd/dv = -M^-1 dtau/dv,  dqdd/dtau = M^-1

with dtau/dq and dtau/dv those of inverse dynamics at qdd* (its solution is d*: the same
variables; Carpentier and Mansard 2018 derive the forward case the same way). The tangent
right-hand sides are kernels/tangent_numba.py's; the substitutions are pruned
(kernels/lu_pruned.py, planned once per plan): a direction moves only the rows of its joint's
subtree (tangent_numba.rhs_pattern) and only the tau rows of dd are computed; groups of fewer
than PRUNED_MIN_STATES states (one state per call) run them a state at a time
(kernels/lu_pruned_columns.py); a plan whose factorization checks each state's backward error
(it needs all of dd) takes kernels/lu_multi_rhs.py (every row, the right-hand sides on the
lanes); M^-1 is applied by kernels/ltl_derivatives.py. That is the "numba" route.

The "c" route (c_unit: backends/c_derivatives.py) computes the same quantities without D:
Carpentier and Mansard's recursion for dtau/dq, dtau/dv and M, and for forward dynamics
M^-1 through L^T L in the same call, on vectors of states. It reads the joint-space qdd alone
(the given one, or the solution's) and the external wrenches, and a batch with a state it
flags runs the numba route, whose checks decide.
"""
from __future__ import annotations

import weakref

import numpy as np

from .. import backends
from ..kernels import crba_numba
from ..kernels.assemble_numba import _assemble_range
from ..kernels.ltl_derivatives import forward_from_inverse
from ..kernels.lu_multi_rhs import solve_multi_rhs
from ..kernels.lu_pruned import solve_pruned
from ..kernels.lu_pruned_columns import solve_pruned_columns
from ..kernels.lu_pruned_plan import kept_mask
from ..kernels.tangent_numba import tangent_lanes, tangent_rhs
from ..kinematics import body_velocities, joint_transforms
from ..recursive.ltl import pattern as ltl_pattern
from ..system.tangent import residual_tangents
from ..threads import run_ranges
from .derivative_layout import (compiled_values, measurement_columns, output_columns,
                                rhs_buffer, tangent_data)
from .derivative_solves import solve_outputs

#: states per group of right-hand sides: bounds the (n, 2 nv, chunk) arrays (8 MB each on the
#: humanoid)
CHUNK = 16


def derivative_kernels_ready():
    """True if the compiled tangent right-hand sides and multi-right-hand-side substitutions
    (pruned or not, and the pruning's plan) run without a JIT compile; else False, their compile
    started in the background (sparsedyn/jit.py)."""
    from .. import jit
    return jit.ready("the derivative kernels",
                     (tangent_lanes, solve_multi_rhs, solve_pruned, solve_pruned_columns,
                      kept_mask, _assemble_range, forward_from_inverse, crba_numba._serial,
                      crba_numba._parallel))


def derivative_backend(plan, requested):
    """The route of plan.solve(..., derivatives=True, backend=requested): "numpy" for "numpy";
    "c" for "c" and, once its library is built, "auto", where there is a C compiler (c_unit);
    else "numba" ("auto": once the kernels run without a JIT compile, else "numpy")."""
    if requested == "numpy":
        return "numpy"
    if requested in ("c", "auto"):
        unit = c_unit(plan)
        if unit is not None and (requested == "c" or unit.ready()):
            return "c"
    if requested == "auto" and not derivative_kernels_ready():
        return "numpy"
    return "numba"


def c_unit(plan):
    """The C unit of the plan's derivatives (backends/c_derivatives.py: Carpentier and Mansard's
    recursion, then M^-1 through L^T L for forward dynamics, external wrenches on the plan's
    links), or None without a C compiler."""
    if plan not in _C_UNITS:
        unit = None
        if backends.module("c").unavailable() is None:
            from ..backends.c_derivatives import CDerivatives
            unit = CDerivatives(plan.derivative_plans()[1].program, plan.model,
                                "inverse" if plan.problem.given == "qdd" else "forward",
                                plan.problem.fx_bodies)
        _C_UNITS[plan] = unit
    return _C_UNITS[plan]


def check_derivatives_out(out, B, nv, zero=False):
    """The caller's array for plan.solve's derivatives (derivatives_out): (3, B, nv, nv)
    C-contiguous writeable float64 (B = 1 for one state), else ValueError naming it; None: a
    new array (zeroed where `zero`)."""
    shape = (3, B, nv, nv)
    if out is None:
        return np.zeros(shape) if zero else np.empty(shape)
    if not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != np.float64 \
            or not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError(f"derivatives_out: expected a C-contiguous, writeable float64 array of "
                         f"shape {shape}, got {type(out).__name__} {getattr(out, 'dtype', '')} "
                         f"{getattr(out, 'shape', '')}")
    if zero:
        out[...] = 0.0
    return out


def plan_solve_derivatives(plan, q, v, qdd, x, backend, threads, solution, out=None, fx=None):
    """plan.solve's derivatives on the route `backend` (derivative_backend) at checked q, v,
    the joint-space qdd (given or solved, (B, nv)) and the plan's external wrenches fx
    (B, n_fx, 6), into out (check_derivatives_out); x: the whole solution, or None and
    solution() computes it (the routes but C's read it: solve_derivatives)."""
    result = check_derivatives_out(out, q.shape[0], plan.model.nv)
    if backend == "c":
        status = c_unit(plan).run(q, v, qdd, result, threads, fx)
        if not status.any():
            return result
        backend = "numba"        # a flagged state: the substitution route's checks decide
    solve_derivatives(plan, q, v, solution() if x is None else x, backend, threads, result)
    return result


def solve_derivatives(plan, q, v, x, backend, threads=1, out=None):
    """(d out/dq, d out/dv, d out/dy), each (B, nv, nv), for batched checked q (B, nq), v (B, nv)
    and the problem's solution x (B, n_cols) at them, written into out (3, B, nv, nv) where
    given; backend: "numpy" (the plan's own D, the tangent right-hand sides and the LU in NumPy:
    the reference) or "numba" (compiled, through plan.derivative_plans(); the groups of CHUNK
    states split over `threads` threads, the kernels release the GIL).
    A state whose static pivot fails is re-solved with partial pivoting (Factorization.solve:
    PivotBreakdownWarning); singular ones raise SingularModelError naming the batch indices."""
    if backend == "numpy":
        return _reference(plan, q, v, x, out)
    model, nv, B = plan.model, plan.model.nv, q.shape[0]
    result = np.empty((3, B, nv, nv)) if out is None else out
    base, mass = plan.derivative_plans()
    forward = base is not plan
    if forward:                                  # d* in inverse dynamics' column layout
        x = x[:, _twin_columns(plan, base)]
    status = np.zeros(B, dtype=np.int8)
    # D(q), the kinematics and velocities compiled in the pass that writes D's entries; M or
    # its factor from the mass-matrix plan (both raise on a singular or non-finite state)
    values, kin, velocities = compiled_values(base, q, v)
    data = tangent_data(base)
    v, x = np.ascontiguousarray(v), np.ascontiguousarray(x)
    if forward:
        L = mass.factor(q, threads=threads, backend="numba")
        tree = ltl_pattern(model)            # lambda and each DoF's subtree end, per model
    else:
        mass.solve(q, threads=threads, backend="numba", out=result[2])

    def run(starts):
        """The groups of states starting at `starts` (each thread its own right-hand sides)."""
        # right-hand sides states last (the pruned substitutions' lanes), reused by every group
        # (no solve writes rhs; the compiled tangent overwrites its pattern, nothing else)
        buffer = rhs_buffer(base, min(B, CHUNK), reuse=True)
        dtau = np.empty((min(B, CHUNK), nv, 2 * nv))
        for lo in starts:
            hi = min(B, lo + CHUNK)
            tangent_rhs(data, kin[lo:hi], velocities[lo:hi], v[lo:hi], x[lo:hi], buffer)
            dx, status[lo:hi] = solve_outputs(base, values[lo:hi], buffer, dtau[:hi - lo])
            if forward:
                forward_from_inverse(tree.parents, tree.last, L[lo:hi], dx, result[0, lo:hi],
                                     result[1, lo:hi], result[2, lo:hi])
            else:
                result[0, lo:hi], result[1, lo:hi] = dx[:, :, :nv], dx[:, :, nv:]

    _split(run, B, threads)
    base._raise_for_status(status, np.arange(B), {"q": q, "v": v})
    return tuple(result)


def _reference(plan, q, v, x, out=None):
    """solve_derivatives on the plan's own D in NumPy (the 3 nv right-hand sides of the module
    doc, system/tangent.py's tangents, Factorization.solve_status)."""
    system, model = plan.system, plan.model
    B, nv = q.shape[0], model.nv
    out_cols = output_columns(plan)
    result = np.empty((3, B, nv, nv)) if out is None else out
    status = np.zeros(B, dtype=np.int8)
    Xup = joint_transforms(model, q)
    velocities = body_velocities(model, Xup, v)
    values = system.values(Xup)
    rhs = np.zeros((min(B, CHUNK), system.rows.size, 3 * nv))
    rhs[:, :, 2 * nv:] = measurement_columns(plan)
    for lo in range(0, B, CHUNK):
        hi = min(B, lo + CHUNK)
        dr_q, dr_v = residual_tangents(system, [X[lo:hi] for X in Xup], velocities[lo:hi],
                                       v[lo:hi], x[lo:hi])
        rhs[:hi - lo, :, :nv], rhs[:hi - lo, :, nv:2 * nv] = -dr_q, -dr_v
        dx, status[lo:hi] = plan.factorization.solve_status(values[lo:hi], rhs[:hi - lo],
                                                            backend="numpy")
        dx = dx[:, out_cols]
        for k in range(3):
            result[k, lo:hi] = dx[:, :, k * nv:(k + 1) * nv]
    plan._raise_for_status(status, np.arange(B), {"q": q, "v": v})
    return tuple(result)


def _split(run, B, threads):
    """run(starts) over the groups of CHUNK states, contiguous runs of groups per thread."""
    starts = np.arange(0, B, CHUNK)
    threads = min(threads, starts.size)
    if threads <= 1:
        run(starts)
    else:
        parts = np.array_split(starts, threads)
        run_ranges(range(threads + 1), lambda k, _hi, _k: run(parts[k]))


_TWIN_COLUMNS = weakref.WeakKeyDictionary()       # forward plan -> its columns in base's order
_C_UNITS = weakref.WeakKeyDictionary()            # plan -> CDerivatives or None


def _twin_columns(plan, base):
    if plan not in _TWIN_COLUMNS:
        _TWIN_COLUMNS[plan] = plan.system.columns.permutation(
            [(b.kind, b.body) for b in base.system.columns.blocks])
    return _TWIN_COLUMNS[plan]
