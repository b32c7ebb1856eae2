"""Nori's Newton-Euler block system: assembly of D, b (eq. 3, 5, 9, 15), the worst-case pattern
(Sec. IV-D) and the structural permutations (eq. 11-12, Appendix B).

Oracles: the equations themselves evaluated with independently computed quantities (dense
transforms from kinematics.joint_transforms, RNEA's v, a, f), dense NumPy linear algebra."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse.linalg

from sparsedyn.kinematics import joint_transforms
from sparsedyn.models import humanoid, random_tree, serial_chain
from sparsedyn.model import ModelBuilder, PlanarJoint, PrismaticJoint, RevoluteJoint, SphericalJoint
from sparsedyn.model.model import WORLD
from sparsedyn.recursive.rnea import rnea_sweeps
from sparsedyn.system import NewtonEulerSystem, transform_structure

SPECIAL_ANGLES = (0.0, np.pi / 2, np.pi, -np.pi / 2)


def _planar_model():
    b = ModelBuilder("planar_and_friends")
    T = np.eye(4)
    T[:3, 3] = (0.1, -0.2, 0.3)
    b.add_body("base", WORLD, PlanarJoint("planar"), placement=T, mass=2.0, com=(0.1, 0, 0),
               inertia=np.diag([0.1, 0.2, 0.3]))
    b.add_body("arm", "base", RevoluteJoint("rz", [0, 0, 1]), placement=T, mass=1.0,
               com=(0.2, 0.0, 0.0), inertia=np.diag([0.01, 0.02, 0.02]))
    b.add_body("slider", "arm", PrismaticJoint("px", [1, 0, 0]), placement=T, mass=0.5,
               com=(0.0, 0.1, 0.0), inertia=np.diag([0.01, 0.01, 0.01]))
    b.add_body("ball", "slider", SphericalJoint("ball"), placement=T, mass=0.5,
               com=(0.0, 0.0, 0.1), inertia=np.diag([0.01, 0.02, 0.03]))
    return b.build()


MODELS = {
    "chain6": lambda: serial_chain(6),
    "random_spherical": lambda: random_tree(9, seed=3, joint_types=("revolute", "prismatic", "spherical")),
    "planar": _planar_model,
    "humanoid": humanoid,
}


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    return MODELS[request.param]()


def _id_system(model):
    N = model.nbodies
    return NewtonEulerSystem(model, [("qdd", i) for i in range(N)] + [("fx", i) for i in range(N)])


def _fd_system(model):
    N = model.nbodies
    return NewtonEulerSystem(model, [("tau", i) for i in range(N)] + [("fx", i) for i in range(N)])


def _rnea_variables(model, rng, B):
    """d built from RNEA's intermediate quantities (a includes -a_g, f the joint wrenches)."""
    q = model.random_configuration(rng, batch=B)
    qd, qdd = rng.normal(size=(2, B, model.nv))
    fx = rng.normal(size=(B, model.nbodies, 6))
    tau, v, a, f = rnea_sweeps(model, q, qd, qdd, fx)
    blocks = {}
    for i in range(model.nbodies):
        s = model.v_slice(i)
        blocks.update({("a", i): a[:, i], ("f", i): f[:, i], ("tau", i): tau[:, s],
                       ("qdd", i): qdd[:, s], ("fx", i): fx[:, i]})
    return q, qd, blocks


def test_rnea_quantities_satisfy_D_d_plus_b(model):
    """D d + b = 0 (eq. 6 with measurement rows, eq. 10 / 16) for ID and FD measurement sets."""
    rng = np.random.default_rng(0)
    B = 4
    q, qd, blocks = _rnea_variables(model, rng, B)
    for system in (_id_system(model), _fd_system(model)):
        d = system.pack(blocks, B)
        measured = {key: blocks[key] for key in system.measured}
        values, rhs = system.assemble(q, qd, measured)
        assert values.shape == (B, system.nnz) and rhs.shape == (B, system.shape[0])
        D = system.dense(values)
        residual = np.einsum("bij,bj->bi", D, d) - rhs           # D d + b with rhs = -b
        scale = max(1.0, np.abs(rhs).max(), np.abs(d).max())
        assert np.abs(residual).max() <= 1e-12 * scale
        # and D is invertible: the solution is the RNEA data (dense and sparse-direct oracles)
        x = np.linalg.solve(D, rhs[..., None])[..., 0]
        assert np.abs(x - d).max() <= 1e-9 * scale
        x0 = scipy.sparse.linalg.spsolve(system.pattern.__class__(
            (values[0], system.pattern.indices, system.pattern.indptr), shape=system.shape).tocsc(), rhs[0])
        assert np.abs(x0 - d[0]).max() <= 1e-9 * scale


def test_pattern_is_canonical_and_flags_consistent(model):
    s = _id_system(model)
    P = s.pattern
    assert P.shape[0] == P.shape[1] == s.rows.size == s.columns.size
    assert P.has_sorted_indices and np.all(P.data == 1.0)
    P2 = P.copy()
    P2.sum_duplicates()
    assert P2.nnz == P.nnz
    assert s.constant_values.shape == s.always_nonzero.shape == (P.nnz,)
    assert np.array_equal(s.always_nonzero, ~np.isnan(s.constant_values))
    assert np.all(s.constant_values[s.always_nonzero] != 0.0)
    # constant entries are the +-1 blocks, S, the inertias, and q-independent transform entries:
    # every assembled state reproduces them exactly
    rng = np.random.default_rng(1)
    q = model.random_configuration(rng, batch=3)
    values = s.values(joint_transforms(model, q))
    assert np.array_equal(values[:, s.always_nonzero],
                          np.broadcast_to(s.constant_values[s.always_nonzero], (3, s.always_nonzero.sum())))


def _special_configurations(model, rng, n_random=12):
    """Per joint: special values (0, +-pi/2, pi; axis-aligned quarter/half turns) and random
    ones; each body's transform depends on its own joint only, so joints vary independently."""
    quarter = [np.array([0, 0, 0, 1.0])]
    for axis in np.eye(3):
        for angle in SPECIAL_ANGLES[1:]:
            quarter.append(np.concatenate((np.sin(angle / 2) * axis, [np.cos(angle / 2)])))
    rows = []
    K = max(len(quarter), len(SPECIAL_ANGLES) * 3) + n_random
    for k in range(K):
        q = np.empty(model.nq)
        for i, j in enumerate(model.joints):
            s = model.q_slice(i)
            if j.kind in ("revolute", "prismatic"):
                specials = SPECIAL_ANGLES if j.kind == "revolute" else (0.0, 0.5, -0.5)
                q[s] = specials[k] if k < len(specials) else rng.uniform(-np.pi, np.pi)
            elif j.kind == "planar":
                xy = [(0, 0), (1, 0), (0, 1), (1, 1)][k % 4] if k < 12 else rng.normal(size=2)
                th = SPECIAL_ANGLES[(k // 4) % 4] if k < 12 else rng.uniform(-np.pi, np.pi)
                q[s] = (*xy, th)
            else:
                quat = quarter[k] if k < len(quarter) else rng.normal(size=4)
                quat = quat / np.linalg.norm(quat)
                if j.kind == "free":
                    pos = np.eye(3)[k % 3] * (k % 2) if k < len(quarter) else rng.normal(size=3)
                    q[s] = np.concatenate((pos, quat))
                else:
                    q[s] = quat
        rows.append(q)
    return np.array(rows)


@pytest.mark.parametrize("name", ["chain6", "random_spherical", "planar", "humanoid"])
def test_worst_case_pattern_covers_every_state_and_is_tight(name):
    """Sec. IV-D: no transform entry is ever nonzero outside the structural pattern (special
    angles included), and every pattern entry is nonzero for some sampled state (the structural
    argument says none is identically zero). Constant entries keep their value."""
    model = MODELS[name]()
    rng = np.random.default_rng(2)
    q = _special_configurations(model, rng)
    Xup = joint_transforms(model, q)
    never_nonzero = []
    for i, joint in enumerate(model.joints):
        if model.parents[i] == WORLD:
            continue
        X = Xup[i].matrix()                                        # dense 6x6, (K, 6, 6)
        nonzero, constant = transform_structure(joint, model.joint_placements[i])
        scale = max(1.0, np.abs(X).max())
        assert np.abs(X[:, ~nonzero]).max(initial=0.0) <= 1e-12 * scale, joint.name
        fixed = ~np.isnan(constant)
        assert np.abs(X[:, fixed] - constant[fixed]).max(initial=0.0) <= 1e-12 * scale, joint.name
        seen = np.any(np.abs(X) > 1e-12 * scale, axis=0)
        never_nonzero += [(joint.name, r, c) for r, c in zip(*np.nonzero(nonzero & ~seen))]
    assert never_nonzero == []


def test_revolute_structure_by_hand():
    """About z with an identity placement: E = Rz(q)^T has the cos/sin 2x2 block and a constant
    1 (Featherstone Table 4.1); r = 0 so the lower-left block is zero."""
    nonzero, constant = transform_structure(RevoluteJoint("j", [0, 0, 1]), np.eye(4))
    E = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=bool)
    assert np.array_equal(nonzero[:3, :3], E) and np.array_equal(nonzero[3:, 3:], E)
    assert not nonzero[3:, :3].any() and not nonzero[:3, 3:].any()
    assert constant[2, 2] == 1.0 and constant[5, 5] == 1.0 and np.isnan(constant[0, 0])
    # with an offset along x, -E rx fills rows 3..5 of the rotational columns
    T = np.eye(4)
    T[0, 3] = 0.3
    nonzero, constant = transform_structure(RevoluteJoint("j", [0, 0, 1]), T)
    # -Rz^T [x]x: column x of rx is zero; the z row couples to y only through constants
    expected = np.array([[0, 0, 1], [0, 0, 1], [0, 1, 0]], dtype=bool)
    assert np.array_equal(nonzero[3:, :3], expected)
    assert constant[5, 1] == pytest.approx(-0.3)


def test_prismatic_rotation_block_is_constant():
    T = np.eye(4)
    T[:3, :3] = scipy.linalg.expm(np.array([[0, -0.3, 0.2], [0.3, 0, -0.1], [-0.2, 0.1, 0]]))
    nonzero, constant = transform_structure(PrismaticJoint("p", [0, 1, 0]), T)
    assert not np.isnan(constant[:3, :3]).any() and np.allclose(constant[:3, :3], T[:3, :3].T)
    assert np.isnan(constant[3:, :3][nonzero[3:, :3]]).all()


def test_rnea_order_is_lower_triangular_with_unit_diagonal(model):
    """Property 1: D_{p_id, q} of eq. (11)-(12) is lower triangular; its diagonal is the
    constant +-1 blocks, so forward substitution needs no division."""
    s = _id_system(model)
    assert set(s.structural_orders) == {"rnea"}
    rp, cp = s.structural_orders["rnea"]
    assert np.array_equal(np.sort(rp), np.arange(s.shape[0]))
    assert np.array_equal(np.sort(cp), np.arange(s.shape[1]))
    values = s.constant_values.copy()
    values[np.isnan(values)] = 7.0                                  # any state-dependent value
    P = s.pattern.copy()
    P.data = values
    Dp = P.toarray()[rp][:, cp]
    assert not np.triu(Dp, 1).any()
    assert np.all(np.abs(np.diag(Dp)) == 1.0)


def test_aba_order_is_a_valid_pivot_sequence(model):
    """Appendix B as an elimination order: LU without pivoting of D permuted by it succeeds for
    a random state (pivots -1, -1 and S^T I^A S) and solves the system (dense oracle)."""
    s = _fd_system(model)
    assert set(s.structural_orders) == {"aba"}
    rp, cp, trust = s.structural_orders["aba"]
    assert trust == "trusted"                   # its pivots S^T I^A S are fill, not entries of D
    rng = np.random.default_rng(3)
    q, qd, blocks = _rnea_variables(model, rng, 1)
    values, rhs = s.assemble(q, qd, {key: blocks[key] for key in s.measured})
    A = s.dense(values)[0][rp][:, cp]
    n = len(A)
    LU = A.copy()
    for k in range(n):                                              # Doolittle, no pivoting
        assert abs(LU[k, k]) > 1e-12, f"zero pivot at {k}"
        LU[k + 1:, k] /= LU[k, k]
        LU[k + 1:, k + 1:] -= np.outer(LU[k + 1:, k], LU[k, k + 1:])
    y = scipy.linalg.solve_triangular(LU, rhs[0][rp], lower=True, unit_diagonal=True)
    x = np.empty(n)
    x[cp] = scipy.linalg.solve_triangular(LU, y)
    d = s.pack(blocks, 1)[0]
    assert np.abs(x - d).max() <= 1e-8 * max(1.0, np.abs(d).max())


def test_measured_blocks_must_exist():
    model = serial_chain(3)
    with pytest.raises(ValueError, match="fx"):
        NewtonEulerSystem(model, [("fx", 1)], fx_bodies=[0])
    with pytest.raises(ValueError, match="fx_bodies"):
        NewtonEulerSystem(model, [], fx_bodies=[7])
    s = NewtonEulerSystem(model, [("qdd", i) for i in range(3)], fx_bodies=[])
    with pytest.raises(ValueError, match="link2"):
        s.rhs(joint_transforms(model, np.zeros((1, 3))), np.zeros((1, 3, 6)), np.zeros((1, 3)),
              {("qdd", 0): np.zeros((1, 1))})


def test_selector_measurements_eq17():
    """Eq. (17): a sensor that sees part of a block (here 5 of the 6 components of the tip's
    external wrench, the slippery-floor load cells of Sec. VI) plus one joint torque instead of
    the tip's acceleration: D stays square, D d + b = 0 holds for the RNEA data, and the dense
    solve recovers the unmeasured moment and every torque."""
    model = serial_chain(5)
    N = model.nbodies
    rng = np.random.default_rng(4)
    q, qd, blocks = _rnea_variables(model, rng, 2)
    Y = np.eye(6)[[0, 1, 3, 4, 5]]      # internal [n; f]: every component but n_z (about the normal)
    measured = ([("qdd", i) for i in range(N)] + [("fx", i) for i in range(N - 1)]
                + [("fx", N - 1, Y), ("tau", 0)])
    s = NewtonEulerSystem(model, measured)
    assert s.shape[0] == s.shape[1] and s.structural_orders == {}
    assert s.rows[("y_fx", N - 1)].size == 5
    values = {key: blocks[key] for key in s.measured}
    values[("fx", N - 1)] = blocks[("fx", N - 1)] @ Y.T
    vals, rhs = s.assemble(q, qd, values)
    D = s.dense(vals)
    d = s.pack(blocks, 2)
    assert np.abs(np.einsum("bij,bj->bi", D, d) - rhs).max() <= 1e-12 * max(1.0, np.abs(d).max())
    x = np.linalg.solve(D, rhs[..., None])[..., 0]
    assert np.abs(x - d).max() <= 1e-8 * max(1.0, np.abs(d).max())
    with pytest.raises(ValueError, match="selector"):
        NewtonEulerSystem(model, [("fx", 0, np.eye(5))])
