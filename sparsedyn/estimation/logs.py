"""The `sparsedyn estimate` engine: estimate torques and wrenches for every sample of a recorded
log, in batches, without holding the log in memory (seed 001, Sec. VI, applied offline at scale).

Input log (one sample per row):
  CSV   header row, then numbers, one sample per line; columns  q_0..q_{nq-1}, v_0..v_{nv-1},
        <sensor>_0..<sensor>_{k-1} for every sensor with rows (pseudo-measurements such as
        base_unactuated or *_slippery may be omitted: they default to 0); other columns (e.g. t)
        are ignored; fields may be double-quoted. Streamed in chunks.
  NPZ   arrays q (N, nq), v (N, nv), <sensor> (N, k) (read whole, CRC-checked: use a directory
        for logs larger than memory)
  DIR   a directory of q.npy, v.npy, <sensor>.npy, memory-mapped (np.load(mmap_mode="r")).
Output (by extension), written to temporary files next to it and moved into place only when every
row is in (sparsedyn.files): an interrupted or failed run leaves no output, or the previous one.
  .csv  rows: row, ok, tau_0..tau_{nv-1}, <link>_wrench_0..5 per wrench link
        (linear-first, link frame); bad input rows are written with ok = -1 and NaN.
  .npz  arrays row, ok, tau (N, nv), wrench_<link> (N, 6).
Bad input (a line with the wrong number of fields, non-numbers, a blank line of whitespace, bytes
that are not UTF-8, an unbalanced quote, NaN/inf, a non-unit quaternion) is reported with its
0-based data row number and its line in the file, and skipped; every good row is processed.
Empty lines are not rows. A missing column is an error naming it (no row could be processed).
The output may not be the log or the spec (refused, through links and relative paths too).

Spec (JSON object; every key is checked, an unknown one is refused by name):
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
  units             {"angles": "deg"|"rad"}: revolute joints' q, v and qdd in degrees (as YARP
                    logs them) are converted; default "rad"
  time              the log's timestamp column: carried to the output (its "time" column)
  contacts          {<unknown wrench link>: <column>}: per row, the link is in contact where the
                    column is nonzero, in the air (zero wrench) where it is 0 (the plan is
                    compiled with per_sample=True; method "auto" becomes "map" or "lstsq")
  output            "positional" (default: tau_<k>, <link>_wrench_<k>) or "named": tau/<joint>,
                    wrench/<link>/fx..mz, and p, the per-row consistency probability
                    (Estimate.consistency; NaN when the system has no redundancy)
  std               true (with output "named", a "map" or "lstsq" plan): also the posterior
                    standard deviations std/tau/<joint> and std/wrench/<link>/fx..mz (NaN where
                    the data do not determine the row's estimate)

Scheduler: None runs in-process; a Dask scheduler address ("tcp://host:8786") sends batches to the
cluster (needs `pip install sparsedyn[dask]`); workers rebuild the plan from the problem `spec`
(plan_from_spec) once each, so plans never travel over the network.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import tempfile
import zipfile

import numpy as np

from ..files import atomic_path, check_output, read_npz, refuse_overwrite
from .spec import check_sensor, expect, expect_strings, is_numbers, sensors_from_specs

SPEC_KEYS = ("model", "floating_base", "sensors", "unknown_wrenches", "unactuated_base",
             "covariances", "columns", "units", "time", "contacts", "output", "std")
WRENCH_NAMES = ("fx", "fy", "fz", "mx", "my", "mz")
OUTPUT_KINDS = (".csv", ".npz")


# ------------------------------------------------------------------------------ problem spec

def read_spec(spec):
    """The spec (a dict, or the path of a JSON file) checked against the schema of the module
    docstring: ValueError naming the key or the sensor argument that is unknown, missing or of
    the wrong type. Returns a plain dict."""
    if isinstance(spec, (str, os.PathLike)):
        try:
            with open(spec, "r", encoding="utf-8") as fh:
                spec = json.load(fh)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"spec: {os.fspath(spec)} is not a JSON file ({exc})") from None
    if not isinstance(spec, dict):
        raise ValueError(f"spec: expected a JSON object, got {type(spec).__name__}")
    unknown = [k for k in spec if k not in SPEC_KEYS]
    if unknown:
        raise ValueError(f"spec: unknown key(s) {unknown} (known: {', '.join(SPEC_KEYS)})")
    if "model" not in spec:
        raise ValueError('spec: missing "model" ("humanoid", "hand", "chainN" or a URDF path)')
    expect(spec["model"], str, "spec['model']", "a string")
    for key in ("floating_base", "unactuated_base"):
        if key in spec and not (spec[key] is None and key == "unactuated_base"):
            expect(spec[key], bool, f"spec[{key!r}]", "true or false")
    expect(spec.get("sensors", []), (list, tuple), "spec['sensors']", "a list")
    for k, item in enumerate(spec.get("sensors", [])):
        check_sensor(item, f"spec['sensors'][{k}]")
    expect_strings(spec.get("unknown_wrenches", []), "spec['unknown_wrenches']")
    if "covariances" in spec:
        _check_covariances(spec["covariances"])
    for key in ("columns", "contacts"):
        expect(spec.get(key, {}), dict, f"spec[{key!r}]", "an object {name: column}")
        for name, col in spec.get(key, {}).items():
            expect(col, str, f"spec[{key!r}][{name!r}]", "a column name (string)")
    expect(spec.get("units", {}), dict, "spec['units']", 'an object {"angles": "deg"}')
    if set(spec.get("units", {})) - {"angles"} or spec.get("units", {}).get(
            "angles", "rad") not in ("rad", "deg"):
        raise ValueError(f"spec['units']: expected {{\"angles\": \"deg\" or \"rad\"}}, got "
                         f"{spec['units']!r}")
    if "time" in spec:
        expect(spec["time"], str, "spec['time']", "a column name (string)")
    if spec.get("std", False) not in (True, False) or (spec.get("std") and
                                                          spec.get("output") != "named"):
        raise ValueError(f"spec['std']: expected true or false (true needs \"output\": "
                         f"\"named\"), got {spec['std']!r}")
    if spec.get("output", "positional") not in ("positional", "named"):
        raise ValueError(f"spec['output']: expected \"positional\" or \"named\", got "
                         f"{spec['output']!r}")
    return dict(spec)


def _check_covariances(cov):
    """Types only: names and sizes are the estimator's to check (compile_estimation)."""
    expect(cov, dict, "spec['covariances']", 'an object {"dynamics": ..., <sensor>: ...}')
    for key, value in cov.items():
        at = f"spec['covariances'][{key!r}]"
        if key == "prior" and isinstance(value, dict):
            for kind, v in value.items():
                if not is_numbers(v):
                    raise ValueError(f"{at}[{kind!r}]: expected a variance or a list of them")
        elif not is_numbers(value):
            raise ValueError(f"{at}: expected a number or a list of numbers")


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


# ------------------------------------------------------------------------------ readers

class _Columns:
    """Where each input of the plan sits in a flat row (the spec's names, module docstring),
    and the unit factor of each."""

    def __init__(self, plan, names, source, spec=None):
        model = plan.model
        spec = spec or {}
        self.sensors = [s for s in plan.problem.sensors if s.rows or s.default_reading is None]
        index = {}
        for k, n in enumerate(names):
            index.setdefault(n, []).append(k)
        mapping = dict(spec.get("columns", {}))
        degrees = spec.get("units", {}).get("angles", "rad") == "deg"
        need = {"q": _coordinate_names(model, "q"), "v": _coordinate_names(model, "v", "v")}
        optional = set()
        for s in self.sensors:
            need[s.name] = (_coordinate_names(model, s.name, "v") if type(s).__name__ ==
                            "JointAccelerations" else [f"{s.name}/{k}" for k in range(s.size)])
            if s.default_reading is not None:
                optional.add(s.name)
        self.slices, self.scales, missing, twice = {}, {}, [], []
        for key, named in need.items():
            found = []
            for k, name in enumerate(named):
                hits = [index[c] for c in (mapping.get(name), name, f"{key}_{k}") if c in index]
                found.append(hits[0] if hits else [])
                twice += [names[hits[0][0]]] if hits and len(hits[0]) > 1 else []
            if any(not c for c in found):
                if key not in optional:
                    missing += [f"{mapping.get(n, n)} (or {key}_{k})"
                                for k, (n, c) in enumerate(zip(named, found)) if not c]
                continue
            self.slices[key] = np.asarray([c[0] for c in found])
            if degrees and key in ("q", "v") + tuple(
                    s.name for s in self.sensors if type(s).__name__ == "JointAccelerations"):
                self.scales[key] = _angle_scale(model, "q" if key == "q" else "v")
        self.extra = {}
        for what, col in ([("time", spec["time"])] if "time" in spec else []) + [
                (("contact", link), col) for link, col in spec.get("contacts", {}).items()]:
            if col not in index:
                missing.append(col)
            else:
                self.extra[what] = index[col][0]
        unknown = sorted(set(spec.get("contacts", {})) - set(plan.problem.unknown_wrenches))
        if unknown:
            raise KeyError(f"spec['contacts']: {unknown} are not unknown wrenches of the "
                           f"problem {list(plan.problem.unknown_wrenches)}")
        if missing:
            raise KeyError(f"{source}: missing columns {missing[:8]}{' ...' if len(missing) > 8 else ''}")
        if twice:
            raise ValueError(f"{source}: columns {twice[:8]} appear more than once")
        self.keys = tuple(self.slices)

    def split(self, block):
        """(inputs {key: (B, size)} in the plan's units, extras {"time" or ("contact", link):
        (B,)})."""
        data = {k: block[:, c] * self.scales[k] if k in self.scales else block[:, c]
                for k, c in self.slices.items()}
        return data, {k: block[:, c] for k, c in self.extra.items()}

    def used(self):
        """Every column index read."""
        return np.concatenate(list(self.slices.values()) + [
            np.asarray(list(self.extra.values()), dtype=np.int64)]).astype(np.int64)


def _coordinate_names(model, prefix, space="q"):
    """"<prefix>/<joint>" per coordinate of a one-coordinate joint, "<prefix>/<joint>/<k>" for
    the others (q or v layout)."""
    out = []
    for j in model.joints:
        n = j.nq if space == "q" else j.nv
        out += [f"{prefix}/{j.name}"] if n == 1 else [f"{prefix}/{j.name}/{k}" for k in range(n)]
    return out


def _angle_scale(model, space):
    """Per q (or v) coordinate: pi / 180 for an angle (revolute joints), 1 otherwise."""
    out = []
    for j in model.joints:
        n = j.nq if space == "q" else j.nv
        # a one-coordinate rotation's coordinate is its angle (revolute, continuous, helical)
        out += [np.pi / 180.0 if j.ROTATION == "angle" and n == 1 else 1.0] * n
    return np.asarray(out)


def _split_line(raw, line_no, width):
    """(fields, None) of one data line, or (None, why it is not a row of numbers)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, (f"line {line_no}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at "
                      f"column {exc.start + 1})")
    if not text.strip():
        return None, f"line {line_no}: blank (whitespace only)"
    if text.count('"') % 2:
        return None, f"line {line_no}: unbalanced double quote (a quoted field across lines?)"
    fields = [f.strip() for f in text.split(",")]
    fields = [f[1:-1] if len(f) > 1 and f[0] == f[-1] == '"' else f for f in fields]
    if len(fields) != width:
        return None, f"line {line_no}: {len(fields)} fields, expected {width}"
    return fields, None


def _csv_chunks(path, batch_size, errors):
    """Yield (first data row number, header, float block, valid mask) chunks of a CSV file, one
    sample per non-empty line; the first yield is (None, header, None, None). A line that is
    not a row of numbers is a bad row (NaN, valid False) reported in `errors` as (row, why)."""
    with open(path, "rb") as fh:
        line_no, header = 0, None
        for raw in fh:
            line_no += 1
            if raw.strip():
                header = [f.strip().strip('"') for f in
                          raw.strip(b"\r\n").decode("utf-8", errors="replace").split(",")]
                break
        if header is None:
            raise ValueError(f"{path}: empty file (no header row)")
        yield None, header, None, None
        width = len(header)
        rows, valid, start, row_no = [], [], 0, 0
        for raw in fh:
            line_no += 1
            raw = raw.rstrip(b"\r\n")
            if not raw:
                continue
            fields, why = _split_line(raw, line_no, width)
            values = np.full(width, np.nan)
            if fields is not None:
                try:
                    values = np.array([float(x) for x in fields])
                except ValueError:
                    bad = next(k for k, x in enumerate(fields) if not _is_float(x))
                    why = f"line {line_no}: non-numeric field {fields[bad][:20]!r} in column {header[bad]!r}"
            if why is not None:
                errors.append((row_no, why))
                values = np.full(width, np.nan)
            rows.append(values)
            valid.append(why is None)
            row_no += 1
            if len(rows) == batch_size:
                yield start, header, np.array(rows), np.array(valid)
                start, rows, valid = row_no, [], []
        if rows:
            yield start, header, np.array(rows), np.array(valid)


def _is_float(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def _array_source(path):
    """{name: array-like (N, k)} from an NPZ file or a directory of .npy files (memory-mapped)."""
    if os.path.isdir(path):
        return {f[:-4]: np.load(os.path.join(path, f), mmap_mode="r", allow_pickle=False)
                for f in sorted(os.listdir(path)) if f.endswith(".npy")}
    return read_npz(path, "NPZ log")


# ------------------------------------------------------------------------------ writers

class _Writer:
    """The estimates, streamed in row order into `path` (a temporary file that atomic_path
    moves into place once complete). NPZ: each array's rows go to an unnamed temporary file
    next to it (nothing is left behind, whatever stops the run) and are zipped at the end."""

    def __init__(self, path, plan, kind, named=False, time=False, std=False):
        self.path, self.kind = path, kind
        self.links = [plan.problem.wrench_links[b] for b in sorted(plan.problem.wrench_links)]
        self.nv = plan.model.nv
        self.n_rows = 0
        #: the extra columns written, in order ("time" from the log, "p" the consistency)
        self.extras = (["time"] if time else []) + (["p"] if named else [])
        #: the standard deviations' blocks written after the estimates (spec "std")
        self.stds = (["std_tau"] + [f"std_wrench_{l}" for l in self.links]) if std else []
        if kind == ".csv":
            self.fh = open(path, "w", newline="", encoding="utf-8")
            self.w = csv.writer(self.fh)
            if named:
                tau = _coordinate_names(plan.model, "tau", "v")
                wrench = [f"wrench/{l}/{c}" for l in self.links for c in WRENCH_NAMES]
            else:
                tau = [f"tau_{k}" for k in range(self.nv)]
                wrench = [f"{l}_wrench_{k}" for l in self.links for k in range(6)]
            std_names = [f"std/{c}" for c in tau + wrench] if std else []
            self.w.writerow(["row", "ok"] + self.extras + tau + wrench + std_names)
        else:
            self.columns = {"row": (np.int64, ()), "ok": (np.int8, ()),
                            **{e: (float, ()) for e in self.extras}, "tau": (float, (self.nv,)),
                            **{f"wrench_{l}": (float, (6,)) for l in self.links},
                            **{k: (float, (self.nv if k == "std_tau" else 6,))
                               for k in self.stds}}
            folder = os.path.dirname(os.path.abspath(path))
            self.parts = {}
            for name in self.columns:
                self.parts[name] = tempfile.TemporaryFile(dir=folder, prefix=".sparsedyn_estimate_")

    def write(self, rows, ok, tau, wrenches, extras=None):
        self.n_rows += len(rows)
        extras = extras or {}
        if self.kind == ".csv":
            block = np.column_stack([rows, ok] + [extras[e] for e in self.extras] + [tau]
                                    + [wrenches[l] for l in self.links]
                                    + [extras[k] for k in self.stds])
            for r in block:
                self.w.writerow([int(r[0]), int(r[1])] + [repr(float(x)) for x in r[2:]])
            return
        values = {"row": rows, "ok": ok, "tau": tau, **{e: extras[e] for e in self.extras},
                  **{f"wrench_{l}": wrenches[l] for l in self.links},
                  **{k: extras[k] for k in self.stds}}
        for name, (dtype, _) in self.columns.items():
            self.parts[name].write(np.ascontiguousarray(values[name], dtype=dtype).tobytes())

    def finish(self):
        """Complete the file (the NPZ archive from the parts)."""
        if self.kind == ".csv":
            self.fh.close()
            return
        fmt = np.lib.format
        with zipfile.ZipFile(self.path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            for name, (dtype, shape) in self.columns.items():
                part = self.parts[name]
                size = part.tell()
                part.seek(0)
                with zf.open(zipfile.ZipInfo(name + ".npy"), "w", force_zip64=size > 2 ** 30) as out:
                    fmt.write_array_header_1_0(out, {"descr": fmt.dtype_to_descr(np.dtype(dtype)),
                                                     "fortran_order": False,
                                                     "shape": (self.n_rows, *shape)})
                    shutil.copyfileobj(part, out, 2 ** 22)

    def close(self):
        for fh in [getattr(self, "fh", None), *getattr(self, "parts", {}).values()]:
            if fh is not None:
                fh.close()


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
    Returns (rows, status, tau, wrenches, extras: {"time": (B,), "p": (B,)} as available)."""
    import warnings
    B = block.shape[0]
    rows = first_row + np.arange(B)
    finite = np.isfinite(block[:, cols.used()]).all(axis=1)
    for r in np.flatnonzero(valid & ~finite):
        errors.append((int(rows[r]), "NaN or inf in a used column"))
    good = valid & finite
    tau = np.full((B, plan.model.nv), np.nan)
    wrenches = {plan.problem.wrench_links[b]: np.full((B, 6), np.nan) for b in plan.problem.wrench_links}
    status = np.where(good, 0, -1).astype(np.int8)
    extras = {"time": block[:, cols.extra["time"]]} if "time" in cols.extra else {}
    if named:
        extras["p"] = np.full(B, np.nan)
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
            return est, (est.consistency()[2] if named else None)
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
                    extras["p"][r] = p[0]
                if std:
                    for k, val in (_stds(e, wrenches, 1) or {}).items():
                        extras[k][r] = val[0]
            return rows, status, tau, wrenches, extras
        tau[idx] = est["tau"]
        status[idx] = est.ok.astype(np.int8)
        for l in wrenches:
            wrenches[l][idx] = est.wrench(l)
        if named:
            extras["p"][idx] = p
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
    out = _solve_block(plan, _Columns(plan, spec["_columns"], "log", spec), block, valid,
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


def estimate_log(plan_or_problem, input_path, output_path, batch_size=1024, scheduler=None,
                 progress=True, spec=None, method="auto"):
    """Estimate every sample of a log (see the module docstring for formats). Returns a summary
    {"rows", "estimated", "singular", "bad_rows": [(row, reason), ...]}.

    plan_or_problem: an EstimationPlan, an EstimationProblem (compiled here), or None with
    `spec` (plan_from_spec: its covariances too); a Dask `scheduler` address needs `spec`
    (workers rebuild the plan). The output is written atomically and may not be the log or the
    spec file (ValueError).
    """
    from .plan import EstimationPlan, compile_estimation
    from .problem import EstimationProblem
    input_path, output_path = os.fspath(input_path), os.fspath(output_path)
    if batch_size < 1:
        raise ValueError(f"batch_size: must be positive, got {batch_size}")
    kind = os.path.splitext(output_path)[1].lower()
    if kind not in OUTPUT_KINDS:
        raise ValueError(f"output: expected a {' or '.join(OUTPUT_KINDS)} file, got {output_path!r}")
    spec_file = spec if isinstance(spec, (str, os.PathLike)) else None
    check_output(output_path)
    refuse_overwrite(output_path, **{"input log": input_path, "spec file": spec_file})
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
    errors = []
    names, chunks, n_rows = _open_log(plan, input_path, batch_size, errors, progress, spec)
    cols = _Columns(plan, names, input_path, spec)
    named = (spec or {}).get("output") == "named"
    std = bool((spec or {}).get("std"))
    if std and plan.method == "exact":
        raise ValueError("spec['std']: an exact plan has no posterior covariance (method 'map' "
                         "or 'lstsq')")
    if (spec or {}).get("contacts") and not plan.per_sample:
        raise ValueError("spec['contacts']: the plan was compiled without per_sample=True "
                         "(estimate_log(None, ..., spec=spec) compiles one)")
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
        bar = tqdm(total=n_rows, unit="sample", desc="estimate")
    summary = {"rows": 0, "estimated": 0, "singular": 0}
    try:
        if client is None:
            results = ((_solve_block(plan, cols, block, valid, start, errors, named, std), None)
                       for start, _, block, valid in chunks)
        else:
            spec_json = json.dumps({**spec, "_columns": list(names)}, sort_keys=True)
            results = _bounded_remote(client, spec_json, method, chunks)
        with atomic_path(output_path) as tmp:
            writer = _Writer(tmp, plan, kind, named, "time" in cols.extra, std)
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
    finally:
        if bar is not None:
            bar.close()
        if client is not None:
            client.close()
    summary["bad_rows"] = sorted(errors)
    return summary


def _open_log(plan, input_path, batch_size, errors, progress, spec=None):
    """(column names, chunks as _csv_chunks yields them, number of rows or None) of a log. An
    NPZ / .npy directory contributes its arrays named "q", "v" or a sensor's (columns
    "<name>_<k>") and its 1-d arrays named as inputs, as the spec maps them or as the time and
    contact columns (columns of their own names)."""
    if os.path.isfile(input_path) and input_path.lower().endswith(".csv"):
        chunks = _csv_chunks(input_path, batch_size, errors)
        _, header, _, _ = next(chunks)
        n_rows = None
        if progress:                   # the bar's total (lines that are not empty)
            with open(input_path, "rb") as fh:
                n_rows = max(sum(1 for line in fh if line.strip(b"\r\n")) - 1, 0)
        return header, chunks, n_rows
    arrays = _array_source(input_path)
    spec = spec or {}
    used = {"q", "v"} | {s.name for s in plan.problem.sensors}
    single = (set(spec.get("columns", {}).values()) | set(spec.get("contacts", {}).values())
              | ({spec["time"]} if "time" in spec else set()))
    names, parts = [], []
    for key, arr in arrays.items():
        if key not in used and not (key in single or "/" in key):
            continue
        if arr.dtype.kind not in "biuf" or arr.ndim == 0:
            raise ValueError(f"{input_path}: array {key!r} is not an array of numbers "
                             f"(dtype {arr.dtype}, shape {arr.shape})")
        arr2 = arr.reshape(arr.shape[0], -1)
        names += ([key] if key not in used and arr2.shape[1] == 1
                  else [f"{key}_{k}" for k in range(arr2.shape[1])])
        parts.append(arr2)
    n_rows = parts[0].shape[0] if parts else 0
    lengths = {k: a.shape[0] for k, a in arrays.items() if k in used or k in single or "/" in k}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"{input_path}: arrays have different lengths {lengths}")

    def array_chunks():
        for start in range(0, n_rows, batch_size):
            block = np.column_stack([np.asarray(p[start:start + batch_size], dtype=float)
                                     for p in parts])
            yield start, None, block, np.ones(block.shape[0], bool)
    return names, array_chunks(), n_rows


# ------------------------------------------------------------------------------ CLI entry

def add_estimate_arguments(parser):
    """Arguments of `sparsedyn estimate` (for the lead's cli.py)."""
    from ..robots import positive_int
    parser.description = __doc__
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("spec", help="problem description (JSON object: model, floating_base, "
                                     "sensors, unknown_wrenches, unactuated_base, covariances)")
    parser.add_argument("input", help="log: .csv, .npz, or a directory of .npy files")
    parser.add_argument("output", help="estimates: .csv or .npz (written when complete; never "
                                       "the log or the spec)")
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
