"""The 3 nv substitutions of the derivatives (plan_derivatives.py) with one numeric
factorization per state: pruned to each right-hand side's reach and the output rows
(kernels/lu_pruned.py) where the plan allows and the group of states is large enough, else all
rows with the right-hand sides on the lanes (kernels/lu_multi_rhs.py); states either flags go
through Factorization.solve_status."""
from __future__ import annotations

import weakref

import numpy as np

from ..kernels.lu_multi_rhs import multi_rhs_program, solve_multi_rhs
from ..kernels.lu_pruned import solve_pruned
from ..kernels.lu_pruned_plan import pruned_program
from ..kernels.tangent_numba import rhs_pattern
from .derivative_layout import measurement_columns, output_columns, tangent_data

#: fewer states than this in a group take the unpruned substitutions (lu_multi_rhs: each op
#: decoded once for all 3 nv right-hand sides); the pruned ones decode each kept op per lane
#: group, which pays from here on (humanoid: even at 8 states FD, 4 ID)
PRUNED_MIN_STATES = 8

_MULTI_RHS = weakref.WeakKeyDictionary()         # Factorization -> MultiRhsProgram or None
_PRUNED = weakref.WeakKeyDictionary()            # plan -> (PrunedProgram, triangle)


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
