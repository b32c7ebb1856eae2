"""The fused program of a dynamics or estimation plan (backend-neutral IR): an AssemblyProgram
(sparsedyn.ir.assembly: D(q), b(q, qd) as data) bound to an LU program
(sparsedyn.ir.lu_program), laid out for one pass per state that assembles D and b straight into
the program's work vector and runs the program (Nori Sec. IV-D: everything that does not depend
on the state is fixed offline).

`FusedProgram.schedule(full)` is what a backend runs for one kind of call (the whole solution,
or the outputs alone): the live operations of the sweep layout (ir/layout.py) on physical slots
shared by values whose lives do not overlap, the SETs of the constants, and the typed bundles
(NamedTuples of arrays) of the assembly's destinations, the pivot checks and the optional
backward-error check. The numba backend (kernels/assemble_numba.FusedSolver) and the C backend
(backends/c) read the same Schedule.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .assembly import JointTransformArrays
from .instructions import READS_A, READS_B, RECIP, SET
from .layout import live_ops, reuse_slots, sweep_layout
from .lu_program import opcode_runs, pivot_checks

#: bits of a backend's per-state codes (sparsedyn.backends' protocol): re-solve the state, a
#: non-unit quaternion in q, a non-finite input (q, qd or y; a run that copies its inputs)
RESOLVE, BAD_QUATERNION, INPUT_NOT_FINITE = 1, 2, 4


#: The per-body constants of an AssemblyProgram as a kernel reads them (see its docstring): the
#: joint transform data (JointTransformArrays' fields, the same arrays), S and I as sparse lists,
#: gravity, and the state-dependent entries of D (x_ptr per body, x_dest their slots, x_src their
#: compact transform component). Flat, not nesting JointTransformArrays: numba's parallel regions
#: take no nested tuples.
AssemblyArrays = NamedTuple("AssemblyArrays", [(f, np.ndarray) for f in (
    *JointTransformArrays._fields, "s_ptr", "s_row", "s_col", "s_val", "i_ptr", "i_row", "i_col",
    "i_val", "gravity", "x_ptr", "x_dest", "x_src")])


class ExtraRowArrays(NamedTuple):
    """An AssemblyProgram's extra rows (ExtraRows) bound to slots: entries as constant
    combinations of a body's transform (t_*), right-hand-side biases quadratic in a body's
    velocity (q_*, written to q_dest) and linear in its gravity vector (g_*, to g_dest; g_need
    the bodies whose gravity vector is propagated)."""
    t_ptr: np.ndarray
    t_dest: np.ndarray
    t_src: np.ndarray
    t_coef: np.ndarray
    q_body: np.ndarray
    q_k: np.ndarray
    q_l: np.ndarray
    q_coef: np.ndarray
    q_dest: np.ndarray
    g_need: np.ndarray
    g_body: np.ndarray
    g_k: np.ndarray
    g_coef: np.ndarray
    g_dest: np.ndarray


class RhsDestinations(NamedTuple):
    """Slots of the right-hand side the assembly writes: per body the rows of c_a (a, (N, 6)) and
    c_f (f, (N, 6)), the rows that are zero, and those read from y (one per column of y)."""
    a: np.ndarray
    f: np.ndarray
    zero: np.ndarray
    y: np.ndarray


class ProgramArrays(NamedTuple):
    """An op stream on physical slots: runs (k, 3) of (opcode, start, stop), operands t, a, b
    (int32; a SET's a indexes consts, a RECIP's b its pivot check), the pivot checks' row-scale
    data (chk_ptr, chk_entries, chk_const) and the constants the SETs write."""
    runs: np.ndarray
    t: np.ndarray
    a: np.ndarray
    b: np.ndarray
    chk_ptr: np.ndarray
    chk_entries: np.ndarray
    chk_const: np.ndarray
    consts: np.ndarray


class ResidualArrays(NamedTuple):
    """The optional backward-error check (empty tol: none): D's state-dependent entries (saved
    from r_slot, at permuted row r_row, multiplying solution slot r_col) and its constant entries
    (c_row, c_col, c_val), the tolerance (1,) and, for a row-wise check, each permuted row's
    largest constant |entry| (rowmax; empty: normwise)."""
    r_slot: np.ndarray
    r_row: np.ndarray
    r_col: np.ndarray
    c_row: np.ndarray
    c_col: np.ndarray
    c_val: np.ndarray
    tol: np.ndarray
    rowmax: np.ndarray


def _equal_entries(x_ptr, x_dest, x_src, program):
    """The state-dependent entries of D that the assembly writes with one and the same component
    of one body's transform (x_src: E in iX_lambda(i) and in its transpose, the same E rx twice)
    and that the program only reads hold one value. Returns (same, (x_ptr, x_dest, x_src)):
    `same` maps each such entry (a stored slot) to the first of them (sweep_layout gives both
    one slot), and the assembly's entry arrays keep only the entries it still writes (about a
    third less of a chain's work array to write and to hold in cache)."""
    same = np.arange(program.n_slots)
    written = np.zeros(program.n_slots, dtype=bool)
    written[program.op_t] = True
    body = np.repeat(np.arange(x_ptr.size - 1), np.diff(x_ptr))
    read_only = np.flatnonzero(~written[x_dest])
    _, first, group = np.unique(body[read_only] * 18 + x_src[read_only], return_index=True,
                                return_inverse=True)
    canonical = read_only[first][group]
    same[x_dest[read_only]] = x_dest[canonical]
    kept = np.ones(x_dest.size, dtype=bool)
    kept[read_only[canonical != read_only]] = False
    counts = np.bincount(body[kept], minlength=x_ptr.size - 1)
    return same, (np.concatenate(([0], np.cumsum(counts))).astype(np.int64), x_dest[kept],
                  x_src[kept])


def _with_sets(ops, slots, values, first):
    """ops = (code, t, a, b, reads_a, reads_b, op_layout) with SET slots[k] = consts[values[k]]
    inserted before the run of one opcode that holds op first[k] (SETs before one run form one
    run of their own); a SET's op_layout is -1."""
    code = ops[0]
    runs_at = np.flatnonzero(np.diff(code, prepend=-1))         # first op of each run
    at = runs_at[np.searchsorted(runs_at, first, side="right") - 1]
    order = np.argsort(np.concatenate((2 * np.arange(code.size) + 1, 2 * at)), kind="stable")
    k = slots.size
    added = (np.full(k, SET, dtype=code.dtype), slots, values, np.zeros(k, dtype=ops[3].dtype),
             np.zeros(k, dtype=bool), np.zeros(k, dtype=bool), np.full(k, -1))
    return tuple(np.concatenate((op, new))[order] for op, new in zip(ops, added))


def _touch_span(op_t, op_a, op_b, reads_a, reads_b, n_slots):
    """(first, last): per slot the first and the last op that writes or reads it (n_ops and -1
    where none)."""
    n_ops = op_t.size
    pos = np.arange(n_ops)
    first = np.full(n_slots, n_ops)
    last = np.full(n_slots, -1)
    for operand, reads in ((op_t, np.ones(n_ops, dtype=bool)), (op_a, reads_a), (op_b, reads_b)):
        np.minimum.at(first, operand[reads], pos[reads])
        np.maximum.at(last, operand[reads], pos[reads])
    return first, last


@dataclass
class Schedule:
    """What a backend runs for one kind of call (FusedProgram.schedule): the layout's live
    operations (`live`, a mask over the layout's ops) and the SETs of the constants as `prog`
    on physical slots (op_layout: each op's index among the layout's ops, -1 for a SET), the
    constants written before the assembly (init_slots, init_values), the assembly's
    destinations and the slots read afterwards on those same slots (sol_slot: the whole solution
    in permuted column order, or only the outputs), and the work vector's size per state."""

    live: np.ndarray
    op_layout: np.ndarray
    n_slots: int
    prog: ProgramArrays
    init_slots: np.ndarray
    init_values: np.ndarray
    dest: RhsDestinations
    model_arrays: AssemblyArrays
    xr: ExtraRowArrays
    out_slot: np.ndarray
    sol_slot: np.ndarray
    rc: ResidualArrays


class FusedProgram:
    """Assembly program + LU program bound together (offline), for backends that assemble D and
    b straight into the program's work vector.

    measured_order: the measured blocks in the order of the columns of the kernels' y;
    out_columns: natural column indices of D whose solution values a call returns (in order);
    residual: None, or (rows, cols, tol[, "rows"]) of D's CSC entries for a backward-error check
    of every solve (_residual_arrays). Two schedules, each built on first use: the whole solution
    (full=True, or a residual check), and the outputs alone, which skips the operations only the
    other unknowns need."""

    def __init__(self, assembly, lu_program, measured_order, out_columns, residual=None):
        p = lu_program
        n = p.n
        if p.nnz != assembly.nnz or n != assembly.n_rows:
            raise ValueError("lu_program: planned for another pattern than the assembly program's")
        loaded = np.zeros(p.nnz, dtype=bool)
        loaded[p.load_entries] = True
        if not loaded[assembly.dynamic_index].all():
            raise ValueError("lu_program: treats a state-dependent entry of D as a constant")
        model = AssemblyArrays(*assembly.model_arrays())
        same, (x_ptr, x_dest, x_src) = _equal_entries(model.x_ptr, model.x_dest, model.x_src, p)
        layout = self.layout = sweep_layout(p, same)
        slot = layout.slots
        inv_row = np.empty(n, dtype=np.int64)
        inv_row[p.row_perm] = np.arange(n)
        inv_col = np.empty(n, dtype=np.int64)
        inv_col[p.col_perm] = np.arange(n)
        row_slot = slot(p.rhs0 + inv_row)
        self.program, self.assembly = p, assembly
        # the kernel's slot arrays on layout numbers (a Schedule relabels them to physical slots)
        xr = ExtraRowArrays(*assembly.bind_extra(row_slot))
        # entries the program loads although they are constant (a plan made without
        # constant_values): written with the constants before every assembly
        const_loads = np.setdiff1d(p.load_entries, assembly.dynamic_index)
        self.init_values = np.concatenate((p.init_values, assembly.template[const_loads]))
        self.out_columns = np.asarray(out_columns, dtype=np.int64)
        b_checked, chk_ptr, chk_entries, chk_const = pivot_checks(p)
        sol_slot = slot(p.rhs0 + np.arange(n))
        self._logical = dict(
            init_slots=slot(np.concatenate((p.init_slots, const_loads))),
            dest=RhsDestinations(*assembly.bind(row_slot, measured_order)),
            model_arrays=model._replace(x_ptr=x_ptr, x_dest=slot(x_dest), x_src=x_src),
            xr=xr._replace(t_dest=slot(xr.t_dest)),                      # t_dest: entries of D
            out_slot=slot(p.rhs0 + inv_col[self.out_columns]),
            sol_slot=sol_slot,
            rc=self._residual_arrays(residual, inv_row, inv_col, slot, sol_slot),
            checks=(b_checked[layout.order], chk_ptr, slot(chk_entries), chk_const))
        self._schedules = {}

    @property
    def checks_residual(self):
        """Does every solve run the backward-error check?"""
        return self._logical["rc"].tol.shape[0] > 0

    def schedule(self, full):
        """The Schedule of a call that reads the whole solution (full) or the outputs alone
        (without a residual check)."""
        full = bool(full) or self.checks_residual
        if full not in self._schedules:
            self._schedules[full] = self._schedule(full)
        return self._schedules[full]

    def _residual_arrays(self, residual, inv_row, inv_col, slot, sol):
        """ResidualArrays of residual = (rows, cols, tol) or (rows, cols, tol, "rows") of D's CSC
        entries: states whose backward error exceeds tol are reported broken, normwise
        max|D x - b| / (max|D| max|x| + max|b|) or, with "rows", row-wise max_i |D x - b|_i /
        (max_j |D_ij| max|x| + |b_i|); sol: the solution's slots (layout numbers, permuted
        order)."""
        z = np.zeros(0, dtype=np.int64)
        if residual is None:
            return ResidualArrays(z, z, z, z, z, np.zeros(0), np.zeros(0), np.zeros(0))
        rows, cols, tol, *mode = residual
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        dyn = np.asarray(self.assembly.dynamic_index, dtype=np.int64)
        const = np.setdiff1d(np.arange(rows.size), dyn)
        const = const[self.assembly.template[const] != 0.0]
        c_val = self.assembly.template[const].astype(float)
        rowmax = np.zeros(inv_row.size if mode == ["rows"] else 0)
        if rowmax.size:
            np.maximum.at(rowmax, inv_row[rows[const]], np.abs(c_val))
        return ResidualArrays(slot(dyn), inv_row[rows[dyn]], sol[inv_col[cols[dyn]]],
                              inv_row[rows[const]], sol[inv_col[cols[const]]], c_val,
                              np.array([float(tol)]), rowmax)

    def _schedule(self, full):
        """Schedule: the layout's ops that the call needs (layout.live_ops) on physical slots:
        values share a slot when their lives do not overlap (times: what the assembly writes 0,
        op j 2j + 1), which shrinks the work vector to what is live at once. A constant that
        only the program reads or updates is written by a SET just before the run of ops that
        first touches it (a constant written with the assembly would hold its slot from the
        start: on a chain the articulated inertias' initial values, a third of the slots)."""
        lay, n_slots, logical = self.layout, self.program.n_slots, self._logical
        read_after = logical["sol_slot"] if full else logical["out_slot"]
        live = live_ops(lay.op_code, lay.op_t, lay.op_a, lay.op_b, n_slots, read_after)
        code, op_t, op_a, op_b = lay.op_code[live], lay.op_t[live], lay.op_a[live], lay.op_b[live]
        reads_a, reads_b = READS_A[code], READS_B[code]
        first, last = _touch_span(op_t, op_a, op_b, reads_a, reads_b, n_slots)
        # constants: SET before their first run, unless read outside the program (pivot-check
        # scales and the residual check read entries before it, the caller reads results after
        # it): those are written before the assembly; untouched ones not at all
        init = logical["init_slots"]
        rc = logical["rc"]
        outside = np.zeros(n_slots, dtype=bool)
        outside[np.concatenate((logical["checks"][2], rc.r_slot, rc.r_col, rc.c_col,
                                read_after))] = True
        touched = last[init] >= 0
        at_start = outside[init]
        by_set = np.flatnonzero(touched & ~at_start)
        code, op_t, op_a, op_b, reads_a, reads_b, op_layout = _with_sets(
            (code, op_t, op_a, op_b, reads_a, reads_b, np.flatnonzero(live)), init[by_set], by_set,
            first[init[by_set]])
        n_ops = code.size
        first, last = _touch_span(op_t, op_a, op_b, reads_a, reads_b, n_slots)
        start = np.where(last >= 0, 2 * first + 1, -1)
        start[init[~touched]] = -1
        written = self._written_slots(init[at_start])
        start[written] = 0
        end = np.maximum(2 * last + 1, start)
        end[read_after] = 2 * n_ops + 1
        # what the assembly writes is laid out in the order it writes it (body by body)
        rank = n_slots + np.arange(n_slots)
        rank[written[::-1]] = np.arange(written.size)[::-1]    # first write wins
        phys, count = reuse_slots(start, end, rank)
        assert (phys[op_t] >= 0).all() and (phys[written] >= 0).all(), "a live slot unplaced"
        # the op stream is read once per group of states: 32-bit indices keep it small next to
        # the work array (a RECIP's b: its pivot check)
        b_checked, chk_ptr, chk_entries, chk_const = logical["checks"]
        t = phys[op_t].astype(np.int32)
        a = np.where(reads_a, phys[op_a], np.where(code == SET, op_a, 0)).astype(np.int32)
        recip = code == RECIP
        b = np.where(reads_b, phys[op_b], 0)
        b[recip] = b_checked[op_layout[recip]]
        prog = ProgramArrays(opcode_runs(code), t, a, b.astype(np.int32), chk_ptr,
                             phys[chk_entries], chk_const, self.init_values)
        xr, m, dest = logical["xr"], logical["model_arrays"], logical["dest"]
        return Schedule(
            live=live, op_layout=op_layout, n_slots=count, prog=prog,
            init_slots=phys[init[at_start]], init_values=self.init_values[at_start],
            dest=RhsDestinations(*(phys[d] for d in dest)),
            out_slot=phys[logical["out_slot"]], sol_slot=phys[read_after],
            model_arrays=m._replace(x_dest=phys[m.x_dest]),
            xr=xr._replace(t_dest=phys[xr.t_dest], q_dest=phys[xr.q_dest], g_dest=phys[xr.g_dest]),
            rc=rc._replace(r_slot=phys[rc.r_slot], r_col=phys[rc.r_col], c_col=phys[rc.c_col]))

    def _written_slots(self, init_slots):
        """Slots written before the program runs (layout numbers), in the order they are
        written: the constants init_slots, then body by body its rhs rows and its entries of D,
        then the shared rows."""
        lg = self._logical
        dest, m, xr = lg["dest"], lg["model_arrays"], lg["xr"]
        bodies = [np.concatenate((dest.a[i], dest.f[i], m.x_dest[m.x_ptr[i]:m.x_ptr[i + 1]],
                                  xr.t_dest[xr.t_ptr[i]:xr.t_ptr[i + 1]]))
                  for i in range(dest.a.shape[0])]
        return np.concatenate([init_slots] + bodies + [dest.zero, dest.y, xr.q_dest, xr.g_dest]
                              ).astype(np.int64)
