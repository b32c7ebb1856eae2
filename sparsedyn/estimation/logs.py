"""The `sparsedyn estimate` engine: estimate torques and wrenches for every sample of a recorded
log, in batches, without holding the log in memory (seed 001, Sec. VI, applied offline at scale).
Readers and writers: log_io.py; column names: log_columns.py; multi-rate streams: log_align.py;
accelerations from velocities: log_derivative.py; the spec's checks and JSON Schema:
log_spec.py (`sparsedyn estimate --spec-schema` prints it).

Input log (one sample per row):
  CSV      header row, then numbers, one sample per line; columns as the spec's "columns" below
           (positional q_0..q_{nq-1}, v_0..v_{nv-1}, <sensor>_0..<sensor>_{k-1} always work);
           sensors whose readings default (base_unactuated, *_slippery) may be omitted; other
           columns are ignored; fields may be double-quoted; an empty field is NaN (a stream
           without a sample in that row, see "streams"). Streamed in chunks.
  Parquet  the same columns (numbers, booleans, timestamps: seconds; nulls are empty cells),
           read a row group at a time (needs pyarrow: pip install sparsedyn[logs]).
  NPZ      arrays q (N, nq), v (N, nv), <sensor> (N, k) (read whole, CRC-checked: use a directory
           for logs larger than memory)
  DIR      a directory of q.npy, v.npy, <sensor>.npy, memory-mapped (np.load(mmap_mode="r")).
  DataFrame (Python API) a pandas DataFrame with the columns of a CSV log.
Output (by extension), written to temporary files next to it and moved into place only when every
row is in (sparsedyn.files): an interrupted or failed run leaves no output, or the previous one.
  .csv      rows: row, ok, [time], [p, chi2, dof], tau..., wrench... [std/...] (column names:
            "output" below); bad input rows are written with ok = -1 and NaN.
  .parquet  the same columns (row int64, ok int8, the others float64; needs pyarrow).
  .npz      arrays row, ok, [time, p, chi2, dof], tau (N, nv), wrench_<link> (N, 6),
            [std_tau, std_wrench_<link>].
  None      (Python API, output=None) a pandas DataFrame of the CSV's columns, the summary in
            its attrs["summary"].
Bad input (a line with the wrong number of fields, non-numbers, a blank line of whitespace, bytes
that are not UTF-8, an unbalanced quote, NaN/inf or an empty cell in a column that is not an
aligned stream's, a non-unit quaternion) is reported with its 0-based data row number (and its
line in a CSV file), and skipped; every good row is processed. Empty lines are not rows. A
missing column is an error naming it (no row could be processed). The output may not be the log
or the spec (refused, through links and relative paths too).

Spec (JSON object; every key is checked, an unknown one is refused by name; JSON Schema:
`sparsedyn estimate --spec-schema`):
  model             "humanoid", "hand", "chainN" (embedded models) or a URDF path (required)
  floating_base     bool (default: true for a URDF, the embedded model's own otherwise; chainN
                    has no floating-base variant)
  sensors           [{"type": one of SPEC_SENSORS, <constructor argument>: value, ...}, ...]
  unknown_wrenches  [link, ...]
  unactuated_base   bool or null (EstimationProblem's; default: true for a floating base)
  covariances       {"dynamics": var, <sensor name>: var or [var, ...], "prior": var, [...] or
                    {kind: var}, "prior_mean": value or [...]}: the MAP estimate's
                    (compile_estimation); method "auto" becomes "map", "exact"/"lstsq" refuse them
  columns           {<input name>: <the log's column name>}: the log's own names. Input names:
                    "q/<joint>", "v/<joint>" (one-coordinate joints; "q/<joint>/<k>" for more),
                    "<sensor>/<k>" (k = 0..size-1; "qdd/<joint>" for JointAccelerations), or the
                    positional "q_<k>", "v_<k>", "<sensor>_<k>". A column named like an input
                    name is found without a mapping; the positional names always work.
  units             {"angles": "deg"|"rad", "time": "s"|"ms"|"us"|"ns"}: revolute joints' q, v
                    and qdd in degrees (as YARP logs them) are converted, default "rad"; the
                    time column's unit (ROS CSV exports: "ns"), default "s"
  time              the log's timestamp column: carried to the output (its "time" column, in
                    seconds); needed by "linear" streams and "accelerations"
  contacts          {<unknown wrench link>: <column>}: per row, the link is in contact where the
                    column is nonzero, in the air (zero wrench) where it is 0 (the plan is
                    compiled with per_sample=True; method "auto" becomes "map" or "lstsq")
  streams           {"q" | "v" | <sensor>: {"align": "last"|"linear"}}: an input logged at its
                    own (slower) rate, its cells empty (or NaN) in rows without a new sample:
                    "last" holds the last sample, "linear" interpolates by time between the
                    samples before and after (a quaternion renormalised). Rows before a stream's
                    first sample (and, for "linear", after its last) are bad rows: never
                    extrapolated. A sample with only some of its cells is a bad row.
  accelerations     {"from": "velocities", "window": odd rows, "order": polynomial order,
                    "tolerance": relative (default 1e-3)}: the JointAccelerations sensor reads
                    the Savitzky-Golay derivative of the velocities (the log needs no qdd
                    columns; its own, if any, are not read) with the time column's step, which must be uniform to the
                    tolerance (else an error naming the rows). Runs of good rows are filtered
                    separately; their first and last window // 2 rows use the polynomial of the
                    first / last window (scipy.signal.savgol_filter's mode="interp"); rows of a
                    run shorter than the window are bad rows.
  output            "positional" (default: tau_<k>, <link>_wrench_<k>) or "named": tau/<joint>,
                    wrench/<link>/fx..mz, and the per-row residual check (Estimate.consistency):
                    p, the consistency probability (NaN when the system has no redundancy),
                    chi2, the weighted residual, and dof, its degrees of freedom
  std               true (with output "named", a "map" or "lstsq" plan): also the posterior
                    standard deviations std/tau/<joint> and std/wrench/<link>/fx..mz (NaN where
                    the data do not determine the row's estimate)

Scheduler: None runs in-process; a Dask scheduler address ("tcp://host:8786") sends batches to the
cluster (needs `pip install sparsedyn[dask]`); workers rebuild the plan from the problem `spec`
(plan_from_spec) once each, so plans never travel over the network.
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np

from ..files import atomic_path, check_output, refuse_overwrite
from .log_columns import LogColumns
from .log_io import OUTPUT_KINDS, WRENCH_NAMES, EstimateWriter, open_log
from .log_spec import SPEC_KEYS, SPEC_SCHEMA, TIME_UNITS, read_spec
from .spec import sensors_from_specs

__all__ = ["estimate_log", "read_spec", "problem_from_spec", "plan_from_spec", "SPEC_KEYS",
           "SPEC_SCHEMA", "WRENCH_NAMES", "OUTPUT_KINDS", "add_estimate_arguments",
           "run_estimate_command"]


# ------------------------------------------------------------------------------ problem spec

def problem_from_spec(spec):
    """EstimationProblem from a spec (a dict or a JSON file's path; schema in the module
    docstring, checked by read_spec). Sensor keys are the constructor arguments."""
    from ..robots import is_embedded, load_robot      # the command line's names of robots
    from .problem import EstimationProblem
    spec = read_spec(spec)
    name = spec["model"]
    floating_base = spec.get("floating_base", None if is_embedded(name) else True)
    model = load_robot(name, floating_base, what="spec['model']")
    return EstimationProblem(model, sensors_from_specs(spec.get("sensors", [])),
                             unknown_wrenches=spec.get("unknown_wrenches", ()),
                             unactuated_base=spec.get("unactuated_base"))


def plan_from_spec(spec, method="auto"):
    """The compiled EstimationPlan of a spec, with its covariances: "auto" becomes "map" when
    the spec has covariances; "exact" and "lstsq" (unit weights) refuse them by name."""
    from .plan import compile_estimation
    spec = read_spec(spec)
    covariances = spec.get("covariances")
    if covariances is not None:
        if method == "auto":
            method = "map"
        elif method != "map":
            raise ValueError(f"spec['covariances']: method {method!r} does not use covariances "
                             f"(the MAP estimate does: method 'map' or 'auto')")
    per_sample = bool(spec.get("contacts"))
    if per_sample and method == "auto":
        method = "lstsq"
    return compile_estimation(problem_from_spec(spec), method=method, covariances=covariances,
                              per_sample=per_sample)


_WORKER_PLANS = {}


def _plan_from_spec(spec_json, method):
    key = (spec_json, method)
    if key not in _WORKER_PLANS:
        spec = json.loads(spec_json)
        spec.pop("_columns", None)
        _WORKER_PLANS[key] = plan_from_spec(spec, method)
    return _WORKER_PLANS[key]


# ------------------------------------------------------------------------------ the engine

def _stds(est, links, n):
    """Posterior standard deviations {"std_tau": (n, nv), "std_wrench_<link>": (n, 6)} of an
    estimate of n rows; a row the data do not determine (unbounded covariance) gets NaN."""
    from ..errors import SingularModelError

    def diag_sqrt(C):
        C = C.reshape((-1,) + C.shape[-2:])
        return np.sqrt(np.clip(np.diagonal(C, axis1=1, axis2=2), 0.0, None))
    try:
        out = {"std_tau": diag_sqrt(est.covariance("tau"))}
        out.update({f"std_wrench_{l}": diag_sqrt(est.covariance("fx", l)) for l in links})
        return out
    except SingularModelError:
        return None


def _solve_block(plan, cols, block, valid, first_row, errors, named=False, std=False):
    """Estimates for a block of rows; invalid rows (and rows the state checks reject) get NaN.
    Returns (rows, status, tau, wrenches, extras: {"time", "p", "chi2", "dof": (B,), "std_...":
    (B, k)} as available)."""
    import warnings
    B = block.shape[0]
    rows = first_row + np.arange(B)
    used = cols.used()
    finite = np.isfinite(block[:, used]).all(axis=1)
    for r in np.flatnonzero(valid & ~finite):
        c = used[np.flatnonzero(~np.isfinite(block[r, used]))[0]]
        name = cols.names[c] if c < cols.width else "the accelerations from the velocities"
        errors.append((int(rows[r]), f"empty, NaN or inf in column {name!r}"))
    good = valid & finite
    tau = np.full((B, plan.model.nv), np.nan)
    wrenches = {plan.problem.wrench_links[b]: np.full((B, 6), np.nan) for b in plan.problem.wrench_links}
    status = np.where(good, 0, -1).astype(np.int8)
    extras = {"time": block[:, cols.extra["time"]]} if "time" in cols.extra else {}
    if named:
        extras.update({k: np.full(B, np.nan) for k in ("p", "chi2", "dof")})
    if std:
        extras["std_tau"] = np.full((B, plan.model.nv), np.nan)
        extras.update({f"std_wrench_{l}": np.full((B, 6), np.nan) for l in wrenches})
    idx = np.flatnonzero(good)
    if idx.size:
        data, extra = cols.split(block[idx])
        q, v = data.pop("q"), data.pop("v")
        contacts = {k[1]: c != 0 for k, c in extra.items() if isinstance(k, tuple)} or None

        def solve(sel):
            est = plan.solve(q[sel], v[sel], {n: y[sel] for n, y in data.items()},
                             contacts=None if contacts is None else
                             {link: c[sel] for link, c in contacts.items()})
            if not named:
                return est, None
            chi2, dof, p = est.consistency()
            return est, {"p": p, "chi2": chi2, "dof": np.broadcast_to(dof, np.shape(chi2))}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")          # singular states are in the ok column
                est, p = solve(slice(None))
        except ValueError:
            # one bad state (e.g. a non-unit quaternion) must not sink the batch: row by row
            ests = []
            for k, r in enumerate(idx):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        ests.append((r, *solve(slice(k, k + 1))))
                except ValueError as exc:
                    errors.append((int(rows[r]), str(exc)))
                    status[r] = -1
            for r, e, p in ests:
                tau[r] = e["tau"][0]
                status[r] = int(e.ok[0])
                for l in wrenches:
                    wrenches[l][r] = e.wrench(l)[0]
                if named:
                    for k, val in p.items():
                        extras[k][r] = val[0]
                if std:
                    for k, val in (_stds(e, wrenches, 1) or {}).items():
                        extras[k][r] = val[0]
            return rows, status, tau, wrenches, extras
        tau[idx] = est["tau"]
        status[idx] = est.ok.astype(np.int8)
        for l in wrenches:
            wrenches[l][idx] = est.wrench(l)
        if named:
            for k, val in p.items():
                extras[k][idx] = val
        if std:
            stds = _stds(est, wrenches, idx.size)
            if stds is None:            # some row undetermined: row by row, NaN for those
                for k, r in enumerate(idx):
                    for key, val in (_stds(solve(slice(k, k + 1))[0], wrenches, 1)
                                     or {}).items():
                        extras[key][r] = val[0]
            else:
                for key, val in stds.items():
                    extras[key][idx] = val
    return rows, status, tau, wrenches, extras


def _remote_block(spec_json, method, block, valid, first_row):
    plan = _plan_from_spec(spec_json, method)
    spec = json.loads(spec_json)
    errors = []
    out = _solve_block(plan, LogColumns(plan, spec["_columns"], "log", spec), block, valid,
                       first_row, errors, named=spec.get("output") == "named",
                       std=bool(spec.get("std")))
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


def estimate_log(plan_or_problem, log, output=None, batch_size=1024, scheduler=None,
                 progress=True, spec=None, method="auto"):
    """Estimate every sample of a log (see the module docstring for formats and the spec).

    log: a path (.csv, .parquet, .npz, a directory of .npy files) or a pandas DataFrame.
    output: a .csv, .parquet or .npz path, written atomically (never the log or the spec file:
    ValueError); returns the summary {"rows", "estimated", "singular", "bad_rows": [(row,
    reason), ...]}. output=None returns the estimates as a pandas DataFrame instead (the CSV's
    columns; the summary in its attrs["summary"]).
    plan_or_problem: an EstimationPlan, an EstimationProblem (compiled here), or None with
    `spec` (plan_from_spec: its covariances too); a Dask `scheduler` address needs `spec`
    (workers rebuild the plan).
    """
    from .plan import EstimationPlan, compile_estimation
    from .problem import EstimationProblem
    from .log_align import align_streams
    from .log_derivative import differentiate
    path_log = isinstance(log, (str, os.PathLike))
    if path_log:
        log = os.fspath(log)
    if batch_size < 1:
        raise ValueError(f"batch_size: must be positive, got {batch_size}")
    if output is None:
        kind = "frame"
    else:
        output = os.fspath(output)
        kind = os.path.splitext(output)[1].lower()
        if kind not in OUTPUT_KINDS:
            raise ValueError(f"output: expected a {', '.join(OUTPUT_KINDS)} file or None (a "
                             f"DataFrame), got {output!r}")
        spec_file = spec if isinstance(spec, (str, os.PathLike)) else None
        check_output(output)
        refuse_overwrite(output, **{"input log": log if path_log else None,
                                    "spec file": spec_file})
    if spec is not None:
        spec = read_spec(spec)
    if plan_or_problem is None:
        if spec is None:
            raise ValueError("plan_or_problem: give a plan, a problem or a spec")
        plan_or_problem = plan_from_spec(spec, method)
    plan = (plan_or_problem if isinstance(plan_or_problem, EstimationPlan)
            else compile_estimation(plan_or_problem, method=method)
            if isinstance(plan_or_problem, EstimationProblem) else None)
    if plan is None:
        raise TypeError(f"plan_or_problem: expected an EstimationPlan or EstimationProblem, got "
                        f"{type(plan_or_problem).__name__}")
    if scheduler is not None and spec is None:
        raise ValueError("scheduler: running on a Dask cluster needs `spec` (a JSON-able problem "
                         "description) so that workers can rebuild the plan")
    spec_or_empty = spec or {}
    errors = []
    source = open_log(plan, log, batch_size, errors, progress, spec)
    where = log if path_log else "DataFrame log"
    cols = LogColumns(plan, source.names, where, spec)
    refused = sorted({source.names[c] for c in cols.used() if c < cols.width}
                     & set(source.unreadable))
    if refused:
        raise ValueError(f"{where}: columns {refused} are not numbers "
                         f"({', '.join(source.unreadable[c] for c in refused)})")
    named = spec_or_empty.get("output") == "named"
    std = bool(spec_or_empty.get("std"))
    if std and plan.method == "exact":
        raise ValueError("spec['std']: an exact plan has no posterior covariance (method 'map' "
                         "or 'lstsq')")
    if spec_or_empty.get("contacts") and not plan.per_sample:
        raise ValueError("spec['contacts']: the plan was compiled without per_sample=True "
                         "(estimate_log(None, ..., spec=spec) compiles one)")
    chunks = source.chunks
    seconds = TIME_UNITS[spec_or_empty.get("units", {}).get("time", "s")]
    if seconds != 1.0:                     # the time column in seconds from here on
        chunks = _scaled(chunks, cols.extra["time"], seconds)
    if cols.streams:                       # multi-rate streams onto every row (log_align.py)
        chunks = align_streams(chunks, cols.streams, cols.extra.get("time"), errors)
    if cols.derived:                       # accelerations from velocities (log_derivative.py)
        acc = spec_or_empty["accelerations"]
        chunks = differentiate(chunks, cols.slices["v"], cols.extra["time"], acc["window"],
                               acc["order"], acc.get("tolerance", 1e-3), errors)
    client = None
    if scheduler is not None:
        try:
            from distributed import Client
        except ImportError:
            raise ImportError("scheduler: Dask distributed is not installed "
                              "(pip install sparsedyn[dask])") from None
        client = Client(scheduler)
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=source.n_rows, unit="sample", desc="estimate")
    summary = {"rows": 0, "estimated": 0, "singular": 0}
    try:
        if client is None:
            results = ((_solve_block(plan, cols, block, valid, start, errors, named, std), None)
                       for start, _, block, valid in chunks)
        else:
            spec_json = json.dumps({**spec, "_columns": list(source.names)}, sort_keys=True)
            results = _bounded_remote(client, spec_json, method, chunks)
        if kind == "frame":
            writer = EstimateWriter(None, plan, kind, named, "time" in cols.extra, std)
            _write_all(writer, results, errors, summary, bar)
        else:
            with atomic_path(output) as tmp:
                writer = EstimateWriter(tmp, plan, kind, named, "time" in cols.extra, std)
                _write_all(writer, results, errors, summary, bar)
    finally:
        if bar is not None:
            bar.close()
        if client is not None:
            client.close()
    summary["bad_rows"] = sorted(errors)
    if kind == "frame":
        writer.frame.attrs["summary"] = summary
        return writer.frame
    return summary


def _scaled(chunks, column, factor):
    """The chunks with one column multiplied by factor."""
    for start, header, block, valid in chunks:
        block[:, column] *= factor
        yield start, header, block, valid


def _write_all(writer, results, errors, summary, bar):
    """Every block of estimates into the writer, in row order; counts into `summary`."""
    try:
        for (rows, status, tau, wrenches, extras), remote_errors in results:
            if remote_errors:
                errors.extend(remote_errors)
            writer.write(rows, status, tau, wrenches, extras)
            summary["rows"] += len(rows)
            summary["estimated"] += int((status == 1).sum())
            summary["singular"] += int((status == 0).sum())
            if bar is not None:
                bar.update(len(rows))
        writer.finish()
    finally:
        writer.close()


# ------------------------------------------------------------------------------ CLI entry

class _PrintSchema(argparse.Action):
    """--spec-schema: print the spec's JSON Schema and exit (like --help: no other argument
    needed)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(json.dumps(SPEC_SCHEMA, indent=2))
        parser.exit()


def add_estimate_arguments(parser):
    """Arguments of `sparsedyn estimate` (for the lead's cli.py)."""
    from ..robots import positive_int
    parser.description = __doc__
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("spec", help="problem description (JSON object, keys above; "
                                     "--spec-schema prints its JSON Schema)")
    parser.add_argument("input", help="log: .csv, .parquet, .npz, or a directory of .npy files")
    parser.add_argument("output", help="estimates: .csv, .parquet or .npz (written when "
                                       "complete; never the log or the spec)")
    parser.add_argument("--spec-schema", action=_PrintSchema,
                        help="print the spec's JSON Schema and exit")
    parser.add_argument("--method", default="auto", choices=("auto", "exact", "lstsq", "map"),
                        help="auto: exact when the sensors determine every variable, least "
                             "squares otherwise, MAP when the spec has covariances")
    parser.add_argument("--batch-size", type=positive_int, default=1024)
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
    parser = add_estimate_arguments(argparse.ArgumentParser(prog="sparsedyn estimate"))
    return run_estimate_command(parser.parse_args(argv))
