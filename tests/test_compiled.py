"""The compiled online path (sparsedyn.kernels.assemble_numba: assembly program + fused LU) against
PINOCCHIO (pin.rnea, pin.aba, data.a_gf / data.f) and against the NumPy path, on the humanoid,
a random tree with planar + spherical + prismatic + revolute joints (Pinocchio twin built joint
by joint), talos and solo12 with a free-flyer; batched and single, with f_ext, 1 and all threads;
pivot breakdown and singular states."""
import os
import re
import sys
import warnings

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn as sd
from oracles import (pin, pin_fext, pin_model, pin_twin, rel_err, robot_urdf, singular_rod_model,
                     to_pin_q, twin_q)
from sparsedyn.ir.assembly import AssemblyProgram
from sparsedyn.ir.instructions import RECIP
from sparsedyn.kernels.assemble_numba import assemble_batch
from sparsedyn.model import ModelBuilder, PlanarJoint, PrismaticJoint, RevoluteJoint, SphericalJoint
from sparsedyn.model.model import WORLD
from sparsedyn.models import HUMANOID_URDF, humanoid
from sparsedyn.planner import Factorization, PivotBreakdownWarning
from sparsedyn.problems import Plan, compile, forward_dynamics, inverse_dynamics
from sparsedyn.recursive.rnea import rnea_sweeps
from test_problems import _fd_error, _random_fext

TOL = 1e-10          # against Pinocchio (as tests/test_problems.py)
SAME = 1e-13         # compiled against the NumPy path: the same equations, other rounding

KINDS = ("planar", "revolute", "prismatic", "spherical", "revolute", "spherical", "prismatic",
         "planar", "revolute", "revolute")


def mixed_tree(seed=3):
    """Random tree over every joint kind but the free-flyer (the robots below carry that)."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder("mixed")
    for i, kind in enumerate(KINDS):
        parent = WORLD if i == 0 else int(rng.integers(0, i))
        T = np.eye(4)
        T[:3, :3] = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        if np.linalg.det(T[:3, :3]) < 0:
            T[:3, 0] *= -1
        T[:3, 3] = rng.uniform(-0.5, 0.5, 3)
        joint = {"planar": lambda: PlanarJoint(f"j{i}"),
                 "revolute": lambda: RevoluteJoint(f"j{i}", rng.normal(size=3)),
                 "prismatic": lambda: PrismaticJoint(f"j{i}", rng.normal(size=3)),
                 "spherical": lambda: SphericalJoint(f"j{i}")}[kind]()
        b.add_body(f"l{i}", parent, joint, placement=T, mass=rng.uniform(0.5, 3.0),
                   com=rng.uniform(-0.2, 0.2, 3), inertia=np.diag(rng.uniform(0.02, 0.1, 3)))
    return b.build()


def _robot(name):
    if name == "mixed":
        m = mixed_tree()
        return m, pin_twin(m), twin_q
    if name == "humanoid":
        return humanoid(), pin_model(HUMANOID_URDF, True), to_pin_q
    m = sd.load_urdf(robot_urdf(name), floating_base=True)
    return m, pin_model(robot_urdf(name), True), to_pin_q


ROBOTS = ["mixed", "humanoid", "talos", "solo12"]
_CACHE = {}


def _setup(name, kind, with_fext):
    if name not in _CACHE:
        _CACHE[name] = _robot(name)
    key = (name, kind, with_fext)
    if key not in _CACHE:
        model = _CACHE[name][0]
        make = inverse_dynamics if kind == "id" else forward_dynamics
        _CACHE[key] = compile(make(model, f_ext=with_fext))
    return _CACHE[name] + (_CACHE[key],)


def _pin(pmodel, pq, v, x, fext, kind):
    pdata = pmodel.createData()
    fn = pin.rnea if kind == "id" else pin.aba
    out = fn(pmodel, pdata, pq, v, x, fext) if fext else fn(pmodel, pdata, pq, v, x)
    return np.array(out), pdata


@pytest.mark.parametrize("with_fext", [False, True])
@pytest.mark.parametrize("kind", ["id", "fd"])
@pytest.mark.parametrize("name", ROBOTS)
def test_compiled_vs_pinocchio_and_numpy(name, kind, with_fext):
    model, pmodel, conv, plan = _setup(name, kind, with_fext)
    rng = np.random.default_rng(20)
    B = 11                                   # not a multiple of any lane count
    q = model.random_configuration(rng, batch=B)
    v, x = rng.normal(size=(2, B, model.nv))
    f_ext = _random_fext(model, rng, B) if with_fext else None
    given, out = ("qdd", "tau") if kind == "id" else ("tau", "qdd")
    res = plan.solve(q, v, f_ext=f_ext, **{given: x})
    ref_np = plan.solve(q, v, f_ext=f_ext, backend="numpy", **{given: x})
    one = plan.solve(q, v, f_ext=f_ext, threads=1, **{given: x})
    assert np.array_equal(res[out], one[out])           # threads split the batch, not the work
    assert res[out].shape == (B, model.nv)
    for b in range(B):
        fb = {k: w[b] for k, w in f_ext.items()} if f_ext else None
        pq = conv(model, pmodel, q[b])
        ref, _ = _pin(pmodel, pq, v[b], x[b], pin_fext(model, pmodel, fb) if fb else None, kind)
        single = plan.solve(q[b], v[b], f_ext=fb, **{given: x[b]})
        assert single[out].shape == (model.nv,)
        if kind == "id":
            assert rel_err(res[out][b], ref) <= TOL
            assert rel_err(single[out], ref) <= TOL
            assert rel_err(res[out][b], ref_np[out][b]) <= SAME
        else:
            scale = np.abs(x[b]).max()
            assert _fd_error(pmodel, pq, res[out][b], ref, scale) <= TOL
            assert _fd_error(pmodel, pq, single[out], ref, scale) <= TOL
            # one LU program on entries that differ by round-off: relative to the largest qdd
            assert rel_err(res[out][b], ref_np[out][b]) <= SAME


def test_named_variables_lazy_and_eager_vs_pinocchio():
    """result["a", link] / ["f", link] = data.a_gf / data.f from the compiled path, computed on
    first access (outputs=None) or in the same pass (outputs="all"), bit-identical."""
    model, pmodel, conv, plan = _setup("humanoid", "id", True)
    rng = np.random.default_rng(21)
    B = 3
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(2, B, model.nv))
    f_ext = {"l_sole": rng.normal(size=(B, 6)), "base_link": rng.normal(size=6)}
    # one backend (bit-identity holds per backend; "auto" may run tau alone and the whole
    # solution on different ones, equal up to round-off: tests/test_c_backend.py)
    lazy = plan.solve(q, v, qdd=a, f_ext=f_ext, backend="numba")
    eager = plan.solve(q, v, qdd=a, f_ext=f_ext, outputs="all", backend="numba")
    q0, v0, a0 = q.copy(), v.copy(), a.copy()
    q[:], v[:], a[:] = model.neutral_configuration(), 0.0, 0.0    # callers may reuse their arrays
    assert np.array_equal(lazy.vector, eager.vector)              # the lazy pass saw the inputs
    q, v, a = q0, v0, a0
    tau_only = plan.solve(q, v, qdd=a, f_ext=f_ext, outputs=("tau",), backend="numba")
    assert np.array_equal(lazy["tau"], eager["tau"]) and np.array_equal(lazy["tau"], tau_only["tau"])
    assert np.array_equal(lazy.vector, eager.vector)
    assert rel_err(lazy.vector, plan.solve(q, v, qdd=a, f_ext=f_ext, backend="numpy").vector) <= SAME
    for b in range(B):
        fb = {k: np.broadcast_to(w, (B, 6))[b] for k, w in f_ext.items()}
        _, pdata = _pin(pmodel, conv(model, pmodel, q[b]), v[b], a[b], pin_fext(model, pmodel, fb), "id")
        for link in ("base_link", model.link_names[-1], model.link_names[7]):
            jid = pmodel.frames[pmodel.getFrameId(link, pin.BODY)].parentJoint
            assert rel_err(lazy["a", link][b], pdata.a_gf[jid].vector) <= TOL
            assert rel_err(eager.variable("f", link)[b], pdata.f[jid].vector) <= TOL
        assert rel_err(lazy["fx", "l_sole"][b], fb["l_sole"]) <= TOL
    assert rel_err(lazy["qdd"], a) <= TOL
    assert len(list(lazy)) == len(lazy)


def test_lazy_results_keep_their_inputs_while_later_solves_reuse_memory():
    """plan.solve copies its inputs into memory it reuses once no result refers to them: lazy
    results kept across later solves (the caller refilling its arrays in place each time) still
    give Pinocchio's body accelerations for their own inputs, and memory of dropped results is
    reused (the copies of a solve are views of one block of the plan's)."""
    model, pmodel, conv, plan = _setup("humanoid", "id", False)
    rng = np.random.default_rng(25)
    B = 4
    q = model.random_configuration(rng, batch=B)
    v, a = np.empty((2, B, model.nv))
    kept = []
    for k in range(3):
        q[:] = model.random_configuration(rng, batch=B)
        v[:], a[:] = rng.normal(size=(2, B, model.nv))
        kept.append((plan.solve(q, v, qdd=a, backend="numba"), q.copy(), v.copy(), a.copy()))
        for _ in range(5):                               # results dropped at once
            plan.solve(model.random_configuration(rng, batch=B), rng.normal(size=v.shape),
                       qdd=a, backend="numba")
    blocks = plan._copy_blocks
    assert len(blocks._blocks) <= blocks.keep
    link = model.link_names[-1]
    for res, qk, vk, ak in kept:
        for b in range(B):
            _, pdata = _pin(pmodel, conv(model, pmodel, qk[b]), vk[b], ak[b], None, "id")
            jid = pmodel.frames[pmodel.getFrameId(link, pin.BODY)].parentJoint
            assert rel_err(res["a", link][b], pdata.a_gf[jid].vector) <= TOL
    # once the kept results are gone, their blocks are handed out again
    del kept, res
    held = [id(blk) for blk in blocks._blocks]
    assert id(blocks.get(q.size + v.size + a.size)) in held


def test_plan_solve_names_bad_inputs_as_the_recursive_functions_do():
    """plan.solve checks its inputs on their copies in one pass; what it raises for a non-finite
    or non-unit-quaternion input is what sd.rnea raises (state's checks, in state's order), and
    finite inputs whose sum overflows pass the check (the solve then names the states that
    overflow)."""
    model, _, _, plan = _setup("humanoid", "id", False)
    rng = np.random.default_rng(26)
    B = 5
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(2, B, model.nv))

    def bad(what, row, col, value):
        args = {"q": q.copy(), "v": v.copy(), "a": a.copy()}
        for w, r, c, x in zip(what, row, col, value):
            args[w][r, c] = x
        return args

    cases = [bad("q", [2], [8], [np.nan]), bad("v", [4], [0], [np.inf]),
             bad("a", [1], [3], [-np.inf]), bad("q", [3], [3], [2.0]),          # quaternion
             bad("qv", [3, 1], [3, 5], [2.0, np.nan])]      # q's quaternion before v's NaN
    for args in cases:
        with pytest.raises(ValueError) as expected:
            sd.rnea(model, args["q"], args["v"], args["a"])
        with pytest.raises(ValueError) as got:
            plan.solve(args["q"], args["v"], qdd=args["a"])
        assert str(got.value) == str(expected.value).replace("a:", "qdd:", 1)
        assert str(got.value).split(":")[0] in ("q", "v", "qdd")
    a_big = a.copy()
    a_big[2, :2] = 1e308                                   # finite; their sum is not
    with pytest.raises(ValueError, match=r"\[2\]") as got:
        plan.solve(q, v, qdd=a_big)
    assert "non-finite value" not in str(got.value)


def test_input_copies_split_over_threads_keep_inputs_and_name_bad_states():
    """A batch whose copies span several threads' ranges (input_copies.COPY_MIN_DOUBLES_PER_THREAD
    each): the results and the on-demand variables equal one thread's bit for bit after the
    caller overwrote its arrays, and a bad input in the second range is named as sd.rnea names
    it (its batch index, its argument)."""
    from sparsedyn.problems.input_copies import COPY_MIN_DOUBLES_PER_THREAD
    model, _, _, plan = _setup("humanoid", "id", False)
    rng = np.random.default_rng(27)
    B = 3 * COPY_MIN_DOUBLES_PER_THREAD // (model.nq + 2 * model.nv)     # two ranges at least
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(2, B, model.nv))
    link = model.link_names[-1]
    for backend in ("numba", "c"):
        one = plan.solve(q, v, qdd=a, threads=1, backend=backend, outputs="all")
        got = plan.solve(q2 := q.copy(), v2 := v.copy(), qdd=(a2 := a.copy()), threads=2,
                         backend=backend)
        q2[:], v2[:], a2[:] = 0.0, 0.0, 0.0                # the caller reuses its arrays
        assert np.array_equal(got["tau"], one["tau"])
        assert np.array_equal(got["a", link], one["a", link])    # the on-demand pass
    for arg, row, col, value in (("v", B - 3, 5, np.nan), ("q", B - 2, 3, 2.0),
                                 ("a", B // 2 + 1, 0, np.inf)):
        args = {"q": q.copy(), "v": v.copy(), "a": a.copy()}
        args[arg][row, col] = value
        with pytest.raises(ValueError) as expected:
            sd.rnea(model, args["q"], args["v"], args["a"])
        with pytest.raises(ValueError) as got:
            plan.solve(args["q"], args["v"], qdd=args["a"], threads=2, backend="numba")
        assert str(got.value) == str(expected.value).replace("a:", "qdd:", 1)
        assert re.search(rf"batch index {row}\b", str(got.value))


@pytest.mark.parametrize("name", ["mixed", "humanoid"])
def test_compiled_assembly_satisfies_the_equations(name):
    """The compiled D(q), b(q, qd) (assemble_batch) against an independent oracle: the RNEA's
    v, a, f satisfy D d + b = 0 (eq. 6, 10); and entry by entry against the NumPy assembly; the
    joint transforms and body velocities it keeps on request against the NumPy kinematics and
    the RNEA's velocities."""
    if name not in _CACHE:
        _CACHE[name] = _robot(name)
    model = _CACHE[name][0]
    N = model.nbodies
    system = inverse_dynamics(model, f_ext=True).system()
    rng = np.random.default_rng(22)
    B = 5
    q = model.random_configuration(rng, batch=B)
    qd, qdd = rng.normal(size=(2, B, model.nv))
    fx = rng.normal(size=(B, N, 6))
    tau, _, a, f = rnea_sweeps(model, q, qd, qdd, fx)
    blocks = {}
    for i in range(N):
        s = model.v_slice(i)
        blocks.update({("a", i): a[:, i], ("f", i): f[:, i], ("tau", i): tau[:, s],
                       ("qdd", i): qdd[:, s], ("fx", i): fx[:, i]})
    order = list(system.measured)
    y = np.concatenate([blocks[key] for key in order], axis=1)
    values, rhs = assemble_batch(AssemblyProgram(system), q, qd, y, order)
    d = system.pack(blocks, B)
    residual = np.einsum("bij,bj->bi", system.dense(values), d) - rhs
    assert np.abs(residual).max() <= 1e-12 * max(1.0, np.abs(rhs).max(), np.abs(d).max())
    ref_values, ref_rhs = system.assemble(q, qd, {key: blocks[key] for key in order})
    assert rel_err(values, ref_values) <= SAME and rel_err(rhs, ref_rhs) <= SAME
    # the same pass keeping its kinematics (the derivatives' route): the same D and b, each
    # body's iX_lambda as kinematics.joint_transforms and velocity as the RNEA's sweep
    from sparsedyn.kinematics import joint_transforms
    kept = assemble_batch(AssemblyProgram(system), q, qd, y, order, kinematics=True)
    assert np.array_equal(kept[0], values) and np.array_equal(kept[1], rhs)
    Xup = joint_transforms(model, q)
    E = np.stack([X.E.reshape(B, 9) for X in Xup], 1)
    r = np.stack([X.r for X in Xup], 1)
    assert rel_err(kept[2][..., :9], E) <= SAME and rel_err(kept[2][..., 9:], r) <= SAME
    assert rel_err(kept[3], rnea_sweeps(model, q, qd, qdd, fx)[1]) <= SAME


def test_pivot_breakdown_is_resolved_with_the_batch_indices():
    """A plan whose pivot tolerance rejects every computed pivot: each state is re-solved by the
    NumPy path with partial pivoting, still equal to Pinocchio, and the warning names them."""
    model, pmodel, conv, plan = _setup("humanoid", "fd", False)
    assert (plan.factorization.program.op_code == RECIP).any()   # FD has pivot checks
    strict = _strict(plan)
    rng = np.random.default_rng(23)
    q = model.random_configuration(rng, batch=3)
    v, tau = rng.normal(size=(2, 3, model.nv))
    with pytest.warns(PivotBreakdownWarning, match=r"\[0, 1, 2\]"):
        res = strict.solve(q, v, tau=tau)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                     # already reported for these states
        vector = res.vector                                # the lazy pass re-solves them too
    for b in range(3):
        pq = conv(model, pmodel, q[b])
        ref, _ = _pin(pmodel, pq, v[b], tau[b], None, "fd")
        assert _fd_error(pmodel, pq, res["qdd"][b], ref, np.abs(tau[b]).max()) <= TOL
    assert np.isfinite(vector).all()


def _strict(plan):
    """The plan with a pivot tolerance that rejects every computed pivot (all states take the
    partial-pivoting fallback)."""
    f = plan.factorization
    program = type(f.program)(**{**f.program.arrays(), "tol": 1e300})
    return Plan(plan.problem, Factorization(f.pattern, f.always_nonzero, f.constant_values,
                                            program, f.stats["ordering"], f.stats["nnz_LU"]))


def test_singular_states_raise_with_batch_indices():
    """A leaf rod on its joint axis has no inertia about it: M is numerically singular in every
    state, and the fallback says so, naming every state of the batch, on both backends."""
    plan = _strict(compile(forward_dynamics(singular_rod_model())))
    q, v, tau = np.zeros((3, 2)), np.zeros((3, 2)), np.ones((3, 2))
    for backend in ("numba", "numpy", "c"):
        with pytest.raises(sd.SingularModelError, match=r"\[0, 1, 2\]") as info:
            plan.solve(q, v, tau=tau, backend=backend)
        assert info.value.batch_indices == (0, 1, 2)


def rod_on_axis():
    """A thin rod (COM on its axis, inertia diag(0, m l^2/12, m l^2/12) in its own frame) on a
    revolute joint along the rod, skewed so that every inertia entry is nonzero: the mass matrix
    is singular only through cancellation (S^T I S = 0 up to round-off), in every state."""
    b = ModelBuilder("spinning_rod")
    b.add_body("l1", WORLD, RevoluteJoint("j1", [0, 0, 1]), mass=1.0, com=(0.1, 0, 0),
               inertia=np.diag([0.1, 0.1, 0.1]))
    axis = np.array([1.0, 2.0, 2.0]) / 3.0
    m, length = 0.7, 0.5
    b.add_body("rod", "l1", RevoluteJoint("j2", axis), mass=m, com=0.5 * length * axis,
               inertia=m * length ** 2 / 12 * (np.eye(3) - np.outer(axis, axis)))
    return b.build()


@pytest.mark.parametrize("ordering", ["auto", "aba"])
def test_rod_spinning_about_its_axis_raises_instead_of_garbage(ordering):
    """Without any artificial tolerance the FD plan finds the cancelled pivot (the check weighs
    it against what was subtracted from it) and raises, naming every state, on the fused
    compiled path (1 and 2 threads), the NumPy path and both LU kernels; ABA agrees. So does
    the plan under Nori's ABA order, whose trusted pivots S^T I^A S are the ones that vanish."""
    model = rod_on_axis()
    pmodel = pin_twin(model)
    rng = np.random.default_rng(31)
    q = model.random_configuration(rng, batch=3)
    v, tau = rng.normal(size=(2, 3, model.nv))
    for b in range(3):                                   # Pinocchio: M is numerically singular
        M = pin.crba(pmodel, pmodel.createData(), twin_q(model, pmodel, q[b]))
        ev = np.linalg.eigvalsh(np.triu(M) + np.triu(M, 1).T)
        assert abs(ev[0]) <= 1e-15 * ev[-1]
    plan = compile(forward_dynamics(model), ordering=ordering)
    match = r"mass matrix is singular.*\[0, 1, 2\]"
    for backend, threads in (("numba", 1), ("numba", 2), ("numpy", None), ("c", 1), ("c", 2)):
        for outputs in (None, "all"):
            with pytest.raises(sd.SingularModelError, match=match) as info:
                plan.solve(q, v, tau=tau, backend=backend, threads=threads, outputs=outputs)
            assert info.value.batch_indices == (0, 1, 2)
    values, rhs = plan.system.assemble(q, v, plan._measured(tau, None))
    for backend in ("numba", "numpy"):
        with pytest.raises(sd.SingularModelError, match=r"\[0, 1, 2\]"):
            plan.factorization.solve(values, rhs, backend=backend)
    with pytest.raises(sd.SingularModelError, match="j2"):
        sd.aba(model, q, v, tau)


@pytest.mark.parametrize("name", ["humanoid", "talos", "solo12", "mixed"])
def test_well_conditioned_models_never_break_down(name):
    """The cancellation-aware check raises no false alarm: random states (fast velocities, large
    torques and wrenches) of well-conditioned models solve without any warning, on every path."""
    rng = np.random.default_rng(32)
    for kind in ("fd", "id"):
        model, _, _, plan = _setup(name, kind, True)
        B = 400
        q = model.random_configuration(rng, batch=B)
        v, x = 5.0 * rng.normal(size=(2, B, model.nv))
        fext = {link: 50.0 * rng.normal(size=(B, 6)) for link in plan.problem.fx_links[:4]}
        given = {"tau" if kind == "fd" else "qdd": x}
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for backend in ("numba", "numpy", "c"):
                res = plan.solve(q, v, f_ext=fext, backend=backend, outputs="all", **given)
                assert np.isfinite(res.vector).all()


def test_overflowing_states_are_named():
    """States whose D or b overflow are reported by their batch indices, not re-solved."""
    model, _, _, plan = _setup("humanoid", "id", False)
    rng = np.random.default_rng(24)
    q = model.random_configuration(rng, batch=20)
    v, a = rng.normal(size=(2, 20, model.nv))
    v[[3, 17]] *= 1e200
    with pytest.raises(ValueError, match=r"\[3, 17\]"):
        plan.solve(q, v, qdd=a)


def test_bad_arguments_name_themselves():
    model, _, _, plan = _setup("mixed", "id", False)
    q, v, a = model.neutral_configuration(), np.zeros(model.nv), np.zeros(model.nv)
    with pytest.raises(ValueError, match="backend"):
        plan.solve(q, v, qdd=a, backend="cuda")
    with pytest.raises(ValueError, match="threads"):
        plan.solve(q, v, qdd=a, threads=0)
    with pytest.raises(ValueError, match="threads"):
        plan.solve(q, v, qdd=a, threads=1.5)
    with pytest.raises(ValueError, match="outputs"):
        plan.solve(q, v, qdd=a, outputs=("qdd",))
    with pytest.raises(ValueError, match="q"):
        plan.solve(np.zeros(model.nq + 1), v, qdd=a)
