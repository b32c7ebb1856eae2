"""Pinocchio -> sparsedyn: the Model of a pinocchio.Model, and configurations both ways.

The joint order, placements, axes, inertias, frames and gravity are Pinocchio's own, so results
compare one-to-one. Two joint types store q differently (v is the same everywhere):

    Pinocchio RevoluteUnbounded (URDF continuous)   (cos t, sin t)       here: t
    Pinocchio Planar                                (x, y, cos t, sin t) here: (x, y, t)

Free-flyers ([p, quaternion x y z w]) and spherical joints (x y z w) are the same. Pinocchio is
not imported here: the functions read the pinocchio.Model they are given.
"""
from __future__ import annotations

import numpy as np

from ..batch import as_batch
from ..errors import ModelError
from ..spatial import Transform, inertia_to_parent, spatial_inertia
from .joints import (FreeFlyerJoint, HelicalJoint, PlanarJoint, PrismaticJoint, RevoluteJoint,
                     SphericalJoint)
from .model import WORLD, ModelBuilder

#: Pinocchio's "no limit" is the largest double; ours is inf
_UNLIMITED = 1e300


def _joint_kind(shortname):
    """Our kind of a Pinocchio joint type (its shortname), None if it has no counterpart."""
    s = shortname.replace("JointModel", "")
    if s in ("RX", "RY", "RZ", "RevoluteUnaligned"):
        return "revolute"
    if s in ("RUBX", "RUBY", "RUBZ", "RevoluteUnboundedUnaligned", "RevoluteUnboundedUnalignedTpl"):
        return "continuous"
    if s in ("PX", "PY", "PZ", "PrismaticUnaligned"):
        return "prismatic"
    if s in ("HX", "HY", "HZ", "HelicalUnaligned"):
        return "helical"
    return {"Spherical": "spherical", "Planar": "planar", "FreeFlyer": "free"}.get(s)


def _subspace(jmodel):
    """Pinocchio's motion subspace (6, nv), linear-first, at the neutral configuration: the axis
    (and pitch) of every one-DoF joint type, including those whose binding hides its axis."""
    jdata = jmodel.createData()
    q = np.zeros(jmodel.nq)
    if jmodel.nq == 2:                         # (cos, sin) of the angle 0
        q[0] = 1.0
    jmodel.calc(jdata, q)
    return np.asarray(jdata.S, dtype=float).reshape(6, -1)


def _make_joint(jmodel, name):
    kind = _joint_kind(jmodel.shortname())
    if kind is None:
        raise ModelError(f"joint {name!r}: Pinocchio joint type {jmodel.shortname()} has no "
                         f"sparsedyn counterpart (supported: revolute (bounded or unbounded, any "
                         f"axis), prismatic, helical, spherical, planar, free-flyer)")
    if kind in ("spherical", "planar", "free"):
        return {"spherical": SphericalJoint, "planar": PlanarJoint, "free": FreeFlyerJoint}[kind](name)
    S = _subspace(jmodel)[:, 0]
    linear, angular = S[:3], S[3:]
    if kind == "prismatic":
        return PrismaticJoint(name, linear)
    if kind == "helical":
        return HelicalJoint(name, angular, float(linear @ angular))   # linear = pitch * axis
    return RevoluteJoint(name, angular, unbounded=kind == "continuous")


def _se3(M):
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = np.asarray(M.rotation), np.asarray(M.translation)
    return T


def _inertia(I):
    """pinocchio.Inertia -> our angular-first 6x6 about the frame origin."""
    return spatial_inertia(float(I.mass), np.asarray(I.lever), np.asarray(I.inertia))


def _transform(M):
    """Motion transform frame <- joint of a frame placement M (pinocchio.SE3) in its joint."""
    return Transform.from_placement(np.asarray(M.rotation), np.asarray(M.translation))


def _limits(values, joint, pin_nq, none):
    """Our (nq,) limits from Pinocchio's slice of one joint: an angle stored as (cos, sin) has
    none; Pinocchio's largest double means none (`none`: -inf or inf, as load_urdf gives)."""
    values = np.asarray(values, dtype=float)
    if pin_nq != joint.nq:
        values = np.r_[values[:joint.nq - 1], none]
    return np.where(np.abs(values) >= _UNLIMITED, none, values)


class _Frames:
    """Pinocchio's frame list, read once: types, each joint's JOINT frame and link."""

    def __init__(self, pm):
        self.frames = list(pm.frames)
        self.type = [str(f.type).rsplit(".", 1)[-1] for f in self.frames]   # FrameType.BODY -> BODY
        self.joint_frame = {f.parentJoint: k for k, f in enumerate(self.frames)
                            if self.type[k] == "JOINT"}

    def link(self, jid):
        """The BODY frame that is joint jid's link (hung from its JOINT frame at identity, as
        Pinocchio's URDF parser makes it), or None."""
        cands = [k for k, f in enumerate(self.frames) if self.type[k] == "BODY"
                 and f.parentJoint == jid and np.array_equal(_se3(f.placement), np.eye(4))]
        direct = [k for k in cands if self.frames[k].parentFrame == self.joint_frame.get(jid)]
        return (direct or cands or [None])[0]

    def parent_link(self, k):
        """Name of the BODY frame (URDF link) frame k hangs from, through joint frames."""
        k = self.frames[k].parentFrame
        while k > 0 and self.type[k] != "BODY":
            k = self.frames[k].parentFrame
        return self.frames[k].name if k > 0 else None

    def link_inertias(self, jid, total):
        """{BODY frame on joint jid: the inertia of that link alone, in the joint frame}.
        Pinocchio's URDF parser keeps a merged link's inertia on the FIXED_JOINT frame above
        it (a fixed base's root link on the BODY frame itself), and none for the joint's own
        link: that one is the rest of the joint's inertia."""
        out = {}
        for k, f in enumerate(self.frames):
            p = f.parentFrame
            if self.type[k] != "BODY" or f.parentJoint != jid:
                continue
            if p > 0 and self.type[p] == "FIXED_JOINT":
                out[k] = inertia_to_parent(_transform(self.frames[p].placement),
                                           _inertia(self.frames[p].inertia))
            elif p == 0:                       # a fixed base's root link keeps its own
                out[k] = inertia_to_parent(_transform(f.placement), _inertia(f.inertia))
        main = self.link(jid) if jid > 0 else None
        if main is not None:
            out[main] = total - sum(out.values()) if out else total
        return out


def from_pinocchio(pin_model, name=None, strict=False):
    """The sparsedyn Model of a pinocchio.Model: same joint order and names, placements, axes,
    inertias, gravity and frames (BODY frames become link frames, FIXED_JOINT frames joint
    frames, OP_FRAME/SENSOR frames link frames without inertia).

    Pinocchio's revolute-unbounded joints (nq 2: cos, sin) become one-angle revolute joints
    marked `unbounded`; use to_pinocchio_q / from_pinocchio_q for configurations. A first
    free-flyer under the universe is the model's floating base (left out of joint_names, as
    load_urdf(..., floating_base=True) does). Raises ModelError naming the joint for Pinocchio
    joint types without a counterpart (composite, mimic, spherical-ZYX, translation, universal,
    ellipsoid). strict: refuse (ModelError) a rotational inertia that is not positive
    semi-definite; by default it loads with a ModelWarning, as Pinocchio loads it."""
    pm = pin_model
    if not all(hasattr(pm, a) for a in ("joints", "frames", "jointPlacements", "inertias")):
        raise TypeError(f"pin_model: expected a pinocchio.Model, got {type(pm).__name__}")
    fr = _Frames(pm)
    builder = ModelBuilder(name or pm.name or "pinocchio_model",
                           gravity=np.asarray(pm.gravity.linear, dtype=float), strict=strict)
    body_of, links, own = {0: WORLD}, {}, {}
    lower, upper = np.asarray(pm.lowerPositionLimit), np.asarray(pm.upperPositionLimit)
    for jid in range(1, pm.njoints):
        jm, jname = pm.joints[jid], pm.names[jid]
        joint = _make_joint(jm, jname)
        total = _inertia(pm.inertias[jid])
        own.update(fr.link_inertias(jid, total))
        k = fr.link(jid)
        lname = fr.frames[k].name if k is not None else jname
        effort = None
        if joint.nq == joint.nv:               # our effort limits are per coordinate
            effort = _limits(pm.effortLimit[jm.idx_v:jm.idx_v + jm.nv], joint, jm.nv, np.inf)
        body_of[jid] = builder.add_body(
            lname, body_of[pm.parents[jid]], joint, placement=_se3(pm.jointPlacements[jid]),
            spatial=total, lower=_limits(lower[jm.idx_q:jm.idx_q + jm.nq], joint, jm.nq, -np.inf),
            upper=_limits(upper[jm.idx_q:jm.idx_q + jm.nq], joint, jm.nq, np.inf), effort=effort,
            link_parent=fr.parent_link(fr.joint_frame[jid]) if jid in fr.joint_frame else None,
            link_inertia=own.get(k))
        if k is not None:
            links[k] = lname
    own.update(fr.link_inertias(0, None))
    _add_frames(builder, fr, body_of, links, own)
    floating = pm.njoints > 1 and _joint_kind(pm.joints[1].shortname()) == "free" and pm.parents[1] == 0
    model = builder.build(floating_base=floating)
    return model.with_armature(_armature(pm, model.nv))


def _armature(pm, nv):
    """Pinocchio's model.armature (nv,) in its v layout, which is ours (rotor inertia that its
    rnea, aba and crba add to the mass matrix's diagonal; Model.with_armature checks it)."""
    return np.asarray(getattr(pm, "armature", np.zeros(nv)), dtype=float)


def _add_frames(builder, fr, body_of, links, own):
    """Every frame but the universe, joint frames and our bodies' links: BODY, OP_FRAME and
    SENSOR frames as link frames (a BODY frame keeps its own inertia, also on the universe, as
    load_urdf keeps a fixed base's root link), FIXED_JOINT frames as joint frames."""
    names = set(links.values())
    for k, f in enumerate(fr.frames):
        kind = fr.type[k]
        if k == 0 or kind == "JOINT" or k in links:
            continue
        body = body_of[f.parentJoint]
        if kind == "FIXED_JOINT":
            child = [c.name for j, c in enumerate(fr.frames)
                     if c.parentFrame == k and fr.type[j] == "BODY"]
            builder.add_frame(f.name, body, _se3(f.placement), kind="fixed_joint",
                              parent=fr.parent_link(k), child=child[0] if child else None)
        elif f.name not in names:          # Pinocchio allows a BODY and an OP_FRAME of one name
            inertia = own.get(k)
            builder.add_frame(f.name, body, _se3(f.placement), parent=fr.parent_link(k),
                              inertia=inertia)
            names.add(f.name)


# ------------------------------------------------------------------------------ configurations


def _layout(model, pin_model):
    """[(our q slice, Pinocchio q offset, Pinocchio nq, how)] per joint, how in {"copy", "angle",
    "planar"}; and Pinocchio's nq. From pin_model when given (checked joint by joint), else from
    the joints themselves (unbounded revolute: cos/sin; planar: x, y, cos, sin)."""
    out, offset = [], 0
    for i, joint in enumerate(model.joints):
        own = 2 if getattr(joint, "unbounded", False) else (4 if joint.kind == "planar" else joint.nq)
        if pin_model is None:
            idx, nq = offset, own
        else:
            if not pin_model.existJointName(joint.name):
                raise ModelError(f"joint {joint.name!r} of model {model.name!r} is not in the "
                                 f"Pinocchio model {pin_model.name!r}")
            pj = pin_model.joints[pin_model.getJointId(joint.name)]
            idx, nq = pj.idx_q, pj.nq
            cos_sin = {"revolute": 2, "planar": 4}.get(joint.kind)
            if pj.nv != joint.nv or nq not in (joint.nq, cos_sin):
                raise ModelError(f"joint {joint.name!r}: Pinocchio's {pj.shortname()} (nq {nq}, "
                                 f"nv {pj.nv}) does not match sparsedyn's {joint.kind} joint "
                                 f"(nq {joint.nq}, nv {joint.nv})")
        how = "copy" if nq == joint.nq else ("planar" if joint.kind == "planar" else "angle")
        out.append((model.q_slice(i), idx, nq, how))
        offset += nq
    total = offset if pin_model is None else pin_model.nq
    if pin_model is not None and sum(n for _, _, n, _ in out) != total:
        raise ModelError(f"the Pinocchio model {pin_model.name!r} (nq {total}) has joints that "
                         f"model {model.name!r} does not have")
    return out, total


def to_pinocchio_q(model, q, pin_model=None):
    """Our configurations (B, nq) or (nq,) -> Pinocchio's (B, pin nq) or (pin nq,): one-angle
    unbounded revolute joints become (cos, sin), planar angles (cos, sin). pin_model: the
    pinocchio.Model to lay q out for (joints matched by name; needed when it stores a joint
    differently than this model's joints record, e.g. a model built by hand); None: the layout
    Pinocchio gives this model's joints (load_urdf and from_pinocchio models)."""
    q, single = as_batch(q, model.nq, "q")
    layout, nq = _layout(model, pin_model)
    out = np.zeros((q.shape[0], nq))
    for s, idx, n, how in layout:
        if how == "copy":
            out[:, idx:idx + n] = q[:, s]
        else:
            t = q[:, s][:, -1]
            out[:, idx:idx + n - 2] = q[:, s][:, :-1]
            out[:, idx + n - 2], out[:, idx + n - 1] = np.cos(t), np.sin(t)
    return out[0] if single else out


def from_pinocchio_q(model, pin_model, q):
    """Pinocchio's configurations (B, pin nq) or (pin nq,) -> ours: (cos, sin) pairs become the
    angle atan2(sin, cos). pin_model may be None (the layout to_pinocchio_q(model, q) uses)."""
    layout, nq = _layout(model, pin_model)
    q, single = as_batch(q, nq, "q")
    out = np.zeros((q.shape[0], model.nq))
    for s, idx, n, how in layout:
        if how == "copy":
            out[:, s] = q[:, idx:idx + n]
        else:
            block = np.empty((q.shape[0], s.stop - s.start))
            block[:, :-1] = q[:, idx:idx + n - 2]
            block[:, -1] = np.arctan2(q[:, idx + n - 1], q[:, idx + n - 2])
            out[:, s] = block
    return out[0] if single else out
