"""Delassus matrix through Nori's block system (method "sparse", problems/delassus_sparse.py)
against Pinocchio's computeDelassusMatrix and Pinocchio's J M^-1 J^T (getFrameJacobian, crba):
humanoid feet (6D) + fingertips (3D), talos / solo12 with a free-flyer, mixed contacts at random
placements, several on one link and on the floating base, rank-deficient J; batched and single,
both backends; operation counts; singular mass matrices."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

from oracles import pin, rel_err, to_pin_q
from sparsedyn import SingularModelError
from sparsedyn.contacts import Contact
from sparsedyn.delassus import delassus
from sparsedyn.opcount import count_operations
from sparsedyn.problems.delassus_sparse import compile_delassus
from test_compiled import rod_on_axis
from test_delassus import build, pin_contact_models, pin_dense, random_contacts, random_placement

TOL = 1e-10
TIPS = ["l_thumb_tip", "l_index_tip", "l_middle_tip", "r_thumb_tip", "r_index_tip", "r_middle_tip"]


def pinocchio_references(model, pmodel, q, contacts):
    """Per state: Pinocchio's computeDelassusMatrix, checked against J M^-1 J^T."""
    pdata = pmodel.createData()
    refs = []
    for qb in q:
        pq = to_pin_q(model, pmodel, qb)
        cms, cds = pin_contact_models(pmodel, contacts)
        D_pin = pin.computeDelassusMatrix(pmodel, pdata, pq, cms, cds, 0.0)
        _, D_ref = pin_dense(pmodel, pq, contacts)
        assert rel_err(D_pin, D_ref) <= TOL                     # the two oracles agree
        refs.append(D_pin)
    return np.stack(refs)


def check(model, pmodel, contacts, q):
    ref = pinocchio_references(model, pmodel, q, contacts)
    for backend in ("numba", "numpy"):
        D = delassus(model, q, contacts, method="sparse", backend=backend)
        assert D.shape == ref.shape
        assert rel_err(D, ref) <= TOL, backend
        single = delassus(model, q[-1], contacts, method="sparse", backend=backend)
        assert single.shape == ref.shape[1:] and rel_err(single, ref[-1]) <= TOL
    return ref


def test_humanoid_feet_and_fingertips():
    model, pmodel = build("humanoid", True)
    contacts = [Contact("l_sole"), Contact("r_sole")] + [Contact(t, "3d") for t in TIPS]
    q = model.random_configuration(np.random.default_rng(40), batch=4)
    check(model, pmodel, contacts, q)
    plan = compile_delassus(model, contacts)
    assert plan is compile_delassus(model, contacts)             # planned once
    assert rel_err(plan(q), delassus(model, q, contacts, method="pv-osimr")) <= TOL


@pytest.mark.parametrize("name", ["talos", "solo12"])
def test_free_flyer_robots_mixed_contacts_at_random_placements(name):
    model, pmodel = build(name, True)
    rng = np.random.default_rng(41)
    contacts = random_contacts(model, rng, 5)
    contacts.append(Contact(contacts[0].link, "3d", random_placement(rng)))   # several on one link
    contacts.append(Contact(contacts[0].link, "6d", random_placement(rng)))
    base = model.link_names[0]
    contacts += [Contact(base, "6d", random_placement(rng)), Contact(base, "3d")]  # floating base
    check(model, pmodel, contacts, model.random_configuration(rng, batch=3))


def test_rank_deficient_jacobian_and_world_welded_contacts():
    """Identical contacts and more rows than DoFs (m = 27 > nv = 9): singular PSD Lambda^-1,
    still equal to Pinocchio's J M^-1 J^T; a contact on the fixed base has zero rows."""
    model, pmodel = build("panda", False)
    rng = np.random.default_rng(42)
    T = random_placement(rng)
    contacts = [Contact("panda_link7", "6d", T), Contact("panda_link7", "6d", T),
                Contact("panda_link5", "6d"), Contact("panda_leftfinger", "3d")]
    q = model.random_configuration(rng, batch=2)
    D = check(model, pmodel, contacts, q)
    J, _ = pin_dense(pmodel, to_pin_q(model, pmodel, q[0]), contacts)
    ev = np.linalg.eigvalsh(0.5 * (D[0] + D[0].T))
    assert np.sum(ev > 1e-9 * ev.max()) == np.linalg.matrix_rank(J) < D.shape[1]
    welded = [Contact("panda_link0", "6d")] + contacts[2:]
    Dw = delassus(model, q, welded, method="sparse")
    _, ref = pin_dense(pmodel, to_pin_q(model, pmodel, q[1]), welded)
    assert np.all(Dw[:, :6] == 0) and np.all(Dw[:, :, :6] == 0) and rel_err(Dw[1], ref) <= TOL


def test_operation_count_is_one_factorization_and_m_substitutions():
    model, _ = build("humanoid", True)
    contacts = [Contact("l_sole"), Contact("r_sole")] + [Contact(t, "3d") for t in TIPS]
    q = model.random_configuration(np.random.default_rng(43), batch=3)
    plan = compile_delassus(model, contacts)
    s = plan.stats
    m = s["m"]
    assert m == 30 and 0 < s["solve_flops"] < s["flops"]
    for backend in ("numba", "numpy"):
        with count_operations() as ops:
            delassus(model, q, contacts, method="sparse", backend=backend)
        assert ops.flops == s["total_flops"]                    # per state, whatever the batch
        assert ops.by_kind["sparse LU"] == s["flops"] + (m - 1) * s["solve_flops"]


def test_orderings_agree():
    model, pmodel = build("solo12", True)
    contacts = [Contact(f"{leg}_FOOT", "3d") for leg in ("FL", "FR", "HL", "HR")]
    q = model.random_configuration(np.random.default_rng(44), batch=2)
    ref = pinocchio_references(model, pmodel, q, contacts)
    safe = [r["name"] for r in compile_delassus(model, contacts).plan.table if r["pivot_safe"]]
    assert len(safe) >= 3
    for ordering in safe:
        plan = compile_delassus(model, contacts, ordering=ordering)
        assert plan.stats["ordering"] == ordering
        assert rel_err(plan(q, backend="numpy"), ref) <= TOL


def test_singular_mass_matrix_raises():
    """A rod spinning about its own axis: M singular through cancellation in every state."""
    model = rod_on_axis()
    q = model.random_configuration(np.random.default_rng(45), batch=3)
    for backend in ("numba", "numpy"):
        with pytest.raises(SingularModelError, match=r"mass matrix is singular.*\[0, 1, 2\]"):
            delassus(model, q, [Contact("rod", "3d")], method="sparse", backend=backend)


def test_bad_input():
    model, _ = build("solo12", True)
    plan = compile_delassus(model, [Contact("FL_FOOT", "3d")])
    with pytest.raises(ValueError, match="backend"):
        plan(model.neutral_configuration(), backend="cuda")
    with pytest.raises(ValueError, match="q"):
        plan(np.zeros(model.nq + 1))
    with pytest.raises(ValueError, match="ordering"):
        compile_delassus(model, [Contact("FL_FOOT", "3d")], ordering="umfpack")
    with pytest.raises(KeyError, match="nope"):
        compile_delassus(model, [Contact("nope")])
