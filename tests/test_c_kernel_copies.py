"""The compiled kernels copying and checking plan.solve's inputs as they read them (C's vector
unit, backends/c_plan_lanes; numba's fused kernel; problems/plan._kernel_copies) and C splitting
a batch over an OpenMP team: the answers against Pinocchio, the copies equal to the inputs bit
for bit, each bad state flagged alone, the same typed errors as the NumPy route (which copies
and checks before the solve), the on-demand variables from the copies after the caller
overwrote its arrays, and the same bits without OpenMP."""
import os
import shutil

import numpy as np
import pinocchio as pin
import pytest
from oracles import pin_model, rel_err, robot_urdf, to_pin_q

import sparsedyn as sd
from sparsedyn.backends import BAD_QUATERNION, INPUT_NOT_FINITE
from sparsedyn.backends import generated_c

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                                reason="no C compiler")

_PLANS = {}


def _plans():
    """(model, Pinocchio's model, {problem: plan}) of solo12 on a free-flyer (a quaternion in
    q; small programs: their C libraries compile in about a second)."""
    if not _PLANS:
        path = robot_urdf("solo12")
        model = sd.load_urdf(path, floating_base=True)
        _PLANS["solo"] = model, pin_model(path, True), {
            kind: sd.compile(getattr(sd, kind)(model))
            for kind in ("inverse_dynamics", "forward_dynamics")}
    return _PLANS["solo"]


def _states(model, B, seed=3):
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng, batch=B)
    v, y = rng.normal(size=(2, B, model.nv))
    return q, v, y


@pytest.mark.parametrize("backend", ["c", "numba"])
@pytest.mark.parametrize("kind", ["inverse_dynamics", "forward_dynamics"])
def test_copying_kernels_against_pinocchio_on_one_and_two_threads(kind, backend):
    """B = 300 (two ranges of whole groups on two threads, a partial last group): the outputs
    equal Pinocchio's rnea / aba to 1e-10, one and two threads give the same bits, and the
    on-demand variables, read after the caller zeroed its arrays, are those of the inputs of
    the call (equal to outputs="all" of the same states); read-only inputs (numba: another
    array type, copied before the solve) give the same bits."""
    model, pm, plans = _plans()
    plan = plans[kind]
    given, out = ("qdd", "tau") if kind == "inverse_dynamics" else ("tau", "qdd")
    B = 300
    q, v, y = _states(model, B)
    assert plan.kernel(backend).copies_inputs(B)
    mine = [a.copy() for a in (q, v, y)]
    one = plan.solve(mine[0], mine[1], backend=backend, threads=1, **{given: mine[2]})
    two = plan.solve(q, v, backend=backend, threads=2, **{given: y})
    assert np.array_equal(one[out], two[out])
    for a in mine:
        a[:] = 0.0                                   # the caller reuses its arrays
    full = plan.solve(q, v, backend=backend, outputs="all", **{given: y})
    assert np.array_equal(one.vector, full.vector)
    frozen = [a.copy() for a in (q, v, y)]
    for a in frozen:
        a.flags.writeable = False
    assert np.array_equal(plan.solve(frozen[0], frozen[1], backend=backend,
                                     **{given: frozen[2]}).vector, one.vector)
    pd = pm.createData()
    for b in range(0, B, 7):
        pq = to_pin_q(model, pm, q[b])
        expect = (pin.rnea(pm, pd, pq, v[b], y[b]) if given == "qdd"
                  else pin.aba(pm, pd, pq, v[b], y[b]))
        assert rel_err(two[out][b], expect) <= 1e-10


@pytest.mark.parametrize("openmp", [True, False])
def test_kernel_copies_inputs_and_flags_each_bad_state_alone(openmp, monkeypatch, tmp_path):
    """CKernel.run(..., copies=...): the copies equal q, qd and y bit for bit; a NaN in q (a
    position), an inf in qd, a NaN in y each flag INPUT_NOT_FINITE for their state only, a non-unit
    quaternion BAD_QUATERNION for its state only; the good states' outputs equal those of a
    run on clean inputs. Without OpenMP (a compiler without it) the Python pool splits the
    batch and the bits are the same."""
    if openmp and not generated_c.openmp_flags():
        pytest.skip("the C compiler has no OpenMP here")
    model, _, plans = _plans()
    kernel = plans["inverse_dynamics"].kernel("c")
    if not openmp:
        monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
        monkeypatch.setattr(generated_c, "openmp_flags", lambda: ())
        kernel = generated_c.CKernel(kernel.ir)
    B = 270
    q, v, y = _states(model, B, seed=5)
    clean, _, ok = kernel.run(q, v, y, threads=2)
    assert not ok.any()
    if openmp:
        assert kernel.library("outputs_lanes")[2] is not None    # the OpenMP entry ran
    else:
        assert kernel.library("outputs_lanes")[2] is None
    q[7, 0], v[140, 3], y[269, 17] = np.nan, np.inf, np.nan
    q[200, 3:7] *= 1.01
    copies = [np.full_like(a, -1.0) for a in (q, v, y)]
    for threads in (1, 2):
        out, x, codes = kernel.run(q, v, y, threads=threads, copies=copies)
        assert x is None and codes.dtype == np.uint8
        for src, dst in zip((q, v, y), copies):
            assert np.array_equal(src, dst, equal_nan=True)
        inputs = codes & (INPUT_NOT_FINITE | BAD_QUATERNION)
        assert {int(b): int(inputs[b]) for b in np.flatnonzero(inputs)} == {
            7: INPUT_NOT_FINITE, 140: INPUT_NOT_FINITE, 269: INPUT_NOT_FINITE,
            200: BAD_QUATERNION}
        good = np.setdiff1d(np.arange(B), [7, 140, 200, 269])
        assert np.array_equal(out[good], clean[good])
        for a in copies:
            a[:] = -1.0


@pytest.mark.parametrize("kind", ["inverse_dynamics", "forward_dynamics"])
def test_bad_inputs_raise_what_the_copy_then_solve_route_raises(kind):
    """The errors of the copying kernels (C's vector unit, B >= LANES, and numba's) are those
    of the NumPy route, which copies and checks before the solve: the argument, batch index and
    column, or the joint of a non-unit quaternion; a quaternion of q named before a later
    argument's NaN."""
    model, _, plans = _plans()
    plan = plans[kind]
    given = "qdd" if kind == "inverse_dynamics" else "tau"
    B = 40
    q, v, y = _states(model, B, seed=9)

    def bad(qb=q, vb=v, yb=y):
        msgs = []
        for backend in ("numpy", "c", "numba"):
            with pytest.raises(ValueError) as err:
                plan.solve(qb, vb, backend=backend, **{given: yb})
            msgs.append(str(err.value))
        assert msgs[1] == msgs[0] and msgs[2] == msgs[0]
        return msgs[0]

    q1 = q.copy()
    q1[33, 9] = np.inf
    assert "q: non-finite value at batch index 33, column 9" in bad(qb=q1)
    v1 = v.copy()
    v1[8, 2] = np.nan
    assert "v: non-finite value at batch index 8" in bad(vb=v1)
    y1 = y.copy()
    y1[39, 0] = -np.inf
    assert f"{given}: non-finite value at batch index 39" in bad(yb=y1)
    q2 = q.copy()
    q2[21, 3:7] *= 0.9
    assert "quaternion of joint 'root_joint' is not unit-norm at batch index 21" in bad(qb=q2)
    assert "quaternion of joint 'root_joint'" in bad(qb=q2, vb=v1)   # q's check before v's


def test_openmp_probe_is_kept_and_survives_a_cache_it_cannot_write(monkeypatch, tmp_path):
    """The probe's answer is written to the cache once and read back by the next process; a
    cache it cannot write to still gets the probe's answer (asked again next time)."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
    cc = generated_c.compiler()
    generated_c._openmp.cache_clear()
    first = generated_c._openmp(cc)
    kept = list((tmp_path / "c").glob("openmp_*.txt"))
    assert len(kept) == 1 and kept[0].read_text() == ("1" if first else "0")
    generated_c._openmp.cache_clear()
    kept[0].write_text("0")                        # read back, not probed again
    assert generated_c._openmp(cc) is False
    kept[0].unlink()
    generated_c._openmp.cache_clear()

    def refuse(*args, **kwargs):
        raise PermissionError("read-only cache")
    monkeypatch.setattr(generated_c, "atomic_write", refuse)
    assert generated_c._openmp(cc) is first
    generated_c._openmp.cache_clear()              # the next caller asks the real cache again
