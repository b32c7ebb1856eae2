"""The mass matrix on the C backend (plan.solve(backend="c"): lane vectors of states, and
plan.solver(): one state per call) against Pinocchio's crba on several robots, and the typed
errors of the numba route."""
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn as sd
from oracles import rel_err
from sparsedyn import NonFiniteError
from sparsedyn.backends.c_mass_matrix_kernel import LANES
from test_mass_matrix_compiled import TOL, _robot, pin_M, slider_model

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                                reason="no C compiler")

_CACHE = {}


@pytest.fixture(params=["humanoid", "talos", "panda", "solo12", "anymal", "mixed"])
def robot(request):
    if request.param not in _CACHE:
        model, pmodel, conv = _robot(request.param)
        _CACHE[request.param] = model, pmodel, conv, sd.compile(sd.mass_matrix(model))
    return _CACHE[request.param]


def test_c_batches_against_pinocchio(robot):
    model, pmodel, conv, plan = robot
    B = 4 * LANES + 3                        # whole lane groups and a partial one
    q = model.random_configuration(np.random.default_rng(11), batch=B)
    ref = pin_M(model, pmodel, conv, q)
    rows, cols = plan.pairs
    for threads in (1, 2):                  # two threads: ranges that split a lane group
        M = plan.solve(q, backend="c", threads=threads)
        assert M.shape == (B, model.nv, model.nv) and rel_err(M, ref) < TOL
        packed = plan.solve(q, backend="c", threads=threads, packed=True)
        assert packed.shape == (B, plan.n_pairs) and rel_err(packed, ref[:, rows, cols]) < TOL
    # the numba kernel's formulas in its order, less exact zeros: the same bits (c_mass_matrix)
    assert np.array_equal(packed, plan.solve(q, backend="numba", packed=True))
    assert np.array_equal(plan.solver()(q[5]), plan.solve(q[5], backend="numba"))
    buf = np.full((B, model.nv, model.nv), np.nan)   # a caller's buffer: its zeros written too
    assert plan.solve(q, backend="c", out=buf) is buf and rel_err(buf, ref) < TOL
    for n in (0, 1, LANES - 1):            # below a lane group
        M = plan.solve(q[:n], backend="c")
        assert M.shape == (n, model.nv, model.nv) and (n == 0 or rel_err(M, ref[:n]) < TOL)
    assert plan.solve(q[2], backend="c").shape == (model.nv,) * 2
    assert rel_err(plan.solve(q[2], backend="c"), ref[2]) < TOL


def test_solver_one_state_against_pinocchio(robot):
    model, pmodel, conv, plan = robot
    q = model.random_configuration(np.random.default_rng(12), batch=5)
    ref = pin_M(model, pmodel, conv, q)
    f = plan.solver()
    out = np.full((model.nv, model.nv), np.nan)
    for b in range(5):
        assert rel_err(f(q[b]), ref[b]) < TOL
        assert f(q[b], out=out) is out and rel_err(out, ref[b]) < TOL
    assert f(q[1]) is not f(q[1])             # a fresh array per call
    # the one-state library also serves batches smaller than a lane group
    assert rel_err(plan.solve(q[:3], backend="c"), ref[:3]) < TOL
    with pytest.raises(ValueError, match="backend"):
        plan.solver(backend="numba")


def test_c_bad_input_raises_typed_errors():
    model = sd.models.humanoid()
    plan = sd.compile(sd.mass_matrix(model))
    f = plan.solver()
    q = model.random_configuration(np.random.default_rng(8), batch=4)
    bad = q.copy()
    bad[2, 9] = np.nan
    with pytest.raises(ValueError, match="q: non-finite value at batch index 2"):
        plan.solve(bad, backend="c")
    with pytest.raises(ValueError, match="q: non-finite value"):
        f(bad[2])
    bad = q.copy()
    bad[1, 3:7] *= 2.0                       # the free-flyer's quaternion
    with pytest.raises(ValueError, match="quaternion"):
        plan.solve(bad, backend="c")
    with pytest.raises(ValueError, match="quaternion"):
        f(bad[1])
    with pytest.raises(ValueError, match="q: expected shape"):
        f(q[0, :-1])
    with pytest.raises(ValueError, match="q: expected shape"):
        plan.solve(q[:, :-1], backend="c")


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_one_state_solve_takes_the_one_state_library_once_built():
    """plan.solve(q (nq,)) on "auto" or "c", once plan.solver() built the one-state library,
    runs it with a thread's own buffers: the solver's bits and numba's (equal to Pinocchio's
    crba), a fresh array per call, right from four threads at once; a state it flags still
    raises the batched path's typed error."""
    from concurrent.futures import ThreadPoolExecutor
    model, pmodel, conv = _robot("humanoid")
    plan = sd.compile(sd.mass_matrix(model))
    q = model.random_configuration(np.random.default_rng(9), batch=32)
    ref = plan.solve(q, backend="numba")
    assert rel_err(ref, pin_M(model, pmodel, conv, q)) < TOL         # Pinocchio's crba
    f = plan.solver()
    for backend in ("auto", "c"):
        M = plan.solve(q[3], backend=backend)
        assert np.array_equal(M, f(q[3])) and np.array_equal(M, ref[3])
        assert plan.solve(q[3], backend=backend) is not M
    assert plan._local.solver is not f                 # the plan's own, not the caller's
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda b: [plan.solve(q[b]) for _ in range(20)], range(32)))
    assert all(np.array_equal(M, ref[b]) for b in range(32) for M in got[b])
    bad = q[2].copy()
    bad[9] = np.nan
    with pytest.raises(ValueError, match="q: non-finite value"):
        plan.solve(bad)
    bad = q[1].copy()
    bad[3:7] *= 2.0
    with pytest.raises(ValueError, match="quaternion"):
        plan.solve(bad, backend="c")
    with pytest.raises(ValueError, match="q: expected shape"):
        plan.solve(q[0, :-1])
    slider = sd.compile(sd.mass_matrix(slider_model()))
    slider.solver()
    with pytest.raises(NonFiniteError):
        slider.solve(np.array([0.0, 1e200]))          # m x^2 overflows: M_11 is inf


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_c_overflow_names_the_state():
    model = slider_model()
    q = np.zeros((LANES + 3, 2))
    q[LANES + 1, 1] = 1e200                  # m x^2 overflows: M_11 is inf
    plan = sd.compile(sd.mass_matrix(model))
    for packed in (False, True):
        with pytest.raises(NonFiniteError) as err:
            plan.solve(q, backend="c", packed=packed)
        assert err.value.batch_indices == (LANES + 1,) and err.value.arguments[0] == "q"
    with pytest.raises(NonFiniteError):
        plan.solver()(q[LANES + 1])
    assert np.isfinite(plan.solver()(q[0])).all()


def test_c_sincos_every_octant_and_beyond_its_range():
    """The generated Cephes sincos (c_sincos.py) through M: joint angles over many turns, both
    signs, and in one lane group an angle beyond SINCOS_RANGE (libm for that group)."""
    from sparsedyn.ir.assembly import ROT_ANGLE
    from sparsedyn.kernels.assemble_numba import SINCOS_RANGE
    model, pmodel, conv = _robot("humanoid")
    plan = sd.compile(sd.mass_matrix(model))
    jt = plan.program.joints
    cols = jt.rot_q[jt.rot_kind == ROT_ANGLE]
    rng = np.random.default_rng(13)
    q = model.random_configuration(rng, batch=3 * LANES)
    q[:, cols] = rng.uniform(-40.0, 40.0, size=(q.shape[0], cols.size))
    q[LANES + 2, cols[3]] = 3.0 * SINCOS_RANGE
    q[LANES + 5, cols[7]] = -1e12
    ref = pin_M(model, pmodel, conv, q)
    assert rel_err(plan.solve(q, backend="c"), ref) < TOL
    f = plan.solver()
    for b in (0, LANES + 2, LANES + 5):
        assert rel_err(f(q[b]), ref[b]) < TOL


@pytest.mark.parametrize("openmp", [True, False])
def test_c_batches_split_over_two_threads(openmp, monkeypatch, tmp_path):
    """B = 300: two ranges of whole lane groups, on an OpenMP team in one call (or, where the
    compiler has no OpenMP, on the package's Python pool): the same bits as one thread, M
    against Pinocchio."""
    from sparsedyn.backends import generated_c
    if openmp and not generated_c.openmp_flags():
        pytest.skip("the C compiler has no OpenMP here")
    model, pmodel, conv = _robot("humanoid")
    plan = sd.compile(sd.mass_matrix(model))
    if not openmp:
        monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
        monkeypatch.setattr(generated_c, "openmp_flags", lambda: ())
    q = model.random_configuration(np.random.default_rng(13), batch=300)
    one = plan.solve(q, backend="c", threads=1, packed=True)
    assert (plan.c_kernel._libs["lanes"][2] is not None) is openmp   # the OpenMP entry
    assert np.array_equal(plan.solve(q, backend="c", threads=2, packed=True), one)
    M = plan.solve(q[::29], backend="c")
    assert rel_err(M, pin_M(model, pmodel, conv, q[::29])) < TOL
