"""Estimation on the C backend (backends/c_chains.py for MAP, backends/generated_c.py for the
exact route) and one sample at a time (EstimationPlan.solver()): the same estimates as the numba
route (1e-12) and the Pinocchio truth (1e-8); flagged samples go through plan.solve, which
decides ok or raises the typed error."""

import numpy as np
import pytest

from oracles import in_threads, rel_err
from pin_sensors import singular_chain_setting, square_ankles_setting
from sparsedyn import wait_for_kernels
from sparsedyn.errors import SingularStateWarning
from sparsedyn.estimation import compile_estimation
from test_estimation import _readings

FEET = ["l_sole", "r_sole"]
COV = {"dynamics": 1e-8, "qdd": 1e-6, "l_foot_ft_sensor": 1e-4, "r_foot_ft_sensor": 1e-4}


@pytest.fixture(scope="module")
def humanoid_map():
    """Humanoid, qdd and F/T at both ankles, both feet's wrenches unknown: MAP (normal form)."""
    model, problem, truth = square_ankles_setting(3, 6, FEET)
    plan = compile_estimation(problem, method="map", covariances=COV, map_form="normal")
    return model, truth, problem, plan, _readings(problem, truth)


def _one(readings, b):
    return {k: r[b] for k, r in readings.items()}


def test_map_on_c_equals_numba_and_the_truth(humanoid_map):
    model, truth, problem, plan, readings = humanoid_map
    fast = plan.solve(truth.q, truth.v, readings, backend="numba")
    c = plan.solve(truth.q, truth.v, readings, backend="c")
    assert c.ok.all() and fast.ok.all()
    assert rel_err(c.vector, fast.vector) <= 1e-12
    assert rel_err(c["tau"], truth.tau) <= 1e-8
    for link in FEET:
        assert rel_err(c.wrench(link), truth.f_ext[link]) <= 1e-8
    # two threads (one work array each) give the same numbers
    assert rel_err(plan.solve(truth.q, truth.v, readings, backend="c", threads=2).vector,
                   c.vector) == 0.0


def test_one_sample_at_a_time(humanoid_map):
    model, truth, problem, plan, readings = humanoid_map
    batch = plan.solve(truth.q, truth.v, readings, backend="numba")
    solve = plan.solver()
    names = [name for name, _ in solve.readings_order]
    assert names == [s.name for s in problem.rows.sensors if s.size]
    for b in range(3):
        y = np.concatenate([readings.get(n, np.zeros((len(truth.q), size)))[b]
                            for n, size in solve.readings_order])
        x = solve(truth.q[b], truth.v[b], y)
        assert solve.ok
        assert rel_err(x, batch.vector[b]) <= 1e-12
        assert rel_err(x[solve.tau_columns], truth.tau[b]) <= 1e-8
        assert rel_err(x[solve.qdd_columns], truth.qdd[b]) <= 1e-8
        # readings as a dict, and into a caller's array
        out = np.empty_like(x)
        assert solve(truth.q[b], truth.v[b], _one(readings, b), out=out) is out
        assert rel_err(out, x) == 0.0
        est = solve.estimate(x)
        assert rel_err(est.wrench("l_sole"), truth.f_ext["l_sole"][b]) <= 1e-8


def test_plan_solve_of_one_sample_on_c(humanoid_map):
    """plan.solve with one sample on C (the one-sample function, no per-call NumPy checks):
    the batched numba route's estimate, its covariance, residuals and consistency; a sample the
    route flags or a bad argument gets the general path's error naming it."""
    model, truth, problem, plan, readings = humanoid_map
    batch = plan.solve(truth.q, truth.v, readings, backend="numba")
    chi2, dof, p = batch.consistency()
    for b in range(3):
        est = plan.solve(truth.q[b], truth.v[b], _one(readings, b), backend="c")
        assert est.ok and est["tau"].shape == (model.nv,)
        assert rel_err(est.vector, batch.vector[b]) <= 1e-12
        assert rel_err(est.wrench("l_sole"), truth.f_ext["l_sole"][b]) <= 1e-8
        assert rel_err(est.covariance("tau"), batch.covariance("tau")[b]) <= 1e-10
        assert rel_err(est.residual("l_foot_ft_sensor"), batch.residual("l_foot_ft_sensor")[b]) <= 1e-6
        c1, d1, p1 = est.consistency()
        assert d1 == dof and abs(c1 - chi2[b]) <= 1e-6 * max(1.0, chi2[b])
    q = truth.q[0].copy()
    q[3:7] *= 1.5
    with pytest.raises(ValueError, match="quaternion"):
        plan.solve(q, truth.v[0], _one(readings, 0), backend="c")
    r = _one(readings, 0)
    r["l_foot_ft_sensor"] = r["l_foot_ft_sensor"].copy()
    r["l_foot_ft_sensor"][1] = np.inf
    with pytest.raises(ValueError, match="l_foot_ft_sensor"):
        plan.solve(truth.q[0], truth.v[0], r, backend="c")
    missing = {k: x for k, x in _one(readings, 0).items() if k != "qdd"}
    with pytest.raises(KeyError, match="missing the reading of sensor 'qdd'"):
        plan.solve(truth.q[0], truth.v[0], missing, backend="c")


def test_a_bad_sample_gets_plan_solves_error(humanoid_map):
    """The fast path checks nothing per call; what it flags goes through plan.solve."""
    model, truth, problem, plan, readings = humanoid_map
    solve = plan.solver()
    q = truth.q[0].copy()
    q[3:7] *= 1.5                                    # not a unit quaternion
    with pytest.raises(ValueError, match="quaternion"):
        solve(q, truth.v[0], _one(readings, 0))
    r = _one(readings, 0)
    r["qdd"] = r["qdd"].copy()
    r["qdd"][2] = np.nan
    with pytest.raises(ValueError, match="qdd"):
        solve(truth.q[0], truth.v[0], r)
    with pytest.raises(ValueError, match="readings_order"):
        solve(truth.q[0], truth.v[0], np.zeros(3))
    with pytest.raises(KeyError, match="nosuch"):
        solve(truth.q[0], truth.v[0], {"nosuch": np.zeros(6)})
    for backend in ("c", "numba"):        # a reading left out is never taken as zero
        missing = {k: r for k, r in _one(readings, 0).items() if k != "l_foot_ft_sensor"}
        with pytest.raises(KeyError, match="missing the reading of sensor 'l_foot_ft_sensor'"):
            plan.solver(backend)(truth.q[0], truth.v[0], missing)


def test_solver_inputs_of_other_shapes_go_the_checked_way(humanoid_map):
    """The call copies float64 q, v and y of its buffers' shapes into them, other arrays with
    one concatenate after comparing their shapes: the same total split otherwise is refused
    naming q, not run; a batch of one, or a reading given as a list, gets the batched numba
    route's estimate; float32 readings and strided or integer arrays get the estimate of
    their float64 values."""
    model, truth, problem, plan, readings = humanoid_map
    batch = plan.solve(truth.q, truth.v, readings, backend="numba")
    solve = plan.solver()
    y = np.concatenate([readings.get(n, np.zeros((len(truth.q), size)))[0]
                        for n, size in solve.readings_order])
    q, v = truth.q[0], truth.v[0]
    with pytest.raises(ValueError, match=r"q: expected shape \("):
        solve(np.r_[q, 0.0], v[:-1], y)
    assert rel_err(solve(q[None], v[None], y), batch.vector[0]) <= 1e-12 and solve.ok
    assert rel_err(solve(q, v, list(y)), batch.vector[0]) <= 1e-12 and solve.ok
    assert rel_err(solve(np.repeat(q, 2)[::2], v, y), batch.vector[0]) <= 1e-12 and solve.ok
    y32 = y.astype(np.float32)
    start, r32 = 0, {}
    for name, size in solve.readings_order:
        r32[name] = y32[start:start + size].astype(float)[None]
        start += size
    ref32 = plan.solve(truth.q[:1], truth.v[:1], r32, backend="numba").vector[0]
    assert rel_err(solve(q, v, y32), ref32) <= 1e-12 and solve.ok
    zero = plan.solve(truth.q[:1], np.zeros((1, model.nv)), r32, backend="numba").vector[0]
    assert rel_err(solve(q, np.zeros(model.nv, dtype=int), y32), zero) <= 1e-12 and solve.ok


def test_an_undetermined_sample_is_flagged_on_c():
    """A chain whose first state is singular: the C route flags it, the reference route says
    not ok and names the variables; the others equal the numba route."""
    model, problem, truth = singular_chain_setting(7)
    plan = compile_estimation(problem, method="map", map_form="normal")
    readings = {"qdd": truth.qdd, "tau": truth.tau}
    with pytest.warns(SingularStateWarning):
        c = plan.solve(truth.q, truth.v, readings, backend="c")
    with pytest.warns(SingularStateWarning):
        ref = plan.solve(truth.q, truth.v, readings, backend="numba")
    np.testing.assert_array_equal(c.ok, [False, True, True])
    assert c.undetermined(0)
    assert rel_err(c.vector[1:], ref.vector[1:]) <= 1e-12
    solve = plan.solver()
    with pytest.warns(SingularStateWarning):
        solve(truth.q[0], truth.v[0], _one(readings, 0))
    assert not solve.ok
    solve(truth.q[1], truth.v[1], _one(readings, 1))
    assert solve.ok


def test_exact_route_on_c():
    """Square problem (F/T at both ankles, feet and chest wrenches unknown): the exact route's
    fused program on C equals numba's and the truth."""
    model, problem, truth = square_ankles_setting(0, 4)
    plan = compile_estimation(problem)
    assert plan.method == "exact"
    readings = _readings(problem, truth)
    c = plan.solve(truth.q, truth.v, readings, backend="c")
    assert rel_err(c.vector, plan.solve(truth.q, truth.v, readings).vector) <= 1e-12
    assert rel_err(c["tau"], truth.tau) <= 1e-8
    solve = plan.solver()
    x = solve(truth.q[1], truth.v[1], _one(readings, 1))
    assert rel_err(x[solve.tau_columns], truth.tau[1]) <= 1e-8


def test_solvers_in_threads(humanoid_map):
    """One solver per thread (own buffers), one compiled route shared."""
    model, truth, problem, plan, readings = humanoid_map
    ref = plan.solve(truth.q, truth.v, readings, backend="numba").vector
    got = np.empty_like(ref)

    def worker(lo, hi):
        solve = plan.solver()
        for b in range(lo, hi):
            got[b] = solve(truth.q[b], truth.v[b], _one(readings, b))
    in_threads(worker, [(k * 2, k * 2 + 2) for k in range(3)])
    assert rel_err(got, ref) <= 1e-12


def test_per_sample_plans_on_c(humanoid_map):
    """Contacts and covariances per state on the C route equal the numba route's; the solver
    keeps them (set_sample) until they change, as feet touch down and lift off."""
    model, truth, problem, plan, readings = humanoid_map
    per_sample = compile_estimation(problem, method="map", covariances=COV, per_sample=True)
    contacts = {"l_sole": np.array([1, 1, 0, 1, 1, 0], bool), "r_sole": True}
    cov = {"l_foot_ft_sensor": np.where(contacts["l_sole"], 1e-4, 1e-2)[:, None]}
    c = per_sample.solve(truth.q, truth.v, readings, contacts=contacts, covariances=cov,
                         backend="c")
    ref = per_sample.solve(truth.q, truth.v, readings, contacts=contacts, covariances=cov,
                           backend="numba")
    assert c.ok.all() and rel_err(c.vector, ref.vector) <= 1e-12
    assert np.all(c.wrench("l_sole")[~contacts["l_sole"]] == 0.0)
    for backend in ("c", "numba"):
        solve = per_sample.solver(backend=backend)
        for b in range(len(truth.q)):
            solve.set_sample(contacts={"l_sole": bool(contacts["l_sole"][b]), "r_sole": True},
                             covariances={"l_foot_ft_sensor": cov["l_foot_ft_sensor"][b:b + 1]})
            x = solve(truth.q[b], truth.v[b], _one(readings, b))
            assert solve.ok and rel_err(x, ref.vector[b]) <= 1e-12
    with pytest.raises(ValueError, match="per_sample"):
        plan.solver().set_sample(contacts={"l_sole": False})


def test_routes_without_a_c_form_say_so(humanoid_map):
    model, truth, problem, plan, readings = humanoid_map
    aug = compile_estimation(problem, method="map", map_form="augmented",
                             covariances=dict(COV, prior=1e4))
    with pytest.raises(ValueError, match="augmented"):
        aug.solve(truth.q, truth.v, readings, backend="c")
    solve = aug.solver(backend="numba")           # the numba route serves one sample at a time
    x = solve(truth.q[0], truth.v[0], _one(readings, 0))
    assert rel_err(x, aug.solve(truth.q[:1], truth.v[:1],
                                {k: r[:1] for k, r in readings.items()}).vector[0]) <= 1e-12
    with pytest.raises(ValueError, match="backend"):
        plan.solve(truth.q, truth.v, readings, backend="cuda")


def test_small_batches_go_to_c_once_it_is_built(humanoid_map):
    """solve()'s default: C for small batches once the C route exists and is built (never a
    compiler run of its own), numba for big batches; the same numbers either way."""
    model, truth, problem, plan, readings = humanoid_map
    fresh = compile_estimation(problem, method="map", covariances=COV, map_form="normal")
    wait_for_kernels()            # numba's MAP kernels (auto answers "numpy" while they compile)
    assert fresh.auto_backend(1) == "numba"              # no C route built by anyone yet
    plan.solver()
    assert plan.auto_backend(1) == "c" and plan.auto_backend(10 ** 6) == "numba"
    one = plan.solve(truth.q[0], truth.v[0], _one(readings, 0))
    assert rel_err(one.vector, plan.solve(truth.q[:1], truth.v[:1], {
        k: r[:1] for k, r in readings.items()}, backend="numba").vector[0]) <= 1e-12


def test_icub_one_sample_on_c_matches_dense_least_squares_and_berdy():
    """The BERDY setting of experiments/bench_estimation_single.py (fixed-base iCub, qdd + six
    F/T, l_foot wrench unknown, Sigma_D 1e-8, Sigma_y 1e-6, prior 1e4), one sample per call on
    C (its factor and substitutions partly as vector chains, backends/c_chain_pairs.py): the
    dense NumPy least-squares MAP (1e-10), the numba route (1e-12) and BERDY's contact wrench
    (1e-7, as test_estimation's BERDY comparison)."""
    from berdy_oracle import BerdyOracle
    from oracles import pin_model, robot_urdf
    from pin_sensors import PinTruth
    from sparsedyn import load_urdf
    from sparsedyn import sensors as S
    from sparsedyn.estimation import EstimationProblem
    from test_estimation_chains import _dense_map
    path = robot_urdf("icub")
    model = load_urdf(path)
    fts = [n for n in model.joint_frames if n.endswith("ft_sensor")]
    problem = EstimationProblem(model, [S.JointAccelerations()] + [S.ForceTorque(j) for j in fts],
                                unknown_wrenches=["l_foot"])
    cov = {"dynamics": 1e-8, "qdd": 1e-6, "prior": 1e4, **{j: 1e-6 for j in fts}}
    plan = compile_estimation(problem, method="map", covariances=cov, map_form="normal")
    truth = PinTruth.random(model, pin_model(path), np.random.default_rng(3), 4, ["l_foot"],
                            scale=10.0)
    readings = _readings(problem, truth)
    values, rhs, _, _ = problem.assemble(truth.q, truth.v, readings)
    var = np.r_[np.full(problem.n_dynamics_rows, 1e-8),
                np.full(problem.shape[0] - problem.n_dynamics_rows, 1e-6)]
    n = problem.shape[1]
    dense = _dense_map(problem, values, rhs, var, np.full(n, 1e4), np.zeros(n))
    numba = plan.solve(truth.q, truth.v, readings, backend="numba").vector
    oracle = BerdyOracle(path, floating_base=False, measurement_cov=1e-6, prior_cov=1e-8,
                         regularization_cov=1e4, unknown_wrench_links=["l_foot"])
    solve = plan.solver()
    for b in range(len(truth.q)):
        x = solve(truth.q[b], truth.v[b], _one(readings, b))
        assert solve.ok
        assert np.abs(x - dense[b]).max() <= 1e-10 * np.abs(dense[b]).max()
        assert rel_err(x, numba[b]) <= 1e-12
        out = oracle.estimate(truth.q[b], truth.v[b], readings["qdd"][b],
                              ft={j: -readings[j][b] for j in fts}, unknown_wrench_links=["l_foot"])
        assert rel_err(solve.estimate(x).wrench("l_foot"), out["ext_wrenches"]["l_foot"]) < 1e-7
