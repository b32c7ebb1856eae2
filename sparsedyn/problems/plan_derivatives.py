"""The derivatives of a dynamics plan's joint-space output through the plan's own factorization
(issue #22): for inverse dynamics (dtau/dq, dtau/dv, dtau/dqdd), for forward dynamics
(dqdd/dq, dqdd/dv, dqdd/dtau), derivatives with respect to q in Pinocchio's tangent space.

The solution d* of D(q) d + b(q, v, y) = 0 (seed 001, eq. 3 with the measurement rows of eq. 8
or 15) moves as

    dd/dq_k = -D^-1 (dD/dq_k d* + db/dq_k),   dd/dv_k = -D^-1 db/dv_k,   dd/dy_k = D^-1 e_k

(e_k: the measurement row of y_k, where the residual is d_block - y). The 3 nv right-hand sides
(the first 2 nv: system/tangent.py in NumPy, the reference route, or its compiled twin
kernels/tangent_numba.py) share one numeric factorization: the plan's static pivot LU runs once
per state and its substitution part 3 nv times (Factorization.solve with rhs (B, n, k) in
NumPy). Compiled, the substitutions are pruned (kernels/lu_pruned.py, planned once per plan):
a direction of q or v moves only the rows of its joint's subtree (tangent_numba.rhs_pattern), a
measurement direction one row, and only the tau (or qdd) rows of dd, the derivatives, are
computed, of the symmetric d out/dy (M or M^-1) one triangle, mirrored; groups of fewer than
PRUNED_MIN_STATES states (one state per call) run them a state at a time
(kernels/lu_pruned_columns.py); a plan whose factorization checks each state's backward error
(it needs all of dd) takes kernels/lu_multi_rhs.py (every row, the right-hand sides on the
lanes).
"""
from __future__ import annotations

import numpy as np

from ..kernels.assemble_numba import _assemble_range
from ..kernels.lu_multi_rhs import solve_multi_rhs
from ..kernels.lu_pruned import solve_pruned
from ..kernels.lu_pruned_columns import solve_pruned_columns
from ..kernels.lu_pruned_plan import kept_mask
from ..kernels.tangent_numba import tangent_lanes, tangent_rhs
from ..kinematics import body_velocities, joint_transforms
from ..system.tangent import residual_tangents
from ..threads import run_ranges
from .derivative_layout import compiled_values, output_columns, rhs_buffer, tangent_data
from .derivative_solves import solve_outputs

#: states per group of right-hand sides: bounds the (n, 3 nv, chunk) arrays (12 MB each on the
#: humanoid)
CHUNK = 16


def derivative_kernels_ready():
    """True if the compiled tangent right-hand sides and multi-right-hand-side substitutions
    (pruned or not, and the pruning's plan) run without a JIT compile; else False, their compile
    started in the background (sparsedyn/jit.py)."""
    from .. import jit
    return jit.ready("the derivative kernels",
                     (tangent_lanes, solve_multi_rhs, solve_pruned, solve_pruned_columns,
                      kept_mask, _assemble_range))


def solve_derivatives(plan, q, v, x, backend, threads=1):
    """(d out/dq, d out/dv, d out/dy), each (B, nv, nv), for batched checked q (B, nq), v (B, nv)
    and the problem's solution x (B, n_cols) at them; backend: "numpy" (the tangent right-hand
    sides and the LU in NumPy: the reference) or "numba" (both compiled; the groups of CHUNK
    states split over `threads` threads, the kernels release the GIL).
    A state whose static pivot fails is re-solved with partial pivoting (Factorization.solve:
    PivotBreakdownWarning); singular ones raise SingularModelError naming the batch indices."""
    system, model = plan.system, plan.model
    B, nv = q.shape[0], model.nv
    out_cols = output_columns(plan)
    result = np.empty((3, B, nv, nv))
    status = np.zeros(B, dtype=np.int8)
    # kinematics once for the batch: NumPy's per-body loops on the reference route, else
    # compiled in the pass that writes D(q)'s entries
    if backend == "numpy":
        Xup = joint_transforms(model, q)
        velocities = body_velocities(model, Xup, v)
        values = system.values(Xup)
    else:
        values, kin, velocities = compiled_values(plan, q, v)
        data = tangent_data(plan)
        v, x = np.ascontiguousarray(v), np.ascontiguousarray(x)

    def run(starts):
        """The groups of states starting at `starts` (each thread its own right-hand sides)."""
        # right-hand sides states last (the pruned substitutions' lanes), reused by every group
        # (no solve writes rhs; the compiled tangent clears what it writes, the NumPy one all)
        # (the NumPy route writes whole columns: a buffer of its own)
        buffer = rhs_buffer(plan, min(B, CHUNK), reuse=backend != "numpy")
        rhs = buffer.transpose(2, 0, 1)                              # (state, row, column)
        for lo in starts:
            hi = min(B, lo + CHUNK)
            if backend == "numpy":
                dr_q, dr_v = residual_tangents(system, [X[lo:hi] for X in Xup],
                                               velocities[lo:hi], v[lo:hi], x[lo:hi])
                rhs[:hi - lo, :, :nv], rhs[:hi - lo, :, nv:2 * nv] = -dr_q, -dr_v
                dx, status[lo:hi] = plan.factorization.solve_status(
                    values[lo:hi], np.ascontiguousarray(rhs[:hi - lo]), backend="numpy")
                dx = dx[:, out_cols]
            else:
                tangent_rhs(data, kin[lo:hi], velocities[lo:hi], v[lo:hi], x[lo:hi], buffer)
                dx, status[lo:hi] = solve_outputs(plan, values[lo:hi], buffer)
            for k in range(3):
                result[k, lo:hi] = dx[:, :, k * nv:(k + 1) * nv]

    starts = np.arange(0, B, CHUNK)
    threads = 1 if backend == "numpy" else min(threads, starts.size)
    if threads <= 1:
        run(starts)
    else:                                               # contiguous runs of groups per thread
        parts = np.array_split(starts, threads)
        run_ranges(range(threads + 1), lambda k, _hi, _k: run(parts[k]))
    plan._raise_for_status(status, np.arange(B), {"q": q, "v": v})
    return tuple(result)
