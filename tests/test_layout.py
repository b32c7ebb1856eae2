"""The fused kernel's sweep layout (sparsedyn.ir.layout, FusedProgram.schedule): reordered
operations on slots renumbered and shared by values whose lives do not overlap. Checked
independently of the kernels: a plain-Python replay of the schedule tracks which value every
physical slot holds, and the compiled result must equal the stored program run by the
reference interpreter bit for bit, on the same assembled D and b."""
import itertools

import numpy as np
import pytest
from lu_ops import apply_op

from sparsedyn.kernels.assemble_numba import assemble_batch
from sparsedyn.ir.layout import reuse_slots, sweep_layout
from sparsedyn.kernels.lu_numba import solve_numba
from sparsedyn.ir.instructions import READS_A as _READS_A, READS_B as _READS_B, READS_T as _READS_T, RECIP
from sparsedyn.models import humanoid, random_tree, serial_chain
from sparsedyn.planner import plan_factorization
from sparsedyn.problems import compile, forward_dynamics, inverse_dynamics

CASES = [("chain", 40, "aba"), ("chain", 40, "markowitz"), ("chain", 40, "rnea"),
         ("tree", 25, "auto"), ("humanoid", None, "auto")]


def _model(kind, size):
    if kind == "chain":
        return serial_chain(size)
    if kind == "tree":
        return random_tree(size, seed=5)
    return humanoid()


def _plans(kind, size, ordering):
    model = _model(kind, size)
    plans = []
    for make in (forward_dynamics, inverse_dynamics):
        order = ordering
        if (ordering == "rnea") != (make is inverse_dynamics):
            order = "auto"
        plans.append(compile(make(model), ordering=order))
    return model, plans


def _accesses(code, t, a, b):
    """Per op: the slots it reads and the slot it writes."""
    reads = []
    for o in range(code.size):
        r = [a[o]] if _READS_A[code[o]] else []
        if _READS_B[code[o]]:
            r.append(b[o])
        if _READS_T[code[o]]:
            r.append(t[o])
        reads.append(r)
    return reads


def _sources(program, order):
    """For each op: which op wrote each slot it reads (-1: its initial value), running the ops
    in `order`; and the last writer of every slot."""
    p = program
    reads = _accesses(p.op_code, p.op_t, p.op_a, p.op_b)
    writer, seen = {}, {}
    for o in order:
        seen[o] = tuple(writer.get(s, -1) for s in reads[o])
        writer[p.op_t[o]] = o
    return seen, writer


def _check_layout(program):
    p = program
    lay = sweep_layout(p)
    assert np.array_equal(np.sort(lay.order), np.arange(p.op_code.size))
    assert _sources(p, lay.order) == _sources(p, np.arange(p.op_code.size))
    # the layout's own arrays are the stored ops on renumbered slots
    assert np.array_equal(lay.op_code, p.op_code[lay.order])
    assert np.array_equal(lay.op_t, lay.slot_of[p.op_t[lay.order]])
    assert np.array_equal(np.sort(lay.slot_of), np.arange(p.n_slots))


@pytest.mark.parametrize("kind,size,ordering", CASES)
def test_sweep_order_keeps_every_slot_history(kind, size, ordering):
    """Every read sees the value of the same writing op as in the stored order."""
    _, plans = _plans(kind, size, ordering)
    for plan in plans:
        assert plan.factorization.program.op_stage.size == plan.factorization.program.op_code.size
        _check_layout(plan.factorization.program)


def test_sweep_order_of_a_symmetric_program():
    """The L D L^T programs (planner/symbolic_ldlt.py) record their steps too."""
    import scipy.sparse as sp
    rng = np.random.default_rng(2)
    n = 30
    A = np.zeros((n, n))
    for i in range(n):
        for j in rng.choice(n, 3):
            A[i, j] = A[j, i] = 1.0
    A += n * np.eye(n)
    pattern = sp.csc_matrix(A)
    diagonal = pattern.indices == np.repeat(np.arange(n), np.diff(pattern.indptr))
    p = plan_factorization(pattern, diagonal, ordering="amd", symmetric=True).program
    assert p.symmetric and p.op_stage.size == p.op_code.size
    _check_layout(p)


def test_reuse_slots_never_overlaps_two_lives():
    rng = np.random.default_rng(0)
    start = rng.integers(0, 200, 500)
    end = start + rng.integers(0, 40, 500)
    start[rng.random(500) < 0.1] = -1                   # unused
    phys, count = reuse_slots(start, end)
    assert (phys[start < 0] == -1).all() and (phys[start >= 0] >= 0).all()
    assert count == phys.max() + 1
    for s in range(count):
        lives = sorted((start[v], end[v]) for v in np.flatnonzero(phys == s))
        for (_, e0), (s1, _) in itertools.pairwise(lives):
            assert e0 < s1
    # as few slots as the most lives at one time
    times = np.arange(0, 241)
    used = start >= 0
    live = ((start[used][:, None] <= times) & (times <= end[used][:, None])).sum(axis=0)
    assert count == live.max()


def _replay(fs, sch):
    """Walk a fused schedule in plain Python (the group's constants and the assembly write, then
    its live ops run in layout order, SETs writing the other constants) tracking which value
    each physical slot holds; returns the number of reads that find another value than the
    layout's op expects (a constant's slot: its value until an op overwrites it)."""
    lay = fs.ir.layout
    t, a, b = sch.prog.t, sch.prog.a, sch.prog.b
    consts = sch.prog.consts
    m = sch.model_arrays
    holder = {int(s): "assembled" for s in np.concatenate((
        sch.dest.zero, sch.dest.y, sch.dest.a.ravel(), sch.dest.f.ravel(), m.x_dest,
        sch.xr.t_dest, sch.xr.q_dest))}
    # a constant holds its initial value (tagged by the value) until an op overwrites it
    const_of = dict(zip(fs.ir._logical["init_slots"].tolist(), fs.ir.init_values.tolist()))
    holder.update({int(s): ("const", v) for s, v in zip(sch.init_slots, sch.init_values)})
    assert np.array_equal(sch.op_layout[sch.op_layout >= 0], np.flatnonzero(sch.live))
    overwritten = set()                             # constants' slots an op has written
    wrong = 0
    for o, j in enumerate(sch.op_layout):
        if j < 0:                                   # SET: writes its constant
            holder[int(t[o])] = ("const", consts[a[o]])
            continue
        code = lay.op_code[j]
        for reads, logical, phys in ((_READS_A[code], lay.op_a[j], a[o]),
                                     (_READS_B[code], lay.op_b[j], b[o]),
                                     (_READS_T[code], lay.op_t[j], t[o])):
            if not reads:
                continue
            want, held = int(logical), holder.get(int(phys))
            if want in const_of and want not in overwritten:
                wrong += held != ("const", const_of[want])
            else:
                wrong += held not in ("assembled", want)
        holder[int(t[o])] = int(lay.op_t[j])
        overwritten.add(int(lay.op_t[j]))
    p = fs.ir.program
    inv_col = np.empty(p.n, dtype=np.int64)
    inv_col[p.col_perm] = np.arange(p.n)
    unknowns = (np.arange(p.n) if sch.sol_slot.size == p.n else inv_col[fs.ir.out_columns])
    for k, phys in zip(unknowns, sch.sol_slot):      # the solution, read after the program
        if holder.get(int(phys)) not in ("assembled", int(lay.slot_of[p.rhs0 + k])):
            wrong += 1
    return wrong


def _poisoned_run(fs, sch, values, rhs):
    """One state through the stored program's ops in layout order in plain Python, with every op
    the schedule skips writing NaN instead of its result: returns the solution (natural column
    order). The outputs must come out exactly as without poison (the skipped ops reach none)."""
    p, lay = fs.ir.program, fs.ir.layout
    w = np.zeros(p.n_slots)
    w[p.init_slots] = p.init_values
    w[p.load_entries] = values[p.load_entries]
    w[p.rhs0 + np.arange(p.n)] = rhs[p.row_perm]
    for j, o in enumerate(lay.order):
        c, t, a, b = p.op_code[o], p.op_t[o], p.op_a[o], p.op_b[o]
        if not sch.live[j]:
            assert c != RECIP                         # every pivot check stays
            w[t] = np.nan
        else:
            apply_op(w, c, t, a, b)
    x = np.empty(p.n)
    x[p.col_perm] = w[p.rhs0 + np.arange(p.n)]
    return x


@pytest.mark.parametrize("kind,size,ordering", CASES)
def test_fused_schedule_replays_and_equals_the_stored_program(kind, size, ordering):
    model, plans = _plans(kind, size, ordering)
    rng = np.random.default_rng(7)
    B = 20
    q = model.random_configuration(rng, batch=B)
    v, x = rng.normal(size=(2, B, model.nv))
    for plan in plans:
        fs = plan._fused_solver()
        full, outputs = fs.ir.schedule(True), fs.ir.schedule(False)
        assert full.live.all()
        assert _replay(fs, full) == 0 and _replay(fs, outputs) == 0
        p = plan.factorization.program
        assert outputs.n_slots <= full.n_slots <= p.n_slots
        out_full, xfull, broken = fs.run(q, v, x, full=True, threads=1)
        out_only, _, broken_only = fs.run(q, v, x, full=False, threads=1)
        order = [(plan.problem.given, i) for i in range(model.nbodies)]
        values, rhs = assemble_batch(fs.ir.assembly, q, v, x, order)
        ref, ref_broken = solve_numba(p, values, rhs)
        assert not broken.any() and not ref_broken.any() and not broken_only.any()
        assert np.array_equal(xfull, ref)                 # same operations on the same values
        assert np.array_equal(out_only, ref[:, fs.ir.out_columns])
        assert np.array_equal(out_full, out_only)
        poisoned = _poisoned_run(fs, outputs, values[0], rhs[0])
        assert np.array_equal(poisoned[fs.ir.out_columns], ref[0, fs.ir.out_columns])
        # it skips the joint wrenches' rows, unless the accuracy check needs the whole solution
        if plan.problem.name == "forward_dynamics" and not plan.factorization.checks_accuracy:
            assert (~outputs.live).any() and np.isnan(poisoned).any()


def test_stored_plans_keep_their_steps_and_older_plans_still_run(tmp_path):
    """plan.save / load_plan round-trips op_stage; a plan stored before it existed runs in its
    stored order with the same results."""
    from sparsedyn.planner import Factorization
    from sparsedyn.planner.factorization import _checksum
    from sparsedyn.problems import load_plan
    model, (fd, _) = _plans("chain", 12, "aba")
    fd.save(tmp_path / "fd.npz")
    loaded = load_plan(tmp_path / "fd.npz", model)
    assert np.array_equal(loaded.factorization.program.op_stage,
                          fd.factorization.program.op_stage)
    d = fd.factorization.to_dict()
    del d["program_op_stage"]
    d["checksum"] = _checksum(d)
    old = Factorization.from_dict(d)
    assert old.program.op_stage.size == 0
    lay = sweep_layout(old.program)
    assert np.array_equal(lay.order, np.arange(old.program.op_code.size))
    rng = np.random.default_rng(3)
    q = model.random_configuration(rng, batch=9)
    v, tau = rng.normal(size=(2, 9, model.nv))
    loaded.factorization = old
    loaded._ir, loaded._kernels = None, {}
    assert np.array_equal(loaded.solve(q, v, tau=tau, threads=1)["qdd"],
                          fd.solve(q, v, tau=tau, threads=1)["qdd"])


def test_fused_schedule_of_a_plan_without_constants():
    """A plan made without constant_values loads D's constant entries like the dynamic ones, and
    its pivot checks read some of them before the program runs: those constants are written at
    the start of each lane group, the others by the program's SETs. The schedule replays, and
    the compiled result equals the stored program's bit for bit, which agrees with dense NumPy
    (np.linalg.solve on the same D and b)."""
    from sparsedyn.problems.plan import Plan
    model = serial_chain(12)
    f = compile(forward_dynamics(model), ordering="auto").factorization
    plan = Plan(forward_dynamics(model), plan_factorization(f.pattern, f.always_nonzero))
    fs = plan._fused_solver()
    p = plan.factorization.program
    rng = np.random.default_rng(11)
    B = 20
    q = model.random_configuration(rng, batch=B)
    v, x = rng.normal(size=(2, B, model.nv))
    values, rhs = assemble_batch(fs.ir.assembly, q, v, x,
                                 [(plan.problem.given, i) for i in range(model.nbodies)])
    ref, ref_broken = solve_numba(p, values, rhs)
    D = plan.factorization.pattern.copy().astype(float)
    for s in range(B):                      # the stored program itself, against dense NumPy
        D.data = values[s]
        dense = np.linalg.solve(D.toarray(), rhs[s])
        assert np.abs(ref[s] - dense).max() <= 1e-9 * np.abs(dense).max()
    for full in (True, False):
        sch = fs.ir.schedule(full)
        assert sch.init_slots.size > 0 and (sch.op_layout < 0).any()   # both kinds of constant
        assert _replay(fs, sch) == 0
        out, xfull, broken = fs.run(q, v, x, full=full, threads=1)
        assert not broken.any() and not ref_broken.any()
        assert np.array_equal(out, ref[:, fs.ir.out_columns])
        if full:
            assert np.array_equal(xfull, ref)


@pytest.mark.parametrize("kind,size", [("chain", 30), ("humanoid", None)])
def test_fused_assembly_writes_each_transform_component_once(kind, size):
    """Entries of D copied from one component of a body's joint transform (iX_lambda(i) and its
    transpose share E) that the program only reads are written once: the other copies' reads
    go to the same slot (the replays above check the values)."""
    model = _model(kind, size)
    fs = compile(forward_dynamics(model), ordering="auto")._fused_solver()
    x_ptr, x_dest, x_src = fs.ir.assembly.model_arrays()[-3:]
    kept_ptr, kept_dest, kept_src = fs.ir._logical["model_arrays"][-3:]   # layout numbers
    assert kept_dest.size < x_dest.size
    written = np.zeros(fs.ir.program.n_slots, dtype=bool)
    written[fs.ir.program.op_t] = True
    body = np.repeat(np.arange(model.nbodies), np.diff(x_ptr))
    kept_body = np.repeat(np.arange(model.nbodies), np.diff(kept_ptr))
    read_only = ~written[x_dest]
    written_now = np.zeros(fs.ir.program.n_slots, dtype=bool)     # in the layout's numbers
    written_now[fs.ir.layout.op_t] = True
    pairs = set(zip(body[read_only].tolist(), x_src[read_only].tolist()))
    slots = fs.ir.layout.slots(x_dest)
    for bi, src in pairs:                   # every copy of one component: one slot, written once
        copies = read_only & (body == bi) & (x_src == src)
        assert np.unique(slots[copies]).size == 1
        assert ((kept_body == bi) & (kept_src == src) & ~written_now[kept_dest]).sum() == 1


@pytest.mark.parametrize("make,ordering", [(forward_dynamics, "aba"),
                                           (inverse_dynamics, "rnea")])
def test_chain_online_cost_is_linear_in_its_length(make, ordering):
    """The machine-independent half of 'online time linear in N_B': on serial chains (axes
    z, y, x repeating), every period of 3 links adds exactly the same flops, nnz(L+U), kernel
    operations (with the SETs) and work-array slots (outputs alone and the whole solution), from
    12 to 99 links. Time itself is measured by experiments/bench_dynamics.py."""
    def cost(n):
        plan = compile(make(serial_chain(n)), ordering=ordering)
        fs = plan._fused_solver()
        outputs, full = fs.ir.schedule(False), fs.ir.schedule(True)
        return np.array([plan.stats["flops"], plan.stats["nnz_LU"], outputs.prog[1].size,
                         outputs.n_slots, full.prog[1].size, full.n_slots])
    steps = [cost(n + 3) - cost(n) for n in (12, 24, 48, 96)]
    assert (steps[0] > 0).all()
    for step in steps[1:]:
        assert np.array_equal(step, steps[0])
