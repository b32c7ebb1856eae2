"""sparsedyn.delassus_solver (one state per call, sparsedyn/delassus_solver.py) against
Pinocchio's computeDelassusMatrix (humanoid: 6D soles + 3D fingertips) and the dense
J M^-1 J^T from Pinocchio's Jacobians and CRBA (world-welded contacts), 1e-10; its answer is
sparsedyn.delassus's bit for bit; bad inputs raise the typed errors naming them; one solver shared
by two threads gives each thread its own states' answers."""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn as sd
import sparsedyn.models as sm
from oracles import rel_err, to_pin_q
from sparsedyn import SingularModelError
from sparsedyn.contacts import Contact
from sparsedyn.opcount import count_operations
from test_delassus import build, pin_dense, random_placement
from test_delassus_compiled import TIPS, singular_models, urdf_case

TOL = 1e-10
CONTACTS = [Contact("l_sole"), Contact("r_sole")] + [Contact(t, "3d") for t in TIPS]


@pytest.fixture(scope="module")
def humanoid():
    """(model, q (6, nq), Pinocchio's computeDelassusMatrix at each q (6, 30, 30))."""
    return urdf_case("humanoid", CONTACTS, 6, 3)


@pytest.mark.parametrize("backend", [None, "numba", "numpy"])
def test_humanoid_matches_pinocchio_and_delassus(humanoid, backend):
    model, q, refs = humanoid
    f = sd.delassus_solver(model, CONTACTS, backend=backend)
    f(q[0])
    sd.wait_for_kernels()          # auto: the same route for both (NumPy while numba compiles)
    out = np.empty((30, 30))
    for b in range(len(q)):
        D = f(q[b])
        assert D.shape == (30, 30) and rel_err(D, refs[b]) <= TOL, b
        assert np.array_equal(D, sd.delassus(model, q[b], CONTACTS, backend=backend))
        assert f(q[b], out=out) is out and np.array_equal(out, D)
        one = sd.delassus(model, q[b:b + 1], CONTACTS, backend=backend)   # a batch of one state
        assert one.shape == (1, 30, 30) and np.array_equal(one[0], D)
    D = f(list(q[0]))                                   # not an array: sparsedyn.delassus answers
    assert rel_err(D, refs[0]) <= TOL
    assert rel_err(f(np.asfortranarray(q[:2])[1]), refs[1]) <= TOL    # a strided view


@pytest.mark.parametrize("method", ["dense", "efpa", "sparse"])
def test_other_methods_match_pinocchio(humanoid, method):
    model, q, refs = humanoid
    f = sd.delassus_solver(model, CONTACTS, method=method)
    assert rel_err(f(q[2]), refs[2]) <= TOL


def test_world_welded_contact_rows_are_zero():
    model, pmodel = build("panda", False)
    rng = np.random.default_rng(4)
    contacts = [Contact("panda_link0", "6d"), Contact("panda_hand", "3d", random_placement(rng)),
                Contact("panda_link4", "6d", random_placement(rng))]
    f = sd.delassus_solver(model, contacts, backend="numba")
    for x in model.random_configuration(rng, batch=3):
        D = f(x)
        assert np.all(D[:6] == 0) and np.all(D[:, :6] == 0)
        assert rel_err(D, pin_dense(pmodel, to_pin_q(model, pmodel, x), contacts)[1]) <= TOL
    only_welded = sd.delassus_solver(model, [Contact("panda_link0", "6d")])
    assert np.array_equal(only_welded(x), np.zeros((6, 6)))


def test_one_solver_from_two_threads(humanoid):
    """Each thread solves its own states many times through the same solver and through
    sd.delassus (one bound kernel): every answer is its state's (Pinocchio's), none is another
    thread's."""
    model, q, refs = humanoid
    f = sd.delassus_solver(model, CONTACTS, backend="numba")
    f(q[0])                                          # bound before the threads start
    start, errors = threading.Barrier(2), []

    def work(states):
        start.wait()
        for _ in range(40):
            for b in states:             # the solver, and sd.delassus's one-state path
                for e in (rel_err(f(q[b]), refs[b]), rel_err(sd.delassus(model, q[b], CONTACTS,
                                                                         backend="numba"), refs[b])):
                    if not e <= TOL:
                        errors.append((b, e))
    threads = [threading.Thread(target=work, args=(s,)) for s in ((0, 1, 2), (3, 4, 5))]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)                      # threads take turns between most bytecodes
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []


def test_operation_counts_are_delassus_ones(humanoid):
    model, q, _ = humanoid
    f = sd.delassus_solver(model, CONTACTS, backend="numba")
    with count_operations() as ops:
        f(q[0])
    with count_operations() as ref:
        sd.delassus(model, q[0], CONTACTS, backend="numpy")
    assert ops.as_dict() == ref.as_dict() and ops.as_dict()["flops"] > 0


@pytest.mark.parametrize("case", list(singular_models()), ids=lambda c: c[0].name)
def test_singular_model_raises(case):
    model, joint, body = case
    f = sd.delassus_solver(model, [Contact(model.link_names[-1], "3d")], backend="numba")
    with pytest.raises(SingularModelError, match=joint) as err:
        f(model.random_configuration(np.random.default_rng(0)))
    assert body in err.value.bodies and err.value.batch_indices == (0,)


def test_bad_input(humanoid):
    model = humanoid[0]
    f = sd.delassus_solver(model, CONTACTS, backend="numba")
    q = model.neutral_configuration()
    with pytest.raises(ValueError, match=r"q: expected shape \(\d+,\)"):
        f(q[:-1])
    with pytest.raises(ValueError, match="q: expected shape .*one state"):
        f(q[None])
    for bad in (np.nan, np.inf):
        qb = q.copy()
        qb[9] = bad
        with pytest.raises(ValueError, match="q: non-finite"):
            f(qb)
    qb = q.copy()
    qb[3:7] = [0.0, 0.0, 0.0, 1.0 + 1e-5]
    with pytest.raises(ValueError, match="q: quaternion of joint"):
        f(qb)
    with pytest.raises(ValueError, match="q: quaternion of joint .* at batch index 0"):
        sd.delassus(model, qb[None], CONTACTS, backend="numba")
    with pytest.raises(ValueError, match=r"q: expected shape"):
        sd.delassus(model, q[None, :-1], CONTACTS, backend="numba")
    for near in (2e-7, 8e-7):      # within batch.QUATERNION_TOL: answered (8e-7: past the screen)
        qb[6] = 1.0 + near
        assert np.array_equal(f(qb), sd.delassus(model, qb, CONTACTS, backend="numba"))
    with pytest.raises(ValueError, match="out: expected an array of shape"):
        f(q, out=np.empty((30, 29)))
    with pytest.raises(ValueError, match="unknown method"):
        sd.delassus_solver(model, CONTACTS, method="nope")
    with pytest.raises(ValueError, match="backend"):
        sd.delassus_solver(model, CONTACTS, backend="cuda")
    with pytest.raises(KeyError, match="no_such_link"):
        sd.delassus_solver(model, [Contact("no_such_link")])
    with pytest.raises(ValueError, match="efpa"):
        sd.delassus_solver(sm.serial_chain(3), [Contact("link1")], method="efpa", backend="numba")
