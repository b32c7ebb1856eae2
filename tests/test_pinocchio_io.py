"""sd.from_pinocchio, sd.to_pinocchio_q / from_pinocchio_q and gravity as a model parameter,
against Pinocchio (the oracle): its joint order, placements, inertias, frames and dynamics."""
import os
import warnings

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import models
from sparsedyn.errors import ModelError, PlanMismatchError
from sparsedyn.spatial import operator_to_linear_first
from oracles import erd_root, pin, pin_model, rel_err, robot_urdf, to_pin_q

TOL = 1e-10
KINOVA = "kinova_description/robots/kinova.urdf"        # continuous joints: (cos, sin) in Pinocchio


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.ModelWarning)
        return fn(*args, **kw)


def fd_err(M, qdd, qdd_ref, tau):
    """Forward-dynamics error as tests/test_recursive_vs_pinocchio.py measures it, with
    Pinocchio's mass matrix M: the backward error M (qdd - qdd_ref) over the torque scale, and
    the plain relative error too where M is well conditioned (iCub's cond ~ 2e7 puts any
    double-precision FD, Pinocchio's included, ~cond * eps apart)."""
    backward = float(np.abs(M @ (qdd - qdd_ref)).max() / max(1.0, np.abs(tau).max()))
    return max(backward, rel_err(qdd, qdd_ref)) if np.linalg.cond(M) < 1e6 else backward


def _pin_models():
    out = [(n, pin_model(robot_urdf(n), fb)) for n, fb in
           [("ur5", False), ("panda", False), ("talos", True), ("icub", True), ("solo12", True)]]
    out.append(("humanoid", pin_model(models.HUMANOID_URDF, True)))
    out.append(("kinova", pin_model(os.path.join(erd_root(), KINOVA))))
    return out


@pytest.fixture(scope="module", params=range(7), ids=["ur5", "panda", "talos", "icub", "solo12",
                                                      "humanoid", "kinova"])
def pair(request):
    name, pm = _pin_models()[request.param]
    return name, pm, _quiet(sd.from_pinocchio, pm)


def test_structure_is_pinocchios(pair):
    _, pm, model = pair
    assert [j.name for j in model.joints] == list(pm.names)[1:]            # joint order
    assert model.nv == pm.nv and model.floating_base == (pm.joints[1].shortname() == "JointModelFreeFlyer")
    for i in range(model.nbodies):
        jid = i + 1
        assert model.parents[i] == pm.parents[jid] - 1
        assert np.array_equal(model.joint_placements[i], pm.jointPlacements[jid].homogeneous)
        assert rel_err(operator_to_linear_first(model.inertias[i]), pm.inertias[jid].matrix()) <= 1e-15
    unbounded = [j.name for j in model.joints if getattr(j, "unbounded", False)]
    assert unbounded == [pm.names[k] for k in range(1, pm.njoints) if pm.joints[k].nq == 2]
    assert np.array_equal(model.gravity, pm.gravity.linear)


def test_dynamics_and_frames_equal_pinocchio(pair):
    name, pm, model = pair
    pd = pm.createData()
    rng = np.random.default_rng(11)
    B = 3
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(B, model.nv)), rng.normal(size=(B, model.nv))
    pq = sd.to_pinocchio_q(model, q)
    tau, M = sd.rnea(model, q, v, a), sd.crba(model, q)
    kin = sd.forward_kinematics(model, q)
    body_frames = [f.name for f in pm.frames if f.type == pin.BODY][::2]
    for b in range(B):
        assert rel_err(tau[b], pin.rnea(pm, pd, pq[b], v[b], a[b])) <= TOL
        Mp = pin.crba(pm, pd, pq[b])
        assert rel_err(np.triu(M[b]), np.triu(Mp)) <= TOL
        Mp = np.triu(Mp) + np.triu(Mp, 1).T
        qdd = pin.aba(pm, pd, pq[b], v[b], tau[b])
        assert fd_err(Mp, sd.aba(model, q[b], v[b], tau[b]), qdd, tau[b]) <= TOL
        pin.framesForwardKinematics(pm, pd, pq[b])
        for f in body_frames:
            oMf = pd.oMf[pm.getFrameId(f, pin.BODY)].homogeneous
            assert rel_err(kin.frame_placement(f)[b], oMf) <= TOL, (name, f)


def test_the_model_of_a_urdf_equals_load_urdf():
    """from_pinocchio(buildModelFromUrdf(path)) is load_urdf(path): links, frames (placements,
    inertias of merged links, parents), limits."""
    for name, fb in [("talos", False), ("ur5", False), ("icub", True)]:
        path = robot_urdf(name)
        ours, theirs = _quiet(sd.load_urdf, path, floating_base=fb), _quiet(sd.from_pinocchio, pin_model(path, fb))
        assert theirs.link_names == ours.link_names and theirs.joint_names == ours.joint_names
        assert set(theirs.frames) == set(ours.frames) and set(theirs.joint_frames) == set(ours.joint_frames)
        for key, fr in ours.frames.items():
            other = theirs.frames[key]
            assert (other.body, other.parent) == (fr.body, fr.parent), key
            assert np.allclose(other.placement, fr.placement, rtol=0, atol=1e-12), key
            assert (other.inertia is None) == (fr.inertia is None), key
            if fr.inertia is not None:
                assert np.allclose(other.inertia, fr.inertia, rtol=0, atol=1e-12), key
        for key, fr in ours.joint_frames.items():
            other = theirs.joint_frames[key]
            assert (other.body, other.parent, other.child, other.kind) == (fr.body, fr.parent, fr.child, fr.kind)
        assert np.array_equal(theirs.lower_position_limit, ours.lower_position_limit)
        assert np.array_equal(theirs.upper_position_limit, ours.upper_position_limit)
        assert np.array_equal(theirs.effort_limit, ours.effort_limit)


def test_every_supported_pinocchio_joint_type():
    """A hand-built Pinocchio tree with each joint type we map (unaligned axes, helical pitch,
    planar and unbounded revolute stored as cos/sin), its dynamics equal to 1e-10."""
    rng = np.random.default_rng(3)
    axis = lambda: (lambda x: x / np.linalg.norm(x))(rng.normal(size=3))   # noqa: E731
    pm = pin.Model()
    pm.gravity = pin.Motion(np.array([0.4, -0.3, -9.7]), np.zeros(3))
    jms = [pin.JointModelFreeFlyer(), pin.JointModelRevoluteUnaligned(axis()), pin.JointModelRUBY(),
           pin.JointModelPrismaticUnaligned(axis()), pin.JointModelHelicalUnaligned(axis(), 0.07),
           pin.JointModelSpherical(), pin.JointModelPlanar(), pin.JointModelRZ(), pin.JointModelPX(),
           pin.JointModelHY(-0.2), pin.JointModelRevoluteUnboundedUnaligned()]
    parent = 0
    for k, jm in enumerate(jms):
        M = pin.SE3.Random()
        parent = pm.addJoint(parent if k % 3 else max(parent - 1, 0), jm, M, f"j{k}")
        pm.appendBodyToJoint(parent, pin.Inertia.Random(), pin.SE3.Identity())
        pm.addFrame(pin.Frame(f"l{k}", parent, pin.SE3.Identity(), pin.FrameType.BODY))
    model = sd.from_pinocchio(pm)
    assert [j.kind for j in model.joints] == ["free", "revolute", "revolute", "prismatic", "helical",
                                              "spherical", "planar", "revolute", "prismatic", "helical",
                                              "revolute"]
    assert model.nv == pm.nv and model.nq == pm.nq - 3                     # 3 cos/sin pairs
    pd = pm.createData()
    for _ in range(3):
        pq = pin.randomConfiguration(pm, -np.ones(pm.nq), np.ones(pm.nq))
        q = sd.from_pinocchio_q(model, pm, pq)
        assert rel_err(sd.to_pinocchio_q(model, q, pm), pq) <= 1e-15
        v, a = rng.normal(size=pm.nv), rng.normal(size=pm.nv)
        tau = sd.rnea(model, q, v, a)
        assert rel_err(tau, pin.rnea(pm, pd, pq, v, a)) <= TOL
        assert rel_err(sd.aba(model, q, v, tau), pin.aba(pm, pd, pq, v, tau)) <= TOL


def test_unsupported_joint_types_are_named():
    pm = pin.Model()
    pm.addJoint(0, pin.JointModelRX(), pin.SE3.Identity(), "fine")
    pm.addJoint(1, pin.JointModelSphericalZYX(), pin.SE3.Identity(), "euler_wrist")
    with pytest.raises(ModelError, match="euler_wrist.*SphericalZYX"):
        sd.from_pinocchio(pm)
    with pytest.raises(TypeError, match="pin_model"):
        sd.from_pinocchio("not a model")


def test_configuration_conversion_batched_and_single():
    """to_pinocchio_q with or without the Pinocchio model equals the tests' own conversion
    (oracles.to_pin_q), batched and single; from_pinocchio_q inverts it; B = 0 is empty."""
    model = sd.load_urdf(models.HUMANOID_URDF, floating_base=True)
    pm = pin_model(models.HUMANOID_URDF, True)
    continuous = sum(getattr(j, "unbounded", False) for j in model.joints)
    assert continuous == 2 and pm.nq == model.nq + continuous             # (cos, sin) each
    q = model.random_configuration(5, batch=6)
    want = np.array([to_pin_q(model, pm, qb) for qb in q])
    assert np.array_equal(sd.to_pinocchio_q(model, q), want)
    assert np.array_equal(sd.to_pinocchio_q(model, q, pm), want)
    assert np.array_equal(sd.to_pinocchio_q(model, q[2]), want[2])
    back = sd.from_pinocchio_q(model, pm, want)
    assert rel_err(back, q) <= 1e-15 and sd.from_pinocchio_q(model, None, want[1]).shape == (model.nq,)
    assert sd.to_pinocchio_q(model, np.zeros((0, model.nq))).shape == (0, pm.nq)
    assert sd.from_pinocchio_q(model, pm, np.zeros((0, pm.nq))).shape == (0, model.nq)
    neutral = sd.from_pinocchio_q(model, pm, pin.neutral(pm))
    assert np.array_equal(neutral, model.neutral_configuration())
    from sparsedyn.bench import pin_configuration                          # the old name
    assert np.array_equal(pin_configuration(model, pm, q[0]), want[0])


def test_configuration_conversion_errors_name_the_argument():
    model = sd.load_urdf(models.HUMANOID_URDF, floating_base=True)
    with pytest.raises(ValueError, match="q: expected shape"):
        sd.to_pinocchio_q(model, np.zeros(model.nq + 1))
    with pytest.raises(ValueError, match="q: expected shape"):
        sd.from_pinocchio_q(model, None, np.zeros(model.nq))              # ours, not Pinocchio's
    other = pin_model(robot_urdf("ur5"))
    with pytest.raises(ModelError, match="joint 'root_joint'.*not in the Pinocchio model"):
        sd.to_pinocchio_q(model, model.neutral_configuration(), other)


# ---------------------------------------------------------------------------------- gravity


G = np.array([0.7, -1.1, -1.62])


@pytest.mark.parametrize("name,fb", [("panda", False), ("talos", True)])
def test_gravity_parameter_against_pinocchio(name, fb):
    path = robot_urdf(name)
    pm = pin_model(path, fb)
    pm.gravity = pin.Motion(G, np.zeros(3))
    pd = pm.createData()
    loaded = _quiet(sd.load_urdf, path, floating_base=fb, gravity=G)
    default = _quiet(sd.load_urdf, path, floating_base=fb)
    changed = default.with_gravity(G)
    assert np.array_equal(default.gravity, [0, 0, -9.81])                 # unchanged: read-only
    assert changed is not default and changed.urdf_source == default.urdf_source
    assert changed.fingerprint() == loaded.fingerprint() != default.fingerprint()
    rng = np.random.default_rng(8)
    q = loaded.random_configuration(rng, batch=3)
    v, a = rng.normal(size=(3, loaded.nv)), rng.normal(size=(3, loaded.nv))
    for model in (loaded, changed):
        tau = sd.rnea(model, q, v, a)
        qdd = sd.aba(model, q, v, tau)
        for b in range(3):
            pq = sd.to_pinocchio_q(model, q[b])
            assert rel_err(tau[b], pin.rnea(pm, pd, pq, v[b], a[b])) <= TOL
            assert rel_err(qdd[b], pin.aba(pm, pd, pq, v[b], tau[b])) <= TOL
    assert rel_err(sd.from_pinocchio(pm).gravity, G) == 0


def test_a_plan_is_tied_to_its_gravity(tmp_path):
    model = sd.load_urdf(robot_urdf("panda"), gravity=G)
    pm = pin_model(robot_urdf("panda"))
    pm.gravity = pin.Motion(G, np.zeros(3))
    pd = pm.createData()
    plan = sd.compile(sd.inverse_dynamics(model))
    rng = np.random.default_rng(2)
    q = model.random_configuration(rng, batch=4)
    v, a = rng.normal(size=(4, model.nv)), rng.normal(size=(4, model.nv))
    tau = plan.solve(q, v, qdd=a)["tau"]
    for b in range(4):
        assert rel_err(tau[b], pin.rnea(pm, pd, q[b], v[b], a[b])) <= 1e-9
    path = tmp_path / "panda_id.npz"
    plan.save(path)
    assert sd.load_plan(path, model.with_gravity(G)) is not None            # same gravity: accepted
    with pytest.raises(PlanMismatchError):
        sd.load_plan(path, model.with_gravity([0.0, 0.0, -9.81]))


def test_bad_gravity_is_named():
    model = sd.models.serial_chain(3)
    for bad in ([0, 0], [0, np.nan, -9.81], "down"):
        with pytest.raises(ModelError, match="gravity"):
            model.with_gravity(bad)
    with pytest.raises(ModelError, match="gravity"):
        sd.load_urdf(models.HAND_URDF, gravity=[0, 0, np.inf])


def test_armature_is_the_models_and_equals_pinocchios():
    """Pinocchio's model.armature converts into the Model's (no warning): rnea, aba and crba
    equal Pinocchio's, which add it to the mass matrix's diagonal."""
    pm = pin_model(robot_urdf("panda"), False)
    pm.armature[1], pm.armature[4] = 0.25, 0.03
    with warnings.catch_warnings():
        warnings.simplefilter("error", sd.ModelWarning)
        model = sd.from_pinocchio(pm)
    assert np.array_equal(model.armature, pm.armature)
    pd = pm.createData()
    rng = np.random.default_rng(4)
    for _ in range(3):
        q, v, a = pin.randomConfiguration(pm), rng.normal(size=pm.nv), rng.normal(size=pm.nv)
        M = pin.crba(pm, pd, q)
        M = np.triu(M) + np.triu(M, 1).T
        assert rel_err(sd.crba(model, q), M) <= 1e-12
        tau = pin.rnea(pm, pd, q, v, a)
        assert rel_err(sd.rnea(model, q, v, a), tau) <= 1e-12
        assert rel_err(sd.aba(model, q, v, tau), pin.aba(pm, pd, q, v, tau)) <= 1e-10
