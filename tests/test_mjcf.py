"""MJCF models through MuJoCo's own compiler (sd.load_mjcf / sd.from_mujoco) and the state
converters, against MuJoCo itself: mj_rne (inverse dynamics), mj_forward's qacc (forward
dynamics), mj_fullM (mass matrix), body placements, mj_jac / mj_jacBody, on a synthetic model
that has every joint type and on robots of the mujoco-menagerie (skipped without mujoco, and per
robot when the menagerie cannot provide it, e.g. offline). MENAGERIE_ROOT=<checkout> reads them
from a local checkout instead, which may hold the XML files only (menagerie_model says how).

What MuJoCo adds to rigid-body dynamics is switched off first (`neutralised`): constraints
(contacts, joint limits, equality constraints, friction loss), actuators, joint springs and
dampers, gravity compensation, fluid forces. The joints' armature (rotor inertia, dof_armature)
stays: the Model carries it."""
import os
import sys
import warnings

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

import sparsedyn as sd                                                      # noqa: E402
from sparsedyn.errors import ModelError                                     # noqa: E402
from sparsedyn.robots import CommandError, load_robot                       # noqa: E402

TOL = 1e-9
#: (menagerie robot, entry point): quadrupeds, humanoids (g1 with its hands), arms, hands, and
#: Cassie (degrees, joint refs, ball joints, its leg loops as equality constraints: the tree is
#: compared). Allegro's inertia comes from its meshes: compared on a complete checkout only.
MENAGERIE = [("unitree_go1", "go1"), ("anybotics_anymal_c", "anymal_c"), ("unitree_h1", "h1"),
             ("unitree_g1", "g1"), ("agility_cassie", "cassie"), ("franka_emika_panda", "panda"),
             ("universal_robots_ur5e", "ur5e"), ("shadow_hand", "left_hand"),
             ("wonik_allegro", "left_hand")]

SYNTHETIC = """
<mujoco model="synthetic">
  <option gravity="0.3 -0.2 -9.5"/>
  <worldbody>
    <body name="base" pos="0.1 0.2 1.0" quat="0.9 0.1 0.2 0.3">
      <freejoint name="root"/>
      <inertial pos="0.01 -0.02 0.03" mass="3.0" fullinertia="0.05 0.06 0.07 0.001 -0.002 0.003"/>
      <site name="imu" pos="0.05 0 0.1" quat="0.7 0.7 0 0"/>
      <body name="upper" pos="0.2 0 0" euler="0.1 0.2 0.3">
        <joint name="hip" type="hinge" axis="0.3 0.4 0.8" pos="0.01 0.02 -0.03" ref="0.4"
               range="-1 1" damping="3" armature="0.2" stiffness="5"/>
        <inertial pos="0 0 -0.1" quat="0.8 0.2 0.1 0.3" mass="1.2" diaginertia="0.01 0.012 0.004"/>
        <body name="two" pos="0 0 -0.2">
          <joint name="a1" type="hinge" axis="1 0 0" pos="0 0.01 0" frictionloss="0.3"/>
          <joint name="a2" type="hinge" axis="0 1 0.2" ref="-0.3"/>
          <geom type="capsule" size="0.02" fromto="0 0 0 0 0 -0.15" density="1200"/>
          <body name="welded" pos="0 0 -0.15" euler="0.3 0 0.1">
            <inertial pos="0.01 0 0" mass="0.3" diaginertia="0.001 0.002 0.0025"/>
            <body name="ball_body" pos="0.02 0 -0.05">
              <joint name="ball" type="ball" pos="0 0 0.02"/>
              <inertial pos="0 0.01 -0.05" mass="0.5" diaginertia="0.002 0.003 0.001"/>
              <body name="slider" pos="0 0 -0.1">
                <joint name="slide" type="slide" axis="0.2 0.1 1" ref="0.05" range="-0.1 0.1"/>
                <inertial pos="0 0 0" mass="0.2" diaginertia="0.0001 0.0001 0.0002"/>
                <site name="tip" pos="0 0.01 -0.02"/>
              </body>
            </body>
          </body>
        </body>
      </body>
    </body>
    <body name="post" pos="1 0 0">
      <inertial pos="0 0 0" mass="5" diaginertia="1 1 1"/>
      <body name="l1" pos="0 0 0.3" gravcomp="1">
        <joint name="j1" type="hinge" axis="0 0 1"/>
        <inertial pos="0.1 0 0" mass="1" diaginertia="0.01 0.01 0.01"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="hip" gear="2"/></actuator>
</mujoco>
"""


def neutralised(m):
    """m with MuJoCo's additions to rigid-body dynamics off (see the module docstring)."""
    flags = mujoco.mjtDisableBit
    for name in ("mjDSBL_CONSTRAINT", "mjDSBL_ACTUATION", "mjDSBL_SPRING", "mjDSBL_DAMPER",
                 "mjDSBL_PASSIVE"):                       # PASSIVE: MuJoCo before SPRING/DAMPER
        if hasattr(flags, name):
            m.opt.disableflags |= int(getattr(flags, name))
    for field in ("tendon_armature", "actuator_armature", "body_gravcomp"):
        if hasattr(m, field):
            getattr(m, field)[:] = 0
    m.opt.density = m.opt.viscosity = 0.0
    return m


def rel(x, ref):
    """Largest difference relative to the largest entry of the reference."""
    return float(np.abs(np.asarray(x) - ref).max() / np.abs(ref).max())


def full_m(m, d):
    M = np.zeros((m.nv, m.nv))
    try:
        mujoco.mj_fullM(m, d, M)                          # MuJoCo 4
    except TypeError:
        mujoco.mj_fullM(m, M, d.qM)                       # MuJoCo 3
    return M


def compare(m, model, seed=0, B=3):
    """Largest relative differences to MuJoCo over B random states: inverse dynamics, forward
    dynamics, mass matrix, body placements, LOCAL_WORLD_ALIGNED body Jacobians, centre of mass
    and its Jacobian (ours batched over the states, MuJoCo state by state)."""
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng, batch=B)
    qpos = sd.to_mujoco_q(model, q)
    qvel, qacc, qfrc = (rng.normal(size=(B, m.nv)) for _ in range(3))
    v, a = sd.from_mujoco_v(model, qpos, qvel), sd.from_mujoco_a(model, qpos, qvel, qacc)
    tau = sd.to_mujoco_tau(model, q, sd.rnea(model, q, v, a))
    qdd = sd.to_mujoco_a(model, q, v, sd.aba(model, q, v, sd.from_mujoco_tau(model, qpos, qfrc)))
    # M in MuJoCo's velocities: v = T qvel, so M_mujoco = T^T M T
    T = np.stack([sd.from_mujoco_v(model, np.broadcast_to(qpos[b], (m.nv, m.nq)), np.eye(m.nv)).T
                  for b in range(B)])
    M = np.swapaxes(T, 1, 2) @ sd.crba(model, q) @ T
    kin = sd.forward_kinematics(model, q)
    bodies = [m.body(k).name or f"body{k}" for k in range(1, m.nbody)]   # as the loader names them
    jac = {n: sd.frame_jacobian(model, q, n, reference_frame="local_world_aligned") @ T for n in bodies}
    com, Jcom = sd.center_of_mass(model, q), sd.com_jacobian(model, q) @ T
    # not welded to the world, nor to a mocap body (moved by the user, not by the dynamics: no
    # joint, so welded to the world here, as Pinocchio leaves a fixed body out of the CoM)
    moving = [k for k in range(1, m.nbody)
              if m.body_weldid[k] != 0 and m.body_mocapid[m.body_weldid[k]] < 0]
    err = dict.fromkeys(("rne", "fd", "M", "placement", "jacobian", "com", "com_jacobian"), 0.0)
    for b in range(B):
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = qpos[b], qvel[b], qfrc[b]
        mujoco.mj_forward(m, d)
        assert not (d.qfrc_passive.any() or d.qfrc_actuator.any() or d.qfrc_constraint.any())
        # forward dynamics: our qdd solves MuJoCo's equations M qacc + bias = qfrc (backward
        # error), and equals MuJoCo's qacc wherever M is well conditioned (cond < 1e6; on
        # pusher's 1e-8 kg bodies it is ~1e9, and MuJoCo's own qacc is as far from the exact one)
        Mb = full_m(m, d)
        residual = Mb @ qdd[b] + d.qfrc_bias - qfrc[b]
        scale = np.abs(Mb).max() * np.abs(qdd[b]).max() + np.abs(qfrc[b]).max() + np.abs(d.qfrc_bias).max()
        err["fd"] = max(err["fd"], float(np.abs(residual).max() / scale))
        if np.linalg.cond(Mb) < 1e6:
            err["fd"] = max(err["fd"], rel(qdd[b], d.qacc))
        err["M"] = max(err["M"], rel(M[b], Mb))
        d.qacc[:] = qacc[b]
        res = np.zeros(m.nv)
        mujoco.mj_rne(m, d, 1, res)          # M qacc + bias with the bodies' M: no armature,
        res += m.dof_armature * qacc[b]       # which MuJoCo adds to qM (mj_inverse's M qacc)
        err["rne"] = max(err["rne"], rel(tau[b], res))
        mass, c, Jc = 0.0, np.zeros(3), np.zeros((3, m.nv))
        for k, name in enumerate(bodies, start=1):
            P = kin.frame_placement(name)[b]
            err["placement"] = max(err["placement"], rel(P[:3, :3], d.xmat[k].reshape(3, 3)),
                                   float(np.abs(P[:3, 3] - d.xpos[k]).max()))
            jacp, jacr = np.zeros((3, m.nv)), np.zeros((3, m.nv))
            mujoco.mj_jacBody(m, d, jacp, jacr, k)
            if k in moving:
                err["jacobian"] = max(err["jacobian"], rel(jac[name][b], np.vstack((jacp, jacr))))
                mujoco.mj_jac(m, d, jacp, jacr, d.xipos[k], k)
                mass, c, Jc = mass + m.body_mass[k], c + m.body_mass[k] * d.xipos[k], Jc + m.body_mass[k] * jacp
        err["com"] = max(err["com"], rel(com[b], c / mass))
        err["com_jacobian"] = max(err["com_jacobian"], rel(Jcom[b], Jc / mass))
    return err


def test_synthetic_model_every_joint_type():
    """Free, hinge (anchor off the body origin, ref, several per body), ball, slide (ref),
    fullinertia, inertia from a geom, a welded body, sites and gravity, against MuJoCo."""
    m = neutralised(mujoco.MjModel.from_xml_string(SYNTHETIC))
    model = sd.load_mjcf(SYNTHETIC)
    assert [j.kind for j in model.joints] == ["free", "revolute", "revolute", "revolute",
                                              "spherical", "prismatic", "revolute"]
    assert model.joint_names == ("hip", "a1", "a2", "ball", "slide", "j1") and model.floating_base
    assert np.array_equal(model.gravity, [0.3, -0.2, -9.5])
    assert {"imu", "tip", "welded", "post", "upper"} <= set(model.frames)
    assert model.link_names[1] == "upper/hip" and model.frames["upper"].body == 1   # anchor off origin
    assert (model.lower_position_limit[model.q_slice(5)], model.upper_position_limit[model.q_slice(5)]) \
        == (-0.1, 0.1)
    err = compare(m, model)
    assert max(err.values()) <= TOL, err


def test_compiled_plan_on_an_mjcf_model():
    """The sparse plans take MJCF models as any other: forward dynamics equal MuJoCo's qacc."""
    m = neutralised(mujoco.MjModel.from_xml_string(SYNTHETIC))
    model = sd.from_mujoco(m)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(4)
    q = model.random_configuration(rng, batch=3)
    qpos, qvel, qfrc = sd.to_mujoco_q(model, q), rng.normal(size=(3, m.nv)), rng.normal(size=(3, m.nv))
    plan = sd.compile(sd.forward_dynamics(model))
    v = sd.from_mujoco_v(model, qpos, qvel)
    qdd = plan.solve(q, v, tau=sd.from_mujoco_tau(model, qpos, qfrc))["qdd"]
    for b in range(3):
        d.qpos[:], d.qvel[:], d.qfrc_applied[:] = qpos[b], qvel[b], qfrc[b]
        mujoco.mj_forward(m, d)
        assert rel(sd.to_mujoco_a(model, q[b], v[b], qdd[b]), d.qacc) <= TOL


_OFFLINE = []                                             # the first download error, if any


def menagerie_xml(robot, entry):
    """The robot's XML: <MENAGERIE_ROOT>/<robot>/<entry>.xml when MENAGERIE_ROOT names a local
    checkout (it may hold the XML files only: see without_missing_meshes), else from the
    mujoco-menagerie package's cache, which downloads it on first use; skipped when it cannot,
    and after one failed download every later robot at once (offline, each would wait for its
    own timeouts)."""
    root = os.environ.get("MENAGERIE_ROOT")
    if root:
        path = os.path.join(root, robot, f"{entry}.xml")
        if not os.path.isfile(path):
            pytest.skip(f"MENAGERIE_ROOT={root} has no {robot}/{entry}.xml")
        return path
    mm = pytest.importorskip("mujoco_menagerie")
    if _OFFLINE:
        pytest.skip(f"mujoco-menagerie cannot download here: {_OFFLINE[0]}")
    try:
        return str(mm.get(robot).xml(entry))
    except mm.MenagerieError as exc:
        if isinstance(exc, mm.DownloadError):
            _OFFLINE.append(exc)
        pytest.skip(f"mujoco-menagerie cannot provide {robot!r} here: {exc}")


def _missing(spec, folder, file):
    """Whether an asset file (named relative to the model's folder and the compiler's meshdir or
    texturedir, as MuJoCo resolves it) is absent."""
    if not file:                                          # an asset given inline (vertices, builtin)
        return False
    if spec.strippath:
        file = os.path.basename(file)
    return not os.path.isfile(os.path.join(spec.modelfiledir, folder or "", file))


def _moves(body):
    """Whether a body of a spec has a joint on its path to the world (else its mass properties
    enter no dynamics)."""
    while body is not None:
        if len(body.joints):
            return True
        body = body.parent
    return False


def without_missing_meshes(spec):
    """Deletes from spec the meshes (and textures) whose files are absent, with the geoms that
    use them, when that cannot change the dynamics: each such geom must carry no mass in
    MuJoCo's inertia computation, or belong to a body whose inertia is not computed from its
    geoms (an explicit <inertial> under inertiafromgeom="auto", or inertiafromgeom="false"), or
    to a body welded to the world. Then the compiled spec has the complete model's mass
    properties (geometry is no part of rigid-body dynamics). Returns False when no file is
    missing, True when they are deleted; skips the test, naming the body and the mesh, when
    a moving body's inertia would come from a missing mesh."""
    meshes = {m.name: m.file for m in spec.meshes if _missing(spec, spec.meshdir, m.file)}
    textures = {t.name for t in spec.textures if _missing(spec, spec.texturedir, t.file)}
    if not (meshes or textures):
        return False
    c, kinds = spec.compiler, mujoco.mjtInertiaFromGeom
    lo, hi = c.inertiagrouprange
    for g in list(spec.geoms):
        if g.meshname not in meshes:
            continue
        body = g.parent
        from_geoms = c.inertiafromgeom == kinds.mjINERTIAFROMGEOM_TRUE or (
            c.inertiafromgeom == kinds.mjINERTIAFROMGEOM_AUTO and not body.explicitinertial)
        massless = g.density == 0 if np.isnan(g.mass) else g.mass == 0   # mass unset: density
        if from_geoms and not massless and lo <= g.group <= hi and _moves(body):
            pytest.skip(f"{spec.modelname}: body {body.name!r} takes its inertia from mesh "
                        f"{g.meshname!r}, whose file {meshes[g.meshname]!r} is missing: "
                        f"comparing needs the complete checkout")
        spec.delete(g)
    for mesh in [m for m in spec.meshes if m.name in meshes]:
        spec.delete(mesh)
    for material in spec.materials:
        material.textures = ["" if t in textures else t for t in material.textures]
    for texture in [t for t in spec.textures if t.name in textures]:
        spec.delete(texture)
    return True


def menagerie_model(path, tmp_path):
    """(MuJoCo's compiled model, sparsedyn's model) of a menagerie XML, through sd.load_mjcf and
    the CLI's loader. A partial checkout (the XML without its mesh files) is compiled without them
    (without_missing_meshes) and read back from a compiled .mjb file written by MuJoCo."""
    spec = mujoco.MjSpec.from_file(path)
    if without_missing_meshes(spec):
        m = spec.compile()
        path = str(tmp_path / "compiled.mjb")
        mujoco.mj_saveModel(m, path, None)
    else:
        m = mujoco.MjModel.from_xml_path(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.ModelWarning)      # equality constraints: named
        model = sd.load_mjcf(path)
        assert load_robot(path).fingerprint() == model.fingerprint()       # the CLI's loader
    return m, model


@pytest.mark.parametrize("robot,entry", MENAGERIE, ids=[r for r, _ in MENAGERIE])
def test_menagerie_robots_against_mujoco(robot, entry, tmp_path):
    m, model = menagerie_model(menagerie_xml(robot, entry), tmp_path)
    m = neutralised(m)
    assert (model.nq, model.nv) == (m.nq, m.nv)
    assert model.floating_base == (m.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE)
    err = compare(m, model, seed=len(robot))
    assert max(err.values()) <= TOL, err


#: MJCF robots shipped inside the gymnasium wheel (no download): a quadruped, a humanoid, planar
#: walkers, arms (pusher: two 1e-8 kg bodies on slide joints)
GYMNASIUM = ["ant", "humanoid", "half_cheetah", "hopper", "walker2d", "reacher", "swimmer",
             "inverted_double_pendulum", "pusher"]


#: MJCF robots of gymnasium-robotics' wheel (test extra): the Shadow hand alone and with a free
#: block, the Adroit hand on its arm, the Fetch mobile manipulator (a mocap body, a free object),
#: the Franka arm in the kitchen scene (hinged and sliding furniture)
GYMNASIUM_ROBOTICS = ["hand/reach.xml", "hand/manipulate_block.xml", "adroit_hand/adroit_hammer.xml",
                      "fetch/pick_and_place.xml", "kitchen_franka/kitchen_assets/kitchen_env_model.xml"]


@pytest.mark.parametrize("robot", GYMNASIUM_ROBOTICS)
def test_gymnasium_robotics_hands_and_arms_against_mujoco(robot):
    """Hands and mobile manipulators as published in MJCF (tendons, equality constraints and
    actuators switched off in MuJoCo's model, as for every comparison here)."""
    robotics = pytest.importorskip("gymnasium_robotics")
    path = os.path.join(os.path.dirname(robotics.__file__), "envs", "assets", robot)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.ModelWarning)      # equality constraints: named
        model = sd.load_mjcf(path)
    m = neutralised(mujoco.MjModel.from_xml_path(path))
    assert (model.nq, model.nv) == (m.nq, m.nv)
    err = compare(m, model, seed=len(robot))
    assert max(err.values()) <= TOL, err


@pytest.mark.parametrize("robot", GYMNASIUM)
def test_gymnasium_mjcf_robots_against_mujoco(robot):
    """Published MJCF models that install with pip (gymnasium's MuJoCo assets, test extra):
    RNEA, forward dynamics, the mass matrix, placements, Jacobians and the centre of mass equal
    MuJoCo's on the model loaded by MuJoCo's own compiler."""
    gymnasium = pytest.importorskip("gymnasium")
    path = os.path.join(os.path.dirname(gymnasium.__file__), "envs", "mujoco", "assets",
                        f"{robot}.xml")
    model = sd.load_mjcf(path)
    m = neutralised(mujoco.MjModel.from_xml_path(path))
    assert (model.nq, model.nv) == (m.nq, m.nv)
    err = compare(m, model, seed=len(robot))
    assert max(err.values()) <= TOL, err
    assert load_robot(path).fingerprint() == model.fingerprint()


# --------------------------------------------------------------------------------- converters


def test_state_converters_batched_single_and_empty():
    model = sd.load_mjcf(SYNTHETIC)
    rng = np.random.default_rng(5)
    q = model.random_configuration(rng, batch=4)
    v, a, tau = (rng.normal(size=(4, model.nv)) for _ in range(3))
    qpos = sd.to_mujoco_q(model, q)
    assert np.array_equal(qpos[:, 3:7], q[:, [6, 3, 4, 5]])               # free: w x y z
    assert np.array_equal(qpos[:, 10:14], q[:, [13, 10, 11, 12]])         # ball
    assert np.array_equal(sd.from_mujoco_q(model, qpos), q)
    for to, back, x in ((sd.to_mujoco_v, sd.from_mujoco_v, v), (sd.to_mujoco_tau, sd.from_mujoco_tau, tau)):
        y = to(model, q, x)
        assert np.abs(back(model, qpos, y) - x).max() <= 1e-14 * np.abs(x).max()   # R^T R x: ulps
        assert np.array_equal(to(model, q[2], x[2]), y[2])
        assert np.array_equal(y[:, 6:], x[:, 6:]) and np.array_equal(y[:, 3:6], x[:, 3:6])
    qvel = sd.to_mujoco_v(model, q, v)
    qacc = sd.to_mujoco_a(model, q, v, a)
    assert np.abs(sd.from_mujoco_a(model, qpos, qvel, qacc) - a).max() <= 1e-14
    # power is frame-independent: qfrc . qvel == tau . v
    assert np.allclose(np.einsum("bi,bi->b", sd.to_mujoco_tau(model, q, tau), qvel),
                       np.einsum("bi,bi->b", tau, v), rtol=1e-14, atol=0)
    empty_q, empty_v = np.zeros((0, model.nq)), np.zeros((0, model.nv))
    for fn, args in ((sd.to_mujoco_q, (empty_q,)), (sd.from_mujoco_q, (empty_q,)),
                     (sd.to_mujoco_v, (empty_q, empty_v)), (sd.from_mujoco_a, (empty_q, empty_v, empty_v)),
                     (sd.to_mujoco_tau, (empty_q, empty_v))):
        assert fn(model, *args).shape[0] == 0


def test_converter_errors_name_the_argument():
    model = sd.load_mjcf(SYNTHETIC)
    qpos = sd.to_mujoco_q(model, model.neutral_configuration())
    qpos[3] = 2.0                                                          # not a unit quaternion
    with pytest.raises(ValueError, match="qpos: quaternion of joint 'root'"):
        sd.from_mujoco_v(model, qpos, np.zeros(model.nv))
    with pytest.raises(ValueError, match="qvel: expected shape"):
        sd.from_mujoco_v(model, model.neutral_configuration(), np.zeros(model.nv + 1))
    with pytest.raises(ModelError, match="joint 'planar'.*MuJoCo has no planar joint"):
        from sparsedyn.model import ModelBuilder, PlanarJoint, WORLD
        b = ModelBuilder("p")
        b.add_body("l", WORLD, PlanarJoint("planar"), mass=1.0, inertia=np.eye(3))
        sd.to_mujoco_q(b.build(), np.zeros(3))


# ------------------------------------------------------------------------------ loading errors


def test_loading_errors(tmp_path, monkeypatch):
    with pytest.raises(ModelError, match="does not exist"):
        sd.load_mjcf(tmp_path / "missing.xml")
    with pytest.raises(ModelError, match="MuJoCo could not compile"):
        sd.load_mjcf("<mujoco><worldbody><body><joint type='hinge'/></body></worldbody>")
    nested_free = ("<mujoco><worldbody><body><joint type='hinge'/><geom size='.1'/><body>"
                   "<freejoint name='loose'/><geom size='.1'/></body></body></worldbody></mujoco>")
    with pytest.raises(ModelError, match="loose|free"):
        sd.load_mjcf(nested_free)
    with pytest.raises(TypeError, match="mj_model"):
        sd.from_mujoco(object())
    monkeypatch.setitem(sys.modules, "mujoco", None)                       # as if not installed
    with pytest.raises(sd.MujocoUnavailableError, match="pip install mujoco"):
        sd.load_mjcf(SYNTHETIC)


def test_command_line_loads_mjcf(tmp_path, capsys):
    from sparsedyn.cli import main
    path = tmp_path / "synthetic.xml"
    path.write_text(SYNTHETIC)
    assert load_robot(str(path)).fingerprint() == sd.load_mjcf(SYNTHETIC).fingerprint()
    assert load_robot(str(path), floating_base=True).floating_base
    with pytest.raises(CommandError, match="free joint at its root.*--fixed-base"):
        load_robot(str(path), floating_base=False)
    arm = tmp_path / "arm.model"                                           # found by content
    arm.write_text("<mujoco><worldbody><body><joint type='hinge'/><geom size='.1'/><body pos='0 0 .3'>"
                   "<joint type='hinge' axis='1 0 0'/><geom size='.1'/></body></body></worldbody></mujoco>")
    out = tmp_path / "arm_fd.npz"
    assert main(["compile", str(arm), "--problem", "fd", "-o", str(out), "--no-progress"]) == 0
    assert sd.load_plan(out, sd.load_mjcf(arm)) is not None


def test_armature_is_the_models_and_equals_mujocos():
    """dof_armature (rotor inertia, which MuJoCo adds to qM's diagonal) is the Model's armature:
    loading says nothing, and M, rnea and forward dynamics equal MuJoCo's with it. A free
    joint's translational armature acts on world-frame accelerations, no diagonal term in the
    body-frame velocities used here: it is left out, named in a ModelWarning."""
    xml = """<mujoco><worldbody><body name="arm"><joint name="shoulder" type="hinge" axis="0 1 0"
             armature="0.1"/><geom type="capsule" size="0.05" fromto="0 0 0 0.3 0 0"/>
             <body name="hand" pos="0.3 0 0"><joint name="wrist" type="slide" armature="2"/>
             <geom type="sphere" size="0.04"/></body></body></worldbody></mujoco>"""
    with warnings.catch_warnings():
        warnings.simplefilter("error", sd.ModelWarning)
        model = sd.load_mjcf(xml)
    assert model.armature.tolist() == [0.1, 2.0]
    err = compare(neutralised(mujoco.MjModel.from_xml_string(xml)), model)
    assert max(err.values()) <= TOL, err
    free = """<mujoco><worldbody><body name="box"><joint name="root" type="free" armature="0.5"/>
              <geom type="box" size=".1 .2 .3"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(free)
    with pytest.warns(sd.ModelWarning, match=r"free joints root: their translational armature"):
        model = sd.from_mujoco(m)
    assert model.armature.tolist() == [0, 0, 0, 0.5, 0.5, 0.5]
    m.dof_armature[:3] = 0.0           # MuJoCo without it (and its cached M of this "simple"
    m.dof_M0[:3] -= 0.5                # body, dof_M0, compiled with it) equals the Model
    err = compare(neutralised(m), model)
    assert max(err.values()) <= TOL, err


FOUR_BAR = """<mujoco model="four_bar"><worldbody>
  <body name="crank"><joint name="crank" type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.01"/>
    <body name="coupler" pos="0.1 0 0"><joint name="coupler" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 0.3" size="0.01"/>
      <body name="rocker" pos="0 0 0.3"><joint name="rocker" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.01"/></body></body></body>
  </worldbody>
  <equality><connect name="loop" body1="rocker" body2="world" anchor="0.2 0 0"/>
    <joint joint1="crank" joint2="rocker"/></equality></mujoco>"""


def test_equality_constraints_are_named_in_a_warning():
    """MuJoCo enforces equality constraints (here a loop closure and a joint coupling) on top of
    the tree; the Model is the open tree, so loading says which constraints it leaves out. Its
    dynamics equal MuJoCo's with the constraints off, and differ from MuJoCo's with them on (what
    the warning is about); a model that disables them itself loads without the warning."""
    with pytest.warns(sd.ModelWarning, match=r"2 equality constraints \(e\.g\. 'connect loop'\).*"
                                             r"constraints: connect loop, joint crank/rocker$"):
        model = sd.load_mjcf(FOUR_BAR)
    m = neutralised(mujoco.MjModel.from_xml_string(FOUR_BAR))
    err = compare(m, model)
    assert max(err.values()) <= TOL, err
    m.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)    # constraints back on
    d = mujoco.MjData(m)
    d.qpos[:] = [0.3, -0.2, 0.1]
    mujoco.mj_forward(m, d)
    assert np.abs(d.qacc - sd.aba(model, d.qpos, np.zeros(3), np.zeros(3))).max() > 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("error", sd.ModelWarning)
        sd.load_mjcf(FOUR_BAR.replace("<worldbody>", '<option><flag equality="disable"/></option>'
                                                     '<worldbody>', 1))


def test_gravity_disabled_by_the_model():
    """<flag gravity="disable"/> keeps opt.gravity but MuJoCo's mj_rne and qacc leave gravity
    out: the loaded model's gravity is zero, and its dynamics equal MuJoCo's."""
    xml = SYNTHETIC.replace('<option gravity="0.3 -0.2 -9.5"/>',
                            '<option gravity="0.3 -0.2 -9.5"><flag gravity="disable"/></option>')
    m = neutralised(mujoco.MjModel.from_xml_string(xml))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.ModelWarning)      # equality constraints: named
        model = sd.load_mjcf(xml)
    assert m.opt.gravity.any() and not model.gravity.any()
    err = compare(m, model)
    assert max(err.values()) <= TOL, err


def test_partial_checkout_keeps_the_mass_properties(tmp_path):
    """without_missing_meshes (the menagerie test's XML-only route) against the same model
    compiled with its mesh file: the moving bodies' mass properties, placements and joints are
    the same, and a moving body whose inertia would come from the missing mesh is refused by
    name."""
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "tet.obj").write_text(
        "v 0 0 0\nv 0.1 0 0\nv 0 0.1 0\nv 0 0 0.1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n")
    body = ('<body name="{0}" pos="0 0 -0.2"><joint name="{0}" axis="1 0 0"/>{1}'
            '<geom type="mesh" mesh="tet"{2}/><geom type="box" size="0.02 0.03 0.04"/>')
    xml = ('<mujoco><compiler meshdir="assets"/><asset><mesh name="tet" file="tet.obj"/></asset>'
           '<worldbody><body name="fixed"><geom type="mesh" mesh="tet"/>'
           + body.format("explicit", '<inertial pos="0 0 0.01" mass="0.5" diaginertia="1e-3 2e-3 3e-3"/>', "")
           + body.format("massless", "", ' density="0"') + "{}</body></body></body></worldbody></mujoco>")
    path = tmp_path / "robot.xml"
    path.write_text(xml.format(""))
    full = mujoco.MjModel.from_xml_path(str(path))
    (tmp_path / "assets" / "tet.obj").unlink()
    spec = mujoco.MjSpec.from_file(str(path))
    assert without_missing_meshes(spec)
    m = spec.compile()
    moving = full.body_weldid != 0
    assert moving.sum() == 2 and m.ngeom == full.ngeom - 3
    for field in ("body_mass", "body_inertia", "body_ipos", "body_iquat", "body_pos", "body_quat",
                  "jnt_axis", "jnt_pos", "qpos0"):
        a, b = getattr(full, field), getattr(m, field)
        assert np.array_equal(a[moving] if field.startswith("body") else a,
                              b[moving] if field.startswith("body") else b), field
    path.write_text(xml.format(body.format("from_mesh", "", "") + "</body>"))
    with pytest.raises(pytest.skip.Exception, match="body 'from_mesh' takes its inertia from mesh 'tet'"):
        without_missing_meshes(mujoco.MjSpec.from_file(str(path)))
