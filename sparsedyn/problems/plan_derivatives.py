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
computed, of the symmetric d out/dy (M or M^-1) one triangle, mirrored; a plan whose
factorization checks each state's backward error (it needs all of dd), and groups of fewer
than PRUNED_MIN_STATES states, take kernels/lu_multi_rhs.py (every row, the right-hand sides
on the lanes).
"""
from __future__ import annotations

import weakref

import numpy as np

from ..kernels.lu_multi_rhs import multi_rhs_program, solve_multi_rhs
from ..kernels.lu_pruned import solve_pruned
from ..kernels.lu_pruned_plan import kept_mask, pruned_program
from ..kernels.tangent_numba import TangentData, rhs_pattern, tangent_rhs
from ..kinematics import body_velocities, joint_transforms
from ..model.model import WORLD
from ..recursive._common import gravity_acceleration
from ..system.tangent import residual_tangents

#: states per group of right-hand sides: bounds the (n, 3 nv, chunk) arrays (12 MB each on the
#: humanoid)
CHUNK = 16
#: fewer states than this in a group take the unpruned substitutions (lu_multi_rhs: each op
#: decoded once for all 3 nv right-hand sides); the pruned ones decode each kept op per lane
#: group, which pays from here on (humanoid: even at 8 states FD, 4 ID)
PRUNED_MIN_STATES = 8


def measurement_columns(plan):
    """(n_rows, nv) constant right-hand sides e_k: a unit in the measurement row of y_k (the
    given qdd or tau, in Pinocchio's joint layout)."""
    return _per_plan(_MEASUREMENT, plan, _measurement_columns)


def output_columns(plan):
    """Columns of the solution holding the joint-space output (tau or qdd), in Pinocchio's
    joint layout."""
    return _per_plan(_OUTPUT, plan, _output_columns)


def _per_plan(cache, plan, build):
    if plan not in cache:
        cache[plan] = build(plan)
    return cache[plan]


def _measurement_columns(plan):
    system, model, given = plan.system, plan.model, plan.problem.given
    E = np.zeros((system.rows.size, model.nv))
    for i in range(model.nbodies):
        E[system.rows[("y_" + given, i)].indices, np.arange(model.nv)[model.v_slice(i)]] = 1.0
    return E


def _output_columns(plan):
    system, out = plan.system, plan.problem.outputs[0]
    return np.concatenate([system.columns[(out, i)].indices for i in range(plan.model.nbodies)]
                          + [np.zeros(0, dtype=int)])


_TANGENT_DATA = weakref.WeakKeyDictionary()      # plan -> TangentData
_MULTI_RHS = weakref.WeakKeyDictionary()         # Factorization -> MultiRhsProgram or None
_PRUNED = weakref.WeakKeyDictionary()            # plan -> PrunedProgram or None
_MEASUREMENT = weakref.WeakKeyDictionary()       # plan -> measurement_columns
_OUTPUT = weakref.WeakKeyDictionary()            # plan -> output_columns


def solve_many(factorization, values, rhs):
    """(x, status) of D(values) x = rhs (B, n, k), as Factorization.solve_status(backend
    "numba"), with the right-hand sides on the lanes of kernels/lu_multi_rhs.py where the
    program allows (bit-identical solutions): states it flags (a failed pivot check, a
    non-finite solution or, where the factorization checks it, a row-wise backward error above
    ROW_BACKWARD_TOL) go through Factorization.solve_status, which re-solves them with partial
    pivoting (PivotBreakdownWarning) or reports them SINGULAR / OVERFLOW."""
    from ..planner.factorization import ROW_BACKWARD_TOL
    if factorization not in _MULTI_RHS:
        program = factorization.program
        _MULTI_RHS[factorization] = None if program.symmetric else multi_rhs_program(program)
    M = _MULTI_RHS[factorization]
    if M is None:
        return factorization.solve_status(values, rhs, backend="numba")
    B = values.shape[0]
    x = np.empty(rhs.shape)
    broken = np.zeros(B, dtype=np.bool_)
    solve_multi_rhs(M, np.ascontiguousarray(values), np.ascontiguousarray(rhs), x, broken)
    if factorization.checks_accuracy:
        broken |= ~(factorization.row_backward_error(values, rhs, x) <= ROW_BACKWARD_TOL)
    status = np.zeros(B, dtype=np.int8)
    redo = np.flatnonzero(broken)
    if redo.size:
        x[redo], status[redo] = factorization.solve_status(values[redo], rhs[redo],
                                                           backend="numba")
    return x, status


def pruned_derivative_program(plan):
    """(the plan's lu_pruned.PrunedProgram for its 3 nv derivative right-hand sides, the
    triangle of d out/dy it computes: "lower" or "upper"), or (None, None) where the
    factorization needs the whole solution (its row-wise backward-error check) or has no
    multi-right-hand-side program. Structure: tangent_numba.rhs_pattern and the measurement
    columns; wanted: the output rows, in the y block one triangle of the symmetric M (ID) or
    M^-1 (FD), the one with fewer kept ops (solve_outputs mirrors it)."""
    if plan not in _PRUNED:
        F, nv = plan.factorization, plan.model.nv
        M = None if F.program.symmetric or F.checks_accuracy else multi_rhs_program(F.program)
        _PRUNED[plan] = (None, None)
        if M is not None:
            pattern = np.concatenate((rhs_pattern(tangent_data(plan), plan.system.rows.size, nv),
                                      measurement_columns(plan) != 0), axis=1)
            i, j = np.indices((nv, nv))
            options = []
            for name, tri in (("lower", i >= j), ("upper", i <= j)):
                Q = pruned_program(M, pattern, output_columns(plan),
                                   np.concatenate((np.ones((nv, 2 * nv), dtype=bool), tri), 1))
                work = (np.diff(Q.group_ptr) * np.diff(Q.op_ptr)).sum()
                options.append((work, name, Q))
            _, name, Q = min(options, key=lambda o: o[0])
            _PRUNED[plan] = (Q, name)
    return _PRUNED[plan]


def _mirror(block, triangle):
    """(B, nv, nv) symmetric from its `triangle` ("lower" or "upper"), in place."""
    if triangle == "lower":
        block[...] = np.tril(block) + np.swapaxes(np.tril(block, -1), 1, 2)
    else:
        block[...] = np.triu(block) + np.swapaxes(np.triu(block, 1), 1, 2)


def solve_outputs(plan, values, rhs):
    """(out, status): out (B, nv, k) the output rows of D(values[s])^-1 rhs[:, :, s] for rhs
    (n, k, >= B), states last, zero outside pruned_derivative_program's pattern: the pruned
    substitutions where planned (from PRUNED_MIN_STATES states on; the y block's other triangle
    mirrored), states they flag re-solved in full by Factorization.solve_status (as
    solve_many)."""
    (Q, triangle), out_cols = pruned_derivative_program(plan), output_columns(plan)
    B = values.shape[0]
    full = (lambda states: np.ascontiguousarray(rhs[:, :, states].transpose(2, 0, 1)))
    if Q is None or B < PRUNED_MIN_STATES:
        x, status = solve_many(plan.factorization, values, full(np.arange(B)))
        return x[:, out_cols], status
    out = np.empty((B, out_cols.size, rhs.shape[1]))
    broken = np.zeros(B, dtype=np.bool_)
    solve_pruned(Q, np.ascontiguousarray(values), rhs, out, broken)
    status = np.zeros(B, dtype=np.int8)
    redo = np.flatnonzero(broken)
    if redo.size:
        x, status[redo] = plan.factorization.solve_status(values[redo], full(redo),
                                                          backend="numba")
        out[redo] = x[:, out_cols]
    _mirror(out[:, :, 2 * out_cols.size:], triangle)
    return out, status


def tangent_data(plan):
    """The compiled kernel's TangentData of a plan (built once)."""
    if plan not in _TANGENT_DATA:
        system, model = plan.system, plan.model
        N = model.nbodies
        S = np.zeros((N, 6, max([j.nv for j in model.joints] + [1])))
        for i, joint in enumerate(model.joints):
            S[i, :, :joint.nv] = joint.S
        support = [np.concatenate([np.arange(model.nv)[model.v_slice(j)] for j in model.support(i)])
                   for i in range(N)]
        first = (lambda layout, kind: np.array([layout[(kind, i)].start for i in range(N)],
                                               dtype=np.int64))
        _TANGENT_DATA[plan] = TangentData(
            parents=np.array([p if p != WORLD else -1 for p in model.parents], dtype=np.int64),
            S=S, v_start=np.array(model.v_index[:N], dtype=np.int64),
            v_size=np.array([j.nv for j in model.joints], dtype=np.int64),
            inertias=np.ascontiguousarray(model.inertias, dtype=float),
            a0=gravity_acceleration(model, 1)[0],
            col_a=first(system.columns, "a"), col_f=first(system.columns, "f"),
            row_a=first(system.rows, "ne_a"), row_f=first(system.rows, "ne_f"),
            support_ptr=np.cumsum([0] + [len(d) for d in support]).astype(np.int64),
            support_dirs=np.concatenate(support + [np.zeros(0, dtype=np.int64)]).astype(np.int64))
    return _TANGENT_DATA[plan]


def derivative_kernels_ready():
    """True if the compiled tangent right-hand sides and multi-right-hand-side substitutions
    (pruned or not, and the pruning's plan) run without a JIT compile; else False, their compile
    started in the background (sparsedyn/jit.py)."""
    from .. import jit
    return jit.ready("the derivative kernels",
                     (tangent_rhs, solve_multi_rhs, solve_pruned, kept_mask))


def solve_derivatives(plan, q, v, x, backend):
    """(d out/dq, d out/dv, d out/dy), each (B, nv, nv), for batched checked q (B, nq), v (B, nv)
    and the problem's solution x (B, n_cols) at them; backend: "numpy" (the tangent right-hand
    sides and the LU in NumPy: the reference) or "numba" (both compiled, one thread).
    A state whose static pivot fails is re-solved with partial pivoting (Factorization.solve:
    PivotBreakdownWarning); a singular one raises SingularModelError naming the batch index."""
    system, model = plan.system, plan.model
    B, nv = q.shape[0], model.nv
    E = measurement_columns(plan)
    out_cols = output_columns(plan)
    result = np.empty((3, B, nv, nv))
    # kinematics and D(q) once for the batch (NumPy: per-body loops, cheaper on more states)
    Xup = joint_transforms(model, q)
    velocities = body_velocities(model, Xup, v)
    values = system.values(Xup)
    if backend != "numpy":
        data = tangent_data(plan)
        E_all = np.ascontiguousarray(np.stack([X.E for X in Xup], axis=1))
        r_all = np.ascontiguousarray(np.stack([X.r for X in Xup], axis=1))
        v, x = np.ascontiguousarray(v), np.ascontiguousarray(x)
    # right-hand sides states last (the pruned substitutions' lanes), reused by every group
    # (no solve writes rhs; the compiled tangent clears what it writes, the NumPy one all)
    buffer = np.zeros((system.rows.size, 3 * nv, min(B, CHUNK)))
    buffer[:, 2 * nv:] = E[:, :, None]
    rhs = buffer.transpose(2, 0, 1)                                  # (state, row, column)
    for lo in range(0, B, CHUNK):
        hi = min(B, lo + CHUNK)
        if backend == "numpy":
            dr_q, dr_v = residual_tangents(system, [X[lo:hi] for X in Xup], velocities[lo:hi],
                                           v[lo:hi], x[lo:hi])
            rhs[:hi - lo, :, :nv], rhs[:hi - lo, :, nv:2 * nv] = -dr_q, -dr_v
            dx, status = plan.factorization.solve_status(
                values[lo:hi], np.ascontiguousarray(rhs[:hi - lo]), backend="numpy")
            dx = dx[:, out_cols]
        else:
            tangent_rhs(data, E_all[lo:hi], r_all[lo:hi], velocities[lo:hi], v[lo:hi],
                        x[lo:hi], rhs)
            dx, status = solve_outputs(plan, values[lo:hi], buffer)
        plan._raise_for_status(status, np.arange(lo, hi), {"q": q, "v": v})
        for k in range(3):
            result[k, lo:hi] = dx[:, :, k * nv:(k + 1) * nv]
    return tuple(result)
