"""Peers side by side on the embedded humanoid (free-flyer, nv = 49): inverse dynamics (ID),
forward dynamics (FD) and the mass matrix (CRBA) at a big batch and one state per call, with
ratios against Pinocchio's own C++ per call, and the achieved GFLOP/s of our plans next to the
core's measured FMA peak.

    python experiments/bench_peers.py [--batch 4096] [--single-states 256] [--rounds 9] [--out PATH]

One process, interleaved rounds (round r runs every contestant once, in rotating order), min and
median per state over rounds; the load average is printed at the start and the end.
Contestants, on the same stored random states:
  - Pinocchio C++ (experiments/peers/pin_peers.cpp, g++ against the pin wheel's headers and
    libraries and Debian's Eigen, -O3 -march=native -fopenmp; the model handed over with
    saveToBinary): rnea, aba, crba per call over the batch, and rneaInParallel / abaInParallel
    (ModelPool) on the batch with 1 and 2 threads ("unavailable" with the reason if they do not
    build);
  - MuJoCo (the URDF through MjSpec, a free joint added to its root body; constraints, contacts,
    springs and dampers disabled): per state from Python, ID = mj_kinematics + mj_comPos +
    mj_comVel + mj_rne, FD = mj_forward (more than ABA: it also runs the position/velocity
    stages, actuation and sensors), CRBA = mj_kinematics + mj_comPos + mj_crb + mj_fullM; and
    mujoco.rollout (one mj_step per state: mj_forward plus the Euler update) on 1 and 2 threads;
  - sparsedyn: compiled ID / FD plans, plan.solve on the batch (numba on 1 and 2 threads, C),
    plan.solver() (C) and plan.solve with B = 1 per state; CRBA by the compiled mass matrix plan
    (sd.compile(sd.mass_matrix(model)).solve: numba on 1 and 2 threads into a fresh (B, nv, nv)
    array, into a caller's buffer (out=), and packed = only the nonzeros of M's lower triangle;
    and B = 1 per call) and by sd.crba (NumPy, batched);
  - Pinocchio from Python (pin.rnea / pin.aba / pin.crba per call).
States reach MuJoCo through sparsedyn's converters (to_mujoco_q / _v / _a / _tau on the model
sd.from_mujoco gives, joints matched by name). Every contestant's answers are checked against
Pinocchio's (ID to 1e-8 relative) before its time is reported. Builds are cached in
~/.cache/sparsedyn/peers.
"""
from __future__ import annotations

import argparse
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
sys.path.insert(0, HERE)

import pinocchio as pin  # noqa: E402

import sparsedyn as sd  # noqa: E402
from bench_single_state import PIN_FLAGS, build, parse, publish  # noqa: E402
from sparsedyn.backends.c_mass_matrix import crba_statements  # noqa: E402
from sparsedyn.backends.c_vector import LANES, cpu_vectors  # noqa: E402,F401 (bench_contacts)
from sparsedyn.models import HUMANOID_URDF  # noqa: E402

THREADS = (1, 2)


def build_pinocchio_peers():
    """(executable, None) with the parallel algorithms, or (executable, reason) without them."""
    prefix = os.path.normpath(os.path.join(os.path.dirname(pin.__file__), *[os.pardir] * 4))
    cxx = shutil.which("g++") or shutil.which("c++")
    base = [cxx] + PIN_FLAGS + [f"-I{prefix}/include", "-I/usr/include/eigen3",
                                f"-L{prefix}/lib", f"-Wl,-rpath,{prefix}/lib",
                                "-lpinocchio_default", "-lboost_serialization"]
    src = [os.path.join(HERE, "peers", "pin_peers.cpp")]
    if not os.path.exists(os.path.join(prefix, "include", "pinocchio", "algorithm", "parallel",
                                       "aba.hpp")):
        reason = "the pin wheel ships no pinocchio/algorithm/parallel headers"
    else:
        try:
            return build(base[:1] + ["-fopenmp"] + base[1:], src, "pin_peers"), None
        except RuntimeError as err:
            lines = [ln for ln in str(err).splitlines() if "error" in ln]
            reason = "build with -fopenmp failed: " + (lines[0][-200:] if lines else "see g++")
    reason_c = reason.replace('"', "'")
    return build(base + ["-DSD_NO_PARALLEL", f'-DSD_NO_PARALLEL_REASON="{reason_c}"'], src,
                 "pin_peers_serial"), reason


def fma_peak():
    """The core's double-precision FMA peak in GFLOP/s (experiments/peers/fma_peak.c)."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    exe = build([cc, "-O3", "-march=native"], [os.path.join(HERE, "peers", "fma_peak.c")],
                "fma_peak")
    return parse(subprocess.run([exe], capture_output=True, text=True, check=True).stdout)[
        "gflops"][0]


def mujoco_model():
    """(MjModel with a free root, None) or (None, why not)."""
    try:
        import mujoco
    except ImportError as err:
        return None, f"mujoco does not import ({err})"
    try:
        spec = mujoco.MjSpec.from_file(HUMANOID_URDF)
        spec.worldbody.first_body().add_freejoint()
        m = spec.compile()
    except Exception as err:   # noqa: BLE001 -- reported in the output
        return None, f"the URDF does not load in MuJoCo: {err}"
    D = mujoco.mjtDisableBit
    for bit in ("mjDSBL_CONSTRAINT", "mjDSBL_CONTACT", "mjDSBL_SPRING", "mjDSBL_DAMPER",
                "mjDSBL_ACTUATION", "mjDSBL_FRICTIONLOSS", "mjDSBL_LIMIT"):
        if hasattr(D, bit):
            m.opt.disableflags |= int(getattr(D, bit))
    return m, None


def per_state(fn, n):
    t0 = time.perf_counter()
    for b in range(n):
        fn(b)
    return (time.perf_counter() - t0) * 1e6 / n


def timed(fn, n):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e6 / n


def load_average(when):
    """os.getloadavg(), printed ("load average at the <when>: ...")."""
    load = os.getloadavg()
    print(f"load average at the {when}: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", flush=True)
    return load


def start(argv, doc, out_name, single_states):
    """The peer benchmarks' command line (--batch, --single-states, --rounds, --out) and start:
    (args, B, S states per call one at a time, thread counts numba allows, load average)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=4096)
    ap.add_argument("--single-states", type=int, default=single_states)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--out", default=os.path.join(HERE, "out", out_name))
    args = ap.parse_args(argv)
    load0 = load_average("start")
    import numba
    threads = tuple(t for t in THREADS if t <= numba.config.NUMBA_NUM_THREADS)
    return args, args.batch, min(args.single_states, args.batch), threads, load0


def humanoid_states(B):
    """The embedded humanoid (ours, Pinocchio's model and data) and B random states (seed 0):
    q (ours), v, a, q in Pinocchio's layout, tau = Pinocchio's RNEA(q, v, a)."""
    model = sd.load_urdf(HUMANOID_URDF, floating_base=True)
    pmodel = pin.buildModelFromUrdf(HUMANOID_URDF, pin.JointModelFreeFlyer())
    pdata = pmodel.createData()
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(2, B, model.nv))
    pq = sd.to_pinocchio_q(model, q, pmodel)
    tau = np.array([pin.rnea(pmodel, pdata, pq[b], v[b], a[b]) for b in range(B)])
    return model, pmodel, pdata, q, v, a, pq, tau


def interleaved(contestants, rounds):
    """{(contestant, problem): [us per state, one per round]} of contestants {name: () ->
    {(name, problem): us per state}}: a warm-up call of each (numba threads, pools, caches),
    then rounds running every contestant once, round r starting at the r-th (rotating order)."""
    for fn in contestants.values():
        fn()
    samples = {}
    names = list(contestants)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            for key, val in contestants[name]().items():
                samples.setdefault(key, []).append(val)
        print(f"round {r + 1}/{rounds} done", flush=True)
    return samples


def main(argv=None):
    args, B, S, threads, load0 = start(argv, __doc__, "bench_peers.md", 256)
    model, pmodel, pdata, q, v, a, pq, tau = humanoid_states(B)
    M_pin = np.array(pin.crba(pmodel, pdata, pq[0]))
    M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
    id_plan = sd.compile(sd.inverse_dynamics(model))
    fd_plan = sd.compile(sd.forward_dynamics(model))
    f_id, f_fd = id_plan.solver(), fd_plan.solver()
    scale, ascale = max(1.0, np.abs(tau).max()), max(1.0, np.abs(a).max())

    def close(x, ref, tol, what):
        err = np.abs(np.asarray(x) - ref).max() / max(1.0, np.abs(ref).max())
        assert err <= tol, f"{what}: relative error {err:.1e} above {tol:g}"
        return err

    errors = {}
    # ---- sparsedyn, checked against Pinocchio
    for backend in ("numba", "c"):
        errors[f"sd ID {backend}"] = close(id_plan.solve(q, v, qdd=a, backend=backend)["tau"],
                                           tau, 1e-10, f"ID plan ({backend})")
        errors[f"sd FD {backend}"] = close(fd_plan.solve(q, v, tau=tau, backend=backend)["qdd"],
                                           a, 1e-8, f"FD plan ({backend})")
    close(np.array([f_id(q[b], v[b], a[b]) for b in range(S)]), tau[:S], 1e-10, "ID solver()")
    close(np.array([f_fd(q[b], v[b], tau[b]) for b in range(S)]), a[:S], 1e-8, "FD solver()")
    errors["sd crba"] = close(sd.crba(model, q[:1])[0], M_pin, 1e-10, "sd.crba")
    mm_plan = sd.compile(sd.mass_matrix(model))
    M_buf = np.empty((B, model.nv, model.nv))
    rows_p, cols_p = mm_plan.pairs
    errors["sd mass_matrix"] = close(mm_plan.solve(q[0]), M_pin, 1e-10, "mass_matrix plan")
    errors["sd mass_matrix packed"] = close(mm_plan.solve(q[:1], packed=True)[0],
                                            M_pin[rows_p, cols_p], 1e-10, "mass_matrix packed")
    # the C backend's libraries built here (auto then runs C): batches and one state per call
    f_mm = mm_plan.solver()
    errors["sd mass_matrix c"] = close(mm_plan.solve(q[:9], backend="c")[0], M_pin, 1e-10,
                                       "mass_matrix plan, C")
    errors["sd mass_matrix solver"] = close(f_mm(q[0]), M_pin, 1e-10, "mass_matrix solver()")
    M_packed = np.empty((B, mm_plan.n_pairs))

    # ---- MuJoCo
    mj, mj_why = mujoco_model()
    mj_ok = mj is not None
    if mj_ok:
        import mujoco
        import mujoco.rollout
        md = mujoco.MjData(mj)
        mmodel = sd.from_mujoco(mj)
        ours = {j.name: i for i, j in enumerate(model.joints)}
        qperm, vperm = [], []
        for j in mmodel.joints:
            i = ours[j.name] if j.kind != "free" else next(
                k for k, jj in enumerate(model.joints) if jj.kind == "free")
            qperm += list(range(model.nq)[model.q_slice(i)])
            vperm += list(range(model.nv)[model.v_slice(i)])
        assert mmodel.nv == model.nv and sorted(vperm) == list(range(model.nv)), "joint mismatch"
        mq = q[:, qperm]
        qpos = sd.to_mujoco_q(mmodel, mq)
        qvel = sd.to_mujoco_v(mmodel, mq, v[:, vperm])
        qacc = sd.to_mujoco_a(mmodel, mq, v[:, vperm], a[:, vperm])
        qfrc = sd.to_mujoco_tau(mmodel, mq, tau[:, vperm])
        mj_out = np.zeros(mj.nv)
        mj_M = np.zeros((mj.nv, mj.nv))

        def mj_id(b):
            md.qpos[:], md.qvel[:], md.qacc[:] = qpos[b], qvel[b], qacc[b]
            mujoco.mj_kinematics(mj, md)
            mujoco.mj_comPos(mj, md)
            mujoco.mj_comVel(mj, md)
            mujoco.mj_rne(mj, md, 1, mj_out)

        def mj_fd(b):
            md.qpos[:], md.qvel[:], md.qfrc_applied[:] = qpos[b], qvel[b], qfrc[b]
            mujoco.mj_forward(mj, md)

        def mj_crba(b):
            md.qpos[:] = qpos[b]
            mujoco.mj_kinematics(mj, md)
            mujoco.mj_comPos(mj, md)
            mujoco.mj_crb(mj, md)
            if hasattr(md, "qM"):                          # MuJoCo 3: mj_fullM(m, dst, qM)
                mujoco.mj_fullM(mj, mj_M, md.qM)
            else:                                          # MuJoCo 4: mj_fullM(m, d, dst)
                mujoco.mj_fullM(mj, md, mj_M)

        got = []
        for b in range(S):
            mj_id(b)
            got.append(sd.from_mujoco_tau(mmodel, qpos[b], mj_out))
        errors["mj ID"] = close(np.array(got), tau[:S, vperm], 1e-8, "MuJoCo mj_rne")
        got = []
        for b in range(S):
            mj_fd(b)
            got.append(sd.from_mujoco_a(mmodel, qpos[b], qvel[b], md.qacc))
        errors["mj FD"] = close(np.array(got), a[:S, vperm], 1e-8, "MuJoCo mj_forward")
        mj_crba(0)
        T = sd.from_mujoco_v(mmodel, np.broadcast_to(qpos[0], (mj.nv, mj.nq)), np.eye(mj.nv))
        MT = M_pin[np.ix_(vperm, vperm)] @ T.T                 # M T, T's columns T e_j
        M_ref = sd.to_mujoco_tau(mmodel, np.broadcast_to(mq[0], (mj.nv, model.nq)), MT.T).T
        errors["mj CRBA"] = close(mj_M, M_ref, 1e-8, "MuJoCo mj_crb / mj_fullM")
        # rollout: one mj_step per state from (qpos, qvel) with qfrc_applied as the control
        spec_state = int(mujoco.mjtState.mjSTATE_FULLPHYSICS)
        spec_ctrl = int(mujoco.mjtState.mjSTATE_QFRC_APPLIED)
        nstate = mujoco.mj_stateSize(mj, spec_state)
        init = np.zeros((B, nstate))
        for b in range(B):
            md.qpos[:], md.qvel[:] = qpos[b], qvel[b]
            md.time = 0.0
            mujoco.mj_getState(mj, md, init[b], spec_state)
        ctrl = qfrc[:, None, :].copy()
        roll_data = [mujoco.MjData(mj) for _ in range(max(threads))]
        out_state = np.zeros((B, 1, nstate))

        def rollout(nt):
            mujoco.rollout.rollout(mj, roll_data[:nt] if nt > 1 else roll_data[0], init, ctrl,
                                   control_spec=spec_ctrl, nstep=1, state=out_state,
                                   persistent_pool=True)
        rollout(1)
        vel0 = 1 + mj.nq                                       # time, qpos, qvel, ...
        acc = (out_state[:, 0, vel0:vel0 + mj.nv] - qvel) / mj.opt.timestep
        errors["mj rollout"] = close(
            sd.from_mujoco_a(mmodel, qpos, qvel, acc), a[:, vperm], 1e-8, "MuJoCo rollout")

    # ---- Pinocchio C++ (built, checked)
    pin_exe, par_why = build_pinocchio_peers()
    peak = fma_peak()
    folder = tempfile.mkdtemp(prefix="bench_peers_")
    try:
        np.concatenate([pq, v, a, tau], axis=1).tofile(os.path.join(folder, "theirs.bin"))
        pmodel.saveToBinary(os.path.join(folder, "model.bin"))
        cpp_cmd = [pin_exe, os.path.join(folder, "model.bin"), os.path.join(folder, "theirs.bin"),
                   str(B)]
        first = parse(subprocess.run(cpp_cmd + ["1"] + [str(t) for t in threads],
                                     capture_output=True, text=True, check=True).stdout)
        for key, val in first.items():
            if key.startswith("err_"):
                ref = ascale if "aba" in key else scale
                assert val[0] <= 1e-8 * ref, f"Pinocchio C++ {key} = {val[0]:.1e}"
                errors["pin C++ " + key[4:]] = val[0] / ref

        def cpp():
            out = parse(subprocess.run(cpp_cmd + ["3"] + [str(t) for t in threads],
                                       capture_output=True, text=True, check=True).stdout)
            res = {("pin C++", "ID"): out["rnea"][0], ("pin C++", "FD"): out["aba"][0],
                   ("pin C++", "CRBA"): out["crba"][0]}
            for t in threads:
                if f"rnea_par{t}" in out:
                    res[(f"pin par {t}", "ID")] = out[f"rnea_par{t}"][0]
                    res[(f"pin par {t}", "FD")] = out[f"aba_par{t}"][0]
            return res

        contestants = {"pin C++": cpp}
        for t in threads:
            contestants[f"sd numba {t}"] = (lambda t=t: {
                (f"sd numba {t}", "ID"): timed(lambda: id_plan.solve(q, v, qdd=a, backend="numba",
                                                                     threads=t), B),
                (f"sd numba {t}", "FD"): timed(lambda: fd_plan.solve(q, v, tau=tau,
                                                                     backend="numba", threads=t), B)})
        for t in threads:
            contestants[f"sd c {t}"] = (lambda t=t: {
                (f"sd c {t}", "ID"): timed(lambda: id_plan.solve(q, v, qdd=a, backend="c",
                                                                 threads=t), B),
                (f"sd c {t}", "FD"): timed(lambda: fd_plan.solve(q, v, tau=tau, backend="c",
                                                                 threads=t), B)})
        for be in ("numba", "c"):
            for t in threads:
                contestants[f"sd mm {be} {t}"] = (lambda t=t, be=be: {
                    (f"sd mm {be} {t}", "CRBA"): timed(
                        lambda: mm_plan.solve(q, threads=t, backend=be), B)})
            contestants[f"sd mm {be} out"] = lambda be=be: {
                (f"sd mm {be} out", "CRBA"): timed(
                    lambda: mm_plan.solve(q, threads=1, out=M_buf, backend=be), B)}
            contestants[f"sd mm {be} packed"] = lambda be=be: {
                (f"sd mm {be} packed", "CRBA"): timed(
                    lambda: mm_plan.solve(q, threads=1, packed=True, backend=be), B)}
            contestants[f"sd mm {be} packed out"] = lambda be=be: {
                (f"sd mm {be} packed out", "CRBA"): timed(
                    lambda: mm_plan.solve(q, threads=1, packed=True, out=M_packed, backend=be), B)}
        contestants["sd crba batch"] = lambda: {
            ("sd crba batch", "CRBA"): timed(lambda: sd.crba(model, q), B)}
        contestants["sd solver"] = lambda: {
            ("sd solver", "ID"): per_state(lambda b: f_id(q[b], v[b], a[b]), S),
            ("sd solver", "FD"): per_state(lambda b: f_fd(q[b], v[b], tau[b]), S),
            ("sd solver", "CRBA"): per_state(lambda b: f_mm(q[b]), S)}
        n1 = min(S, 64)
        contestants["sd solve B=1"] = lambda: {
            ("sd solve B=1", "ID"): per_state(lambda b: id_plan.solve(q[b], v[b], qdd=a[b]), n1),
            ("sd solve B=1", "FD"): per_state(lambda b: fd_plan.solve(q[b], v[b], tau=tau[b]), n1),
            ("sd solve B=1", "CRBA"): per_state(lambda b: mm_plan.solve(q[b]), n1)}
        contestants["pin py"] = lambda: {
            ("pin py", "ID"): per_state(lambda b: pin.rnea(pmodel, pdata, pq[b], v[b], a[b]), S),
            ("pin py", "FD"): per_state(lambda b: pin.aba(pmodel, pdata, pq[b], v[b], tau[b]), S),
            ("pin py", "CRBA"): per_state(lambda b: pin.crba(pmodel, pdata, pq[b]), S)}
        if mj_ok:
            contestants["mj py"] = lambda: {("mj py", "ID"): per_state(mj_id, S),
                                            ("mj py", "FD"): per_state(mj_fd, S),
                                            ("mj py", "CRBA"): per_state(mj_crba, S)}
            for t in threads:
                contestants[f"mj rollout {t}"] = (lambda t=t: {
                    (f"mj rollout {t}", "FD"): timed(lambda: rollout(t), B)})
        samples = interleaved(contestants, args.rounds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    load1 = load_average("end")
    best = {k: (min(s), float(np.median(s))) for k, s in samples.items()}
    ref = {p: best[("pin C++", p)][0] for p in ("ID", "FD", "CRBA")}

    def cells(key, problem):
        if (key, problem) not in best:
            return ["-", "-"]
        lo, med = best[(key, problem)]
        return [f"{lo:.2f} ({med:.2f})", f"{lo / ref[problem]:.2f}x"]

    par_na = f"unavailable: {par_why}" if par_why else None
    rows = [(f"{B}", "Pinocchio C++ per call (rnea / aba / crba), from C++", "1", "pin C++")]
    for t in threads:
        rows.append((f"{B}", "Pinocchio C++ rneaInParallel / abaInParallel (ModelPool)", f"{t}",
                     f"pin par {t}"))
    for t in threads:
        rows.append((f"{B}", "sparsedyn plan.solve, numba", f"{t}", f"sd numba {t}"))
    for t in threads:
        rows.append((f"{B}", "sparsedyn plan.solve, C", f"{t}", f"sd c {t}"))
    for be, name in (("numba", "numba"), ("c", "C")):
        for t in threads:
            rows.append((f"{B}", f"sparsedyn mass_matrix plan.solve, {name} (fresh (B, nv, nv))",
                         f"{t}", f"sd mm {be} {t}"))
        rows += [(f"{B}", f"sparsedyn mass_matrix plan.solve, {name}, out= buffer", "1",
                  f"sd mm {be} out"),
                 (f"{B}", f"sparsedyn mass_matrix plan.solve, {name}, packed nonzeros", "1",
                  f"sd mm {be} packed"),
                 (f"{B}", f"sparsedyn mass_matrix plan.solve, {name}, packed nonzeros, out= "
                  "buffer", "1", f"sd mm {be} packed out")]
    rows.append((f"{B}", "sparsedyn sd.crba (NumPy, batched)", "1", "sd crba batch"))
    for t in threads:
        rows.append((f"{B}", "MuJoCo mujoco.rollout, one mj_step per state (FD column)", f"{t}",
                     f"mj rollout {t}"))
    rows += [("1", "sparsedyn plan.solver() (C backend), from Python", "1", "sd solver"),
             ("1", "sparsedyn plan.solve B = 1 (auto backend; CRBA: mass_matrix plan)",
              "1", "sd solve B=1"),
             ("1", "Pinocchio from Python (pin.rnea / pin.aba / pin.crba)", "1", "pin py"),
             ("1", "MuJoCo from Python (mj_rne / mj_forward / mj_crb + mj_fullM)", "1", "mj py")]
    lines = [f"Generated by `python experiments/bench_peers.py --batch {B} --single-states {S} "
             f"--rounds {args.rounds}` on {platform.processor() or platform.machine()} "
             f"({cpu_vectors()} vectors; C units on {LANES} states per vector), "
             f"{os.cpu_count()} cores; load average {load0[0]:.2f} at the start, {load1[0]:.2f} "
             f"at the end. Embedded humanoid (free-flyer, nv = {model.nv}); us per state, min "
             f"(median) over {args.rounds} interleaved rounds; ratio = min / Pinocchio C++ per "
             f"call's min (same state set: the batch). B = 1 rows loop over the first {S} states "
             f"(plan.solve B = 1: {n1}).", "",
             "| B | contestant | threads | ID us/state | ratio | FD us/state | ratio | "
             "CRBA us/state | ratio |",
             "|---|---|---|---|---|---|---|---|---|"]
    for bcell, label, tcell, key in rows:
        if key.startswith("mj") and not mj_ok:
            out = ["unavailable", "-"] * 3
        elif key.startswith("pin par") and par_na:
            out = ["unavailable", "-", "unavailable", "-", "-", "-"]
        else:
            out = cells(key, "ID") + cells(key, "FD") + cells(key, "CRBA")
        lines.append(f"| {bcell} | {label} | {tcell} | " + " | ".join(out) + " |")
    lines += ["", "Pinocchio's crba fills the upper triangle only (into its Data, in cache); "
              "sd.crba, the mass_matrix plan and mj_fullM give the full matrix, the plan into a fresh "
              f"(B, nv, nv) array ({8 * model.nv ** 2} bytes per state), into a caller's buffer "
              f"(out=), or packed: only the {mm_plan.n_pairs} nonzeros of the lower triangle "
              "(fresh, or into a caller's buffer); plan.solver() and plan.solve B = 1 run its "
              "one-state C library (built by the checks, as the batches' lane-vector one). "
              "MuJoCo's ID and CRBA times include the position (and, for ID, velocity) stages "
              "they need (mj_kinematics, mj_comPos, mj_comVel)."]
    if len(threads) > 1:
        t2 = threads[-1]

        def gain(key, problem):             # one thread's min over t2 threads' min
            one, more = (best.get((key.format(t), problem)) for t in (1, t2))
            return "-" if one is None or more is None else f"{one[0] / more[0]:.2f}x"
        pairs = [("numba", "sd numba {}"), ("C", "sd c {}"), ("Pinocchio's parallel API", "pin par {}"),
                 ("the mass matrix on C (fresh)", "sd mm c {}"), ("mujoco.rollout", "mj rollout {}")]
        lines += ["", f"{t2} threads against 1 (time on 1 thread / time on {t2}, the mins above): " +
                  "; ".join(f"{name} " + " / ".join(f"{p} {gain(key, p)}" for p in problems
                                                    if gain(key, p) != "-")
                            for name, key in pairs
                            for problems in [("ID", "FD", "CRBA")]
                            if any(gain(key, p) != "-" for p in problems)) + "."]
    if par_na:
        lines.append(f"Pinocchio's parallel algorithms: {par_na}.")
    if not mj_ok:
        lines.append(f"MuJoCo: {mj_why}.")
    # ---- achieved GFLOP/s
    lines += ["", "Achieved GFLOP/s of our plans: counted flops per state (plan.stats: "
              "assembly_flops + flops, the assembly of D and b plus the online LU and "
              "substitutions; CRBA: the generated C's operations, "
              "backends/c_mass_matrix.crba_statements) / the best time per state on one thread (plan.solve on the batch, "
              f"numba or C, and plan.solver() per state from Python), next to one core's measured "
              f"double-precision FMA peak (experiments/peers/fma_peak.c): {peak:.1f} GFLOP/s.", "",
              "| plan | flops per state | route | us/state (min) | GFLOP/s | % of FMA peak |",
              "|---|---|---|---|---|---|"]
    crba_flops = crba_statements(mm_plan.program).flops
    for problem, plan in (("ID", id_plan), ("FD", fd_plan), ("CRBA", mm_plan)):
        st = plan.stats
        flops = crba_flops if problem == "CRBA" else st["assembly_flops"] + st["flops"]
        routes = ((f"plan.solve B = {B}, C, 1 thread, packed, out=", "sd mm c packed out"),
                  ("plan.solver(), B = 1, from Python", "sd solver")) if problem == "CRBA" else (
            (f"plan.solve B = {B}, numba, 1 thread", "sd numba 1"),
            (f"plan.solve B = {B}, C, 1 thread", "sd c 1"),
            ("plan.solver(), B = 1, from Python", "sd solver"))
        for route, key in routes:
            if (key, problem) in best:
                t = best[(key, problem)][0]
                g = flops / t * 1e-3
                lines.append(f"| {problem} | {flops:,} | {route} | {t:.2f} | {g:.2f} | "
                             f"{100 * g / peak:.1f}% |")
    lines += ["", "Answers checked before timing (largest error relative to max(1, max |ref|)): " +
              ", ".join(f"{k} {v:.1e}" for k, v in errors.items()) +
              ". MuJoCo's states through sd.to_mujoco_q / _v / _a / _tau on sd.from_mujoco's model "
              "(joints matched by name); its FD column runs mj_forward (or mj_step) with "
              "constraints, contacts, springs, dampers and actuation disabled, which still does "
              "more than ABA."]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
