"""Plans are safe to call from several Python threads at once (a server, a data loader): one
plan hammered by 8 threads gives, bit for bit, what the same calls give one after another.

Each thread solves its own states (different per thread, so a shared work buffer would mix them)
several times over; the serial reference is computed first by the same plan."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import sensors as S
from sparsedyn.models import humanoid

N_THREADS = 8
ROUNDS = 4


def _hammer(call, inputs):
    """call(*inputs[k]) for every k, from N_THREADS threads at once (each thread owns the k with
    k % N_THREADS == its index), ROUNDS times; returns {k: [results]}."""
    results = {k: [] for k in range(len(inputs))}
    errors = []
    start = threading.Barrier(N_THREADS)

    def work(t):
        try:
            start.wait()
            for _ in range(ROUNDS):
                for k in range(t, len(inputs), N_THREADS):
                    results[k].append(call(*inputs[k]))
        except BaseException as exc:         # reported below: a thread's failure fails the test
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    return results


def _check_bitwise(call, inputs):
    serial = [call(*args) for args in inputs]
    parallel = _hammer(call, inputs)
    for k, ref in enumerate(serial):
        assert len(parallel[k]) == ROUNDS
        for got in parallel[k]:
            for r, g in zip(ref, got):
                assert np.array_equal(r, g), f"input {k}: a concurrent call differs from the serial one"


@pytest.fixture(scope="module")
def model():
    return humanoid()


def _states(model, n, B, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q = model.random_configuration(rng, batch=B)
        out.append((q, rng.normal(size=(B, model.nv)), rng.normal(size=(B, model.nv))))
    return out


@pytest.mark.parametrize("problem", ["id", "fd"])
@pytest.mark.parametrize("threads", [1, 2])
def test_dynamics_plan_from_eight_threads(model, problem, threads):
    make = sd.inverse_dynamics if problem == "id" else sd.forward_dynamics
    plan = sd.compile(make(model, f_ext=["l_sole"]))
    key = "qdd" if problem == "id" else "tau"
    out = "tau" if problem == "id" else "qdd"
    inputs = [(q, v, y, np.random.default_rng(k).normal(size=(q.shape[0], 6)))
              for k, (q, v, y) in enumerate(_states(model, 16, 64))]

    def call(q, v, y, w):
        res = plan.solve(q, v, f_ext={"l_sole": w}, threads=threads, **{key: y})
        return res[out], res["f", "l_sole"]
    _check_bitwise(call, inputs)


@pytest.mark.parametrize("backend", ["c", "numba"])
def test_kernels_copying_inputs_from_eight_threads(model, backend):
    """Without external wrenches the kernels copy plan.solve's inputs as they read them (C on
    an OpenMP team): eight threads, each call split over two threads, the joint-space output
    and an on-demand variable (from the copies) equal the serial calls' bits."""
    plan = sd.compile(sd.forward_dynamics(model))
    inputs = _states(model, 8, 2 * 128 + 17, seed=4)

    def call(q, v, tau):
        res = plan.solve(q, v, tau=tau, threads=2, backend=backend)
        return res["qdd"], res["f", "l_sole"]
    _check_bitwise(call, inputs)


@pytest.mark.parametrize("method", ["exact", "map"])
def test_estimation_plan_from_eight_threads(model, method):
    sensors = [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor"),
               S.ForceTorque("r_foot_ft_sensor")]
    problem = sd.EstimationProblem(model, sensors, unknown_wrenches=["l_foot", "r_foot"])
    if method == "exact" and problem.shape[0] != problem.shape[1]:
        method = "lstsq"
    plan = sd.compile_estimation(problem, method=method)
    inputs = []
    for k, (q, v, a) in enumerate(_states(model, 16, 64, seed=1)):
        truth = S.ground_truth(model, q, v, a)
        readings = {s.name: s.simulate(model, q, v, truth) for s in sensors}
        inputs.append((q, v, readings))

    def call(q, v, readings):
        est = plan.solve(q, v, readings)
        return est["tau"], est.wrench("l_foot"), est.ok
    _check_bitwise(call, inputs)


def test_delassus_from_eight_threads(model):
    feet = [sd.Contact("l_sole", "6d"), sd.Contact("r_sole", "3d")]
    inputs = [(q,) for q, _, _ in _states(model, 16, 32, seed=2)]
    _check_bitwise(lambda q: (sd.delassus(model, q, feet),), inputs)


def test_parallel_launches_are_serialised_where_the_threading_layer_is_not_threadsafe(monkeypatch):
    """numba's workqueue layer aborts on concurrent launches: there (and before the layer is
    known) the guard is a lock; omp and tbb launch freely."""
    import numba

    from sparsedyn.kernels.parallel import parallel_launch
    for layer, locked in (("workqueue", True), ("omp", False), ("tbb", False)):
        monkeypatch.setattr(numba, "threading_layer", lambda layer=layer: layer)
        assert (parallel_launch().lock is not None) is locked

    def unknown():
        raise ValueError("Threading layer is not initialized.")
    monkeypatch.setattr(numba, "threading_layer", unknown)
    assert parallel_launch().lock is not None


def test_a_default_call_never_waits_for_a_busy_core(monkeypatch):
    """threads=None: no more threads than the cores idle at the call (another process on the
    second core made a 2-thread call of 64 states 40x slower than one thread), each with
    MIN_STATES_PER_THREAD states; a count the caller gives is used (capped by the states)."""
    from sparsedyn.kernels import parallel
    idle = parallel.idle_cores()
    import os
    assert idle is None or 0 <= idle <= len(os.sched_getaffinity(0))
    for cores, B, want in ((0, 4096, 1), (1, 4096, 1), (2, 4096, 2), (2, 40, 1), (2, 64, 2),
                           (4, 96, 3)):
        monkeypatch.setattr(parallel, "idle_cores", lambda c=cores: c)
        assert parallel.default_threads(B, 4) == want, (cores, B)
    monkeypatch.setattr(parallel, "idle_cores", lambda: None)    # unknown: numba's count
    assert parallel.default_threads(4096, 2) == 2
    # what Plan.solve and EstimationPlan.solve hand the kernels
    seen = []
    from sparsedyn.problems import base as plan_module       # PlanBase.threads_for
    model = humanoid()
    plan = sd.compile(sd.inverse_dynamics(model))
    real = plan_module.default_threads
    monkeypatch.setattr(plan_module, "default_threads",
                        lambda B, available: seen.append((B, available)) or real(B, available))
    monkeypatch.setattr(parallel, "idle_cores", lambda: 0)
    rng = np.random.default_rng(3)
    q = model.random_configuration(rng, batch=128)
    v, a = rng.normal(size=(2, 128, model.nv))
    ref = plan.solve(q, v, qdd=a, backend="numba", threads=1)["tau"]
    assert np.array_equal(plan.solve(q, v, qdd=a, backend="numba")["tau"], ref)
    assert seen and seen[-1][0] == 128


def test_our_own_spinning_workers_count_as_idle(monkeypatch):
    """OpenMP's workers spin for a while after a region ends and the kernel counts them as
    running: right after a region of ours (none in flight), this process's running threads
    count as idle cores; not later, not while a region is in flight, and not another
    process's threads. A real region leaves a plausible count."""
    import threading

    from sparsedyn.kernels import parallel
    monkeypatch.setattr(parallel, "WORKERS_SPIN_SECONDS", 60.0)  # a slow machine's asserts
    with parallel.ParallelRegion():
        pass
    monkeypatch.setattr(parallel, "runnable", lambda: (2, 2))    # the caller and one more
    monkeypatch.setattr(parallel, "own_running_threads", lambda: 1)
    assert parallel.idle_cores() == 2                             # our worker, spinning
    assert parallel.default_threads(4096, 2) == 2
    monkeypatch.setattr(parallel, "own_running_threads", lambda: 0)
    assert parallel.idle_cores() == 1                             # another process's thread
    monkeypatch.setattr(parallel, "own_running_threads", lambda: 1)
    monkeypatch.setattr(parallel, "_last_end", parallel._last_end - 120.0)
    assert parallel.idle_cores() == 1                             # long after: busy
    entered, leave = threading.Event(), threading.Event()

    def region():
        with parallel.ParallelRegion():
            entered.set()
            leave.wait()
    other = threading.Thread(target=region)
    other.start()
    entered.wait()
    try:
        assert parallel.idle_cores() == 1                         # a region in flight: busy
    finally:
        leave.set()
        other.join()
    assert parallel.idle_cores() == 2                             # it just ended
    monkeypatch.undo()
    import os
    assert 0 <= parallel.own_running_threads() < len(os.listdir("/proc/self/task"))
