"""Estimation never says ok on an answer the data do not determine, and never returns a
non-finite number (issue #16, "Trust"). Ground truth and readings from PINOCCHIO (pin_sensors),
cross-checked against sparsedyn.sensors.ground_truth + simulate; estimates against the truth and
dense NumPy (np.linalg.lstsq / solve on the stacked [D; D_Y]); identifiability against the dense
SVD of the column-equilibrated system. Every route: exact / lstsq / map (normal and augmented
forms), compiled ("numba") and reference ("numpy")."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from oracles import rel_err
from pin_sensors import PinTruth, robot_and_pin
from sparsedyn import sensors as S
from sparsedyn.errors import NonFiniteError, SingularModelError
from sparsedyn.estimation import EstimationProblem, SingularStateWarning, compile_estimation
from sparsedyn.models import serial_chain
from test_estimation import _readings, row_variances

ROUTES = [(m, b) for m in ("exact", "lstsq", "map") for b in ("numba", "numpy")]
RIGHT_LEG = ["r_hip_yaw", "r_hip_roll", "r_hip_pitch", "r_knee", "r_ankle_pitch", "r_ankle_roll"]


def _pin_readings(problem, truth):
    """Pinocchio readings of every sensor (test_estimation._readings plus joint torques)."""
    out = _readings(problem, truth)
    model = problem.model
    for s in problem.sensors:
        if isinstance(s, S.JointTorques):
            names = s.joints or list(model.joint_names)
            out[s.name] = np.concatenate(
                [truth.tau[:, model.v_slice(model.joint_index(j))] for j in names], axis=1)
    return out


def _check_simulated(problem, truth, readings):
    """sparsedyn's own simulation of the readings agrees with Pinocchio's."""
    model = problem.model
    gt = S.ground_truth(model, truth.q, truth.v, truth.qdd, f_ext=truth.f_ext)
    for s in problem.sensors:
        assert rel_err(s.simulate(model, truth.q, truth.v, gt), readings[s.name]) < 1e-8, s.name


def _equilibrated_lambda(problem, values, weights=None):
    """Smallest squared singular value of W^1/2 A with unit columns (dense SVD), per state."""
    out = []
    for A in problem.dense(values):
        if weights is not None:
            A = A * np.sqrt(weights)[:, None]
        A = A / np.maximum(np.linalg.norm(A, axis=0), 1e-300)
        out.append(np.linalg.svd(A, compute_uv=False)[-1] ** 2)
    return np.array(out)


def _solve(plan, q, v, readings, backend, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SingularStateWarning)
        return plan.solve(q, v, readings, backend=backend, **kw)


# ------------------------------------------------------------------ square, near a singular state

def test_exact_route_flags_a_nearly_stretched_knee():
    """Left ankle F/T + right-leg joint torques + qdd + unactuated base, unknown wrenches on both
    soles and the chest: square. The right sole's wrench comes from J^T f = tau of the right leg,
    singular with the knee stretched (hip, knee and ankle pitch axes coplanar). With the knee
    within 1e-5 rad of 0 (equilibrated sigma_min <= 1.5e-7) every route must say not ok, as the
    dense SVD does; the exact route used to say ok and, with 1e-4 noise on the readings, return
    sole wrenches off by up to 1e6 N. The other states match the truth and dense NumPy."""
    model, pm = robot_and_pin("humanoid")
    links = ["l_sole", "r_sole", "chest"]
    problem = EstimationProblem(model, [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor"),
                                        S.JointTorques(RIGHT_LEG, name="tau_rleg")],
                                unknown_wrenches=links)
    assert problem.shape[0] == problem.shape[1]
    rng = np.random.default_rng(21)
    truth = PinTruth.random(model, pm, rng, 7, links)
    knee = np.array([0.0, 1e-9, -1e-7, 1e-5, 0.05, -0.4, np.nan])
    q = truth.q.copy()
    q[:6, model.q_slice(model.joint_index("r_knee"))] = knee[:6, None]
    truth = PinTruth(model, pm, q, truth.v, truth.tau, truth.f_ext)
    clean = _pin_readings(problem, truth)
    _check_simulated(problem, truth, clean)
    noisy = {k: r + rng.normal(size=r.shape) * 1e-4 for k, r in clean.items()}
    values, rhs, _, _ = problem.assemble(truth.q, truth.v, noisy)
    lam = _equilibrated_lambda(problem, values)
    determined = np.array([False] * 4 + [True] * 3)
    assert (lam[~determined] < 1e-13).all() and (lam[determined] > 1e-10).all()
    dense = np.array([np.linalg.solve(A, r) for A, r in zip(problem.dense(values), rhs)])
    for method, backend in ROUTES:
        plan = compile_estimation(problem, method=method)
        for readings in (clean, noisy):
            est = _solve(plan, truth.q, truth.v, readings, backend, on_singular="nan")
            assert est.ok.tolist() == determined.tolist(), (method, backend)
            assert {"fx[r_sole]", "fx[chest]"} <= set(est.undetermined(0))
            if method == "exact":
                assert np.isnan(est.vector[~determined]).all()
            assert np.isfinite(est.vector[determined]).all()
        ok = determined
        assert rel_err(est.vector[ok], dense[ok]) < 1e-8, (method, backend)
        est = _solve(plan, truth.q, truth.v, clean, backend)
        for link in links:
            assert rel_err(est.wrench(link)[ok], truth.f_ext[link][ok]) < 1e-8, (method, link)
        assert np.isfinite(est.vector).all()       # on_singular="map": prior-regularised


def test_exact_route_answers_as_least_squares_near_a_stretched_chain():
    """A 6-link chain, qdd and all torques measured, unknown tip wrench: singular at q = 0, with a
    smallest equilibrated singular value ~|q|^2. Every route, both backends, says ok exactly where
    the dense SVD puts it above 1e-6 (states within 4x of that threshold excepted), including
    the states whose static LU pivots (~|q|) look healthy; the augmented MAP form too."""
    model = serial_chain(6)
    problem = EstimationProblem(model, [S.JointAccelerations(), S.JointTorques()],
                                unknown_wrenches=["link6"])
    rng = np.random.default_rng(22)
    B = 24
    q = model.random_configuration(rng, batch=B) * np.logspace(-6, 0, B)[:, None]
    v = rng.normal(size=(B, model.nv))
    readings = {"qdd": rng.normal(size=(B, model.nv)), "tau": rng.normal(size=(B, model.nv))}
    values, rhs, _, _ = problem.assemble(q, v, readings)
    lam = _equilibrated_lambda(problem, values)
    clear = np.abs(np.log10(lam / 1e-12)) > np.log10(16.0)
    assert (~clear).sum() <= 3 and (lam < 1e-12).sum() >= 8 and (lam > 1e-12).sum() >= 8
    dense = np.array([np.linalg.solve(A, r) for A, r in zip(problem.dense(values), rhs)])
    plans = [(m, b, compile_estimation(problem, method=m)) for m, b in ROUTES]
    plans += [("map augmented", b, compile_estimation(problem, method="map", map_form="augmented",
                                                      covariances={"prior": 1e4}))
              for b in ("numba", "numpy")]
    for method, backend, plan in plans:
        est = _solve(plan, q, v, readings, backend)
        assert (est.ok[clear] == (lam[clear] >= 1e-12)).all(), (method, backend)
        assert np.isfinite(est.vector).all()
        if method != "map augmented":
            good = est.ok
            assert rel_err(est.vector[good], dense[good]) < 1e-7, (method, backend)


# ------------------------------------------------------------------ MAP's default prior

def _quadruped():
    """solo12, qdd + joint torques + unactuated base, unknown wrenches on two feet."""
    model, pm = robot_and_pin("solo12")
    feet = ["FL_FOOT", "FR_FOOT"]
    problem = EstimationProblem(model, [S.JointAccelerations(), S.JointTorques()],
                                unknown_wrenches=feet)
    return model, pm, feet, problem


def test_map_default_prior_does_not_bias_an_identifiable_quadruped():
    """`--method map` without covariances on solo12: every state is identifiable (dense SVD), so
    every route must say ok and give the least-squares estimate (dense np.linalg.lstsq on the
    stacked system) to 1e-6, noise-free (the Pinocchio truth) and with noisy readings. The
    default prior (variance 1e4 on every variable) used to bias the feet by up to 0.7 N while
    least squares was within 2e-7."""
    model, pm, feet, problem = _quadruped()
    rng = np.random.default_rng(23)
    truth = PinTruth.random(model, pm, rng, 10, feet, scale=10.0)
    clean = _pin_readings(problem, truth)
    _check_simulated(problem, truth, clean)
    noisy = {k: r + rng.normal(size=r.shape) * 1e-2 for k, r in clean.items()}
    for readings in (clean, noisy):
        values, rhs, _, _ = problem.assemble(truth.q, truth.v, readings)
        assert (_equilibrated_lambda(problem, values) > 1e-10).all()
        ls = np.array([np.linalg.lstsq(A, r, rcond=None)[0]
                       for A, r in zip(problem.dense(values), rhs)])
        for method in ("map", "lstsq"):
            plan = compile_estimation(problem, method=method)
            for backend in ("numba", "numpy"):
                est = _solve(plan, truth.q, truth.v, readings, backend)
                assert est.ok.all(), (method, backend)
                assert rel_err(est.vector, ls) < 1e-6, (method, backend)
                if readings is clean:
                    for foot in feet:
                        assert rel_err(est.wrench(foot), truth.f_ext[foot]) < 1e-6


def test_map_prior_on_some_kinds_only_is_the_dense_posterior():
    """A prior given for the torques only: the other variables keep the uninformative default,
    so the estimate is the dense MAP with a prior on the torques alone (both backends)."""
    model, pm, feet, problem = _quadruped()
    rng = np.random.default_rng(24)
    truth = PinTruth.random(model, pm, rng, 4, feet, scale=10.0)
    readings = {k: r + rng.normal(size=r.shape) * 0.05
                for k, r in _pin_readings(problem, truth).items()}
    cov = {"dynamics": 1e-6, "prior": {"tau": 1e-1}}
    plan = compile_estimation(problem, method="map", covariances=cov)
    values, rhs, _, _ = problem.assemble(truth.q, truth.v, readings)
    var = row_variances(problem, cov)
    p = np.zeros(problem.shape[1])
    for blk in problem.columns.blocks:
        if blk.kind == "tau":
            p[blk.slice] = 1 / 1e-1
    ref = np.array([np.linalg.solve(np.diag(p) + A.T @ (A / var[:, None]), A.T @ (r / var))
                    for A, r in zip(problem.dense(values), rhs)])
    ls = np.array([np.linalg.lstsq(A, r, rcond=None)[0] for A, r in
                   zip(problem.dense(values), rhs)])
    tau = p > 0
    assert rel_err(ref[:, tau], ls[:, tau]) > 1e-3                     # the prior acts
    for backend in ("numba", "numpy"):
        est = _solve(plan, truth.q, truth.v, readings, backend)
        assert est.ok.all() and rel_err(est.vector, ref) < 1e-8, backend
    with pytest.raises(KeyError, match="torque"):
        compile_estimation(problem, method="map", covariances={"prior": {"torque": 1.0}})


def test_map_estimate_and_status_do_not_depend_on_the_scale_of_the_variances():
    """Multiplying every variance by 2^40 (exact in floating point) changes neither the estimate
    nor ok (the default prior and the identifiability test are relative to the data, not
    absolute numbers); and without covariances MAP is least squares."""
    model = serial_chain(6)
    problem = EstimationProblem(model, [S.JointAccelerations(), S.JointTorques()],
                                unknown_wrenches=["link6"])
    rng = np.random.default_rng(25)
    q = model.random_configuration(rng, batch=6) * np.array([1e-6, 1e-5, 1, 1, 1, 1])[:, None]
    v = rng.normal(size=(6, model.nv))
    readings = {"qdd": rng.normal(size=(6, model.nv)), "tau": rng.normal(size=(6, model.nv))}
    cov = {"dynamics": 1e-8, "qdd": 1e-4, "tau": 1e-3}
    ests = [_solve(compile_estimation(problem, method="map", covariances=c), q, v, readings,
                   "numba") for c in (cov, {k: x * 2.0 ** 40 for k, x in cov.items()})]
    assert ests[0].ok.tolist() == ests[1].ok.tolist() == [False, False, True, True, True, True]
    assert rel_err(ests[0].vector, ests[1].vector) < 1e-12
    ls = _solve(compile_estimation(problem, method="lstsq"), q, v, readings, "numba")
    default = _solve(compile_estimation(problem, method="map"), q, v, readings, "numba")
    assert default.ok.tolist() == ls.ok.tolist()
    assert rel_err(default.vector[2:], ls.vector[2:]) < 1e-10


def test_default_prior_needs_the_normal_form_and_bounds_no_covariance():
    """The augmented form needs a proper prior (typed error naming map_form); the posterior
    covariance of an undetermined state without a prior is unbounded: an error naming it."""
    from sparsedyn.estimation.compiled_augmented import AugmentedUnavailable
    model = serial_chain(6)
    problem = EstimationProblem(model, [S.JointAccelerations(), S.JointTorques()],
                                unknown_wrenches=["link6"])
    with pytest.raises(AugmentedUnavailable, match="map_form"):
        compile_estimation(problem, method="map", map_form="augmented")
    assert compile_estimation(problem, method="map").stats["map_form"] == "normal"
    rng = np.random.default_rng(26)
    q = model.random_configuration(rng, batch=2)
    q[0] = 0.0
    v = rng.normal(size=(2, model.nv))
    readings = {"qdd": rng.normal(size=(2, model.nv)), "tau": rng.normal(size=(2, model.nv))}
    est = _solve(compile_estimation(problem, method="map"), q, v, readings, "numba")
    assert est.ok.tolist() == [False, True]
    with pytest.raises(SingularModelError, match="batch index 0"):
        est.covariance("tau")
    one = _solve(compile_estimation(problem, method="map"), q[1], v[1],
                 {k: r[1] for k, r in readings.items()}, "numba")
    assert one.ok and np.isfinite(one.covariance("fx", "link6")).all()


def test_map_lu_backend_flags_an_undetermined_state_instead_of_raising():
    """map_backend="lu" (the planner's static LU of the normal matrix): an undetermined state
    (the chain stretched, q = 0) is flagged and prior-regularised like on CHOLMOD, not an error;
    the determined one is the CHOLMOD route's estimate."""
    model = serial_chain(6)
    problem = EstimationProblem(model, [S.JointAccelerations(), S.JointTorques()],
                                unknown_wrenches=["link6"])
    rng = np.random.default_rng(28)
    q = model.random_configuration(rng, batch=2)
    q[0] = 0.0
    v = rng.normal(size=(2, model.nv))
    readings = {"qdd": rng.normal(size=(2, model.nv)), "tau": rng.normal(size=(2, model.nv))}
    for method in ("lstsq", "map"):
        lu = _solve(compile_estimation(problem, method=method, map_backend="lu", compiled=False),
                    q, v, readings, "numpy")
        chol = _solve(compile_estimation(problem, method=method, compiled=False), q, v, readings,
                      "numpy")
        assert lu.ok.tolist() == chol.ok.tolist() == [False, True]
        assert "fx[link6]" in lu.undetermined(0) and np.isfinite(lu.vector).all()
        assert rel_err(lu.vector[1], chol.vector[1]) < 1e-10


# ------------------------------------------------------------------ inputs that overflow

def _chain_problems():
    model = serial_chain(6)
    square = EstimationProblem(model, [S.JointAccelerations(), S.JointTorques()],
                               unknown_wrenches=["link6"])
    over = EstimationProblem(model, [S.JointAccelerations(), S.JointTorques(),
                                     S.ExternalWrench("link6")])
    return model, square, over


@pytest.mark.parametrize("method,backend",
                         ROUTES + [("augmented", "numba"), ("augmented", "numpy")])
def test_overflowing_inputs_raise_on_every_route(method, backend):
    """Velocities of 1e155 square to inf: a NonFiniteError naming the batch element and v (the
    largest input there), on every route, for a batch and a single state; no NaN with ok True,
    no stray RuntimeWarning. (It used to return NaN with ok True, or a ValueError naming the
    wrong batch index.)"""
    model, square, over = _chain_problems()
    rng = np.random.default_rng(27)
    for problem in (square, over):
        if method == "exact" and problem is over:
            continue
        opts = ({"method": "map", "map_form": "augmented", "covariances": {"prior": 1e4}}
                if method == "augmented" else {"method": method})
        plan = compile_estimation(problem, **opts)
        q = model.random_configuration(rng, batch=3)
        v = rng.normal(size=(3, model.nv))
        readings = {s.name: rng.normal(size=(3, s.size)) for s in problem.sensors}
        assert np.isfinite(plan.solve(q, v, readings, backend=backend).vector).all()
        v[1] *= 1e155
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            with pytest.raises(NonFiniteError, match="batch indices \\[1\\]") as info:
                plan.solve(q, v, readings, backend=backend)
            assert info.value.batch_indices == (1,) and info.value.arguments[0] == "v"
            with pytest.raises(NonFiniteError, match="batch indices \\[0\\]"):
                plan.solve(q[1], v[1], {k: r[1] for k, r in readings.items()}, backend=backend)


# ------------------------------------------------------------------ the singularity test itself

def test_cholesky_singularity_test_is_relative_to_the_diagonal():
    """SparseCholesky refuses a (numerically) singular matrix whatever the units of its
    variables, and accepts a well-conditioned one whose variables have very different scales
    (diag(1e-20, 1) used to be called singular)."""
    from sparsedyn.kernels import SparseCholesky
    pattern = sp.csc_matrix(np.ones((2, 2)))
    chol = SparseCholesky(pattern)
    s = np.array([1e-10, 1.0])
    good = (np.array([[2.0, 1.0], [1.0, 2.0]]) * np.outer(s, s)).ravel(order="F")
    x = chol.factor(good).solve(np.array([1.0, 1.0]))
    assert rel_err(x, np.linalg.solve(good.reshape(2, 2, order="F"), [1.0, 1.0])) < 1e-12
    bad = (np.array([[1.0, 1.0], [1.0, 1.0 + 1e-15]]) * np.outer(s, s)).ravel(order="F")
    with pytest.raises(SingularModelError):
        chol.factor(bad)


def test_posterior_covariance_of_a_merged_link_is_in_that_links_frame():
    """est.covariance("fx", "l_sole") is the covariance of est["fx", "l_sole"], which lives in
    the frame of l_sole (merged into the body of l_foot): A C_foot A^T with A Pinocchio's force
    transform from l_foot to l_sole (linear-first both sides), not C_foot relabelled."""
    import sparsedyn as sd
    from oracles import pin, pin_model
    from sparsedyn import sensors as S
    from sparsedyn.models import HUMANOID_URDF, humanoid
    model = humanoid()
    sensors = [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor"),
               S.ForceTorque("r_foot_ft_sensor")]
    problem = sd.EstimationProblem(model, sensors, unknown_wrenches=["l_sole", "r_sole"])
    plan = sd.compile_estimation(problem, method="map")
    rng = np.random.default_rng(5)
    q = model.random_configuration(rng, batch=2)
    v, a = rng.normal(size=(2, 2, model.nv))
    truth = S.ground_truth(model, q, v, a)
    est = plan.solve(q, v, {s.name: s.simulate(model, q, v, truth) for s in sensors})
    C_sole = est.covariance("fx", "l_sole")
    pmodel = pin_model(HUMANOID_URDF, True)
    sole = pmodel.frames[pmodel.getFrameId("l_sole")]
    foot_link = model.link_names[model.frames["l_sole"].body]
    foot = pmodel.frames[pmodel.getFrameId(foot_link)]
    rel = foot.placement.actInv(sole.placement)             # l_sole in l_foot's frame
    A = np.column_stack([rel.actInv(pin.Force(e)).vector for e in np.eye(6)])
    C_body = est.covariance("fx", foot_link)
    assert not np.allclose(rel.homogeneous, np.eye(4))
    for b in range(2):
        assert np.abs(C_sole[b] - A @ C_body[b] @ A.T).max() <= 1e-9 * np.abs(C_sole[b]).max()


# ------------------------------------------------------------------ identifiability vs weights

RATIOS = [1e-12, 1e-8, 1e-4, 1.0, 1e4, 1e8, 1e12]


def _dense_map(A, r, var, cols):
    """Weighted least squares from the dense augmented system K = [[Sigma, A], [A^T, 0]] with
    partial pivoting (NumPy's LU), accurate at any weight ratio: (estimate, posterior
    covariance of the columns `cols`: minus that block of K^-1)."""
    m, n = A.shape
    K = np.block([[np.diag(var), A], [A.T, np.zeros((n, n))]])
    E = np.zeros((m + n, len(cols)))
    E[m + cols, np.arange(len(cols))] = 1.0
    X = np.linalg.solve(K, np.column_stack([np.concatenate([r, np.zeros(n)]), E]))
    return X[m:, 0], -X[m + cols, 1:]


def test_map_is_determined_and_accurate_at_every_variance_ratio():
    """Both ankle F/T, IMU and joint accelerations on the humanoid: the data determine the state
    whatever the (positive) weights, so with sensor variances 1e-12..1e12 times the dynamics'
    every route says ok and gives the weighted least-squares estimate and its posterior
    covariance (dense augmented oracle) and, on clean readings, Pinocchio's truth; routes agree. Per-sample covariances on one
    per-sample plan, and the plan's own covariances at the extremes."""
    model, pm = robot_and_pin("humanoid")
    links = ["l_sole", "r_sole"]
    truth = PinTruth.random(model, pm, np.random.default_rng(3), 2, links)
    problem = EstimationProblem(model, [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor"),
                                        S.ForceTorque("r_foot_ft_sensor"),
                                        S.Accelerometer("imu_link"), S.Gyroscope("imu_link")],
                                unknown_wrenches=links)
    clean = _readings(problem, truth)
    rng = np.random.default_rng(4)
    noisy = {k: v + rng.normal(size=v.shape) * 0.05 for k, v in clean.items()}
    values, rhs, _, _ = problem.assemble(truth.q, truth.v, noisy)
    dense = problem.dense(values)
    unit = dense / np.linalg.norm(dense, axis=1, keepdims=True)
    assert all(np.linalg.svd(a / np.linalg.norm(a, axis=0), compute_uv=False)[-1] > 1e-3
               for a in unit)                                 # determined, whatever the weights
    sensors = [s.name for s in problem.sensors if s.default_reading is None]
    per_sample = compile_estimation(problem, method="map", per_sample=True)
    tau_cols = np.concatenate([problem.columns[("tau", i)].indices for i in range(model.nbodies)])
    for ratio in RATIOS:
        cov = {"dynamics": 1e-6, **{name: 1e-6 * ratio for name in sensors}}
        var = row_variances(problem, cov)
        oracle = [_dense_map(A, r, var, tau_cols) for A, r in zip(dense, rhs)]
        ref, ref_cov = (np.array([o[k] for o in oracle]) for k in (0, 1))
        plans = [(per_sample, {"covariances": cov})]
        if ratio in (RATIOS[0], RATIOS[-1]):
            plans.append((compile_estimation(problem, method="map", covariances=cov), {}))
        for plan, kw in plans:
            for backend in ("numba", "numpy"):
                est = _solve(plan, truth.q, truth.v, noisy, backend, **kw)
                assert est.ok.all(), (ratio, backend)
                assert rel_err(est.vector, ref) < 1e-8, (ratio, backend)
                assert rel_err(est.covariance("tau"), ref_cov) < 1e-8, (ratio, backend)
                est = _solve(plan, truth.q, truth.v, clean, backend, **kw)
                assert rel_err(est["tau"], truth.tau) < 1e-8, (ratio, backend)
                for link in links:
                    assert rel_err(est.wrench(link), truth.f_ext[link]) < 1e-8, (ratio, link)


def test_an_undetermined_state_stays_flagged_at_every_variance_ratio():
    """A 6-link chain with qdd and all torques measured and an unknown tip wrench is singular
    near q = 0 (tests above): whatever the ratio of sensor to dynamics variances, the states
    the dense SVD calls singular are not ok and the others are, on both backends."""
    model = serial_chain(6)
    problem = EstimationProblem(model, [S.JointAccelerations(), S.JointTorques()],
                                unknown_wrenches=["link6"])
    rng = np.random.default_rng(23)
    q = model.random_configuration(rng, batch=4) * np.array([1e-9, 1e-8, 0.5, 1.0])[:, None]
    v = rng.normal(size=(4, model.nv))
    readings = {"qdd": rng.normal(size=(4, model.nv)), "tau": rng.normal(size=(4, model.nv))}
    lam = _equilibrated_lambda(problem, problem.assemble(q, v, readings)[0])
    assert (lam[:2] < 1e-20).all() and (lam[2:] > 1e-8).all()
    plan = compile_estimation(problem, method="map", per_sample=True)
    for ratio in RATIOS:
        cov = {"dynamics": 1e-6, "qdd": 1e-6 * ratio, "tau": 1e-6 * ratio}
        for backend in ("numba", "numpy"):
            est = _solve(plan, q, v, readings, backend, covariances=cov)
            assert est.ok.tolist() == [False, False, True, True], (ratio, backend)
            assert np.isfinite(est.vector).all()
            assert est.undetermined(0) and not est.undetermined(2)
