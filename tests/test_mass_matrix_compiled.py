"""The compiled mass matrix (compile(mass_matrix(model)): CRBA and its L^T L factor, numba; the
C backend: test_mass_matrix_c.py) against Pinocchio's crba, numpy's Cholesky and the reference's
typed errors."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn as sd
from oracles import (pin, pin_model, pin_twin, rel_err, robot_urdf, singular_rod_model, to_pin_q,
                     twin_q)
from sparsedyn import NonFiniteError, SingularModelError
from sparsedyn.model import ModelBuilder, PrismaticJoint, RevoluteJoint
from sparsedyn.models import HUMANOID_URDF
from test_compiled import mixed_tree
from test_ltl import pin_expanded_pattern, reverse_cholesky

TOL = 1e-10


def _robot(name):
    if name == "mixed":                       # every joint kind but the free-flyer
        m = mixed_tree()
        return m, pin_twin(m), twin_q
    if name == "humanoid":
        return sd.models.humanoid(), pin_model(HUMANOID_URDF, True), to_pin_q
    fb = name != "panda"                      # panda: a fixed-base arm
    return (sd.load_urdf(robot_urdf(name), floating_base=fb), pin_model(robot_urdf(name), fb),
            to_pin_q)


_CACHE = {}


@pytest.fixture(params=["humanoid", "talos", "panda", "mixed"])
def robot(request):
    if request.param not in _CACHE:
        model, pmodel, conv = _robot(request.param)
        _CACHE[request.param] = model, pmodel, conv, sd.compile(sd.mass_matrix(model))
    return _CACHE[request.param]


def pin_M(model, pmodel, conv, q):
    """Pinocchio's crba (upper triangle) made symmetric, per state; on trees whose subtrees'
    DoFs are not contiguous (mixed_tree: Pinocchio's crba assumes they are) the columns
    M e_j = rnea(q, 0, e_j) - rnea(q, 0, 0)."""
    data = pmodel.createData()
    contiguous = all(model.parents[i] < 0 or model.parents[i] == i - 1
                     or model.parents[i] in model.support(i - 1) for i in range(model.nbodies))
    out, zero = [], np.zeros(model.nv)
    for qb in q:
        pq = conv(model, pmodel, qb)
        if contiguous:
            M = pin.crba(pmodel, data, pq)
            out.append(np.triu(M) + np.triu(M, 1).T)
        else:
            g = pin.rnea(pmodel, data, pq, zero, zero)
            out.append(np.array([pin.rnea(pmodel, data, pq, zero, e) - g
                                 for e in np.eye(model.nv)]).T)
    return np.array(out)


def test_mass_matrix_against_pinocchio(robot):
    model, pmodel, conv, plan = robot
    q = model.random_configuration(np.random.default_rng(5), batch=70)
    ref = pin_M(model, pmodel, conv, q)
    for threads in (1, 2):                  # 70 states: two threads get 35 each
        M = plan.solve(q, threads=threads, backend="numba")
        assert M.shape == (70, model.nv, model.nv) and rel_err(M, ref) < TOL
    M3 = plan.solve(q[3], backend="numba")
    assert rel_err(M3, ref[3]) < TOL and M3.shape == (model.nv,) * 2
    assert plan.solve(q[:0]).shape == (0, model.nv, model.nv)
    assert plan.factor(q[:0]).shape == (0, model.nv, model.nv)
    assert rel_err(sd.crba(model, q[:4], backend="numba"), ref[:4]) < TOL
    rows, cols = plan.pairs                  # packed: exactly the lower triangle's pattern
    allowed = pin_expanded_pattern(pmodel)
    assert np.array_equal(np.sort(rows * model.nv + cols), np.flatnonzero(allowed))
    packed = plan.solve(q[:6], packed=True, backend="numba")
    assert packed.shape == (6, plan.n_pairs) and rel_err(packed, ref[:6, rows, cols]) < TOL
    assert np.all(ref[:6][:, ~(allowed | allowed.T)] == 0)   # nothing lost outside the pattern


def test_factor_against_numpy_cholesky(robot):
    model, pmodel, conv, plan = robot
    q = model.random_configuration(np.random.default_rng(6), batch=9)
    M = pin_M(model, pmodel, conv, q)
    L = plan.factor(q)
    allowed = pin_expanded_pattern(pmodel)
    assert L.shape == M.shape and np.all(L[:, ~allowed] == 0)
    assert np.all(np.diagonal(L, axis1=1, axis2=2) > 0)
    assert rel_err(np.swapaxes(L, 1, 2) @ L, M) < TOL
    for b in range(len(q)):                 # the unique factor: numpy's Cholesky of P M P
        assert rel_err(L[b], reverse_cholesky(M[b])) < 1e-8
    rows, cols = plan.pairs
    assert rel_err(plan.factor(q, packed=True), L[:, rows, cols]) < 1e-14
    assert rel_err(plan.factor(q[2], threads=1), L[2]) < 1e-14


def test_numpy_backend_and_out_buffer():
    model = sd.models.humanoid()
    plan = sd.compile(sd.mass_matrix(model))
    q = model.random_configuration(np.random.default_rng(7), batch=5)
    ref = pin_M(model, pin_model(HUMANOID_URDF, True), to_pin_q, q)
    assert rel_err(plan.solve(q, backend="numpy"), ref) < TOL
    assert rel_err(plan.factor(q, backend="numpy", packed=True),
                   plan.factor(q, packed=True)) < 1e-12
    with sd.count_operations() as ops:       # counting: the reference route, which charges
        counted = plan.solve(q[0])
    assert ops.flops > 0 and rel_err(counted, ref[0]) < TOL
    buf = np.full((5, model.nv, model.nv), np.nan)
    assert plan.solve(q, out=buf, backend="numba") is buf and rel_err(buf, ref) < TOL
    buf[:] = np.nan                          # a caller's buffer: every entry written, zeros too
    assert np.array_equal(plan.factor(q, out=buf), plan.factor(q))
    for kwargs in ({"out": np.zeros((5, model.nv))}, {"out": np.zeros((4, model.nv, model.nv))},
                   {"packed": True, "out": buf}):
        with pytest.raises(ValueError, match="out"):
            plan.solve(q, **kwargs)
    with pytest.raises(ValueError, match="backend"):
        plan.solve(q, backend="cuda")
    with pytest.raises(ValueError, match="backend"):     # C computes M alone
        plan.factor(q, backend="c")
    with pytest.raises(ValueError, match="backend"):
        sd.crba(model, q, backend="cuda")
    with pytest.raises(ValueError, match="threads"):
        plan.solve(q, threads=0)
    with pytest.raises(ValueError, match="ordering"):
        sd.compile(sd.mass_matrix(model), ordering="amd")


def test_bad_input_raises_typed_errors():
    model = sd.models.humanoid()
    plan = sd.compile(sd.mass_matrix(model))
    q = model.random_configuration(np.random.default_rng(8), batch=4)
    bad = q.copy()
    bad[2, 9] = np.nan
    for fn in (plan.solve, plan.factor):
        with pytest.raises(ValueError, match="q: non-finite value at batch index 2"):
            fn(bad)
    bad = q.copy()
    bad[1, 3:7] *= 2.0                       # the free-flyer's quaternion
    with pytest.raises(ValueError, match="quaternion"):
        plan.solve(bad)
    with pytest.raises(ValueError, match="q: expected shape"):
        plan.solve(q[:, :-1])


def slider_model():
    """A revolute joint carrying a prismatic one: M_11 = m x^2 + ... overflows for a huge x."""
    b = ModelBuilder("slider")
    b.add_body("base", -1, RevoluteJoint("j1", [0, 0, 1]), mass=1.0, inertia=np.eye(3) * 0.1)
    b.add_body("slide", "base", PrismaticJoint("j2", [1, 0, 0]), mass=1.0, inertia=np.eye(3) * 0.1)
    return b.build()


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_overflow_and_singular_states_as_the_reference():
    model = slider_model()
    q = np.zeros((3, 2))
    q[1, 1] = 1e200                          # m x^2 overflows: M_11 is inf
    plan = sd.compile(sd.mass_matrix(model))
    for fn in (plan.solve, plan.factor, lambda x: sd.crba(model, x)):
        with pytest.raises(NonFiniteError) as err:
            fn(q)
        assert err.value.batch_indices == (1,) and err.value.arguments[0] == "q"
    rod = singular_rod_model()
    q = rod.random_configuration(np.random.default_rng(0), batch=3)
    with pytest.raises(SingularModelError) as ref:
        sd.ltl(rod, sd.crba(rod, q))
    with pytest.raises(SingularModelError) as err:
        sd.compile(sd.mass_matrix(rod)).factor(q)
    assert str(err.value) == str(ref.value) and "j2" in str(err.value)
    assert err.value.batch_indices == (0, 1, 2)
    assert np.isfinite(sd.compile(sd.mass_matrix(rod)).solve(q)).all()   # M itself exists
