"""Forward dynamics with rigid contacts (sparsedyn.constrained_forward_dynamics) against
Pinocchio's constraintDynamics (LOCAL 6D / 3D contacts, no Baumgarte correction): qdd and the
contact forces lambda_c, floating and fixed base, contact frames off the link frame; redundant
contacts flagged, never NaN; shapes and errors."""
from __future__ import annotations

import warnings

import numpy as np
import pinocchio as pin
import pytest
from oracles import pin_model, pin_twin, rel_err, robot_urdf, to_pin_q, twin_q

import sparsedyn as sd
from sparsedyn.models import HUMANOID_URDF, serial_chain

TOL = 1e-10
OFFSET = np.array([[0.0, -1.0, 0.0, 0.02], [1.0, 0.0, 0.0, -0.01], [0.0, 0.0, 1.0, 0.03],
                   [0.0, 0.0, 0.0, 1.0]])       # a contact frame rotated and moved on its link


def _pinocchio(model, pm, contacts, q, v, tau, mu=0.0, iterations=1, to_q=to_pin_q):
    """(qdd (B, nv), lambda_c (B, m)) of pin.constraintDynamics, LOCAL frames."""
    cms = []
    for c in contacts:
        frame = pm.frames[pm.getFrameId(c.link)]
        kind = pin.ContactType.CONTACT_6D if c.kind == "6d" else pin.ContactType.CONTACT_3D
        cms.append(pin.RigidConstraintModel(kind, pm, frame.parentJoint,
                                            frame.placement * pin.SE3(c.placement),
                                            pin.ReferenceFrame.LOCAL))
    cms = pin.StdVec_RigidConstraintModel(cms)
    qdd, lam = [], []
    for b in range(len(q)):
        pd = pm.createData()
        cds = pin.StdVec_RigidConstraintData([cm.createData() for cm in cms])
        pin.initConstraintDynamics(pm, pd, cms, cds)
        qdd.append(pin.constraintDynamics(pm, pd, to_q(model, pm, q[b]), v[b], tau[b], cms,
                                          cds, pin.ProximalSettings(1e-14, mu, iterations)).copy())
        lam.append(pd.lambda_c.copy())
    return np.array(qdd), np.array(lam)


CASES = {
    "humanoid, both soles 6D": (HUMANOID_URDF, True, [("l_sole", "6d"), ("r_sole", "6d", OFFSET)]),
    "humanoid, both soles 3D": (HUMANOID_URDF, True, [("l_sole", "3d", OFFSET), ("r_sole", "3d")]),
    "solo12, four feet 3D": ("solo12", True, [(f, "3d") for f in
                                              ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")]),
    "panda, hand 3D": ("panda", False, [("panda_hand", "3d", OFFSET)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_equals_pinocchio_constraint_dynamics(case):
    path, floating, spec = CASES[case]
    path = path if path == HUMANOID_URDF else robot_urdf(path)
    model, pm = sd.load_urdf(path, floating_base=floating), pin_model(path, floating)
    contacts = [sd.Contact(*c) for c in spec]
    plan = sd.constrained_forward_dynamics(model, contacts)
    rng = np.random.default_rng(5)
    B = 3
    q = model.random_configuration(rng, batch=B)
    v, tau = rng.normal(size=(2, B, model.nv))
    res = plan.solve(q, v, tau)
    qdd, lam = _pinocchio(model, pm, contacts, q, v, tau)
    assert res.ok.all()
    assert rel_err(res["qdd"], qdd) <= TOL
    assert rel_err(res["lambda"], lam) <= TOL
    one = plan.solve(q[1], v[1], tau[1])                    # one state: no batch axis
    assert one["qdd"].shape == (model.nv,) and one["lambda"].shape == lam[1].shape
    assert rel_err(one["lambda"], lam[1]) <= TOL and one.ok
    empty = plan.solve(q[:0], v[:0], tau[:0])
    assert empty["qdd"].shape == (0, model.nv) and empty["lambda"].shape == (0, lam.shape[1])


def test_redundant_contacts_are_flagged_and_finite():
    """A 6-link chain stretched straight (q = 0) holding its tip with a 3D contact: the tip
    cannot move along the chain, so that constraint repeats what the joints already hold and
    the contact force along it is not determined. The states are flagged
    (RedundantContactsWarning, ok False), their numbers finite: qdd the constrained motion and
    lambda the ridge-regularised (least) one, as Pinocchio's proximal solution converges to.
    Contacts that outnumber the joints are refused when planning (IllPosedError)."""
    model = serial_chain(6)
    pm = pin_twin(model)
    contacts = [sd.Contact("link6", "3d")]
    plan = sd.constrained_forward_dynamics(model, contacts)
    rng = np.random.default_rng(6)
    q, v = np.zeros((2, 2, model.nv))
    tau = rng.normal(size=(2, model.nv))
    with pytest.warns(sd.RedundantContactsWarning, match="redundant contacts"):
        res = plan.solve(q, v, tau)
    assert not res.ok.any()
    assert np.isfinite(res["qdd"]).all() and np.isfinite(res["lambda"]).all()
    qdd, lam = _pinocchio(model, pm, contacts, q, v, tau, mu=1e-8, iterations=1000,
                          to_q=twin_q)
    assert rel_err(res["qdd"], qdd) <= 1e-6
    assert rel_err(res["lambda"], lam) <= 1e-6
    path = robot_urdf("panda")
    with pytest.raises(sd.IllPosedError, match="structurally ill-posed"):
        sd.constrained_forward_dynamics(sd.load_urdf(path), [sd.Contact("panda_hand", "6d"),
                                                             sd.Contact("panda_link4", "3d")])


def test_bad_contacts_and_inputs_are_named():
    model = sd.load_urdf(HUMANOID_URDF, floating_base=True)
    with pytest.raises(ValueError, match="one contact per link"):
        sd.constrained_forward_dynamics(model, [sd.Contact("l_sole"), sd.Contact("l_sole", "3d")])
    with pytest.raises(ValueError, match="are one rigid body"):
        sd.constrained_forward_dynamics(model, [sd.Contact("l_sole"),
                                                sd.Contact("l_foot_corner_fl", "3d")])
    with pytest.raises(sd.SensorError, match="no link named 'nosuch'"):
        sd.constrained_forward_dynamics(model, [sd.Contact("nosuch")])
    with pytest.raises(ValueError, match="at least one"):
        sd.constrained_forward_dynamics(model, [])
    plan = sd.constrained_forward_dynamics(model, [sd.Contact("l_sole")])
    q = model.neutral_configuration()
    v = np.zeros(model.nv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.PivotBreakdownWarning)   # re-solved with pivoting
        res = plan.solve(q, v, np.zeros(model.nv))
    assert res.ok and np.isfinite(res["qdd"]).all()
    bad = v.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="tau: non-finite"):
        plan.solve(q, v, bad)
    with pytest.raises(ValueError, match="v: expected shape"):
        plan.solve(q, v[:-1], v)
