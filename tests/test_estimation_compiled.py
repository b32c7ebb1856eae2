"""The compiled online route of estimation (sensor rows in the assembly program, fused LU for the
exact route, fused normal equations + static-pivot LU for MAP / least squares) against the
PINOCCHIO ground truth (pin_sensors.PinTruth, as tests/test_estimation.py) and against the
reference route (backend="numpy": NumPy assembly, planner LU with splu fallback, CHOLMOD MAP) on
the humanoid (ankle F/T, joint accelerations, accelerometer) and iCub (its six F/T sensors);
batched, single, one and all threads; singular states still flagged; bad input."""
import numpy as np
import pytest

import sparsedyn as sd
from oracles import pin_model, rel_err, robot_urdf
from pin_sensors import PinTruth, robot_and_pin, singular_chain_setting, square_ankles_setting
from sparsedyn import sensors as S
from sparsedyn.estimation import EstimationProblem, SingularStateWarning, compile_estimation
from test_estimation import (FEET, TOL, _assert_truth, _overdetermined, _readings, _slippery,
                             row_variances)

SAME = 1e-12          # compiled against the reference route: same equations, other rounding
ICUB_LINKS = ["chest", "l_hand", "r_hand", "l_lower_leg", "r_lower_leg", "l_foot", "r_foot"]


def _icub_fts(model):
    return [n for n, f in model.joint_frames.items() if n.endswith("ft_sensor")]


def _both_routes(plan, truth, readings, threads=(1, 2)):
    """Compiled estimates (one per thread count) after checking them against the reference."""
    ref = plan.solve(truth.q, truth.v, readings, backend="numpy")
    out = []
    for th in threads:
        est = plan.solve(truth.q, truth.v, readings, backend="numba", threads=th)
        assert est.ok.tolist() == ref.ok.tolist()
        assert rel_err(est.vector, ref.vector) < SAME
        out.append(est)
    return out


def _single(plan, truth, readings, b):
    return plan.solve(truth.q[b], truth.v[b], {k: v[b] for k, v in readings.items()})


def test_humanoid_exact_compiled():
    model, problem, truth = square_ankles_setting(10, 9)
    links = FEET + ["chest"]
    plan = compile_estimation(problem)
    assert plan.method == "exact" and plan.backend == "numba"
    readings = _readings(problem, truth)
    for est in _both_routes(plan, truth, readings):
        _assert_truth(est, truth, links)
    one = _single(plan, truth, readings, 4)
    assert one["tau"].shape == (model.nv,) and rel_err(one["tau"], truth.tau[4]) < TOL
    assert rel_err(one.wrench("chest"), truth.f_ext["chest"][4]) < TOL


def test_humanoid_lstsq_compiled():
    """Ankle F/T + qdd + accelerometer (a bias quadratic in the body velocity) + gyroscope."""
    model, truth, problem = _overdetermined(B=7, seed=11)
    plan = compile_estimation(problem, method="lstsq")
    assert plan.backend == "numba"
    readings = _readings(problem, truth)
    for est in _both_routes(plan, truth, readings):
        _assert_truth(est, truth, FEET)
        assert np.abs(est.residual("imu_link_gyro")).max() < 1e-9
    one = _single(plan, truth, readings, 2)
    assert rel_err(one["tau"], truth.tau[2]) < TOL


def test_humanoid_map_compiled_matches_dense_numpy():
    """MAP with noisy readings: the dense NumPy posterior mean and covariance (as
    tests/test_estimation.py), and the reference route."""
    model, truth, problem = _overdetermined(B=6, seed=16)
    rng = np.random.default_rng(17)
    readings = {k: v + rng.normal(size=v.shape) * 0.05 for k, v in _readings(problem, truth).items()}
    cov = {"dynamics": 1e-6, "qdd": 1e-2, "l_foot_ft_sensor": 0.5, "r_foot_ft_sensor": 0.5,
           "imu_link_acc": 0.1, "prior": {"tau": 1e3, "fx": 1e4, "a": 1e2, "f": 1e4, "qdd": 1e2}}
    plan = compile_estimation(problem, method="map", covariances=cov)
    values, rhs, _, _ = problem.assemble(truth.q, truth.v, readings)
    A = problem.dense(values)
    var = row_variances(problem, cov)
    prior = np.concatenate([np.full(blk.size, cov["prior"][blk.kind])
                            for blk in problem.columns.blocks])
    tau_cols = np.concatenate([problem.columns[("tau", i)].indices for i in range(model.nbodies)])
    for est in _both_routes(plan, truth, readings):
        for b in range(A.shape[0]):
            P = np.diag(1 / prior) + A[b].T @ (A[b] / var[:, None])
            x_ref = np.linalg.solve(P, A[b].T @ (rhs[b] / var))
            assert rel_err(est.vector[b], x_ref) < 1e-7
            C_ref = np.linalg.inv(P)[np.ix_(tau_cols, tau_cols)]
            assert rel_err(est.covariance("tau")[b], C_ref) < 1e-7
    one = _single(plan, truth, readings, 2)
    assert rel_err(one["tau"], est["tau"][2]) < SAME


def test_icub_exact_compiled_with_its_six_ft_sensors():
    model, pm = robot_and_pin("icub")
    fts = _icub_fts(model)
    truth = PinTruth.random(model, pm, np.random.default_rng(12), 6, ICUB_LINKS, scale=10.0)
    problem = EstimationProblem(model, [S.JointAccelerations()] + [S.ForceTorque(j) for j in fts],
                                unknown_wrenches=ICUB_LINKS)
    plan = compile_estimation(problem)
    assert plan.method == "exact" and plan.backend == "numba"
    readings = _readings(problem, truth)
    for est in _both_routes(plan, truth, readings):
        _assert_truth(est, truth, ICUB_LINKS)
        for j in ("l_knee", "r_elbow"):
            assert rel_err(est["f", model.link_names[model.joint_index(j)]],
                           truth.joint_wrench(j)) < TOL
    one = _single(plan, truth, readings, 1)
    assert rel_err(one["tau"], truth.tau[1]) < TOL


def _icub_berdy_setting(seed, B):
    """Fixed-base iCub, joint accelerations + its F/T sensors, unknown l_foot wrench, BERDY's
    covariances (tests/test_estimation.py's BERDY comparison): (model, problem, truth, readings, cov)."""
    path = robot_urdf("icub")
    model = sd.load_urdf(path)
    fts = _icub_fts(model)
    problem = EstimationProblem(model, [S.JointAccelerations()] + [S.ForceTorque(j) for j in fts],
                                unknown_wrenches=["l_foot"])
    truth = PinTruth.random(model, pin_model(path), np.random.default_rng(seed), B, ["l_foot"], scale=10.0)
    cov = {"dynamics": 1e-8, "qdd": 1e-6, "prior": 1e4, **{j: 1e-6 for j in fts}}
    return model, problem, truth, _readings(problem, truth), cov


def test_icub_fixed_base_map_compiled():
    """The BERDY comparison's setting (tests/test_estimation.py) and weighted least squares on
    the compiled route."""
    model, problem, truth, readings, cov = _icub_berdy_setting(13, 5)
    est_map = _both_routes(compile_estimation(problem, method="map", covariances=cov), truth,
                           readings)[0]
    assert est_map.ok.all()        # (its distance to the truth is the prior's bias: BERDY test)
    # least squares through the normal equations (both routes) is ~4e-8 from the truth here: the
    # truth is checked on the exact route (above) and on the humanoid
    plan = compile_estimation(problem, method="lstsq")
    est = _both_routes(plan, truth, readings)[0]
    assert est.ok.all()
    one = _single(plan, truth, readings, 3)
    assert rel_err(one.vector, est.vector[3]) < SAME


def _flat_parallel_feet(**options):
    """Humanoid on a slippery floor, state 0 with both soles flat and parallel: (plan compiled
    with `options`, truth, readings, the compiled kernel's flags)."""
    model, pm = robot_and_pin("humanoid")
    truth = PinTruth.random(model, pm, np.random.default_rng(5), 4, FEET, tangential_free=FEET)
    q = truth.q.copy()
    q[0] = model.neutral_configuration()
    truth = PinTruth(model, pm, q, truth.v, truth.tau, truth.f_ext)
    problem = _slippery(model)
    plan = compile_estimation(problem, **options)
    readings = _readings(problem, truth)
    y = problem.rows.readings_vector(problem.check_readings(readings, 4), 4)
    _, flag = plan.compiled.run(truth.q, truth.v, y)
    return plan, truth, readings, flag


def _state_0_undetermined(plan, truth, readings):
    """plan.solve warns about state 0, names its undetermined foot wrenches and equals the
    reference route."""
    with pytest.warns(SingularStateWarning, match="batch indices \\[0\\]"):
        est = plan.solve(truth.q, truth.v, readings)
    assert est.ok.tolist() == [False, True, True, True]
    assert {"fx[l_sole]", "fx[r_sole]"} <= set(est.undetermined(0))
    ref = plan.solve(truth.q, truth.v, readings, backend="numpy")
    assert rel_err(est.vector, ref.vector) < SAME
    return est


@pytest.mark.parametrize("method", ["lstsq", "map"])
def test_compiled_map_flags_flat_parallel_feet(method):
    """Slippery floor with both soles flat and parallel (tests/test_estimation.py's states): the
    pivots of N flag state 0; the reference route then names the undetermined wrenches."""
    plan, truth, readings, flag = _flat_parallel_feet(method=method)
    assert (flag != 0).tolist() == [True, False, False, False]    # pivot breakdown or test
    est = _state_0_undetermined(plan, truth, readings)
    # (the default prior is uninformative: MAP is least squares on the determined states)
    assert rel_err(est["tau"][1:], truth.tau[1:]) < TOL


def test_compiled_exact_reports_singular_states():
    """Serial chain, six torques measured, unknown tip wrench: singular at q[0] = 0."""
    model, problem, truth = singular_chain_setting(15)
    plan = compile_estimation(problem)
    assert plan.backend == "numba"
    readings = {"qdd": truth.qdd, "tau": truth.tau}
    y = problem.rows.readings_vector(problem.check_readings(readings, 3), 3)
    _, _, broken = plan.compiled.run(truth.q, truth.v, y, full=True)
    assert broken.tolist() == [True, False, False]
    with pytest.warns(SingularStateWarning, match="NaN"):
        est = plan.solve(truth.q, truth.v, readings, on_singular="nan")
    assert est.ok.tolist() == [False, True, True]
    assert np.isnan(est.wrench("link6")[0]).all()
    assert rel_err(est.wrench("link6")[1:], truth.f_ext["link6"][1:]) < TOL
    with pytest.raises(sd.SingularModelError, match="batch indices \\[0\\]"):
        plan.solve(truth.q, truth.v, readings, on_singular="raise")


def test_compiled_route_bad_input():
    model, truth, problem = _overdetermined(B=2)
    plan = compile_estimation(problem)
    readings = _readings(problem, truth)
    with pytest.raises(ValueError, match="backend"):
        plan.solve(truth.q, truth.v, readings, backend="fortran")
    for backend in (None, "numpy", "numba"):                 # named on every route
        with pytest.raises(ValueError, match="threads"):
            plan.solve(truth.q, truth.v, readings, threads=0, backend=backend)
    with pytest.raises(KeyError, match="l_foot_ft_sensor"):
        plan.solve(truth.q, truth.v, {k: v for k, v in readings.items() if k != "l_foot_ft_sensor"})
    with pytest.raises(ValueError, match="r_foot_ft_sensor"):
        plan.solve(truth.q, truth.v, {**readings, "r_foot_ft_sensor": np.zeros((2, 5))})
    with pytest.raises(ValueError, match="v:"):
        plan.solve(truth.q, None, readings)
    with pytest.raises(ValueError, match="compiled"):
        compile_estimation(problem, compiled="yes")
    ref_only = compile_estimation(problem, compiled=False)
    assert ref_only.backend == "numpy"
    with pytest.raises(ValueError, match="no compiled route"):
        ref_only.solve(truth.q, truth.v, readings, backend="numba")


# ------------------------------------------------------------------ augmented (quasi-definite) form

def _dense_map(problem, values, rhs, var, prior):
    """Dense NumPy posterior mean (independent of both compiled forms and of CHOLMOD)."""
    A = problem.dense(values)
    out = np.empty((A.shape[0], problem.shape[1]))
    for b in range(A.shape[0]):
        P = np.diag(1 / prior) + A[b].T @ (A[b] / var[:, None])
        out[b] = np.linalg.solve(P, A[b].T @ (rhs[b] / var))
    return out


@pytest.mark.parametrize("cov", [{"dynamics": 1e-8, "prior": 1e4}, {"dynamics": 1e-6, "prior": 1e6}])
def test_humanoid_map_augmented_matches_dense_numpy(cov):
    """map_form="augmented" with noisy Pinocchio readings: the dense MAP posterior mean, the
    reference route (CHOLMOD), the normal form, batched / single / one and two threads. (The
    augmented form needs a proper prior: the default one is uninformative, test_estimation_trust.)"""
    model, truth, problem = _overdetermined(B=6, seed=18)
    rng = np.random.default_rng(19)
    readings = {k: v + rng.normal(size=v.shape) * 0.05 for k, v in _readings(problem, truth).items()}
    plan = compile_estimation(problem, method="map", covariances=cov, map_form="augmented")
    assert plan.stats["map_form"] == "augmented" and plan.stats["map_cost_normal"] == -1
    assert plan.stats["compiled_K_n"] == sum(problem.shape)
    values, rhs, _, _ = problem.assemble(truth.q, truth.v, readings)
    c = cov or {}
    var = row_variances(problem, c, dynamics=1e-8)
    x_ref = _dense_map(problem, values, rhs, var, np.full(problem.shape[1], c.get("prior", 1e4)))
    normal = compile_estimation(problem, method="map", covariances=cov, map_form="normal")
    x_normal = normal.solve(truth.q, truth.v, readings).vector
    for est in _both_routes(plan, truth, readings):
        assert est.ok.all()
        assert rel_err(est.vector, x_ref) < 1e-10
        assert rel_err(est.vector, x_normal) < SAME
    one = _single(plan, truth, readings, 3)
    assert rel_err(one.vector, est.vector[3]) < SAME


def test_icub_map_augmented_in_the_berdy_setting():
    """BERDY's covariances on fixed-base iCub (test_icub_fixed_base_map_compiled): the augmented
    form against the dense posterior mean and the reference route; "auto" keeps the form with
    fewer counted flops."""
    model, problem, truth, readings, cov = _icub_berdy_setting(20, 3)
    plan = compile_estimation(problem, method="map", covariances=cov, map_form="augmented")
    values, rhs, _, _ = problem.assemble(truth.q, truth.v, readings)
    var = np.full(problem.shape[0], 1e-8)
    var[problem.n_dynamics_rows:] = 1e-6
    x_ref = _dense_map(problem, values, rhs, var, np.full(problem.shape[1], 1e4))
    for est in _both_routes(plan, truth, readings):
        assert est.ok.all()
        assert rel_err(est.vector, x_ref) < 1e-10
    auto = compile_estimation(problem, method="map", covariances=cov)
    st = auto.stats
    costs = {f: st["map_cost_" + f] for f in ("normal", "augmented")}
    assert min(costs.values()) > 0 and st["map_form"] == min(costs, key=costs.get)
    assert st["map_cost_augmented"] == plan.stats["map_cost_augmented"]


def test_compiled_map_augmented_flags_flat_parallel_feet():
    """The flat-parallel-feet state (test_compiled_map_flags_flat_parallel_feet) on the augmented
    form: its probe flags state 0 only; the reference route names the undetermined wrenches."""
    plan, truth, readings, flag = _flat_parallel_feet(method="map", map_form="augmented",
                                                      covariances={"prior": 1e4})
    assert flag.tolist() == [2, 0, 0, 0]
    _state_0_undetermined(plan, truth, readings)


def test_map_form_bad_input_and_unavailable():
    """A bad map_form names the argument; least squares (a 1e-15 ridge as the prior) and a prior
    comparable to the likelihood make the augmented form unusable: a typed error naming
    map_form, and "auto" falls back to the normal form."""
    from sparsedyn.estimation.compiled_augmented import AugmentedUnavailable
    model, truth, problem = _overdetermined(B=2)
    with pytest.raises(ValueError, match="map_form"):
        compile_estimation(problem, method="map", map_form="kkt")
    with pytest.raises(AugmentedUnavailable, match="map_form"):
        compile_estimation(problem, method="lstsq", map_form="augmented")
    strong = {"l_foot_ft_sensor": 0.5, "r_foot_ft_sensor": 0.5, "prior": 1e2}
    with pytest.raises(AugmentedUnavailable, match="map_form"):
        compile_estimation(problem, method="map", covariances=strong, map_form="augmented")
    st = compile_estimation(problem, method="lstsq").stats
    assert st["map_form"] == "normal" and st["map_cost_augmented"] == -1


def _icub_walking_berdy_variances(T):
    """Floating-base iCub walking at BERDY's variances (experiments/walking_estimation.py's log,
    T samples, no noise): (problem, per-sample plan, checked q, v, readings vector, its
    SampleData, the per-sample contacts, readings)."""
    import walking_estimation as W
    from pin_sensors import moderate_icub_state
    from test_floating_base_estimation import _readings_fb
    contacts = W.gait(T)
    model, truth = moderate_icub_state(np.random.default_rng(0), T, W.FEET, contacts)
    fts = [n for n in model.joint_frames if n.endswith("ft_sensor")]
    problem = EstimationProblem(
        model, [S.JointAccelerations(base=False)] + [S.ForceTorque(j) for j in fts]
        + [S.Accelerometer("base_link"), S.AngularAccelerometer("base_link")],
        unknown_wrenches=W.FEET)
    cov = {"dynamics": 1e-8, "base_unactuated": 1e-8, "prior": 1e4, "qdd": W.QDD_STD ** 2,
           **{j: W.FT_STD ** 2 for j in fts}, "base_link_acc": W.ACC_STD ** 2,
           "base_link_angacc": W.ANGACC_STD ** 2}
    plan = compile_estimation(problem, method="map", covariances=cov, per_sample=True)
    readings = _readings_fb(problem, truth)
    q, v = problem.floating_base_state(truth.q[:, 7:], truth.v[:, 6:], truth.v[:, 3:6])
    y = problem.rows.readings_vector(problem.check_readings(readings, T), T)
    return problem, plan, q, v, y, plan.sample_data(contacts, None, T), contacts, readings


def test_poorly_conditioned_walking_states_stay_on_the_compiled_route():
    """BERDY's variances (dynamics rows 1e8 times more precise than the F/T sensors) put the
    walking log's states below solve_map.WELL_CONDITIONED, where the probe's first step
    responds: its second step accepts them (determined, eigenvalues ~1e-9..1e-8), and the
    twice-refined normal equations equal the reference's augmented solve, on numba and C."""
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "experiments"))
    from sparsedyn.estimation.solve_map import WELL_CONDITIONED
    T = 8
    problem, plan, q, v, y, sample, contacts, readings = _icub_walking_berdy_variances(T)
    ref = plan.reference
    values, rhs, _, _ = problem.assemble(q, v, problem.check_readings(readings, T))
    x_ref, ok_ref, _, _ = ref.solve(values, rhs, sample)
    lam = ref.identifiability(ref.scaled(values, None, sample)[0], np.ones(ref.normal.m),
                              ~sample.active)[2]
    assert ok_ref.all() and (lam < WELL_CONDITIONED).any()       # the regime this is about
    for backend in ("numba", "c"):
        x, flag = plan.route(backend).run(q, v, y, sample=sample)
        assert (np.asarray(flag) == 0).all(), backend
        assert rel_err(x, x_ref) < 1e-10, backend
    est = plan.solve(q, v, readings, contacts=contacts)
    assert est.ok.all() and rel_err(est.vector, x_ref) < 1e-10


def test_second_step_still_flags_undetermined_states_at_berdy_variances():
    """Flat parallel feet on a slippery floor (state 0 undetermined) with BERDY's variances: the
    probe's second step is allowed on every state (weak prior) and still flags state 0."""
    cov = {"dynamics": 1e-8, "prior": 1e4}
    plan, truth, readings, flag = _flat_parallel_feet(method="map", covariances=cov)
    assert (plan.compiled._static_tests[5] >= 0).all()          # the second step may accept
    assert (flag != 0).tolist() == [True, False, False, False]
    _state_0_undetermined(plan, truth, readings)
    # without the pivot test, the probe's second step alone still flags state 0
    route = plan.compiled
    model, xr, dest, chains, slots = route._bound
    route._bound = (model, xr, dest, chains, slots._replace(sing_tol=-np.inf))
    y = plan.problem.rows.readings_vector(plan.problem.check_readings(readings, 4), 4)
    assert (np.asarray(route.run(truth.q, truth.v, y)[1]) != 0).tolist() == [True, False,
                                                                            False, False]
