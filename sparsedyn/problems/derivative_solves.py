"""The 3 nv substitutions of the derivatives (plan_derivatives.py) with one numeric
factorization per state: pruned to each right-hand side's reach and the output rows where the
plan allows, with the states on the lanes (kernels/lu_pruned.py) in groups large enough, else a
state at a time with blocks of columns on the lanes (kernels/lu_pruned_columns.py); where the
plan does not allow pruning, all rows with the right-hand sides on the lanes
(kernels/lu_multi_rhs.py); states any of them flags go through Factorization.solve_status."""
from __future__ import annotations

import functools
import weakref

import numpy as np

from ..kernels.lu_multi_rhs import multi_rhs_program, solve_multi_rhs
from ..kernels.lu_pruned import solve_pruned
from ..kernels.lu_pruned_columns import solve_pruned_columns
from ..kernels.lu_pruned_plan import pruned_program
from ..kernels.tangent_numba import rhs_pattern
from .derivative_layout import measurement_columns, output_columns, tangent_data

#: fewer states than this in a group take the pruned substitutions a state at a time
#: (lu_pruned_columns: each kept op decoded once per block of columns); the lanes of states
#: (lu_pruned) decode each kept op once per group of one or two columns
PRUNED_MIN_STATES = 8
#: columns per block of lu_pruned_columns: each op is decoded once per block (most of the cost
#: on narrow blocks), while the block's union of structures grows with it (humanoid: 2.1x (ID)
#: / 1.4x (FD) the single columns' ops at 16, 4.9x / 4.4x for all 3 nv at once)
BLOCK_COLUMNS = 16

_MULTI_RHS = weakref.WeakKeyDictionary()         # Factorization -> MultiRhsProgram or None
_PRUNED = weakref.WeakKeyDictionary()   # plan -> {blocks: (PrunedProgram, triangle)}


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


def pruned_derivative_program(plan, blocks=False):
    """(the plan's lu_pruned.PrunedProgram for its 3 nv derivative right-hand sides, the
    triangle of d out/dy it computes: "lower" or "upper"), or (None, None) where the
    factorization needs the whole solution (its row-wise backward-error check) or has no
    multi-right-hand-side program. Structure: tangent_numba.rhs_pattern and the measurement
    columns; wanted: the output rows, in the y block one triangle of the symmetric M (ID) or
    M^-1 (FD), the one with fewer kept ops (solve_outputs mirrors it). blocks: the program of
    lu_pruned_columns instead (same triangle): blocks of BLOCK_COLUMNS columns, each direction
    of q next to the same direction of v (one structure), then the measurement directions."""
    cache = _PRUNED.setdefault(plan, {})
    if blocks not in cache:
        F, nv = plan.factorization, plan.model.nv
        M = None if F.program.symmetric or F.checks_accuracy else multi_rhs_program(F.program)
        cache[blocks] = (None, None)
        if M is not None:
            pattern = np.concatenate((rhs_pattern(tangent_data(plan), plan.system.rows.size, nv),
                                      measurement_columns(plan) != 0), axis=1)
            i, j = np.indices((nv, nv))
            wanted = {name: np.concatenate((np.ones((nv, 2 * nv), dtype=bool), tri), 1)
                      for name, tri in (("lower", i >= j), ("upper", i <= j))}
            if blocks:
                name = pruned_derivative_program(plan)[1]
                qv, y = np.arange(2 * nv).reshape(2, nv).T.ravel(), np.arange(2 * nv, 3 * nv)
                groups = [cols[c:c + BLOCK_COLUMNS] for cols in (qv, y)
                          for c in range(0, cols.size, BLOCK_COLUMNS)]
                cache[blocks] = (pruned_program(M, pattern, output_columns(plan),
                                                wanted[name], groups), name)
            else:
                options = []
                for name in ("lower", "upper"):
                    Q = pruned_program(M, pattern, output_columns(plan), wanted[name])
                    work = (np.diff(Q.group_ptr) * np.diff(Q.op_ptr)).sum()
                    options.append((work, name, Q))
                _, name, Q = min(options, key=lambda o: o[0])
                cache[blocks] = (Q, name)
    return cache[blocks]


def _mirror(block, triangle):
    """(B, nv, nv) symmetric from its `triangle` ("lower" or "upper"), in place."""
    i, j = _above_diagonal(block.shape[1])
    if triangle == "lower":
        block[:, i, j] = block[:, j, i]
    else:
        block[:, j, i] = block[:, i, j]


@functools.lru_cache(maxsize=None)
def _above_diagonal(nv):
    return np.triu_indices(nv, 1)


def solve_outputs(plan, values, rhs):
    """(out, status): out (B, nv, k) the output rows of D(values[s])^-1 rhs[:, :, s] for rhs
    (n, k, >= B), states last, zero outside pruned_derivative_program's pattern: the pruned
    substitutions where planned (lanes of states from PRUNED_MIN_STATES states on, else blocks
    of columns; the y block's other triangle mirrored), states they flag re-solved in full by
    Factorization.solve_status (as solve_many)."""
    few = values.shape[0] < PRUNED_MIN_STATES
    (Q, triangle), out_cols = pruned_derivative_program(plan, few), output_columns(plan)
    B = values.shape[0]
    full = (lambda states: np.ascontiguousarray(rhs[:, :, states].transpose(2, 0, 1)))
    if Q is None:
        x, status = solve_many(plan.factorization, values, full(np.arange(B)))
        return x[:, out_cols], status
    out = np.empty((B, out_cols.size, rhs.shape[1]))
    broken = np.zeros(B, dtype=np.bool_)
    (solve_pruned_columns if few else solve_pruned)(Q, np.ascontiguousarray(values), rhs, out,
                                                    broken)
    status = np.zeros(B, dtype=np.int8)
    redo = np.flatnonzero(broken)
    if redo.size:
        x, status[redo] = plan.factorization.solve_status(values[redo], full(redo),
                                                          backend="numba")
        out[redo] = x[:, out_cols]
    _mirror(out[:, :, 2 * out_cols.size:], triangle)
    return out, status
