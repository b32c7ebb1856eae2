"""A simulated walking log on floating-base iCub, processed online (one sample per call) and
offline (batched), against iDynTree's BERDY on the same samples (issue #17 item 8).

    python experiments/walking_estimation.py [--samples 120] [--rounds 3] [--out PATH]
                                             [--plot PATH]

The log: three cycles of double support, left single support, double support, right single
support (samples in the ratio 2 : 5 : 2 : 5); per sample a random iCub state of moderate accelerations
(tests/pin_sensors.moderate_icub_state: random joint accelerations and contact wrenches, the
base's accelerations from tau_root = 0; a foot in the air has no wrench), read by Pinocchio (tests/pin_sensors.PinTruth): the joints' accelerations,
the six F/T sensors and an IMU on the base (accelerometer + angular accelerometer). Noise at
level 1 (standard deviations): F/T 1 N and 0.05 N m, joint accelerations 0.05 rad/s^2, IMU
0.01 m/s^2 and 0.01 rad/s^2; levels 0, 0.5, 1 and 2 scale it, the covariances stay those of
level 1 (dynamics 1e-8, prior 1e4, as BERDY is usually set).

Ours: one MAP plan compiled once with per_sample=True for both feet; online, plan.solver() (the
C route) with solve.set_sample(contacts=...) when a foot touches down or lifts off; offline,
plan.solve on the whole log with per-row contacts. BERDY_FLOATING_BASE: told each sample's
contact set (unknown-wrench links) and fed the same variances (its measurement covariance per
sensor, the IMU as its base-acceleration prior). Reported per noise level: the RMS error of the
joint torques and of the contact wrenches against the truth, ours and BERDY's; the online and
offline estimates are checked equal (1e-10) before anything is reported; per-sample time of
each route, min over `rounds` interleaved rounds; the load average at the start and the end.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir))
sys.path.insert(0, os.path.join(HERE, os.pardir, "tests"))

from sparsedyn import sensors as S  # noqa: E402
from sparsedyn.estimation import EstimationProblem, compile_estimation  # noqa: E402
from sparsedyn.files import atomic_write  # noqa: E402
from bench_single_state import publish  # noqa: E402

FEET = ["l_foot", "r_foot"]
#: level-1 noise (standard deviations)
FT_STD = np.r_[1.0, 1.0, 1.0, 0.05, 0.05, 0.05]
QDD_STD, ACC_STD, ANGACC_STD = 0.05, 0.01, 0.01
LEVELS = (0.0, 0.5, 1.0, 2.0)


def gait(T, cycles=3):
    """Per-sample contact flags {foot: (T,) bool}: `cycles` steps of double support, left single
    support, double support, right single support, in the ratio 2:5:2:5."""
    phase = (np.arange(T) * 14 * cycles // max(T, 1)) % 14
    left = ~((phase >= 9) & (phase < 14)) | (phase < 2)
    right = ~((phase >= 2) & (phase < 7))
    return {"l_foot": left, "r_foot": right}


def _rms(err):
    return float(np.sqrt(np.mean(np.square(err))))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=120)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "out", "walking_estimation.md"))
    ap.add_argument("--plot", default=os.path.join(HERE, "out", "walking_estimation.png"))
    args = ap.parse_args(argv)
    from berdy_oracle import BerdyOracle
    from oracles import robot_urdf
    from pin_sensors import moderate_icub_state
    from test_floating_base_estimation import _readings_fb
    warnings.simplefilter("ignore")
    load0 = os.getloadavg()
    T = args.samples
    contacts = gait(T)
    model, truth = moderate_icub_state(np.random.default_rng(0), T, FEET, contacts)
    fts = [n for n, f in model.joint_frames.items() if n.endswith("ft_sensor")]
    imu = [S.Accelerometer("base_link"), S.AngularAccelerometer("base_link")]
    problem = EstimationProblem(model, [S.JointAccelerations(base=False)]
                                + [S.ForceTorque(j) for j in fts] + imu, unknown_wrenches=FEET)
    cov = {"dynamics": 1e-8, "base_unactuated": 1e-8, "prior": 1e4, "qdd": QDD_STD ** 2,
           **{j: FT_STD ** 2 for j in fts}, "base_link_acc": ACC_STD ** 2,
           "base_link_angacc": ANGACC_STD ** 2}
    plan = compile_estimation(problem, method="map", covariances=cov, per_sample=True)
    oracle = BerdyOracle(robot_urdf("icub"), floating_base=True,
                         measurement_cov={"ft": FT_STD ** 2, "qdd": QDD_STD ** 2, "default": 1e-8},
                         prior_cov=1e-8, regularization_cov=1e4, unknown_wrench_links=FEET,
                         base_acc_cov=np.r_[[ACC_STD ** 2] * 3, [ANGACC_STD ** 2] * 3])
    clean = _readings_fb(problem, truth)
    q, v = problem.floating_base_state(truth.q[:, 7:], truth.v[:, 6:], truth.v[:, 3:6])
    solve = plan.solver()
    rows, times = [], {"online": [], "offline": [], "berdy": []}
    noise = np.random.default_rng(1)
    std = {"qdd": QDD_STD, **{j: FT_STD for j in fts}, "base_link_acc": ACC_STD,
           "base_link_angacc": ANGACC_STD}
    draws = {k: noise.normal(size=r.shape) * std[k] for k, r in clean.items() if k in std}
    trace = None
    for level in LEVELS:
        readings = {k: r + level * draws[k] if k in draws else r for k, r in clean.items()}
        # a robot fills one preallocated vector per sample, in the solver's readings order
        ys = np.concatenate([readings[name] for name, _ in solve.readings_order], axis=1)

        def online():
            out, last = np.empty((T, problem.shape[1])), None
            for b in range(T):
                now = tuple(bool(contacts[l][b]) for l in FEET)
                if now != last:                           # a foot touches down or lifts off
                    solve.set_sample(contacts=dict(zip(FEET, now)))
                    last = now
                out[b] = solve(q[b], v[b], ys[b])
            return out

        def offline():
            return plan.solve(q, v, readings, contacts=contacts)

        def berdy():
            return [oracle.estimate(truth.q[b, 7:], truth.v[b, 6:], readings["qdd"][b],
                                    ft={j: -readings[j][b] for j in fts},
                                    unknown_wrench_links=[l for l in FEET if contacts[l][b]],
                                    base_omega=truth.v[b, 3:6],
                                    base_acc=np.r_[readings["base_link_acc"][b],
                                                   readings["base_link_angacc"][b]])
                    for b in range(T)]
        x_on, est, theirs = online(), offline(), berdy()
        assert np.abs(x_on - est.vector).max() <= 1e-10 * np.abs(est.vector).max()
        if level == 1.0:
            for _ in range(args.rounds):
                for name, fn in (("online", online), ("offline", offline), ("berdy", berdy)):
                    t0 = time.perf_counter()
                    fn()
                    times[name].append((time.perf_counter() - t0) * 1e6 / T)
        tau_true = truth.tau[:, 6:]
        tau_b = np.array([o["tau"] for o in theirs])
        w_true = np.concatenate([truth.f_ext[l] for l in FEET], axis=1)
        w_ours = np.concatenate([est.wrench(l) for l in FEET], axis=1)
        w_b = np.array([np.concatenate([o["ext_wrenches"][l] if contacts[l][b] else np.zeros(6)
                                        for l in FEET]) for b, o in enumerate(theirs)])
        rows.append((level, _rms(est["tau"][:, 6:] - tau_true), _rms(tau_b - tau_true),
                     _rms(w_ours - w_true), _rms(w_b - w_true), int(est.ok.sum())))
        if level == 1.0:
            trace = (w_true[:, 2], w_ours[:, 2], w_b[:, 2])       # l_foot's f_z
    load1 = os.getloadavg()
    best = {k: min(t) for k, t in times.items()}
    lines = [f"Generated by `python experiments/walking_estimation.py --samples {T} --rounds "
             f"{args.rounds}` on {platform.processor() or platform.machine()}, {os.cpu_count()} "
             f"cores; load average {load0[0]:.2f} at the start, {load1[0]:.2f} at the end. "
             f"Floating-base iCub, {T} samples, contact switches "
             f"{int(np.abs(np.diff(np.stack([contacts[l] for l in FEET]).astype(int), axis=1)).sum())}"
             f"; [D; D_Y] {problem.shape[0]}x{problem.shape[1]}, one per-sample MAP plan.", "",
             "| noise level | tau RMS ours (N m) | tau RMS BERDY (N m) | wrench RMS ours | "
             "wrench RMS BERDY | ok |", "|---|---|---|---|---|---|"]
    for level, to, tb, wo, wb, ok in rows:
        lines.append(f"| {level:g} | {to:.3e} | {tb:.3e} | {wo:.3e} | {wb:.3e} | {ok}/{T} |")
    lines += ["", "| route (noise level 1) | us per sample | ratio to BERDY |", "|---|---|---|"]
    for name, label in (("online", "ours online: plan.solver() (C), set_sample on switches"),
                        ("offline", "ours offline: plan.solve on the whole log (numba)"),
                        ("berdy", "iDynTree BERDY_FLOATING_BASE, update + doEstimate")):
        lines.append(f"| {label} | {best[name]:.1f} | {best[name] / best['berdy']:.4f}x |")
    lines += ["", "Online and offline estimates checked equal (1e-10) at every noise level. "
              "Wrench RMS over both feet's six components (N and N m mixed), zero where a foot "
              "is in the air (ours exactly, BERDY's known-zero wrench at variance 1e-8)."]
    publish(lines, args.out)
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(8, 3.2))
        ax.plot(trace[0], "k-", lw=2, label="truth")
        ax.plot(trace[1], "C0.", ms=4, label="sparsedyn (online = offline)")
        ax.plot(trace[2], "C3x", ms=3, label="BERDY")
        ax.set_xlabel("sample")
        ax.set_ylabel("l_foot f_z (N)")
        ax.set_title("iCub walking log, noise level 1: left-foot vertical force")
        ax.legend(loc="best", fontsize=8)
        fig.tight_layout()
        with atomic_write(args.plot, "wb") as fh:
            fig.savefig(fh, format="png", dpi=110)


if __name__ == "__main__":
    main()
