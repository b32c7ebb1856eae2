"""Issue #16 (trust), dynamics side: no public dynamics path returns inf/NaN or a silently
inaccurate answer.

- Inputs too large for double precision (velocities of 1e155, prismatic positions of 1e200) raise
  NonFiniteError naming the batch elements and the inputs (largest first), where Pinocchio's
  RNEA/ABA/CRBA on the same states return inf/NaN (the oracle that the inputs do overflow).
- Static pivots chosen for sparsity lose accuracy on a badly scaled chain (masses 1, 1e-6, 1,
  1e6): every plan now returns solutions whose row-wise backward error, measured on the dense D
  with NumPy, is at round-off level, and qdd as accurate as Pinocchio's ABA allows.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

import sparsedyn as sd
from oracles import pin, pin_model, pin_twin, rel_err, to_pin_q, twin_q
from sparsedyn.delassus import COMPILED
from sparsedyn.errors import NonFiniteError, SingularModelError
from sparsedyn.loops import four_bar
from sparsedyn.model.joints import PrismaticJoint, RevoluteJoint
from sparsedyn.model.model import WORLD, ModelBuilder
from sparsedyn.models import HUMANOID_URDF, random_tree
from sparsedyn.planner import PivotBreakdownWarning, plan_factorization
from sparsedyn.planner.factorization import ROW_BACKWARD_TOL
from sparsedyn.planner.orderings import matched_pair, safe_matching
from sparsedyn.problems import Plan, compile, forward_dynamics, inverse_dynamics
from sparsedyn.problems.loops import loop_forward_dynamics

BACKENDS = ("numba", "numpy")
#: the online backends of a plan (the C backend runs the same IR as numba)
PLAN_BACKENDS = ("numba", "numpy", "c")


@pytest.fixture(scope="module")
def humanoid():
    model = sd.load_urdf(HUMANOID_URDF, floating_base=True)
    return model, pin_model(HUMANOID_URDF, True)


def _overflowing_state(model, rows, scale=1e155, B=6, seed=0):
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(2, B, model.nv))
    v[rows] *= scale
    return q, v, a


def _pin_nonfinite(fn, model, pm, q, *vectors):
    """Batch indices where Pinocchio's fn(q, *vectors) is not finite (warnings off: the oracle
    is expected to overflow there)."""
    pd = pm.createData()
    bad = []
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for b in range(q.shape[0]):
            out = fn(pm, pd, to_pin_q(model, pm, q[b]), *(x[b] for x in vectors))
            if not np.isfinite(out).all():
                bad.append(b)
    return bad


def test_recursive_algorithms_raise_on_overflow(humanoid):
    model, pm = humanoid
    q, v, a = _overflowing_state(model, [1, 4])
    assert _pin_nonfinite(pin.rnea, model, pm, q, v, a) == [1, 4]
    tau = np.ones_like(a)
    assert _pin_nonfinite(pin.aba, model, pm, q, v, tau) == [1, 4]
    calls = {"rnea": lambda: sd.rnea(model, q, v, a),
             "aba": lambda: sd.aba(model, q, v, tau),
             "yamane_forward_dynamics": lambda: sd.yamane_forward_dynamics(model, q, v, tau)}
    for name, call in calls.items():
        with warnings.catch_warnings(), pytest.raises(NonFiniteError, match=name) as info:
            warnings.simplefilter("ignore", RuntimeWarning)          # NumPy's own overflow notes
            call()
        assert info.value.batch_indices == (1, 4)
        assert info.value.arguments[0] == "v"
        assert isinstance(info.value, ValueError) and isinstance(info.value, ArithmeticError)
    # the finite states alone still match Pinocchio
    ok = [0, 2, 3, 5]
    pd = pm.createData()
    tau_ok = sd.rnea(model, q[ok], v[ok], a[ok])
    for k, b in enumerate(ok):
        assert rel_err(tau_ok[k], pin.rnea(pm, pd, to_pin_q(model, pm, q[b]), v[b], a[b])) <= 1e-10


def _prismatic_tree():
    """A random tree with prismatic joints and its Pinocchio twin."""
    model = random_tree(8, seed=1)
    assert any(isinstance(j, PrismaticJoint) for j in model.joints)
    return model, pin_twin(model)


def test_mass_matrix_and_ltl_raise_on_overflowing_positions():
    model, pm = _prismatic_tree()
    q = model.random_configuration(0, batch=3)
    q[2] = 1e200                                    # prismatic positions beyond any physical scale
    pd = pm.createData()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        M_pin = pin.crba(pm, pd, twin_q(model, pm, q[2]))
    assert not np.isfinite(np.triu(M_pin)).all()
    with warnings.catch_warnings(), pytest.raises(NonFiniteError, match="crba") as info:
        warnings.simplefilter("ignore", RuntimeWarning)
        sd.crba(model, q)
    assert info.value.batch_indices == (2,) and info.value.arguments == ("q",)
    M = sd.crba(model, q[:2])
    bad = M.copy()
    bad[1, 0, 0] = np.nan
    # a NaN in M is not a "non-positive pivot": it names M and the batch element
    with pytest.raises(ValueError, match=r"M: non-finite entries at batch indices \[1\]"):
        sd.ltl(model, bad)
    with pytest.raises(ValueError, match=r"M: non-finite"):
        sd.ltdl(model, bad)


@pytest.mark.parametrize("method", ["pv-osimr", "pv-osim", "efpa", "kjr", "ltl-osim", "dense", "sparse"])
def test_delassus_raises_on_overflow(method):
    model, _ = _prismatic_tree()
    q = model.random_configuration(0, batch=3)
    q[1] = 1e200
    contacts = [sd.Contact(model.link_names[-1], "6d"), sd.Contact(model.link_names[3], "3d")]
    for backend in [b for b in BACKENDS if b == "numpy" or method in COMPILED]:
        with warnings.catch_warnings(), pytest.raises(NonFiniteError) as info:
            warnings.simplefilter("ignore", RuntimeWarning)
            sd.delassus(model, q, contacts, method=method, backend=backend)
        assert info.value.batch_indices == (1,), (method, backend)
        assert info.value.arguments == ("q",)
        good = sd.delassus(model, q[[0, 2]], contacts, method=method, backend=backend)
        assert np.isfinite(good).all()


@pytest.mark.parametrize("backend", PLAN_BACKENDS)
@pytest.mark.parametrize("kind", ["id", "fd"])
def test_plans_raise_on_overflow_naming_the_inputs(humanoid, kind, backend):
    model, pm = humanoid
    plan = compile((inverse_dynamics if kind == "id" else forward_dynamics)(model))
    given = "qdd" if kind == "id" else "tau"
    oracle = pin.rnea if kind == "id" else pin.aba
    # 1e155: b(q, v) itself overflows; 2e153: D and b are finite, the solution is not
    for scale in (1e155, 2e153):
        q, v, y = _overflowing_state(model, [3, 5], scale=scale)
        assert _pin_nonfinite(oracle, model, pm, q, v, y) == [3, 5]
        with np.errstate(all="ignore"):
            values, rhs = plan.system.assemble(q, v, plan._measured(y, None))
        assert np.isfinite(values).all() and np.isfinite(rhs).all() == (scale < 1e154)
        with warnings.catch_warnings(), \
                pytest.raises(NonFiniteError, match=plan.problem.name) as info:
            warnings.simplefilter("ignore", RuntimeWarning)
            plan.solve(q, v, backend=backend, **{given: y})
        assert info.value.batch_indices == (3, 5), scale
        assert info.value.arguments[0] == "v"


def test_loop_plan_raises_on_overflow():
    cm = four_bar()
    plan = compile(loop_forward_dynamics(cm))
    q, yd, tau = cm.random_state(3, batch=4)
    qd = cm.spanning_velocity(q, yd)
    qd[2] *= 1e160
    with warnings.catch_warnings(), pytest.raises(NonFiniteError) as info:
        warnings.simplefilter("ignore", RuntimeWarning)
        plan.solve(q, qd, tau)
    assert info.value.batch_indices == (2,) and info.value.arguments[0] == "qd"


def test_cluster_algorithms_raise_on_overflow():
    """The loop (cluster) algorithms and their baselines on a four-bar whose independent
    velocity is 1e155 at batch index 1, where Pinocchio's RNEA of the spanning tree overflows."""
    from sparsedyn.recursive.cluster import (c_aba, c_rnea, lagrange_fd, projected_rnea,
                                             projection_fd)
    cm = four_bar()
    q, yd, tau = cm.random_state(3, batch=3)
    yd[1] *= 1e155
    with np.errstate(over="ignore"):
        qd = cm.spanning_velocity(q, yd)
    pm = pin_twin(cm.model)
    zero = np.zeros((3, cm.model.nv))
    assert _pin_nonfinite(pin.rnea, cm.model, pm, q, qd, zero) == [1]
    calls = {"c_aba": lambda: c_aba(cm, q, yd, tau), "c_rnea": lambda: c_rnea(cm, q, yd, tau),
             "projected_rnea": lambda: projected_rnea(cm, q, yd, tau),
             "projection_fd": lambda: projection_fd(cm, q, yd, tau),
             "lagrange_fd": lambda: lagrange_fd(cm, q, qd, tau),
             "lagrange_fd (dense)": lambda: lagrange_fd(cm, q, qd, tau, method="dense")}
    for name, call in calls.items():
        with warnings.catch_warnings(), \
                pytest.raises(NonFiniteError, match=name.split()[0]) as info:
            warnings.simplefilter("ignore", RuntimeWarning)
            call()
        assert info.value.batch_indices == (1,), name
        assert info.value.arguments[0] in ("yd", "qd"), name


def test_factorization_tells_overflow_from_singular():
    """D = diag(1e-200, 1): finite, nonsingular, but x = D^-1 [1e200, 1] overflows: NonFiniteError
    (flagged, not "singular"), while a rank-deficient D stays SingularModelError."""
    pattern = sp.csc_matrix(np.eye(2))
    fact = plan_factorization(pattern, np.ones(2, dtype=bool), ordering="natural")
    values = np.array([[1e-200, 1.0], [2.0, 1.0]])
    rhs = np.array([[1e200, 1.0], [1.0, 1.0]])
    for backend in BACKENDS:
        with warnings.catch_warnings(), pytest.raises(NonFiniteError) as info:
            warnings.simplefilter("ignore", RuntimeWarning)
            fact.solve(values, rhs, backend=backend)
        assert info.value.batch_indices == (0,)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            x, ok = fact.solve(values, rhs, return_status=True, backend=backend)
        assert ok.tolist() == [False, True] and np.isnan(x[0]).all()
        assert np.allclose(x[1], [0.5, 1.0])
        with pytest.raises(SingularModelError):
            fact.solve(np.array([[0.0, 1.0]]), np.ones((1, 2)), backend=backend)


# ---------------------------------------------------------------------------- accuracy


def _rod(mass, length=0.3):
    r = 0.05 * length
    transverse = mass * (3 * r * r + length ** 2) / 12
    return np.diag([0.5 * mass * r * r, transverse, transverse])


def scaled_chain(masses, length=0.3):
    """Revolute chain (axes z, y, x, ...) with the given link masses: badly scaled when they
    span many decades."""
    axes = ([0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0])
    b = ModelBuilder("scaled_chain")
    parent = WORLD
    for i, mass in enumerate(masses):
        T = np.eye(4)
        T[0, 3] = 0.0 if i == 0 else length
        parent = b.add_body(f"link{i + 1}", parent, RevoluteJoint(f"joint{i + 1}", axes[i % 3]),
                            placement=T, mass=mass, com=(length / 2, 0, 0), inertia=_rod(mass))
    return b.build()


def _scipy_rcm_plan(problem):
    """The plan the previous RCM candidate produced (SciPy's reverse_cuthill_mckee on the matched
    structure), given to the planner as an untrusted structural order: pivots on safe entries,
    chosen for bandwidth, not for accuracy."""
    system = problem.system()
    pattern = sp.csc_matrix(system.pattern, dtype=float)
    match = safe_matching(pattern, system.always_nonzero)
    matched = pattern[match, :]
    sym = (abs(matched) + abs(matched.T)).tocsr()
    col = np.asarray(reverse_cuthill_mckee(sym, symmetric_mode=True), dtype=np.int64)
    orders = dict(system.structural_orders, scipy_rcm=matched_pair(match, col))
    return Plan(problem, plan_factorization(system.pattern, system.always_nonzero,
                                            constant_values=system.constant_values,
                                            ordering="scipy_rcm", structural_orders=orders))


def _row_backward_error(plan, q, v, y, x):
    """max_i |D x - b|_i / (max_j |D_ij| max|x| + |b_i|) per state, on the dense D (NumPy)."""
    values, rhs = plan.system.assemble(q, v, plan._measured(y, None))
    out = []
    for b in range(q.shape[0]):
        D = plan.factorization.assemble(values[b]).toarray()
        res = np.abs(D @ x[b] - rhs[b])
        out.append((res / (np.abs(D).max(axis=1) * np.abs(x[b]).max() + np.abs(rhs[b]))).max())
    return np.array(out)


@pytest.fixture(scope="module")
def badly_scaled():
    model = scaled_chain([1.0, 1e-6, 1.0, 1e6])
    pm = pin_twin(model)
    rng = np.random.default_rng(5)
    B = 60
    q = model.random_configuration(rng, batch=B)
    v, y = rng.normal(size=(2, B, model.nv))
    pd = pm.createData()
    pq = [twin_q(model, pm, qb) for qb in q]
    qdd_pin = np.array([pin.aba(pm, pd, pq[b], v[b], y[b]) for b in range(B)])
    tau_pin = np.array([pin.rnea(pm, pd, pq[b], v[b], y[b]) for b in range(B)])
    M = np.array([pin.crba(pm, pd, pq[b]) for b in range(B)])
    assert np.linalg.cond(M).max() < 1e6            # so that forward errors are meaningful
    return model, q, v, y, qdd_pin, tau_pin


@pytest.mark.parametrize("backend", PLAN_BACKENDS)
def test_static_pivots_that_lose_accuracy_are_refactored(badly_scaled, backend):
    """The issue's case: an RCM order on masses 1, 1e-6, 1, 1e6 gave qdd off by ~1e-3 (torque-
    space backward error ~1e-4, Pinocchio's ABA ~1e-16), silently. The accuracy check now sends
    such states to partial pivoting, with a warning, and qdd agrees with Pinocchio's ABA."""
    model, q, v, y, qdd_pin, _ = badly_scaled
    plan = _scipy_rcm_plan(forward_dynamics(model))
    assert plan.factorization.checks_accuracy
    with pytest.warns(PivotBreakdownWarning, match="lost accuracy"):
        res = plan.solve(q, v, tau=y, backend=backend, outputs="all")
    assert _row_backward_error(plan, q, v, y, res.vector).max() <= ROW_BACKWARD_TOL
    assert rel_err(res["qdd"], qdd_pin) <= 1e-10


@pytest.mark.parametrize("ordering", ["natural", "colamd", "markowitz", "amd", "rcm", "min_degree"])
def test_every_ordering_returns_round_off_backward_errors(badly_scaled, ordering):
    """Whatever ordering the user asks for, forward dynamics on the badly scaled chain returns
    solutions whose row-wise backward error on D (dense NumPy) is at most ROW_BACKWARD_TOL, on
    both backends ("natural" alone used to reach 5e-10, with qdd off by 5e-5)."""
    model, q, v, y, qdd_pin, _ = badly_scaled
    plan = compile(forward_dynamics(model), ordering=ordering)
    for backend in PLAN_BACKENDS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PivotBreakdownWarning)
            res = plan.solve(q, v, tau=y, backend=backend, outputs="all")
        assert _row_backward_error(plan, q, v, y, res.vector).max() <= ROW_BACKWARD_TOL, backend


def test_plans_exempt_from_the_check_are_accurate_on_a_badly_scaled_chain(badly_scaled):
    """The plans the accuracy check trusts without looking: Nori's ABA order (forward dynamics)
    and inverse dynamics under every ordering (known constant pivots) match Pinocchio's ABA and
    RNEA on the badly scaled chain."""
    model, q, v, y, qdd_pin, tau_pin = badly_scaled
    fd = compile(forward_dynamics(model), ordering="aba")
    assert not fd.factorization.checks_accuracy
    for backend in PLAN_BACKENDS:
        with warnings.catch_warnings():
            warnings.simplefilter("error", PivotBreakdownWarning)
            assert rel_err(fd.solve(q, v, tau=y, backend=backend)["qdd"], qdd_pin) <= 1e-10
    for ordering in ("auto", "natural", "colamd", "markowitz", "amd", "rcm", "min_degree"):
        plan = compile(inverse_dynamics(model), ordering=ordering)
        assert not plan.factorization.checks_accuracy
        for backend in PLAN_BACKENDS:
            tau = plan.solve(q, v, qdd=y, backend=backend)["tau"]
            assert rel_err(tau, tau_pin) <= 1e-10, (ordering, backend)


def test_well_scaled_robot_pays_no_refactorization(humanoid):
    """On the embedded humanoid every ordering's static pivots are accurate: no state is sent to
    partial pivoting (no warning), and the results match Pinocchio."""
    model, pm = humanoid
    rng = np.random.default_rng(11)
    B = 40
    q = model.random_configuration(rng, batch=B)
    v, y = rng.normal(size=(2, B, model.nv))
    pd = pm.createData()
    qdd_pin = np.array([pin.aba(pm, pd, to_pin_q(model, pm, q[b]), v[b], y[b]) for b in range(B)])
    for ordering in ("colamd", "natural"):
        plan = compile(forward_dynamics(model), ordering=ordering)
        assert plan.factorization.checks_accuracy
        for backend in PLAN_BACKENDS:
            with warnings.catch_warnings():
                warnings.simplefilter("error", PivotBreakdownWarning)
                qdd = plan.solve(q, v, tau=y, backend=backend)["qdd"]
            assert rel_err(qdd, qdd_pin) <= 1e-9


def test_factorization_solve_checks_accuracy():
    """A 2x2 system whose static pivot (1e-10, far above the pivot check's 1e-13) loses half the
    digits: Factorization.solve re-solves it with partial pivoting, against np.linalg.solve."""
    pattern = sp.csc_matrix(np.ones((2, 2)))
    always = np.ones(4, dtype=bool)
    fact = plan_factorization(pattern, always, ordering="natural")
    values = np.array([[1e-10, 1.0, 1.0, 1.0]])          # CSC: D = [[1e-10, 1], [1, 1]]
    rhs = np.array([[1.0 + 3e-7, 2.0]])
    D = np.array([[1e-10, 1.0], [1.0, 1.0]])
    assert fact.checks_accuracy
    for backend in BACKENDS:
        with pytest.warns(PivotBreakdownWarning, match="lost accuracy"):
            x = fact.solve(values, rhs, backend=backend)
        assert rel_err(x, np.linalg.solve(D, rhs[0])[None]) <= 1e-14


def test_kinematics_raise_on_overflow():
    """Positions near the largest double (a prismatic chain at 1e308) and velocities of 1e200:
    placements, velocities and Jacobians overflow; every kinematic entry point raises
    NonFiniteError naming the state, as Pinocchio's inf/NaN would not."""
    model = sd.models.random_tree(6, seed=3, joint_types=("prismatic",))
    rng = np.random.default_rng(0)
    q = rng.normal(size=(3, model.nq))
    q[1] = 1.7e308                                    # sums of these overflow in the placements
    v = rng.normal(size=(3, model.nv))
    link = model.link_names[3]                        # below body 0: two prismatic joints
    calls = {"forward_kinematics": lambda: sd.forward_kinematics(model, q),
             "frame_jacobian": lambda: sd.frame_jacobian(model, q, link)}
    for name, call in calls.items():
        with warnings.catch_warnings(), pytest.raises(NonFiniteError, match=name) as info:
            warnings.simplefilter("ignore", RuntimeWarning)
            call()
        assert 1 in info.value.batch_indices
    ok = sd.forward_kinematics(model, q[[0, 2]], v[[0, 2]])
    assert np.isfinite(ok.placements).all() and np.isfinite(ok.velocities).all()
