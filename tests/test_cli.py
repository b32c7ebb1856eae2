"""The `sparsedyn` command line, run as a user would (subprocesses), on the embedded model and a
small URDF: results against Pinocchio, bad arguments and corrupt files as one-line errors."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import sparsedyn as sd
from oracles import pin, pin_model, rel_err, to_pin_q

URDF = """<robot name="tiny">
  <link name="base"><inertial><mass value="2"/><inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="upper"><inertial><origin xyz="0 0 0.2"/><mass value="1"/><inertia ixx="0.02" iyy="0.02" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="lower"><inertial><origin xyz="0.1 0 0.15"/><mass value="0.5"/><inertia ixx="0.01" iyy="0.01" izz="0.005" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <link name="tool"/>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><origin xyz="0 0 0.1"/><axis xyz="0 1 0"/><limit lower="-2" upper="2" effort="50" velocity="3"/></joint>
  <joint name="elbow" type="continuous"><parent link="upper"/><child link="lower"/><origin xyz="0 0 0.4" rpy="0.3 0 0"/><axis xyz="1 0 0"/></joint>
  <joint name="tool_joint" type="fixed"><parent link="lower"/><child link="tool"/><origin xyz="0.2 0 0.3"/></joint>
</robot>"""


def run(*args, check=True):
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(sd.__file__))))
    proc = subprocess.run([sys.executable, "-m", "sparsedyn", *args], capture_output=True, text=True,
                          env=env, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"sparsedyn {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    path = d / "tiny.urdf"
    path.write_text(URDF)
    return d, str(path)


def test_help_everywhere():
    out = run("--help").stdout
    for cmd in ("demo", "compile", "solve", "estimate", "spy", "bench", "report"):
        assert cmd in out
        assert "usage: sparsedyn " + cmd in run(cmd, "--help").stdout


def test_compile_and_solve_a_urdf_against_pinocchio(tiny):
    d, urdf = tiny
    plan_path = str(d / "fd.npz")
    out = run("compile", urdf, "--problem", "fd", "-o", plan_path, "--no-progress").stdout
    assert "chosen:" in out and "colamd" in out and os.path.exists(plan_path)
    model = sd.load_urdf(urdf)
    rng = np.random.default_rng(0)
    B = 5
    q, v, tau = model.random_configuration(rng, batch=B), rng.normal(size=(B, 2)), rng.normal(size=(B, 2))
    states = str(d / "states.csv")
    cols = np.hstack([q, v, tau])
    header = ",".join([f"q_{k}" for k in range(2)] + [f"v_{k}" for k in range(2)] + [f"tau_{k}" for k in range(2)])
    np.savetxt(states, cols, delimiter=",", header=header, comments="")
    result = str(d / "qdd.npz")
    run("solve", plan_path, "--robot", urdf, "--states", states, "-o", result)
    qdd = np.load(result)["qdd"]
    pm = pin_model(urdf)
    pdata = pm.createData()
    ref = np.array([pin.aba(pm, pdata, to_pin_q(model, pm, q[b]), v[b], tau[b]) for b in range(B)])
    assert rel_err(qdd, ref) <= 1e-10


def test_embedded_plan_solves_without_robot_argument(tmp_path):
    plan_path = str(tmp_path / "id.npz")
    run("compile", "humanoid", "--problem", "id", "-o", plan_path, "--no-progress")
    from sparsedyn import models
    model = models.humanoid()
    rng = np.random.default_rng(1)
    q, v, a = model.random_configuration(rng, batch=3), rng.normal(size=(3, model.nv)), rng.normal(size=(3, model.nv))
    np.savez(tmp_path / "s.npz", q=q, v=v, qdd=a)
    run("solve", plan_path, "--states", str(tmp_path / "s.npz"), "-o", str(tmp_path / "tau.csv"))
    data = np.genfromtxt(tmp_path / "tau.csv", delimiter=",", names=True)
    tau = np.column_stack([data[f"tau_{k}"] for k in range(model.nv)])
    pm = pin_model(models.HUMANOID_URDF, True)
    pdata = pm.createData()
    ref = np.array([pin.rnea(pm, pdata, to_pin_q(model, pm, q[b]), v[b], a[b]) for b in range(3)])
    assert rel_err(tau, ref) <= 1e-10


def test_spy_writes_an_image(tiny, tmp_path):
    _, urdf = tiny
    out = str(tmp_path / "spy.png")
    run("spy", urdf, "--problem", "fd", "-o", out)
    with open(out, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args,needle", [
    (("compile", "/no/such.urdf", "-o", "x.npz"), "no such URDF"),
    (("compile", "humanoid", "--problem", "xx", "-o", "x.npz"), "invalid choice"),
    (("compile", "humanoid", "--ordering", "nope", "-o", "/tmp/x.npz", "--no-progress"), "nope"),
    (("solve", "/no/plan.npz", "--states", "s.npz", "-o", "o.npz"), "plan"),
    (("compile", "chain2", "-o", "/no/such/dir/p.npz"), "no such directory: '/no/such/dir'"),
    (("demo", "--batch", "0"), "--batch: expected a positive integer"),
    (("bench", "hand", "--repeat", "0"), "--repeat: expected a positive integer"),
    (("estimate", "s.json", "l.csv", "o.csv", "--batch-size", "-1"), "--batch-size: expected a positive"),
])
def test_bad_arguments_are_one_line_errors(args, needle):
    proc = run(*args, check=False)
    assert proc.returncode != 0
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_corrupt_and_mismatched_plan_files(tiny, tmp_path):
    _, urdf = tiny
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"PK\x03\x04 this is not a plan")
    np.savez(tmp_path / "s.npz", q=np.zeros((1, 2)), v=np.zeros((1, 2)), tau=np.zeros((1, 2)))
    proc = run("solve", str(corrupt), "--robot", urdf, "--states", str(tmp_path / "s.npz"),
               "-o", str(tmp_path / "o.npz"), check=False)
    assert proc.returncode == 2 and "not a readable sparsedyn plan" in proc.stderr
    assert "Traceback" not in proc.stderr
    plan_path = str(tmp_path / "hum.npz")
    run("compile", "humanoid", "--problem", "fd", "-o", plan_path, "--no-progress")
    proc = run("solve", plan_path, "--robot", urdf, "--states", str(tmp_path / "s.npz"),
               "-o", str(tmp_path / "o.npz"), check=False)
    assert proc.returncode == 2 and "another model" in proc.stderr and "Traceback" not in proc.stderr
    missing = tmp_path / "m.npz"
    np.savez(missing, q=np.zeros((1, 2)), v=np.zeros((1, 2)))
    plan2 = str(tmp_path / "tiny.npz")
    run("compile", urdf, "--problem", "fd", "-o", plan2, "--no-progress")
    proc = run("solve", plan2, "--robot", urdf, "--states", str(missing), "-o", str(tmp_path / "o.npz"),
               check=False)
    assert proc.returncode == 2 and "missing tau" in proc.stderr


def test_estimate_a_csv_log_with_a_corrupt_row(tmp_path):
    """`sparsedyn estimate` on a CSV log: torques equal RNEA's ground truth for the good rows,
    the corrupt row is reported by number, the exit code says some rows were bad."""
    import json
    from sparsedyn import models
    from sparsedyn import sensors as S
    model = models.humanoid()
    rng = np.random.default_rng(3)
    B = 6
    q = model.random_configuration(rng, batch=B)
    v = rng.normal(size=(B, model.nv))
    w = {"l_sole": rng.normal(size=(B, 6)) * 50, "r_sole": rng.normal(size=(B, 6)) * 50,
         "chest": rng.normal(size=(B, 6))}
    tau = rng.normal(size=(B, model.nv))
    tau[:, :6] = 0.0
    qdd = sd.aba(model, q, v, tau, f_ext=w)
    sensors = [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor"), S.ForceTorque("r_foot_ft_sensor")]
    truth = S.ground_truth(model, q, v, qdd, f_ext=w)
    cols = {**{f"q_{k}": q[:, k] for k in range(model.nq)}, **{f"v_{k}": v[:, k] for k in range(model.nv)}}
    for s in sensors:
        y = s.simulate(model, q, v, truth)
        cols.update({f"{s.name}_{k}": y[:, k] for k in range(s.size)})
    lines = [",".join(cols)] + [",".join(repr(float(cols[c][b])) for c in cols) for b in range(B)]
    lines[1 + 2] = lines[1 + 2].replace(",", ",oops,", 1)
    (tmp_path / "log.csv").write_text("\n".join(lines) + "\n")
    spec = {"model": "humanoid", "floating_base": True,
            "sensors": [{"type": "JointAccelerations"}, {"type": "ForceTorque", "joint": "l_foot_ft_sensor"},
                        {"type": "ForceTorque", "joint": "r_foot_ft_sensor"}],
            "unknown_wrenches": ["l_sole", "r_sole", "chest"]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = run("estimate", str(tmp_path / "spec.json"), str(tmp_path / "log.csv"), str(tmp_path / "est.npz"),
               "--batch-size", "4", "--no-progress", check=False)
    assert proc.returncode == 1, proc.stderr
    assert "row 2" in proc.stdout and "Traceback" not in proc.stderr
    est = np.load(tmp_path / "est.npz")
    good = np.arange(B) != 2
    assert rel_err(est["tau"][good], tau[good]) <= 1e-8
    assert np.isnan(est["tau"][2]).all()


# ------------------------------------------------------------------ messages that mislead

def cli(capsys, *args):
    """`sparsedyn ARGS` in this process: (exit code, stdout, stderr)."""
    from sparsedyn.cli import main
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, *needles):
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


def test_a_plan_where_a_urdf_is_expected_and_spy_without_its_robot(tiny, tmp_path, capsys):
    """A plan file passed as the robot is named as such (not a UnicodeDecodeError); spy --plan of
    a URDF model without the model asks for it as ROBOT (spy has no --robot option) and works
    with it; the options a saved plan fixes are refused with --plan, not ignored."""
    _, urdf = tiny
    plan = str(tmp_path / "tiny.npz")
    assert cli(capsys, "compile", urdf, "-o", plan, "--no-progress")[0] == 0
    for args in (("compile", plan, "-o", str(tmp_path / "x.npz")),
                 ("solve", plan, "--robot", plan, "--states", plan, "-o", str(tmp_path / "o.npz")),
                 ("spy", plan, "-o", str(tmp_path / "s.png"))):
        one_line_error(*cli(capsys, *args)[::2], "zip archive (a saved plan?), not a URDF")
    binary = tmp_path / "robot.urdf"
    binary.write_bytes(b"<robot \xff\xfe")
    one_line_error(*cli(capsys, "compile", str(binary), "-o", plan)[::2], "not UTF-8")
    code, _, err = cli(capsys, "spy", "--plan", plan, "-o", str(tmp_path / "s.png"))
    one_line_error(code, err, "pass it as ROBOT (sparsedyn spy ROBOT --plan PLAN)")
    assert "--robot" not in err
    assert cli(capsys, "spy", urdf, "--plan", plan, "-o", str(tmp_path / "s.png"))[0] == 0
    for option in (("--problem", "fd"), ("--ordering", "amd"), ("--f-ext", "upper")):
        code, _, err = cli(capsys, "spy", urdf, "--plan", plan, *option, "-o", str(tmp_path / "s.png"))
        one_line_error(code, err, f"{option[0]}: given with --plan")


def test_floating_base_on_embedded_models_is_honoured_or_refused(tmp_path, capsys):
    """compile hand --floating-base compiles the floating hand (it is a URDF); a chain has no
    floating variant and says so; plans of either base of an embedded model solve without
    --robot."""
    from sparsedyn import models
    from sparsedyn.problems import load_plan
    plan = str(tmp_path / "hand.npz")
    assert cli(capsys, "compile", "hand", "--floating-base", "-o", plan, "--no-progress")[0] == 0
    floating = sd.load_urdf(models.HAND_URDF, floating_base=True)
    assert load_plan(plan, floating).model.nv == models.hand().nv + 6
    with pytest.raises(sd.PlanMismatchError):
        load_plan(plan, models.hand())
    one_line_error(*cli(capsys, "compile", "chain3", "--floating-base", "-o", plan)[::2],
                   "'chain3'", "no floating-base variant")
    rng = np.random.default_rng(4)
    q = floating.random_configuration(rng, batch=2)
    v, a = rng.normal(size=(2, 2, floating.nv))
    np.savez(tmp_path / "s.npz", q=q, v=v, qdd=a)
    assert cli(capsys, "solve", plan, "--states", str(tmp_path / "s.npz"),
               "-o", str(tmp_path / "tau.npz"))[0] == 0
    pm = pin_model(models.HAND_URDF, True)
    pdata = pm.createData()
    ref = np.array([pin.rnea(pm, pdata, to_pin_q(floating, pm, q[b]), v[b], a[b]) for b in range(2)])
    assert rel_err(np.load(tmp_path / "tau.npz")["tau"], ref) <= 1e-10
    one_line_error(*cli(capsys, "solve", plan, "--fixed-base", "--states", str(tmp_path / "s.npz"),
                        "-o", str(tmp_path / "tau.npz"))[::2], "not this sparsedyn's embedded fixed-base hand")


def test_compile_help_and_errors_list_every_ordering(capsys):
    """--help names every ordering, Nori's structural ones with their problem; an unknown name
    lists the problem's orderings; a structural order of the other problem says which."""
    from sparsedyn.planner.orderings import KNOWN_ORDERINGS
    help_text = " ".join(run("compile", "--help").stdout.split())
    for name in KNOWN_ORDERINGS + ("rnea (--problem id only)", "aba (--problem fd only)"):
        assert name in help_text
    code, _, err = cli(capsys, "compile", "chain2", "--problem", "fd", "--ordering", "nope", "-o", "x.npz")
    one_line_error(code, err, "'nope'", *KNOWN_ORDERINGS, "aba")
    code, _, err = cli(capsys, "compile", "chain2", "--ordering", "aba", "-o", "x.npz")
    one_line_error(code, err, "structural order of --problem fd")


def test_outputs_never_overwrite_inputs(tiny, tmp_path, capsys, monkeypatch):
    """compile -o ROBOT, solve -o STATES / PLAN, spy -o PLAN, estimate OUT = LOG / SPEC (also
    through a link or a relative path), report -o with another extension: refused, inputs
    unchanged."""
    d, urdf = tiny
    monkeypatch.chdir(tmp_path)
    os.symlink(urdf, "robot.urdf")
    plan = "plan.npz"
    assert cli(capsys, "compile", urdf, "--problem", "fd", "-o", plan, "--no-progress")[0] == 0
    np.savez("s.npz", q=np.zeros((1, 2)), v=np.zeros((1, 2)), tau=np.zeros((1, 2)))
    (tmp_path / "spec.csv").write_text(json.dumps({"model": urdf, "floating_base": False,
                                                   "sensors": [{"type": "JointAccelerations"}]}))
    np.savetxt("log.csv", np.zeros((1, 6)), delimiter=",", comments="",
               header="q_0,q_1,v_0,v_1,qdd_0,qdd_1")
    before = {p: open(p, "rb").read() for p in (urdf, plan, "s.npz", "spec.csv", "log.csv")}
    for args, role in ((("compile", urdf, "-o", "robot.urdf"), "robot file"),
                       (("solve", plan, "--robot", urdf, "--states", "s.npz", "-o", "./s.npz"), "states file"),
                       (("solve", plan, "--robot", urdf, "--states", "s.npz", "-o", str(tmp_path / plan)), "plan file"),
                       (("spy", urdf, "--plan", plan, "-o", "sub/../plan.npz"), "plan file"),
                       (("estimate", "spec.csv", "log.csv", "log.csv"), "input log"),
                       (("estimate", "spec.csv", "log.csv", str(tmp_path / "spec.csv")), "spec file")):
        os.makedirs("sub", exist_ok=True)
        code, _, err = cli(capsys, *args)
        one_line_error(code, err, f"the same file as the {role}", "refusing to overwrite an input")
    one_line_error(*cli(capsys, "report", urdf, "-o", "r.pdf")[::2], "expected a .md or .html")
    assert all(open(p, "rb").read() == data for p, data in before.items())
