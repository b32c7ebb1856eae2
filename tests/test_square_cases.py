"""Every public function on the shapes where a (..., 6, k) array is also a 6x6 one, or where a
batch or joint axis has length one: nv = 6 (UR5, a free body with no joints), one 6D contact
(m = 6), nv = 1, B = 1 and a single state. Pinocchio is the oracle.

A conversion that decides by shape what to re-order (rows only, or rows and columns) is right on
most robots and silently wrong on these: the UR5's LOCAL Jacobian once came out with its columns
swapped as well as its rows."""
from __future__ import annotations

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.delassus import BACKENDS, COMPILED, METHODS
from sparsedyn.models import serial_chain
from oracles import pin, pin_model, pin_twin, rel_err, robot_urdf, to_pin_q, twin_q

TOL = 1e-10

FREE_BODY_URDF = """<robot name="free_body">
  <link name="body">
    <inertial><origin xyz="0.1 -0.05 0.02" rpy="0.3 0.2 0.1"/><mass value="2.5"/>
      <inertia ixx="0.3" ixy="0.01" ixz="0.02" iyy="0.4" iyz="-0.01" izz="0.5"/></inertial>
  </link>
</robot>"""


def _cases():
    """(name, our model, Pinocchio model, q converter, frame name)."""
    out = []
    ur5 = robot_urdf("ur5")
    out.append(("ur5", sd.load_urdf(ur5), pin_model(ur5), to_pin_q, "tool0"))
    out.append(("free_body", sd.load_urdf(FREE_BODY_URDF, floating_base=True),
                pin_model(FREE_BODY_URDF, True), to_pin_q, "body"))
    one = serial_chain(1)
    out.append(("chain1", one, pin_twin(one), twin_q, one.link_names[-1]))
    return out


CASES = {c[0]: c for c in _cases()}


@pytest.fixture(params=sorted(CASES))
def case(request):
    return CASES[request.param]


def _states(model, B, seed=3):
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(2, B, model.nv))
    return q, v, a


def _pin_data(pmodel):
    return pmodel.createData()


def _matrix(x, rows, cols):
    """Pinocchio's Python bindings hand a (6, 1) matrix back as a (6,) vector."""
    return np.asarray(x).reshape(rows, cols)


def test_square_case_shapes(case):
    """The cases really are the square and unit ones this file is about."""
    name, model, *_ = case
    assert model.nv == {"ur5": 6, "free_body": 6, "chain1": 1}[name]


@pytest.mark.parametrize("B", [1, 3])
def test_frame_jacobian_local_vs_pinocchio(case, B):
    _, model, pmodel, conv, frame = case
    q, _, _ = _states(model, B)
    J = sd.frame_jacobian(model, q, frame)
    assert J.shape == (B, 6, model.nv)
    pdata = _pin_data(pmodel)
    fid = pmodel.getFrameId(frame)
    for b in range(B):
        pq = conv(model, pmodel, q[b])
        pin.computeJointJacobians(pmodel, pdata, pq)
        pin.updateFramePlacements(pmodel, pdata)
        ref = _matrix(pin.getFrameJacobian(pmodel, pdata, fid, pin.LOCAL), 6, model.nv)
        assert rel_err(J[b], ref) <= TOL
    single = sd.frame_jacobian(model, q[0], frame)
    assert single.shape == (6, model.nv) and np.array_equal(single, J[0])


@pytest.mark.parametrize("B", [1, 3])
def test_dynamics_vs_pinocchio(case, B):
    """rnea, aba, crba, forward kinematics and the compiled id/fd plans."""
    _, model, pmodel, conv, frame = case
    q, v, a = _states(model, B)
    tau = sd.rnea(model, q, v, a)
    qdd = sd.aba(model, q, v, tau)
    M = sd.crba(model, q)
    kin = sd.forward_kinematics(model, q, v)
    id_plan = sd.compile(sd.inverse_dynamics(model))
    fd_plan = sd.compile(sd.forward_dynamics(model))
    assert tau.shape == qdd.shape == (B, model.nv) and M.shape == (B, model.nv, model.nv)
    pdata = _pin_data(pmodel)
    for b in range(B):
        pq = conv(model, pmodel, q[b])
        assert rel_err(tau[b], pin.rnea(pmodel, pdata, pq, v[b], a[b])) <= TOL
        assert rel_err(qdd[b], a[b]) <= 1e-9
        Mp = _matrix(pin.crba(pmodel, pdata, pq), model.nv, model.nv)
        assert rel_err(M[b], np.triu(Mp) + np.triu(Mp, 1).T) <= TOL
        pin.forwardKinematics(pmodel, pdata, pq, v[b])
        pin.updateFramePlacements(pmodel, pdata)
        fid = pmodel.getFrameId(frame)
        assert rel_err(kin.frame_placement(frame)[b], pdata.oMf[fid].homogeneous) <= TOL
        jid = pmodel.frames[fid].parentJoint
        assert rel_err(kin.velocities[b, -1], pdata.v[jid].vector) <= TOL
    for backend in ("numba", "numpy", "c"):
        assert rel_err(id_plan.solve(q, v, qdd=a, backend=backend)["tau"], tau) <= TOL
        assert rel_err(fd_plan.solve(q, v, tau=tau, backend=backend)["qdd"], a) <= 1e-9
    one = id_plan.solve(q[0], v[0], qdd=a[0])["tau"]
    assert one.shape == (model.nv,) and rel_err(one, tau[0]) <= TOL


@pytest.mark.parametrize("method, backend", [(m, b) for m in sorted(METHODS) for b in BACKENDS
                                             if b == "numpy" or m in COMPILED])
def test_delassus_of_one_6d_contact_vs_pinocchio(case, method, backend):
    """m = 6 (one 6D contact): the Delassus matrix is 6x6 like a spatial operator."""
    _, model, pmodel, conv, frame = case
    q, _, _ = _states(model, 2)
    contacts = [sd.Contact(frame, "6d")]
    G = sd.delassus(model, q, contacts, method=method, backend=backend)
    J = sd.contact_jacobian(model, q, contacts)
    assert G.shape == (2, 6, 6) and J.shape == (2, 6, model.nv)
    pdata = _pin_data(pmodel)
    fid = pmodel.getFrameId(frame)
    for b in range(2):
        pq = conv(model, pmodel, q[b])
        pin.computeJointJacobians(pmodel, pdata, pq)
        pin.updateFramePlacements(pmodel, pdata)
        Jp = _matrix(pin.getFrameJacobian(pmodel, pdata, fid, pin.LOCAL), 6, model.nv)
        Mp = _matrix(pin.crba(pmodel, pdata, pq), model.nv, model.nv)
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        assert rel_err(J[b], Jp) <= TOL
        assert rel_err(G[b], Jp @ np.linalg.solve(Mp, Jp.T)) <= 1e-8


def test_b_equal_one_keeps_its_batch_axis_and_single_states_lose_it(case):
    _, model, _, _, frame = case
    q, v, a = _states(model, 1)
    assert sd.rnea(model, q, v, a).shape == (1, model.nv)
    assert sd.rnea(model, q[0], v[0], a[0]).shape == (model.nv,)
    assert sd.frame_jacobian(model, q, frame).shape == (1, 6, model.nv)
    assert sd.crba(model, q[0]).shape == (model.nv, model.nv)
