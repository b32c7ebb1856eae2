"""Per-state time of the Delassus methods, batched (B = 1, 64, 1024, 4096), against Pinocchio's
computeDelassusMatrix called once per state from Python and from C++, measured in the same run.

Scenario (issue #5): the embedded humanoid (free-flyer, nv = 49, 44 bodies) with 6D welds at both
soles and 3D point contacts at the six fingertips (m = 12 + 18 = 30). Rows:
    pinocchio              computeDelassusMatrix per state (a Python loop over the batch)
    pinocchio C++          computeDelassusMatrix per state from C++ (experiments/peers/
                           pin_delassus.cpp, g++ against the pin wheel's headers and libraries,
                           -O3 -march=native, as bench_contacts.py builds its peer; the model
                           handed over with saveToBinary, the contacts as Pinocchio's contact
                           models; a subprocess on the same stored configurations, timing itself:
                           the best of 3 loops over the batch per repetition)
    pv-osimr numba 1T/allT delassus(..., backend="numba") with numba.set_num_threads(1) / all
                           (B = 1: one state, the per-state kernel bound to the model and contacts,
                           sparsedyn/delassus_one_state.py)
    pv-osimr solver numba 1T
                           sd.delassus_solver(model, contacts) (bound once) called once per state
                           (a Python loop over the batch, as the pinocchio row): a control loop's
                           call
    kernel 1T/allT         the compiled kernel alone (backends/c_pv_osimr.run on a cached
                           program: C on vectors of LANES states for B >= 2, numba's per-state
                           kernel at B = 1): what the public call adds on top is Python input
                           checking
    kernel per-state 1T    numba's per-state kernel alone (pv_osimr_numba.run), the one the
                           vectors replaced for batches
    sparse numba 1T        delassus(..., method="sparse", backend="numba"): Nori's block system,
                           compiled assembly + one sparse LU and m substitutions per state
                           (single-threaded kernels)
    <method> numpy         delassus(..., method=<method>, backend="numpy") (batched NumPy)
Each cell is the best of several repetitions, ours and Pinocchio's interleaved so that load from
other processes hits both alike (for B <= 64 each timed call follows an untimed call of the same
contestant, as in a control loop: else the row after the C++ peer's subprocess pays for the
caches it evicted); ratio = ours / Pinocchio (< 1: faster); a second table gives the
compiled rows' ratios to Pinocchio C++ (issue #20's target: the compiled PV-OSIMr <= 0.5x at
B = 4096 on 1 thread). Before timing, Pinocchio C++'s and our answers are checked against the
dense J M^-1 J^T from Pinocchio's Python Jacobians and mass matrix. The machine load (uptime) is
recorded before and after. Writes experiments/out/bench_delassus.md.
Usage: python experiments/bench_delassus.py [--quick] [--batches B ...] [--out PATH]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import namedtuple

import numba
import numpy as np
import pinocchio as pin

import sparsedyn.models as sm
from sparsedyn import delassus_solver, wait_for_kernels
from sparsedyn.bench import pin_configuration, pin_contact_models
from sparsedyn.contacts import Contact, resolve_contacts
from sparsedyn.delassus import METHODS, delassus
from sparsedyn.files import atomic_write
from sparsedyn.backends.c_pv_osimr import library, run
from sparsedyn.backends.c_vector import LANES, cpu_vectors
from sparsedyn.kernels import pv_osimr_numba
from sparsedyn.kernels.pv_osimr_numba import program_for

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_contacts import contact_spec  # noqa: E402
from bench_single_state import build_pinocchio, parse  # noqa: E402

TIPS = ["l_thumb_tip", "l_index_tip", "l_middle_tip", "r_thumb_tip", "r_index_tip", "r_middle_tip"]
OUT = os.path.join(os.path.dirname(__file__), "out", "bench_delassus.md")
CHECKED = 16    # states whose answers are checked against the dense J M^-1 J^T
TOL = 1e-8      # relative to max |ref|
TARGET = 0.5    # issue #20: compiled PV-OSIMr / Pinocchio C++ per state, B = 4096, 1 thread
WARM = 64       # batches up to this size: every timed call follows an untimed one (interleaved)
SelfTimed = namedtuple("SelfTimed", "seconds")  # a contestant that measured its own time


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "uptime unavailable"


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    return out.seconds if isinstance(out, SelfTimed) else wall


def interleaved(fns, reps, warm=False):
    """Best time of each function, the functions run round-robin `reps` times; warm: each timed
    call right after an untimed one of the same function (short calls: the row after the C++
    peer's subprocess would otherwise pay for the caches that subprocess evicted)."""
    best = [np.inf] * len(fns)
    for _ in range(reps):
        for k, fn in enumerate(fns):
            if warm:
                fn()
            best[k] = min(best[k], timed(fn))
    return best


def with_threads(n, fn):
    def call():
        old = numba.get_num_threads()
        numba.set_num_threads(n)
        try:
            fn()
        finally:
            numba.set_num_threads(old)
    return call


def dense_delassus(pmodel, pdata, cms, x):
    """J M^-1 J^T at Pinocchio configuration x, from Pinocchio's Python mass matrix and each
    contact's LOCAL Jacobian at its placement (3D: the linear rows), solved densely."""
    M = pin.crba(pmodel, pdata, x)
    M = np.triu(M) + np.triu(M, 1).T
    pin.computeJointJacobians(pmodel, pdata, x)
    J = np.vstack([pin.getFrameJacobian(pmodel, pdata, cm.joint1_id, cm.joint1_placement,
                                        pin.ReferenceFrame.LOCAL)[:cm.residualSize()]
                   for cm in cms])
    return J @ np.linalg.solve(M, J.T)


class CppPeer:
    """experiments/peers/pin_delassus.cpp built and fed the configurations, contacts and the
    references to check against; call(B) runs it on the first B states (a SelfTimed)."""

    def __init__(self, pmodel, pq, cms, refs):
        self.exe = build_pinocchio("pin_delassus.cpp", ["pin_io.hpp"])
        self.folder = tempfile.mkdtemp(prefix="bench_delassus_")
        files = [os.path.join(self.folder, f) for f in ("model.bin", "configs.bin",
                                                         "contacts.bin", "refs.bin")]
        pmodel.saveToBinary(files[0])
        np.ascontiguousarray(pq, dtype=float).tofile(files[1])
        contact_spec(cms).tofile(files[2])
        np.ascontiguousarray(refs, dtype=float).tofile(files[3])
        self.cmd, self.K = [self.exe] + files, refs.shape[1]

    def run(self, B, rounds=3):
        out = subprocess.run(self.cmd + [str(B), str(self.K), str(rounds)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"pin_delassus failed ({out.returncode}): {out.stderr[-2000:]}")
        return parse(out.stdout)

    def call(self, B):
        return lambda: SelfTimed(self.run(B)["delassus"][0] * 1e-6 * B)

    def close(self):
        shutil.rmtree(self.folder, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="B = 1, 64 only")
    ap.add_argument("--batches", type=int, nargs="+", help="the batch sizes (default 1 64 1024 "
                    "4096)")
    ap.add_argument("--out", default=OUT)
    args = ap.parse_args(argv)
    model = sm.humanoid()
    pmodel = pin.buildModelFromUrdf(sm.HUMANOID_URDF, pin.JointModelFreeFlyer())
    pdata = pmodel.createData()
    contacts = [Contact("l_sole"), Contact("r_sole")] + [Contact(t, "3d") for t in TIPS]
    m = sum(c.dim for c in contacts)
    rng = np.random.default_rng(0)
    batches = tuple(args.batches or ((1, 64) if args.quick else (1, 64, 1024, 4096)))
    # a kernel missing from numba's cache compiles in the background while calls take the NumPy
    # route (sparsedyn/jit.py): start that compile and wait for it, so every cell times numba
    delassus(model, model.neutral_configuration(), contacts, method="pv-osimr")
    wait_for_kernels()
    library()                       # the C kernel on vectors: built (or loaded) before timing
    q = model.random_configuration(rng, batch=max(max(batches), CHECKED))
    pq = [pin_configuration(model, pmodel, qb) for qb in q]
    cms, cds = pin_contact_models(pmodel, contacts)
    ref = np.array([pin.computeDelassusMatrix(pmodel, pdata, x, cms, cds, 0.0) for x in pq[:64]])
    err = {b: np.abs(delassus(model, q[:64], contacts, backend=b) - ref).max() / np.abs(ref).max()
           for b in ("numba", "numpy")}                                  # also compiles / warms up
    err["sparse"] = (np.abs(delassus(model, q[:64], contacts, method="sparse") - ref).max()
                     / np.abs(ref).max())
    # the checks before timing: ours and Pinocchio C++'s against the dense J M^-1 J^T
    dense = np.array([dense_delassus(pmodel, pdata, cms, x) for x in pq[:CHECKED]])
    scale = np.abs(dense).max()
    ours_pv = delassus(model, q[:CHECKED], contacts, method="pv-osimr")
    checks = {"pv-osimr numba vs dense": np.abs(ours_pv - dense).max() / scale}
    peer = CppPeer(pmodel, pq, cms, np.stack([ours_pv, dense]))
    try:
        first = peer.run(CHECKED, rounds=1)
        checks["Pinocchio C++ vs pv-osimr"] = first["err_ref0"][0] / scale
        checks["Pinocchio C++ vs dense"] = first["err_ref1"][0] / scale
        for what, e in checks.items():
            if not e <= TOL:
                raise AssertionError(f"{what}: relative error {e:.1e} above {TOL:g}")
        rows = timings(model, q, pq, pmodel, pdata, cms, cds, contacts, batches, peer)
    finally:
        peer.close()
    write(rows, args, model, m, batches, err, checks)


def timings(model, q, pq, pmodel, pdata, cms, cds, contacts, batches, peer):
    """{row: {B: (seconds per state, ratio to Python Pinocchio)}} and the machine's load
    (rows["load"] = (before, after))."""
    program = program_for(model, resolve_contacts(model, contacts))
    solver = delassus_solver(model, contacts, backend="numba")
    nthreads = numba.config.NUMBA_NUM_THREADS
    load_before = uptime()

    def pin_loop(B):
        return lambda: [pin.computeDelassusMatrix(pmodel, pdata, x, cms, cds, 0.0) for x in pq[:B]]

    rows = {"pinocchio": {}}
    ours = {"pinocchio C++": peer.call,
            "pv-osimr numba 1T": lambda B: with_threads(1, lambda: delassus(model, q[:B], contacts)),
            f"pv-osimr numba {nthreads}T": lambda B: (lambda: delassus(model, q[:B], contacts)),
            "pv-osimr solver numba 1T": lambda B: (lambda: [solver(x) for x in q[:B]]),
            "kernel 1T": lambda B: with_threads(1, lambda: run(program, q[:B])),
            f"kernel {nthreads}T": lambda B: (lambda: run(program, q[:B])),
            "kernel per-state 1T": lambda B: (
                lambda: pv_osimr_numba.run(program, q[:B], parallel=False)),
            "sparse numba 1T": lambda B: (lambda: delassus(model, q[:B], contacts, method="sparse",
                                                           backend="numba"))}
    for method in METHODS:
        ours[f"{method} numpy"] = (lambda meth: lambda B: (
            lambda: delassus(model, q[:B], contacts, method=meth, backend="numpy")))(method)
    for name in ours:
        rows[name] = {}
    for B in batches:
        compiled = [k for k in ours if "numpy" not in k]
        reps = 30 if B == 1 else (10 if B <= 1024 else 5)
        t = interleaved([pin_loop(B)] + [ours[k](B) for k in compiled], reps, warm=B <= WARM)
        rows["pinocchio"][B] = (t[0] / B, 1.0)
        for k, tk in zip(compiled, t[1:]):
            rows[k][B] = (tk / B, tk / t[0])
        reps = 10 if B == 1 else (3 if B <= 1024 else 2)
        for k in (k for k in ours if "numpy" in k):  # the NumPy paths, each against its own pin run
            tp, tk = interleaved([pin_loop(B), ours[k](B)], reps, warm=B <= WARM)
            rows[k][B] = (tk / B, tk / tp)
    rows["load"] = (load_before, uptime())
    return rows


def write(rows, args, model, m, batches, err, checks):
    load_before, load_after = rows.pop("load")
    nthreads = numba.config.NUMBA_NUM_THREADS
    command = " ".join(["python experiments/bench_delassus.py"] + (["--quick"] if args.quick else [])
                       + (["--batches", *map(str, args.batches)] if args.batches else []))
    lines = [f"# Delassus matrix: per-state time vs Pinocchio (same run)", "",
             f"humanoid nv={model.nv}, {model.nbodies} bodies, m={m} (6D soles + 3D fingertips); "
             f"rel. diff to Pinocchio: numba {err['numba']:.1e}, numpy {err['numpy']:.1e}, "
             f"sparse {err['sparse']:.1e}", "",
             f"Answers checked before timing on the first {CHECKED} states (largest error "
             "relative to max |ref|, the dense J M^-1 J^T from Pinocchio's Python Jacobians and "
             "mass matrix): " + ", ".join(f"{k} {v:.1e}" for k, v in checks.items()) + ".", "",
             f"Command: `{command}`; NUMBA_NUM_THREADS={nthreads}, {os.cpu_count()} CPUs "
             f"({cpu_vectors()} vectors; C units on {LANES} states per vector).", "",
             f"Load before: `{load_before}`", "", f"Load after: `{load_after}`", "",
             "Per-state microseconds (best of interleaved repetitions), ratio = ours / Pinocchio "
             "(< 1: faster). The compiled rows share one interleaved Pinocchio run (the pinocchio "
             "row); each NumPy row's ratio is against its own interleaved Pinocchio run.", "",
             "| method | " + " | ".join(f"B={B}" for B in batches) + " |",
             "|---|" + "---|" * len(batches)]
    for name, cells in rows.items():
        lines.append(f"| {name} | " + " | ".join(
            f"{cells[B][0] * 1e6:.1f}" + ("" if name == "pinocchio" else f" ({cells[B][1]:.2f}x)")
            for B in batches) + " |")
    kernel = min(rows["kernel 1T"][B][0] for B in batches if B > 1) * 1e6
    lines += ["", f"Reading: the per-state cost of the compiled kernel is {kernel:.1f} us on one core "
              "(its best batched cell). One state (B = 1) runs the per-state numba kernel bound once "
              "to the model and contacts (sparsedyn/delassus_one_state.py): the public call adds "
              "its input screens and the dispatch, the solver row (sd.delassus_solver) a little "
              "less. The thread rows need the other core free: "
              "when another process holds it (load average >= 2 on 2 CPUs) the second thread waits "
              "for a time slice and the threaded rows lose against 1T."]
    cpp = rows["pinocchio C++"]
    compiled = [k for k in rows if "numba" in k or k.startswith("kernel")]
    lines += ["", "## Against Pinocchio C++ (same run)", "",
              "Per-state microseconds of the compiled rows above and their ratio to Pinocchio's "
              "computeDelassusMatrix called from C++ in the same interleaved run (< 1: faster).",
              "", "| method | " + " | ".join(f"B={B}" for B in batches) + " |",
              "|---|" + "---|" * len(batches)]
    lines.append("| pinocchio C++ | " + " | ".join(f"{cpp[B][0] * 1e6:.1f}" for B in batches)
                 + " |")
    for name in compiled:
        lines.append(f"| {name} | " + " | ".join(
            f"{rows[name][B][0] * 1e6:.1f} ({rows[name][B][0] / cpp[B][0]:.2f}x)"
            for B in batches) + " |")
    big = max(batches)
    ratio = {k: rows[k][big][0] / cpp[big][0] for k in ("kernel 1T", "pv-osimr numba 1T")}
    lines += ["", f"Issue #20's target, compiled PV-OSIMr <= {TARGET}x Pinocchio C++ per state at "
              f"B = {big} on 1 thread: kernel 1T {ratio['kernel 1T']:.2f}x "
              f"({'met' if ratio['kernel 1T'] <= TARGET else 'not met'}), public call "
              f"{ratio['pv-osimr numba 1T']:.2f}x "
              f"({'met' if ratio['pv-osimr numba 1T'] <= TARGET else 'not met'})."]
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with atomic_write(args.out, "w") as f:
        f.write(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
