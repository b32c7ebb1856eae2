"""MJCF (MuJoCo) -> Model, through MuJoCo's own compiler: what is read is the compiled mjModel
(body_pos/quat, body_mass/inertia/ipos/iquat, jnt_type/axis/pos/range, qpos0, opt.gravity), so
defaults, classes, fullinertia, inertiafromgeom and angle units are MuJoCo's business, not ours.

Mapping (MuJoCo's joint order, which is its qpos order):
- hinge -> revolute, slide -> prismatic, ball -> spherical, free -> free-flyer (MuJoCo allows a
  free joint only in a child of the world body);
- a body without joints is welded to its parent and merged into it (it stays a link frame, as
  a URDF fixed link does); under the world body its inertia is ignored;
- a body with several joints becomes a chain of bodies, one joint each; those before the last
  are massless and named "<body>/<joint>";
- MuJoCo rotates a hinge (and a ball) about the anchor jnt_pos in the body frame and measures
  it from qpos0 (the joint's `ref`); the joint frame here sits at the anchor and the joint
  placement absorbs -ref, so q equals MuJoCo's qpos (quaternions reordered, see
  mujoco_state.py). When the anchor is not the body origin, the body here is named
  "<body>/<joint>" and "<body>" is a link frame on it at the body origin;
- dof_armature (rotor inertia, which MuJoCo adds to qM's diagonal) is the Model's armature
  (mjcf_unmodelled.mujoco_armature: a free joint's angular part only, with a ModelWarning);
- sites are link frames (without inertia); geoms, tendons, actuators, equality constraints,
  contacts, damping and springs are not dynamics of a rigid-body tree and are not read;
  equality constraints (loops, coupled joints, welds) are named in a ModelWarning, since
  MuJoCo's qacc then differs from ours (mjcf_unmodelled.py);
- gravity is opt.gravity, or zero when the model disables it (mjDSBL_GRAVITY), as MuJoCo does.
"""
from __future__ import annotations

import os

import numpy as np

from ..errors import ModelError, SparsedynError
from ..spatial import (Transform, inertia_to_parent, quaternion_to_rotation, rotation_about_axis,
                       spatial_inertia)
from .joints import FreeFlyerJoint, PrismaticJoint, RevoluteJoint, SphericalJoint
from .mjcf_unmodelled import mujoco_armature, warn_equality
from .model import WORLD, ModelBuilder

# mjtJoint (stable since MuJoCo 1.0; read here without importing mujoco)
FREE, BALL, SLIDE, HINGE = 0, 1, 2, 3


class MujocoUnavailableError(SparsedynError, ImportError):
    """The `mujoco` package is needed (pip install mujoco, or sparsedyn[mujoco])."""


def import_mujoco(what):
    """The mujoco module, imported only when an MJCF file is read."""
    try:
        import mujoco
    except ImportError as exc:
        raise MujocoUnavailableError(f"{what} needs the 'mujoco' package (pip install mujoco, or "
                                     f"pip install sparsedyn[mujoco]): {exc}") from None
    return mujoco


def _placement(pos, quat_wxyz=None):
    T = np.eye(4)
    T[:3, 3] = pos
    if quat_wxyz is not None:
        w, x, y, z = np.asarray(quat_wxyz, dtype=float) / np.linalg.norm(quat_wxyz)
        T[:3, :3] = quaternion_to_rotation([x, y, z, w])
    return T


def _motion(T):
    """Motion transform (child <- parent) of a child placement T in its parent."""
    return Transform.from_placement(T[:3, :3], T[:3, 3])


def _body_inertia(m, b):
    """Body b's spatial inertia about its own frame (MuJoCo stores it principal: a diagonal in
    the frame (body_ipos, body_iquat))."""
    R = _placement(np.zeros(3), m.body_iquat[b])[:3, :3]
    return spatial_inertia(float(m.body_mass[b]), m.body_ipos[b], R @ np.diag(m.body_inertia[b]) @ R.T)


def _joint(m, j, name):
    """(our joint, placement A before it, placement P after it) for MuJoCo joint j: MuJoCo moves
    the body frame X by X A J(q) P, J(q) the joint's own motion."""
    kind, axis, pos = int(m.jnt_type[j]), np.array(m.jnt_axis[j]), np.array(m.jnt_pos[j])
    q0 = float(m.qpos0[m.jnt_qposadr[j]])
    if kind == FREE:
        return FreeFlyerJoint(name), None, np.eye(4)
    if kind == BALL:
        return SphericalJoint(name), _placement(pos), _placement(-pos)
    if kind == HINGE:
        joint = RevoluteJoint(name, axis)
        A = _placement(pos)
        A[:3, :3] = rotation_about_axis(joint.axis, -q0)
        return joint, A, _placement(-pos)
    if kind == SLIDE:
        return PrismaticJoint(name, axis), _placement(-q0 * axis / np.linalg.norm(axis)), np.eye(4)
    raise ModelError(f"joint {name!r}: unknown MuJoCo joint type {kind}")


def _names(m):
    """Unique names of bodies and joints (MuJoCo allows unnamed ones)."""
    bodies = [m.body(b).name or f"body{b}" for b in range(m.nbody)]
    joints, seen = [], set()
    for j in range(m.njnt):
        b = int(m.jnt_bodyid[j])
        name = m.jnt(j).name
        if not name:
            root_free = int(m.jnt_type[j]) == FREE and j == 0
            name = "root_joint" if root_free else f"{bodies[b]}_joint{j - int(m.body_jntadr[b])}"
        while name in seen:
            name += "_"
        seen.add(name)
        joints.append(name)
    return bodies, joints


def from_mujoco(mj_model, name=None, strict=False):
    """The Model of a compiled mujoco.MjModel (see the module docstring for the mapping).
    Gravity is the model's opt.gravity (zero when the model disables it: <flag gravity=
    "disable"/>, as MuJoCo then does). q, v, accelerations and forces convert with
    sparsedyn.from_mujoco_q / _v / _a / _tau (and to_mujoco_*). Raises ModelError naming the
    joint for what has no counterpart (a free joint below another body)."""
    m = mj_model
    if not all(hasattr(m, a) for a in ("body_parentid", "jnt_type", "qpos0", "opt")):
        raise TypeError(f"mj_model: expected a mujoco.MjModel, got {type(m).__name__}")
    bodies, joints = _names(m)
    model_name = name or bytes(m.names).split(b"\0", 1)[0].decode() or "mujoco_model"
    mujoco = import_mujoco("from_mujoco")            # flag values vary across MuJoCo versions
    gravity = np.array(m.opt.gravity, dtype=float)
    if int(m.opt.disableflags) & int(mujoco.mjtDisableBit.mjDSBL_GRAVITY):
        gravity[:] = 0.0                             # mj_rne and mj_forward then leave it out
    builder = ModelBuilder(model_name, gravity=gravity, strict=strict)
    ours, offset = {0: WORLD}, {0: np.eye(4)}   # MuJoCo body -> our body, its frame in ours
    taken = set(bodies)                          # link and frame names in use
    for b in range(1, m.nbody):
        p = int(m.body_parentid[b])
        T = offset[p] @ _placement(m.body_pos[b], m.body_quat[b])
        link_parent = bodies[p] if p > 0 else None
        I = _body_inertia(m, b)
        adr, num = int(m.body_jntadr[b]), int(m.body_jntnum[b])
        if num == 0:                                 # welded: merged into the parent body
            I_parent = inertia_to_parent(_motion(T), I)
            if ours[p] != WORLD:
                builder.add_inertia(ours[p], I_parent)
            builder.add_frame(bodies[b], ours[p], T, parent=link_parent, inertia=I_parent)
            ours[b], offset[b] = ours[p], T
            continue
        parent = ours[p]
        for j in range(adr, adr + num):
            joint, A, P = _joint(m, j, joints[j])
            if A is None and (p != 0 or num != 1):
                raise ModelError(f"joint {joints[j]!r}: a MuJoCo free joint must be the only joint "
                                 f"of a child of the world body (body {bodies[b]!r})")
            last = j == adr + num - 1
            at_origin = np.array_equal(P, np.eye(4))
            body_name = bodies[b] if last and at_origin else f"{bodies[b]}/{joints[j]}"
            I_here = inertia_to_parent(_motion(P), I) if last else np.zeros((6, 6))
            limited = int(m.jnt_limited[j]) and int(m.jnt_type[j]) in (HINGE, SLIDE)
            lo, up = (m.jnt_range[j] if limited else (None, None))
            parent = builder.add_body(body_name, parent, joint,
                                      placement=np.eye(4) if A is None else T @ A, spatial=I_here,
                                      lower=lo, upper=up, link_parent=link_parent,
                                      link_inertia=None if body_name == bodies[b] or not last
                                      else np.zeros((6, 6)))
            link_parent, T = body_name, P
            taken.add(body_name)
        if body_name != bodies[b]:                   # the MuJoCo body frame, off the anchor
            builder.add_frame(bodies[b], parent, P, parent=bodies[p] if p > 0 else None,
                              inertia=I_here)
        ours[b], offset[b] = parent, P
    _add_sites(builder, m, bodies, ours, offset, taken)
    model = builder.build()
    _check_layout(model, m)
    warn_equality(mujoco, m)
    return model.with_armature(mujoco_armature(m, model, joints))


def _add_sites(builder, m, bodies, ours, offset, taken):
    """Named sites as link frames; a site named like a body (MuJoCo keeps separate namespaces)
    is left out, with a ModelWarning naming it."""
    import warnings

    from ..errors import ModelWarning
    for s in range(m.nsite):
        name = m.site(s).name
        if not name:
            continue
        if name in taken:
            warnings.warn(ModelWarning(f"site {name!r} has the name of a body: not added as a "
                                       f"frame (use the body's frame)"), stacklevel=3)
            continue
        b = int(m.site_bodyid[s])
        builder.add_frame(name, ours[b], offset[b] @ _placement(m.site_pos[s], m.site_quat[s]),
                          parent=bodies[b] if b > 0 else None)
        taken.add(name)


def _check_layout(model, m):
    """Our q is MuJoCo's qpos joint by joint (the converters rely on it)."""
    qadr = np.asarray(m.jnt_qposadr, dtype=int)
    if model.nq != m.nq or model.nv != m.nv or not np.array_equal(model.q_index, qadr):
        raise ModelError(f"model {model.name!r}: joint layout (nq {model.nq}, nv {model.nv}) "
                         f"differs from MuJoCo's (nq {m.nq}, nv {m.nv})")


def load_mjcf(path_or_xml, name=None, strict=False):
    """Build a Model from an MJCF file (.xml; .mjb: a compiled MuJoCo model) or MJCF text, with
    MuJoCo's own compiler (the `mujoco` package; MujocoUnavailableError without it). Compile
    errors raise ModelError with MuJoCo's message. See from_mujoco."""
    mujoco = import_mujoco("load_mjcf")
    if not isinstance(path_or_xml, (str, os.PathLike)):
        raise TypeError(f"path_or_xml: expected an MJCF file path or its XML text, got "
                        f"{type(path_or_xml).__name__}")
    text = os.fspath(path_or_xml)
    try:
        if "<" in text:
            m = mujoco.MjModel.from_xml_string(text)
        elif not os.path.isfile(text):
            raise ModelError(f"MJCF file {text!r} does not exist" if not os.path.exists(text)
                             else f"MJCF file {text!r} is not a file")
        elif text.endswith(".mjb"):
            m = mujoco.MjModel.from_binary_path(text)
        else:
            m = mujoco.MjModel.from_xml_path(text)
    except ValueError as exc:
        if isinstance(exc, ModelError):
            raise
        raise ModelError(f"MuJoCo could not compile {text if '<' not in text else 'the MJCF text'}"
                         f": {str(exc).strip()}") from None
    model = from_mujoco(m, name=name, strict=strict)
    object.__setattr__(model, "mjcf_source", text if "<" in text else os.path.abspath(text))
    return model
