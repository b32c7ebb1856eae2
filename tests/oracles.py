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
