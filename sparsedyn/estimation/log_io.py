"""Sources and sinks of estimate_log (estimation/logs.py's docstring has the formats): CSV
streamed line by line, NPZ / a directory of .npy files, Parquet read row group by row group
and a pandas DataFrame (both through pyarrow, the optional extra sparsedyn[logs]); estimates
written as CSV, NPZ, Parquet or returned as a DataFrame. A source is (column names, chunks
(first row, header, block (B, width) floats, valid (B,) bool), number of rows or None,
{column: type} of the columns that are not numbers)."""
from __future__ import annotations

import csv
import os
import shutil
import tempfile
import zipfile
from collections import namedtuple

import numpy as np

from ..errors import SparsedynError
from ..files import read_npz
from .log_columns import _coordinate_names

WRENCH_NAMES = ("fx", "fy", "fz", "mx", "my", "mz")
OUTPUT_KINDS = (".csv", ".npz", ".parquet")

#: An open log: its column names, its chunks, its number of rows (None: not known) and the
#: columns that are not numbers {name: type} (an error if an input reads one).
LogSource = namedtuple("LogSource", "names chunks n_rows unreadable")


class MissingPackageError(SparsedynError, ImportError):
    """An optional package a log format needs is not installed (its name in `package`)."""

    def __init__(self, package, what):
        super().__init__(f"{what} need(s) {package}: pip install 'sparsedyn[logs]' (or pip "
                         f"install {package})")
        self.package = package


def require(package, what):
    """The module `package`, or MissingPackageError naming it and what needs it."""
    import importlib
    try:
        return importlib.import_module(package)
    except ImportError:
        raise MissingPackageError(package, what) from None


# ------------------------------------------------------------------------------ sources

def open_log(plan, log, batch_size, errors, progress, spec=None):
    """The LogSource of a log: a CSV, Parquet or NPZ file, a directory of .npy files or a
    pandas DataFrame. An NPZ / .npy directory contributes its arrays named "q", "v" or a
    sensor's (columns "<name>_<k>") and its 1-d arrays named as inputs, as the spec maps them
    or as the time and contact columns (columns of their own names)."""
    if not isinstance(log, (str, os.PathLike)):
        return _frame_source(log, batch_size)
    input_path = os.fspath(log)
    if os.path.isfile(input_path) and input_path.lower().endswith(".parquet"):
        return _parquet_source(input_path, batch_size)
    if os.path.isfile(input_path) and input_path.lower().endswith(".csv"):
        chunks = _csv_chunks(input_path, batch_size, errors)
        _, header, _, _ = next(chunks)
        n_rows = None
        if progress:                   # the bar's total (lines that are not empty)
            with open(input_path, "rb") as fh:
                n_rows = max(sum(1 for line in fh if line.strip(b"\r\n")) - 1, 0)
        return LogSource(header, chunks, n_rows, {})
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
    return LogSource(names, array_chunks(), n_rows, {})


def _parquet_source(path, batch_size):
    """A Parquet file, read a row group at a time in batches of batch_size rows."""
    pq = require("pyarrow.parquet", "Parquet logs")
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:              # pyarrow's ArrowInvalid and OSError alike
        raise ValueError(f"{path}: not a readable Parquet file ({exc})") from None
    schema = pf.schema_arrow
    return LogSource(list(schema.names), _arrow_chunks(pf.iter_batches(batch_size=batch_size)),
                     pf.metadata.num_rows, _unreadable(schema))


def _frame_source(frame, batch_size):
    """A pandas DataFrame (its index is not a column), through a pyarrow table."""
    pd = require("pandas", "DataFrame logs")
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"log: expected a file or directory path or a pandas DataFrame, got "
                        f"{type(frame).__name__}")
    pa = require("pyarrow", "DataFrame logs")
    try:
        table = pa.Table.from_pandas(frame.rename(columns=str), preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"DataFrame log: a column is not convertible ({exc})") from None
    return LogSource(list(table.schema.names), _arrow_chunks(
        table.to_batches(max_chunksize=batch_size)), len(frame), _unreadable(table.schema))


def _unreadable(schema):
    """{name: type} of the columns that are not numbers, booleans or timestamps."""
    import pyarrow as pa
    return {f.name: str(f.type) for f in schema if not (
        pa.types.is_integer(f.type) or pa.types.is_floating(f.type)
        or pa.types.is_boolean(f.type) or pa.types.is_timestamp(f.type))}


def _arrow_chunks(batches):
    """Chunks of pyarrow record batches: numbers and booleans as floats, timestamps in seconds,
    nulls as NaN (an empty cell: a stream without a sample, spec "streams"); the columns that
    are not numbers are NaN (refused if read)."""
    import pyarrow as pa
    start = 0
    for batch in batches:
        block = np.full((batch.num_rows, batch.num_columns), np.nan)
        for k, col in enumerate(batch.columns):
            if pa.types.is_timestamp(col.type):
                seconds = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[col.type.unit]
                col = col.cast(pa.int64())
            elif (pa.types.is_boolean(col.type) or pa.types.is_integer(col.type)
                  or pa.types.is_floating(col.type)):
                seconds = 1.0
            else:
                continue
            block[:, k] = col.cast(pa.float64()).to_numpy(zero_copy_only=False) * seconds
        yield start, None, block, np.ones(batch.num_rows, bool)
        start += batch.num_rows


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
                    # an empty cell: NaN (a slower stream's row without a sample)
                    values = np.array([float(x) if x else np.nan for x in fields])
                except ValueError:
                    bad = next(k for k, x in enumerate(fields) if x and not _is_float(x))
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



# ------------------------------------------------------------------------------ sinks

class EstimateWriter:
    """The estimates, streamed in row order into `path` (a temporary file that atomic_path
    moves into place once complete), kind ".csv", ".npz", ".parquet" or "frame" (a pandas
    DataFrame, self.frame after finish; path unused). CSV, Parquet and the DataFrame have flat
    columns (self.names); NPZ has arrays, each array's rows going to an unnamed temporary file
    next to it (nothing is left behind, whatever stops the run), zipped at the end."""

    def __init__(self, path, plan, kind, named=False, time=False, std=False):
        self.path, self.kind = path, kind
        self.links = [plan.problem.wrench_links[b] for b in sorted(plan.problem.wrench_links)]
        self.nv = plan.model.nv
        self.n_rows = 0
        #: the extra columns written, in order ("time" from the log; "p", "chi2", "dof" the
        #: per-row consistency check, Estimate.consistency)
        self.extras = (["time"] if time else []) + (["p", "chi2", "dof"] if named else [])
        #: the standard deviations' blocks written after the estimates (spec "std")
        self.stds = (["std_tau"] + [f"std_wrench_{l}" for l in self.links]) if std else []
        if named:
            tau = _coordinate_names(plan.model, "tau", "v")
            wrench = [f"wrench/{l}/{c}" for l in self.links for c in WRENCH_NAMES]
        else:
            tau = [f"tau_{k}" for k in range(self.nv)]
            wrench = [f"{l}_wrench_{k}" for l in self.links for k in range(6)]
        std_names = [f"std/{c}" for c in tau + wrench] if std else []
        #: the flat columns (CSV, Parquet, DataFrame)
        self.names = ["row", "ok"] + self.extras + tau + wrench + std_names
        if kind == ".csv":
            self.fh = open(path, "w", newline="", encoding="utf-8")
            self.w = csv.writer(self.fh)
            self.w.writerow(self.names)
        elif kind == ".parquet":
            pa = require("pyarrow", "Parquet output")
            pq = require("pyarrow.parquet", "Parquet output")
            self.schema = pa.schema([("row", pa.int64()), ("ok", pa.int8())] +
                                    [(n, pa.float64()) for n in self.names[2:]])
            self.pq_writer = pq.ParquetWriter(path, self.schema)
        elif kind == "frame":
            self.pd = require("pandas", "DataFrame output")
            self.blocks = []
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
        if self.kind != ".npz":
            floats = np.column_stack([extras[e] for e in self.extras] + [tau]
                                     + [wrenches[l] for l in self.links]
                                     + [extras[k] for k in self.stds])
            if self.kind == ".csv":
                for r, k, x in zip(rows, ok, floats):
                    self.w.writerow([int(r), int(k)] + [repr(float(v)) for v in x])
            elif self.kind == ".parquet":
                import pyarrow as pa
                self.pq_writer.write_table(pa.Table.from_arrays(
                    [pa.array(np.asarray(rows, np.int64)), pa.array(np.asarray(ok, np.int8))]
                    + [pa.array(c) for c in floats.T], schema=self.schema))
            else:
                self.blocks.append((np.asarray(rows, np.int64), np.asarray(ok, np.int8), floats))
            return
        values = {"row": rows, "ok": ok, "tau": tau, **{e: extras[e] for e in self.extras},
                  **{f"wrench_{l}": wrenches[l] for l in self.links},
                  **{k: extras[k] for k in self.stds}}
        for name, (dtype, _) in self.columns.items():
            self.parts[name].write(np.ascontiguousarray(values[name], dtype=dtype).tobytes())

    def finish(self):
        """Complete the file (the NPZ archive from the parts) or the DataFrame."""
        if self.kind == ".csv":
            self.fh.close()
            return
        if self.kind == ".parquet":
            self.pq_writer.close()
            self.pq_writer = None
            return
        if self.kind == "frame":
            width = len(self.names) - 2
            floats = (np.concatenate([b[2] for b in self.blocks]) if self.blocks
                      else np.zeros((0, width)))
            columns = {"row": np.concatenate([b[0] for b in self.blocks] or [np.zeros(0, np.int64)]),
                       "ok": np.concatenate([b[1] for b in self.blocks] or [np.zeros(0, np.int8)])}
            columns.update(zip(self.names[2:], floats.T))
            self.frame = self.pd.DataFrame(columns)
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
        if getattr(self, "pq_writer", None) is not None:
            self.pq_writer.close()
