"""Armature (rotor inertia, Model.with_armature: Pinocchio's model.armature, MuJoCo's
dof_armature) on every route, against Pinocchio with the same model.armature: its rnea, aba,
crba and derivatives add it to the mass matrix's diagonal, constraintDynamics too. The MJCF side
is in test_mjcf.py (MuJoCo with dof_armature), the loaders' in test_pinocchio_io.py."""
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.errors import ModelError, PlanMismatchError
from sparsedyn.models import HUMANOID_URDF
from oracles import pin, pin_model, rel_err, to_pin_q
from test_constrained import _pinocchio

B = 3


@pytest.fixture(scope="module")
def robot():
    """The humanoid (free-flyer, 49 DoF) with armature up to 0.3 on its actuated joints, and
    Pinocchio's model of the same URDF with the same model.armature."""
    model = sd.load_urdf(HUMANOID_URDF, floating_base=True)
    rng = np.random.default_rng(11)
    armature = np.r_[np.zeros(6), rng.uniform(0.01, 0.3, model.nv - 6)]
    pm = pin_model(HUMANOID_URDF, True)
    pm.armature = armature.copy()
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(2, B, model.nv))
    pd = pm.createData()
    pq = [to_pin_q(model, pm, q[b]) for b in range(B)]
    M = []
    for b in range(B):
        Mb = pin.crba(pm, pd, pq[b])
        M.append(np.triu(Mb) + np.triu(Mb, 1).T)
    tau = np.array([pin.rnea(pm, pd, pq[b], v[b], a[b]) for b in range(B)])
    return model.with_armature(armature), model, pm, q, v, a, tau, np.array(M)


def test_the_armature_matters_here(robot):
    """(Else every comparison below would pass without it.)"""
    arm_model, model, pm, q, v, a, tau, M = robot
    assert np.abs(sd.rnea(model, q, v, a) - tau).max() > 1e-2               # [N m]
    assert np.abs(sd.crba(model, q) - M).max() > 1e-2                       # [kg m^2]


def test_recursive_algorithms_equal_pinocchio(robot):
    model, _, pm, q, v, a, tau, M = robot
    assert rel_err(sd.rnea(model, q, v, a), tau) <= 1e-12
    assert rel_err(sd.aba(model, q, v, tau), a) <= 1e-9
    assert rel_err(sd.crba(model, q), M) <= 1e-12
    assert rel_err(sd.crba(model, q, backend="numba"), M) <= 1e-12
    assert rel_err(sd.crba(model, q, backend="c"), M) <= 1e-12
    assert rel_err(sd.compile(sd.mass_matrix(model)).solver()(q[1]), M[1]) <= 1e-12
    plan = sd.compile(sd.mass_matrix(model))
    L = plan.factor(q, backend="numba")
    assert rel_err(np.swapaxes(L, 1, 2) @ L, M) <= 1e-12                  # M = L^T L
    assert rel_err(plan.factor(q, backend="numpy"), L) <= 1e-12                # ltl(crba)


@pytest.mark.parametrize("backend", ["numpy", "numba", "c"])
def test_sparse_plans_equal_pinocchio(robot, backend):
    """Nori's joint rows gain diag(armature) qdd_i: a constant entry of D, on every backend."""
    model, _, pm, q, v, a, tau, M = robot
    got_tau = sd.compile(sd.inverse_dynamics(model)).solve(q, v, qdd=a, backend=backend)["tau"]
    assert rel_err(got_tau, tau) <= 1e-12
    qdd = sd.compile(sd.forward_dynamics(model)).solve(q, v, tau=tau, backend=backend)["qdd"]
    assert rel_err(qdd, a) <= 1e-9
    one = sd.compile(sd.inverse_dynamics(model)).solve(q[0], v[0], qdd=a[0], backend=backend)
    assert rel_err(one["tau"], tau[0]) <= 1e-12


def test_derivatives_equal_pinocchio(robot):
    """(The C route's armature: tests/test_derivatives_c.py, on panda.)"""
    model, _, pm, q, v, a, tau, M = robot
    pd = pm.createData()
    pq = to_pin_q(model, pm, q[0])
    dq, dv, da = sd.rnea_derivatives(model, q[0], v[0], a[0])
    pin.computeRNEADerivatives(pm, pd, pq, v[0], a[0])
    assert rel_err(dq, pd.dtau_dq) <= 1e-9 and rel_err(dv, pd.dtau_dv) <= 1e-9
    assert rel_err(da, M[0]) <= 1e-12
    dq, dv, dt = sd.aba_derivatives(model, q[0], v[0], tau[0])
    pin.computeABADerivatives(pm, pd, pq, v[0], tau[0])
    assert rel_err(dq, pd.ddq_dq) <= 1e-9 and rel_err(dv, pd.ddq_dv) <= 1e-9
    assert rel_err(dt, np.linalg.inv(M[0])) <= 1e-9


@pytest.mark.parametrize("method", ["pv-osimr", "pv-osim", "efpa", "kjr", "ltl-osim", "dense",
                                    "sparse"])
def test_delassus_matrices_equal_pinocchios_mass_matrix(robot, method):
    model, _, pm, q, v, a, tau, M = robot
    contacts = [sd.Contact("l_sole", "6d"), sd.Contact("r_index_tip", "3d")]
    J = sd.contact_jacobian(model, q, contacts)
    ref = J @ np.linalg.solve(M, np.swapaxes(J, 1, 2))
    backends = ("numba", "numpy") if method in ("pv-osimr", "sparse") else (None,)
    for backend in backends:
        assert rel_err(sd.delassus(model, q, contacts, method=method, backend=backend), ref) <= 1e-9


def test_constrained_dynamics_equals_pinocchio(robot):
    model, _, pm, q, v, a, tau, M = robot
    contacts = [sd.Contact("l_sole", "6d"), sd.Contact("r_sole", "6d")]
    qdd_ref, lam_ref = _pinocchio(model, pm, contacts, q, v, tau)
    res = sd.constrained_forward_dynamics(model, contacts).solve(q, v, tau)
    assert rel_err(res["qdd"], qdd_ref) <= 1e-9
    assert rel_err(res["lambda"], lam_ref) <= 1e-9


def test_estimation_recovers_the_torques(robot):
    """Joint torques from joint accelerations and the ankle F/T sensors: the estimate of tau
    includes the rotor inertia's torque (exact, compiled and NumPy). The motion is the one the
    torques (base unactuated) and a wrench on the left foot make (aba with the armature, equal
    to Pinocchio's above)."""
    from sparsedyn.sensors import ForceTorque, JointAccelerations, ground_truth
    model, _, pm, q, v, a, tau, M = robot
    rng = np.random.default_rng(5)
    tau_true = np.c_[np.zeros((B, 6)), 10 * rng.normal(size=(B, model.nv - 6))]
    w = {"l_foot": rng.normal(size=(B, 6)) * [20, 20, 200, 5, 5, 2]}
    qdd = sd.aba(model, q, v, tau_true, f_ext=w)
    sensors = [JointAccelerations(), ForceTorque("l_foot_ft_sensor"), ForceTorque("r_foot_ft_sensor")]
    truth = ground_truth(model, q, v, qdd, f_ext=w)
    readings = {s.name: s.simulate(model, q, v, truth) for s in sensors}
    problem = sd.EstimationProblem(model, sensors, unknown_wrenches=["l_foot", "r_foot", "chest"])
    plan = sd.compile_estimation(problem, method="exact")
    for backend in ("numba", "numpy"):
        est = plan.solve(q, v, readings, backend=backend)
        assert rel_err(est["tau"], tau_true) <= 1e-9
        assert rel_err(est.wrench("l_foot"), w["l_foot"]) <= 1e-9
    # over-determined by the base's six rows: the MAP route (compiled chain program and NumPy)
    problem = sd.EstimationProblem(model, sensors, unknown_wrenches=["l_foot", "r_foot"])
    plan = sd.compile_estimation(problem, method="map")
    for backend in ("numba", "numpy"):
        est = plan.solve(q, v, readings, backend=backend)
        assert rel_err(est["tau"], tau_true) <= 1e-9


def test_armature_is_part_of_the_fingerprint(robot, tmp_path):
    arm_model, model, *_ = robot
    assert model.fingerprint() == sd.load_urdf(HUMANOID_URDF, floating_base=True).fingerprint()
    assert arm_model.fingerprint() != model.fingerprint()
    assert model.with_armature(np.zeros(model.nv)).fingerprint() == model.fingerprint()
    path = tmp_path / "fd.npz"
    sd.compile(sd.forward_dynamics(model)).save(path)
    with pytest.raises(PlanMismatchError):
        sd.load_plan(path, arm_model)


def test_bad_armature_is_named(robot):
    _, model, *_ = robot
    with pytest.raises(ModelError, match="armature: expected 49 finite"):
        model.with_armature(np.zeros(3))
    with pytest.raises(ModelError, match="armature: expected 49 finite"):
        model.with_armature(np.full(model.nv, np.nan))
    bad = np.zeros(model.nv)
    bad[model.v_index[model.joint_index("l_knee")]] = -0.1
    with pytest.raises(ModelError, match=r"negative on the coordinates of joints \['l_knee'\]"):
        model.with_armature(bad)


def test_formulations_without_a_joint_space_inertia_refuse_it(robot):
    """Yamane-Nakamura's virtual-work FD (links as free bodies, joints as constraints) and the
    cluster recursions (their own armature argument on independent coordinates) have no place
    for it: a ModelError names the joints instead of a silent omission."""
    model, _, pm, q, v, a, tau, M = robot
    with pytest.raises(ModelError, match=r"yamane_forward_dynamics: .* armature .*'l_hip_yaw'"):
        sd.yamane_forward_dynamics(model, q, v, tau)
    with pytest.raises(ModelError, match=r"closed_chain_forward_dynamics: .* armature"):
        sd.closed_chain_forward_dynamics(model, q, v, tau, [])
    cm = sd.ClusterModel(model)
    for call in (lambda: sd.c_rnea(cm, q, v, a), lambda: sd.c_aba(cm, q, v, tau),
                 lambda: sd.c_efpa(cm, q, ["l_sole"])):
        with pytest.raises(ModelError, match="armature"):
            call()
