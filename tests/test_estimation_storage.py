"""Estimation plans saved and loaded (issue #17 item 5): a loaded plan gives bit for bit the
estimates of the plan that was saved (and the Pinocchio truth), for every route (exact, MAP
normal and augmented form, per-sample, sensors declared in a URDF); another model, a foreign or
newer file, an index out of range and an in-range edit of the stored program are refused."""

import json

import numpy as np
import pytest

import sparsedyn as sd
from oracles import rel_err, robot_urdf
from pin_sensors import PinTruth, robot_and_pin, square_ankles_setting
from sparsedyn import sensors as S
from sparsedyn.errors import PlanMismatchError
from sparsedyn.estimation import EstimationProblem, compile_estimation, load_estimation_plan
from test_estimation import _readings

FEET = ["l_sole", "r_sole"]
COV = {"dynamics": 1e-8, "qdd": 1e-6, "l_foot_ft_sensor": [1e-4] * 6, "r_foot_ft_sensor": 1e-4,
       "prior": {"tau": 1e4, "fx": 1e4}, "prior_mean": 0.0}


@pytest.fixture(scope="module")
def walk():
    model, problem, truth = square_ankles_setting(4, 5, FEET)
    return model, truth, problem, _readings(problem, truth)


def _round_trip(plan, model, tmp_path):
    path = tmp_path / "plan.npz"
    plan.save(path)
    return load_estimation_plan(path, model), path


@pytest.mark.parametrize("options", [dict(method="map", covariances=COV, map_form="normal"),
                                     dict(method="map", covariances=COV, per_sample=True),
                                     dict(method="lstsq")])
def test_map_plans_round_trip(walk, tmp_path, options):
    model, truth, problem, readings = walk
    plan = compile_estimation(problem, **options)
    loaded, _ = _round_trip(plan, model, tmp_path)
    assert loaded.method == plan.method and loaded.per_sample == plan.per_sample
    a = plan.solve(truth.q, truth.v, readings)
    b = loaded.solve(truth.q, truth.v, readings)
    assert np.array_equal(a.vector, b.vector) and b.ok.all()
    assert rel_err(b["tau"], truth.tau) < 1e-6
    assert loaded.stats["n_rows"] == plan.stats["n_rows"]


def test_exact_and_augmented_plans_round_trip(tmp_path):
    model, problem, truth = square_ankles_setting(2, 4)
    readings = _readings(problem, truth)
    plan = compile_estimation(problem)
    loaded, _ = _round_trip(plan, model, tmp_path)
    assert loaded.method == "exact"
    assert np.array_equal(plan.solve(truth.q, truth.v, readings).vector,
                          loaded.solve(truth.q, truth.v, readings).vector)
    assert rel_err(loaded.solve(truth.q, truth.v, readings)["tau"], truth.tau) < 1e-8
    model2, pm = robot_and_pin("humanoid")
    walk_problem = EstimationProblem(model2, [S.JointAccelerations(), S.ForceTorque(
        "l_foot_ft_sensor"), S.ForceTorque("r_foot_ft_sensor")], unknown_wrenches=FEET)
    aug = compile_estimation(walk_problem, method="map", map_form="augmented",
                             covariances={"dynamics": 1e-8, "qdd": 1e-6, "prior": 1e4,
                                          "l_foot_ft_sensor": 1e-4, "r_foot_ft_sensor": 1e-4})
    loaded = _round_trip(aug, model2, tmp_path)[0]
    assert loaded.stats["map_form"] == "augmented"
    t = PinTruth.random(model2, pm, np.random.default_rng(1), 3, FEET)
    r = _readings(walk_problem, t)
    assert np.array_equal(aug.solve(t.q, t.v, r).vector, loaded.solve(t.q, t.v, r).vector)


def test_sensors_declared_in_the_urdf_round_trip(tmp_path):
    """iCub's F/T sensors in iDynTree's convention (DeclaredForceTorque) keep their frames and
    signs through the file."""
    model = sd.load_urdf(robot_urdf("icub"))
    sensors = S.from_urdf(model, convention="idyntree")
    problem = EstimationProblem(model, [S.JointAccelerations()] + sensors,
                                unknown_wrenches=["l_foot"])
    plan = compile_estimation(problem, method="map", map_form="normal")
    loaded, _ = _round_trip(plan, model, tmp_path)
    assert [type(s).__name__ for s in loaded.problem.sensors] == [
        type(s).__name__ for s in problem.sensors]
    for s, t in zip(problem.sensors[1:], loaded.problem.sensors[1:]):
        assert np.array_equal(s.transform, t.transform)
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng, batch=3)
    v = rng.normal(size=(3, model.nv))
    r = {s.name: rng.normal(size=(3, s.size)) for s in problem.sensors}
    assert np.array_equal(plan.solve(q, v, r).vector, loaded.solve(q, v, r).vector)


def test_another_model_and_foreign_files_are_refused(walk, tmp_path):
    model, truth, problem, readings = walk
    plan = compile_estimation(problem, method="map", covariances=COV, map_form="normal")
    path = tmp_path / "plan.npz"
    plan.save(path)
    with pytest.raises(PlanMismatchError, match="another model"):
        load_estimation_plan(path, sd.load_urdf(robot_urdf("icub")))
    dyn = tmp_path / "dynamics.npz"
    sd.compile(sd.inverse_dynamics(model)).save(dyn)
    with pytest.raises(ValueError, match="not a sparsedyn estimation plan"):
        load_estimation_plan(dyn, model)
    arrays = dict(np.load(path))
    header = json.loads(str(arrays["header"]))
    header["version"] = 99
    newer = tmp_path / "newer.npz"
    np.savez(newer, **{**arrays, "header": np.array(json.dumps(header))})
    with pytest.raises(ValueError, match="version 99"):
        load_estimation_plan(newer, model)


def test_edited_programs_are_refused(walk, tmp_path):
    """An index out of range is refused before any kernel runs; an in-range edit of a
    coefficient or an operand (checksums recomputed) is refused by the test solve."""
    model, truth, problem, readings = walk
    plan = compile_estimation(problem, method="map", covariances=COV, map_form="normal")
    path = tmp_path / "plan.npz"
    plan.save(path)
    arrays = dict(np.load(path))
    key_pc = next(k for k in arrays if k.endswith("/pc"))
    key_pa = next(k for k in arrays if k.endswith("/pa"))
    prog = plan.compiled.program
    n_slots = prog.n_slots
    # a coefficient of the factorization, the solves or the residual (the probe's only decide
    # which states the reference route re-solves)
    numeric = int(prog.chains.ins_q[prog.resid_end])
    big = np.argmax(np.abs(arrays[key_pc][:numeric]))
    edits = {"index out of range": (key_pa, 0, n_slots + 5),
             "coefficient": (key_pc, big, arrays[key_pc][big] * 1.5),
             "operand": (key_pa, len(arrays[key_pa]) // 2, arrays[key_pa][len(arrays[key_pa]) // 3])}
    for what, (key, index, value) in edits.items():
        edited = {k: a.copy() for k, a in arrays.items()}
        edited[key][index] = value
        bad = tmp_path / f"bad_{what.replace(' ', '_')}.npz"
        np.savez(bad, **edited)
        with pytest.raises(ValueError, match="corrupt estimation plan"):
            load_estimation_plan(bad, model)
