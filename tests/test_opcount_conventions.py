"""The operation counter's two conventions (sparsedyn/opcount.py): "paper" counts the recursive
baselines with the structure Featherstone's and the seeds' closed forms exploit, "as_written" the
straightforward dense forms. Oracles: Featherstone's closed forms (as cited by Nori, experiments/
README.md), seed 002's appendix table, and compact formulas counted by hand here."""
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.models import serial_chain
from sparsedyn.opcount import count_operations
from sparsedyn.spatial import Transform
from sparsedyn.spatial_costs import ldlt_invert_cost, zero_axes_after_projection
from sparsedyn.transform_costs import Factor, TransformStructure


def _counted(fn, model, convention):
    # the chain and state of experiments/fig1_fd_chain_flops.py
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    v, x = rng.normal(size=(2, model.nv))
    with count_operations(convention) as ops:
        out = fn(model, q, v, x)
    return ops, out


@pytest.mark.parametrize("n", [10, 50, 100])
def test_rnea_aba_within_ten_percent_of_featherstone_closed_forms(n):
    model = serial_chain(n)
    rnea, tau = _counted(sd.rnea, model, "paper")
    aba, qdd = _counted(sd.aba, model, "paper")
    assert abs(rnea.flops / (174 * n - 208) - 1) < 0.10          # (93N-108) m + (81N-100) a
    assert abs(aba.flops / (429 * n - 507) - 1) < 0.10           # (224N-259) m + (205N-248) a
    # the straightforward forms stay available and cost more
    rnea_w, tau_w = _counted(sd.rnea, model, "as_written")
    aba_w, qdd_w = _counted(sd.aba, model, "as_written")
    assert rnea_w.flops > 1.5 * rnea.flops and aba_w.flops > 1.5 * aba.flops
    np.testing.assert_array_equal(tau, tau_w)                    # counting never changes numerics
    np.testing.assert_array_equal(qdd, qdd_w)


def test_unknown_convention_is_refused():
    with pytest.raises(ValueError, match="convention"):
        with count_operations("dense"):
            pass


def test_unit_axis_subspace_is_a_selection():
    model = serial_chain(3)
    S = model.joints[0].S
    from sparsedyn.recursive._common import S_times, S_transpose_times
    with count_operations() as ops, count_operations("as_written") as ref:
        S_times(S, np.ones((1, 1)))
        S_transpose_times(S, np.ones((1, 6)))
    assert ops.flops == 0
    assert (ref.mul, ref.add) == (12, 5)                         # 6 products each, 5 sums


def _rotation_about_z():
    E = np.zeros((3, 3), bool)
    E[:2, :2] = True
    E[2, 2] = True
    U = np.zeros((3, 3), bool)
    U[2, 2] = True
    return Factor(E, U, np.zeros(3, bool))


def test_privileged_child_rotation_costs_of_seed_002():
    """Seed 002, appendix: X Lambda_p(i)k (6 columns) 48m + 24a; I^A_p + (...) 15a."""
    st = TransformStructure((_rotation_about_z(),))
    mul, add, _ = st.apply_cost("X m")
    # by hand: [c s 0; -s c 0; 0 0 1] v costs 4 mul + 2 add, twice per spatial vector
    assert (6 * mul, 6 * add) == (48, 24)
    S = np.zeros((6, 1))
    S[2, 0] = 1.0
    P = zero_axes_after_projection(np.ones((6, 6), bool), S)
    assert int(np.triu(P).sum()) == 15                           # 5x5 symmetric: 15 additions


def test_floating_base_pivot_costs_231_flops():
    """Seed 002, appendix: K_1 = (I^A_1)^-1 by an LDL^T factor and invert, 231 flops."""
    assert sum(ldlt_invert_cost(6)) == 231
    assert ldlt_invert_cost(1) == (0, 0, 1)


def test_general_transform_keeps_featherstone_compact_cost():
    """A transform without structure costs the compact form (E, r): 24m + 18a (Appendix A)."""
    rng = np.random.default_rng(1)
    E = np.linalg.qr(rng.normal(size=(3, 3)))[0][None]
    X = Transform(E, rng.normal(size=(1, 3)))
    with count_operations() as ops:
        X.apply_motion(rng.normal(size=(1, 6)))
    assert (ops.mul, ops.add) == (24, 18)


def test_floating_base_pivots_in_efpa_charge_231_flops_and_one_division_per_revolute():
    """EFPA on the floating humanoid: the 6-DoF pivot by LDL^T factor and invert (231 flops, seed
    002's appendix), every 1-DoF pivot by one division."""
    import sparsedyn.models as sm
    from sparsedyn.contacts import Contact
    from sparsedyn.delassus import delassus
    hum = sm.humanoid()
    q = hum.random_configuration(np.random.default_rng(0))
    feet = [f for f in hum.frames if f.endswith("foot")][:2]
    with count_operations() as ops:
        delassus(hum, q, [Contact(f) for f in feet], method="efpa")
    ones = sum(j.nv == 1 for j in hum.joints)
    assert sum(j.nv == 6 for j in hum.joints) == 1 and ones == hum.nbodies - 1
    assert ops.by_kind["D^-1"] == 231 + ones


def test_privileged_child_is_counted_as_a_pure_rotation():
    """Seed 002, appendix: the floating base's frame placed at its first child's joint makes that
    child's transform a rotation about its (coordinate) axis: X m = 2 x (4m + 2a), X^T f the same."""
    import sparsedyn.models as sm
    from sparsedyn.transform_costs import model_structures, privileged_children
    hum = sm.humanoid()
    (child, base), = privileged_children(hum).items()
    assert base == 0 and hum.parents[child] == 0
    st = model_structures(hum)[child]
    assert st.apply_cost("X m")[:2] == (8, 4) and st.apply_cost("X^T f")[:2] == (8, 4)
    other = next(i for i in range(hum.nbodies) if hum.parents[i] == 0 and i != child)
    assert sum(model_structures(hum)[other].apply_cost("X m")[:2]) > 12     # a translation too


def test_chain_transform_costs_by_hand():
    """serial_chain: link i's tree transform is a translation along x (r = (l, 0, 0)), its joint a
    rotation about z, y or x. By hand, X m = rot (v - r x w): r x w = (0, -l w_z, l w_y) is 2 mul,
    its subtraction 2 add, the rotation 2 x (4m + 2a): 10m + 6a."""
    from sparsedyn.transform_costs import model_structures
    model = serial_chain(4)
    for i in range(1, 4):
        assert model_structures(model)[i].apply_cost("X m")[:2] == (10, 6)


def test_every_pivot_is_inverted_once_under_the_paper_convention():
    """Where a solve with a pivot is counted as a product with its inverse, the inverse itself is
    charged once per pivot (LDL^T factor and invert: 1 division for 1 DoF, 231 flops for 6): on a
    tree without loops C-ABA's clusters are single bodies, so its pivot inversions equal ABA's."""
    from sparsedyn.loops import ClusterModel
    from sparsedyn.models import random_tree
    from sparsedyn.recursive.cluster import c_aba
    model = random_tree(7, seed=3, joint_types=("revolute", "prismatic", "spherical"))
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    v, tau = rng.normal(size=(2, model.nv))
    expected = sum(sum(ldlt_invert_cost(j.nv)) for j in model.joints)
    for fn, args in ((sd.aba, (model, q, v, tau)), (c_aba, (ClusterModel(model), q, v, tau))):
        with count_operations() as ops:
            fn(*args)
        assert ops.by_kind["D^-1"] == expected, fn.__name__


def _axis_structure(k, r_nz=(False, False, False)):
    """A revolute joint about the coordinate axis k behind a translation of pattern r_nz (the
    privileged child when r_nz is zero)."""
    i, j = (k + 1) % 3, (k + 2) % 3
    E = np.zeros((3, 3), bool)
    E[np.ix_((i, j), (i, j))] = True
    E[k, k] = True
    U = np.zeros((3, 3), bool)
    U[k, k] = True
    tree = Factor(np.eye(3, dtype=bool), np.eye(3, dtype=bool), np.array(r_nz))
    return TransformStructure((tree, Factor(E, U, np.zeros(3, bool))), k)


def _axis_transform(k, sign, r, rng, structure):
    from sparsedyn.spatial import rotation_about_axis
    axis = np.zeros(3)
    axis[k] = sign
    E = np.swapaxes(rotation_about_axis(axis, rng.uniform(-3, 3, size=len(r))), -1, -2)
    return Transform(E, r, structure)


@pytest.mark.parametrize("k", [0, 1, 2])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_double_angle_congruences_match_dense_products(k, sign):
    """The double-angle forms (axis_rotation.py) against dense NumPy: E^T M E of symmetric and
    general 3x3 blocks, X^T I X of a general symmetric 6x6 and of rigid-body inertias (Table 2.5
    form), X M X^T; for rotations about +-e_k, behind a translation and without one."""
    from sparsedyn.axis_rotation import rotate_blocks
    from sparsedyn.rigid_congruence import rigid_inertia_to_parent
    from sparsedyn.spatial import inertia_to_parent, motion_congruence, spatial_inertia
    rng = np.random.default_rng(k)
    B = 5
    M = rng.normal(size=(B, 6, 6))
    M = M + M.swapaxes(1, 2)
    I = np.stack([spatial_inertia(rng.uniform(1, 3), rng.normal(size=3), np.diag(rng.uniform(1, 2, 3)))
                  for _ in range(B)])
    for r in (np.zeros((B, 3)), rng.normal(size=(B, 3))):
        X = _axis_transform(k, sign, r, rng, _axis_structure(k, r[0] != 0))
        G = rng.normal(size=(B, 3, 3))
        S3, = rotate_blocks(X.E, [(G + G.swapaxes(1, 2), True)], k)
        Et = X.E.swapaxes(1, 2)
        np.testing.assert_allclose(S3, Et @ (G + G.swapaxes(1, 2)) @ X.E, atol=1e-12)
        np.testing.assert_allclose(rotate_blocks(X.E, [(G, False)], k)[0], Et @ G @ X.E, atol=1e-12)
        Xm = X.matrix()
        np.testing.assert_allclose(inertia_to_parent(X, M, by_axis=True), Xm.swapaxes(1, 2) @ M @ Xm, atol=1e-12)
        np.testing.assert_allclose(rigid_inertia_to_parent(X, I), Xm.swapaxes(1, 2) @ I @ Xm, atol=1e-12)
        np.testing.assert_allclose(motion_congruence(X, M), Xm @ M @ Xm.swapaxes(1, 2), atol=1e-12)
    Xg = Transform(np.linalg.qr(rng.normal(size=(3, 3)))[0][None], rng.normal(size=(1, 3)))
    Xm = Xg.matrix()
    np.testing.assert_allclose(rigid_inertia_to_parent(Xg, I), Xm.swapaxes(1, 2) @ I @ Xm, atol=1e-12)
    np.testing.assert_allclose(motion_congruence(Xg, M), Xm @ M @ Xm.swapaxes(1, 2), atol=1e-12)


def test_privileged_child_congruences_cost_what_seed_002_charges():
    """Seed 002, appendix, privileged child (a pure rotation about z): X^T I^a L X = 22m + 25a on
    I^a's 15 entries (I^a S = 0 zeroes row and column 2). By hand, double angles (axis_rotation.py):
    A's 2x2 block 4m + 5a; B (row 2 zero): its column 2 rotated 4m + 2a, its 2x2 block 4m + 8a; C
    whole: 4m + 2a + 4m + 5a; constants s^2, c s, 2 c s, 1 - 2 s^2: 2m + 3a. X Lambda X^T on a dense
    symmetric 6x6: A and C 8m + 7a each, B 12m + 12a (its row 2 too), constants 2m + 3a:
    30m + 29a, within the seed's 63m + 54a. The plain two-product forms stay the reference."""
    st = _axis_structure(2)
    S = np.zeros((6, 1))
    S[2, 0] = 1.0
    Ia = zero_axes_after_projection(np.ones((6, 6), bool), S)
    assert st.congruence_cost(Ia, by_axis=True)[:2] == (22, 25)
    assert st.congruence_cost(Ia)[:2] == (68, 34)                      # G = I F, then F^T G
    full = np.ones((6, 6), bool)
    assert st.motion_congruence_cost(full)[:2] == (30, 29)
    assert st.congruence_cost(full)[:2] == (80, 40)


def test_rigid_body_congruence_costs_by_hand():
    """CRBA's composite inertia (m, h, Ibar) across a revolute about z behind a translation
    r = (l, 0, 0) (the ASIMO-like model's transforms), Table 2.5 form: Ibar by double angles
    8m + 7a, y = E^T h 4m + 2a, constants 2m + 3a; h' = y + m r 1m + 1a; the upper triangles of
    rx yx (entries (1,1), (2,2): 2m) and h'x rx ((0,1), (0,2), (1,1), (2,2): 4m) and their
    subtraction from Ibar (6a): 21m + 19a. The general symmetric 6x6 form costs 162 (120 the
    rotation, 42 the translation)."""
    from sparsedyn.rigid_congruence import rigid_congruence_cost
    st = _axis_structure(2, (True, False, False))
    assert rigid_congruence_cost(st) == (21, 19)
    assert sum(st.congruence_cost(np.ones((6, 6), bool))[:2]) == 162
