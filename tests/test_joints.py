"""Joint types behind one protocol (sparsedyn/model/joints/): every joint file is registered and
keeps the protocol's promises (S is the derivative of the placement, integrate moves along S),
and the helical joint, added as one file, matches Pinocchio's JointModelHelicalUnaligned in the
recursive algorithms, the compiled plans on every backend, kinematics and integration."""
import pkgutil

import numpy as np
import pinocchio as pin
import pytest
from oracles import pin_twin, rel_err, twin_q

import sparsedyn as sd
from sparsedyn.model import (FreeFlyerJoint, HelicalJoint, ModelBuilder, PrismaticJoint,
                             RevoluteJoint, make_joint)
from sparsedyn.model import joints as joints_package
from sparsedyn.model.joints import JOINT_TYPES, Joint
from sparsedyn.model.model import WORLD
from sparsedyn.spatial import skew


def _instances():
    """One instance of every registered joint type (axis, pitch where it takes them)."""
    out = []
    for cls in sorted(set(JOINT_TYPES.values()), key=lambda c: c.__name__):
        if cls is HelicalJoint:
            out.append(HelicalJoint("h", [0.3, -0.5, 0.8], pitch=0.07))
        else:
            out.append(cls.make("j", [0.2, 0.9, -0.4]))
    return out


def test_every_joint_file_is_registered():
    modules = {m.name for m in pkgutil.iter_modules(joints_package.__path__)} - {"base"}
    registered = {cls.__module__.rsplit(".", 1)[1] for cls in JOINT_TYPES.values()}
    assert modules == registered
    for kind, cls in JOINT_TYPES.items():
        assert issubclass(cls, Joint) and kind in cls.KINDS
    with pytest.raises(sd.ModelError, match="pitch"):
        make_joint("helical", "screw", [0, 0, 1])


@pytest.mark.parametrize("joint", _instances(), ids=lambda j: type(j).__name__)
def test_joint_keeps_the_protocol(joint):
    """S (angular-first, successor frame) is the body twist of d/dt placement(q) for v = e_k
    (central differences along integrate), and ROTATION / translation() describe placement."""
    rng = np.random.default_rng(1)
    q = joint.random_configuration(rng)
    R, p = (x[0] for x in joint.placement(q[None]))
    h = 1e-6
    for k in range(joint.nv):
        dv = np.zeros(joint.nv)
        dv[k] = h
        Rp, pp = (x[0] for x in joint.placement(joint.integrate(q[None], dv[None])))
        Rm, pm_ = (x[0] for x in joint.placement(joint.integrate(q[None], -dv[None])))
        dR, dp = (Rp - Rm) / (2 * h), (pp - pm_) / (2 * h)
        w = R.T @ dR                                   # skew(angular velocity), successor frame
        twist = np.r_[w[2, 1], w[0, 2], w[1, 0], R.T @ dp]
        assert np.abs(twist - joint.S[:, k]).max() < 1e-7
    # the structural description reproduces the placement
    if joint.ROTATION == "angle":
        theta = q[joint.ROTATION_Q]
        K = skew(joint.rotation_axis())
        assert np.allclose(R, np.eye(3) + np.sin(theta) * K + (1 - np.cos(theta)) * K @ K)
    elif joint.ROTATION == "none":
        assert np.allclose(R, np.eye(3))
    assert np.allclose(p, sum((q[k] * d for k, d in joint.translation()), np.zeros(3)))


def _screw_robot(floating):
    """A chain mixing helical, revolute and prismatic joints (with a branch), on a free-flyer
    base or fixed."""
    b = ModelBuilder("screws", gravity=(0.0, 0.0, -9.81))
    rng = np.random.default_rng(3)

    def T():
        A = np.eye(4)
        A[:3, :3] = pin.rpy.rpyToMatrix(*rng.uniform(-1, 1, 3))
        A[:3, 3] = rng.uniform(-0.3, 0.3, 3)
        return A

    def body(name, parent, joint):
        m = rng.uniform(0.5, 2.0)
        return b.add_body(name, parent, joint, placement=T(), mass=m,
                          com=rng.uniform(-0.1, 0.1, 3), inertia=np.diag(rng.uniform(0.01, 0.1, 3)))
    parent = WORLD
    if floating:
        parent = body("base", WORLD, FreeFlyerJoint("root"))
    body("l1", parent, HelicalJoint("h1", [0, 0, 1], pitch=0.05))
    body("l2", "l1", RevoluteJoint("r2", [1, 0, 0]))
    body("l3", "l2", HelicalJoint("h3", [0.3, 0.4, 0.5], pitch=-0.2))
    body("l4", "l3", PrismaticJoint("p4", [0, 1, 0]))
    body("l5", "l2", HelicalJoint("h5", [1, 1, 0], pitch=0.01))
    return b.build()


@pytest.mark.parametrize("floating", [False, True])
def test_helical_joint_against_pinocchio(floating):
    model = _screw_robot(floating)
    pm = pin_twin(model)
    pd = pm.createData()
    rng = np.random.default_rng(5)
    B = 8
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(2, B, model.nv))
    pq = [twin_q(model, pm, qb) for qb in q]
    tau_pin = np.array([pin.rnea(pm, pd, pq[b], v[b], a[b]) for b in range(B)])
    qdd_pin = np.array([pin.aba(pm, pd, pq[b], v[b], tau_pin[b]) for b in range(B)])
    M_pin = np.array([pin.crba(pm, pd, pq[b]) for b in range(B)])
    M_pin = np.triu(M_pin) + np.transpose(np.triu(M_pin, 1), (0, 2, 1))
    assert rel_err(sd.rnea(model, q, v, a), tau_pin) <= 1e-10
    assert rel_err(sd.aba(model, q, v, tau_pin), qdd_pin) <= 1e-10
    assert rel_err(sd.crba(model, q), M_pin) <= 1e-10
    idp = sd.compile(sd.inverse_dynamics(model))
    fdp = sd.compile(sd.forward_dynamics(model))
    for backend in ("numba", "numpy", "c"):
        assert rel_err(idp.solve(q, v, qdd=a, backend=backend)["tau"], tau_pin) <= 1e-10
        assert rel_err(fdp.solve(q, v, tau=tau_pin, backend=backend)["qdd"], qdd_pin) <= 1e-9
    kin = sd.forward_kinematics(model, q)
    for b in range(B):
        pin.forwardKinematics(pm, pd, pq[b])
        pin.updateFramePlacements(pm, pd)
        for name in model.link_names:
            expect = pd.oMf[pm.getFrameId(name)].homogeneous
            assert np.abs(kin.frame_placement(name)[b] - expect).max() <= 1e-12
    dt = 0.01
    q_next = model.integrate(q, v * dt)
    for b in range(B):
        expect = pin.integrate(pm, pq[b], v[b] * dt)
        assert np.abs(twin_q(model, pm, q_next[b]) - expect).max() <= 1e-12


def test_helical_joint_changes_the_fingerprint():
    a = _screw_robot(False)
    b = ModelBuilder("screws", gravity=(0.0, 0.0, -9.81))
    assert a.fingerprint() != _screw_robot(True).fingerprint()
    b.add_body("l1", WORLD, HelicalJoint("h1", [0, 0, 1], pitch=0.05), mass=1.0,
               inertia=np.eye(3))
    c = ModelBuilder("screws", gravity=(0.0, 0.0, -9.81))
    c.add_body("l1", WORLD, HelicalJoint("h1", [0, 0, 1], pitch=0.06), mass=1.0,
               inertia=np.eye(3))
    assert b.build().fingerprint() != c.build().fingerprint()
