"""The 2 nv substitutions of the derivatives (plan_derivatives.py: the q and v directions
through an inverse-dynamics plan) with one numeric factorization per state: pruned to each
right-hand side's reach and the output rows where the plan allows, with the states on the lanes (kernels/lu_pruned.py) in groups large enough, else a
state at a time with blocks of columns on the lanes (kernels/lu_pruned_columns.py); where the
plan does not allow pruning, all rows with the right-hand sides on the lanes
(kernels/lu_multi_rhs.py); states any of them flags go through Factorization.solve_status."""
from __future__ import annotations

import weakref

import numpy as np

from ..kernels.lu_multi_rhs import multi_rhs_program, solve_multi_rhs
from ..kernels.lu_pruned import solve_pruned
from ..kernels.lu_pruned_columns import solve_pruned_columns
from ..kernels.lu_pruned_plan import pruned_program
from ..kernels.tangent_numba import rhs_pattern
from .derivative_layout import output_columns, tangent_data

#: fewer states than this in a group take the pruned substitutions a state at a time
#: (lu_pruned_columns: each kept op decoded once per block of columns); the lanes of states
#: (lu_pruned) decode each kept op once per group of one or two columns
PRUNED_MIN_STATES = 8
#: columns per block of lu_pruned_columns: each op is decoded once per block (most of the cost
#: on narrow blocks), while the block's union of structures grows with it
BLOCK_COLUMNS = 16

_MULTI_RHS = weakref.WeakKeyDictionary()         # Factorization -> MultiRhsProgram or None
_PRUNED = weakref.WeakKeyDictionary()   # plan -> {blocks: PrunedProgram or None}


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
    """The plan's lu_pruned.PrunedProgram for its 2 nv tangent right-hand sides (the q then
    the v directions), or None where the factorization needs the whole solution (its row-wise
    backward-error check) or has no multi-right-hand-side program. Structure:
    tangent_numba.rhs_pattern; wanted: the output rows. blocks: the program of
    lu_pruned_columns instead: blocks of BLOCK_COLUMNS columns, each direction of q next to the
    same direction of v (one structure)."""
    cache = _PRUNED.setdefault(plan, {})
    if blocks not in cache:
        F, nv = plan.factorization, plan.model.nv
        M = None if F.program.symmetric or F.checks_accuracy else multi_rhs_program(F.program)
        cache[blocks] = None
        if M is not None:
            pattern = rhs_pattern(tangent_data(plan), plan.system.rows.size, nv)
            groups = None
            if blocks:
                qv = np.arange(2 * nv).reshape(2, nv).T.ravel()
                groups = [qv[c:c + BLOCK_COLUMNS] for c in range(0, qv.size, BLOCK_COLUMNS)]
            cache[blocks] = pruned_program(M, pattern, output_columns(plan), None, groups)
    return cache[blocks]


def solve_outputs(plan, values, rhs, out=None):
    """(out, status): out (B, nv, 2 nv; given or new) the output rows of D(values[s])^-1 rhs[:, :, s] for rhs
    (n, 2 nv, >= B), states last, zero outside pruned_derivative_program's pattern: the pruned
    substitutions where planned (lanes of states from PRUNED_MIN_STATES states on, else blocks
    of columns), states they flag re-solved in full by Factorization.solve_status (as
    solve_many)."""
    few = values.shape[0] < PRUNED_MIN_STATES
    Q, out_cols = pruned_derivative_program(plan, few), output_columns(plan)
    B = values.shape[0]
    full = (lambda states: np.ascontiguousarray(rhs[:, :, states].transpose(2, 0, 1)))
    if Q is None:
        x, status = solve_many(plan.factorization, values, full(np.arange(B)))
        return x[:, out_cols], status
    out = np.empty((B, out_cols.size, rhs.shape[1])) if out is None else out
    broken = np.zeros(B, dtype=np.bool_)
    (solve_pruned_columns if few else solve_pruned)(Q, np.ascontiguousarray(values), rhs, out,
                                                    broken)
    status = np.zeros(B, dtype=np.int8)
    redo = np.flatnonzero(broken)
    if redo.size:
        x, status[redo] = plan.factorization.solve_status(values[redo], full(redo),
                                                          backend="numba")
        out[redo] = x[:, out_cols]
    return out, status
