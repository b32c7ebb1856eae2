"""A log as a robot writes it (issue #17 item 6, in part): columns named after the joints and
sensors or mapped by the spec, angles in degrees, a timestamp carried to the output, contact
flags per row switching the feet's wrenches, and named output columns with the per-row
consistency probability. Oracle: the Pinocchio truth the log was written from."""

import csv
import json

import numpy as np
import pytest

from oracles import rel_err
from pin_sensors import robot_and_pin, walking_truth
from sparsedyn.estimation import estimate_log
from sparsedyn.estimation.logs import WRENCH_NAMES, problem_from_spec
from test_estimation import _readings

FEET = ["l_sole", "r_sole"]
SPEC = {"model": "humanoid", "floating_base": True,
        "sensors": [{"type": "JointAccelerations"},
                    {"type": "ForceTorque", "joint": "l_foot_ft_sensor"},
                    {"type": "ForceTorque", "joint": "r_foot_ft_sensor"}],
        "unknown_wrenches": FEET, "units": {"angles": "deg"}, "time": "stamp",
        "contacts": {"l_sole": "left_contact", "r_sole": "right_contact"}, "output": "named"}


def _names(model, prefix):
    out = []
    for j in model.joints:
        n = j.nq if prefix == "q" else j.nv
        out += [f"{prefix}/{j.name}"] if n == 1 else [f"{prefix}/{j.name}/{k}" for k in range(n)]
    return out


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    """The walk's truth written as a log: q, v, qdd in degrees for revolute joints, the hip
    joint under a YARP-style name mapped by the spec, contact flags, a timestamp."""
    model, pm = robot_and_pin("humanoid")
    problem = problem_from_spec({k: SPEC[k] for k in ("model", "floating_base", "sensors",
                                                      "unknown_wrenches")})
    B = 12
    rng = np.random.default_rng(6)
    contact = {"l_sole": np.arange(B) % 4 != 3, "r_sole": np.arange(B) % 4 != 1}
    truth = walking_truth(model, pm, rng, contact)
    readings = _readings(problem, truth)
    deg_q = np.r_[np.ones(7), np.full(model.nq - 7, 180 / np.pi)]
    deg_v = np.r_[np.ones(6), np.full(model.nv - 6, 180 / np.pi)]
    cols = {"stamp": 100.0 + 0.001 * np.arange(B)}
    cols.update(zip(_names(model, "q"), (truth.q * deg_q).T))
    cols.update(zip(_names(model, "v"), (truth.v * deg_v).T))
    cols.update(zip(_names(model, "qdd"), (readings["qdd"] * deg_v).T))
    for s in ("l_foot_ft_sensor", "r_foot_ft_sensor"):
        cols.update({f"{s}/{k}": readings[s][:, k] for k in range(6)})
    cols["left_contact"], cols["right_contact"] = (contact[l].astype(float) for l in FEET)
    hip = model.joints[1].name
    cols["robot::" + hip + "::pos"] = cols.pop(f"q/{hip}")            # a name of the log's own
    spec = dict(SPEC, columns={f"q/{hip}": "robot::" + hip + "::pos"})
    folder = tmp_path_factory.mktemp("log")
    path = folder / "walk.csv"
    names = list(cols)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        for b in range(B):
            w.writerow([repr(float(cols[n][b])) for n in names])
    spec_path = folder / "spec.json"
    spec_path.write_text(json.dumps(spec))
    return model, truth, contact, cols, path, spec_path


def test_named_log_in_degrees_with_contact_switches(log, tmp_path):
    model, truth, contact, cols, path, spec_path = log
    out = tmp_path / "estimates.csv"
    summary = estimate_log(None, path, out, spec=str(spec_path), progress=False)
    assert summary["rows"] == len(truth.q) and not summary["bad_rows"]
    res = np.genfromtxt(out, delimiter=",", names=True, deletechars="")
    assert np.array_equal(res["time"], cols["stamp"])
    assert np.all(res["ok"] == 1)
    tau = np.column_stack([res[n] for n in _names(model, "tau")])
    assert rel_err(tau, truth.tau) < 1e-8
    for link in FEET:
        w = np.column_stack([res[f"wrench/{link}/{c}"] for c in WRENCH_NAMES])
        assert rel_err(w, truth.f_ext[link]) < 1e-8
        assert np.all(w[~contact[link]] == 0.0)           # in the air: zero, not estimated
    assert np.all(res["p"] > 1e-3)                         # the readings fit (noise-free)


def test_named_log_errors_name_the_column(log, tmp_path):
    model, truth, contact, cols, path, spec_path = log
    spec = json.loads(spec_path.read_text())
    spec["columns"] = {f"q/{model.joints[1].name}": "no_such_column"}
    with pytest.raises(KeyError, match="no_such_column"):
        estimate_log(None, path, tmp_path / "o.csv", spec=spec, progress=False)
    spec = json.loads(spec_path.read_text())
    spec["contacts"] = {"chest": "left_contact"}
    with pytest.raises(KeyError, match="chest"):
        estimate_log(None, path, tmp_path / "o.csv", spec=spec, progress=False)
    for bad, match in (({"units": {"angles": "grad"}}, "units"), ({"output": "nice"}, "output"),
                       ({"time": 3}, "time")):
        with pytest.raises(ValueError, match=match):
            estimate_log(None, path, tmp_path / "o.csv", spec={**spec, **bad}, progress=False)


def test_named_log_with_posterior_standard_deviations(log, tmp_path):
    """spec "std": the posterior standard deviations of every output column, as the plan's own
    posterior covariance gives them (which test_estimation checks against the dense posterior);
    zero for a foot in the air (its wrench is known)."""
    from sparsedyn.estimation.logs import plan_from_spec
    model, truth, contact, cols, path, spec_path = log
    spec = dict(json.loads(spec_path.read_text()), std=True,
                covariances={"dynamics": 1e-8, "qdd": 1e-4, "l_foot_ft_sensor": 1e-2,
                             "r_foot_ft_sensor": 1e-2, "prior": 1e4})
    out = tmp_path / "estimates.csv"
    estimate_log(None, path, out, spec=spec, progress=False)
    res = np.genfromtxt(out, delimiter=",", names=True, deletechars="")
    std_tau = np.column_stack([res["std/" + n] for n in _names(model, "tau")])
    plan = plan_from_spec(spec)
    # the same estimate through the API: its covariance's diagonal
    readings = {k: np.column_stack([cols[f"{k}/{i}"] for i in range(6)])
                for k in ("l_foot_ft_sensor", "r_foot_ft_sensor")}
    qdd = np.column_stack([cols[n] for n in _names(model, "qdd")]) * np.r_[
        np.ones(6), np.full(model.nv - 6, np.pi / 180)]
    est = plan.solve(truth.q, truth.v, {"qdd": qdd, **readings}, contacts=contact)
    C = est.covariance("tau")
    np.testing.assert_allclose(std_tau, np.sqrt(np.diagonal(C, axis1=1, axis2=2)), rtol=1e-9)
    for link in FEET:
        s = np.column_stack([res[f"std/wrench/{link}/{c}"] for c in WRENCH_NAMES])
        assert np.all(s[~contact[link]] == 0.0) and np.all(s[contact[link]] > 0.0)
    with pytest.raises(ValueError, match="std"):
        estimate_log(None, path, tmp_path / "o.csv", progress=False,
                     spec={**spec, "output": "positional"})
