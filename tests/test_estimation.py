"""Sensor-based estimation (Nori Sec. VI, eq. 17-24) against independent oracles: ground truth and
readings generated with PINOCCHIO (pin_sensors.PinTruth), dense NumPy least squares / MAP, and the
analysis of the notes (Remark 5, slippery floor, flat parallel feet)."""

import numpy as np
import pytest

import sparsedyn as sd
from estimate_outputs import read_estimate
from oracles import pin_model, rel_err, robot_urdf
from pin_sensors import PinTruth, robot_and_pin, singular_chain_setting
from sparsedyn import IllPosedError
from sparsedyn import sensors as S
from sparsedyn.estimation import EstimationProblem, SingularStateWarning, compile_estimation

TOL = 1e-8
FEET = ["l_sole", "r_sole"]


_robot = robot_and_pin


def _readings(problem, truth):
    """Pinocchio readings of every sensor of the problem (pseudo-measurements left to default)."""
    out = {}
    for s in problem.sensors:
        if isinstance(s, S.JointAccelerations):
            out[s.name] = truth.qdd
        elif isinstance(s, S.ForceTorque):
            fixed = s.joint in truth.model.joint_frames and truth.model.joint_frames[s.joint].kind == "fixed_joint"
            out[s.name] = truth.fixed_joint_wrench(s.joint) if fixed else truth.joint_wrench(s.joint)
        elif isinstance(s, S.LoadCells):
            out[s.name] = truth.wrench_in(s.link, s.placement)[:, [2, 3, 4]]
        elif isinstance(s, S.Accelerometer):
            out[s.name] = truth.frame_motion(s.link, s.placement)[0]
        elif isinstance(s, S.Gyroscope):
            out[s.name] = truth.frame_motion(s.link, s.placement)[1]
        elif isinstance(s, S.UnactuatedBase):
            out[s.name] = truth.tau[:, :6]       # 0 up to the round-off of Pinocchio's ABA
    return out


def row_variances(problem, cov, sensor=1e-4, dynamics=1e-4):
    """Each row's variance as compile_estimation documents its defaults: cov["dynamics"] (else
    `dynamics`) on the Newton-Euler rows and on pseudo-measurements (tau_root = 0, a slippery
    floor), cov[sensor name] (else `sensor`) on a sensor's rows."""
    dyn = cov.get("dynamics", dynamics)
    var = np.full(problem.shape[0], dyn, dtype=float)
    m0 = problem.n_dynamics_rows
    for s in problem.rows.sensors:
        sl = problem.rows.row_slices[s.name]
        var[m0 + sl.start:m0 + sl.stop] = cov.get(s.name, dyn if s.default_reading is not None
                                                  else sensor)
    return var


def _assert_truth(est, truth, links, tol=TOL):
    assert est.ok.all()
    assert rel_err(est["tau"], truth.tau) < tol
    assert rel_err(est["qdd"], truth.qdd) < tol
    for link in links:
        assert rel_err(est.wrench(link), truth.f_ext[link]) < tol, link


# ------------------------------------------------------------------------------- exact (LU)

def test_humanoid_exact_ft_ankles_and_hand():
    """F/T at both ankles + qdd + unactuated base, unknown wrenches at both feet AND the chest:
    6 + 6 + 6 unknowns against 12 F/T rows + 6 base rows: square, solved by the permuted LU."""
    model, pm = _robot("humanoid")
    links = FEET + ["chest"]
    truth = PinTruth.random(model, pm, np.random.default_rng(0), 6, links)
    problem = EstimationProblem(model, [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor"),
                                        S.ForceTorque("r_foot_ft_sensor")], unknown_wrenches=links)
    assert problem.shape[0] == problem.shape[1]
    plan = compile_estimation(problem)
    assert plan.method == "exact"
    est = plan.solve(truth.q, truth.v, _readings(problem, truth))
    _assert_truth(est, truth, links)
    single = plan.solve(truth.q[2], truth.v[2], {k: v[2] for k, v in _readings(problem, truth).items()})
    assert single["tau"].shape == (model.nv,) and rel_err(single["tau"], truth.tau[2]) < TOL


def test_icub_exact_with_its_six_ft_sensors():
    """iCub's six F/T sensors cut it into seven parts; one unknown wrench per part makes the
    problem square (36 F/T + 6 base rows for 42 wrench unknowns)."""
    model, pm = _robot("icub")
    fts = [n for n, f in model.joint_frames.items() if n.endswith("ft_sensor")]
    assert len(fts) == 6
    links = ["chest", "l_hand", "r_hand", "l_lower_leg", "r_lower_leg", "l_foot", "r_foot"]
    truth = PinTruth.random(model, pm, np.random.default_rng(1), 5, links, scale=10.0)
    problem = EstimationProblem(model, [S.JointAccelerations()] + [S.ForceTorque(j) for j in fts],
                                unknown_wrenches=links)
    plan = compile_estimation(problem)
    assert plan.method == "exact"
    est = plan.solve(truth.q, truth.v, _readings(problem, truth))
    _assert_truth(est, truth, links)
    for j in ("l_knee", "r_elbow"):
        assert rel_err(est["f", model.link_names[model.joint_index(j)]], truth.joint_wrench(j)) < TOL


# ------------------------------------------------------------------ over-determined / MAP

def _overdetermined(B=5, seed=2):
    model, pm = _robot("humanoid")
    truth = PinTruth.random(model, pm, np.random.default_rng(seed), B, FEET)
    problem = EstimationProblem(model, [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor"),
                                        S.ForceTorque("r_foot_ft_sensor"),
                                        S.Accelerometer("imu_link"), S.Gyroscope("imu_link")],
                                unknown_wrenches=FEET)
    return model, truth, problem


def test_overdetermined_noise_free_reproduces_truth():
    """Both ankle F/T with both feet unknown: 6 redundant base rows (+3 accelerometer rows)."""
    model, truth, problem = _overdetermined()
    assert problem.shape[0] == problem.shape[1] + 9
    plan = compile_estimation(problem)
    assert plan.method == "lstsq"
    readings = _readings(problem, truth)
    est = plan.solve(truth.q, truth.v, readings)
    _assert_truth(est, truth, FEET)
    assert np.abs(est.residual("imu_link_gyro")).max() < 1e-9


def test_least_squares_and_map_match_dense_numpy():
    model, truth, problem = _overdetermined(B=3, seed=3)
    rng = np.random.default_rng(4)
    readings = {k: v + rng.normal(size=v.shape) * 0.05 for k, v in _readings(problem, truth).items()}
    cov = {"dynamics": 1e-6, "qdd": 1e-2, "l_foot_ft_sensor": 0.5, "r_foot_ft_sensor": 0.5,
           "imu_link_acc": 0.1, "prior": {"tau": 1e3, "fx": 1e4, "a": 1e2, "f": 1e4, "qdd": 1e2}}
    values, rhs, _, _ = problem.assemble(truth.q, truth.v, readings)
    A = problem.dense(values)
    for method in ("lstsq", "map"):
        plan = compile_estimation(problem, method=method, covariances=cov if method == "map" else None)
        est = plan.solve(truth.q, truth.v, readings)
        for b in range(3):
            if method == "lstsq":
                x_ref = np.linalg.lstsq(A[b], rhs[b], rcond=None)[0]
            else:
                var = row_variances(problem, cov)
                prior = np.concatenate([np.full(blk.size, cov["prior"][blk.kind])
                                        for blk in problem.columns.blocks])
                W = np.diag(1 / var)
                P = np.diag(1 / prior) + A[b].T @ W @ A[b]
                x_ref = np.linalg.solve(P, A[b].T @ W @ rhs[b])
                C_ref = np.linalg.inv(P)
                tau_cols = np.concatenate([problem.columns[("tau", i)].indices for i in range(model.nbodies)])
                assert rel_err(est.covariance("tau")[b], C_ref[np.ix_(tau_cols, tau_cols)]) < 1e-7
            assert rel_err(est.vector[b], x_ref) < 1e-7, method


# ------------------------------------------------------------------ well-posedness (Sec. VI)

def test_unknown_feet_without_sensors_is_structurally_ill_posed():
    model, _ = _robot("humanoid")
    problem = EstimationProblem(model, [S.JointAccelerations()], unknown_wrenches=FEET)
    with pytest.raises(IllPosedError, match="structurally ill-posed") as info:
        problem.check()
    names = set(info.value.variables)
    assert {"fx[l_sole]", "fx[r_sole]", "tau[l_knee]", "tau[r_hip_pitch]"} <= names
    assert not any(n.startswith(("tau[l_elbow", "tau[neck", "fx[chest")) for n in names)


def test_remark5_load_cells_without_slippery_assumption_is_ill_posed():
    """Four load cells per foot (f_z, mu_x, mu_y): an internal tangential force along n_l x n_r
    balanced by the two mu_z is invisible for EVERY state (Property 3 / Remark 5)."""
    model, _ = _robot("humanoid")
    problem = EstimationProblem(model, [S.JointAccelerations()] + [S.LoadCells(f) for f in FEET],
                                unknown_wrenches=FEET)
    assert problem.shape[0] == problem.shape[1]
    with pytest.raises(IllPosedError, match="every state") as info:
        problem.check()
    assert {"fx[l_sole]", "fx[r_sole]"} <= set(info.value.variables)


def _slippery(model):
    return EstimationProblem(model, [S.JointAccelerations()] + [S.LoadCells(f) for f in FEET]
                             + [S.ZeroTangentialForce(f) for f in FEET], unknown_wrenches=FEET)


def test_slippery_floor_solves_and_flags_flat_parallel_feet():
    model, pm = _robot("humanoid")
    rng = np.random.default_rng(5)
    truth = PinTruth.random(model, pm, rng, 4, FEET, tangential_free=FEET)
    q = truth.q.copy()
    q[0] = model.neutral_configuration()               # both soles flat and parallel
    truth = PinTruth(model, pm, q, truth.v, truth.tau, truth.f_ext)
    problem = _slippery(model)
    problem.check()
    plan = compile_estimation(problem)
    readings = _readings(problem, truth)
    with pytest.warns(SingularStateWarning, match="batch indices \\[0\\]"):
        est = plan.solve(truth.q, truth.v, readings)
    assert est.ok.tolist() == [False, True, True, True]
    assert {"fx[l_sole]", "fx[r_sole]"} <= set(est.undetermined(0))
    assert est.undetermined(1) == []
    assert rel_err(est["tau"][1:], truth.tau[1:]) < TOL
    for f in FEET:
        assert rel_err(est.wrench(f)[1:], truth.f_ext[f][1:]) < TOL
    assert np.all(np.isfinite(est["tau"][0]))           # prior-regularised, not garbage


def test_exact_plan_reports_singular_states():
    """Six joint torques measured, unknown tip wrench: square, J^T fx = tau - ID(q, v, qdd) is
    singular where the chain's Jacobian is (q = 0: the two x axes are aligned)."""
    model, problem, truth = singular_chain_setting(7)
    plan = compile_estimation(problem)
    assert plan.method == "exact"
    readings = {"qdd": truth.qdd, "tau": truth.tau}
    with pytest.warns(SingularStateWarning, match="NaN"):
        est = plan.solve(truth.q, truth.v, readings, on_singular="nan")
    assert est.ok.tolist() == [False, True, True]
    assert np.isnan(est.wrench("link6")[0]).all()
    assert rel_err(est.wrench("link6")[1:], truth.f_ext["link6"][1:]) < TOL
    with pytest.warns(SingularStateWarning, match="prior"):
        est = plan.solve(truth.q, truth.v, readings, on_singular="map")
    assert np.isfinite(est.wrench("link6")[0]).all() and not est.ok[0]
    assert "fx[link6]" in est.undetermined(0)
    with pytest.raises(sd.SingularModelError):
        plan.solve(truth.q, truth.v, readings, on_singular="raise")


# ------------------------------------------------------------------ serial chain (Fig. 2)

def _floating_chain(n):
    b = sd.ModelBuilder("fchain")
    from sparsedyn.model.joints import FreeFlyerJoint, RevoluteJoint
    parent = b.add_body("link1", -1, FreeFlyerJoint("root_joint"), mass=1.0, com=(0.15, 0, 0),
                        inertia=np.diag([1e-3, 8e-3, 8e-3]))
    for i in range(1, n):
        T = np.eye(4)
        T[0, 3] = 0.3
        parent = b.add_body(f"link{i + 1}", parent, RevoluteJoint(f"joint{i + 1}", np.eye(3)[(i - 1) % 2 + 1]),
                            placement=T, mass=1.0, com=(0.15, 0, 0), inertia=np.diag([1e-3, 8e-3, 8e-3]))
    return b.build()


def test_serial_chain_load_cells_need_the_slippery_assumption():
    """Nori's Fig. 2 setting: a free-floating chain with load cells at both extremal links."""
    model = _floating_chain(6)
    ends = ["link1", "link6"]
    cells = [S.JointAccelerations()] + [S.LoadCells(l) for l in ends]
    with pytest.raises(IllPosedError, match="every state"):
        EstimationProblem(model, cells, unknown_wrenches=ends).check()
    slippery = EstimationProblem(model, cells + [S.ZeroTangentialForce(l) for l in ends],
                                 unknown_wrenches=ends).check()
    rng = np.random.default_rng(6)
    B = 4
    q = model.random_configuration(rng, batch=B)
    v = rng.normal(size=(B, model.nv))
    tau = rng.normal(size=(B, model.nv))
    tau[:, :6] = 0
    f_ext = {l: rng.normal(size=(B, 6)) * 5 for l in ends}
    for w in f_ext.values():
        w[:, :2] = 0
    qdd = sd.aba(model, q, v, tau, f_ext=f_ext)   # ground truth of a model with no URDF: ABA
    readings = {"qdd": qdd, **{f"{l}_load_cells": f_ext[l][:, [2, 3, 4]] for l in ends}}
    est = compile_estimation(slippery).solve(q, v, readings)
    assert est.ok.all()
    assert rel_err(est["tau"], tau) < TOL


# ------------------------------------------------------------------ input errors

def test_readings_errors_name_the_sensor():
    model, truth, problem = _overdetermined(B=2)
    plan = compile_estimation(problem)
    readings = _readings(problem, truth)
    with pytest.raises(KeyError, match="l_foot_ft_sensor"):
        plan.solve(truth.q, truth.v, {k: v for k, v in readings.items() if k != "l_foot_ft_sensor"})
    bad = dict(readings)
    bad["imu_link_acc"] = readings["imu_link_acc"].copy()
    bad["imu_link_acc"][1, 2] = np.nan
    with pytest.raises(ValueError, match="imu_link_acc.*batch index 1"):
        plan.solve(truth.q, truth.v, bad)
    with pytest.raises(KeyError, match="nosuch"):
        plan.solve(truth.q, truth.v, {**readings, "nosuch": np.zeros((2, 3))})
    with pytest.raises(ValueError, match="r_foot_ft_sensor"):
        plan.solve(truth.q, truth.v, {**readings, "r_foot_ft_sensor": np.zeros((2, 5))})


# ------------------------------------------------------------------ logs (sparsedyn estimate)

SPEC = {"model": "humanoid", "floating_base": True,
        "sensors": [{"type": "JointAccelerations"}, {"type": "ForceTorque", "joint": "l_foot_ft_sensor"},
                    {"type": "ForceTorque", "joint": "r_foot_ft_sensor"}],
        "unknown_wrenches": ["l_sole", "r_sole", "chest"]}


def _log_columns(problem, truth, readings):
    model = problem.model
    cols = {f"q_{k}": truth.q[:, k] for k in range(model.nq)}
    cols.update({f"v_{k}": truth.v[:, k] for k in range(model.nv)})
    for name, y in readings.items():
        cols.update({f"{name}_{k}": y[:, k] for k in range(y.shape[1])})
    return cols


def test_estimate_log_csv_and_npz(tmp_path):
    import json
    from sparsedyn.estimation import estimate_log, run_estimate_command
    from sparsedyn.estimation.logs import add_estimate_arguments, problem_from_spec
    model, pm = _robot("humanoid")
    problem = problem_from_spec(SPEC)
    B = 23
    truth = PinTruth.random(model, pm, np.random.default_rng(8), B, SPEC["unknown_wrenches"])
    readings = _readings(problem, truth)
    cols = _log_columns(problem, truth, readings)
    names = ["t"] + list(cols)
    table = np.column_stack([np.arange(B)] + [cols[n] for n in names[1:]])
    path = tmp_path / "log.csv"
    lines = [",".join(names)] + [",".join(repr(float(x)) for x in row) for row in table]
    lines[1 + 5] = lines[1 + 5].replace(",", ",abc,", 1)          # corrupt row 5 (extra field)
    lines[1 + 9] = lines[1 + 9].replace(lines[1 + 9].split(",")[3], "nan", 1)   # NaN in q_2
    lines[1 + 11] = lines[1 + 11].replace(lines[1 + 11].split(",")[1], "x", 1)  # non-number
    path.write_text("\n".join(lines) + "\n")
    bad = {5, 9, 11}
    plan = compile_estimation(problem)
    for out in ("est.csv", "est.npz"):
        summary = estimate_log(plan, str(path), str(tmp_path / out), batch_size=7, progress=False)
        assert summary["rows"] == B and summary["estimated"] == B - len(bad)
        assert {r for r, _ in summary["bad_rows"]} == bad
        res = read_estimate(tmp_path / out, model.nv, "l_sole")
        tau, ok, wl = res["tau"], res["ok"], res["wrench"]
        good = np.array([r not in bad for r in range(B)])
        assert (ok[good] == 1).all() and (ok[~good] == -1).all() and np.isnan(tau[~good]).all()
        assert rel_err(tau[good], truth.tau[good]) < TOL
        assert rel_err(wl[good], truth.f_ext["l_sole"][good]) < TOL
    # NPZ input and the CLI entry with a JSON spec
    npz = tmp_path / "log.npz"
    np.savez(npz, q=truth.q, v=truth.v, **readings)
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(SPEC))
    import argparse
    args = add_estimate_arguments(argparse.ArgumentParser()).parse_args(
        [str(spec_path), str(npz), str(tmp_path / "out2.npz"), "--batch-size", "10", "--no-progress"])
    assert run_estimate_command(args) == 0
    assert rel_err(np.load(tmp_path / "out2.npz")["tau"], truth.tau) < TOL
    # a missing column is an error naming it
    np.savez(npz, q=truth.q, v=truth.v, qdd=truth.qdd, l_foot_ft_sensor=readings["l_foot_ft_sensor"])
    with pytest.raises(KeyError, match="r_foot_ft_sensor_0"):
        estimate_log(plan, str(npz), str(tmp_path / "out3.csv"), progress=False)


# ------------------------------------------------------------------ iDynTree BERDY (MAP peer)

def test_map_matches_berdy_on_icub_fixed_base():
    """Same model (iCub, fixed base), sensors (qdd + the six F/T), unknown l_foot wrench and
    covariances (Sigma_y = 1e-6, Sigma_D = 1e-8, Sigma_d = 1e4: the setting in which
    experiments/berdy_notes.md validated BERDY). Convention differences, handled here: BERDY's F/T
    reading is the wrench the child exerts on the parent (= -ours); BERDY has extra variables
    (f_B = I a + v x* I v, an external wrench on every link 'measured' 0 with Sigma_y instead of
    our structural zeros, F/T joints turned into revolute joints measured at qdd = 0). Both MAP
    estimates carry the bias of the same prior on the same states; the contact wrench agrees to 1e-8
    relative; the torques agree to the size of the prior bias (~3e-5), which differs between the
    two formulations (BERDY's prior also covers its extra variables). A weaker prior (1e8) makes
    our estimate exact (3e-7) but BERDY's inaccurate (0.76 relative: normal equations spanning
    1e-12..1e8), so this is the comparable setting."""
    from berdy_oracle import BerdyOracle
    path = robot_urdf("icub")
    model = sd.load_urdf(path)
    pm = pin_model(path)
    oracle = BerdyOracle(path, floating_base=False, measurement_cov=1e-6, prior_cov=1e-8,
                         regularization_cov=1e4, unknown_wrench_links=["l_foot"])
    fts = [n for n, f in model.joint_frames.items() if n.endswith("ft_sensor")]
    problem = EstimationProblem(model, [S.JointAccelerations()] + [S.ForceTorque(j) for j in fts],
                                unknown_wrenches=["l_foot"])
    cov = {"dynamics": 1e-8, "qdd": 1e-6, "prior": 1e4, **{j: 1e-6 for j in fts}}
    plan = compile_estimation(problem, method="map", covariances=cov)
    rng = np.random.default_rng(9)
    truth = PinTruth.random(model, pm, rng, 3, ["l_foot"], scale=10.0)
    readings = _readings(problem, truth)
    est = plan.solve(truth.q, truth.v, readings)
    assert est.ok.all()
    for b in range(3):
        out = oracle.estimate(truth.q[b], truth.v[b], readings["qdd"][b],
                              ft={j: -readings[j][b] for j in fts}, unknown_wrench_links=["l_foot"])
        # the contact wrench (what the F/T sensors determine) agrees to 1e-8 ...
        assert rel_err(est.wrench("l_foot")[b], out["ext_wrenches"]["l_foot"]) < 1e-7
        # ... the torques to the size of the prior bias, which differs because BERDY puts the
        # prior also on its extra variables (measured: 0.6-2.9e-5 apart, both 2-7e-5 from truth)
        assert rel_err(est["tau"][b], out["tau"]) < 1e-4
        assert rel_err(est["tau"][b], truth.tau[b]) < 1e-4


def test_estimate_log_on_a_dask_cluster(tmp_path):
    """The same log through a (local, in-process) Dask scheduler gives the Pinocchio truth."""
    distributed = pytest.importorskip("distributed")
    from sparsedyn.estimation import estimate_log
    from sparsedyn.estimation.logs import problem_from_spec
    model, pm = _robot("humanoid")
    problem = problem_from_spec(SPEC)
    B = 17
    truth = PinTruth.random(model, pm, np.random.default_rng(9), B, SPEC["unknown_wrenches"])
    npz = tmp_path / "log.npz"
    np.savez(npz, q=truth.q, v=truth.v, **_readings(problem, truth))
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        summary = estimate_log(None, str(npz), str(tmp_path / "out.npz"), batch_size=5,
                               scheduler=cluster.scheduler_address, progress=False, spec=SPEC)
    assert summary["rows"] == B and summary["estimated"] == B and not summary["bad_rows"]
    assert rel_err(np.load(tmp_path / "out.npz")["tau"], truth.tau) < TOL
