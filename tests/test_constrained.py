"""Forward dynamics with rigid contacts (sparsedyn.constrained_forward_dynamics) against
Pinocchio's constraintDynamics (LOCAL 6D / 3D contacts): qdd and the contact forces lambda_c,
floating and fixed base, contact frames off the link frame, Baumgarte corrections, contacts
released per state; redundant contacts flagged, never NaN; shapes and errors."""
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


def _pinocchio(model, pm, contacts, q, v, tau, mu=0.0, iterations=1, to_q=to_pin_q,
               gains=None, reference=None):
    """(qdd (B, nv), lambda_c (B, m)) of pin.constraintDynamics, LOCAL frames; gains (Kp (B,),
    Kd (B,)) for every contact or {link: (Kp, Kd)}, reference {link: (B, 4, 4)}: the Baumgarte
    corrector and joint2_placement."""
    qdd, lam = [], []
    for b in range(len(q)):
        cms = []
        for c in contacts:
            frame = pm.frames[pm.getFrameId(c.link)]
            kind = pin.ContactType.CONTACT_6D if c.kind == "6d" else pin.ContactType.CONTACT_3D
            placement = frame.placement * pin.SE3(c.placement)
            if reference is None:
                cm = pin.RigidConstraintModel(kind, pm, frame.parentJoint, placement,
                                              pin.ReferenceFrame.LOCAL)
            else:
                cm = pin.RigidConstraintModel(kind, pm, frame.parentJoint, placement, 0,
                                              pin.SE3(reference[c.link][b]),
                                              pin.ReferenceFrame.LOCAL)
            Kp, Kd = (gains if isinstance(gains, tuple) else (gains or {}).get(c.link, (None,) * 2))
            if Kp is not None:
                cm.m_baumgarte_parameters.Kp = Kp[b]
                cm.m_baumgarte_parameters.Kd = Kd[b]
            cms.append(cm)
        cms = pin.StdVec_RigidConstraintModel(cms)
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


def _case(case):
    """(model, Pinocchio model, contacts, plan) of CASES[case]."""
    path, floating, spec = CASES[case]
    path = path if path == HUMANOID_URDF else robot_urdf(path)
    model, pm = sd.load_urdf(path, floating_base=floating), pin_model(path, floating)
    contacts = [sd.Contact(*c) for c in spec]
    return model, pm, contacts, sd.constrained_forward_dynamics(model, contacts)


@pytest.mark.parametrize("case", sorted(CASES))
def test_equals_pinocchio_constraint_dynamics(case):
    """On every route: the compiled kernel (numba, generated C; the contact rows' gravity term
    propagated in it) and the NumPy reference."""
    model, pm, contacts, plan = _case(case)
    rng = np.random.default_rng(5)
    B = 3
    q = model.random_configuration(rng, batch=B)
    v, tau = rng.normal(size=(2, B, model.nv))
    qdd, lam = _pinocchio(model, pm, contacts, q, v, tau)
    # generated C (a compile per plan: one case here, the C backend's own tests cover more)
    backends = ("numpy", "numba") + (("c",) if case == "panda, hand 3D" else ())
    for backend in backends:
        res = plan.solve(q, v, tau, backend=backend)
        assert res.ok.all()
        assert rel_err(res["qdd"], qdd) <= TOL, backend
        assert rel_err(res["lambda"], lam) <= TOL, backend
        one = plan.solve(q[1], v[1], tau[1], backend=backend)   # C: the one-state function
        assert one.ok and rel_err(one["qdd"], qdd[1]) <= TOL and rel_err(one["lambda"], lam[1]) <= TOL
        assert one.wrench(contacts[0].link).shape == (6,)
        bad = tau[1].copy()
        bad[0] = np.nan                       # flagged by the kernel: the general path names it
        with pytest.raises(ValueError, match="tau: non-finite"):
            plan.solve(q[1], v[1], bad, backend=backend)
    res = plan.solve(q, v, tau)
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
    for backend in (None, "numpy", "numba"):                 # named on every route
        with pytest.raises(ValueError, match="threads: expected"):
            plan.solve(q, v, v, threads=0, backend=backend)


def test_baumgarte_corrections_equal_pinocchio():
    """Per-state gains and reference placements (Pinocchio's corrector and joint2_placement on
    the world): the contact frames are pulled to their references (Kp) and damped (Kd)."""
    model, pm = sd.load_urdf(HUMANOID_URDF, floating_base=True), pin_model(HUMANOID_URDF, True)
    contacts = [sd.Contact("l_sole", "6d", OFFSET), sd.Contact("r_sole", "3d", OFFSET)]
    plan = sd.constrained_forward_dynamics(model, contacts)
    rng = np.random.default_rng(8)
    B = 4
    q = model.random_configuration(rng, batch=B)
    v, tau = 0.1 * rng.normal(size=(2, B, model.nv))     # moderate speeds: the terms compare
    reference = {c.link: np.array([pin.SE3.Random().homogeneous for _ in range(B)])
                 for c in contacts}
    Kp, Kd = rng.uniform(1.0, 50.0, size=(2, B))
    res = plan.solve(q, v, tau, baumgarte=(Kp, Kd), reference=reference)
    qdd, lam = _pinocchio(model, pm, contacts, q, v, tau, gains=(Kp, Kd), reference=reference)
    plain = _pinocchio(model, pm, contacts, q, v, tau)[0]
    assert rel_err(qdd, plain) > 1e-3                       # the corrections act
    assert res.ok.all()
    assert rel_err(res["qdd"], qdd) <= TOL and rel_err(res["lambda"], lam) <= TOL
    # damping alone needs no reference; gains on one contact only
    res = plan.solve(q, v, tau, baumgarte={"r_sole": (0.0, 7.0)})
    qdd, lam = _pinocchio(model, pm, contacts, q, v, tau,
                          gains={"r_sole": (np.zeros(B), np.full(B, 7.0))})
    assert rel_err(res["qdd"], qdd) <= TOL and rel_err(res["lambda"], lam) <= TOL


@pytest.mark.parametrize("case", ["humanoid, both soles 6D", "solo12, four feet 3D"])
def test_released_contacts_equal_pinocchio_on_the_held_ones(case):
    """One plan for every contact set: per state, the released contacts' wrenches are zero and
    qdd is Pinocchio's constraintDynamics with the held contacts alone (ABA with none); equal
    too to a plan compiled for the held set."""
    model, pm, contacts, plan = _case(case)
    rng = np.random.default_rng(9)
    k = len(contacts)
    sets = [np.array([(s >> j) & 1 for j in range(k)], bool) for s in range(2 ** k)]
    B = len(sets) + 2
    active = np.array(sets + [np.ones(k, bool)] * 2)
    q = model.random_configuration(rng, batch=B)
    v, tau = rng.normal(size=(2, B, model.nv))
    res = plan.solve(q, v, tau, contacts={c.link: active[:, j] for j, c in enumerate(contacts)})
    assert res.ok.all()
    rows = np.cumsum([0] + [c.dim for c in contacts])
    for b in range(B):
        held = [c for j, c in enumerate(contacts) if active[b, j]]
        if held:
            qdd, lam = _pinocchio(model, pm, held, q[b:b + 1], v[b:b + 1], tau[b:b + 1])
            ours = np.concatenate([res["lambda"][b, rows[j]:rows[j + 1]] for j in range(k)
                                   if active[b, j]])
            assert rel_err(ours, lam[0]) <= TOL, (b, active[b])
        else:
            qdd = sd.aba(model, q[b:b + 1], v[b:b + 1], tau[b:b + 1])
        assert rel_err(res["qdd"][b], qdd[0]) <= TOL, (b, active[b])
        for j, c in enumerate(contacts):
            if not active[b, j]:
                assert np.abs(res.wrench(c.link)[b]).max() <= 1e-12 * max(
                    1.0, np.abs(res["lambda"][b]).max())
        if held and len(held) < k:
            own = sd.constrained_forward_dynamics(model, held).solve(q[b], v[b], tau[b])
            assert rel_err(res["qdd"][b], own["qdd"]) <= TOL


def test_released_redundant_contacts_are_flagged_and_finite():
    """A stretched chain holding its tip and its middle (3D): the held set stays redundant when
    either is released; such states are flagged (ok False), finite, with the constrained qdd."""
    model = serial_chain(12)
    pm = pin_twin(model)
    contacts = [sd.Contact("link6", "3d"), sd.Contact("link12", "3d")]
    plan = sd.constrained_forward_dynamics(model, contacts)
    rng = np.random.default_rng(10)
    q, v = np.zeros((2, 2, model.nv))
    tau = rng.normal(size=(2, model.nv))
    with pytest.warns(sd.RedundantContactsWarning, match="redundant contacts"):
        res = plan.solve(q, v, tau, contacts={"link6": np.array([False, True]),
                                              "link12": np.array([True, False])})
    assert not res.ok.any()
    assert np.isfinite(res["qdd"]).all() and np.isfinite(res["lambda"]).all()
    for b, held in enumerate((contacts[1], contacts[0])):
        qdd, _ = _pinocchio(model, pm, [held], q[b:b + 1], v[b:b + 1], tau[b:b + 1], mu=1e-8,
                            iterations=1000, to_q=twin_q)
        assert rel_err(res["qdd"][b], qdd[0]) <= 1e-6


def test_per_call_arguments_are_checked():
    model = sd.load_urdf(HUMANOID_URDF, floating_base=True)
    plan = sd.constrained_forward_dynamics(model, [sd.Contact("l_sole"), sd.Contact("r_sole")])
    q, v = model.neutral_configuration(), np.zeros(model.nv)
    with pytest.raises(KeyError, match="'head' is not one of this plan's contacts"):
        plan.solve(q, v, v, contacts={"head": False})
    with pytest.raises(ValueError, match=r"contacts\['l_sole'\]: expected a bool"):
        plan.solve(q, v, v, contacts={"l_sole": 1})
    with pytest.raises(ValueError, match=r"reference\['l_sole'\]: Kp != 0"):
        plan.solve(q, v, v, baumgarte=(10.0, 1.0))
    with pytest.raises(ValueError, match="acts through Baumgarte gains"):
        plan.solve(q, v, v, reference={"l_sole": np.eye(4)})
    with pytest.raises(ValueError, match=r"baumgarte\['r_sole'\]: expected finite"):
        plan.solve(q, v, v, baumgarte={"r_sole": (np.nan, 1.0)})
    with pytest.raises(KeyError, match="baumgarte"):
        plan.solve(q, v, v, baumgarte={"head": (1.0, 1.0)})


def test_log6_equals_pinocchio_near_zero_and_pi():
    """The SE(3) logarithm of the Baumgarte error (sparsedyn.spatial.log6) against pin.log6,
    with rotation angles from 1e-12 to pi - 1e-12 (where the formulas switch or cancel)."""
    from sparsedyn.spatial import log6
    rng = np.random.default_rng(11)
    angles = np.concatenate([10.0 ** rng.uniform(-12, 0, 60), np.pi - 10.0 ** rng.uniform(-12, -1, 60),
                             np.pi / 2 * (1 + rng.uniform(-1e-6, 1e-6, 20)), rng.uniform(0, np.pi, 60)])
    for angle in angles:
        axis = rng.normal(size=3)
        M = pin.SE3(pin.exp3(angle * axis / np.linalg.norm(axis)), rng.normal(size=3))
        ours = log6(M.rotation[None], M.translation[None])[0]
        assert np.abs(pin.exp6(pin.Motion(ours)).homogeneous - M.homogeneous).max() <= 1e-12
        if angle < np.pi - 1e-6:                  # at pi, +-pi are both the logarithm
            assert np.abs(ours - pin.log6(M).vector).max() <= 1e-11 * max(1, np.abs(ours).max())


def test_compiled_route_takes_what_it_can_and_hands_over_the_rest():
    """The compiled route solves the states with every contact held; released contacts and
    Baumgarte corrections keep their numbers on it (equal to the NumPy route), a singular
    state goes to the reference route (flagged, finite)."""
    model = sd.load_urdf(HUMANOID_URDF, floating_base=True)
    contacts = [sd.Contact("l_sole", "6d", OFFSET), sd.Contact("r_sole", "3d")]
    plan = sd.constrained_forward_dynamics(model, contacts)
    rng = np.random.default_rng(12)
    B = 40
    q = model.random_configuration(rng, batch=B)
    v, tau = 0.3 * rng.normal(size=(2, B, model.nv))
    kw = dict(contacts={"r_sole": rng.uniform(size=B) < 0.7}, baumgarte=(20.0, 3.0),
              reference={c.link: np.array([pin.SE3.Random().homogeneous for _ in range(B)])
                         for c in contacts})
    ref = plan.solve(q, v, tau, backend="numpy", **kw)
    for threads in (1, 2):
        res = plan.solve(q, v, tau, backend="numba", threads=threads, **kw)
        assert res.ok.all()
        assert rel_err(res["qdd"], ref["qdd"]) <= TOL and rel_err(res["lambda"], ref["lambda"]) <= TOL
    chain = serial_chain(6)
    plan = sd.constrained_forward_dynamics(chain, [sd.Contact("link6", "3d")])
    with pytest.warns(sd.RedundantContactsWarning):
        res = plan.solve(np.zeros((2, 6)), np.zeros((2, 6)), rng.normal(size=(2, 6)),
                         backend="numba")
    assert not res.ok.any() and np.isfinite(res["qdd"]).all()
    with pytest.raises(ValueError, match="backend: expected"):
        plan.solve(np.zeros(6), np.zeros(6), np.zeros(6), backend="cuda")
