"""URDF -> Model, with Pinocchio's conventions so that results compare one-to-one:

- bodies are visited depth first from the root link; the children of a link are taken in the
  order of their joint names (urdfdom keeps joints in a std::map, and Pinocchio walks that), so
  joint order equals `pinocchio.buildModelFromUrdf(...).names[1:]`;
- fixed joints are merged: the child link's inertia is appended to the parent body, and the link
  (and the fixed joint) stay available as frames;
- with `floating_base=True` the root link becomes body 0 behind a free-flyer named "root_joint";
  otherwise the root link is welded to the world and its inertia is ignored, as in Pinocchio;
- revolute, continuous and prismatic joints have ONE coordinate each.
"""
from __future__ import annotations

import os
import xml.etree.ElementTree as ET

import numpy as np

from ..errors import ModelError
from ..spatial import Transform, inertia_to_parent, rpy_to_rotation, spatial_inertia
from .joints import FreeFlyerJoint, make_joint
from .model import GRAVITY, WORLD, ModelBuilder, check_inertia


def _floats(text, n, what):
    try:
        vals = [float(x) for x in (text or "").split()]
    except ValueError:
        raise ModelError(f"{what}: {text!r} is not a list of numbers") from None
    if len(vals) != n or not np.all(np.isfinite(vals)):
        raise ModelError(f"{what}: expected {n} finite numbers, got {text!r}")
    return np.array(vals)


def _origin(elem, what):
    """4x4 placement from an <origin xyz rpy> child (identity when absent)."""
    T = np.eye(4)
    o = elem.find("origin") if elem is not None else None
    if o is not None:
        T[:3, 3] = _floats(o.get("xyz", "0 0 0"), 3, f"{what} origin xyz")
        T[:3, :3] = rpy_to_rotation(_floats(o.get("rpy", "0 0 0"), 3, f"{what} origin rpy"))
    return T


def _link_inertia(link):
    """Spatial inertia (6x6, angular-first) of a <link> about its own frame."""
    name = link.get("name")
    inertial = link.find("inertial")
    if inertial is None:
        return np.zeros((6, 6))
    what = f"link {name!r}"
    mass_el = inertial.find("mass")
    try:
        mass = float(mass_el.get("value")) if mass_el is not None else 0.0
    except (TypeError, ValueError):
        raise ModelError(f"{what}: mass value {mass_el.get('value')!r} is not a number") from None
    if not np.isfinite(mass) or mass < 0:
        raise ModelError(f"{what}: mass must be finite and non-negative, got {mass!r}")
    T = _origin(inertial, f"{what} inertial")
    inert = inertial.find("inertia")
    Ic = np.zeros((3, 3))
    if inert is not None:
        try:
            v = {k: float(inert.get(k, "0")) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        except ValueError:
            raise ModelError(f"{what}: inertia attributes must be numbers") from None
        Ic = np.array([[v["ixx"], v["ixy"], v["ixz"]],
                       [v["ixy"], v["iyy"], v["iyz"]],
                       [v["ixz"], v["iyz"], v["izz"]]])
        if not np.all(np.isfinite(Ic)):
            raise ModelError(f"{what}: inertia is not finite")
    R = T[:3, :3]
    return spatial_inertia(mass, T[:3, 3], R @ Ic @ R.T)


def _check_link_inertia(I, link, strict):
    """model.check_inertia for a link that add_body does not check (the root of a fixed base, the
    child of a fixed joint); one call deeper than add_body's, so warnings point at the caller."""
    check_inertia(I, f"link {link!r}", strict)


def _read_xml(path_or_xml):
    if not isinstance(path_or_xml, (str, os.PathLike)):
        raise TypeError(f"path_or_xml: expected a URDF file path or its XML text, got "
                        f"{type(path_or_xml).__module__}.{type(path_or_xml).__name__}")
    text = path_or_xml
    if isinstance(path_or_xml, os.PathLike) or "<" not in path_or_xml:
        path = os.fspath(path_or_xml)
        if not os.path.exists(path):
            raise ModelError(f"URDF file {path!r} does not exist")
        if os.path.isdir(path):
            raise ModelError(f"URDF file {path!r} is a directory")
        with open(path, "rb") as fh:
            raw = fh.read()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ModelError(f"URDF file {path!r} is not UTF-8 text (byte {exc.start}): "
                             "not a URDF (a saved plan or another binary file?)") from None
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ModelError(f"malformed URDF XML: {exc}") from None
    if root.tag != "robot":
        raise ModelError(f"URDF root element must be <robot>, got <{root.tag}>")
    return root


def load_urdf(path_or_xml, floating_base=False, name=None, strict=False, gravity=GRAVITY):
    """Build a Model from a URDF file path or an XML string.

    floating_base: put a free-flyer between the world and the root link (q = [p, quat x y z w]).
    gravity: (3,) in the world frame [m/s^2] (URDF has no gravity; default (0, 0, -9.81), as
    Pinocchio's); part of the model's fingerprint (Model.with_gravity changes it later).
    Raises ModelError naming the element for malformed XML, unknown joint types, missing links,
    loops, several roots, negative masses or inertias that are not finite.
    strict: a link whose rotational inertia is not positive semi-definite raises ModelError;
    by default it loads as given with a ModelWarning naming the link and its eigenvalues, as
    Pinocchio loads it (published URDFs have such links, e.g. CAD round-off on massless ones).
    """
    robot = _read_xml(path_or_xml)
    links = {}
    for link in robot.findall("link"):
        lname = link.get("name")
        if not lname:
            raise ModelError("a <link> has no name attribute")
        if lname in links:
            raise ModelError(f"link {lname!r} is defined twice")
        links[lname] = link
    if not links:
        raise ModelError("URDF has no <link>")

    joints, child_of, children = {}, {}, {}
    for j in robot.findall("joint"):
        jname = j.get("name")
        if not jname:
            raise ModelError("a <joint> has no name attribute")
        if jname in joints:
            raise ModelError(f"joint {jname!r} is defined twice")
        jtype = j.get("type")
        parent_el, child_el = j.find("parent"), j.find("child")
        if parent_el is None or child_el is None:
            raise ModelError(f"joint {jname!r}: missing <parent> or <child>")
        parent, child = parent_el.get("link"), child_el.get("link")
        for role, lk in (("parent", parent), ("child", child)):
            if lk not in links:
                raise ModelError(f"joint {jname!r}: {role} link {lk!r} is not defined")
        if child in child_of:
            raise ModelError(f"link {child!r} is the child of two joints ({child_of[child]!r} and "
                             f"{jname!r}): kinematic loops are not a tree")
        if jtype != "fixed":
            make_joint(jtype, jname, [1.0, 0.0, 0.0])  # validates the type early, naming the joint
        joints[jname] = j
        child_of[child] = jname
        children.setdefault(parent, []).append(jname)

    roots = [l for l in links if l not in child_of]
    if len(roots) != 1:
        if not roots:
            raise ModelError("URDF has no root link: the joints form a cycle")
        raise ModelError(f"URDF has several root links {roots}: it is not one tree")
    root = roots[0]

    builder = ModelBuilder(name or robot.get("name") or "robot", gravity=gravity, strict=strict)
    if floating_base:
        body = builder.add_body(root, WORLD, FreeFlyerJoint("root_joint"),
                                spatial=_link_inertia(links[root]))
    else:
        body = WORLD
        root_inertia = _link_inertia(links[root])
        _check_link_inertia(root_inertia, root, strict)     # ignored (welded), but reported
        builder.add_frame(root, WORLD, np.eye(4), inertia=root_inertia)

    visited = {root}
    # iterative depth-first walk; a stack entry is (joint name, body carrying its parent link,
    # placement of the parent link in that body); siblings are pushed in reverse name order
    def push_children(lname, body, T_link):
        for jname in sorted(children.get(lname, []), reverse=True):
            stack.append((jname, body, T_link))

    stack = []
    push_children(root, body, np.eye(4))
    while stack:
        jname, body, T_link = stack.pop()
        j = joints[jname]
        parent_link = j.find("parent").get("link")
        child = j.find("child").get("link")
        if child in visited:
            raise ModelError(f"joint {jname!r} closes a cycle at link {child!r}")
        visited.add(child)
        T_joint = T_link @ _origin(j, f"joint {jname!r}")
        jtype = j.get("type")
        if jtype == "fixed":
            builder.add_frame(jname, body, T_joint, kind="fixed_joint", parent=parent_link, child=child)
            X = Transform.from_placement(T_joint[:3, :3], T_joint[:3, 3])
            I_link = _link_inertia(links[child])
            _check_link_inertia(I_link, child, strict)
            I_child = inertia_to_parent(X, I_link)
            builder.add_frame(child, body, T_joint, parent=parent_link, inertia=I_child)
            if body != WORLD:
                builder.add_inertia(body, I_child)
            push_children(child, body, T_joint)
            continue
        axis_el = j.find("axis")
        axis = (_floats(axis_el.get("xyz"), 3, f"joint {jname!r} axis")
                if axis_el is not None else [1.0, 0.0, 0.0])
        joint = make_joint(jtype, jname, axis)
        lower = upper = effort = None
        lim = j.find("limit")
        if lim is not None and joint.nq == 1:
            try:
                if jtype != "continuous":
                    lower, upper = float(lim.get("lower", "nan")), float(lim.get("upper", "nan"))
                    if not (np.isfinite(lower) and np.isfinite(upper)):
                        lower = upper = None
                effort = float(lim.get("effort")) if lim.get("effort") is not None else None
            except ValueError:
                raise ModelError(f"joint {jname!r}: <limit> attributes must be numbers") from None
        new_body = builder.add_body(child, body, joint, placement=T_joint,
                                    spatial=_link_inertia(links[child]),
                                    lower=lower, upper=upper, effort=effort, link_parent=parent_link)
        push_children(child, new_body, np.eye(4))

    unreached = sorted(set(links) - visited)
    if unreached:
        # every unreached link has a parent joint (it is no root), so following parents loops
        raise ModelError(f"links {unreached} are not connected to the root link {root!r}: their "
                         f"joints {sorted(child_of[l] for l in unreached)} form a cycle")
    model = builder.build(floating_base=floating_base)
    # the URDF it came from (a resolved path, or the XML text), for what the model does not
    # carry: the sensors a URDF declares (sparsedyn.sensors.from_urdf)
    source = path_or_xml if "<" in os.fspath(path_or_xml) else os.path.abspath(path_or_xml)
    object.__setattr__(model, "urdf_source", source)
    return model
