"""Closed kinematic chains by cut joints (seed 004, Sec. 2; sparsedyn.recursive.yamane_closed)
against independent oracles: C-ABA and the explicit loop form of a four-bar (seed 003's cluster
model of the same mechanism), Pinocchio's constraintDynamics with a 3D loop constraint between
two joints, and finite differences of the loop-closure residual for H (eq. 3)."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

from oracles import pin, pin_twin, rel_err
from sparsedyn.errors import SingularModelError
from sparsedyn.kinematics import forward_kinematics
from sparsedyn.loops import four_bar
from sparsedyn.model.joints import RevoluteJoint
from sparsedyn.model.model import WORLD, ModelBuilder
from sparsedyn.problems import compile, loop_forward_dynamics
from sparsedyn.recursive.cluster import c_aba
from sparsedyn.recursive.yamane_closed import (CutJoint, closed_chain_forward_dynamics, closure_residual,
                                               cut_constraint)

TOL = 1e-10


def _at(x, y=0.0, z=0.0):
    T = np.eye(4)
    T[:3, 3] = (x, y, z)
    return T


def four_bar_cut(K=np.eye(6)[:2]):
    """four_bar()'s spanning tree cut where the coupler's end meets the rocker's (in-plane rows)."""
    cm = four_bar()
    lA, lB, lC, d = 0.1, 0.3, 0.25, 0.3              # builders.four_bar's default lengths
    return cm, CutJoint("coupler", "rocker", K, _at(lB), _at(lC))


def test_four_bar_equals_c_aba_and_the_explicit_form():
    cm, cut = four_bar_cut()
    q, yd, tau = cm.random_state(40, batch=3)
    assert np.abs(closure_residual(cm.model, q, cut)).max() <= 1e-12       # the cut is where the loop closes
    qd = cm.spanning_velocity(q, yd)
    qdd = closed_chain_forward_dynamics(cm.model, q, qd, cm.spanning_torque(tau), [cut])
    ydd = c_aba(cm, q, yd, tau)
    assert rel_err(qdd[:, cm.independent_v], ydd) <= TOL
    G, g = cm.explicit(q, yd)
    assert rel_err(qdd, np.einsum("bij,bj->bi", G, ydd) + g) <= TOL


def spatial_loop(to_ground=None):
    """Two three-joint branches from the ground whose tips are joined by a spherical joint; with
    to_ground="a" or "b", one four-joint branch whose tip is held at a point of the ground by
    it (the ground frame as cut frame a or b)."""
    b = ModelBuilder("spatial_loop")
    specs = [("a", (0, 0, 0), ((0, 0, 1), (0, 1, 0), (1, 0, 0)))]
    specs += [("b", (0.5, 0.1, 0), ((0, 1, 0), (0, 0, 1), (1, 0, 0)))] if to_ground is None else []
    if to_ground is not None:
        specs[0] = ("a", (0, 0, 0), ((0, 0, 1), (0, 1, 0), (1, 0, 0), (0, 1, 0)))
    for name, at, axes in specs:
        p = WORLD
        for k, ax in enumerate(axes):
            b.add_body(f"{name}{k}", p, RevoluteJoint(f"{name}{k}_joint", ax),
                       placement=_at(*at) if k == 0 else _at(0.3, 0.05 * k, 0), mass=1.0 + 0.3 * k,
                       com=(0.15, 0.02, 0.01), inertia=np.diag([0.002, 0.01, 0.011]))
            p = f"{name}{k}"
    tip = f"a{len(specs[0][2]) - 1}"
    q = np.random.default_rng(41).uniform(-0.6, 0.6, size=sum(len(s[2]) for s in specs))
    if to_ground is not None:
        model = b.build()
        ground = forward_kinematics(model, q).placements[model.link_names.index(tip)] @ _at(0.25)
        b.add_frame("ground", WORLD, ground)                   # where the tip is at q
        model = b.build()
        if to_ground == "b":
            return model, q, CutJoint(tip, "ground", np.eye(6)[:3], _at(0.25), None)
        return model, q, CutJoint("ground", tip, np.eye(6)[:3], None, _at(0.25))
    model = b.build()
    kin = forward_kinematics(model, q)
    tip_a = kin.placements[model.link_names.index("a2")] @ _at(0.25)
    Tb = np.linalg.inv(kin.placements[model.link_names.index("b2")]) @ tip_a   # closes the loop at q
    return model, q, CutJoint("a2", "b2", np.eye(6)[:3], _at(0.25), Tb)


def _pin_frame(model, link, T):
    """(Pinocchio joint id, placement in its joint frame) of a cut frame (builder links are their
    joints' frames: joint id = body + 1; the ground is joint 0)."""
    fr = model.frames[link]
    return fr.body + 1, pin.SE3(fr.placement @ (np.eye(4) if T is None else T))


@pytest.mark.parametrize("to_ground", [None, "a", "b"])
def test_spatial_loop_equals_pinocchio_constraint_dynamics(to_ground):
    model, q, cut = spatial_loop(to_ground)
    assert np.abs(closure_residual(model, q, cut)).max() <= 1e-12
    h = 1e-6                                           # eq. (3): H = d(K e)/dq, by central differences
    H_fd = np.stack([(closure_residual(model, q + h * e, cut) - closure_residual(model, q - h * e, cut)) / (2 * h)
                     for e in np.eye(model.nv)], axis=1)
    rng = np.random.default_rng(42)
    tau = rng.normal(size=model.nv)
    N = np.linalg.svd(H_fd)[2][3:]                      # velocities along the closed chain
    qd = N.T @ rng.normal(size=model.nv - 3)
    H, _ = cut_constraint(model, q, qd, cut)
    assert np.abs(H - H_fd).max() <= 1e-7
    qd = qd - np.linalg.pinv(H) @ (H @ qd)             # exactly on the analytical constraint
    qdd, tau_C = closed_chain_forward_dynamics(model, q, qd, tau, [cut], return_forces=True)
    pm = pin_twin(model)
    cmodel = pin.RigidConstraintModel(pin.ContactType.CONTACT_3D, pm, *_pin_frame(model, cut.link_a, cut.placement_a),
                                      *_pin_frame(model, cut.link_b, cut.placement_b), pin.ReferenceFrame.LOCAL)
    cms = pin.StdVec_RigidConstraintModel([cmodel])
    cds = pin.StdVec_RigidConstraintData([cmodel.createData()])
    pd = pm.createData()
    pin.initConstraintDynamics(pm, pd, cms, cds)
    ref = pin.constraintDynamics(pm, pd, q, qd, tau, cms, cds, pin.ProximalSettings(1e-14, 0.0, 1))
    assert rel_err(qdd, ref) <= 1e-9
    _, h_acc = cut_constraint(model, q, qd, cut)
    assert np.abs(H @ qdd - h_acc).max() <= 1e-9
    # Pinocchio's lambda_c: the force on frame 1 (a) in its axes; tau_C is the one on b (eq. 6)
    assert rel_err(tau_C, -pd.lambda_c) <= 1e-9


def test_redundant_rows_and_open_loops_raise():
    cm, cut = four_bar_cut(np.eye(6)[[0, 1, 2, 3, 4]])   # a revolute cut's 5 rows: 3 vanish in the plane
    q, yd, tau = cm.random_state(43)
    qd = cm.spanning_velocity(q, yd)
    with pytest.raises(SingularModelError, match="coupler/rocker"):
        closed_chain_forward_dynamics(cm.model, q, qd, cm.spanning_torque(tau), [cut])
    cm, cut = four_bar_cut()
    with pytest.raises(ValueError, match="q: the cut joint coupler/rocker is open"):
        closed_chain_forward_dynamics(cm.model, q + 0.1, qd, cm.spanning_torque(tau), [cut])


def test_four_bar_cut_equals_nori_loop_plan():
    """Seed 004's cut-joint system and Nori's loop system (problems/loops.py) are the same
    constrained dynamics: the sparse LU of the latter agrees to rounding."""
    cm, cut = four_bar_cut()
    q, yd, tau = cm.random_state(44, batch=2)
    qd = cm.spanning_velocity(q, yd)
    qdd = closed_chain_forward_dynamics(cm.model, q, qd, cm.spanning_torque(tau), [cut])
    assert rel_err(qdd, compile(loop_forward_dynamics(cm)).solve(q, qd, tau)["qdd"]) <= TOL
