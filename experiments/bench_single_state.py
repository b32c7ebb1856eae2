"""One state per call (a control loop) on the embedded humanoid: sparsedyn's plans through the C
backend against Pinocchio's own C++, both called from C/C++, and both called from Python.

    python experiments/bench_single_state.py [--states 256] [--rounds 15] [--out PATH]

Contestants, on the same stored random states, in interleaved rounds (round r runs every
contestant once, in rotating order), min and median per call over rounds:
  - Pinocchio C++ (experiments/peers/pin_single.cpp, built by g++ against the pin wheel's own
    headers and libraries and Debian's Eigen headers (libeigen3-dev), -O3 -march=native; the
    model handed over with Pinocchio's own serialization): rnea, aba per call;
  - sparsedyn exported C (plan.export_c, experiments/peers/sd_single.c, built with the flags its
    header recommends and -march=native): ID and FD plans per call;
  - from Python: plan.solver() (C backend, buffers bound once), plan.solve with B = 1 (backend
    "auto"), and pinocchio.rnea / pinocchio.aba per call.
Every contestant's results are checked against Pinocchio before its time is reported. The load
average is printed at the start and the end. Builds are cached in ~/.cache/sparsedyn/peers.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir))

import pinocchio as pin  # noqa: E402

import sparsedyn as sd  # noqa: E402
from sparsedyn.backends.generated_c import EXPORT_FLAGS  # noqa: E402
from sparsedyn.files import atomic_write  # noqa: E402
from sparsedyn.models import HUMANOID_URDF  # noqa: E402

PIN_FLAGS = ["-std=c++17", "-O3", "-march=native", "-DNDEBUG", "-DBOOST_MPL_LIMIT_LIST_SIZE=30",
             "-DBOOST_MPL_LIMIT_VECTOR_SIZE=30", "-DBOOST_MPL_CFG_NO_PREPROCESSED_HEADERS",
             "-DBOOST_FUSION_INVOKE_MAX_ARITY=12"]


def cache_dir():
    path = os.path.join(os.path.expanduser("~"), ".cache", "sparsedyn", "peers")
    os.makedirs(path, exist_ok=True)
    return path


def build(cmd_tail, sources, name, headers=()):
    """Compile `sources` with the command tail into a cached binary keyed by their content and
    that of the `headers` they include."""
    key = hashlib.sha256("\0".join(cmd_tail + [open(s).read() for s in (*sources, *headers)])
                         .encode())
    exe = os.path.join(cache_dir(), f"{name}_{key.hexdigest()[:16]}")
    if not os.path.exists(exe):
        tmp = exe + f".tmp{os.getpid()}"
        proc = subprocess.run(cmd_tail[:1] + ["-o", tmp] + sources + cmd_tail[1:],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"building {name} failed:\n{proc.stderr[-3000:]}")
        os.replace(tmp, exe)
    return exe


def build_pinocchio(source="pin_single.cpp", headers=()):
    """experiments/peers/<source> (including experiments/peers/<headers>) built against the pin
    wheel's headers and libraries."""
    # the wheel keeps the Python package under <prefix>/lib/python3.X/site-packages/pinocchio
    prefix = os.path.normpath(os.path.join(os.path.dirname(pin.__file__), *[os.pardir] * 4))
    cxx = shutil.which("g++") or shutil.which("c++")
    tail = [cxx] + PIN_FLAGS + [f"-I{prefix}/include", "-I/usr/include/eigen3",
                                f"-L{prefix}/lib", f"-Wl,-rpath,{prefix}/lib",
                                "-lpinocchio_default", "-lboost_serialization"]
    return build(tail, [os.path.join(HERE, "peers", source)], source.rsplit(".", 1)[0],
                 [os.path.join(HERE, "peers", h) for h in headers])


def build_exported(id_plan, fd_plan, model, folder):
    id_plan.export_c(folder, "plan_id", overwrite=True)
    fd_plan.export_c(folder, "plan_fd", overwrite=True)
    cc = shutil.which(os.environ.get("CC", "cc"))
    tail = [cc, *EXPORT_FLAGS.split(), "-march=native", f"-I{folder}",     # as the header says
            f"-DSD_NQ={model.nq}", f"-DSD_NV={model.nv}", "-lm"]
    return build(tail, [os.path.join(HERE, "peers", "sd_single.c"),
                        os.path.join(folder, "plan_id.c"), os.path.join(folder, "plan_fd.c")],
                 "sd_single")


def pin_q(model, pmodel, q):
    """Our q -> Pinocchio's (continuous joints: cos, sin)."""
    out = np.zeros(pmodel.nq)
    for i, joint in enumerate(model.joints):
        pj = pmodel.joints[pmodel.getJointId(joint.name)]
        qi = q[model.q_slice(i)]
        out[pj.idx_q:pj.idx_q + pj.nq] = ((np.cos(qi[0]), np.sin(qi[0])) if pj.nq == 2 and
                                          joint.nq == 1 else qi)
    return out


def parse(text):
    """{'rnea': (min, median), ...} of the C/C++ programs' output."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out[parts[0]] = tuple(float(x) for x in parts[1:])
    return out


def python_per_call(fn, calls):
    t0 = time.perf_counter()
    for args in calls:
        fn(*args)
    return (time.perf_counter() - t0) * 1e6 / len(calls)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--states", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--out", default=os.path.join(HERE, "out", "bench_single_state.md"))
    args = ap.parse_args(argv)
    load0 = os.getloadavg()
    model = sd.load_urdf(HUMANOID_URDF, floating_base=True)
    pmodel = pin.buildModelFromUrdf(HUMANOID_URDF, pin.JointModelFreeFlyer())
    pdata = pmodel.createData()
    rng = np.random.default_rng(0)
    B = args.states
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(2, B, model.nv))
    pq = np.array([pin_q(model, pmodel, qb) for qb in q])
    tau = np.array([pin.rnea(pmodel, pdata, pq[b], v[b], a[b]) for b in range(B)])
    id_plan = sd.compile(sd.inverse_dynamics(model))
    fd_plan = sd.compile(sd.forward_dynamics(model))
    with tempfile.TemporaryDirectory() as folder:
        ours = np.concatenate([q, v, a, tau], axis=1)
        theirs = np.concatenate([pq, v, a, tau], axis=1)
        ours.tofile(os.path.join(folder, "ours.bin"))
        theirs.tofile(os.path.join(folder, "theirs.bin"))
        pmodel.saveToBinary(os.path.join(folder, "model.bin"))
        pin_exe = build_pinocchio()
        sd_exe = build_exported(id_plan, fd_plan, model, folder)
        f_id, f_fd = id_plan.solver(), fd_plan.solver()
        # every contestant's answers checked first
        scale = max(1.0, np.abs(tau).max())
        assert np.abs(np.array([f_id(q[b], v[b], a[b]) for b in range(B)]) - tau).max() <= 1e-10 * scale
        assert np.abs(np.array([f_fd(q[b], v[b], tau[b]) for b in range(B)]) - a).max() <= 1e-8 * max(1, np.abs(a).max())
        assert np.abs(id_plan.solve(q[:1], v[:1], qdd=a[:1])["tau"] - tau[:1]).max() <= 1e-10 * scale
        contestants = {
            "Pinocchio C++": lambda: parse(subprocess.run(
                [pin_exe, os.path.join(folder, "model.bin"), os.path.join(folder, "theirs.bin"),
                 str(B), "5"],
                capture_output=True, text=True, check=True).stdout),
            "sparsedyn exported C": lambda: parse(subprocess.run(
                [sd_exe, os.path.join(folder, "ours.bin"), str(B), "5"],
                capture_output=True, text=True, check=True).stdout),
            "py solver()": lambda: {
                "id": (python_per_call(f_id, list(zip(q, v, a))),),
                "fd": (python_per_call(f_fd, list(zip(q, v, tau))),)},
            "py plan.solve B=1": lambda: {
                "id": (python_per_call(lambda x, y, z: id_plan.solve(x, y, qdd=z),
                                       list(zip(q[:64], v[:64], a[:64]))),),
                "fd": (python_per_call(lambda x, y, z: fd_plan.solve(x, y, tau=z),
                                       list(zip(q[:64], v[:64], tau[:64]))),)},
            "py pinocchio": lambda: {
                "rnea": (python_per_call(lambda x, y, z: pin.rnea(pmodel, pdata, x, y, z),
                                         list(zip(pq, v, a))),),
                "aba": (python_per_call(lambda x, y, z: pin.aba(pmodel, pdata, x, y, z),
                                        list(zip(pq, v, tau))),)},
        }
        checks = parse(subprocess.run([pin_exe, os.path.join(folder, "model.bin"),
                                       os.path.join(folder, "theirs.bin"), str(B), "1"],
                                      capture_output=True, text=True, check=True).stdout)["err"]
        ours_err = parse(subprocess.run([sd_exe, os.path.join(folder, "ours.bin"), str(B), "1"],
                                        capture_output=True, text=True, check=True).stdout)["err"]
        assert checks[0] <= 1e-9 * scale and ours_err[0] <= 1e-9 * scale
        samples = {name: {} for name in contestants}
        names = list(contestants)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                for key, vals in contestants[name]().items():
                    if key in ("rnea", "aba", "id", "fd"):
                        samples[name].setdefault(key, []).append(vals[0])
    load1 = os.getloadavg()
    best = {n: {k: (min(s), float(np.median(s))) for k, s in d.items()} for n, d in samples.items()}
    pin_id, pin_fd = best["Pinocchio C++"]["rnea"], best["Pinocchio C++"]["aba"]
    rows = [("sparsedyn exported C, called from C", "id", "fd"),
            ("sparsedyn plan.solver() (C backend), from Python", "id", "fd"),
            ("sparsedyn plan.solve, B = 1, from Python", "id", "fd"),
            ("Pinocchio C++, called from C++", "rnea", "aba"),
            ("Pinocchio from Python (pin.rnea / pin.aba)", "rnea", "aba")]
    keys = ["sparsedyn exported C", "py solver()", "py plan.solve B=1", "Pinocchio C++",
            "py pinocchio"]
    lines = [f"Generated by `python experiments/bench_single_state.py --states {B} --rounds "
             f"{args.rounds}` on {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores; load average {load0[0]:.2f} at the start, "
             f"{load1[0]:.2f} at the end. Embedded humanoid (nv = {model.nv}), one state per "
             f"call over {B} stored states, min (median) per call over {args.rounds} interleaved "
             f"rounds; ratio = min / Pinocchio C++'s min.", "",
             "| contestant | ID us per call | ratio | FD us per call | ratio |",
             "|---|---|---|---|---|"]
    for (label, kid, kfd), key in zip(rows, keys):
        i, f = best[key][kid], best[key][kfd]
        lines.append(f"| {label} | {i[0]:.2f} ({i[1]:.2f}) | {i[0] / pin_id[0]:.2f}x | "
                     f"{f[0]:.2f} ({f[1]:.2f}) | {f[0] / pin_fd[0]:.2f}x |")
    lines += ["", f"Answers checked before timing: exported C and Pinocchio C++ against the "
              f"stored Pinocchio torques (max error {ours_err[0]:.1e} / {checks[0]:.1e} N m), the "
              f"Python paths against them to 1e-10 (ID) and 1e-8 (FD, relative)."]
    publish(lines, args.out)


def publish(lines, path):
    """Print a report and write it to `path` atomically (an interrupted run leaves the old)."""
    text = "\n".join(lines) + "\n"
    print(text)
    with atomic_write(path, "w") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
