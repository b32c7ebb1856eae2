"""Kinematics, multi-DoF joints, embedded models and identities, against Pinocchio / NumPy."""
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import models
from sparsedyn.model import ModelBuilder, PlanarJoint, RevoluteJoint, SphericalJoint, WORLD
from oracles import pin, pin_model, pin_twin, random_state, rel_err, robot_urdf, to_pin_q, twin_q

TOL = 1e-10


def test_multi_dof_joints_against_pinocchio():
    b = ModelBuilder("multi")
    rng = np.random.default_rng(0)
    def T():
        M = np.eye(4)
        M[:3, 3] = rng.uniform(-0.3, 0.3, 3)
        return M
    i0 = b.add_body("base", WORLD, PlanarJoint("planar"), placement=T(), mass=2.0, com=[0.1, 0, 0],
                    inertia=np.diag([0.02, 0.03, 0.04]))
    i1 = b.add_body("ball", i0, SphericalJoint("ball_joint"), placement=T(), mass=1.5, com=[0, 0.1, 0.05],
                    inertia=np.diag([0.01, 0.02, 0.02]))
    b.add_body("tip", i1, RevoluteJoint("hinge", [0.3, -0.5, 0.8]), placement=T(), mass=0.7,
               com=[0.05, 0, 0.1], inertia=np.diag([0.003, 0.004, 0.005]))
    model = b.build()
    pm = pin_twin(model)
    pd = pm.createData()
    assert (model.nq, model.nv) == (3 + 4 + 1, 3 + 3 + 1)
    for _ in range(3):
        q, v, a = random_state(model, rng)
        pq = twin_q(model, pm, q)
        tau = sd.rnea(model, q, v, a)
        assert rel_err(tau, pin.rnea(pm, pd, pq, v, a)) <= TOL
        assert rel_err(sd.aba(model, q, v, tau), pin.aba(pm, pd, pq, v, tau)) <= TOL
        assert rel_err(sd.crba(model, q), pin.crba(pm, pd, pq)) <= TOL  # pin fills the upper part
        # crba: compare the upper triangle only (Pinocchio leaves the lower one unset)


@pytest.mark.parametrize("name,fb", [("talos", True), ("panda", False), ("icub", True)])
def test_placements_velocities_jacobians(name, fb):
    path = robot_urdf(name)
    model, pm = sd.load_urdf(path, floating_base=fb), pin_model(path, fb)
    pd = pm.createData()
    rng = np.random.default_rng(4)
    q, v, _ = random_state(model, rng, batch=3)
    kin = sd.forward_kinematics(model, q, v)
    for b in range(3):
        pq = to_pin_q(model, pm, q[b])
        pin.forwardKinematics(pm, pd, pq, v[b])
        pin.computeJointJacobians(pm, pd, pq)
        pin.updateFramePlacements(pm, pd)
        for i, link in enumerate(model.link_names):
            jid = pm.getJointId(model.joints[i].name)
            assert rel_err(kin.placements[b, i], pd.oMi[jid].homogeneous) <= TOL
            assert rel_err(kin.velocities[b, i], pd.v[jid].vector) <= TOL
        for frame in list(model.frames)[::3]:
            fid = pm.getFrameId(frame, pin.BODY)
            assert rel_err(kin.frame_placement(frame)[b], pd.oMf[fid].homogeneous) <= TOL
            J = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL)
            assert rel_err(sd.frame_jacobian(model, q[b], frame), J) <= TOL


def test_embedded_models_match_pinocchio():
    for model, path, fb in [(models.humanoid(), models.HUMANOID_URDF, True),
                            (models.hand(), models.HAND_URDF, False)]:
        pm = pin_model(path, fb)
        pd = pm.createData()
        assert model.nv == pm.nv
        if model.floating_base:
            assert model.nv - 6 >= 30
        q, v, a = random_state(model, np.random.default_rng(5))
        pq = to_pin_q(model, pm, q)
        assert rel_err(sd.rnea(model, q, v, a), pin.rnea(pm, pd, pq, v, a)) <= TOL
        assert rel_err(sd.aba(model, q, v, a), pin.aba(pm, pd, pq, v, a)) <= TOL


@pytest.mark.parametrize("make", [lambda: models.serial_chain(12), lambda: models.branched_tree(3, 2),
                                  lambda: models.random_tree(15, 3, ("revolute", "prismatic", "spherical")),
                                  models.humanoid])
def test_identities(make):
    """aba(rnea(a)) = a; M SPD; columns of M are differences of RNEA (dense NumPy oracle)."""
    model = make()
    rng = np.random.default_rng(6)
    q, v, a = random_state(model, rng, batch=4)
    tau = sd.rnea(model, q, v, a)
    assert rel_err(sd.aba(model, q, v, tau), a) <= TOL
    M = sd.crba(model, q)
    assert np.allclose(M, np.swapaxes(M, 1, 2), rtol=0, atol=1e-12 * np.abs(M).max())
    assert (np.linalg.eigvalsh(M)[:, 0] > 0).all()
    bias = sd.rnea(model, q, v, np.zeros_like(a))
    cols = np.stack([sd.rnea(model, q, v, np.broadcast_to(e, a.shape)) - bias for e in np.eye(model.nv)], -1)
    assert rel_err(M, cols) <= TOL
    # single-state calls drop the batch axis and agree with the batch
    assert rel_err(sd.rnea(model, q[1], v[1], a[1]), tau[1]) <= 1e-14


def test_finite_difference_velocity_kinematics():
    """d/dt placements = placement * [v]^ (finite differences of integrate, free-flyer + spherical)."""
    model = models.humanoid()
    rng = np.random.default_rng(7)
    q, v, _ = random_state(model, rng)
    h = 1e-6
    P0 = sd.forward_kinematics(model, q).placements
    P1 = sd.forward_kinematics(model, model.integrate(q, v * h)).placements
    Pm = sd.forward_kinematics(model, model.integrate(q, -v * h)).placements
    dP = (P1 - Pm) / (2 * h)
    vel = sd.forward_kinematics(model, q, v).velocities  # local, linear-first
    for i in range(model.nbodies):
        R = P0[i, :3, :3]
        assert np.allclose(dP[i, :3, 3], R @ vel[i, :3], atol=1e-6)
        assert np.allclose(dP[i, :3, :3], R @ pin.skew(vel[i, 3:]), atol=1e-6)


def test_a_placement_that_is_not_rigid_is_refused():
    """A reflection (det -1), a scaled rotation or a bad last row as a joint or frame placement
    would give dynamics with no physical meaning: ModelError naming the body or frame."""
    from sparsedyn.errors import ModelError
    from sparsedyn.model.joints import RevoluteJoint
    from sparsedyn.model.model import WORLD, ModelBuilder
    bad = {"reflection": np.diag([1.0, 1.0, -1.0, 1.0]), "scaled": np.diag([2.0, 2.0, 2.0, 1.0]),
           "last row": np.vstack([np.eye(4)[:3], [0.0, 0.0, 1.0, 1.0]])}
    for what, T in bad.items():
        b = ModelBuilder("t")
        with pytest.raises(ModelError, match="body 'l0': placement is not a rigid transform"):
            b.add_body("l0", WORLD, RevoluteJoint("j0", [0, 0, 1]), placement=T, mass=1.0,
                       inertia=np.eye(3))
        b.add_body("l0", WORLD, RevoluteJoint("j0", [0, 0, 1]), mass=1.0, inertia=np.eye(3))
        with pytest.raises(ModelError, match="link 'tool': placement is not a rigid transform"):
            b.add_frame("tool", 0, T)
