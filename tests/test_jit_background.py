"""backend="auto" never waits for numba's JIT (sparsedyn.jit): while a kernel would have
to compile, its compile runs in a background process and the answer comes from the NumPy route.

Each scenario runs in a fresh interpreter whose NUMBA_CACHE_DIR and SPARSEDYN_CACHE_DIR (the C
backend's libraries) are empty directories: a fresh machine, without touching the suite's caches.
A background compile is stopped once seen (jit.stop), to spare the CPU."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

TINY = '''
from numba import njit

@njit(cache=True)
def twice(x):
    return 2.0 * x

def warm():
    twice(1.0)

def broken():
    raise RuntimeError("no compiler today")
'''


def run_fresh(tmp_path, script, resource_warnings=False):
    """Run `script` in a fresh interpreter with an empty numba cache; its stdout (with
    resource_warnings: after checking that it left no file unclosed at exit)."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"),
               SPARSEDYN_CACHE_DIR=str(tmp_path / "c-cache"),
               PYTHONPATH=os.pathsep.join([str(tmp_path), HERE, ROOT]))
    if resource_warnings:
        env["PYTHONWARNINGS"] = "always::ResourceWarning"
    (tmp_path / "tiny_kernels.py").write_text(TINY)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    if resource_warnings:
        assert "ResourceWarning" not in done.stderr, done.stderr[-3000:]
    return done.stdout


def test_a_kernel_compiles_in_a_background_process_and_then_loads_from_the_cache(tmp_path):
    out = run_fresh(tmp_path, """
        import warnings
        import tiny_kernels
        from sparsedyn import jit
        assert not jit.runnable(tiny_kernels.twice)
        assert jit.ready("tiny", (tiny_kernels.twice,), "tiny_kernels:warm") is False
        assert jit.compiling() == ["tiny"]
        assert jit.ready("tiny", (tiny_kernels.twice,), "tiny_kernels:warm") is False   # one start
        assert jit.wait()
        assert jit.ready("tiny", (tiny_kernels.twice,), "tiny_kernels:warm") is True
        assert not tiny_kernels.twice.signatures          # nothing was compiled in this process
        assert tiny_kernels.twice(3.0) == 6.0
        assert tiny_kernels.twice.stats.cache_hits        # ... it came from the cache

        # a background compile that leaves nothing in the cache (here it fails; a cache that
        # cannot be written does the same) is named once, and the caller then compiles in its
        # own process, as numba always did, instead of staying on NumPy
        import numba
        @numba.njit(cache=False)
        def never(x):
            return x
        assert jit.ready("broken", (never,), "tiny_kernels:broken") is False
        jit.wait()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert jit.ready("broken", (never,), "tiny_kernels:broken") is True
            assert jit.ready("broken", (never,), "tiny_kernels:broken") is True
        assert len(caught) == 1 and "no compiler today" in str(caught[0].message), caught
        print("ok")
    """, resource_warnings=True)             # the compiles' logs are closed at exit
    assert out.strip() == "ok"


def test_auto_answers_on_numpy_while_numba_compiles(tmp_path):
    """A first call of every compiled plan kind on a fresh machine: right answers (Pinocchio's),
    from the NumPy route, while the kernels compile in the background."""
    pytest.importorskip("pinocchio")
    out = run_fresh(tmp_path, """
        import numpy as np
        import pinocchio as pin
        from numba.core import event
        import sparsedyn as sd
        from sparsedyn import jit
        from sparsedyn.sensors import ForceTorque, JointAccelerations, ground_truth
        from oracles import pin_twin, rel_err

        class Compiles(event.Listener):        # numba compiling in this process (not a cache load)
            names = []
            def on_start(self, ev):
                self.names.append(ev.data["dispatcher"].py_func.__name__)
            def on_end(self, ev):
                pass
        event.register("numba:compile", Compiles())

        model = sd.models.humanoid()
        pm = pin_twin(model)
        pd = pm.createData()
        rng = np.random.default_rng(7)
        B = 3
        q = model.random_configuration(rng, batch=B)
        v, tau = rng.normal(size=(2, B, model.nv))
        tau[:, :6] = 0.0                                   # the floating base is unactuated
        fd = sd.compile(sd.forward_dynamics(model))
        qdd = fd.solve(q, v, tau=tau)["qdd"]
        assert "the fused ID/FD kernel" in jit.compiling(), jit.compiling()
        jit.stop()
        for b in range(B):
            assert rel_err(qdd[b], pin.aba(pm, pd, q[b], v[b], tau[b])) < 1e-10
        assert np.array_equal(qdd, fd.solve(q, v, tau=tau, backend="numpy")["qdd"])

        M = sd.compile(sd.mass_matrix(model)).solve(q)
        for b in range(B):
            assert rel_err(M[b], pin.crba(pm, pd, q[b])) < 1e-12
        assert "the mass matrix kernel" in jit.compiling(), jit.compiling()
        jit.stop()

        contacts = [sd.Contact("l_sole", "6d"), sd.Contact("r_index_tip", "3d")]
        Lam = sd.delassus(model, q, contacts)             # method "pv-osimr", backend auto
        assert "the PV-OSIMr Delassus kernel" in jit.compiling(), jit.compiling()
        assert np.array_equal(Lam, sd.delassus(model, q, contacts, backend="numpy"))
        jit.stop()
        Lam = sd.delassus(model, q, contacts, method="sparse")
        assert "the assembly and LU kernels" in jit.compiling(), jit.compiling()
        assert rel_err(Lam, sd.delassus(model, q, contacts, method="dense")) < 1e-10
        jit.stop()

        # derivatives: the fused kernel and the tangent kernels both compile in the background
        dq, dv, dtau = fd.solve(q[:1], v[:1], tau=tau[:1], derivatives=True).derivatives
        assert {"the derivative kernels", "the fused ID/FD kernel"} <= set(jit.compiling()), \
            jit.compiling()
        pin.computeABADerivatives(pm, pd, q[0], v[0], tau[0])
        Minv = np.triu(pd.Minv) + np.triu(pd.Minv, 1).T          # (Pinocchio fills one triangle)
        assert rel_err(dq[0], pd.ddq_dq) < 1e-9 and rel_err(dtau[0], Minv) < 1e-9
        jit.stop()

        sensors = [JointAccelerations(), ForceTorque("l_foot_ft_sensor")]
        problem = sd.EstimationProblem(model, sensors, unknown_wrenches=["l_foot"])
        plan = sd.compile_estimation(problem, method="map")
        truth = ground_truth(model, q, v, qdd)
        readings = {s.name: s.simulate(model, q, v, truth) for s in sensors}
        est = plan.solve(q, v, readings)
        assert "the MAP estimation kernel" in jit.compiling(), jit.compiling()
        assert rel_err(est["tau"], tau) < 1e-8
        assert np.array_equal(est["tau"], plan.solve(q, v, readings, backend="numpy")["tau"])
        jit.stop()
        # planning, the plans' checks and every answer above ran without numba's compiler here
        assert Compiles.names == [], Compiles.names
        print("ok")
    """)
    assert out.strip() == "ok"


#: each background compile (sparsedyn.jit_warm) and the kernels the plans' auto checks for it
WARMED = {
    "fused_kernels": ("assemble_numba._fused_serial, assemble_numba._fused_parallel, "
                      "input_copies.copy_checked"),
    "map_kernels": "normal_numba._map_serial, normal_numba._map_parallel",
    "augmented_kernels": "normal_numba._aug_serial, normal_numba._aug_parallel",
    "mass_matrix_kernels": "crba_numba._serial, crba_numba._parallel",
    "pv_osimr_kernels": "pv_osimr_numba._run_serial, pv_osimr_numba._run_parallel",
    "assembly_lu_kernels": "assemble_numba._assemble_range, lu_numba._batch_inner",
    "planner_kernels": "estimate_numba._structure_counts, levels_numba._levels",
    "derivative_kernels": ("tangent_numba.tangent_lanes, lu_multi_rhs.solve_multi_rhs, "
                           "lu_pruned.solve_pruned, lu_pruned_columns.solve_pruned_columns, "
                           "lu_pruned_plan.kept_mask, assemble_numba._assemble_range")}


def test_every_family_has_its_warm_up_function():
    from sparsedyn import jit, jit_warm
    assert sorted(jit.FAMILIES.values()) == sorted(f"sparsedyn.jit_warm:{w}" for w in WARMED)
    assert sorted(f.__name__ for f in jit_warm.ALL) == sorted(WARMED)


@pytest.mark.slow
@pytest.mark.parametrize("warm", sorted(WARMED))
def test_each_background_compile_caches_every_kernel_auto_checks(tmp_path, warm):
    """Each sparsedyn.jit_warm function, run alone on an empty cache, leaves every kernel auto
    checks for it runnable (else, after the background compile, the caller would compile them
    again in its own process, with a warning)."""
    out = run_fresh(tmp_path, f"""
        from sparsedyn import jit, jit_warm
        from sparsedyn.ir import levels_numba
        from sparsedyn.kernels import (assemble_numba, crba_numba, input_copies, lu_multi_rhs,
                                       lu_numba, lu_pruned, lu_pruned_columns, lu_pruned_plan,
                                       normal_numba, pv_osimr_numba, tangent_numba)
        from sparsedyn.planner import estimate_numba
        dispatchers = ({WARMED[warm]})
        assert not any(jit.runnable(d) for d in dispatchers)
        jit.compile_now("sparsedyn.jit_warm:{warm}")      # what the background process runs
        assert all(jit.runnable(d) for d in dispatchers)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_interpreted_twins_compute_what_the_kernels_compute():
    """The planner's passes give the same counts and levels as plain Python (what planning runs
    while they compile) as compiled, on the humanoid's forward dynamics (an estimation plan's
    check runs the interpreted assembly against the NumPy one itself: the fresh-machine test
    above plans one that way)."""
    import scipy.sparse as sp
    import sparsedyn as sd
    from sparsedyn import jit
    from sparsedyn.ir import levels_numba
    from sparsedyn.kernels.assemble_numba import _assemble_range
    from sparsedyn.planner import estimate_numba
    plan = sd.compile(sd.forward_dynamics(sd.models.humanoid()))
    p = plan.factorization.program
    B = sp.csc_matrix(plan.system.pattern)[p.row_perm][:, p.col_perm].tocsc()
    args = (B.shape[0], B.indptr.astype(np.int64), B.indices.astype(np.int64), 2 ** 40)
    compiled = estimate_numba._structure_counts(*args)
    twin = jit.interpreted(estimate_numba._structure_counts)(*args)
    assert compiled[0] == twin[0] == 0 and all(np.array_equal(a, b) for a, b in
                                                zip(compiled[1:], twin[1:]))
    assert compiled[1].sum() > 0                      # the forward dynamics fill in
    ops = (p.op_code, p.op_t, p.op_a, p.op_b)
    stage = np.zeros(len(p.op_code), dtype=np.int64)
    lv_args = (*(np.ascontiguousarray(x, dtype=np.int64) for x in ops), stage, int(p.n_slots),
               levels_numba.READS_T, levels_numba.READS_A, levels_numba.READS_B)
    levels = levels_numba._levels(*lv_args)
    assert np.array_equal(levels, jit.interpreted(levels_numba._levels)(*lv_args))
    assert levels.max() > 10
    assert jit.interpreted(_assemble_range) is jit.interpreted(_assemble_range)   # built once


def test_interpreted_count_hands_an_undecided_candidate_to_the_compiled_counter(monkeypatch):
    """While the counter compiles, the interpreter counts a few steps at most; a candidate it
    cannot decide in them is counted by the compiled kernel, with the same result."""
    import sparsedyn as sd
    from sparsedyn import jit
    from sparsedyn.planner import estimate_numba
    plan = sd.compile(sd.forward_dynamics(sd.models.humanoid()))
    p = plan.factorization.program
    expected = estimate_numba.estimate(plan.system.pattern, p.row_perm, p.col_perm, np.inf)
    used = []
    twin = jit.interpreted(estimate_numba._structure_counts)
    monkeypatch.setattr(jit, "runnable_now", lambda key, d: used.append(key) or twin)
    monkeypatch.setattr(estimate_numba, "INTERPRETED_STEPS", 10)
    assert estimate_numba.estimate(plan.system.pattern, p.row_perm, p.col_perm, np.inf) == expected
    assert used == ["the planner's kernels"] and expected[0] > 0
