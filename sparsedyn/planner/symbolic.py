"""Symbolic static-pivot LU of P D Q and the online program that computes it.

Right-looking elimination on the structure (no numerical cancellation assumed) gives the exact
patterns of L (unit lower, stored strictly below the diagonal) and U (with diagonal). While
eliminating, known constants are propagated: an entry stays "known" while its initial value is a
known constant (or 0 for fill) and every update to it is a product of known values. Operations
on known values are folded offline; a multiplication by a known +-1 becomes a sign (no operation:
a +-1 pivot leaves its L column unscaled and flips the sign of the updates that use it).

The emitted program (opcodes in sparsedyn.ir.instructions) performs, per state:
  factorization: per pivot k, 1 reciprocal, min(|L_k|, |U_k|) scalings (the pivot is divided out
  of the cheaper side: Doolittle or Crout, chosen per pivot), |L_k| * |U_k| updates of which the
  first one into a fill entry is a plain product (0 - x y needs no addition);
  forward substitution: one update per off-diagonal entry of L;
  back substitution: one update per off-diagonal entry of U;
  one scaling by the pivot reciprocal per unknown, in whichever sweep the factor left it,
each reduced as above when operands are known. The factorization ops come first
(program.n_factor_ops of them), then the substitution ops, each part in level order: the
substitution part can be re-run on another right-hand side without refactorising.
Counted flops = mul + add + div over the program (solve_* over the substitution part); sign flips
(NEG) and copies (MOV) are not floating-point arithmetic and are reported apart.

Pivot checks are cancellation-aware: besides its value, every pivot that receives updates
accumulates the magnitude of what was subtracted from it, sum |l_pk u_kp| (ABSFMA / ABSADD ops
into the slot its reciprocal later overwrites), and the RECIP check compares |u_pp| with
tol * (original row scale + that magnitude). A pivot that cancels during elimination (a
numerically singular D whose original entries are all large, e.g. a link without inertia about
its joint axis) then fails the check instead of producing a huge, meaningless reciprocal. These
safeguard ops are reported apart as `check` (like NEG/MOV, not in flops).

A pivot may also be a fill entry (a structural zero of D that the elimination fills in, as the
qdd pivots S^T I^A S of Nori's ABA order): symbolically it is just another entry, and an unknown
one gets the same checked RECIP as any state-dependent pivot.

Preconditions: every permuted diagonal entry is stored or created by fill (the caller decides
whether such pivots are acceptable: sparsedyn.planner.factorization, pivot-safe or trusted orders).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..ir.instructions import ABSADD, ABSFMA, ADD, FMA, FMS, MOV, MUL, NEG, RECIP, SUB
from ..ir.lu_program import PIVOT_TOL, LUProgram, level_order


class UnsafePivot(ValueError):
    """A pivot is structurally absent or folds to the known constant 0."""

@dataclass
class SymbolicLU:
    program: LUProgram
    L: sp.csc_matrix   # pattern of the strictly lower part of L (permuted coordinates)
    U: sp.csc_matrix   # pattern of U including its diagonal
    nnz_LU: int
    #: an L D L^T's factors as program operands (known value, slot, sign), for inspection:
    #: ([(i, k, l_ik)], [1 / d_k]); None for an LU
    ldlt: tuple | None = None


class _Emitter:
    """Builds the op list while tracking what is known offline.

    Every slot holds either a known constant (`known`, never read online: operations use a pool
    slot holding the constant) or a stored value w[slot] whose true value is sign * w[slot]
    (`sign`, default +1): multiplications by -1 become sign changes instead of operations.
    Operands are tuples (known_value, slot, sign) with known_value NaN when unknown.
    """

    def __init__(self, first_free_slot):
        self.code, self.t, self.a, self.b, self.stage = [], [], [], [], []
        self.current_stage = 0       # set by the elimination loops (LUProgram.op_stage)
        self.next_slot = first_free_slot
        self.const_slot = {}
        self.init = {}
        self.known = {}
        self.sign = {}
        self.magnitude = {}   # pivot row -> (slot, known part of sum |l u|)

    def new_slot(self):
        self.next_slot += 1
        return self.next_slot - 1

    def constant(self, value):
        if value not in self.const_slot:
            slot = self.new_slot()
            self.const_slot[value] = slot
            self.init[slot] = value
        return self.const_slot[value]

    def op(self, code, t, a=0, b=0):
        self.code.append(code)
        self.stage.append(self.current_stage)
        self.t.append(t)
        self.a.append(a)
        self.b.append(b)

    def operand(self, slot):
        if slot in self.known:
            return (self.known[slot], -1, 0.0)
        return (np.nan, slot, self.sign.get(slot, 1.0))

    def update(self, target, x, y):
        """true[target] -= x * y."""
        (cx, sx, gx), (cy, sy, gy) = x, y
        if cx == 0.0 or cy == 0.0:
            return
        if target in self.known:
            c = self.known[target]
            if cx == cx and cy == cy:
                self.known[target] = c - cx * cy
                return
            if c == 0.0:
                # first update of a zero (fill) entry: a product, not a multiply-add
                del self.known[target]
                if cx == cx or cy == cy:
                    (c, _, _), (_, s, g) = (x, y) if cx == cx else (y, x)
                    if abs(c) == 1.0:
                        self.op(MOV, target, s)
                        self.sign[target] = -c * g
                    else:
                        self.op(MUL, target, self.constant(c), s)
                        self.sign[target] = -g
                else:
                    self.op(MUL, target, sx, sy)
                    self.sign[target] = -gx * gy
                return
            self.init[target] = self.known.pop(target)
            self.sign[target] = 1.0
        gt = self.sign.get(target, 1.0)
        if cx == cx and cy == cy:
            self.op(SUB, target, self.constant(cx * cy * gt))
        elif cx == cx or cy == cy:
            (c, _, _), (_, s, g) = (x, y) if cx == cx else (y, x)
            if abs(c) == 1.0:
                self.op(SUB if c * g * gt > 0 else ADD, target, s)
            else:
                self.op(FMS if g * gt > 0 else FMA, target, self.constant(c), s)
        else:
            self.op(FMS if gx * gy * gt > 0 else FMA, target, sx, sy)

    def materialize(self, slot):
        """Turn a known slot into a stored one holding the same constant."""
        self.init[slot] = self.known.pop(slot)
        self.sign[slot] = 1.0

    def accumulate(self, row, x, y):
        """Add |x * y| to the magnitude accumulated for the pivot of permuted row `row` (called
        with the operands of each update of that pivot)."""
        (cx, sx, _), (cy, sy, _) = x, y
        if cx == 0.0 or cy == 0.0:
            return
        if row not in self.magnitude:
            self.magnitude[row] = (self.new_slot(), 0.0)
        slot, const = self.magnitude[row]
        if cx == cx and cy == cy:
            self.magnitude[row] = (slot, const + abs(cx * cy))
        elif cx == cx or cy == cy:
            c, s = (cx, sy) if cx == cx else (cy, sx)
            if abs(c) == 1.0:
                self.op(ABSADD, slot, s)
            else:
                self.op(ABSFMA, slot, self.constant(abs(c)), s)
        else:
            self.op(ABSFMA, slot, sx, sy)

    @staticmethod
    def needs_mul(entry, inv):
        """Does scaling this operand by inv cost a multiplication?"""
        if entry[0] == entry[0]:
            return inv[0] != inv[0] and abs(entry[0]) not in (0.0, 1.0)
        return inv[0] != inv[0] or abs(inv[0]) != 1.0

    def scale(self, slot, inv):
        """Operand for true[slot] * inv (a factor entry divided by its pivot)."""
        x = self.operand(slot)
        if x[0] == x[0] and inv[0] == inv[0]:
            self.known[slot] = x[0] * inv[0]
            return self.operand(slot)
        if not self.needs_mul(x, inv):
            if x[0] == x[0]:          # known 0 or +-1 times an unknown reciprocal
                return (0.0, -1, 0.0) if x[0] == 0.0 else (np.nan, inv[1], x[0] * inv[2])
            self.sign[slot] = x[2] * inv[0]
            return self.operand(slot)
        if x[0] == x[0]:
            del self.known[slot]
            self.op(MUL, slot, self.constant(x[0]), inv[1])
            self.sign[slot] = inv[2]
        elif inv[0] == inv[0]:
            self.op(MUL, slot, slot, self.constant(inv[0]))
        else:
            self.op(MUL, slot, slot, inv[1])
            self.sign[slot] = x[2] * inv[2]
        return self.operand(slot)

    def scaled(self, slot, inv):
        """Operand for true[slot] * inv in a new slot, leaving `slot` as it is (L D L^T keeps
        both a column and its scaled copy; no operation when a factor is known 0 or +-1)."""
        x = self.operand(slot)
        if x[0] == x[0] and inv[0] == inv[0]:
            return (x[0] * inv[0], -1, 0.0)
        if not self.needs_mul(x, inv):
            if x[0] == x[0]:          # known 0 or +-1 times an unknown reciprocal
                return (0.0, -1, 0.0) if x[0] == 0.0 else (np.nan, inv[1], x[0] * inv[2])
            return (np.nan, x[1], x[2] * inv[0])
        out = self.new_slot()
        if x[0] == x[0]:
            self.op(MUL, out, self.constant(x[0]), inv[1])
            self.sign[out] = inv[2]
        elif inv[0] == inv[0]:
            self.op(MUL, out, x[1], self.constant(inv[0]))
            self.sign[out] = x[2]
        else:
            self.op(MUL, out, x[1], inv[1])
            self.sign[out] = x[2] * inv[2]
        return self.operand(out)

    def scale_solution(self, slot, inv):
        """true[slot] *= inv for an unknown solution slot."""
        if inv[0] == inv[0]:
            if abs(inv[0]) == 1.0:
                self.sign[slot] = self.sign.get(slot, 1.0) * inv[0]
            else:
                self.op(MUL, slot, slot, self.constant(inv[0]))
        else:
            self.op(MUL, slot, slot, inv[1])
            self.sign[slot] = self.sign.get(slot, 1.0) * inv[2]


class _Setup:
    """What an elimination starts from: the permutations and their inverses, every stored entry's
    permuted coordinates (pr, pc), its known initial value (NaN: loaded online), each permuted
    row's largest known |entry| (the constant part of the pivot checks' yardstick) and the
    emitter with the known entries registered."""

    def __init__(self, pattern, row_perm, col_perm, constant_values):
        n = self.n = pattern.shape[0]
        self.nnz = pattern.nnz
        self.row_perm = np.asarray(row_perm, dtype=np.int64)
        self.col_perm = np.asarray(col_perm, dtype=np.int64)
        new_row = np.empty(n, dtype=np.int64)
        new_row[self.row_perm] = np.arange(n)
        new_col = np.empty(n, dtype=np.int64)
        new_col[self.col_perm] = np.arange(n)
        coo_rows = pattern.indices.astype(np.int64)
        coo_cols = np.repeat(np.arange(n), np.diff(pattern.indptr))
        self.pr, self.pc = new_row[coo_rows], new_col[coo_cols]
        self.known_init = (np.full(self.nnz, np.nan) if constant_values is None
                           else np.asarray(constant_values, dtype=float))
        consts = ~np.isnan(self.known_init)
        self.const_scale = np.zeros(n)
        np.maximum.at(self.const_scale, self.pr[consts], np.abs(self.known_init[consts]))
        self.rhs0 = self.nnz
        self.em = _Emitter(first_free_slot=self.nnz + n)
        for e in np.flatnonzero(consts):
            self.em.known[int(e)] = float(self.known_init[e])


def _invert_pivot(em, k, slot, const_scale, tol):
    """Operand for 1 / (pivot of permuted row k, held in `slot`): folded offline when the pivot
    is a known constant that did not cancel, else a checked RECIP (cancellation-aware)."""
    pivot = em.operand(slot)
    if pivot[0] == pivot[0]:
        if pivot[0] == 0.0:
            raise UnsafePivot(f"pivot {k}: folds to the known constant 0")
        _, folded = em.magnitude.get(k, (None, 0.0))
        if abs(pivot[0]) <= tol * (const_scale[k] + folded):
            # the constants cancelled to round-off (a mass matrix singular for every state,
            # e.g. a link without inertia about its joint axis): check it online like any
            # pivot, so that every state is reported instead of dividing by the round-off
            em.materialize(slot)
            pivot = em.operand(slot)
        else:
            em.magnitude.pop(k, None)
    if pivot[0] == pivot[0]:
        return (1.0 / pivot[0], -1, 0.0)
    # the reciprocal overwrites the pivot's magnitude slot (0: a pivot nothing updated)
    r, const = em.magnitude.pop(k, (None, 0.0))
    r = em.new_slot() if r is None else r
    em.init[r] = const
    em.op(RECIP, r, pivot[1], k)
    return (np.nan, r, pivot[2])


def _program(setup, n_factor_ops, tol, loaded, scale_rows, scale_slots, symmetric=False):
    """The LUProgram of what setup.em emitted: `loaded` the stored entries read online (a mask),
    (scale_rows, scale_slots) the loaded entries that make up each permuted row's check scale."""
    em, n = setup.em, setup.n
    em.current_stage = 3 * n
    for k in range(n):
        if em.sign.get(setup.rhs0 + k, 1.0) < 0:
            em.op(NEG, setup.rhs0 + k)
    order_rows = np.argsort(scale_rows, kind="stable")
    scale_ptr = np.zeros(n + 1, dtype=np.int64)
    np.add.at(scale_ptr, scale_rows + 1, 1)
    scale_ptr = np.cumsum(scale_ptr)
    init_slots = np.fromiter(em.init.keys(), dtype=np.int64, count=len(em.init))
    init_values = np.fromiter(em.init.values(), dtype=float, count=len(em.init))
    code, t, a, b = (np.asarray(em.code, dtype=np.int8), np.asarray(em.t, dtype=np.int64),
                     np.asarray(em.a, dtype=np.int64), np.asarray(em.b, dtype=np.int64))
    # each part in its own level order: the substitution part then runs after the whole
    # factorization, once per right-hand side (per slot the op order is unchanged)
    order = np.concatenate([
        part[level_order(code[part], t[part], a[part], b[part], em.next_slot)]
        for part in (np.arange(n_factor_ops), np.arange(n_factor_ops, code.size))])
    return LUProgram(
        n=n, nnz=setup.nnz, n_slots=em.next_slot, rhs0=setup.rhs0, row_perm=setup.row_perm,
        col_perm=setup.col_perm, op_code=code[order], op_t=t[order], op_a=a[order],
        op_b=b[order], op_stage=np.asarray(em.stage, dtype=np.int64)[order],
        init_slots=init_slots, init_values=init_values,
        load_entries=np.flatnonzero(loaded).astype(np.int64), scale_ptr=scale_ptr,
        scale_entries=np.asarray(scale_slots, dtype=np.int64)[order_rows],
        scale_const=setup.const_scale, tol=float(tol), n_factor_ops=int(n_factor_ops),
        symmetric=bool(symmetric))


def symbolic_lu(pattern, row_perm, col_perm, constant_values=None, tol=PIVOT_TOL):
    """Symbolic factorization + program for the static-pivot LU of pattern[row_perm][:, col_perm]."""
    setup = _Setup(pattern, row_perm, col_perm, constant_values)
    n, em, rhs0, pr, pc = setup.n, setup.em, setup.rhs0, setup.pr, setup.pc
    row_cols = [dict() for _ in range(n)]   # permuted row -> {permuted col: slot}
    col_rows = [set() for _ in range(n)]    # permuted col -> {permuted rows}
    for e in range(setup.nnz):
        row_cols[pr[e]][pc[e]] = e
        col_rows[pc[e]].add(pr[e])

    factor_L, factor_U, inverses, scaled_L = [], [], [], []
    L_cols, U_rows = [], []
    for k in range(n):
        if k not in row_cols[k]:
            raise UnsafePivot(f"pivot {k}: structurally zero (neither stored nor created by fill)")
        em.current_stage = 2 * k
        inv = _invert_pivot(em, k, row_cols[k][k], setup.const_scale, tol)
        Lk = sorted(i for i in col_rows[k] if i > k)
        Uk = sorted(j for j in row_cols[k] if j > k)
        l_slots = [row_cols[i][k] for i in Lk]
        u_slots = [row_cols[k][j] for j in Uk]
        # Divide by the pivot on whichever side costs fewer multiplications (Doolittle: L,
        # Crout: U); the solves then scale by 1/pivot in the back or forward sweep.
        cost_L = sum(em.needs_mul(em.operand(s), inv) for s in l_slots)
        cost_U = sum(em.needs_mul(em.operand(s), inv) for s in u_slots)
        scale_L = cost_L <= cost_U
        if scale_L:
            ls = [em.scale(s, inv) for s in l_slots]
            us = [em.operand(s) for s in u_slots]
        else:
            ls = [em.operand(s) for s in l_slots]
            us = [em.scale(s, inv) for s in u_slots]
        for i, li in zip(Lk, ls):
            ri = row_cols[i]
            for j, uj in zip(Uk, us):
                if j not in ri:
                    slot = em.new_slot()
                    ri[j] = slot
                    col_rows[j].add(i)
                    em.known[slot] = 0.0
                if i == j:
                    em.accumulate(i, li, uj)
                em.update(ri[j], li, uj)
        factor_L.append(list(zip(Lk, ls)))
        factor_U.append(list(zip(Uk, us)))
        inverses.append(inv)
        scaled_L.append(scale_L)
        L_cols.append(Lk)
        U_rows.append(Uk)

    # forward substitution (column-oriented), then back substitution (row-oriented)
    n_factor_ops = len(em.code)
    for k in range(n):
        em.current_stage = 2 * k + 1
        if not scaled_L[k]:
            em.scale_solution(rhs0 + k, inverses[k])
        yk = em.operand(rhs0 + k)
        for i, li in factor_L[k]:
            em.update(rhs0 + i, li, yk)
    for k in range(n - 1, -1, -1):
        em.current_stage = 3 * n - 1 - k
        for j, uj in factor_U[k]:
            em.update(rhs0 + k, uj, em.operand(rhs0 + j))
        if scaled_L[k]:
            em.scale_solution(rhs0 + k, inverses[k])

    dynamic = np.isnan(setup.known_init)
    program = _program(setup, n_factor_ops, tol, dynamic, pr[dynamic], np.flatnonzero(dynamic))
    L = _pattern_matrix(n, [(i, k) for k in range(n) for i in L_cols[k]])
    U = _pattern_matrix(n, [(k, j) for k in range(n) for j in [k] + U_rows[k]])
    return SymbolicLU(program=program, L=L, U=U, nnz_LU=L.nnz + U.nnz)


def _pattern_matrix(n, coords):
    if coords:
        r, c = np.asarray(coords, dtype=np.int64).T
    else:
        r = c = np.zeros(0, dtype=np.int64)
    m = sp.csc_matrix((np.ones(r.size), (r, c)), shape=(n, n))
    m.sort_indices()
    return m
