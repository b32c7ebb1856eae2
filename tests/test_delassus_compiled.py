"""The compiled PV-OSIMr (sparsedyn/kernels/pv_osimr_numba.py, delassus(..., backend="numba"))
against Pinocchio's computeDelassusMatrix: the humanoid with 6D feet and 3D fingertips, talos and
solo12 free-flyers with mixed contacts at random placements (several on one link, on the floating
base), trees over every joint kind, batched and single, serial and threaded; typed errors; the
per-state operation counts of the reference path."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn.models as sm
from oracles import pin, rel_err, to_pin_q
from sparsedyn import SingularModelError
from sparsedyn.contacts import Contact, resolve_contacts
from sparsedyn.delassus import delassus
from sparsedyn.kernels.pv_osimr_numba import program_for, run
from sparsedyn.model import (FreeFlyerJoint, ModelBuilder, PlanarJoint, PrismaticJoint,
                             RevoluteJoint, SphericalJoint)
from sparsedyn.model.model import WORLD
from sparsedyn.opcount import count_operations
from test_delassus import build, pin_contact_models, pin_dense, random_placement
from oracles import pin_twin, twin_q

TOL = 1e-10
TIPS = ["l_thumb_tip", "l_index_tip", "l_middle_tip", "r_thumb_tip", "r_index_tip", "r_middle_tip"]


def pin_delassus(pmodel, pqs, cms, cds):
    """Pinocchio's computeDelassusMatrix, one state at a time."""
    pdata = pmodel.createData()
    return np.array([pin.computeDelassusMatrix(pmodel, pdata, pq, cms, cds, 0.0) for pq in pqs])


def check_batch_and_single(model, q, contacts, refs):
    D = delassus(model, q, contacts, backend="numba")
    assert D.shape == refs.shape
    for b in range(len(q)):
        assert rel_err(D[b], refs[b]) <= TOL, b
    assert rel_err(delassus(model, q[-1], contacts, backend="numba"), refs[-1]) <= TOL
    D = delassus(model, q, contacts, backend="numpy")     # the reference path stays exact too
    assert max(rel_err(D[b], refs[b]) for b in range(len(q))) <= TOL
    program = program_for(model, resolve_contacts(model, contacts))
    for parallel in (False, True):                   # both loop nests of the kernel
        out, status = run(program, q, parallel=parallel)
        assert np.all(status < 0)
        assert max(rel_err(out[b], refs[b]) for b in range(len(q))) <= TOL


def urdf_case(name, contacts, batch, seed):
    model, pmodel = build(name, True)
    q = model.random_configuration(np.random.default_rng(seed), batch=batch)
    cms, cds = pin_contact_models(pmodel, contacts)
    return model, q, pin_delassus(pmodel, [to_pin_q(model, pmodel, x) for x in q], cms, cds)


def test_humanoid_feet_and_fingertips():
    """Issue #5's scenario: 6D welds at both soles, 3D points at six fingertips (m = 30)."""
    contacts = [Contact("l_sole"), Contact("r_sole")] + [Contact(t, "3d") for t in TIPS]
    model, q, refs = urdf_case("humanoid", contacts, 7, 0)
    assert refs.shape == (7, 30, 30)
    check_batch_and_single(model, q, contacts, refs)
    assert delassus(model, q, contacts).shape == (7, 30, 30)       # numba is the default backend


@pytest.mark.parametrize("name,seed,base,links", [
    ("talos", 11, "base_link", ["left_sole_link", "right_sole_link", "gripper_left_base_link",
                            "arm_right_7_link", "torso_2_link"]),
    ("solo12", 12, "base_link", ["FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT", "FL_LOWER_LEG"]),
])
def test_free_flyers_mixed_contacts(name, seed, base, links):
    rng = np.random.default_rng(seed)
    contacts = [Contact(link, str(rng.choice(["6d", "3d"])), random_placement(rng)) for link in links]
    contacts += [Contact(links[0], "3d", random_placement(rng)),      # several on one link
                 Contact(links[0], "6d", random_placement(rng)),
                 Contact(base, "6d", random_placement(rng)),          # on the floating base
                 Contact(base, "3d", random_placement(rng))]
    model, q, refs = urdf_case(name, contacts, 5, 1)
    check_batch_and_single(model, q, contacts, refs)


def test_fixed_base_batches_of_zero_one_and_odd():
    """The fixed-base humanoid (6D sole, 3D fingertips) at B = 1 and an odd B = 3 (the two
    threads' chunks unequal) against Pinocchio; B = 0 gives an empty (0, m, m) on every path."""
    contacts = [Contact("l_sole"), Contact(TIPS[0], "3d"), Contact(TIPS[4], "3d")]
    model, pmodel = build("humanoid", False)
    q = model.random_configuration(np.random.default_rng(8), batch=3)
    cms, cds = pin_contact_models(pmodel, contacts)
    refs = pin_delassus(pmodel, [to_pin_q(model, pmodel, x) for x in q], cms, cds)
    assert refs.shape == (3, 12, 12)
    check_batch_and_single(model, q[:1], contacts, refs[:1])
    check_batch_and_single(model, q, contacts, refs)
    for backend in ("numba", "numpy"):
        assert delassus(model, q[:0], contacts, backend=backend).shape == (0, 12, 12)
    program = program_for(model, resolve_contacts(model, contacts))
    for parallel in (False, True):
        out, status = run(program, q[:0], parallel=parallel)
        assert out.shape == (0, 12, 12) and status.shape == (0,)


def test_contacts_on_floating_base_only():
    contacts = [Contact("base_link", "6d"), Contact("base_link", "3d", random_placement(np.random.default_rng(4)))]
    model, q, refs = urdf_case("solo12", contacts, 3, 2)
    check_batch_and_single(model, q, contacts, refs)


def every_joint_tree(root):
    """Depth-first tree (Pinocchio's numbering) over every joint kind: root, then a spherical
    joint carrying two branches (revolute - prismatic, revolute) and a planar - revolute branch."""
    rng = np.random.default_rng(5)
    b = ModelBuilder(f"every_joint_{root.kind}")

    def add(name, parent, joint):
        return b.add_body(name, parent, joint, placement=random_placement(rng), mass=rng.uniform(0.5, 2),
                          com=rng.uniform(-0.1, 0.1, 3), inertia=np.diag(rng.uniform(0.01, 0.1, 3)))
    r = add("root", WORLD, root)
    s = add("ball", r, SphericalJoint("ball_j"))
    a = add("arm", s, RevoluteJoint("arm_j", rng.normal(size=3)))
    add("slider", a, PrismaticJoint("slider_j", rng.normal(size=3)))
    add("hand", s, RevoluteJoint("hand_j", rng.normal(size=3)))
    p = add("plate", r, PlanarJoint("plate_j"))
    add("tip", p, RevoluteJoint("tip_j", rng.normal(size=3)))
    return b.build()


def twin_contact_models(model, pmodel, contacts):
    """Pinocchio's LOCAL contact models of `contacts` on a pin_twin model (builder links: body i
    is Pinocchio joint i + 1)."""
    cms, cds = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for c in contacts:
        kind = pin.ContactType.CONTACT_6D if c.kind == "6d" else pin.ContactType.CONTACT_3D
        cm = pin.RigidConstraintModel(kind, pmodel, model.frames[c.link].body + 1, pin.SE3(c.placement),
                                      pin.ReferenceFrame.LOCAL)
        cms.append(cm)
        cds.append(cm.createData())
    return cms, cds


def every_joint_case(root, seed, batch):
    """every_joint_tree(root), contacts on every kind of link, `batch` states, Pinocchio's answers."""
    model = every_joint_tree(root)
    pmodel = pin_twin(model)
    rng = np.random.default_rng(seed)
    contacts = [Contact("slider", "6d", random_placement(rng)), Contact("hand", "3d", random_placement(rng)),
                Contact("tip", "6d", random_placement(rng)), Contact("ball", "3d", random_placement(rng)),
                Contact("root", "3d", random_placement(rng)), Contact("slider", "3d")]
    cms, cds = twin_contact_models(model, pmodel, contacts)
    q = model.random_configuration(rng, batch=batch)
    return model, q, contacts, pin_delassus(pmodel, [twin_q(model, pmodel, x) for x in q], cms, cds)


ROOTS = [FreeFlyerJoint("root_j"), PlanarJoint("root_j"), SphericalJoint("root_j"),
         PrismaticJoint("root_j", [0.3, 1, -0.2])]


@pytest.mark.parametrize("root", ROOTS, ids=lambda j: j.kind)
def test_every_joint_kind(root):
    model, q, contacts, refs = every_joint_case(root, 6, 4)
    check_batch_and_single(model, q, contacts, refs)


def test_world_welded_contact_rows_are_zero():
    """Oracle: J M^-1 J^T from Pinocchio's Jacobians and CRBA (computeDelassusMatrix with a
    constraint on the universe joint corrupts the heap in pinocchio 4.1: segfault at exit)."""
    model, pmodel = build("panda", False)
    rng = np.random.default_rng(2)
    contacts = [Contact("panda_link0", "6d"), Contact("panda_hand", "3d", random_placement(rng)),
                Contact("panda_link4", "6d", random_placement(rng))]
    q = model.random_configuration(rng, batch=3)
    refs = np.array([pin_dense(pmodel, to_pin_q(model, pmodel, x), contacts)[1] for x in q])
    D = delassus(model, q, contacts, backend="numba")
    assert np.all(D[:, :6] == 0) and np.all(D[:, :, :6] == 0)
    assert max(rel_err(D[b], refs[b]) for b in range(3)) <= TOL


def test_operation_counts_are_the_reference_ones():
    model = sm.humanoid()
    contacts = [Contact("l_sole"), Contact("r_sole")] + [Contact(t, "3d") for t in TIPS]
    q = model.random_configuration(np.random.default_rng(0), batch=3)
    counts = {}
    for backend in ("numpy", "numba"):
        for B in (1, 3):
            with count_operations() as ops:
                delassus(model, q[:B], contacts, backend=backend)
            counts[backend, B] = (ops.as_dict(), dict(ops.by_kind))
    assert counts["numba", 1] == counts["numba", 3] == counts["numpy", 1] == counts["numpy", 3]
    assert counts["numba", 1][0]["flops"] > 0


def singular_models():
    b = ModelBuilder("massless_tip")
    b.add_body("l1", WORLD, RevoluteJoint("j1", [0, 0, 1]), mass=1.0, inertia=np.eye(3) * 0.1)
    b.add_body("l2", 0, RevoluteJoint("j2", [0, 1, 0]), mass=0.0)
    yield b.build(), "j2", "l2"
    b = ModelBuilder("massless_ball")                # multi-DoF pivot: the Cholesky test
    b.add_body("base", WORLD, FreeFlyerJoint("root"), mass=2.0, inertia=np.eye(3) * 0.1)
    b.add_body("arm", 0, RevoluteJoint("arm_j", [1, 0, 0]), mass=1.0, inertia=np.eye(3) * 0.1)
    b.add_body("ball", 1, SphericalJoint("ball_j"), mass=0.0)
    yield b.build(), "ball_j", "ball"


@pytest.mark.parametrize("case", list(singular_models()), ids=lambda c: c[0].name)
def test_singular_model_raises(case):
    model, joint, body = case
    q = model.random_configuration(np.random.default_rng(0), batch=3)
    with pytest.raises(SingularModelError, match=joint) as err:
        delassus(model, q, [Contact(model.link_names[0])], backend="numba")
    assert body in err.value.bodies and err.value.batch_indices == (0, 1, 2)
    with pytest.raises(SingularModelError, match=joint):
        delassus(model, q[0], [Contact(model.link_names[-1], "3d")], backend="numba")


def test_bad_input():
    model = sm.serial_chain(3)
    q = np.zeros(3)
    with pytest.raises(KeyError, match="no_such_link"):
        delassus(model, q, [Contact("no_such_link")], backend="numba")
    with pytest.raises(ValueError, match="q"):
        delassus(model, np.zeros(4), [Contact("link1")], backend="numba")
    with pytest.raises(ValueError, match="q"):
        delassus(model, np.full(3, np.nan), [Contact("link1")], backend="numba")
    with pytest.raises(ValueError, match="Contact"):
        delassus(model, q, ["link1"], backend="numba")
    with pytest.raises(ValueError, match="backend"):
        delassus(model, q, [Contact("link1")], backend="cuda")
    with pytest.raises(ValueError, match="efpa"):
        delassus(model, q, [Contact("link1")], method="efpa", backend="numba")
    fb = sm.humanoid()
    qf = fb.neutral_configuration()
    qf[3:7] = [0.0, 0.0, 0.0, 2.0]
    with pytest.raises(ValueError, match="quaternion"):
        delassus(fb, qf, [Contact("l_sole")], backend="numba")


# The C kernel on vectors of LANES states (sparsedyn/backends/c_pv_osimr.py): batches of 0, 1,
# LANES - 1, LANES + 1 and 37 states (whole and partial groups), against Pinocchio, directly
# (run_lanes) and through delassus (which picks it for B >= c_pv_osimr.MIN_BATCH)

from sparsedyn.backends import c_pv_osimr                      # noqa: E402
from sparsedyn.backends.c_vector import LANES                  # noqa: E402
from sparsedyn.kernels.parallel import MIN_STATES_PER_THREAD    # noqa: E402

LANE_BATCHES = (0, 1, LANES - 1, LANES + 1, 37)


def check_lanes(model, q, contacts, refs):
    """run_lanes and delassus on the first B states for each B of LANE_BATCHES."""
    program = program_for(model, resolve_contacts(model, contacts))
    for B in LANE_BATCHES:
        out, status = c_pv_osimr.run_lanes(program, q[:B])
        assert out.shape == (B, program.m, program.m) and np.all(status == -1)
        assert all(rel_err(out[b], refs[b]) <= TOL for b in range(B)), B
        D = delassus(model, q[:B], contacts, backend="numba")
        assert all(rel_err(D[b], refs[b]) <= TOL for b in range(B)), B


def test_lanes_humanoid_feet_and_fingertips():
    contacts = [Contact("l_sole"), Contact("r_sole")] + [Contact(t, "3d") for t in TIPS]
    model, q, refs = urdf_case("humanoid", contacts, max(LANE_BATCHES), 3)
    check_lanes(model, q, contacts, refs)


def test_lanes_panda_fixed_base():
    rng = np.random.default_rng(21)
    contacts = [Contact("panda_hand", "6d", random_placement(rng)),
                Contact("panda_link4", "3d", random_placement(rng)),
                Contact("panda_link7", "3d")]
    model, q, refs = urdf_case("panda", contacts, max(LANE_BATCHES), 4)
    check_lanes(model, q, contacts, refs)


@pytest.mark.parametrize("root", ROOTS, ids=lambda j: j.kind)
def test_lanes_every_joint_kind(root):
    """Spherical, planar, prismatic and free joints: the kernel's multi-DoF pivots (Cholesky)."""
    check_lanes(*every_joint_case(root, 16, max(LANE_BATCHES)))


def test_lanes_threads_split_the_batch(monkeypatch):
    """Two threads (ranges of at least MIN_STATES_PER_THREAD states) give each state's answer,
    on an OpenMP team (where the compiler has OpenMP) and on the Python pool the same bits."""
    from sparsedyn.backends.generated_c import openmp_flags
    contacts = [Contact("l_sole"), Contact(TIPS[1], "3d")]
    model, q, refs = urdf_case("humanoid", contacts, 2 * MIN_STATES_PER_THREAD + 5, 9)
    program = program_for(model, resolve_contacts(model, contacts))
    out, status = c_pv_osimr.run_lanes(program, q, threads=2)
    assert np.all(status == -1)
    assert max(rel_err(out[b], refs[b]) for b in range(len(q))) <= TOL
    assert (c_pv_osimr._lib["team"] is not None) is bool(openmp_flags())
    monkeypatch.setitem(c_pv_osimr._lib, "team", None)          # the Python pool's ranges
    pool_out, pool_status = c_pv_osimr.run_lanes(program, q, threads=2)
    assert np.array_equal(pool_out, out) and np.array_equal(pool_status, status)


def elbow_point_mass():
    """A point mass on the first joint's axis and a point mass m at distance l on a second link,
    both joints about z at distance L: det M = m^2 L^2 l^2 sin^2 q2, so the states with q2 = 0
    (and only they) are singular, and the first joint's articulated pivot m L^2 sin^2 q2 is 0
    there."""
    b = ModelBuilder("elbow_point_mass")
    b.add_body("upper", WORLD, RevoluteJoint("shoulder", [0, 0, 1]), mass=1.0,
               inertia=np.zeros((3, 3)))
    b.add_body("fore", 0, RevoluteJoint("elbow", [0, 0, 1]), placement=np.array(
        [[1.0, 0, 0, 0.7], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]), mass=2.0,
        com=(0.5, 0.0, 0.0), inertia=np.zeros((3, 3)))
    return b.build()


def test_lanes_singular_pivot_flags_its_lane_only():
    model = elbow_point_mass()
    pmodel = pin_twin(model)
    rng = np.random.default_rng(17)
    q = rng.uniform(0.3, 2.8, size=(LANES + 1, 2))  # sin q2 far from 0
    singular = (2, LANES)                           # one in the whole group, one in the partial
    q[singular, 1] = 0.0
    contacts = [Contact("fore", "3d", random_placement(rng))]
    program = program_for(model, resolve_contacts(model, contacts))
    out, status = c_pv_osimr.run_lanes(program, q)
    assert status[list(singular)].tolist() == [0, 0]            # body "upper": the shoulder
    good = [b for b in range(len(q)) if b not in singular]
    assert np.all(status[good] == -1)
    cms, cds = twin_contact_models(model, pmodel, contacts)
    refs = pin_delassus(pmodel, [twin_q(model, pmodel, q[b]) for b in good], cms, cds)
    assert max(rel_err(out[b], r) for b, r in zip(good, refs)) <= TOL
    with pytest.raises(SingularModelError, match="shoulder") as err:
        delassus(model, q, contacts, backend="numba")
    assert err.value.batch_indices == singular


def test_lanes_nan_state_is_flagged_not_spread():
    """delassus rejects a non-finite q (test_bad_input); the kernel itself, handed one, flags
    that state's pivot as the per-state kernel does and answers the others of its group."""
    contacts = [Contact("l_sole"), Contact(TIPS[0], "3d")]
    model, q, refs = urdf_case("humanoid", contacts, LANES + 1, 10)
    q[3, 9] = np.nan
    program = program_for(model, resolve_contacts(model, contacts))
    out, status = c_pv_osimr.run_lanes(program, q)
    assert status[3] >= 0 and run(program, q[3:4], parallel=False)[1][0] >= 0
    good = [b for b in range(len(q)) if b != 3]
    assert np.all(status[good] == -1)
    assert max(rel_err(out[b], refs[b]) for b in good) <= TOL


def test_without_the_c_library_the_per_state_kernel_answers(monkeypatch):
    """No C compiler, or the library still building: delassus answers with numba's kernel."""
    contacts = [Contact("l_sole"), Contact(TIPS[2], "3d")]
    model, q, refs = urdf_case("humanoid", contacts, LANES + 1, 11)
    monkeypatch.setattr(c_pv_osimr, "library", lambda block=True: None)
    D = delassus(model, q, contacts, backend="numba")
    assert max(rel_err(D[b], refs[b]) for b in range(len(q))) <= TOL
