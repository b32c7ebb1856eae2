"""Delassus matrices (all methods) and contact Jacobians against Pinocchio's computeDelassusMatrix
and the dense oracle J M^-1 J^T built from Pinocchio's own getFrameJacobian / crba."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn.models as sm
from oracles import pin, pin_model, pin_twin, rel_err, robot_urdf, to_pin_q
from sparsedyn import SingularModelError, load_urdf
from sparsedyn.contacts import Contact, contact_jacobian
from sparsedyn.delassus import METHODS, delassus
from sparsedyn.model import ModelBuilder, RevoluteJoint
from sparsedyn.opcount import count_operations
from sparsedyn.recursive.pv_osimr import pv_osimr_topology

TOL = 1e-10
ALL = sorted(METHODS)


def random_placement(rng):
    T = np.eye(4)
    Q = np.linalg.qr(rng.normal(size=(3, 3)))[0]
    T[:3, :3] = Q * np.sign(np.linalg.det(Q))
    T[:3, 3] = rng.uniform(-0.2, 0.2, size=3)
    return T


def random_contacts(model, rng, n):
    links = [f for f, fr in model.frames.items() if fr.body >= 0]
    return [Contact(str(rng.choice(links)), str(rng.choice(["6d", "3d"])), random_placement(rng))
            for _ in range(n)]


def pin_contact_models(pmodel, contacts):
    models = pin.StdVec_RigidConstraintModel()
    datas = pin.StdVec_RigidConstraintData()
    for c in contacts:
        fr = pmodel.frames[pmodel.getFrameId(c.link)]
        kind = pin.ContactType.CONTACT_6D if c.kind == "6d" else pin.ContactType.CONTACT_3D
        cm = pin.RigidConstraintModel(kind, pmodel, fr.parentJoint, fr.placement * pin.SE3(c.placement),
                                      pin.ReferenceFrame.LOCAL)
        models.append(cm)
        datas.append(cm.createData())
    return models, datas


def pin_dense(pmodel, pq, contacts):
    """J M^-1 J^T from Pinocchio's LOCAL frame Jacobians and CRBA (independent of sparsedyn)."""
    pdata = pmodel.createData()
    M = pin.crba(pmodel, pdata, pq)
    M = np.triu(M) + np.triu(M, 1).T
    pin.computeJointJacobians(pmodel, pdata, pq)
    pin.framesForwardKinematics(pmodel, pdata, pq)
    rows = []
    for c in contacts:
        Jf = pin.getFrameJacobian(pmodel, pdata, pmodel.getFrameId(c.link), pin.LOCAL)
        Jc = pin.SE3(c.placement).inverse().action @ Jf
        rows.append(Jc if c.kind == "6d" else Jc[:3])
    J = np.vstack(rows)
    return J, J @ np.linalg.solve(M, J.T)


ROBOT_CASES = [("talos", True), ("solo12", True), ("anymal", True), ("panda", False),
               ("humanoid", True), ("hand", False)]


def build(name, fb):
    path = {"humanoid": sm.HUMANOID_URDF, "hand": sm.HAND_URDF}.get(name) or robot_urdf(name)
    return load_urdf(path, floating_base=fb), pin_model(path, fb)


@pytest.fixture(scope="module", params=ROBOT_CASES, ids=lambda p: p[0])
def robot(request):
    return build(*request.param)


def test_all_methods_match_pinocchio(robot):
    model, pmodel = robot
    rng = np.random.default_rng(7)
    contacts = random_contacts(model, rng, 5)
    contacts.append(Contact(contacts[0].link, "3d", random_placement(rng)))   # several on one link
    q = model.random_configuration(rng, batch=3)
    pdata = pmodel.createData()
    refs = []
    for b in range(3):
        pq = to_pin_q(model, pmodel, q[b])
        cms, cds = pin_contact_models(pmodel, contacts)
        D_pin = pin.computeDelassusMatrix(pmodel, pdata, pq, cms, cds, 0.0)
        J_ref, D_ref = pin_dense(pmodel, pq, contacts)
        assert rel_err(D_pin, D_ref) <= TOL                       # the two oracles agree
        assert rel_err(contact_jacobian(model, q[b], contacts), J_ref) <= TOL
        refs.append(D_ref)
    for method in ALL:
        D = delassus(model, q, contacts, method=method)
        m = sum(c.dim for c in contacts)
        assert D.shape == (3, m, m)
        for b in range(3):
            assert rel_err(D[b], refs[b]) <= TOL, method
        assert rel_err(delassus(model, q[1], contacts, method=method), refs[1]) <= TOL


@pytest.mark.parametrize("method", ALL)
def test_floating_base_contact_mixed_and_symmetric(method):
    model, pmodel = build("humanoid", True)
    rng = np.random.default_rng(3)
    contacts = [Contact("base_link", "6d", random_placement(rng)), Contact("base_link", "3d"),
                Contact("l_sole"), Contact("r_foot_corner_fl", "3d"), Contact("l_index_tip", "3d"),
                Contact("r_hand", "6d", random_placement(rng))]
    q = model.random_configuration(rng)
    D = delassus(model, q, contacts, method=method)
    _, D_ref = pin_dense(pmodel, to_pin_q(model, pmodel, q), contacts)
    assert rel_err(D, D_ref) <= TOL
    assert np.abs(D - D.T).max() <= TOL * np.abs(D).max()
    ev = np.linalg.eigvalsh(0.5 * (D + D.T))       # PSD; the two base_link contacts are dependent
    assert ev.min() >= -TOL * ev.max() and np.sum(ev > 1e-9 * ev.max()) == D.shape[0] - 3


@pytest.mark.parametrize("method", ALL)
def test_rank_deficient_jacobian(method):
    """Identical contacts, and more constraint rows (m = 21) than DoFs (panda: nv = 9)."""
    model, pmodel = build("panda", False)
    rng = np.random.default_rng(5)
    T = random_placement(rng)
    contacts = [Contact("panda_link7", "6d", T), Contact("panda_link7", "6d", T),
                Contact("panda_link5", "6d"), Contact("panda_leftfinger", "3d")]
    q = model.random_configuration(rng)
    D = delassus(model, q, contacts, method=method)
    J, D_ref = pin_dense(pmodel, to_pin_q(model, pmodel, q), contacts)
    assert D.shape == (21, 21) and 21 > model.nv
    assert rel_err(D, D_ref) <= TOL
    ev = np.linalg.eigvalsh(0.5 * (D + D.T))
    assert ev.min() >= -TOL * ev.max()                           # singular PSD
    assert np.sum(ev > 1e-9 * ev.max()) == np.linalg.matrix_rank(J)


@pytest.mark.parametrize("method", ALL)
def test_world_welded_link_gives_zero_rows(method):
    model, pmodel = build("panda", False)
    rng = np.random.default_rng(2)
    contacts = [Contact("panda_link0", "6d"), Contact("panda_hand", "3d", random_placement(rng))]
    q = model.random_configuration(rng)
    D = delassus(model, q, contacts, method=method)
    _, D_ref = pin_dense(pmodel, to_pin_q(model, pmodel, q), contacts)
    assert np.all(D[:6] == 0) and np.all(D[:, :6] == 0)
    assert rel_err(D, D_ref) <= TOL


def dfs_random_tree(n, joint_types):
    """A random tree whose subtrees are contiguous (Pinocchio's algorithms assume depth-first
    numbering; sparsedyn only needs parent(i) < i)."""
    for seed in range(1000):
        model = sm.random_tree(n, seed, joint_types)
        if (all(model.subtree(i) == list(range(i, i + len(model.subtree(i)))) for i in range(n))
                and len(set(model.parents)) > 3 and any(j.kind == "spherical" for j in model.joints)):
            return model
    raise AssertionError("no depth-first random tree found")


@pytest.mark.parametrize("method", ALL)
def test_branched_tree_and_random_trees(method):
    """Pairs meeting only at the fixed base (zero blocks) and multi-DoF joints, against Pinocchio
    models built through its Python API."""
    rng = np.random.default_rng(11)
    for model in (sm.branched_tree(2, 2), dfs_random_tree(9, ("revolute", "prismatic", "spherical"))):
        pmodel = pin_twin(model)
        contacts = random_contacts(model, rng, 4)
        q = model.random_configuration(rng)
        _, D_ref = pin_dense(pmodel, q, contacts)
        assert rel_err(delassus(model, q, contacts, method=method), D_ref) <= TOL
    tree = sm.branched_tree(0, 1)                                 # two branches off the base
    contacts = [Contact("left1_tip"), Contact("right1_tip")]
    q = tree.random_configuration(rng)
    D = delassus(tree, q, contacts, method=method)
    _, D_ref = pin_dense(pin_twin(tree), q, contacts)
    assert np.all(D[:6, 6:] == 0) and np.abs(D[:6, :6]).max() > 0
    assert rel_err(D, D_ref) <= TOL


@pytest.mark.parametrize("method", ALL)
def test_serial_chain_welds_along_the_chain(method):
    """A 12-link chain with contacts on every third link and two on the tip: every pair's common
    ancestor is one of the two bodies (KJR's cross recursion runs down one side only)."""
    model = sm.serial_chain(12)
    rng = np.random.default_rng(13)
    contacts = [Contact(f"link{k}", "6d", random_placement(rng)) for k in (3, 6, 9, 12)]
    contacts.append(Contact("link12", "3d", random_placement(rng)))
    q = model.random_configuration(rng, batch=2)
    D = delassus(model, q, contacts, method=method)
    for b in range(2):
        _, D_ref = pin_dense(pin_twin(model), q[b], contacts)
        assert rel_err(D[b], D_ref) <= TOL


def test_fig1_topology():
    """Seed 000, Fig. 1 (paper's link k = our body k-1, paper's 0 = WORLD = -1, EE 7, 8, 9 =
    nodes 6, 7, 8 for contacts on paper links 6, 3, 5)."""
    parents = [-1, 0, 1, 2, 3, 1]
    top = pv_osimr_topology(parents, [5, 2, 4])
    assert set(top.branching) | {-1} == {x - 1 for x in (0, 2, 3, 7, 8, 9)}
    assert list(top.D) == [x - 1 for x in (2, 2, 3, 9, 9, 7, 7, 8, 9)]
    assert list(top.A) == [x - 1 for x in (0, 0, 2, 3, 3, 2, 2, 3, 3)]
    assert top.cca(7, 8) == 2 and top.cca(6, 8) == 1
    assert top.supported[4] == {8} and top.supported[2] == {7, 8} and top.supported[1] == {6, 7, 8}


def test_operation_counts_per_state_and_ordering():
    # stem of 10 links: on a 6-link stem the two-sweep PV-OSIM's rank-1 updates are 1% cheaper
    # once the propagators are counted with their structure (seed 000, Sec. IV-D's caveat)
    model = sm.branched_tree(10, 4)
    contacts = [Contact(f"{s}{k}_tip") for s in ("left", "right") for k in (1, 2, 3, 4)]
    q = model.random_configuration(np.random.default_rng(0), batch=2)
    flops = {}
    for method in ALL:
        with count_operations() as one:
            delassus(model, q[0], contacts, method=method)
        with count_operations() as two:
            delassus(model, q, contacts, method=method)
        assert one.flops > 0 and two.flops == one.flops              # counts are per state
        flops[method] = one.flops
    # seed 000, Fig. 3: with several branches PV-OSIMr beats PV-OSIM and EFPA
    assert flops["pv-osimr"] < flops["pv-osim"] and flops["pv-osimr"] < flops["efpa"]
    assert flops["dense"] > flops["pv-osimr"]


def test_singular_model_raises():
    b = ModelBuilder("massless_tip")
    b.add_body("l1", -1, RevoluteJoint("j1", [0, 0, 1]), mass=1.0, inertia=np.eye(3) * 0.1)
    b.add_body("l2", 0, RevoluteJoint("j2", [0, 1, 0]), mass=0.0)
    model = b.build()
    for method in ALL:
        with pytest.raises(SingularModelError, match="j2"):
            delassus(model, np.zeros(2), [Contact("l1")], method=method)


def test_bad_input():
    model = sm.serial_chain(3)
    q = np.zeros(3)
    with pytest.raises(KeyError, match="no_such_link"):
        delassus(model, q, [Contact("no_such_link")])
    with pytest.raises(KeyError, match="no_such_link"):
        contact_jacobian(model, q, [Contact("no_such_link")])
    with pytest.raises(ValueError, match="kind"):
        Contact("link1", "2d")
    with pytest.raises(ValueError, match="placement"):
        Contact("link1", "6d", np.eye(3))
    with pytest.raises(ValueError, match="placement"):
        Contact("link1", "6d", 2 * np.eye(4))
    with pytest.raises(ValueError, match="pv-osimr"):
        delassus(model, q, [Contact("link1")], method="cholesky")
    with pytest.raises(ValueError, match="q"):
        delassus(model, np.zeros(4), [Contact("link1")])
    with pytest.raises(ValueError, match="Contact"):
        delassus(model, q, ["link1"])


def test_ltl_osim_counts_the_upper_triangle_of_diagonal_blocks():
    """LTL-OSIM's Lambda^-1 = Y Y^T (seed 000 eq. (6), seed 002's SFA): block (k1, k2) sums over
    the DoFs supporting both contacts' bodies, and a diagonal block is symmetric, so the paper
    count charges its upper triangle, m_k (m_k + 1) / 2 entries, and as written the whole block.
    Closed forms from the supports, the matrix against Pinocchio's dense J M^-1 J^T."""
    model, pmodel = build("humanoid", True)
    rng = np.random.default_rng(11)
    contacts = [Contact("l_sole"), Contact("r_hand", "6d", random_placement(rng)),
                Contact("l_index_tip", "3d"), Contact("r_foot_corner_fl", "3d"), Contact("l_sole", "3d")]
    q = model.random_configuration(rng)
    dofs = [sum(model.joints[j].nv for j in model.support(model.frames[c.link].body)) for c in contacts]
    supp = [set(model.support(model.frames[c.link].body)) for c in contacts]
    paper = written = drop = 0
    for k1, c1 in enumerate(contacts):
        t = c1.dim * (c1.dim + 1) // 2                              # upper triangle of a diagonal block
        paper += t * dofs[k1] + t * (dofs[k1] - 1)
        written += c1.dim ** 2 * (2 * dofs[k1] - 1)
        drop += c1.dim * (c1.dim - 1) // 2 * (2 * dofs[k1] - 1)
        for k2 in range(k1 + 1, len(contacts)):
            n = sum(model.joints[j].nv for j in supp[k1] & supp[k2])
            if n:
                pair = c1.dim * contacts[k2].dim * (2 * n - 1)
                paper, written = paper + pair, written + pair
    assert written - paper == drop > 0
    with count_operations() as ops:
        D = delassus(model, q, contacts, method="ltl-osim")
    with count_operations("as_written") as ops_w:
        D_w = delassus(model, q, contacts, method="ltl-osim")
    assert ops.by_kind["Y Y^T"] == paper and ops_w.by_kind["Y Y^T"] == written
    _, D_ref = pin_dense(pmodel, to_pin_q(model, pmodel, q), contacts)
    assert rel_err(D, D_ref) <= TOL and np.array_equal(D, D_w)
