"""The per-sample consistency check (issue #17 item 2): the chi-square of the weighted residual
of [D; D_Y] at the estimate, with the readings' noise drawn at the covariances the plan is
told, is chi-square distributed; a reading with the wrong sign is not (p ~ 0) and the sensor's
own residual shows it. Oracle: Pinocchio's truth plus NumPy noise, scipy's chi2 law."""

import numpy as np
import pytest
from scipy.stats import chi2 as chi2_dist

from pin_sensors import PinTruth, robot_and_pin, square_ankles_setting
from sparsedyn import sensors as S
from sparsedyn.estimation import EstimationProblem, compile_estimation
from test_estimation import _readings

FEET = ["l_sole", "r_sole"]
VAR = {"qdd": 1e-4, "l_foot_ft_sensor": 1e-2, "r_foot_ft_sensor": 1e-2}


@pytest.fixture(scope="module")
def noisy():
    model, pm = robot_and_pin("humanoid")
    B = 200
    truth = PinTruth.random(model, pm, np.random.default_rng(11), B, FEET)
    sensors = [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor"),
               S.ForceTorque("r_foot_ft_sensor")]
    problem = EstimationProblem(model, sensors, unknown_wrenches=FEET)
    plan = compile_estimation(problem, method="map", covariances={"dynamics": 1e-10, **VAR})
    rng = np.random.default_rng(12)
    readings = {k: r + rng.normal(size=r.shape) * np.sqrt(VAR[k]) if k in VAR else r
                for k, r in _readings(problem, truth).items()}
    return truth, problem, plan, readings


def test_chi2_of_consistent_readings_follows_its_law(noisy):
    truth, problem, plan, readings = noisy
    est = plan.solve(truth.q, truth.v, readings)
    chi2, dof, p = est.consistency()
    m, n = problem.shape
    assert dof == m - n == 6          # the base's six rows against the two feet's F/T
    # 200 samples of chi2(6): mean 6 +- 0.25, and no sample below p = 1e-6
    assert abs(chi2.mean() - dof) < 4 * np.sqrt(2 * dof / len(chi2))
    assert p.min() > 1e-6
    # the two routes agree on it, and a single state gives floats
    ref = plan.solve(truth.q, truth.v, readings, backend="numpy").consistency()
    np.testing.assert_allclose(ref[0], chi2, rtol=1e-6)
    one = plan.solve(truth.q[0], truth.v[0], {k: r[0] for k, r in readings.items()})
    assert isinstance(one.consistency()[2], float)


def test_a_reading_with_the_wrong_sign_is_flagged(noisy):
    truth, problem, plan, readings = noisy
    bad = dict(readings, l_foot_ft_sensor=-readings["l_foot_ft_sensor"])
    est = plan.solve(truth.q[:20], truth.v[:20], {k: r[:20] for k, r in bad.items()})
    chi2, dof, p = est.consistency()
    assert p.max() < 1e-12
    assert chi2_dist.sf(chi2.min(), dof) < 1e-12
    # each sensor's residual (reading minus prediction) carries it: the F/T sensors' share of
    # chi2 grows by orders of magnitude against the same states with the right sign
    good = plan.solve(truth.q[:20], truth.v[:20], {k: r[:20] for k, r in readings.items()})
    for name in ("l_foot_ft_sensor", "r_foot_ft_sensor"):
        assert est.residual(name).shape == (20, 6)
        share = (est.residual(name) ** 2 / VAR[name]).sum(axis=1)
        before = (good.residual(name) ** 2 / VAR[name]).sum(axis=1)
        assert np.median(share) > 1e4 * np.median(before)


def test_square_systems_have_nothing_to_check():
    model, problem, truth = square_ankles_setting(0, 3)
    est = compile_estimation(problem).solve(truth.q, truth.v, _readings(problem, truth))
    chi2, dof, p = est.consistency()
    assert dof == 0 and np.isnan(p).all()
    assert np.all(chi2 < 1e-12 * (1 + np.abs(truth.tau).max() ** 2))
