"""The `sparsedyn estimate` engine: estimate torques and wrenches for every sample of a recorded
log, in batches, without holding the log in memory (seed 001, Sec. VI, applied offline at scale).

Input log (one sample per row):
  CSV   header row, then numbers; columns  q_0..q_{nq-1}, v_0..v_{nv-1}, <sensor>_0..<sensor>_{k-1}
        for every sensor with rows (pseudo-measurements such as base_unactuated or *_slippery may
        be omitted: they default to 0); other columns (e.g. t) are ignored. Streamed in chunks.
  NPZ   arrays q (N, nq), v (N, nv), <sensor> (N, k) (loaded per array: use a directory for logs
        larger than memory)
  DIR   a directory of q.npy, v.npy, <sensor>.npy, memory-mapped (np.load(mmap_mode="r")).
Output (by extension):
  .csv  streamed rows: row, ok, tau_0..tau_{nv-1}, <link>_wrench_0..5 per wrench link
        (linear-first, link frame); bad input rows are written with ok = -1 and NaN.
  .npz  arrays row, ok, tau (N, nv), wrench_<link> (N, 6): filled batch by batch in memory-mapped
        .npy files next to the output, zipped at the end.
Bad input (a row with the wrong number of fields, non-numbers, NaN/inf, a non-unit quaternion) is
reported with its 0-based data row number and skipped; every good row is processed. A missing
column is an error naming it (no row could be processed).

Scheduler: None runs in-process; a Dask scheduler address ("tcp://host:8786") sends batches to the
cluster (needs `pip install sparsedyn[dask]`); workers rebuild the plan from the problem `spec`
(problem_from_spec) once each, so plans never travel over the network.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
import zipfile

import numpy as np

SPEC_SENSORS = ("JointAccelerations", "JointTorques", "UnactuatedBase", "ExternalWrench",
                "ForceTorque", "LoadCells", "ZeroTangentialForce", "Accelerometer", "Gyroscope")


# ------------------------------------------------------------------------------ problem spec

def problem_from_spec(spec):
    """EstimationProblem from a plain dict (JSON-able): {"model": "humanoid" | URDF path,
    "floating_base": bool, "sensors": [{"type": "ForceTorque", "joint": ..., "name": ...}, ...],
    "unknown_wrenches": [...]}. Sensor keys are the constructor arguments."""
    from .. import sensors as S
    from ..model import load_urdf
    from ..models import humanoid
    from .problem import EstimationProblem
    if isinstance(spec, (str, os.PathLike)):
        with open(spec, "r", encoding="utf-8") as fh:
            spec = json.load(fh)
    name = spec.get("model")
    if name is None:
        raise ValueError("spec: missing 'model' (\"humanoid\" or a URDF path)")
    fb = bool(spec.get("floating_base", True))
    model = humanoid(floating_base=fb) if name == "humanoid" else load_urdf(name, floating_base=fb)
    sensors = []
    for k, item in enumerate(spec.get("sensors", [])):
        item = dict(item)
        kind = item.pop("type", None)
        if kind not in SPEC_SENSORS:
            raise ValueError(f"spec: sensors[{k}] has unknown type {kind!r} (known: {SPEC_SENSORS})")
        if "placement" in item and item["placement"] is not None:
            item["placement"] = np.asarray(item["placement"], dtype=float)
        sensors.append(getattr(S, kind)(**item))
    return EstimationProblem(model, sensors, unknown_wrenches=spec.get("unknown_wrenches", ()))


_WORKER_PLANS = {}


def _plan_from_spec(spec_json, method):
    key = (spec_json, method)
    if key not in _WORKER_PLANS:
        from .plan import compile_estimation
        _WORKER_PLANS[key] = compile_estimation(problem_from_spec(json.loads(spec_json)), method=method)
    return _WORKER_PLANS[key]


# ------------------------------------------------------------------------------ readers

class _Columns:
    """Where each input of the plan sits in a flat row."""

    def __init__(self, plan, names, source):
        model = plan.model
        self.sensors = [s for s in plan.problem.sensors if s.rows or s.default_reading is None]
        index = {n: k for k, n in enumerate(names)}
        need = {"q": model.nq, "v": model.nv}
        optional = set()
        for s in self.sensors:
            need[s.name] = s.size
            if s.default_reading is not None:
                optional.add(s.name)
        self.slices, missing = {}, []
        for key, size in need.items():
            cols = [index.get(f"{key}_{k}") for k in range(size)]
            if any(c is None for c in cols):
                if key not in optional:
                    missing += [f"{key}_{k}" for k, c in enumerate(cols) if c is None]
                continue
            self.slices[key] = np.asarray(cols)
        if missing:
            raise KeyError(f"{source}: missing columns {missing[:8]}{' ...' if len(missing) > 8 else ''}")

    def split(self, block):
        return {k: block[:, c] for k, c in self.slices.items()}


def _csv_chunks(path, batch_size, errors):
    """Yield (first data row number, header, float block, valid mask) chunks of a CSV file."""
    with open(path, "r", newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise ValueError(f"{path}: empty file (no header row)") from None
        yield None, header, None, None
        width = len(header)
        rows, valid, start, row_no = [], [], 0, 0
        for fields in reader:
            if not fields:
                continue
            ok = len(fields) == width
            values = np.full(width, np.nan)
            if ok:
                try:
                    values = np.array([float(x) for x in fields])
                except ValueError:
                    ok = False
                    errors.append((row_no, "non-numeric field"))
            else:
                errors.append((row_no, f"{len(fields)} fields, expected {width}"))
            rows.append(values)
            valid.append(ok)
            row_no += 1
            if len(rows) == batch_size:
                yield start, header, np.array(rows), np.array(valid)
                start, rows, valid = row_no, [], []
        if rows:
            yield start, header, np.array(rows), np.array(valid)


def _array_source(path):
    """{name: array-like (N, k)} from an NPZ file or a directory of .npy files (memory-mapped)."""
    if os.path.isdir(path):
        return {f[:-4]: np.load(os.path.join(path, f), mmap_mode="r")
                for f in sorted(os.listdir(path)) if f.endswith(".npy")}
    data = np.load(path, allow_pickle=False)
    return {k: data[k] for k in data.files}


# ------------------------------------------------------------------------------ writers

class _Writer:
    def __init__(self, path, plan, n_rows=None):
        self.path = path
        model = plan.model
        self.links = [plan.problem.wrench_links[b] for b in sorted(plan.problem.wrench_links)]
        self.nv = model.nv
        self.kind = "npz" if path.endswith(".npz") else "csv"
        if self.kind == "csv":
            self.fh = open(path, "w", newline="", encoding="utf-8")
            self.w = csv.writer(self.fh)
            self.w.writerow(["row", "ok"] + [f"tau_{k}" for k in range(self.nv)]
                            + [f"{l}_wrench_{k}" for l in self.links for k in range(6)])
        else:
            if n_rows is None:
                raise ValueError("NPZ output needs the number of rows")
            self.tmp = tempfile.mkdtemp(prefix="sparsedyn_estimate_", dir=os.path.dirname(os.path.abspath(path)))
            mm = np.lib.format.open_memmap
            self.arrays = {"row": mm(os.path.join(self.tmp, "row.npy"), "w+", np.int64, (n_rows,)),
                           "ok": mm(os.path.join(self.tmp, "ok.npy"), "w+", np.int8, (n_rows,)),
                           "tau": mm(os.path.join(self.tmp, "tau.npy"), "w+", float, (n_rows, self.nv))}
            for l in self.links:
                self.arrays[f"wrench_{l}"] = mm(os.path.join(self.tmp, f"wrench_{l}.npy"), "w+", float, (n_rows, 6))

    def write(self, rows, ok, tau, wrenches):
        if self.kind == "csv":
            block = np.column_stack([rows, ok, tau] + [wrenches[l] for l in self.links])
            for r in block:
                self.w.writerow([int(r[0]), int(r[1])] + [repr(float(x)) for x in r[2:]])
            return
        a = self.arrays
        a["row"][rows] = rows
        a["ok"][rows] = ok
        a["tau"][rows] = tau
        for l in self.links:
            a[f"wrench_{l}"][rows] = wrenches[l]

    def close(self):
        if self.kind == "csv":
            self.fh.close()
            return
        for arr in self.arrays.values():
            arr.flush()
        names = list(self.arrays)
        self.arrays = None
        with zipfile.ZipFile(self.path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for n in names:
                zf.write(os.path.join(self.tmp, n + ".npy"), n + ".npy")
        shutil.rmtree(self.tmp, ignore_errors=True)


# ------------------------------------------------------------------------------ the engine

def _solve_block(plan, cols, block, valid, first_row, errors):
    """Estimates for a block of rows; invalid rows (and rows the state checks reject) get NaN."""
    import warnings
    B = block.shape[0]
    rows = first_row + np.arange(B)
    finite = np.isfinite(block[:, np.concatenate(list(cols.slices.values()))]).all(axis=1)
    for r in np.flatnonzero(valid & ~finite):
        errors.append((int(rows[r]), "NaN or inf in a used column"))
    good = valid & finite
    tau = np.full((B, plan.model.nv), np.nan)
    wrenches = {plan.problem.wrench_links[b]: np.full((B, 6), np.nan) for b in plan.problem.wrench_links}
    status = np.where(good, 0, -1).astype(np.int8)
    idx = np.flatnonzero(good)
    if idx.size:
        data = cols.split(block[idx])
        q, v = data.pop("q"), data.pop("v")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")          # singular states are in the ok column
                est = plan.solve(q, v, data)
        except ValueError:
            # one bad state (e.g. a non-unit quaternion) must not sink the batch: row by row
            ests = []
            for k, r in enumerate(idx):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        e = plan.solve(q[k:k + 1], v[k:k + 1], {n: y[k:k + 1] for n, y in data.items()})
                    ests.append((r, e))
                except ValueError as exc:
                    errors.append((int(rows[r]), str(exc)))
                    status[r] = -1
            for r, e in ests:
                tau[r] = e["tau"][0]
                status[r] = int(e.ok[0])
                for l in wrenches:
                    wrenches[l][r] = e.wrench(l)[0]
            return rows, status, tau, wrenches
        tau[idx] = est["tau"]
        status[idx] = est.ok.astype(np.int8)
        for l in wrenches:
            wrenches[l][idx] = est.wrench(l)
    return rows, status, tau, wrenches


def _remote_block(spec_json, method, block, valid, first_row):
    plan = _plan_from_spec(spec_json, method)
    names = json.loads(spec_json)["_columns"]
    errors = []
    out = _solve_block(plan, _Columns(plan, names, "log"), block, valid, first_row, errors)
    return out, errors


def _bounded_remote(client, spec_json, method, chunks, per_worker=2):
    """Submit blocks to the cluster with a bounded number in flight and yield the results in
    input order, so a log larger than memory streams through (never all blocks at once)."""
    from collections import deque
    in_flight = max(2, per_worker * max(1, len(client.scheduler_info().get("workers", {}))))
    pending = deque()
    for start, _, block, valid in chunks:
        pending.append(client.submit(_remote_block, spec_json, method, block, valid, start, pure=False))
        if len(pending) >= in_flight:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


def estimate_log(plan_or_problem, input_path, output_path, batch_size=1024, scheduler=None,
                 progress=True, spec=None, method="auto"):
    """Estimate every sample of a log (see the module docstring for formats). Returns a summary
    {"rows", "estimated", "singular", "bad_rows": [(row, reason), ...]}.

    plan_or_problem: an EstimationPlan, an EstimationProblem (compiled here), or None with
    `spec` (problem_from_spec); a Dask `scheduler` address needs `spec` (workers rebuild the plan).
    """
    from .plan import EstimationPlan, compile_estimation
    from .problem import EstimationProblem
    if batch_size < 1:
        raise ValueError(f"batch_size: must be positive, got {batch_size}")
    if plan_or_problem is None:
        if spec is None:
            raise ValueError("plan_or_problem: give a plan, a problem or a spec")
        plan_or_problem = problem_from_spec(spec)
    plan = (plan_or_problem if isinstance(plan_or_problem, EstimationPlan)
            else compile_estimation(plan_or_problem, method=method)
            if isinstance(plan_or_problem, EstimationProblem) else None)
    if plan is None:
        raise TypeError(f"plan_or_problem: expected an EstimationPlan or EstimationProblem, got "
                        f"{type(plan_or_problem).__name__}")
    client = None
    if scheduler is not None:
        if spec is None:
            raise ValueError("scheduler: running on a Dask cluster needs `spec` (a JSON-able problem "
                             "description) so that workers can rebuild the plan")
        try:
            from distributed import Client
        except ImportError:
            raise ImportError("scheduler: Dask distributed is not installed "
                              "(pip install sparsedyn[dask])") from None
        client = Client(scheduler)
    errors = []
    is_csv = os.path.isfile(input_path) and input_path.lower().endswith(".csv")
    if is_csv:
        chunks = _csv_chunks(input_path, batch_size, errors)
        _, header, _, _ = next(chunks)
        cols = _Columns(plan, header, input_path)
        n_rows = None
        if output_path.endswith(".npz"):
            with open(input_path, "rb") as fh:
                n_rows = max(sum(1 for line in fh if line.strip()) - 1, 0)
        names = header
    else:
        arrays = _array_source(input_path)
        names, parts = [], []
        for key, arr in arrays.items():
            arr2 = arr.reshape(arr.shape[0], -1)
            names += [f"{key}_{k}" for k in range(arr2.shape[1])]
            parts.append(arr2)
        cols = _Columns(plan, names, input_path)
        n_rows = parts[0].shape[0] if parts else 0
        lengths = {k: a.shape[0] for k, a in arrays.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"{input_path}: arrays have different lengths {lengths}")

        def array_chunks():
            for start in range(0, n_rows, batch_size):
                block = np.column_stack([np.asarray(p[start:start + batch_size], dtype=float) for p in parts])
                yield start, None, block, np.ones(block.shape[0], bool)
        chunks = array_chunks()
    writer = _Writer(output_path, plan, n_rows)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=n_rows, unit="sample", desc="estimate")
    summary = {"rows": 0, "estimated": 0, "singular": 0}
    try:
        if client is None:
            results = (( _solve_block(plan, cols, block, valid, start, errors), None)
                       for start, _, block, valid in chunks)
        else:
            spec_d = dict(json.load(open(spec)) if isinstance(spec, (str, os.PathLike)) else spec)
            spec_d["_columns"] = list(names)
            spec_json = json.dumps(spec_d, sort_keys=True)
            results = _bounded_remote(client, spec_json, method, chunks)
        for (rows, status, tau, wrenches), remote_errors in results:
            if remote_errors:
                errors.extend(remote_errors)
            writer.write(rows, status, tau, wrenches)
            summary["rows"] += len(rows)
            summary["estimated"] += int((status == 1).sum())
            summary["singular"] += int((status == 0).sum())
            if bar is not None:
                bar.update(len(rows))
    finally:
        writer.close()
        if bar is not None:
            bar.close()
        if client is not None:
            client.close()
    summary["bad_rows"] = sorted(errors)
    return summary


# ------------------------------------------------------------------------------ CLI entry

def add_estimate_arguments(parser):
    """Arguments of `sparsedyn estimate` (for the lead's cli.py)."""
    parser.add_argument("spec", help="problem description (JSON: model, floating_base, sensors, "
                                     "unknown_wrenches)")
    parser.add_argument("input", help="log: .csv, .npz, or a directory of .npy files")
    parser.add_argument("output", help="estimates: .csv or .npz")
    parser.add_argument("--method", default="auto", choices=("auto", "exact", "lstsq", "map"))
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--scheduler", default=None, help="Dask scheduler address (default: local)")
    parser.add_argument("--no-progress", action="store_true")
    return parser


def run_estimate_command(args):
    """Run `sparsedyn estimate` from parsed arguments; prints a summary; returns an exit code
    (0: every row estimated, 1: some rows bad or singular)."""
    summary = estimate_log(None, args.input, args.output, batch_size=args.batch_size,
                           scheduler=args.scheduler, progress=not args.no_progress,
                           spec=args.spec, method=args.method)
    bad = summary["bad_rows"]
    print(f"estimated {summary['estimated']} of {summary['rows']} rows "
          f"({summary['singular']} singular states, {len(bad)} bad input rows) -> {args.output}")
    for row, reason in bad[:20]:
        print(f"  row {row}: {reason}")
    if len(bad) > 20:
        print(f"  ... {len(bad) - 20} more")
    return 0 if not bad and not summary["singular"] else 1


def main_estimate(argv=None):
    import argparse
    parser = add_estimate_arguments(argparse.ArgumentParser(prog="sparsedyn estimate"))
    return run_estimate_command(parser.parse_args(argv))
