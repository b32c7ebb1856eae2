"""Per-sample problem data (issue #17 item 1): one MAP plan compiled for the superset of contacts
and sensors takes, per call and per state, which contacts are active, the measurement
covariances and the prior; the oracles are plans compiled for each contact set / covariance set
(whose own accuracy other tests establish against Pinocchio, dense NumPy and BERDY), the
Pinocchio ground truth, and iDynTree's BERDY with the per-sample contact set."""

import numpy as np
import pytest

from oracles import rel_err, robot_urdf
from pin_sensors import PinTruth, robot_and_pin, walking_truth
from sparsedyn import sensors as S
from sparsedyn.estimation import EstimationProblem, compile_estimation
from test_estimation import _readings

FEET = ["l_sole", "r_sole"]
#: a walk: double support, left single support, double, right single support, ...
CONTACTS = {"l_sole": np.array([1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 0, 1], bool),
            "r_sole": np.array([1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1], bool)}
COV = {"dynamics": 1e-8, "qdd": 1e-6, "l_foot_ft_sensor": 1e-4, "r_foot_ft_sensor": 1e-4,
       "prior": 1e8}
SAME = 1e-8           # the bound for "equals the per-set plan"


@pytest.fixture(scope="module")
def walk():
    """Humanoid with F/T at both ankles, qdd and the unactuated base; the feet's wrenches are
    unknown where in contact and zero in the air (Pinocchio ground truth)."""
    model, pm = robot_and_pin("humanoid")
    truth = walking_truth(model, pm, np.random.default_rng(3), CONTACTS)
    sensors = [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor"),
               S.ForceTorque("r_foot_ft_sensor")]
    problem = EstimationProblem(model, sensors, unknown_wrenches=FEET)
    plan = compile_estimation(problem, method="map", covariances=COV, per_sample=True)
    return model, sensors, truth, problem, plan, _readings(problem, truth)


def _contact_sets():
    keys = np.stack([CONTACTS[l] for l in FEET], axis=1)
    for key in sorted({tuple(k) for k in keys}):
        yield [l for l, a in zip(FEET, key) if a], np.flatnonzero((keys == key).all(axis=1))


def _per_set(model, sensors, links, covariances):
    problem = EstimationProblem(model, sensors, unknown_wrenches=links)
    return compile_estimation(problem, method="map", covariances=covariances)


def _take(readings, idx):
    return {k: r[idx] for k, r in readings.items()}


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_contact_switches_equal_per_contact_set_plans(walk, backend):
    model, sensors, truth, problem, plan, readings = walk
    est = plan.solve(truth.q, truth.v, readings, contacts=CONTACTS, backend=backend)
    assert est.ok.all()
    for links, idx in _contact_sets():
        ref = _per_set(model, sensors, links, COV).solve(truth.q[idx], truth.v[idx],
                                                          _take(readings, idx))
        assert rel_err(est["tau"][idx], ref["tau"]) < SAME
        assert rel_err(est["qdd"][idx], ref["qdd"]) < SAME
        for link in FEET:
            if link in links:
                assert rel_err(est.wrench(link)[idx], ref.wrench(link)) < SAME
            else:       # in the air: exactly zero, and so is its posterior covariance
                assert np.all(est.wrench(link)[idx] == 0.0)
                assert np.all(est.covariance("fx", link)[idx] == 0.0)
    # the noise-free readings: the truth up to the prior's bias
    assert rel_err(est["tau"], truth.tau) < 1e-5
    for link in FEET:
        assert rel_err(est.wrench(link), truth.f_ext[link]) < 1e-5


def test_one_sample_at_a_time_equals_the_batch(walk):
    model, sensors, truth, problem, plan, readings = walk
    batch = plan.solve(truth.q, truth.v, readings, contacts=CONTACTS)
    for b in (0, 2, 5):
        one = plan.solve(truth.q[b], truth.v[b], {k: r[b] for k, r in readings.items()},
                         contacts={l: bool(CONTACTS[l][b]) for l in FEET})
        assert one["tau"].shape == (model.nv,)
        assert rel_err(one["tau"], batch["tau"][b]) < 1e-12


@pytest.mark.parametrize("backend", ["numba", "numpy"])
def test_per_sample_covariances_equal_plans_compiled_with_them(walk, backend):
    """Alternating covariance sets (sensor and dynamics variances, prior variance per kind and
    prior mean) passed per state equal the plans compiled with each set."""
    model, sensors, truth, problem, plan, readings = walk
    B = truth.q.shape[0]
    n = problem.shape[1]
    rng = np.random.default_rng(5)
    mean = rng.normal(size=(2, n))
    sets = [dict(COV, l_foot_ft_sensor=np.full(6, 1e-2), dynamics=1e-6,
                 prior={"tau": 1e2, "fx": 1e3, "a": 1e4, "f": 1e4, "qdd": 1e4},
                 prior_mean=mean[0]),
            dict(COV, r_foot_ft_sensor=np.r_[1e-4, 1e-4, 1e-4, 1e-3, 1e-3, 1e-3], qdd=1e-5,
                 prior_mean=mean[1])]
    which = np.arange(B) % 2
    per_state = {}
    for key in ("dynamics", "qdd", "l_foot_ft_sensor", "r_foot_ft_sensor"):
        vals = [np.broadcast_to(s[key], (6,) if key.endswith("sensor") else (1,)) for s in sets]
        per_state[key] = np.stack([vals[i] for i in which])
    per_state["prior_mean"] = mean[which]
    kinds = ("tau", "fx", "a", "f", "qdd")
    prior = [{k: s["prior"][k] for k in kinds} if isinstance(s["prior"], dict)
             else dict.fromkeys(kinds, s["prior"]) for s in sets]
    per_state["prior"] = {k: np.array([[prior[i][k]] for i in which]) for k in kinds}
    # noisy readings: the estimate depends on the covariances (checked: the other set's
    # estimate is far from it)
    readings = {k: r + rng.normal(size=r.shape) * 1e-2 for k, r in readings.items()}
    est = plan.solve(truth.q, truth.v, readings, covariances=per_state, backend=backend)
    assert est.ok.all()
    for i, cov in enumerate(sets):
        idx = np.flatnonzero(which == i)
        ref, other = (_per_set(model, sensors, FEET, c).solve(truth.q[idx], truth.v[idx],
                                                               _take(readings, idx))
                      for c in (cov, sets[1 - i]))
        assert rel_err(est["tau"][idx], ref["tau"]) < SAME
        assert rel_err(est["tau"][idx], other["tau"]) > 1e3 * SAME
        for link in FEET:
            assert rel_err(est.wrench(link)[idx], ref.wrench(link)) < SAME
        np.testing.assert_allclose(est.covariance("tau")[idx], ref.covariance("tau"),
                                   rtol=1e-6, atol=1e-12 * np.abs(ref.covariance("tau")).max())


def test_contacts_and_covariances_together_on_both_routes(walk):
    model, sensors, truth, problem, plan, readings = walk
    cov = {"l_foot_ft_sensor": np.where(CONTACTS["l_sole"], 1e-4, 1e-2)[:, None]}
    fast = plan.solve(truth.q, truth.v, readings, contacts=CONTACTS, covariances=cov)
    ref = plan.solve(truth.q, truth.v, readings, contacts=CONTACTS, covariances=cov,
                     backend="numpy")
    assert fast.ok.all() and ref.ok.all()
    assert rel_err(fast.vector, ref.vector) < SAME


def test_a_state_without_enough_contacts_sensed_is_flagged(walk):
    """F/T at the left ankle only: the floating base's six rows determine one more contact
    wrench, not two. With the right foot and the chest both in contact the state is flagged not
    ok and the variables named; with the chest off it is determined and right."""
    model, sensors, truth, problem, plan, readings = walk
    pr = EstimationProblem(model, [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor")],
                           unknown_wrenches=FEET + ["chest"])
    cov = {k: COV[k] for k in ("dynamics", "qdd", "l_foot_ft_sensor", "prior")}
    pl = compile_estimation(pr, method="map", covariances=cov, per_sample=True, check=False)
    idx = np.flatnonzero(CONTACTS["r_sole"])
    chest = np.arange(idx.size) % 2 == 0
    contacts = {"l_sole": CONTACTS["l_sole"][idx], "r_sole": True, "chest": chest}
    sub = {k: readings[k][idx] for k in ("qdd", "l_foot_ft_sensor")}
    with pytest.warns(Warning, match="singular"):
        est = pl.solve(truth.q[idx], truth.v[idx], sub, contacts=contacts)
    np.testing.assert_array_equal(est.ok, ~chest)
    bad = int(np.flatnonzero(~est.ok)[0])
    assert any("chest" in name for name in est.undetermined(bad))
    good = np.flatnonzero(est.ok)
    assert rel_err(est["tau"][good], truth.tau[idx][good]) < 1e-5
    assert rel_err(est.wrench("r_sole")[good], truth.f_ext["r_sole"][idx][good]) < 1e-5


def test_per_sample_errors_name_the_argument(walk):
    model, sensors, truth, problem, plan, readings = walk
    q, v = truth.q[:3], truth.v[:3]
    r = _take(readings, np.arange(3))
    with pytest.raises(KeyError, match="chest"):
        plan.solve(q, v, r, contacts={"chest": True})
    with pytest.raises(ValueError, match=r"contacts\['l_sole'\]"):
        plan.solve(q, v, r, contacts={"l_sole": np.ones(4, bool)})
    with pytest.raises(ValueError, match="contacts\\['l_sole'\\]"):
        plan.solve(q, v, r, contacts={"l_sole": np.ones(3)})
    with pytest.raises(ValueError, match="l_foot_ft_sensor"):
        plan.solve(q, v, r, covariances={"l_foot_ft_sensor": np.ones((3, 5))})
    with pytest.raises(ValueError, match="positive"):
        plan.solve(q, v, r, covariances={"qdd": -np.ones((3, 1))})
    with pytest.raises(KeyError, match="nosuch"):
        plan.solve(q, v, r, covariances={"nosuch": 1.0})
    # a plan compiled without per_sample says how to get one, and the NumPy route still works
    static = _per_set(model, sensors, FEET, COV)
    with pytest.raises(ValueError, match="per_sample=True"):
        static.solve(q, v, r, contacts={"l_sole": True})
    ref = plan.solve(q, v, r, contacts={"r_sole": False})
    alt = static.solve(q, v, r, contacts={"r_sole": False}, backend="numpy")
    assert rel_err(alt.vector, ref.vector) < SAME
    # exact plans and least-squares covariances
    with pytest.raises(ValueError, match="map"):
        compile_estimation(problem, method="exact", per_sample=True)
    lstsq = compile_estimation(problem, method="lstsq", per_sample=True)
    with pytest.raises(ValueError, match="lstsq"):
        lstsq.solve(q, v, r, covariances={"qdd": 1.0})
    assert lstsq.solve(q, v, r, contacts={"r_sole": False}).ok.all()


def test_contact_switches_and_covariances_match_berdy_on_icub():
    """iCub (fixed base), qdd and its six F/T sensors, contact wrenches at both feet switched per
    sample and the measurement variance alternating 1e-6 / 1e-7 per sample; BERDY is told each
    sample's contact set and fed the same variances (one BerdySparseMAPSolver per variance).
    Noise-free readings of states of moderate accelerations, where the prior (1e4) biases
    neither estimate: they agree with each other and with the truth to 1e-8. (Under noise the
    two MAP formulations differ by ~6e-4, BERDY's prior also covering its extra variables, more
    than the covariances move either: the covariances' oracle is the per-set plan, above.)"""
    from berdy_oracle import BerdyOracle
    import sparsedyn as sd
    from oracles import pin, pin_fext, pin_model, to_pin_q
    path = robot_urdf("icub")
    model = sd.load_urdf(path)
    pm = pin_model(path)
    links = ["l_foot", "r_foot"]
    variances = (1e-6, 1e-7)
    oracles = [BerdyOracle(path, floating_base=False, measurement_cov=c, prior_cov=1e-8,
                           regularization_cov=1e4, unknown_wrench_links=links) for c in variances]
    fts = [n for n, f in model.joint_frames.items() if n.endswith("ft_sensor")]
    problem = EstimationProblem(model, [S.JointAccelerations()] + [S.ForceTorque(j) for j in fts],
                                unknown_wrenches=links)
    cov = {"dynamics": 1e-8, "qdd": 1e-6, "prior": 1e4, **{j: 1e-6 for j in fts}}
    plan = compile_estimation(problem, method="map", covariances=cov, per_sample=True)
    contacts = {"l_foot": np.array([1, 1, 0, 1], bool), "r_foot": np.array([1, 0, 1, 1], bool)}
    rng = np.random.default_rng(9)
    B = 4
    q = model.random_configuration(rng, batch=B)
    v = rng.normal(size=(B, model.nv))
    f_ext = {l: rng.normal(size=(B, 6)) * 10.0 * contacts[l][:, None] for l in links}
    # torques of moderate accelerations (Pinocchio's RNEA): random torques on iCub's light
    # links give 1e6-1e12 rad/s^2, where the prior's bias dominates both estimates
    qdd = rng.normal(size=(B, model.nv))
    tau = np.array([pin.rnea(pm, pm.createData(), to_pin_q(model, pm, q[b]), v[b], qdd[b],
                             pin_fext(model, pm, {l: w[b] for l, w in f_ext.items()}))
                    for b in range(B)])
    truth = PinTruth(model, pm, q, v, tau, f_ext)
    readings = _readings(problem, truth)
    which = np.arange(B) % 2
    per_state = np.array(variances)[which][:, None]
    est = plan.solve(q, v, readings, contacts=contacts,
                     covariances={"qdd": per_state, **{j: per_state for j in fts}})
    assert est.ok.all()
    for b in range(B):
        active = [l for l in links if contacts[l][b]]
        out = oracles[which[b]].estimate(q[b], v[b], readings["qdd"][b],
                              ft={j: -readings[j][b] for j in fts}, unknown_wrench_links=active)
        for l in links:     # an inactive contact is absent from BERDY's variables
            theirs = out["ext_wrenches"][l] if l in active else np.zeros(6)
            assert rel_err(est.wrench(l)[b], theirs) < SAME if l in active else \
                np.all(est.wrench(l)[b] == 0.0)
        assert rel_err(est["tau"][b], out["tau"]) < SAME
        assert rel_err(est["tau"][b], truth.tau[b]) < SAME


def test_a_per_sample_plan_costs_few_more_flops(walk):
    """Reading A's constant entries and the prior per state adds products to N's chains: under
    10% of the counted flops of the plan with them folded in (README)."""
    model, sensors, truth, problem, plan, readings = walk
    static = compile_estimation(problem, method="map", covariances=COV, map_form="normal")
    ratio = plan.stats["map_cost_normal"] / static.stats["map_cost_normal"]
    assert 1.0 < ratio < 1.1
