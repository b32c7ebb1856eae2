"""Frame Jacobians in Pinocchio's three reference frames, the centre of mass, its Jacobian and
the centroidal momentum matrix, batched, against Pinocchio (getFrameJacobian, centerOfMass,
jacobianCenterOfMass, computeCentroidalMap)."""
import warnings

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import models
from sparsedyn.errors import ModelError
from sparsedyn.model import ModelBuilder, RevoluteJoint, WORLD
from oracles import pin, pin_model, rel_err, robot_urdf

TOL = 1e-12
FRAMES = {"local": pin.LOCAL, "world": pin.WORLD, "local_world_aligned": pin.LOCAL_WORLD_ALIGNED}
CASES = [("ur5", False), ("panda", False), ("talos", True), ("icub", True), ("solo12", True),
         ("humanoid", True)]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def robot(request):
    name, fb = request.param
    path = models.HUMANOID_URDF if name == "humanoid" else robot_urdf(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.ModelWarning)
        model = sd.load_urdf(path, floating_base=fb)
    pm = pin_model(path, fb)
    q = model.random_configuration(np.random.default_rng(21), batch=4)
    return name, model, pm, q


def test_frame_jacobians_in_every_reference_frame(robot):
    name, model, pm, q = robot
    pd = pm.createData()
    frames = list(model.frames)[::2] + list(model.joint_frames)[::5]
    ours = {(f, rf): sd.frame_jacobian(model, q, f, reference_frame=rf) for f in frames for rf in FRAMES}
    for b in range(len(q)):
        pq = sd.to_pinocchio_q(model, q[b])
        pin.computeJointJacobians(pm, pd, pq)
        pin.updateFramePlacements(pm, pd)
        for f in frames:
            kind = pin.BODY if f in model.frames else pin.JOINT
            fid = pm.getFrameId(f, kind) if pm.existFrame(f, kind) else pm.getFrameId(f)
            for rf, prf in FRAMES.items():
                J = pin.getFrameJacobian(pm, pd, fid, prf)
                assert rel_err(ours[f, rf][b], J) <= TOL, (name, f, rf)


def test_centre_of_mass_its_jacobian_and_the_centroidal_map(robot):
    name, model, pm, q = robot
    pd = pm.createData()
    com, Jc, Ag = sd.center_of_mass(model, q), sd.com_jacobian(model, q), sd.centroidal_map(model, q)
    assert com.shape == (4, 3) and Jc.shape == (4, 3, model.nv) and Ag.shape == (4, 6, model.nv)
    for b in range(len(q)):
        pq = sd.to_pinocchio_q(model, q[b])
        assert rel_err(com[b], pin.centerOfMass(pm, pd, pq)) <= TOL, name
        assert rel_err(Jc[b], pin.jacobianCenterOfMass(pm, pd, pq)) <= TOL, name
        assert rel_err(Ag[b], pin.computeCentroidalMap(pm, pd, pq)) <= TOL, name


def test_single_state_default_and_names(robot):
    """One state drops the batch axis; the default is LOCAL; pinocchio.ReferenceFrame values and
    any case are accepted; B = 0 gives empty results."""
    _, model, _, q = robot
    frame = model.link_names[-1]
    J = sd.frame_jacobian(model, q, frame, reference_frame="world")
    assert np.array_equal(sd.frame_jacobian(model, q[1], frame, reference_frame=pin.WORLD), J[1])
    assert np.array_equal(sd.frame_jacobian(model, q, frame, "LOCAL_WORLD_ALIGNED"),
                          sd.frame_jacobian(model, q, frame, reference_frame="local_world_aligned"))
    assert np.array_equal(sd.frame_jacobian(model, q, frame),
                          sd.frame_jacobian(model, q, frame, reference_frame="local"))
    assert np.array_equal(sd.center_of_mass(model, q[2]), sd.center_of_mass(model, q)[2])
    assert np.array_equal(sd.centroidal_map(model, q[2]), sd.centroidal_map(model, q)[2])
    empty = np.zeros((0, model.nq))
    assert sd.frame_jacobian(model, empty, frame, reference_frame="world").shape == (0, 6, model.nv)
    assert sd.center_of_mass(model, empty).shape == (0, 3)
    assert sd.com_jacobian(model, empty).shape == (0, 3, model.nv)
    assert sd.centroidal_map(model, empty).shape == (0, 6, model.nv)


def test_bad_arguments_are_named():
    model = models.serial_chain(3)
    q = model.neutral_configuration()
    with pytest.raises(ValueError, match="reference_frame"):
        sd.frame_jacobian(model, q, model.link_names[-1], reference_frame="body")
    with pytest.raises(KeyError, match="no_such_frame"):
        sd.frame_jacobian(model, q, "no_such_frame", reference_frame="world")
    b = ModelBuilder("massless")
    b.add_body("l1", WORLD, RevoluteJoint("j1", [0, 0, 1]))
    massless = b.build()
    for fn in (sd.center_of_mass, sd.com_jacobian, sd.centroidal_map):
        with pytest.raises(ModelError, match="massless.*no mass"):
            fn(massless, np.zeros(1))
