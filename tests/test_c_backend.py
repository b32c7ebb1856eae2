"""The C backend (sparsedyn.backends.generated_c): plans run as generated C99 against Pinocchio
on published robots, agree with the numba backend on the same IR, flag what must be re-solved,
run in a plain C program without Python (plan.export_c), and serve one state at a time
(plan.solver())."""
import os
import shutil
import subprocess

import numpy as np
import pinocchio as pin
import pytest
from oracles import in_threads, pin_model, rel_err, robot_urdf, singular_rod_model, to_pin_q

import sparsedyn as sd
from sparsedyn.backends import BackendUnavailableError, backend
from sparsedyn.models import HUMANOID_URDF
from test_compiled import mixed_tree

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                                reason="no C compiler")


def _robot(name):
    if name == "humanoid":
        return sd.load_urdf(HUMANOID_URDF, floating_base=True), pin_model(HUMANOID_URDF, True)
    path = robot_urdf(name)
    return sd.load_urdf(path, floating_base=True), pin_model(path, True)


def _pin_f_ext(model, pmodel, link, wrench):
    """Pinocchio's per-joint external forces of one linear-first wrench on `link` (link frame),
    expressed in the joint frame."""
    frame = pmodel.frames[pmodel.getFrameId(link)]
    fext = [pin.Force.Zero() for _ in range(pmodel.njoints)]
    fext[frame.parentJoint] = frame.placement.act(pin.Force(wrench))
    return fext


@pytest.mark.parametrize("name", ["humanoid", "talos"])
def test_c_plans_match_pinocchio_and_numba(name):
    model, pm = _robot(name)
    pd = pm.createData()
    rng = np.random.default_rng(7)
    B = 12
    q = model.random_configuration(rng, batch=B)
    v, y = rng.normal(size=(2, B, model.nv))
    link = model.link_names[-1]
    w = 20.0 * rng.normal(size=(B, 6))
    for kind in ("inverse_dynamics", "forward_dynamics"):
        plan = sd.compile(getattr(sd, kind)(model, f_ext=[link]))
        given = "qdd" if kind == "inverse_dynamics" else "tau"
        out = "tau" if given == "qdd" else "qdd"
        res_c = plan.solve(q, v, f_ext={link: w}, backend="c", outputs="all", **{given: y})
        res_n = plan.solve(q, v, f_ext={link: w}, backend="numba", outputs="all", **{given: y})
        assert rel_err(res_c.vector, res_n.vector) <= 1e-12
        for b in range(B):
            pq = to_pin_q(model, pm, q[b])
            fext = _pin_f_ext(model, pm, link, w[b])
            expect = (pin.rnea(pm, pd, pq, v[b], y[b], fext) if given == "qdd"
                      else pin.aba(pm, pd, pq, v[b], y[b], fext))
            assert rel_err(res_c[out][b], expect) <= 1e-10


def test_c_kernel_flags_what_numba_flags():
    """A state whose static pivot fails (the mass matrix of a rod on its own axis is singular)
    is flagged by both kernels, and the others are not."""
    model = singular_rod_model()
    plan = sd.compile(sd.forward_dynamics(model))
    q, v, tau = np.zeros((4, 2)), np.zeros((4, 2)), np.ones((4, 2))
    flags = {name: plan.kernel(name).run(q, v, tau, threads=1)[2] for name in ("c", "numba")}
    assert flags["c"].all() and np.array_equal(flags["c"], flags["numba"])
    with pytest.raises(sd.SingularModelError):
        plan.solve(q, v, tau=tau, backend="c")


def test_solver_for_one_state_at_a_time():
    model, pm = _robot("humanoid")
    pd = pm.createData()
    rng = np.random.default_rng(2)
    idp = sd.compile(sd.inverse_dynamics(model))
    fdp = sd.compile(sd.forward_dynamics(model))
    f_id, f_fd = idp.solver(), fdp.solver()
    out = np.empty(model.nv)
    for _ in range(5):
        q = model.random_configuration(rng)
        v, a = rng.normal(size=(2, model.nv))
        pq = to_pin_q(model, pm, q)
        tau = f_id(q, v, a)
        assert rel_err(tau, pin.rnea(pm, pd, pq, v, a)) <= 1e-10
        assert f_fd(q, v, tau, out=out) is out
        assert rel_err(out, a) <= 1e-9
    # what the fast path cannot vouch for goes through Plan.solve's checks
    q_bad = model.neutral_configuration()
    q_bad[3:7] = [0.0, 0.0, 0.0, 1.1]
    with pytest.raises(ValueError, match="quaternion of joint"):
        f_id(q_bad, v, a)
    with pytest.raises(ValueError, match="v: non-finite"):
        f_id(q, np.full(model.nv, np.nan), a)
    with pytest.raises(sd.NonFiniteError, match="batch indices"):
        f_id(q, np.full(model.nv, 1e200), a)                 # finite inputs, overflowing b
    with pytest.raises(ValueError, match="qdd"):
        f_id(q, v, a[:3])


def test_solvers_run_concurrently():
    """One solver per thread (each has its own buffers); the plan's kernel is shared."""
    model, _ = _robot("humanoid")
    plan = sd.compile(sd.inverse_dynamics(model))
    rng = np.random.default_rng(4)
    q = model.random_configuration(rng, batch=64)
    v, a = rng.normal(size=(2, 64, model.nv))
    ref = plan.solve(q, v, qdd=a, backend="numpy")["tau"]
    got = np.empty_like(ref)

    def worker(lo, hi):
        f = plan.solver()
        for b in range(lo, hi):
            got[b] = f(q[b], v[b], a[b])
    in_threads(worker, [(k * 16, k * 16 + 16) for k in range(4)])
    assert rel_err(got, ref) <= 1e-12
    assert rel_err(plan.solve(q, v, qdd=a, backend="c", threads=2)["tau"], ref) <= 1e-12


def test_auto_picks_c_for_small_batches_once_built_and_a_missing_compiler_is_named(
        monkeypatch, tmp_path):
    """"auto" never compiles on its own: small batches go to C once its library exists (here
    built by plan.solver()), big ones to numba; without a compiler, to numba."""
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))          # an empty cache
    model, _ = _robot("humanoid")
    plan = sd.compile(sd.inverse_dynamics(model))
    assert plan._fused_backend("auto", 1) == "numba"
    plan.solver()
    assert plan._fused_backend("auto", 1) == "c"
    assert plan._fused_backend("auto", 4096) == "numba"
    monkeypatch.setenv("CC", "no-such-compiler-here")
    assert plan._fused_backend("auto", 1) == "numba"
    with pytest.raises(BackendUnavailableError, match="no C compiler"):
        backend("c")


def test_exported_c_runs_without_python(tmp_path):
    """plan.export_c writes a .c/.h pair that a plain C program, compiled by cc, uses to
    reproduce Pinocchio's torques (1e-10) and accelerations (1e-9, as the other forward
    dynamics tests) stored to a file by this test."""
    model, pm = _robot("humanoid")
    pd = pm.createData()
    rng = np.random.default_rng(9)
    B = 6
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(2, B, model.nv))
    tau = np.array([pin.rnea(pm, pd, to_pin_q(model, pm, q[b]), v[b], a[b]) for b in range(B)])
    qdd = np.array([pin.aba(pm, pd, to_pin_q(model, pm, q[b]), v[b], tau[b]) for b in range(B)])
    sd.compile(sd.inverse_dynamics(model)).export_c(tmp_path, "humanoid_id")
    sd.compile(sd.forward_dynamics(model)).export_c(tmp_path, "humanoid_fd")
    with pytest.raises(FileExistsError):
        sd.compile(sd.forward_dynamics(model)).export_c(tmp_path, "humanoid_fd")
    np.concatenate([q.ravel(), v.ravel(), a.ravel(), tau.ravel(), qdd.ravel()]).tofile(
        tmp_path / "cases.bin")
    nq, nv = model.nq, model.nv
    (tmp_path / "main.c").write_text(f"""
#include <math.h>
#include <stdio.h>
#include "humanoid_id.h"
#include "humanoid_fd.h"
#define B {B}
static double data[B * ({nq} + 4 * {nv})];
static double work_id[HUMANOID_ID_WORK_DOUBLES], work_fd[HUMANOID_FD_WORK_DOUBLES];
static double err(const double *a, const double *b, int n) {{
  double e = 0.0, s = 1.0; int i;
  for (i = 0; i < n; i++) if (fabs(b[i]) > s) s = fabs(b[i]);
  for (i = 0; i < n; i++) if (!(fabs(a[i] - b[i]) / s <= e)) e = fabs(a[i] - b[i]) / s;
  return e;
}}
int main(void) {{
  FILE *f = fopen("cases.bin", "rb");
  double out[{nv}], worst_id = 0.0, worst_fd = 0.0, e; int b;
  if (!f || fread(data, sizeof(double), B * ({nq} + 4 * {nv}), f) != B * ({nq} + 4 * {nv})) return 3;
  fclose(f);
  for (b = 0; b < B; b++) {{
    const double *q = data + b * {nq}, *v = data + B * {nq} + b * {nv};
    const double *a = data + B * ({nq} + {nv}) + b * {nv};
    const double *tau = data + B * ({nq} + 2 * {nv}) + b * {nv};
    const double *qdd = data + B * ({nq} + 3 * {nv}) + b * {nv};
    if (humanoid_id_outputs(q, v, a, out, work_id) != 0) return 4;
    e = err(out, tau, {nv}); if (!(e <= worst_id)) worst_id = e;
    if (humanoid_fd_outputs(q, v, tau, out, work_fd) != 0) return 5;
    e = err(out, qdd, {nv}); if (!(e <= worst_fd)) worst_fd = e;
  }}
  printf("%.3e %.3e\\n", worst_id, worst_fd);
  /* forward dynamics inherits the mass matrix's conditioning: the tolerance of the FD tests */
  return worst_id <= 1e-10 && worst_fd <= 1e-9 ? 0 : 1;
}}
""")
    cc = shutil.which(os.environ.get("CC", "cc"))
    build = subprocess.run([cc, "-O1", "-std=c99", "-o", "main", "main.c", "humanoid_id.c",
                            "humanoid_fd.c", "-lm"], cwd=tmp_path, capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    run = subprocess.run(["./main"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, (run.returncode, run.stdout)


def test_table_driven_programs_equal_straight_line_ones(monkeypatch, tmp_path):
    """Programs above STRAIGHT_LINE_MAX_OPS run from constant tables in a loop (fast to
    compile): same results as numba, the pivot checks and the backward-error check included
    (a generic ordering on the humanoid's forward dynamics)."""
    from sparsedyn.backends import c_source
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(c_source, "STRAIGHT_LINE_MAX_OPS", 0)
    model, _ = _robot("humanoid")
    rng = np.random.default_rng(12)
    q = model.random_configuration(rng, batch=6)
    v, y = rng.normal(size=(2, 6, model.nv))
    for problem, given in ((sd.forward_dynamics(model), "tau"), (sd.inverse_dynamics(model), "qdd")):
        for ordering in ("auto", "colamd"):
            plan = sd.compile(problem, ordering=ordering)
            assert "_ops(w, scale)" in plan.kernel("c").source("outputs")
            res_c = plan.solve(q, v, backend="c", outputs="all", **{given: y})
            res_n = plan.solve(q, v, backend="numba", outputs="all", **{given: y})
            assert rel_err(res_c.vector, res_n.vector) <= 1e-12


def test_auto_lazy_output_never_builds_a_library_the_caller_did_not_ask_for(monkeypatch):
    """backend="auto" with only the "outputs" C library built: tau comes from C, the rest of the
    solution (on first access) from numba like outputs="all" gives it, bit-identical to it, and
    no compiler runs."""
    model = mixed_tree()
    plan = sd.compile(sd.inverse_dynamics(model, f_ext=False))
    kernel = plan.kernel("c")
    kernel.library("outputs")                          # the caller asked for this one before
    monkeypatch.setattr(kernel, "ready", lambda kind: kind == "outputs")
    built = []
    real_library = kernel.library
    monkeypatch.setattr(kernel, "library", lambda kind: built.append(kind) or real_library(kind))
    rng = np.random.default_rng(5)
    q = model.random_configuration(rng, batch=3)
    v, a = rng.normal(size=(2, 3, model.nv))
    lazy = plan.solve(q, v, qdd=a, backend="auto")
    eager = plan.solve(q, v, qdd=a, backend="auto", outputs="all")
    assert np.array_equal(lazy.vector, eager.vector)
    assert set(built) == {"outputs"}
    assert rel_err(lazy["tau"], plan.solve(q, v, qdd=a, backend="numba")["tau"]) <= 1e-13


def test_one_state_on_c_keeps_every_check_and_answer():
    """plan.solve with one state on C (the single-state function, no per-call NumPy checks),
    1-D or a batch of one, equals Pinocchio and the batched path; a non-unit quaternion, NaN
    and a wrong size raise
    the general path's errors naming the argument; f_ext, the lazy full solution and calls
    from several threads give the same answers."""
    model, pm = _robot("humanoid")
    plan = sd.compile(sd.inverse_dynamics(model, f_ext=["l_sole"]), backend="c")
    rng = np.random.default_rng(8)
    q = model.random_configuration(rng, batch=6)
    v, a = rng.normal(size=(2, 6, model.nv))
    w = rng.normal(size=(6, 6))
    batched = plan.solve(q, v, qdd=a, f_ext={"l_sole": w}, backend="numba", outputs="all")
    for b in range(6):
        one = plan.solve(q[b], v[b], qdd=a[b], f_ext={"l_sole": w[b]})
        assert one["tau"].shape == (model.nv,)
        assert rel_err(one["tau"], batched["tau"][b]) <= 1e-12
        assert rel_err(one["a", "l_sole"], batched["a", "l_sole"][b]) <= 1e-12
        ref = pin.rnea(pm, pm.createData(), to_pin_q(model, pm, q[b]), v[b], a[b],
                       _pin_f_ext(model, pm, "l_sole", w[b]))
        assert rel_err(one["tau"], ref) <= 1e-10
    bad = q[0].copy()
    bad[3:7] *= 1.01
    with pytest.raises(ValueError, match="quaternion of joint .* not unit-norm"):
        plan.solve(bad, v[0], qdd=a[0])
    nan_v = v[0].copy()
    nan_v[4] = np.nan
    with pytest.raises(ValueError, match="v: non-finite value"):
        plan.solve(q[0], nan_v, qdd=a[0])
    with pytest.raises(ValueError, match="qdd: expected shape"):
        plan.solve(q[0], v[0], qdd=a[0][:-1])
    # a batch of one, (1, n) arrays: the same function, results with their batch axis
    calls = []
    real = plan._local.state_solver.unchecked
    plan._local.state_solver.unchecked = lambda *args: calls.append(1) or real(*args)
    row = plan.solve(q[2:3], v[2:3], qdd=a[2:3], f_ext={"l_sole": w[2]}, threads=2)
    assert calls and row["tau"].shape == (1, model.nv)
    with pytest.raises(ValueError, match="threads: expected an integer"):
        plan.solve(q[2:3], v[2:3], qdd=a[2:3], threads=0)
    assert rel_err(row["tau"][0], batched["tau"][2]) <= 1e-12
    assert rel_err(row["a", "l_sole"][0], batched["a", "l_sole"][2]) <= 1e-12
    del plan._local.state_solver.unchecked
    with pytest.raises(ValueError, match="v: non-finite value"):
        plan.solve(q[:1], nan_v[None], qdd=a[:1])
    alone = [plan.solve(q[b], v[b], qdd=a[b])["tau"] for b in range(6)]
    seen = {}

    def worker(lo, hi):
        seen[lo] = [(b, plan.solve(q[b], v[b], qdd=a[b])["tau"]) for _ in range(50)
                    for b in range(lo, hi)]
    in_threads(worker, [(0, 3), (3, 6)])
    assert sum(len(r) for r in seen.values()) == 300
    assert all(np.array_equal(t, alone[b]) for r in seen.values() for b, t in r)


def test_folded_assembly_flags_every_non_finite_input():
    """The generated assembly drops products with a plan-time zero (backends/c_fold), which a
    NaN or inf operand would have turned into NaN: a non-finite q or v anywhere, or velocities
    that overflow, still give the re-solve bit on both plans, the kinds with and without the
    whole solution, while the clean states of the same batch solve as numba does."""
    model, _ = _robot("humanoid")
    rng = np.random.default_rng(21)
    q0 = model.random_configuration(rng)
    v0, y0 = rng.normal(size=(2, model.nv))
    revolute = [model.q_slice(i).start for i, j in enumerate(model.joints) if j.nq == 1]
    cases = [(q0, v0)]
    for k in (0, 2, revolute[0], revolute[len(revolute) // 2], revolute[-1]):
        for bad in (np.nan, np.inf, -np.inf):
            q = q0.copy()
            q[k] = bad
            cases.append((q, v0))
    for k in (0, 5, 6, model.nv // 2, model.nv - 1):
        for bad in (np.nan, np.inf, 1e200):
            v = v0.copy()
            v[k] = bad
            cases.append((q0, v))
    q, v = (np.array(c) for c in zip(*cases))
    y = np.tile(y0, (len(cases), 1))
    for problem in (sd.inverse_dynamics(model), sd.forward_dynamics(model)):
        plan = sd.compile(problem)
        for full in (False, True):
            out, _, broken = backend("c").run(plan.kernel("c"), q, v, y, full=full)
            assert not broken[0] and broken[1:].all(), np.flatnonzero(~broken[1:]) + 1
            ref, _, _ = backend("numba").run(plan.kernel("numba"), q[:1], v[:1], y[:1])
            assert rel_err(out[0], ref[0]) <= 1e-12
