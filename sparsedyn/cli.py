"""The `sparsedyn` command line: demo, compile, solve, estimate, spy, bench, report.

Robots are given as a URDF or MJCF (MuJoCo .xml) path or the name of an embedded model
(`humanoid`, `hand`, `chainN` for an N-link revolute chain). Errors are one clear line on stderr
and a non-zero exit code.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np

from .robots import (EMBEDDED, PROBLEMS, CommandError, is_embedded, load_robot, make_problem,
                     positive_int)

STRUCTURAL = {"id": "rnea", "fd": "aba"}      # Nori's structural order of each problem


def _timeit(fn, repeat=3):
    from .bench import best_time
    return best_time(fn, repeat)


def _plan_header(path):
    """The JSON header of a saved plan (to find its model without loading it)."""
    from .files import read_npz
    try:
        header = json.loads(str(read_npz(path, "sparsedyn plan file")["header"]))
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    except KeyError:
        raise CommandError(f"{path}: not a sparsedyn plan file (no header)") from None
    if not isinstance(header, dict) or not isinstance(header.get("model"), dict):
        raise CommandError(f"{path}: not a sparsedyn plan file (no model in its header)")
    return header


def read_table(path, required):
    """States/readings file -> {name: (B, k) array}. NPZ: arrays by name. CSV: a header row with
    columns `<name>_<k>` (e.g. q_0 .. q_6, v_0 ..); `required` lists the names that must exist."""
    if not os.path.exists(path):
        raise CommandError(f"{path}: no such file")
    if path.endswith(".npz"):
        from .files import read_npz
        table = {k: np.atleast_2d(np.asarray(v, dtype=float))
                 for k, v in read_npz(path, "states file").items()}
    elif path.endswith(".csv"):
        with open(path, encoding="utf-8") as fh:
            header = fh.readline().strip().split(",")
        data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
        if data.shape[1] != len(header):
            raise CommandError(f"{path}: {data.shape[1]} columns of data but {len(header)} names")
        groups = {}
        for col, name in enumerate(header):
            base, _, idx = name.rpartition("_")
            if not idx.isdigit():
                raise CommandError(f"{path}: column {name!r} is not of the form <name>_<index>")
            groups.setdefault(base, []).append((int(idx), col))
        table = {k: data[:, [c for _, c in sorted(v)]] for k, v in groups.items()}
    else:
        raise CommandError(f"{path}: expected a .npz or .csv file")
    missing = [k for k in required if k not in table]
    if missing:
        raise CommandError(f"{path}: missing {', '.join(missing)} (has {', '.join(sorted(table))})")
    return table


def write_table(path, table):
    """{name: (B, k) array} -> .npz (arrays by name) or .csv (columns <name>_<k>), atomically."""
    from .files import atomic_write
    if path.endswith(".npz"):
        with atomic_write(path, "wb") as fh:
            np.savez_compressed(fh, **table)
    elif path.endswith(".csv"):
        names, cols = [], []
        for k, v in table.items():
            v = np.atleast_2d(v).reshape(len(v), -1)
            names += [f"{k}_{j}" for j in range(v.shape[1])]
            cols.append(v)
        with atomic_write(path, "w", encoding="utf-8", newline="") as fh:
            np.savetxt(fh, np.hstack(cols), delimiter=",", header=",".join(names), comments="")
    else:
        raise CommandError(f"{path}: expected a .npz or .csv output file")


def _outputs(*outputs, **inputs):
    """Before the work: refuse outputs that would overwrite one of the command's inputs
    (CommandError naming it: robot, plan or states) or that cannot be written (OSError)."""
    from .files import check_output, refuse_overwrite
    for out in outputs:
        check_output(out)
        try:
            refuse_overwrite(out, **{f"{k} file": v for k, v in inputs.items()
                                     if v is not None and not (k == "robot" and is_embedded(v))})
        except ValueError as exc:
            raise CommandError(str(exc)) from None


def _rel(x, y):
    from .bench import _rel as rel
    return rel(x, y)


# ------------------------------------------------------------------------------------ demo


def cmd_demo(args):
    """End-to-end on the embedded humanoid: offline plans, ID/FD/Delassus/estimation online,
    compared with the recursive algorithms and with Pinocchio."""
    import sparsedyn as sd
    from . import models

    t_start = time.perf_counter()
    model = models.humanoid()
    B = args.batch
    rng = np.random.default_rng(args.seed)
    q = model.random_configuration(rng, batch=B)
    v = rng.normal(size=(B, model.nv))
    a = rng.normal(size=(B, model.nv))
    f_ext = {"l_sole": rng.normal(size=(B, 6)), "r_sole": rng.normal(size=(B, 6))}
    print(f"model: {model}  ({len(model.frames)} link frames); batch of {B} random states\n")

    print("offline: compile the sparse plans (worst-case pattern, orderings, symbolic LU)")
    plans = {}
    for key in ("id", "fd"):
        problem = make_problem(model, key, f_ext.keys())
        plan, t = _timeit(lambda: sd.compile(problem), repeat=1)
        s = plan.stats
        plans[key] = plan
        print(f"  {problem.name:17s} D {s['n_rows']}x{s['n_cols']}  nnz(D) {s['nnz_D']:5d}  "
              f"nnz(L+U) {s['nnz_LU']:5d}  fill {s['fill']:5d}  flops {s['flops']:6d}  "
              f"ordering {s['ordering']!r}  ({t:.1f} s)")

    contacts = [sd.Contact("l_sole", "6d"), sd.Contact("r_sole", "6d")] + [
        sd.Contact(f"{s}_{f}_tip", "3d") for s in "lr" for f in ("thumb", "index", "middle")]
    estimation = _EstimationDemo(sd, model, q, v, rng)

    # first answers, checked: on a fresh machine from the NumPy route while numba compiles the
    # kernels in background processes, all at once (sparsedyn/jit.py); the timings wait for them
    print("\nonline, first answers:")
    w2 = {k: w[:2] for k, w in f_ext.items()}
    tau2 = plans["id"].solve(q[:2], v[:2], qdd=a[:2], f_ext=w2)["tau"]
    qdd2 = plans["fd"].solve(q[:2], v[:2], tau=tau2, f_ext=w2)["qdd"]
    lam2 = sd.delassus(model, q[:2], contacts, method="pv-osimr")
    est2 = estimation.solve(2)
    print(f"  sparse ID vs RNEA rel {_rel(tau2, sd.rnea(model, q[:2], v[:2], a[:2], f_ext=w2)):.1e}, "
          f"sparse FD vs the accelerations rel {_rel(qdd2, a[:2]):.1e}, Delassus vs dense "
          f"J M^-1 J^T rel {_rel(lam2, sd.delassus(model, q[:2], contacts, method='dense')):.1e}, "
          f"estimated tau rel {est2:.1e}")
    tau_rnea, t_rnea = _timeit(lambda: sd.rnea(model, q, v, a, f_ext=f_ext))
    print(f"  RNEA {1e6 * t_rnea / B:8.2f} us per state (NumPy baseline)")
    _wait_for_kernels(sd)

    print("\nonline, per state (batched):")
    res_id, t_id = _timeit(lambda: plans["id"].solve(q, v, qdd=a, f_ext=f_ext))
    tau = res_id["tau"]
    res_fd, t_fd = _timeit(lambda: plans["fd"].solve(q, v, tau=tau, f_ext=f_ext))
    qdd_aba, t_aba = _timeit(lambda: sd.aba(model, q, v, tau, f_ext=f_ext))
    print(f"  sparse ID  {1e6 * t_id / B:8.2f} us   |tau - rnea| rel {_rel(tau, tau_rnea):.1e}")
    print(f"  sparse FD  {1e6 * t_fd / B:8.2f} us   |qdd - a| rel {_rel(res_fd['qdd'], a):.1e}  "
          f"(aba: {_rel(qdd_aba, a):.1e})")
    print(f"  RNEA       {1e6 * t_rnea / B:8.2f} us   ABA {1e6 * t_aba / B:8.2f} us (NumPy baselines)")
    lam, t_del = _timeit(lambda: sd.delassus(model, q, contacts, method="pv-osimr"))
    lam_dense = sd.delassus(model, q[:8], contacts, method="dense")
    print(f"  Delassus (PV-OSIMr, feet 6D + 6 fingertips 3D, m = {lam.shape[-1]}) "
          f"{1e6 * t_del / B:8.2f} us   vs dense J M^-1 J^T rel {_rel(lam[:8], lam_dense):.1e}")
    with sd.count_operations() as ops_rnea:
        sd.rnea(model, q[0], v[0], a[0])
    with sd.count_operations() as ops_osimr:
        sd.delassus(model, q[0], contacts, method="pv-osimr")
    print(f"  operation counts per state: RNEA {ops_rnea.flops}, sparse ID LU {plans['id'].stats['flops']}, "
          f"sparse FD LU {plans['fd'].stats['flops']}, PV-OSIMr {ops_osimr.flops}")
    estimation.report()
    _demo_pinocchio(model, q, v, a, tau, res_fd["qdd"], f_ext, t_id, t_fd)
    print(f"\ndone in {time.perf_counter() - t_start:.1f} s")
    return 0


def _wait_for_kernels(sd):
    """Wait for the numba kernels compiling in the background (first run on a machine only)."""
    from . import jit
    if jit.compiling():
        t0 = time.perf_counter()
        sd.wait_for_kernels()
        print(f"  (first run here: the answers so far came from NumPy while numba compiled its "
              f"kernels, {time.perf_counter() - t0:.0f} s more)")


class _EstimationDemo:
    """Joint torques and foot wrenches from ankle F/T sensors + joint accelerations (MAP/least
    squares: the set is over-determined by 6), readings simulated from the RNEA ground truth:
    planned here, solve(n) on the first n samples (tau's relative error), report() timed."""

    def __init__(self, sd, model, q, v, rng):
        from .estimation import EstimationProblem, compile_estimation
        from .sensors import ForceTorque, JointAccelerations, ground_truth
        B = self.B = min(len(q), 64)
        self.w = {"l_foot": rng.normal(size=(B, 6)) * [20, 20, 200, 5, 5, 2],
                  "r_foot": rng.normal(size=(B, 6)) * [20, 20, 200, 5, 5, 2]}
        sensors = [JointAccelerations(), ForceTorque("l_foot_ft_sensor"),
                   ForceTorque("r_foot_ft_sensor")]
        self.problem = EstimationProblem(model, sensors, unknown_wrenches=["l_foot", "r_foot"])
        self.plan = compile_estimation(self.problem)
        self.tau_true = rng.normal(size=(B, model.nv)) * 10
        self.tau_true[:, :6] = 0.0                             # the floating base is unactuated
        qdd = sd.aba(model, q[:B], v[:B], self.tau_true, f_ext=self.w)   # a motion consistent with it
        truth = ground_truth(model, q[:B], v[:B], qdd, f_ext=self.w)
        self.readings = {s.name: s.simulate(model, q[:B], v[:B], truth) for s in sensors}
        self.q, self.v = q[:B], v[:B]

    def solve(self, n):
        est = self.plan.solve(self.q[:n], self.v[:n], {k: r[:n] for k, r in self.readings.items()})
        return _rel(est["tau"], self.tau_true[:n])

    def report(self):
        est, t_est = _timeit(lambda: self.plan.solve(self.q, self.v, self.readings))
        shape = self.problem.shape
        print(f"  estimation (ankle F/T + joint accelerations, unknown foot wrenches, {shape[0]} "
              f"rows x {shape[1]} unknowns): {1e6 * t_est / self.B:8.2f} us   tau rel err "
              f"{_rel(est['tau'], self.tau_true):.1e}, l_foot wrench rel err "
              f"{_rel(est.wrench('l_foot'), self.w['l_foot']):.1e}")


def _demo_pinocchio(model, q, v, a, tau, qdd_fd, f_ext, t_id, t_fd):
    from . import models
    from .bench import pinocchio_twin
    try:
        pin, pm, pin_q = pinocchio_twin(model, models.HUMANOID_URDF, True)
    except ImportError:
        print("\npinocchio is not installed: skipping the comparison (pip install -e .[test])")
        return
    pd = pm.createData()
    B = len(q)

    def pin_fext(b):
        fext = [pin.Force.Zero() for _ in range(pm.njoints)]
        for name, w in f_ext.items():
            fr = pm.frames[pm.getFrameId(name, pin.BODY)]
            fext[fr.parentJoint] += fr.placement.act(pin.Force(w[b]))
        return fext

    pqs = [pin_q(q[b]) for b in range(B)]
    fexts = [pin_fext(b) for b in range(B)]
    tau_p, tp_rnea = _timeit(lambda: np.array([pin.rnea(pm, pd, pqs[b], v[b], a[b], fexts[b]) for b in range(B)]))
    qdd_p, tp_aba = _timeit(lambda: np.array([pin.aba(pm, pd, pqs[b], v[b], tau[b], fexts[b]) for b in range(B)]))
    print("\ncomparison with Pinocchio (rnea/aba called per state from Python, same states):")
    print(f"  sparse ID vs pin.rnea: max rel err {_rel(tau, tau_p):.1e}, "
          f"time ratio sparsedyn/pinocchio {t_id / tp_rnea:6.2f}")
    print(f"  sparse FD vs pin.aba:  max rel err {_rel(qdd_fd, qdd_p):.1e}, "
          f"time ratio sparsedyn/pinocchio {t_fd / tp_aba:6.2f}")


def cmd_warmup(args):
    """Compile every numba kernel once into numba's on-disk cache (run.sh does this after
    installing), so that later runs, the demo included, start in seconds. It starts from an
    empty cache: numba keys each cached kernel on its own source file only, so a kernel that
    compiles in another module's functions would keep their old code after that module
    changed (an upgrade, an edit)."""
    import sparsedyn as sd
    from . import jit, jit_warm
    import numba
    caches = [Path(sd.__file__).parent.rglob("__pycache__/*.nb[ic]")]
    if numba.config.CACHE_DIR:                      # NUMBA_CACHE_DIR (run.sh's other venvs)
        caches.append(Path(numba.config.CACHE_DIR).rglob("*.nb[ic]"))
    for cached in (c for found in caches for c in found):
        cached.unlink(missing_ok=True)
    t0 = time.perf_counter()
    for warm in jit_warm.ALL:          # each family of kernels, on one thread and on two
        jit.compile_now(f"{warm.__module__}:{warm.__name__}")
    print(f"numba kernels compiled and cached ({time.perf_counter() - t0:.0f} s)")
    return 0


# ------------------------------------------------------------------------------------ compile / solve


def ordering_names(problem):
    """The --ordering names for a problem: auto, the planner's, Nori's structural order."""
    from .planner.orderings import KNOWN_ORDERINGS
    return ("auto",) + KNOWN_ORDERINGS + (STRUCTURAL[problem],)


def _check_ordering(name, problem):
    if name in ordering_names(problem):
        return
    other = [p for p, order in STRUCTURAL.items() if order == name]
    if other:
        raise CommandError(f"--ordering {name!r}: Nori's structural order of --problem "
                           f"{other[0]}, not {problem}")
    raise CommandError(f"--ordering {name!r}: unknown; known for --problem {problem}: "
                       f"{', '.join(ordering_names(problem))}")


def cmd_compile(args):
    import sparsedyn as sd
    from tqdm import tqdm
    _check_ordering(args.ordering, args.problem)
    _outputs(args.output, robot=args.robot)
    model = load_robot(args.robot, args.floating_base)
    problem = make_problem(model, args.problem, args.f_ext or ())
    bar = tqdm(total=1, desc="orderings", unit="ordering", disable=not args.progress, file=sys.stderr)

    def progress(name, index, total):
        bar.total = total
        bar.set_postfix_str(name)
        bar.n = index
        bar.refresh()
    plan = sd.compile(problem, ordering=args.ordering, progress=progress)
    bar.n = bar.total
    bar.close()
    print(f"{problem!r}: D {plan.stats['n_rows']}x{plan.stats['n_cols']}, nnz {plan.stats['nnz_D']}")
    print(f"{'ordering':16s} {'nnz(L+U)':>9s} {'fill':>7s} {'flops':>8s} {'time [s]':>9s}  note")
    for row in sorted(plan.table, key=lambda r: (not r["pivot_safe"], r["flops"])):
        mark = "*" if row["name"] == plan.stats["ordering"] else " "
        if row["pivot_safe"]:
            print(f"{mark}{row['name']:15s} {row['nnz_LU']:9d} {row['fill']:7d} {row['flops']:8d} "
                  f"{row['time_s']:9.3f}")
        else:
            print(f" {row['name']:15s} {'-':>9s} {'-':>7s} {'-':>8s} {row['time_s']:9.3f}  {row['note']}")
    plan.save(args.output)
    print(f"chosen: {plan.stats['ordering']!r} ({plan.stats['flops']} flops per state); wrote {args.output}")
    return 0


def _model_for_plan(args):
    """The model a plan file was compiled for: args.robot, or the embedded model (either base)
    whose fingerprint the plan stores."""
    header = _plan_header(args.plan)
    name = header["model"].get("name")
    if args.robot:
        return load_robot(args.robot, args.floating_base)
    how = ("pass it as ROBOT (sparsedyn spy ROBOT --plan PLAN)" if args.command == "spy"
           else "pass its URDF with --robot")
    embedded = {"sdyn_humanoid": "humanoid", "sdyn_hand": "hand"}.get(name, name)
    if not (isinstance(embedded, str) and is_embedded(embedded)):
        raise CommandError(f"{args.plan}: compiled for model {name!r}, not an embedded one; {how}")
    bases = (False, True) if args.floating_base is None else (args.floating_base,)
    for floating in bases:
        if floating and embedded.startswith("chain"):
            continue
        model = load_robot(embedded, floating)
        if model.fingerprint() == header["model"].get("fingerprint"):
            return model
    base = {None: "", True: " floating-base", False: " fixed-base"}[args.floating_base]
    raise CommandError(f"{args.plan}: compiled for a model named {name!r} that is not this "
                       f"sparsedyn's embedded{base} {embedded}; {how}")


def cmd_solve(args):
    from .problems import load_plan
    _outputs(args.output, plan=args.plan, states=args.states, robot=args.robot)
    model = _model_for_plan(args)
    plan = load_plan(args.plan, model)
    given = plan.problem.given
    table = read_table(args.states, ["q", "v", given])
    f_ext = {k[5:]: v for k, v in table.items() if k.startswith("fext_")}
    res = plan.solve(table["q"], table["v"], **{given: table[given]}, f_ext=f_ext or None)
    out_name = plan.problem.outputs[0]
    write_table(args.output, {out_name: res[out_name]})
    print(f"{plan.problem!r}: solved {len(table['q'])} states; wrote {out_name} to {args.output}")
    return 0


def cmd_estimate(args):
    try:
        from .estimation.logs import run_estimate_command
    except ImportError as exc:
        raise CommandError(f"estimation is not available: {exc}") from None
    return int(run_estimate_command(args) or 0)


# ------------------------------------------------------------------------------------ spy / report


def spy_figure(plan, path, title=None):
    """D in natural order, P D Q, and L+U with the fill-in highlighted (PNG or SVG by extension)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from .files import atomic_path
    from .planner.symbolic import symbolic_lu

    fact = plan.factorization
    D = plan.system.pattern.tocsr()
    PDQ = D[fact.row_perm][:, fact.col_perm].tocoo()
    sym = symbolic_lu(plan.system.pattern, fact.row_perm, fact.col_perm, fact.constant_values)
    LU = (sym.L + sym.U).tocoo()
    original = set(zip(PDQ.row.tolist(), PDQ.col.tolist()))
    is_fill = np.array([(r, c) not in original for r, c in zip(LU.row.tolist(), LU.col.tolist())], bool)
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.2))
    n = D.shape[0]
    ms = max(0.2, min(3.0, 300.0 / n))
    Dc = D.tocoo()
    axes[0].plot(Dc.col, Dc.row, "s", ms=ms, color="k")
    axes[0].set_title(f"D (natural order), nnz {D.nnz}")
    axes[1].plot(PDQ.col, PDQ.row, "s", ms=ms, color="k")
    axes[1].set_title(f"P D Q ({fact.stats['ordering']})")
    axes[2].plot(LU.col[~is_fill], LU.row[~is_fill], "s", ms=ms, color="k", label="entries of P D Q")
    axes[2].plot(LU.col[is_fill], LU.row[is_fill], "s", ms=ms, color="tab:red", label=f"fill-in ({int(is_fill.sum())})")
    axes[2].set_title(f"L+U, nnz {LU.nnz}, flops {fact.stats['flops']}")
    axes[2].legend(loc="upper right", fontsize=8, markerscale=3)
    for ax in axes:
        ax.set_xlim(-1, n)
        ax.set_ylim(n, -1)
        ax.set_aspect("equal")
        ax.tick_params(labelsize=7)
    fig.suptitle(title or repr(plan.problem))
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110)
    finally:
        plt.close(fig)
    return int(is_fill.sum())


def cmd_spy(args):
    import sparsedyn as sd
    _outputs(args.output, plan=args.plan, robot=args.robot)
    if args.plan:
        from .problems import load_plan
        ignored = [opt for opt, given in (("--problem", args.problem), ("--f-ext", args.f_ext),
                                          ("--ordering", args.ordering)) if given is not None]
        if ignored:
            raise CommandError(f"{', '.join(ignored)}: given with --plan, whose plan fixes "
                               f"them (they apply when compiling ROBOT)")
        model = _model_for_plan(args)
        plan = load_plan(args.plan, model)
    else:
        if not args.robot:
            raise CommandError("spy: give a ROBOT (URDF or embedded name) or --plan PLAN")
        problem = args.problem or "fd"
        _check_ordering(args.ordering or "auto", problem)
        model = load_robot(args.robot, args.floating_base)
        plan = sd.compile(make_problem(model, problem, args.f_ext or ()),
                          ordering=args.ordering or "auto")
    fill = spy_figure(plan, args.output)
    print(f"{plan.problem!r}: ordering {plan.stats['ordering']!r}, fill {fill}; wrote {args.output}")
    return 0


def cmd_bench(args):
    from .bench import run_benchmarks
    rows = run_benchmarks(args.robot, batch=args.batch, floating_base=args.floating_base,
                          repeat=args.repeat)
    print(format_bench(rows, args.batch))
    return 0


def format_bench(rows, batch):
    lines = [f"per-state times, batch {batch} (peers measured in the same run)", "",
             "| computation | sparsedyn [us] | peer | peer [us] | ratio | max rel err |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['what']} | {r['ours_us']:.2f} | {r['peer']} | {r['peer_us']:.2f} | "
                     f"{r['ours_us'] / r['peer_us']:.2f} | {r['err']:.1e} |")
    return "\n".join(lines)


def cmd_report(args):
    """One Markdown (or HTML) page: plan statistics, orderings, spy plots, Delassus counts, bench."""
    import sparsedyn as sd
    from .bench import run_benchmarks
    from .files import atomic_write
    out = args.output
    base, ext = os.path.splitext(out)
    if ext not in (".md", ".html"):
        raise CommandError(f"-o {out!r}: expected a .md or .html report file")
    pngs = [f"{base}_spy_{key}.png" for key in ("id", "fd")]
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    _outputs(out, *pngs, robot=args.robot)
    model = load_robot(args.robot, args.floating_base)
    lines = [f"# sparsedyn report: {model.name}", "",
             f"{model!r}; {len(model.frames)} link frames; joints: {', '.join(model.joint_names[:8])}"
             f"{' ...' if len(model.joint_names) > 8 else ''}", ""]
    for key, png in zip(("id", "fd"), pngs):
        plan = sd.compile(make_problem(model, key))
        spy_figure(plan, png)
        s = plan.stats
        lines += [f"## {plan.problem.name}", "",
                  f"D {s['n_rows']}x{s['n_cols']}, nnz {s['nnz_D']}; chosen ordering `{s['ordering']}`: "
                  f"nnz(L+U) {s['nnz_LU']}, fill {s['fill']}, {s['flops']} flops per state "
                  f"(+ {s['assembly_flops']} to assemble D and b).", "",
                  "| ordering | nnz(L+U) | fill | flops | planning time [s] |", "|---|---|---|---|---|"]
        for row in sorted(plan.table, key=lambda r: (not r["pivot_safe"], r["flops"])):
            if row["pivot_safe"]:
                lines.append(f"| {row['name']} | {row['nnz_LU']} | {row['fill']} | {row['flops']} | {row['time_s']:.3f} |")
            else:
                lines.append(f"| {row['name']} | - | - | - | not pivot-safe: {row['note']} |")
        lines += ["", f"![spy {key}]({os.path.basename(png)})", ""]
    try:
        rows = run_benchmarks(args.robot, batch=args.batch, floating_base=args.floating_base, repeat=2)
        lines += ["## Benchmark", "", *format_bench(rows, args.batch).split("\n"), ""]
    except ImportError as exc:
        lines += ["## Benchmark", "", f"skipped: {exc}", ""]
    text = "\n".join(lines)
    if out.endswith(".html"):
        text = markdown_to_html(lines)
    with atomic_write(out, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"wrote {out} (+ spy plots {', '.join(pngs)})")
    return 0


def markdown_to_html(lines):
    """The small Markdown subset the report writes (headings, paragraphs, tables, images)."""
    import html
    body, table = [], []

    def flush():
        if table:
            rows = ["<tr>" + "".join(f"<{tag}>{html.escape(c.strip())}</{tag}>"
                                     for c in row.strip().strip("|").split("|")) + "</tr>"
                    for row, tag in zip(table, ["th"] + ["td"] * len(table))]
            body.append("<table>" + "".join(rows) + "</table>")
            table.clear()
    for line in lines:
        if line.startswith("|"):
            if not set(line.replace(" ", "")) <= set("|-"):
                table.append(line)
            continue
        flush()
        if line.startswith("!["):
            body.append(f'<img src="{html.escape(line[line.index("(") + 1:-1])}" style="max-width:100%">')
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line.lstrip('# '))}</h{level}>")
        elif line:
            body.append(f"<p>{html.escape(line)}</p>")
    flush()
    style = ("<style>body{font-family:sans-serif;max-width:1100px;margin:auto}table{border-collapse:"
             "collapse}td,th{border:1px solid #999;padding:2px 8px;text-align:right}</style>")
    return "<!doctype html><meta charset=utf-8><title>sparsedyn report</title>" + style + "\n" + "\n".join(body)


# ------------------------------------------------------------------------------------ parser


def _robot_args(p, required=True):
    if required:
        p.add_argument("robot", help="URDF or MJCF path, or embedded model (humanoid, hand, chainN)")
    else:
        p.add_argument("robot", nargs="?", help="URDF or MJCF path, or embedded model (humanoid, hand, chainN)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--floating-base", dest="floating_base", action="store_true", default=None,
                   help="put a free-flyer at the root (default: only for the embedded humanoid)")
    g.add_argument("--fixed-base", dest="floating_base", action="store_false",
                   help="weld the root link to the world")


def _ordering_help():
    from .planner.orderings import KNOWN_ORDERINGS
    return (f"auto (the cheapest pivot-safe one, the default; candidates that cannot win are not "
            f"built), all (as auto, every candidate built) or one of {', '.join(KNOWN_ORDERINGS)}"
            f", {STRUCTURAL['id']} (--problem id only), {STRUCTURAL['fd']} (--problem fd only)")


def build_parser():
    ordering_help = _ordering_help()
    parser = argparse.ArgumentParser(prog="sparsedyn", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("demo", help="end-to-end demo on the embedded humanoid (under a minute)")
    p.add_argument("--batch", type=positive_int, default=256,
                   help="number of random states (default 256)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("warmup", help="compile the numba kernels into the on-disk cache (once)")
    p.set_defaults(func=cmd_warmup)

    p = sub.add_parser("compile", help="offline: plan the sparse factorization of a problem")
    _robot_args(p)
    p.add_argument("--problem", default="id", choices=sorted(PROBLEMS), help="id or fd (default id)")
    p.add_argument("--ordering", default="auto", help=ordering_help)
    p.add_argument("--f-ext", nargs="*", metavar="LINK", help="links carrying external wrenches")
    p.add_argument("-o", "--output", required=True, help="plan file to write (.npz)")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("solve", help="online: solve a compiled plan for a file of states")
    p.add_argument("plan", help="plan file written by `sparsedyn compile`")
    p.add_argument("--states", required=True,
                   help="NPZ (arrays q, v, qdd|tau, optional fext_<link>) or CSV (columns q_0.., v_0.., ...)")
    p.add_argument("--robot", help="URDF/embedded model the plan was compiled for (embedded: automatic)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--floating-base", dest="floating_base", action="store_true", default=None)
    g.add_argument("--fixed-base", dest="floating_base", action="store_false")
    p.add_argument("-o", "--output", required=True, help="output file (.npz or .csv)")
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("estimate", help="estimate joint torques and contact wrenches from a sensor log")
    try:
        from .estimation.logs import add_estimate_arguments
        add_estimate_arguments(p)
    except ImportError:
        pass
    p.set_defaults(func=cmd_estimate)

    p = sub.add_parser("spy", help="plot D, P D Q and L+U with the fill-in (PNG/SVG)")
    _robot_args(p, required=False)
    p.add_argument("--plan", help="a saved plan instead of compiling ROBOT (ROBOT: the model it "
                                   "was compiled for, automatic for the embedded ones)")
    p.add_argument("--problem", choices=sorted(PROBLEMS), help="id or fd (default fd)")
    p.add_argument("--ordering", help=ordering_help)
    p.add_argument("--f-ext", nargs="*", metavar="LINK", help="links carrying external wrenches")
    p.add_argument("-o", "--output", required=True, help="image file (.png or .svg)")
    p.set_defaults(func=cmd_spy)

    p = sub.add_parser("bench", help="side-by-side per-state times against Pinocchio (same run)")
    _robot_args(p, required=False)
    p.add_argument("--batch", type=positive_int, default=1024)
    p.add_argument("--repeat", type=positive_int, default=3)
    p.set_defaults(func=cmd_bench, robot=None)

    p = sub.add_parser("report", help="one Markdown/HTML page with plan statistics, spy plots, benchmark")
    _robot_args(p)
    p.add_argument("--batch", type=positive_int, default=256)
    p.add_argument("-o", "--output", required=True, help="report file (.md or .html)")
    p.set_defaults(func=cmd_report)
    return parser


class Interrupted(KeyboardInterrupt):
    """SIGTERM, turned into an exception so that every output being written is discarded
    (sparsedyn.files) and the temporary files are removed, as on Ctrl-C."""


def _interrupt(signum, frame):
    raise Interrupted(signum)


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "command", None) == "bench" and args.robot is None:
        args.robot = "humanoid"
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return int(args.func(args) or 0)
    except CommandError as exc:
        print(f"sparsedyn {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        signum = exc.args[0] if isinstance(exc, Interrupted) else signal.SIGINT
        print(f"sparsedyn {args.command}: interrupted ({signal.Signals(signum).name}); "
              f"outputs not completed were not written", file=sys.stderr)
        return 128 + signum
    except Exception as exc:  # noqa: BLE001 - the CLI promises one line, never a traceback
        from .errors import SparsedynError
        known = (SparsedynError, ValueError, KeyError, OSError, ArithmeticError)
        if not isinstance(exc, known) or os.environ.get("SPARSEDYN_TRACEBACK"):
            raise
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"sparsedyn {args.command}: error: {type(exc).__name__}: {msg}", file=sys.stderr)
        return 2
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
