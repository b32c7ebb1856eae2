"""The LU program (what sparsedyn.planner emits, what a plan stores, what every backend runs) and
the backend-neutral passes over it: dependency levels, (level, opcode) order, runs of one opcode.

A split program (n_factor_ops >= 0) holds the factorization ops first and the substitution ops
after; each part is sorted by (dependency level, opcode) (`level_order`): ops of one level touch
distinct slots and do not read each other's results, so a backend may run a (level, opcode)
group as one vector expression; per slot the operations happen in the same order, so results
agree bit for bit across backends.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from .instructions import CHECK_COST, MOV, NEG, OP_COST, RECIP
from .levels_numba import dependency_levels  # noqa: F401  (re-exported: the passes' home)

#: the optional third element of a structural order (row_perm, col_perm, TRUSTED): its pivots need
#: not be always-nonzero entries (plan_factorization)
TRUSTED = "trusted"

PIVOT_TOL = 1e-13


@dataclass
class LUProgram:
    n: int
    nnz: int
    n_slots: int
    rhs0: int
    row_perm: np.ndarray
    col_perm: np.ndarray
    op_code: np.ndarray
    op_t: np.ndarray
    op_a: np.ndarray
    op_b: np.ndarray
    init_slots: np.ndarray
    init_values: np.ndarray
    load_entries: np.ndarray
    scale_ptr: np.ndarray
    scale_entries: np.ndarray
    scale_const: np.ndarray
    tol: float = PIVOT_TOL
    #: ops [0, n_factor_ops) factorise, the rest substitute; -1: one undivided program (plans
    #: stored before the split, whose RECIP slots sparsedyn.planner initialises to 0 on loading)
    n_factor_ops: int = -1
    #: an L D L^T program (planner/symbolic_ldlt.py): it reads only the permuted lower triangle,
    #: so the values it is given must be symmetric
    symmetric: bool = False
    #: per op, the step of the elimination that emitted it (STAGE_* in planner/symbolic.py): factorization of
    #: pivot k 2k, forward substitution of column k 2k + 1, back substitution of row k
    #: 3n - 1 - k, final sign flips 3n. Sorting by it is a valid single-right-hand-side order that
    #: visits the matrix once per sweep (ir/layout.py); empty: not recorded (older plans)
    op_stage: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @property
    def has_checks(self):
        return bool((self.op_code == RECIP).any())

    @property
    def split(self):
        """Is the program divided into a factorization and a substitution part?"""
        return self.n_factor_ops >= 0

    def costs(self):
        """Per-state operation counts of one run (one right-hand side): mul, add, div (the
        flops), the free sign flips (neg) and copies (mov), the pivot-check safeguard ops (check),
        and solve_mul / solve_add / solve_div / solve_flops: the substitution part alone, i.e. the
        cost of each further right-hand side sharing the factorization."""
        def tally(code):
            counts = np.bincount(code, minlength=len(OP_COST))
            return counts, (counts[:, None] * OP_COST).sum(axis=0)
        counts, (mul, add, div) = tally(self.op_code)
        _, (smul, sadd, sdiv) = tally(self.op_code[max(self.n_factor_ops, 0):]
                                      if self.split else self.op_code)
        return {"mul": int(mul), "add": int(add), "div": int(div), "flops": int(mul + add + div),
                "neg": int(counts[NEG]), "mov": int(counts[MOV]),
                "check": int(counts @ CHECK_COST),
                "solve_mul": int(smul), "solve_add": int(sadd), "solve_div": int(sdiv),
                "solve_flops": int(smul + sadd + sdiv)}

    def arrays(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}


def level_order(code, t, a, b, n_slots):
    """A permutation of the ops sorting them by (dependency level, opcode), stable: executing
    them in this order gives the same result bit for bit, with long runs of one opcode."""
    return np.lexsort((code, dependency_levels(code, t, a, b, n_slots)))


def program_parts(program):
    """(start, stop) op ranges of the factorization and the substitution part (an undivided
    program is all factorization)."""
    m = program.op_code.size
    k = program.n_factor_ops if program.n_factor_ops >= 0 else m
    return (0, k), (k, m)


def runs(program):
    """Boundaries of the maximal runs of one opcode that stay within one part of the program:
    (code, start, stop) rows, int64."""
    return opcode_runs(program.op_code, (program.n_factor_ops,))


def opcode_runs(code, cuts=()):
    """(code, start, stop) rows (int64) of the maximal runs of one opcode in `code`, also cut at
    the op indices `cuts`."""
    if code.size == 0:
        return np.zeros((0, 3), dtype=np.int64)
    cut = [k for k in cuts if 0 < k < code.size]
    starts = np.union1d(np.concatenate([[0], np.flatnonzero(np.diff(code)) + 1]),
                        np.asarray(cut, dtype=np.int64)).astype(np.int64)
    stops = np.concatenate([starts[1:], [code.size]])
    return np.stack([code[starts].astype(np.int64), starts, stops], axis=1)


def split_runs(program):
    """runs(program) divided into the factorization's and the substitution's runs."""
    r = runs(program)
    k = program_parts(program)[0][1]
    return np.ascontiguousarray(r[r[:, 1] < k]), np.ascontiguousarray(r[r[:, 1] >= k])


def pivot_checks(program):
    """The pivot checks of a program as tables a backend reads once per state: its op_b with each
    RECIP's entry replaced by the index of its check (a RECIP reads no b operand), and per check
    the row scale's data (ptr, dynamic entries, constant)."""
    code, rows = program.op_code, program.op_b
    recips = np.flatnonzero(code == RECIP)     # only RECIP reads check data (op_b: the row)
    checked, check_of_recip = np.unique(rows[recips], return_inverse=True)
    b = np.array(rows, dtype=np.int64)
    b[recips] = check_of_recip
    counts = program.scale_ptr[checked + 1] - program.scale_ptr[checked]
    ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    entries = (np.concatenate([program.scale_entries[program.scale_ptr[r]:program.scale_ptr[r + 1]]
                               for r in checked]) if checked.size else np.zeros(0))
    return b, ptr, entries.astype(np.int64), program.scale_const[checked].astype(float)
