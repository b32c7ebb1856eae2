"""The Delassus recursions' propagators (sparsedyn/recursive/_osim_common.py) counted with the
structure seed 000 describes: eq. (8)'s P removes "the force component that causes the i-th
joint's motion" (S^T P = 0), so rows carried across a unit-axis joint vanish on its axis (seed
002's appendix: kX_1^T "has a zero row"), and a branching link's propagator starts from identity
rows. Oracles: the straightforward dense products in NumPy (1e-12), Pinocchio's Delassus matrix
(tests/test_delassus.py), and costs counted by hand here."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn.models as sm
from oracles import pin_model, rel_err, to_pin_q
from sparsedyn import load_urdf
from sparsedyn.contacts import Contact, contact_jacobian
from sparsedyn.delassus import delassus
from sparsedyn.kinematics import joint_transforms
from sparsedyn.opcount import count_operations
from sparsedyn.recursive._osim_common import Pivot, full_rows
from test_delassus import pin_dense


def _pivot(model, i, rng, B=3):
    """A pivot of joint i on random symmetric positive definite articulated inertias."""
    A = rng.normal(size=(B, 6, 6))
    IA = A @ A.swapaxes(1, 2) + 6 * np.eye(6)
    return Pivot(model, IA, i), IA


def _dense(X, R, piv, IA):
    """(R - R S D^-1 U^T) X with every product dense (the reference)."""
    S = piv.S
    U = IA @ S
    D = S.T @ U
    M = R - R @ S @ np.linalg.inv(D) @ U.swapaxes(1, 2)
    return M, M @ X.matrix()


@pytest.mark.parametrize("i", range(4))
def test_propagated_rows_vanish_on_the_joint_axis_and_equal_the_dense_product(i):
    model = sm.serial_chain(4)                       # revolute joints about coordinate axes
    rng = np.random.default_rng(i)
    q = model.random_configuration(rng, batch=3)
    X = joint_transforms(model, q)[i]
    piv, IA = _pivot(model, i, rng)
    R = rng.normal(size=(3, 5, 6))
    with count_operations() as ops:
        RS, RS_Dinv = piv.project_rows(R)
        out, (nz, _) = piv.propagate_rows(X, R, RS_Dinv)
    M, ref = _dense(X, R, piv, IA)
    k = int(np.flatnonzero(piv.S[:, 0])[0])
    assert np.abs(M[..., k]).max() <= 1e-12 * np.abs(M).max()   # S^T P = 0: column k vanishes
    assert rel_err(out, ref) <= 1e-12
    assert not np.any(out[:, ~nz])                                # the pattern covers the result
    # by hand: 5 rows x 5 kept columns, one product and one subtraction each (as written 6 + 6)
    assert ops.by_kind["R - RS D^-1 U^T"] == 5 * 5 * 2
    keep = np.ones(6, bool)
    keep[k] = False
    per_row = X.structure_cost("X^T f", keep)
    assert ops.by_kind["R X"] == 5 * (per_row[0] + per_row[1])
    with count_operations("as_written") as w:
        piv.propagate_rows(X, R, RS_Dinv)
    assert w.by_kind["R - RS D^-1 U^T"] == 5 * 12 and w.by_kind["R X"] == 5 * 42


def test_branch_propagator_equals_the_dense_product():
    model = sm.serial_chain(3)
    rng = np.random.default_rng(5)
    X = joint_transforms(model, model.random_configuration(rng, batch=3))[1]
    piv, IA = _pivot(model, 1, rng)
    S = np.broadcast_to(piv.S, (3,) + piv.S.shape)
    S_Dinv = piv.times_Dinv(S)
    with count_operations() as ops:
        out, (nz, _) = piv.branch_propagator(X, S_Dinv, piv.S != 0)
    _, ref = _dense(X, np.broadcast_to(np.eye(6), (3, 6, 6)), piv, IA)
    assert rel_err(out, ref) <= 1e-12 and not np.any(out[:, ~nz])
    # the rows e_j^T (j != k) are X's rows: no products for the angular ones
    k = int(np.flatnonzero(piv.S[:, 0])[0])
    ang = [j for j in range(3) if j != k]
    assert not np.any(nz[ang, 3:])
    assert ops.by_kind["1 - S D^-1 U^T"] == 5                    # 5 kept columns, no subtraction


@pytest.mark.parametrize("method", ["pv-osimr", "pv-osim", "efpa"])
def test_structured_counts_leave_the_delassus_matrix_unchanged(method):
    """Counting (either convention) does not change what is computed, and the structured
    computation is Pinocchio's J M^-1 J^T; the paper count is below the dense one."""
    model, pmodel = load_urdf(sm.HUMANOID_URDF, floating_base=True), pin_model(sm.HUMANOID_URDF, True)
    contacts = [Contact(f"{s}_foot_corner_{c}", "3d") for s in ("l", "r") for c in ("fl", "rr")]
    contacts += [Contact("r_hand"), Contact("l_index_tip", "3d")]
    q = model.random_configuration(np.random.default_rng(3))
    D0 = delassus(model, q, contacts, method=method)
    with count_operations() as ops:
        D = delassus(model, q, contacts, method=method)
    with count_operations("as_written") as w:
        D_w = delassus(model, q, contacts, method=method)
    assert np.array_equal(D, D_w) and np.array_equal(D, D0)
    assert ops.flops < w.flops
    D_dense = delassus(model, q, contacts, method="dense")
    assert rel_err(D, D_dense) <= 1e-12
    _, D_ref = pin_dense(pmodel, to_pin_q(model, pmodel, q), contacts)
    assert rel_err(D, D_ref) <= 1e-10


def test_rank_update_counts_only_nonzero_rows():
    """Om + R S D^-1 S^T R^T on rows of which only two reach the joint axis: 3 products (the
    upper triangle of a 2 x 2 block) and 3 additions into a full Om."""
    model = sm.serial_chain(2)
    rng = np.random.default_rng(2)
    piv, _ = _pivot(model, 0, rng)
    k = int(np.flatnonzero(piv.S[:, 0])[0])
    nz, unit = full_rows(4)
    nz[2:, k] = False
    R = rng.normal(size=(3, 4, 6)) * nz
    Om = rng.normal(size=(3, 4, 4))
    with count_operations() as ops:
        RS, RS_Dinv = piv.project_rows(R, (nz, unit))
        out, _ = piv.rank_update(Om, RS, RS_Dinv, piv.RS_pattern((nz, unit)), np.ones((4, 4), bool))
    ref = Om + (R @ piv.S) @ (R @ piv.S).swapaxes(1, 2) / (piv.S.T @ piv.U)
    assert rel_err(out, ref) <= 1e-12
    assert ops.by_kind["Om + RS D^-1 SR^T"] == 3 + 3
    assert ops.by_kind["A D^-1"] == 2


def test_contact_jacobian_rows_keep_their_structure():
    """J's rows K_k bX_j (LTL-OSIM's and the dense method's J): on a chain of coordinate-axis
    revolutes about z with zero-length links (X = a rotation about z), the 6D contact's rows start
    as units e_j and the angular ones keep a zero linear block. By hand: the first transform maps
    each unit row to a row of E, products with the entries c, s only (2 + 2 + 0 for the three
    angular rows, the same for the linear ones: 8); every later one rotates rows of pattern
    (x, y, 0) by 4m + 2a and leaves the z rows: 4 x 6 = 24 per joint; as written 42 per row."""
    model = sm.serial_chain(4, length=0.0, axes="z")
    q = model.random_configuration(np.random.default_rng(0))
    J0 = contact_jacobian(model, q, [Contact("link4")])
    with count_operations() as ops:
        J = contact_jacobian(model, q, [Contact("link4")])
    with count_operations("as_written") as w:
        J_w = contact_jacobian(model, q, [Contact("link4")])
    assert np.array_equal(J, J0) and np.array_equal(J, J_w)
    assert ops.by_kind["R X"] == 8 + 24 * 2 and w.by_kind["R X"] == 6 * 42 * 3
