"""Sensors read from a URDF's iDynTree sensor declarations (sparsedyn.urdf_sensors), against
independent oracles: iDynTree's own URDF loader (names, joints, frames and signs it builds),
Pinocchio (ground truth; F/T readings in iDynTree's convention by berdy_oracle's own code) and
pinocchio.rpy for the sensor origins. Never sparsedyn against itself."""
import re
import warnings

import numpy as np
import pytest

import sparsedyn as sd
from berdy_oracle import import_idyntree, simulate_ft_readings, urdf_ft_sensors
from oracles import pin, rel_err, robot_urdf
from pin_sensors import PinTruth, robot_and_pin
from sparsedyn import sensors as S
from sparsedyn.errors import SensorError
from sparsedyn.estimation import EstimationProblem, compile_estimation
from sparsedyn.urdf_sensors import DeclaredForceTorque, UnmappedSensorWarning, from_urdf

TOL = 1e-8
# one unknown wrench per part that iCub's six F/T sensors cut it into: a square problem
PARTS = ["chest", "l_hand", "r_hand", "l_lower_leg", "r_lower_leg", "l_foot", "r_foot"]
XYZ, RPY = np.array([0.01, -0.02, 0.03]), np.array([0.1, 0.2, -0.3])


def _declared(frame, direction):
    """iCub's URDF text with every F/T declaration changed to (frame, direction)."""
    text = open(robot_urdf("icub")).read()
    text = text.replace("<frame>child</frame>", f"<frame>{frame}</frame>")
    text = text.replace("<measure_direction>child_to_parent</measure_direction>",
                        f"<measure_direction>{direction}</measure_direction>")
    origin = f'<origin xyz="{" ".join(map(str, XYZ))}" rpy="{" ".join(map(str, RPY))}"/>'
    return re.sub(r'(<parent joint="[^"]+" */>)', r"\1" + origin, text)


def _idyntree_ft(path):
    """{name: (joint, child link_H_sensor 4x4, +1 if the reading is the wrench ON the child)}
    as iDynTree's loader builds its SixAxisForceTorqueSensors."""
    idyn = import_idyntree()
    loader = idyn.ModelLoader()
    if not loader.loadModelFromFile(str(path)):
        pytest.skip("iDynTree cannot load the URDF")
    ss = loader.model().sensors()
    out = {}
    for i in range(ss.getNrOfSensors(idyn.SIX_AXIS_FORCE_TORQUE)):
        s = ss.getSixAxisForceTorqueSensor(i)
        child = s.getSecondLinkIndex()
        H = idyn.Transform()
        assert s.getLinkSensorTransform(child, H)
        H = H.asHomogeneousTransform().toNumPy()
        out[s.getName()] = (s.getParentJoint(), H, 1 if s.getAppliedWrenchLink() == child else -1)
    return out


def _oracle_readings(truth, path, frame):
    """F/T readings in the URDF's declared convention, per state, by berdy_oracle's code (frame
    "sensor", which it does not know, by moving its child-frame reading with Pinocchio)."""
    decl = urdf_ft_sensors(path)
    if frame == "sensor":
        decl = [dict(s, frame="child") for s in decl]
    cMs = pin.SE3(pin.rpy.rpyToMatrix(*RPY), XYZ)
    out = {}
    for b, data in enumerate(truth.datas):
        ft = simulate_ft_readings(truth.pmodel, data, path,
                                  f_ext={l: w[b] for l, w in truth.f_ext.items()}, sensors=decl)
        for name, w in ft.items():
            if frame == "sensor":
                w = cMs.actInv(pin.Force(w)).vector
            out.setdefault(name, []).append(w)
    return {k: np.array(v) for k, v in out.items()}


def _solve(model, sensors, truth, ft):
    problem = EstimationProblem(model, [S.JointAccelerations()] + sensors, unknown_wrenches=PARTS)
    plan = compile_estimation(problem)
    assert plan.method == "exact"
    return plan.solve(truth.q, truth.v, {"qdd": truth.qdd, **ft})


def _assert_truth(est, truth):
    assert est.ok.all()
    assert rel_err(est["tau"], truth.tau) < TOL
    assert rel_err(est["qdd"], truth.qdd) < TOL
    for link in PARTS:
        assert rel_err(est.wrench(link), truth.f_ext[link]) < TOL, link


@pytest.fixture(scope="module")
def icub():
    model, pm = robot_and_pin("icub")
    truth = PinTruth.random(model, pm, np.random.default_rng(17), 4, PARTS, scale=10.0)
    return model, truth


# ------------------------------------------------------------------ (1) iCub's declarations

@pytest.mark.parametrize("convention", ["sparsedyn", "idyntree"])
def test_icub_declares_six_ft_sensors(convention):
    path = robot_urdf("icub")
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # its Gazebo F/T blocks repeat the declarations
        sensors = from_urdf(path, convention=convention)
    oracle = _idyntree_ft(path)
    assert len(sensors) == 6 and len(oracle) == 6
    assert all(isinstance(s, S.ForceTorque) for s in sensors)
    assert {s.name: s.joint for s in sensors} == {n: j for n, (j, _, _) in oracle.items()}
    assert sd.sensors.from_urdf is from_urdf


@pytest.mark.parametrize("frame,direction", [("child", "child_to_parent"),
                                             ("parent", "parent_to_child"),
                                             ("sensor", "child_to_parent")])
def test_declared_frame_and_sign_match_idyntree(tmp_path, frame, direction):
    path = tmp_path / "icub.urdf"
    path.write_text(_declared(frame, direction))
    oracle = _idyntree_ft(path)
    sensors = from_urdf(path, convention="idyntree")
    assert sorted(s.name for s in sensors) == sorted(oracle)
    for s in sensors:
        joint, H, sign = oracle[s.name]
        assert isinstance(s, DeclaredForceTorque) and s.joint == joint
        assert s.sign == sign
        assert np.allclose(s.placement, H, atol=1e-12), s.name


# ------------------------------------------------------------------ (2) estimation, both conventions

@pytest.mark.parametrize("frame,direction", [("child", "child_to_parent"),
                                             ("parent", "parent_to_child"),
                                             ("sensor", "parent_to_child")])
def test_icub_estimate_with_declared_readings(icub, tmp_path, frame, direction):
    """Readings converted to the declared convention by the oracle's code, accepted as-is."""
    model, truth = icub
    path = robot_urdf("icub")
    if (frame, direction) != ("child", "child_to_parent"):
        path = tmp_path / "icub.urdf"
        path.write_text(_declared(frame, direction))
    ft = _oracle_readings(truth, str(path), frame)
    _assert_truth(_solve(model, from_urdf(path, convention="idyntree"), truth, ft), truth)


def test_icub_estimate_with_sparsedyn_readings(icub):
    model, truth = icub
    path = robot_urdf("icub")
    sensors = from_urdf(path)
    assert not any(isinstance(s, DeclaredForceTorque) for s in sensors)
    ft = {s.name: truth.fixed_joint_wrench(s.joint) for s in sensors}
    # two Pinocchio oracles agree on the sign: iCub's declared reading is minus ours
    declared = _oracle_readings(truth, path, "child")
    for name, w in ft.items():
        assert rel_err(-w, declared[name]) < 1e-10, name
    _assert_truth(_solve(model, sensors, truth, ft), truth)


# ------------------------------------------------------------------ (3) a wrong sign shows

def test_wrong_sign_gives_a_wrong_estimate(icub):
    model, truth = icub
    path = robot_urdf("icub")
    ft = _oracle_readings(truth, path, "child")
    ft["l_foot_ft_sensor"] = -ft["l_foot_ft_sensor"]      # a reading in the other convention
    est = _solve(model, from_urdf(path, convention="idyntree"), truth, ft)
    assert rel_err(est.wrench("l_foot"), truth.f_ext["l_foot"]) > 1e-2
    assert rel_err(est["tau"], truth.tau) > 1e-2


# ------------------------------------------------------------------ (4) IMU sensors, small URDF

_LINK = ('<link name="{}"><inertial><mass value="1"/><inertia ixx="0.1" iyy="0.1" izz="0.1" '
         'ixy="0" ixz="0" iyz="0"/></inertial></link>')


def _small_urdf(tmp_path, extra=""):
    xyz, rpy = " ".join(map(str, XYZ)), " ".join(map(str, RPY))
    text = f"""<robot name="small">{_LINK.format("base")}{_LINK.format("arm")}{_LINK.format("tool")}
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0.5" rpy="0 0 0"/><axis xyz="0 1 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="wrist_ft" type="fixed"><parent link="arm"/><child link="tool"/>
    <origin xyz="0.3 0 0" rpy="0 0.5 0"/></joint>
  <sensor name="arm_acc" type="accelerometer"><parent link="arm"/><origin xyz="{xyz}" rpy="{rpy}"/></sensor>
  <sensor name="arm_gyro" type="gyroscope"><parent link="arm"/><origin xyz="{xyz}" rpy="{rpy}"/></sensor>
  {extra}
</robot>"""
    path = tmp_path / "small.urdf"
    path.write_text(text)
    return path


def test_accelerometer_and_gyroscope_placements(tmp_path):
    path = _small_urdf(tmp_path)
    sensors = from_urdf(path)
    assert [(type(s), s.name, s.link) for s in sensors] == [
        (S.Accelerometer, "arm_acc", "arm"), (S.Gyroscope, "arm_gyro", "arm")]
    T = pin.SE3(pin.rpy.rpyToMatrix(*RPY), XYZ).homogeneous
    for s in sensors:
        assert np.allclose(s.placement, T, atol=1e-14)
    assert all(np.allclose(s.placement, T, atol=1e-14) for s in from_urdf(path, "idyntree"))
    # iDynTree's loader places them the same way
    idyn = import_idyntree()
    loader = idyn.ModelLoader()
    assert loader.loadModelFromFile(str(path))
    ss = loader.model().sensors()
    for get, name in ((ss.getAccelerometerSensor, "arm_acc"), (ss.getGyroscopeSensor, "arm_gyro")):
        H = get(0).getLinkSensorTransform().asHomogeneousTransform().toNumPy()
        assert get(0).getName() == name and np.allclose(H, T, atol=1e-12)


# ------------------------------------------------------------------ (5) what cannot be mapped

def test_unknown_types_warn_naming_the_sensor(tmp_path):
    extra = ('<sensor name="head_cam" type="camera"><parent link="arm"/></sensor>'
             '<gazebo reference="arm"><sensor name="gz_imu" type="imu"/></gazebo>'
             '<gazebo reference="shoulder"><sensor name="gz_ft" type="force_torque"/></gazebo>')
    with pytest.warns(UnmappedSensorWarning) as record:
        sensors = from_urdf(_small_urdf(tmp_path, extra))
    messages = " ".join(str(w.message) for w in record)
    for name in ("head_cam", "gz_imu", "gz_ft"):      # gz_ft: no iDynTree declaration to repeat
        assert name in messages
    assert [s.name for s in sensors] == ["arm_acc", "arm_gyro"]


def test_parent_frame_of_a_movable_joint_is_skipped(tmp_path):
    extra = ('<sensor name="shoulder_ft" type="force_torque"><parent joint="shoulder"/><force_torque>'
             '<frame>parent</frame><measure_direction>parent_to_child</measure_direction>'
             '</force_torque></sensor>')
    path = _small_urdf(tmp_path, extra)
    with pytest.warns(UnmappedSensorWarning, match="shoulder_ft"):
        assert "shoulder_ft" not in [s.name for s in from_urdf(path, convention="idyntree")]
    assert "shoulder_ft" in [s.name for s in from_urdf(path)]     # our convention: no frame to move


@pytest.mark.parametrize("extra,names", [
    ('<sensor name="ghost_ft" type="force_torque"><parent joint="no_such_joint"/><force_torque>'
     '<frame>child</frame><measure_direction>child_to_parent</measure_direction></force_torque>'
     '</sensor>', ("ghost_ft", "no_such_joint")),
    ('<sensor name="ghost_acc" type="accelerometer"><parent link="no_such_link"/></sensor>',
     ("ghost_acc", "no_such_link")),
    ('<sensor name="ghost_gyro" type="gyroscope"/>', ("ghost_gyro", "parent link")),
    ('<sensor name="bad_ft" type="force_torque"><parent joint="wrist_ft"/><force_torque>'
     '<frame>chlid</frame><measure_direction>child_to_parent</measure_direction></force_torque>'
     '</sensor>', ("bad_ft", "chlid")),
])
def test_missing_joint_or_link_raises_naming_it(tmp_path, extra, names):
    path = _small_urdf(tmp_path, extra)
    for convention in ("sparsedyn", "idyntree"):
        with pytest.raises(SensorError) as info:
            from_urdf(path, convention=convention)
        assert all(n in str(info.value) for n in names), str(info.value)


def test_bad_arguments(tmp_path):
    path = _small_urdf(tmp_path)
    # a model loaded from the URDF (path or text) keeps it; a model built otherwise does not
    names = [s.name for s in from_urdf(path)]
    assert [s.name for s in from_urdf(sd.load_urdf(str(path)))] == names
    assert [s.name for s in from_urdf(sd.load_urdf(path.read_text()))] == names
    with pytest.raises(TypeError, match="load_urdf"):
        from_urdf(sd.models.serial_chain(3))
    with pytest.raises(ValueError, match="convention"):
        from_urdf(path, convention="gazebo")
    assert [s.name for s in from_urdf(path.read_text())] == ["arm_acc", "arm_gyro"]   # XML text
