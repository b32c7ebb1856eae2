"""The derivatives of the dynamics and forward dynamics under rigid contacts (issue #22) against
Pinocchio's own C++, on the embedded humanoid (free-flyer, nv = 49; both soles held by 6D LOCAL
contacts): per-state time at a big batch and one state per call, with ratios against Pinocchio
C++ per call.

    python experiments/bench_contacts.py [--batch 4096] [--single-states 64] [--rounds 9] [--out PATH]

One process, interleaved rounds (round r runs every contestant once, in rotating order), min and
median per state over rounds; the load average is printed at the start and the end (the
machinery of bench_peers.py). Contestants, on the same stored random states (q, v, a; tau =
RNEA(q, v, a)):
  - Pinocchio C++ (experiments/peers/pin_derivs_contacts.cpp, g++ against the pin wheel's headers
    and libraries, -O3 -march=native; the model handed over with saveToBinary, each contact as
    its sole frame's parent joint and placement there): computeRNEADerivatives at (q, v, a),
    computeABADerivatives at (q, v, tau), constraintDynamics at (q, v, tau) (initConstraintDynamics
    once, ProximalSettings(1e-14, 0, 1): one exact solve), one call per state over the batch;
  - sparsedyn: the compiled ID / FD plans' plan.solve(..., derivatives=True) and the constrained
    plan's solve (sd.constrained_forward_dynamics) on the batch, numba and C on 1 and 2 threads,
    C also with derivatives_out kept between calls (as Pinocchio keeps its Data), and with one
    state per call (auto backend);
  - Pinocchio from Python, one call per state.
Every contestant's answers are checked against Python Pinocchio's on the first states (relative
to max(1, max |ref|)) before its time is reported.
"""
from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, os.pardir))
sys.path.insert(0, HERE)

import pinocchio as pin  # noqa: E402

import sparsedyn as sd  # noqa: E402
from bench_peers import (LANES, cpu_vectors, humanoid_states, interleaved, load_average,  # noqa: E402
                         per_state, start, timed)
from bench_single_state import build_pinocchio, parse, publish  # noqa: E402

SOLES = ("l_sole", "r_sole")
PROBLEMS = ("RNEA derivatives", "ABA derivatives", "constrained FD")
#: the batched sparsedyn routes: (backend, derivatives_out kept between calls)
ROUTES = (("numba", False), ("c", False), ("c", True))
CHECKED = 16           # states whose answers are checked against Python Pinocchio's
TOL = 1e-8             # relative to max(1, max |ref|)


def pin_contacts(pmodel):
    """Python Pinocchio's contact models (6D, LOCAL, on each sole frame's parent joint at the
    frame's placement) and the same as the C++ program reads them (contact_spec)."""
    cms = []
    for name in SOLES:
        frame = pmodel.frames[pmodel.getFrameId(name)]
        cms.append(pin.RigidConstraintModel(pin.ContactType.CONTACT_6D, pmodel, frame.parentJoint,
                                            frame.placement, pin.ReferenceFrame.LOCAL))
    cms = pin.StdVec_RigidConstraintModel(cms)
    return cms, contact_spec(cms)


def contact_spec(cms):
    """Pinocchio's rigid contact models as experiments/peers/pin_io.hpp's read_contacts reads
    them: n, then per contact (dim, joint id, placement R row-major, p)."""
    spec = [len(cms)]
    for cm in cms:
        if cm.joint2_id != 0 or cm.reference_frame != pin.ReferenceFrame.LOCAL:
            raise ValueError(f"contact {cm.name!r}: the C++ peers read one-joint LOCAL contacts")
        spec += [cm.residualSize(), cm.joint1_id, *cm.joint1_placement.rotation.ravel(),
                 *cm.joint1_placement.translation]
    return np.array(spec, dtype=float)


def main(argv=None):
    args, B, S, threads, load0 = start(argv, __doc__, "bench_contacts.md", 64)
    K = min(CHECKED, B)
    model, pmodel, pdata, q, v, a, pq, tau = humanoid_states(B)
    cms, spec = pin_contacts(pmodel)
    cds = pin.StdVec_RigidConstraintData([cm.createData() for cm in cms])
    pin.initConstraintDynamics(pmodel, pdata, cms, cds)
    prox = pin.ProximalSettings(1e-14, 0.0, 1)

    def pin_rnea_d(b):
        return pin.computeRNEADerivatives(pmodel, pdata, pq[b], v[b], a[b])

    def pin_aba_d(b):
        return pin.computeABADerivatives(pmodel, pdata, pq[b], v[b], tau[b])

    def pin_cd(b):
        return pin.constraintDynamics(pmodel, pdata, pq[b], v[b], tau[b], cms, cds, prox)

    # ---- the references: Python Pinocchio on the first K states
    refs = []
    for b in range(K):
        # copies at once: the bindings hand back views of pdata, which the next call overwrites
        row = [np.array(m) for m in pin_rnea_d(b)] + [np.array(m) for m in pin_aba_d(b)]
        qdd = np.array(pin_cd(b))
        refs.append(np.concatenate([m.ravel() for m in row] + [qdd, np.array(pdata.lambda_c)]))
    refs = np.array(refs)
    nn = model.nv ** 2
    ref_mats = refs[:, :6 * nn].reshape(K, 6, model.nv, model.nv)
    ref_qdd, ref_lam = refs[:, 6 * nn:6 * nn + model.nv], refs[:, 6 * nn + model.nv:]

    def err(x, ref):
        return np.abs(np.asarray(x) - ref).max() / max(1.0, np.abs(ref).max())

    errors = {}

    def check(what, got, ref):
        e = err(got, ref)
        assert e <= TOL, f"{what}: relative error {e:.1e} above {TOL:g}"
        errors[what] = e

    # ---- sparsedyn: plans, answers checked
    id_plan = sd.compile(sd.inverse_dynamics(model))
    fd_plan = sd.compile(sd.forward_dynamics(model))
    cd_plan = sd.constrained_forward_dynamics(model, [sd.Contact(s, "6d") for s in SOLES])

    def ours(backend, t, lo=0, hi=B, kept=False):
        """The three batched calls of one route on states lo:hi; kept: the derivatives into
        arrays the caller keeps between calls (derivatives_out, as Pinocchio's Data)."""
        sl = slice(lo, hi)
        out = [np.zeros((3, hi - lo, model.nv, model.nv)) if kept else None for _ in range(2)]
        return {
            PROBLEMS[0]: lambda: id_plan.solve(q[sl], v[sl], qdd=a[sl], backend=backend, threads=t,
                                               derivatives=True, derivatives_out=out[0]),
            PROBLEMS[1]: lambda: fd_plan.solve(q[sl], v[sl], tau=tau[sl], backend=backend,
                                               threads=t, derivatives=True,
                                               derivatives_out=out[1]),
            PROBLEMS[2]: lambda: cd_plan.solve(q[sl], v[sl], tau[sl], backend=backend, threads=t)}

    for backend, kept in ROUTES:
        runs, name = ours(backend, 1, 0, K, kept), backend + (" kept" if kept else "")
        check(f"sd RNEA derivatives {name}", np.stack(runs[PROBLEMS[0]]().derivatives, 1),
              ref_mats[:, :3])
        check(f"sd ABA derivatives {name}", np.stack(runs[PROBLEMS[1]]().derivatives, 1),
              ref_mats[:, 3:])
        if kept:
            continue                             # (the constrained FD: the same call as c's)
        res = runs[PROBLEMS[2]]()
        assert res.ok.all(), "constrained FD: states flagged"
        check(f"sd constrained qdd {backend}", res["qdd"], ref_qdd)
        check(f"sd constrained lambda {backend}", res["lambda"], ref_lam)

    one_state = (   # one state per call: (nq,) / (nv,) arrays, the plan's automatic backend
        lambda b: id_plan.solve(q[b], v[b], qdd=a[b], threads=1, derivatives=True),
        lambda b: fd_plan.solve(q[b], v[b], tau=tau[b], threads=1, derivatives=True),
        lambda b: cd_plan.solve(q[b], v[b], tau[b], threads=1))
    # the C route's single-state functions built as a user builds them (auto never starts a
    # compiler; one call with backend="c" does): the README's one-state-per-call route
    id_plan.solve(q[0], v[0], qdd=a[0], backend="c")
    fd_plan.solve(q[0], v[0], tau=tau[0], backend="c")
    cd_plan.solve(q[0], v[0], tau[0], backend="c")
    got = [[fn(b) for fn in one_state] for b in range(K)]
    check("sd B = 1 derivatives", np.array([[*r.derivatives, *f.derivatives] for r, f, _ in got]),
          ref_mats)
    check("sd B = 1 constrained qdd", np.array([c["qdd"] for _, _, c in got]), ref_qdd)
    check("sd B = 1 constrained lambda", np.array([c["lambda"] for _, _, c in got]), ref_lam)

    # ---- Pinocchio C++ (built, checked)
    pin_exe = build_pinocchio("pin_derivs_contacts.cpp", ["pin_io.hpp"])
    folder = tempfile.mkdtemp(prefix="bench_contacts_")
    try:
        np.concatenate([pq, v, a, tau], axis=1).tofile(os.path.join(folder, "states.bin"))
        spec.tofile(os.path.join(folder, "contacts.bin"))
        refs.tofile(os.path.join(folder, "refs.bin"))
        pmodel.saveToBinary(os.path.join(folder, "model.bin"))
        cpp_cmd = [pin_exe] + [os.path.join(folder, f) for f in
                               ("model.bin", "states.bin", "contacts.bin", "refs.bin")] + [
            str(B), str(K)]
        first = parse(subprocess.run(cpp_cmd + ["1"], capture_output=True, text=True,
                                     check=True).stdout)
        scales = {"rnea_derivs": ref_mats[:, :3], "aba_derivs": ref_mats[:, 3:],
                  "cd_qdd": ref_qdd, "cd_lambda": ref_lam}
        for key, ref in scales.items():
            e = first["err_" + key][0] / max(1.0, np.abs(ref).max())
            assert e <= TOL, f"Pinocchio C++ {key}: relative error {e:.1e} above {TOL:g}"
            errors["pin C++ " + key] = e
        cpp_names = ("rnea_derivs", "aba_derivs", "constraint_dynamics")

        def cpp():
            out = parse(subprocess.run(cpp_cmd + ["3"], capture_output=True, text=True,
                                       check=True).stdout)
            return {("pin C++", p): out[n][0] for p, n in zip(PROBLEMS, cpp_names)}

        contestants = {"pin C++": cpp}
        for backend, kept in ROUTES:
            for t in threads:
                runs, key = ours(backend, t, kept=kept), route_key(backend, kept, t)
                contestants[key] = (lambda runs=runs, key=key: {
                    (key, p): timed(fn, B) for p, fn in runs.items()})
        contestants["sd B=1"] = lambda: {
            ("sd B=1", p): per_state(fn, S) for p, fn in zip(PROBLEMS, one_state)}
        contestants["pin py"] = lambda: {
            ("pin py", p): per_state(fn, S) for p, fn in zip(PROBLEMS, (pin_rnea_d, pin_aba_d,
                                                                        pin_cd))}
        samples = interleaved(contestants, args.rounds)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    load1 = load_average("end")
    publish(report(samples, args, B, S, K, threads, model, load0, load1, errors), args.out)


def route_key(backend, kept, threads):
    return f"sd {backend}{' kept' if kept else ''} {threads}"


def report(samples, args, B, S, K, threads, model, load0, load1, errors):
    """The lines of experiments/out/bench_contacts.md."""
    best = {k: (min(s), float(np.median(s))) for k, s in samples.items()}
    ref = {p: best[("pin C++", p)][0] for p in PROBLEMS}

    def cells(key, problem):
        lo, med = best[(key, problem)]
        return [f"{lo:.2f} ({med:.2f})", f"{lo / ref[problem]:.2f}x"]

    rows = [(f"{B}", "Pinocchio C++ per call (computeRNEADerivatives / computeABADerivatives / "
             "constraintDynamics), from C++", "1", "pin C++")]
    for backend, kept in ROUTES:
        label = {"numba": "numba", "c": "C"}[backend] + (
            ", derivatives_out kept between calls" if kept else "")
        for t in threads:
            rows.append((f"{B}", f"sparsedyn plan.solve, {label}", f"{t}",
                         route_key(backend, kept, t)))
    rows += [("1", "sparsedyn plan.solve, one state per call (auto backend)", "1", "sd B=1"),
             ("1", "Pinocchio from Python, one call per state", "1", "pin py")]
    lines = [f"Generated by `python experiments/bench_contacts.py --batch {B} --single-states {S} "
             f"--rounds {args.rounds}` on {platform.processor() or platform.machine()} "
             f"({cpu_vectors()} vectors; C units on {LANES} states per vector), "
             f"{os.cpu_count()} cores; load average {load0[0]:.2f} at the start, {load1[0]:.2f} "
             f"at the end. Embedded humanoid (free-flyer, nv = {model.nv}), constrained FD with "
             f"both soles held by 6D LOCAL contacts; us per state, min (median) over "
             f"{args.rounds} interleaved rounds; ratio = min / Pinocchio C++ per call's min "
             f"(same state set: the batch). B = 1 rows loop over the first {S} states.", "",
             "| B | contestant | threads | " + " | ".join(f"{p} us/state | ratio"
                                                         for p in PROBLEMS) + " |",
             "|---" * 9 + "|"]
    for bcell, label, tcell, key in rows:
        out = [c for p in PROBLEMS for c in cells(key, p)]
        lines.append(f"| {bcell} | {label} | {tcell} | " + " | ".join(out) + " |")
    targets = []
    for p in PROBLEMS[1:]:
        r = min(best[(route_key(b, k, 1), p)][0] for b, k in ROUTES) / ref[p]
        targets.append(f"{p} {r:.2f}x ({'met' if r <= 0.5 else 'not met'})")
    lines += ["", f"Issue #22's targets, <= 0.5x Pinocchio C++ per state at B = {B} on 1 thread "
              "(the best sparsedyn row): " + ", ".join(targets) + ".", "",
              "Our derivatives are (B, nv, nv) arrays of both triangles; Pinocchio's C++ leaves "
              "them in its Data (kept between calls), M and M^-1 upper triangle only. The C "
              "route runs Carpentier and Mansard's recursion on vectors of states and, for "
              "ABA's, M^-1 through L^T L (backends/c_derivatives.py); the numba route the 2 nv "
              "substitutions through inverse dynamics' D and the L^T L pass. A fresh result "
              "array costs its first touch (the kernel zeroes its pages); derivatives_out kept "
              "between calls does not (the constrained FD has no derivatives: the same call). "
              "The thread count splits the batch.", "",
              f"Answers checked before timing on the first {K} states against Python "
              "Pinocchio's (largest error relative to max(1, max |ref|)): " +
              ", ".join(f"{k} {v:.1e}" for k, v in errors.items()) + "."]
    return lines


if __name__ == "__main__":
    main()
