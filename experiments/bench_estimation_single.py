"""One sample per call (an estimator on a running robot) and batched, on iCub with its six F/T
sensors: sparsedyn's MAP plan against iDynTree's BERDY (BerdySparseMAPSolver, per sample
updateEstimateInformationFixedBase + doEstimate), in the same process.

    python experiments/bench_estimation_single.py [--samples 64] [--batch 1024] [--rounds 7]
                                                  [--out PATH]

Problem (tests/test_estimation.py::test_map_matches_berdy_on_icub_fixed_base): fixed-base iCub,
qdd and the six F/T sensors, the l_foot wrench unknown, Sigma_y 1e-6, Sigma_D 1e-8, Sigma_d 1e4.
Readings are Pinocchio's (tests/pin_sensors.PinTruth) at states of moderate accelerations.
Contestants on the same stored samples, in interleaved rounds (round r runs every contestant
once, in rotating order); min and median per sample over rounds:
  - one sample per call: plan.solver() on the C backend (the MAP route as generated C,
    backends/c_chains.py), plan.solver(backend="numba"), plan.solve with B = 1, BERDY;
  - batched: plan.solve on `batch` states (the samples repeated) with numba on 1 and 2 threads
    and with C on 1 thread.
Answers are checked first: every route of ours against the numba batch (1e-10 relative) and the
contact wrench against BERDY's (1e-7 relative). The load average is printed at the start and
the end.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir))
sys.path.insert(0, os.path.join(HERE, os.pardir, "tests"))

import sparsedyn as sd  # noqa: E402
from sparsedyn import sensors as S  # noqa: E402
from sparsedyn.estimation import EstimationProblem, compile_estimation  # noqa: E402
from bench_single_state import publish, python_per_call  # noqa: E402


def _setting(B, rng):
    """(model, problem, plan, q, v, readings, fts): the problem and B Pinocchio samples."""
    import pinocchio as pin
    from oracles import pin_fext, pin_model, robot_urdf, to_pin_q
    from pin_sensors import PinTruth
    from test_estimation import _readings
    path = robot_urdf("icub")
    model = sd.load_urdf(path)
    pm = pin_model(path)
    fts = [n for n, f in model.joint_frames.items() if n.endswith("ft_sensor")]
    problem = EstimationProblem(model, [S.JointAccelerations()] + [S.ForceTorque(j) for j in fts],
                                unknown_wrenches=["l_foot"])
    cov = {"dynamics": 1e-8, "qdd": 1e-6, "prior": 1e4, **{j: 1e-6 for j in fts}}
    plan = compile_estimation(problem, method="map", covariances=cov, map_form="normal")
    q = model.random_configuration(rng, batch=B)
    v = rng.normal(size=(B, model.nv))
    f_ext = {"l_foot": rng.normal(size=(B, 6)) * 10.0}
    qdd = rng.normal(size=(B, model.nv))
    tau = np.array([pin.rnea(pm, pm.createData(), to_pin_q(model, pm, q[b]), v[b], qdd[b],
                             pin_fext(model, pm, {"l_foot": f_ext["l_foot"][b]}))
                    for b in range(B)])
    truth = PinTruth(model, pm, q, v, tau, f_ext)
    return path, model, problem, plan, q, v, _readings(problem, truth), fts


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default=os.path.join(HERE, "out", "bench_estimation_single.md"))
    args = ap.parse_args(argv)
    from berdy_oracle import BerdyOracle
    warnings.simplefilter("ignore")
    load0 = os.getloadavg()
    B = args.samples
    path, model, problem, plan, q, v, readings, fts = _setting(B, np.random.default_rng(0))
    one = [{k: r[b] for k, r in readings.items()} for b in range(B)]
    c_solve, nb_solve = plan.solver(), plan.solver(backend="numba")
    ys = [np.concatenate([r[name] for name, _ in c_solve.readings_order]) for r in one]
    ref = plan.solve(q, v, readings, backend="numba", threads=1)
    oracle = BerdyOracle(path, floating_base=False, measurement_cov=1e-6, prior_cov=1e-8,
                         regularization_cov=1e4, unknown_wrench_links=["l_foot"])
    ym = [oracle.measurement_vector(r["qdd"], ft={j: -r[j] for j in fts}) for r in one]
    # answers first
    scale = np.abs(ref.vector).max()
    for b in range(B):
        for solve in (c_solve, nb_solve):
            assert np.abs(solve(q[b], v[b], ys[b]) - ref.vector[b]).max() <= 1e-10 * scale
    assert np.abs(plan.solve(q, v, readings, backend="c").vector - ref.vector).max() <= 1e-10 * scale
    berdy_err = 0.0
    for b in range(B):
        out = oracle.estimate(q[b], v[b], one[b]["qdd"], ft={j: -one[b][j] for j in fts},
                              unknown_wrench_links=["l_foot"])
        w = ref.wrench("l_foot")[b]
        berdy_err = max(berdy_err, np.abs(w - out["ext_wrenches"]["l_foot"]).max() / np.abs(w).max())
    assert berdy_err <= 1e-7, berdy_err
    calls = list(zip(q, v, ys))

    def berdy():
        for b in range(B):
            oracle.update(q[b], v[b], ym[b])
            oracle.solver.doEstimate()

    reps = -(-args.batch // B)
    qb, vb = (np.tile(a, (reps, 1))[:args.batch] for a in (q, v))
    rb = {k: np.tile(r, (reps, 1))[:args.batch] for k, r in readings.items()}

    def batched(**kw):
        return lambda: python_per_call(lambda: plan.solve(qb, vb, rb, **kw), [()]) / args.batch
    contestants = {
        "c_solver": lambda: python_per_call(c_solve, calls),
        "numba_solver": lambda: python_per_call(nb_solve, calls),
        "solve_b1": lambda: python_per_call(
            lambda qb, vb, rb: plan.solve(qb, vb, rb, threads=1),
            [(q[b], v[b], one[b]) for b in range(B)]),
        "berdy": lambda: python_per_call(berdy, [()]) / B,
        "batch_numba_1": batched(backend="numba", threads=1),
        "batch_numba_2": batched(backend="numba", threads=2),
        "batch_c_1": batched(backend="c", threads=1),
    }
    for fn in contestants.values():         # warm-up (JIT, C library)
        fn()
    samples = {name: [] for name in contestants}
    names = list(contestants)
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            samples[name].append(contestants[name]())
    load1 = os.getloadavg()
    best = {n: (min(s), float(np.median(s))) for n, s in samples.items()}
    berdy_t = best["berdy"][0]
    rows = [("one sample per call", "sparsedyn plan.solver(), C backend", "c_solver"),
            ("one sample per call", "sparsedyn plan.solver(backend=\"numba\")", "numba_solver"),
            ("one sample per call", "sparsedyn plan.solve, B = 1 (default backend: C once built)", "solve_b1"),
            ("one sample per call", "iDynTree BERDY, update + doEstimate", "berdy"),
            (f"batch of {args.batch}", "sparsedyn plan.solve, numba, 1 thread", "batch_numba_1"),
            (f"batch of {args.batch}", "sparsedyn plan.solve, numba, 2 threads", "batch_numba_2"),
            (f"batch of {args.batch}", "sparsedyn plan.solve, C, 1 thread", "batch_c_1")]
    st = plan.stats
    lines = [f"Generated by `python experiments/bench_estimation_single.py --samples {B} "
             f"--batch {args.batch} --rounds {args.rounds}` on {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores; load average {load0[0]:.2f} at the start, {load1[0]:.2f} "
             f"at the end. Fixed-base iCub, qdd + six F/T, l_foot wrench unknown ([D; D_Y] "
             f"{problem.shape[0]}x{problem.shape[1]}, MAP normal form, {st['map_cost_normal']} "
             f"counted flops per sample); min (median) per sample over {args.rounds} "
             f"interleaved rounds; ratio = min / BERDY's min.", "",
             "| calls | contestant | us per sample | ratio to BERDY |", "|---|---|---|---|"]
    for calls_label, label, key in rows:
        t = best[key]
        lines.append(f"| {calls_label} | {label} | {t[0]:.1f} ({t[1]:.1f}) | "
                     f"{t[0] / berdy_t:.4f}x |")
    lines += ["", f"Answers checked before timing: every sparsedyn route against the numba batch "
              f"(1e-10 relative), the l_foot wrench against BERDY's (max relative difference "
              f"{berdy_err:.1e})."]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
