"""Sensor measurement maps (sparsedyn.sensors) against PINOCCHIO-generated readings: the reading
each sensor predicts from the ground truth must equal the one Pinocchio computes independently
(data.f, a_gf, classical frame accelerations, per-link inertias of merged links)."""
import numpy as np
import pytest

import sparsedyn as sd
from oracles import rel_err
from pin_sensors import PinTruth, robot_and_pin
from sparsedyn import sensors as S
from sparsedyn.estimation import EstimationProblem

TOL = 1e-9


_robot = robot_and_pin


def _truth(name, links, B=3, seed=0):
    model, pm = _robot(name)
    return model, PinTruth.random(model, pm, np.random.default_rng(seed), B, links)


def _simulate(sensor, model, truth):
    gt = S.ground_truth(model, truth.q, truth.v, truth.qdd, truth.f_ext)
    return sensor.simulate(model, truth.q, truth.v, gt)


def _rotation(rng):
    Q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return Q * np.sign(np.linalg.det(Q))


def _placement(rng):
    T = np.eye(4)
    T[:3, :3] = _rotation(rng)
    T[:3, 3] = rng.normal(size=3) * 0.1
    return T


@pytest.mark.parametrize("name,joint", [("humanoid", "l_foot_ft_sensor"),
                                        ("humanoid", "r_hand_ft_sensor"),
                                        ("icub", "l_leg_ft_sensor"), ("icub", "r_arm_ft_sensor"),
                                        ("icub", "l_foot_ft_sensor")])
def test_force_torque_on_fixed_joint(name, joint):
    links = {"humanoid": ["l_sole", "r_hand"], "icub": ["l_foot", "r_hand", "l_upper_leg"]}[name]
    model, truth = _truth(name, links)
    y = _simulate(S.ForceTorque(joint), model, truth)
    assert rel_err(y, truth.fixed_joint_wrench(joint)) < TOL


@pytest.mark.parametrize("joint", ["l_knee", "r_ankle_roll", "l_elbow"])
def test_force_torque_on_movable_joint_is_data_f(joint):
    model, truth = _truth("humanoid", ["l_sole"])
    if joint not in model.joint_names:
        pytest.skip(f"no joint {joint}")
    y = _simulate(S.ForceTorque(joint), model, truth)
    assert rel_err(y, truth.joint_wrench(joint)) < TOL


def test_wrench_sensors_read_the_contact_wrench():
    rng = np.random.default_rng(3)
    model, truth = _truth("humanoid", ["l_sole", "r_sole"])
    T = _placement(rng)
    full = truth.wrench_in("l_sole", T)
    assert rel_err(_simulate(S.ExternalWrench("r_sole"), model, truth), truth.f_ext["r_sole"]) < TOL
    assert rel_err(_simulate(S.LoadCells("l_sole", T), model, truth), full[:, [2, 3, 4]]) < TOL
    assert rel_err(_simulate(S.ZeroTangentialForce("l_sole", T), model, truth), full[:, :2]) < TOL


@pytest.mark.parametrize("link", ["imu_link", "l_foot", "chest"])
def test_accelerometer_and_gyroscope(link):
    rng = np.random.default_rng(4)
    model, truth = _truth("humanoid", ["l_sole"])
    T = _placement(rng)
    acc, gyro = truth.frame_motion(link, T)
    assert rel_err(_simulate(S.Accelerometer(link, T), model, truth), acc) < TOL
    assert rel_err(_simulate(S.Gyroscope(link, T), model, truth), gyro) < TOL


def test_joint_space_sensors():
    model, truth = _truth("humanoid", ["l_sole"])
    assert rel_err(_simulate(S.JointAccelerations(), model, truth), truth.qdd) < TOL
    joints = ["r_knee", "l_hip_roll"]
    idx = [model.v_slice(model.joint_index(j)).start for j in joints]
    assert rel_err(_simulate(S.JointTorques(joints), model, truth), truth.tau[:, idx]) < TOL
    assert rel_err(_simulate(S.UnactuatedBase(), model, truth), truth.tau[:, :6]) < TOL


def test_bad_sensor_declarations_name_the_element():
    model, _ = _robot("humanoid")
    with pytest.raises(S.SensorError, match="no_such_link"):
        EstimationProblem(model, [S.LoadCells("no_such_link")])
    with pytest.raises(S.SensorError, match="bogus_joint"):
        EstimationProblem(model, [S.ForceTorque("bogus_joint")])
    with pytest.raises(S.SensorError, match="nope"):
        EstimationProblem(model, [S.JointTorques(["l_knee", "nope"])])
    with pytest.raises(S.SensorError, match="l_sole.*l_foot|l_foot.*l_sole"):
        EstimationProblem(model, [S.JointAccelerations()], unknown_wrenches=["l_sole", "l_foot"])
    with pytest.raises(S.SensorError, match="twice"):
        EstimationProblem(model, [S.LoadCells("l_sole", name="x"), S.LoadCells("r_sole", name="x")])
    with pytest.raises(S.SensorError, match="placement"):
        S.Accelerometer("imu_link", np.ones((4, 4)))
    with pytest.raises(S.SensorError, match="floating base"):
        EstimationProblem(sd.models.serial_chain(3), [S.UnactuatedBase()])
