"""Independent oracles for the tests: Pinocchio models built from the same URDF, and the
configuration conversion between our one-angle continuous joints and Pinocchio's (cos, sin)."""
from __future__ import annotations

import glob
import os
import sysconfig

import numpy as np
import pytest

pin = pytest.importorskip("pinocchio")

ROBOTS = {
    "talos": "talos_data/robots/talos_reduced.urdf",
    "icub": "icub_description/robots/icub.urdf",
    "panda": "panda_description/urdf/panda.urdf",
    "anymal": "anymal_b_simple_description/robots/anymal.urdf",
    "solo12": "solo_description/robots/solo12.urdf",
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "romeo": "romeo_description/urdf/romeo.urdf",
}


def erd_root():
    """Where the example-robot-data wheel puts its robots (cmeel prefix in site-packages)."""
    for base in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for cand in glob.glob(os.path.join(base, "cmeel.prefix", "share", "example-robot-data", "robots")):
            return cand
    pytest.skip("example-robot-data is not installed (pip install -e .[test])")


def robot_urdf(name):
    return os.path.join(erd_root(), ROBOTS[name])


def pin_model(path_or_xml, floating_base=False):
    if "<" in path_or_xml:
        return (pin.buildModelFromXML(path_or_xml, pin.JointModelFreeFlyer()) if floating_base
                else pin.buildModelFromXML(path_or_xml))
    return (pin.buildModelFromUrdf(path_or_xml, pin.JointModelFreeFlyer()) if floating_base
            else pin.buildModelFromUrdf(path_or_xml))


def to_pin_q(model, pmodel, q):
    """Our q (nq,) -> Pinocchio's q: unbounded revolute joints become (cos, sin)."""
    out = np.zeros(pmodel.nq)
    for i, joint in enumerate(model.joints):
        pid = pmodel.getJointId(joint.name)
        pj = pmodel.joints[pid]
        qi = q[model.q_slice(i)]
        if pj.nq == 2 and joint.nq == 1:
            out[pj.idx_q:pj.idx_q + 2] = np.cos(qi[0]), np.sin(qi[0])
        else:
            out[pj.idx_q:pj.idx_q + pj.nq] = qi
    return out


def pin_fext(model, pmodel, f_ext):
    """Our {link: linear-first wrench in link frame} (single state) -> Pinocchio's per-joint list."""
    fext = [pin.Force.Zero() for _ in range(pmodel.njoints)]
    for name, w in f_ext.items():
        fid = pmodel.getFrameId(name, pin.BODY)
        frame = pmodel.frames[fid]
        # link frame placement in the joint frame; the wrench moves to the joint frame
        fext[frame.parentJoint] += frame.placement.act(pin.Force(np.asarray(w)))
    return fext


def random_state(model, rng, batch=None):
    q = model.random_configuration(rng, batch=batch)
    shape = (model.nv,) if batch is None else (batch, model.nv)
    return q, rng.normal(size=shape), rng.normal(size=shape)


def rel_err(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / max(1.0, np.abs(b).max()))


def pin_twin(model):
    """Pinocchio's own model of a ModelBuilder tree (same joint order, placements, axes,
    inertias, gravity; a BODY frame per link) for the models that have no URDF."""
    pm = pin.Model()
    ids = []
    for i, j in enumerate(model.joints):
        T = model.joint_placements[i]
        jm = {"revolute": lambda: pin.JointModelRevoluteUnaligned(j.axis),
              "prismatic": lambda: pin.JointModelPrismaticUnaligned(j.axis),
              "helical": lambda: pin.JointModelHelicalUnaligned(j.axis, j.pitch),
              "spherical": pin.JointModelSpherical, "planar": pin.JointModelPlanar,
              "free": pin.JointModelFreeFlyer}[j.kind]()
        parent = 0 if model.parents[i] < 0 else ids[model.parents[i]]
        jid = pm.addJoint(parent, jm, pin.SE3(T[:3, :3].copy(), T[:3, 3].copy()), j.name)
        I = model.inertias[i]                      # angular-first [[Ic + m cx cx^T, m cx], [., m 1]]
        mass = I[3, 3]
        com = np.array([I[2, 4], I[0, 5], I[1, 3]]) / mass
        C = pin.skew(com)
        pm.appendBodyToJoint(jid, pin.Inertia(mass, com, I[:3, :3] - mass * C @ C.T), pin.SE3.Identity())
        pm.addFrame(pin.Frame(model.link_names[i], jid, pin.SE3.Identity(), pin.FrameType.BODY))
        ids.append(jid)
    pm.gravity = pin.Motion(np.array(model.gravity), np.zeros(3))
    return pm


def twin_q(model, pmodel, q):
    """Our q -> Pinocchio's for pin_twin models (planar: (x, y, cos, sin))."""
    out = np.zeros(pmodel.nq)
    for i, j in enumerate(model.joints):
        pj = pmodel.joints[pmodel.getJointId(j.name)]
        qi = q[model.q_slice(i)]
        out[pj.idx_q:pj.idx_q + pj.nq] = (np.r_[qi[:2], np.cos(qi[2]), np.sin(qi[2])]
                                          if j.kind == "planar" else qi)
    return out


def singular_rod_model():
    """A leaf rod on its joint's (skewed) axis: no inertia about the axis, so the mass matrix is
    singular in every state (every inertia entry structurally present)."""
    from sparsedyn.model import ModelBuilder, RevoluteJoint
    from sparsedyn.model.model import WORLD
    b = ModelBuilder("rod_on_axis")
    b.add_body("l1", WORLD, RevoluteJoint("j1", [0, 0, 1]), mass=1.0, com=(0.1, 0, 0),
               inertia=np.diag([0.1, 0.1, 0.1]))
    axis = np.ones(3) / np.sqrt(3.0)
    b.add_body("rod", "l1", RevoluteJoint("j2", axis), mass=1.0, com=(0, 0, 0),
               inertia=0.1 * (np.eye(3) - np.outer(axis, axis)))
    return b.build()


def in_threads(worker, ranges):
    """worker(lo, hi) for each (lo, hi) of `ranges`, each on its own thread, joined."""
    import threading
    threads = [threading.Thread(target=worker, args=r) for r in ranges]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
