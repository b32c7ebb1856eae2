"""The C backend's vector unit (backends/c_plan_lanes: the plan's C on GCC vectors of LANES
states, for batches): against Pinocchio's rnea/aba on published robots, equal to the numba
kernel bit for bit (the same formulas and the same Cephes sin/cos) and to the one-state C unit
(libm's sin/cos) to round-off, on partial groups, with external wrenches and two threads, and
with every flag per state as the one-state unit reports it."""
import os
import shutil

import numpy as np
import pinocchio as pin
import pytest
from oracles import pin_model, rel_err, robot_urdf, singular_rod_model, to_pin_q

import sparsedyn as sd
from sparsedyn.backends import BAD_QUATERNION, RESOLVE
from sparsedyn.backends.c_vector import LANES
from sparsedyn.models import HUMANOID_URDF

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                                reason="no C compiler")

_CACHE = {}


@pytest.fixture(params=["humanoid", "talos", "panda", "solo12"])
def robot(request):
    """(model, Pinocchio's model, {kind: plan with a wrench on the last link})."""
    name = request.param
    if name not in _CACHE:
        fb = name != "panda"                       # panda: a fixed-base arm
        path = HUMANOID_URDF if name == "humanoid" else robot_urdf(name)
        model = sd.load_urdf(path, floating_base=fb)
        link = model.link_names[-1]
        plans = {kind: sd.compile(getattr(sd, kind)(model, f_ext=[link]))
                 for kind in ("inverse_dynamics", "forward_dynamics")}
        _CACHE[name] = model, pin_model(path, fb), link, plans
    return _CACHE[name]


def _pin_f_ext(pmodel, link, wrench):
    """Pinocchio's per-joint forces of one linear-first wrench on `link` (link frame)."""
    frame = pmodel.frames[pmodel.getFrameId(link)]
    fext = [pin.Force.Zero() for _ in range(pmodel.njoints)]
    fext[frame.parentJoint] = frame.placement.act(pin.Force(wrench))
    return fext


def test_vector_unit_against_pinocchio_numba_and_the_one_state_unit(robot, monkeypatch):
    """B = 13 (a full group and a partial one), a wrench per state: the whole solution equals
    numba's bit for bit, the one-state C unit's to round-off, Pinocchio's rnea/aba to 1e-10;
    two threads (two partial groups) give the same bits."""
    model, pm, link, plans = robot
    pd = pm.createData()
    rng = np.random.default_rng(17)
    B = 13
    q = model.random_configuration(rng, batch=B)
    v, y = rng.normal(size=(2, B, model.nv))
    w = 20.0 * rng.normal(size=(B, 6))
    for kind, plan in plans.items():
        given, out = ("qdd", "tau") if kind == "inverse_dynamics" else ("tau", "qdd")
        kernel = plan.kernel("c")
        assert kernel.vector

        def solve(backend, threads=1):
            return plan.solve(q, v, f_ext={link: w}, backend=backend, outputs="all",
                              threads=threads, **{given: y})
        lanes = solve("c")
        assert "full_lanes" in kernel._libs                  # the vector unit ran
        assert np.array_equal(lanes.vector, solve("numba").vector)
        assert np.array_equal(solve("c", threads=2).vector, lanes.vector)
        assert np.array_equal(plan.solve(q, v, f_ext={link: w}, backend="c", **{given: y})[out],
                              lanes[out])                     # the outputs-only kind
        monkeypatch.setattr(kernel, "vector", False)         # one state at a time
        one = solve("c")
        monkeypatch.undo()
        assert rel_err(lanes.vector, one.vector) <= 1e-12
        for b in range(B):
            pq = to_pin_q(model, pm, q[b])
            fext = _pin_f_ext(pm, link, w[b])
            expect = (pin.rnea(pm, pd, pq, v[b], y[b], fext) if given == "qdd"
                      else pin.aba(pm, pd, pq, v[b], y[b], fext))
            assert rel_err(lanes[out][b], expect) <= 1e-10


def _codes(kernel, kind, q, v, y):
    """(per-state return codes (uint8), outputs) of one library of the kernel on a batch."""
    B = q.shape[0]
    out = np.empty((B, kernel.sizes["n_out"]))
    x = np.empty((B, kernel.sizes["n"])) if kind.startswith("full") else None
    broken = np.zeros(B, dtype=np.uint8)
    kernel._call(kind, 0, B, q, v, y, out, x, broken, kernel._work(kind, 1)[0])
    return broken, out


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
def test_flags_per_lane_as_the_one_state_unit_reports_them():
    """A non-unit quaternion, NaN in q or v, both, in single lanes of a batch of 14: each
    state's code (RESOLVE, BAD_QUATERNION) is the one-state unit's, the others are 0 and equal
    numba's outputs bit for bit; B = 0 and 1 run; a pivot that breaks down is flagged in every
    lane and plan.solve re-solves or names it."""
    model = sd.load_urdf(HUMANOID_URDF, floating_base=True)
    rng = np.random.default_rng(4)
    B = 14
    q = model.random_configuration(rng, batch=B)
    v, y = rng.normal(size=(2, B, model.nv))
    q[2, 3:7] *= 1.01                                        # the base's quaternion
    v[5, 7] = np.nan
    q[9, 4] = np.nan
    q[10, 3:7] *= 0.9
    v[10, 0] = np.inf
    expect = np.zeros(B, dtype=np.uint8)
    expect[[2, 9, 10]] = BAD_QUATERNION
    expect[[5, 9, 10]] += RESOLVE
    for kind in ("inverse_dynamics", "forward_dynamics"):
        plan = sd.compile(getattr(sd, kind)(model))
        kernel = plan.kernel("c")
        for call in ("outputs", "full"):
            lanes, out = _codes(kernel, f"{call}_lanes", q, v, y)
            one, _ = _codes(kernel, call, q, v, y)
            assert np.array_equal(lanes, expect) and np.array_equal(one, expect)
        ok = expect == 0
        ref, _, broken = plan.kernel("numba").run(q, v, y)
        assert np.array_equal(out[ok], ref[ok]) and broken[(expect & RESOLVE) != 0].all()
        for n in (0, 1, LANES - 1, LANES + 1):
            got, _, flags = kernel.run(q[ok][:n], v[ok][:n], y[ok][:n], vector=True)
            assert got.shape == (n, model.nv) and not flags.any()
            assert np.array_equal(got, ref[ok][:n])
    rod = sd.compile(sd.forward_dynamics(singular_rod_model()))
    q, v, tau = np.zeros((LANES + 1, 2)), np.zeros((LANES + 1, 2)), np.ones((LANES + 1, 2))
    assert rod.kernel("c").run(q, v, tau, vector=True)[2].all()
    with pytest.raises(sd.SingularModelError):
        rod.solve(q, v, tau=tau, backend="c")


def test_backward_error_check_on_lanes():
    """An ordering whose pivots need the row-wise backward-error check (amd on panda's forward
    dynamics): the vector unit runs the check per lane; equal to numba bit for bit and to
    Pinocchio's aba, and its clean states pass the check."""
    path = robot_urdf("panda")
    model, pm = sd.load_urdf(path, floating_base=False), pin_model(path, False)
    plan = sd.compile(sd.forward_dynamics(model), ordering="amd")
    assert plan.ir.checks_residual and plan.kernel("c").vector
    rng = np.random.default_rng(6)
    q = model.random_configuration(rng, batch=LANES + 3)
    v, tau = rng.normal(size=(2, LANES + 3, model.nv))
    for full in (False, True):
        got, x, flags = plan.kernel("c").run(q, v, tau, full=full, vector=True)
        ref, xr, ref_flags = plan.kernel("numba").run(q, v, tau, full=full)
        assert not flags.any() and not ref_flags.any()
        assert np.array_equal(got, ref) and (not full or np.array_equal(x, xr))
    for b in range(LANES + 3):
        expect = pin.aba(pm, pm.createData(), to_pin_q(model, pm, q[b]), v[b], tau[b])
        assert rel_err(got[b], expect) <= 1e-10


def test_auto_runs_batches_on_c_vectors_once_built(monkeypatch, tmp_path):
    """"auto" never compiles: with only the one-state library built (plan.solver()), batches of
    LANES or more do not go to C; once a backend="c" batch built the vector library, batches of
    any size from LANES up do, with numba's results bit for bit; the full solution's library
    still unbuilt, a full pass does not."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))          # an empty cache
    path = robot_urdf("panda")
    model = sd.load_urdf(path, floating_base=False)
    plan = sd.compile(sd.inverse_dynamics(model))
    plan.solver()
    assert plan._fused_backend("auto", 1) == "c"
    assert plan._fused_backend("auto", LANES) != "c"
    rng = np.random.default_rng(9)
    q = model.random_configuration(rng, batch=4 * LANES + 5)
    v, a = rng.normal(size=(2, 4 * LANES + 5, model.nv))
    plan.solve(q[:LANES], v[:LANES], qdd=a[:LANES], backend="c")
    assert plan._fused_backend("auto", LANES) == "c"
    assert plan._fused_backend("auto", 4096) == "c"
    assert plan._fused_backend("auto", 4096, full=True) != "c"
    got = plan.solve(q, v, qdd=a, backend="auto")["tau"]
    assert np.array_equal(got, plan.solve(q, v, qdd=a, backend="numba")["tau"])


def test_split_run_covers_every_state_once_in_long_aligned_ranges():
    """generated_c.split_run: the ranges partition [0, B), each of min_states at least (fewer
    threads otherwise), on multiples of LANES where they are long; the first on the calling
    thread, each range on its own work array."""
    import threading
    from sparsedyn.backends.c_vector import LANES
    from sparsedyn.backends.generated_c import C_MIN_STATES_PER_THREAD, split_run
    for B, threads, min_states in ((0, 2, 128), (5, 2, 128), (255, 2, 128), (256, 2, 128),
                                   (4099, 2, 128), (4099, 3, 128), (9, 2, 4)):
        seen, lock = [], threading.Lock()

        def call(lo, hi, work):
            with lock:
                seen.append((lo, hi, work, threading.get_ident()))
        split_run(B, threads, lambda k: list(range(k)), call, min_states=min_states)
        ranges = sorted((lo, hi) for lo, hi, _, _ in seen if hi > lo)
        covered = np.concatenate([np.arange(lo, hi) for lo, hi in ranges] or [np.zeros(0, int)])
        assert covered.tolist() == list(range(B)), (B, threads)
        groups = max(1, min(threads, B // min_states))
        assert len(seen) <= groups and len({w for _, _, w, _ in seen}) == len(seen)
        if groups > 1:
            assert all(hi - lo >= min(min_states, LANES) for lo, hi in ranges)
            if B >= 2 * LANES * groups:
                assert all(lo % LANES == 0 for lo, _ in ranges)
            assert any(t == threading.get_ident() for *_, t in seen)
    assert C_MIN_STATES_PER_THREAD >= LANES


def test_lanes_follow_the_cpu_and_the_environment():
    """One register of doubles per vector (8 on AVX-512, else 4) unless SPARSEDYN_C_LANES says
    otherwise; a width the units are not generated for is refused, naming the variable."""
    from sparsedyn.backends.c_vector import cpu_flags, native_lanes
    assert native_lanes({}) == (8 if "avx512f" in cpu_flags() else 4)
    assert LANES == native_lanes(os.environ)
    assert native_lanes({"SPARSEDYN_C_LANES": "2"}) == 2
    for bad in ("3", "32", "four", ""):
        with pytest.raises(ValueError, match="SPARSEDYN_C_LANES"):
            native_lanes({"SPARSEDYN_C_LANES": bad})


_OTHER_WIDTH = """
import sys
sys.path.insert(0, {tests!r})
import numpy as np, pinocchio as pin, sparsedyn as sd
from oracles import pin_model, rel_err, to_pin_q
from test_delassus import pin_contact_models
from sparsedyn.backends.c_vector import LANES
from sparsedyn.backends.c_pv_osimr import library
assert LANES == {lanes}
model, pm = sd.load_urdf({path!r}), pin_model({path!r})
pd = pm.createData()
rng = np.random.default_rng(5)
B = 2 * LANES + 3
q = model.random_configuration(rng, batch=B)
v, y = rng.normal(size=(2, B, model.nv))
pq = [to_pin_q(model, pm, x) for x in q]
for kind, given, out, ref in (("inverse_dynamics", "qdd", "tau", pin.rnea),
                              ("forward_dynamics", "tau", "qdd", pin.aba)):
    plan = sd.compile(getattr(sd, kind)(model))
    c, nb = (plan.solve(q, v, backend=b, **{{given: y}})[out] for b in ("c", "numba"))
    assert "full_lanes" in plan.kernel("c")._libs or "outputs_lanes" in plan.kernel("c")._libs
    assert np.array_equal(c, nb), kind
    assert max(rel_err(c[b], ref(pm, pd, pq[b], v[b], y[b])) for b in range(B)) <= 1e-10, kind
mm = sd.compile(sd.mass_matrix(model))
M = mm.solve(q, backend="c")
assert np.array_equal(M, mm.solve(q, backend="numba"))
crba = [pin.crba(pm, pd, x) for x in pq]
assert max(rel_err(M[b], np.triu(crba[b]) + np.triu(crba[b], 1).T) for b in range(B)) <= 1e-10
library()
contacts = [sd.Contact(model.link_names[-1], "3d"), sd.Contact(model.link_names[-3])]
cms, cds = pin_contact_models(pm, contacts)
d = sd.delassus(model, q, contacts)
ref = [pin.computeDelassusMatrix(pm, pd, x, cms, cds, 0.0) for x in pq]
assert max(rel_err(d[b], ref[b]) for b in range(B)) <= 1e-10
for fn, pin_fn, y_of in ((sd.rnea_derivatives, pin.computeRNEADerivatives, y),
                         (sd.aba_derivatives, pin.computeABADerivatives, y)):
    got = fn(model, q, v, y_of, backend="c")
    for b in range(B):
        expect = pin_fn(pm, pd, pq[b], v[b], y_of[b])
        assert all(rel_err(got[k][b], expect[k]) <= 1e-9 for k in range(2)), fn.__name__
print("ok")
"""


def test_the_other_vector_width_gives_the_same_answers():
    """The C units are generated for any LANES: at the width this CPU does not default to (8 on
    AVX2, 4 on AVX-512), on panda, full and partial groups: the plan's vector unit (ID, FD) and
    the mass matrix's equal numba's bit for bit and Pinocchio's rnea / aba / crba, PV-OSIMr's
    Delassus Pinocchio's computeDelassusMatrix, the derivatives' unit Pinocchio's
    computeRNEADerivatives / computeABADerivatives."""
    import subprocess
    import sys
    other = 4 if LANES == 8 else 8
    env = dict(os.environ, SPARSEDYN_C_LANES=str(other))
    script = _OTHER_WIDTH.format(lanes=other, path=robot_urdf("panda"),
                                 tests=os.path.dirname(os.path.abspath(__file__)))
    run = subprocess.run([sys.executable, "-c", script],
                         env=env, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
