"""Featherstone's L^T L / L^T D L against Pinocchio's mass matrix and numpy Cholesky identities."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest
from scipy.linalg import solve_triangular

import sparsedyn.models as sm
from oracles import pin, pin_model, rel_err, robot_urdf, to_pin_q
from sparsedyn import SingularModelError, load_urdf
from sparsedyn.model import ModelBuilder, RevoluteJoint
from sparsedyn.opcount import count_operations
from sparsedyn.recursive.ltl import ltdl, ltl, solve_lower, solve_lower_transpose

TOL = 1e-10


def cases():
    out = []
    for name, fb in (("talos", True), ("anymal", True), ("panda", False)):
        path = robot_urdf(name)
        out.append((name, load_urdf(path, floating_base=fb), pin_model(path, fb)))
    for name, path, fb in (("humanoid", sm.HUMANOID_URDF, True), ("hand", sm.HAND_URDF, False)):
        out.append((name, load_urdf(path, floating_base=fb), pin_model(path, fb)))
    return out


@pytest.fixture(scope="module", params=range(5), ids=["talos", "anymal", "panda", "humanoid", "hand"])
def robot(request):
    if not hasattr(robot, "cache"):
        robot.cache = cases()
    return robot.cache[request.param]


def pin_mass_matrices(model, pmodel, q):
    pdata = pmodel.createData()
    Ms = []
    for qb in q:
        M = pin.crba(pmodel, pdata, to_pin_q(model, pmodel, qb))
        Ms.append(np.triu(M) + np.triu(M, 1).T)
    return np.array(Ms)


def pin_expanded_pattern(pmodel):
    """{(k, i): i ancestor-or-self of DoF k} from Pinocchio's joint tree (Featherstone Sec. 6.5)."""
    lam = np.full(pmodel.nv, -1)
    for j in range(1, pmodel.njoints):
        first, nv, p = pmodel.idx_vs[j], pmodel.nvs[j], pmodel.parents[j]
        lam[first] = -1 if p == 0 else pmodel.idx_vs[p] + pmodel.nvs[p] - 1
        for c in range(1, nv):
            lam[first + c] = first + c - 1
    allowed = np.eye(pmodel.nv, dtype=bool)
    for k in range(pmodel.nv):
        j = lam[k]
        while j >= 0:
            allowed[k, j] = True
            j = lam[j]
    return allowed


def reverse_cholesky(M):
    """The unique lower-triangular L with positive diagonal and L^T L = M, from numpy's Cholesky
    of the reversed matrix: P M P = C C^T  =>  L = P C^T P."""
    P = np.eye(len(M))[::-1]
    C = np.linalg.cholesky(P @ M @ P)
    return P @ C.T @ P


def test_ltl_and_ltdl_against_numpy(robot):
    name, model, pmodel = robot
    rng = np.random.default_rng(4)
    q = model.random_configuration(rng, batch=3)
    M = pin_mass_matrices(model, pmodel, q)
    L = ltl(model, M)
    Lu, d = ltdl(model, M)
    allowed = pin_expanded_pattern(pmodel)
    assert L.shape == M.shape and Lu.shape == M.shape and d.shape == (3, model.nv)
    for b in range(3):
        assert rel_err(L[b].T @ L[b], M[b]) <= TOL
        assert rel_err(L[b], reverse_cholesky(M[b])) <= TOL
        assert np.all(np.triu(L[b], 1) == 0) and np.all(np.diag(L[b]) > 0)
        assert np.all(L[b][~allowed] == 0)                         # no fill-in (branch sparsity)
        assert np.allclose(np.diag(Lu[b]), 1.0) and np.all(np.triu(Lu[b], 1) == 0)
        assert rel_err(Lu[b].T @ np.diag(d[b]) @ Lu[b], M[b]) <= TOL
        assert rel_err(np.sqrt(d[b])[:, None] * Lu[b], L[b]) <= TOL
    assert rel_err(ltl(model, M[1]), L[1]) <= TOL                  # single matrix in, single out


def test_expanded_parent_sparsity_is_exact():
    """Every entry outside {(k, i): i ancestor-or-self of k} is zero, even where M is non-zero
    only by chance of rounding: check with a random tree with spherical joints."""
    model = sm.random_tree(10, 2, ("revolute", "prismatic", "spherical"))
    from sparsedyn import crba
    M = crba(model, model.random_configuration(np.random.default_rng(1)))
    L = ltl(model, M)
    lam = model.expanded_parents()
    allowed = np.eye(model.nv, dtype=bool)
    for k in range(model.nv):
        j = lam[k]
        while j >= 0:
            allowed[k, j] = True
            j = lam[j]
    assert np.all(L[~allowed] == 0)
    assert rel_err(L.T @ L, M) <= TOL


def test_solves(robot):
    name, model, pmodel = robot
    rng = np.random.default_rng(9)
    q = model.random_configuration(rng, batch=2)
    M = pin_mass_matrices(model, pmodel, q)
    L = ltl(model, M)
    Lu, _ = ltdl(model, M)
    x = rng.normal(size=(2, model.nv))
    X = rng.normal(size=(2, model.nv, 4))
    for b in range(2):
        for LL, unit in ((L, False), (Lu, True)):
            ref = solve_triangular(LL[b], x[b], lower=True)
            assert rel_err(solve_lower(model, LL, x, unit_diagonal=unit)[b], ref) <= TOL
            refT = solve_triangular(LL[b], x[b], lower=True, trans="T")
            assert rel_err(solve_lower_transpose(model, LL, x, unit_diagonal=unit)[b], refT) <= TOL
            refX = solve_triangular(LL[b], X[b], lower=True, trans="T")
            assert rel_err(solve_lower_transpose(model, LL, X, unit_diagonal=unit)[b], refX) <= TOL
    # M^-1 x = L^-1 L^-T x
    y = solve_lower(model, L, solve_lower_transpose(model, L, x))
    residual = np.abs(np.einsum("bij,bj->bi", M, y) - x).max()
    assert residual <= TOL * np.abs(M).max() * np.abs(y).max()      # backward error


def test_operation_count_matches_expanded_parent_depths():
    """Featherstone Sec. 6.5: with d_k = |anc(k)|, L^T L costs sum d_k (d_k + 1) / 2 multiply-adds,
    sum d_k divisions and n square roots; L^T D L no square roots."""
    model = sm.humanoid()
    lam = model.expanded_parents()
    depth = []
    for k in range(model.nv):
        d, j = 0, lam[k]
        while j >= 0:
            d, j = d + 1, lam[j]
        depth.append(d)
    depth = np.array(depth)
    from sparsedyn import crba
    M = crba(model, model.random_configuration(np.random.default_rng(0)))
    with count_operations() as ops:
        ltl(model, M)
    assert ops.mul == ops.add == int(np.sum(depth * (depth + 1) // 2))
    assert ops.div == int(depth.sum()) and ops.sqrt == model.nv
    with count_operations() as ops:
        ltdl(model, M)
    assert ops.sqrt == 0 and ops.mul == int(np.sum(depth * (depth + 1) // 2))


def test_non_positive_pivot_names_the_joint():
    b = ModelBuilder("massless")
    b.add_body("l1", -1, RevoluteJoint("j1", [0, 0, 1]), mass=1.0, inertia=np.eye(3) * 0.1)
    b.add_body("l2", 0, RevoluteJoint("j2", [1, 0, 0]), mass=0.0)
    model = b.build()
    from sparsedyn import crba
    M = crba(model, np.zeros(2))
    for fn in (ltl, ltdl):
        with pytest.raises(SingularModelError, match="j2"):
            fn(model, M)
    with pytest.raises(SingularModelError, match="DoF 0"):
        ltl(model, np.diag([-1.0, 1.0]))
    with pytest.raises(ValueError, match="M"):
        ltl(model, np.eye(3))
    with pytest.raises(ValueError, match="L, x"):
        solve_lower(model, np.eye(2), np.zeros(3))
