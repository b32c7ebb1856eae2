"""Logs as robots write them, the rest of issue #17 item 6: a slower stream (a 400 Hz F/T in a
1 kHz log, empty cells between its samples) aligned by the last value or linearly; joint
accelerations from the velocities (Savitzky-Golay); Parquet and pandas DataFrames in and out;
the per-row residual check; the spec's JSON Schema. Oracles: Pinocchio (the truth the logs are
written from), NumPy (forward fill, np.interp), scipy.signal.savgol_filter and the Taylor
bound of a Savitzky-Golay derivative on an analytic trajectory."""

import csv
import json
import math

import numpy as np
import pytest
import scipy.signal
import scipy.stats

from oracles import pin, pin_twin, rel_err
from pin_sensors import PinTruth
import sparsedyn as sd
from sparsedyn.estimation import estimate_log
from sparsedyn.estimation.log_align import LogTimeError, Stream, align_streams
from sparsedyn.estimation.log_derivative import differentiate
from sparsedyn.estimation.logs import plan_from_spec
from sparsedyn.models import serial_chain

DT = 1e-3                                     # a 1 kHz log
AMP, OMEGA, PHASE = np.array([0.8, -0.6, 0.5]), np.array([7.0, 11.0, 5.0]), np.array([0.1, 0.7, -0.4])
FT = "joint2"                                 # the slow stream: a 6-axis F/T at joint2
SPEC = {"model": "chain3", "sensors": [{"type": "JointAccelerations"},
                                       {"type": "ForceTorque", "joint": FT}],
        "time": "t", "output": "named"}


def trajectory(N):
    """t, and the analytic q = A sin(w t + phi), v = q', qdd = q'' of the chain's 3 joints."""
    t = 100.0 + DT * np.arange(N)
    arg = OMEGA * t[:, None] + PHASE
    return t, AMP * np.sin(arg), AMP * OMEGA * np.cos(arg), -AMP * OMEGA ** 2 * np.sin(arg)


@pytest.fixture(scope="module")
def chain():
    model = serial_chain(3)
    return model, pin_twin(model)


def pin_tau(pm, q, v, qdd):
    return np.array([pin.rnea(pm, pm.createData(), q[b], v[b], qdd[b]) for b in range(len(q))])


def write_csv(path, columns):
    """A CSV log; NaN is written as an empty cell (a stream without a sample in that row)."""
    names = list(columns)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(names)
        for b in range(len(columns[names[0]])):
            w.writerow(["" if np.isnan(columns[n][b]) else repr(float(columns[n][b]))
                        for n in names])


def frame_values(df, prefix):
    return np.column_stack([df[c].to_numpy() for c in df.columns if c.startswith(prefix)])


@pytest.fixture(scope="module")
def multirate(chain, tmp_path_factory):
    """A 1 kHz log of the chain with the F/T at 400 Hz (rows floor(2.5 k), from row 3 to row
    N - 4): empty cells in the other rows; row 21, not a sample, has half its F/T cells."""
    model, pm = chain
    N = 60
    t, q, v, qdd = trajectory(N)
    truth = PinTruth(model, pm, q, v, pin_tau(pm, q, v, qdd), {})
    ft = truth.joint_wrench(FT)
    samples = np.unique(np.floor(np.arange(3, N - 3, 2.5)).astype(int))
    assert 21 not in samples
    logged = np.full_like(ft, np.nan)
    logged[samples] = ft[samples]
    logged[21, :3] = ft[21, :3]                        # a partial sample: a bad row
    cols = {"t": t}
    cols.update({f"q_{k}": q[:, k] for k in range(3)})
    cols.update({f"v_{k}": v[:, k] for k in range(3)})
    cols.update({f"qdd_{k}": truth.qdd[:, k] for k in range(3)})
    cols.update({f"{FT}_{k}": logged[:, k] for k in range(6)})
    path = tmp_path_factory.mktemp("rates") / "log.csv"
    write_csv(path, cols)
    return dict(N=N, t=t, q=q, v=v, qdd=truth.qdd, ft=ft, samples=samples, cols=cols, path=path,
                tau=truth.tau)


@pytest.mark.parametrize("align", ["last", "linear"])
def test_slow_stream_aligned_as_numpy_does(multirate, align):
    """The F/T stream held ("last": NumPy forward fill) or interpolated ("linear": np.interp by
    time): the estimates equal the plan's given the NumPy-aligned readings, the sample rows
    equal Pinocchio's torques; rows before the first sample (and after the last for
    "linear") and the partial row are flagged, never extrapolated; chunks of 7 rows give the
    same file as one chunk."""
    m = multirate
    spec = {**SPEC, "streams": {FT: {"align": align}}}
    whole = estimate_log(None, m["path"], None, spec=spec, progress=False, batch_size=1000)
    chunked = sd.estimate_log(None, m["path"], None, spec=spec, progress=False, batch_size=7)  # top level
    np.testing.assert_array_equal(whole.to_numpy(), chunked.to_numpy())
    assert whole.attrs["summary"]["bad_rows"] == chunked.attrs["summary"]["bad_rows"]
    rows, s = np.arange(m["N"]), m["samples"]
    last = s[np.searchsorted(s, rows, side="right") - 1]
    if align == "last":
        good = rows >= s[0]
        aligned = m["ft"][last]
    else:
        good = (rows >= s[0]) & (rows <= s[-1])
        aligned = np.column_stack([np.interp(m["t"], m["t"][s], m["ft"][s, k]) for k in range(6)])
    good &= rows != 21
    bad = dict(whole.attrs["summary"]["bad_rows"])
    assert set(bad) == set(rows[~good])
    assert "stream" in bad[21] and all("before the first sample" in bad[r] for r in range(s[0]))
    assert align == "last" or all("after the last sample" in bad[r] for r in rows[s[-1] + 1:])
    assert np.all(whole["ok"].to_numpy()[~good] == -1) and np.all(whole["ok"].to_numpy()[good] == 1)
    plan = plan_from_spec(spec)
    est = plan.solve(m["q"][good], m["v"][good], {"qdd": m["qdd"][good], FT: aligned[good]})
    tau = frame_values(whole, "tau/")
    assert rel_err(tau[good], est["tau"]) < 1e-10
    assert np.isnan(tau[~good]).all()
    assert rel_err(tau[s[1:-1]], m["tau"][s[1:-1]]) < 1e-8        # readings exact there


def test_linear_alignment_renormalises_quaternions_whatever_the_chunks():
    """A quaternion stream every third row of an irregularly timed block, interpolated: each
    row is np.interp's componentwise lerp normalised (nlerp), also where a sample is logged
    as -q (the same rotation: the shorter arc); a stream held by "last" next to it; random
    chunkings give the same rows as one chunk."""
    rng = np.random.default_rng(3)
    N = 41
    t = np.cumsum(rng.uniform(0.5, 1.5, N))
    quat = np.cumsum(rng.normal(size=(N, 4)) * 0.1, axis=0) + [0.0, 0.0, 0.0, 1.0]
    quat /= np.linalg.norm(quat, axis=1, keepdims=True)          # a smooth path: dots > 0
    other = rng.normal(size=(N, 2))
    samples, held = np.arange(1, N, 3), np.arange(0, N, 4)
    assert np.all(np.sum(quat[samples[1:]] * quat[samples[:-1]], axis=1) > 0)
    flipped = samples[4]
    block = np.full((N, 7), np.nan)
    block[:, 0] = t
    block[samples, 1:5] = quat[samples]
    block[flipped, 1:5] *= -1                                    # logged as -q
    block[held, 5:7] = other[held]
    streams = [Stream("q", np.arange(1, 5), "linear", [np.arange(4)]),
               Stream("f", np.arange(5, 7), "last", [])]

    def run(sizes):
        errors, out, start = [], [], 0
        chunks = []
        for size in sizes:
            chunks.append((start, None, block[start:start + size].copy(),
                           np.ones(len(block[start:start + size]), bool)))
            start += size
        for first, _, b, valid in align_streams(iter(chunks), streams, 0, errors):
            out.append((first, b, valid))
        assert [o[0] for o in out] == sorted(o[0] for o in out)
        return np.concatenate([o[1] for o in out]), np.concatenate([o[2] for o in out]), errors

    one, valid, errors = run([N])
    lerp = np.column_stack([np.interp(t, t[samples], quat[samples, k]) for k in range(4)])
    nlerp = lerp / np.linalg.norm(lerp, axis=1, keepdims=True)
    inside = (np.arange(N) >= samples[0]) & (np.arange(N) <= samples[-1])
    between = inside & ~np.isin(np.arange(N), samples)
    got = one[between, 1:5]                     # a rotation: q or -q (the sample's sign)
    got *= np.sign(np.sum(got * nlerp[between], axis=1))[:, None]
    np.testing.assert_allclose(got, nlerp[between], rtol=0, atol=1e-14)
    np.testing.assert_array_equal(one[samples, 1:5], block[samples, 1:5])   # samples as logged
    np.testing.assert_allclose(one[:, 5:7], other[np.arange(N) // 4 * 4], rtol=0, atol=0)
    assert set(np.flatnonzero(~valid)) == set(np.flatnonzero(~inside))
    assert {r for r, _ in errors} == set(np.flatnonzero(~inside))
    for sizes in ([1] * N, [5, 2, 9, 1, 24], [3, 38]):
        b, val, err = run(sizes)
        np.testing.assert_array_equal(b, one)
        np.testing.assert_array_equal(val, valid)
        assert sorted(err) == sorted(errors)


def _derivative_bound(coefficients, offsets, order):
    """Taylor bound of a Savitzky-Golay first derivative of v = A w cos(w t + phi): the fit is
    exact for polynomials of degree <= order, so the error is sum_k c_k R(t_k), with the
    remainder |R(tau)| <= max|v^(order+1)| |tau|^(order+1) / (order+1)! and
    max|v^(order+1)| = |A| w^(order+2); per joint (3,)."""
    s = np.abs(coefficients) @ np.abs(offsets) ** (order + 1)
    return np.abs(AMP) * OMEGA ** (order + 2) / math.factorial(order + 1) * s


def test_savgol_derivative_is_scipys_and_within_the_taylor_bound():
    """Derivative of the analytic velocities with a bad row splitting the log in two runs: on
    each run it is scipy.signal.savgol_filter(deriv=1, mode="interp"), whatever the chunking;
    it is within the Taylor bound of the window of the analytic acceleration at every row; a
    jittered step is refused naming the rows."""
    N, window, order = 300, 21, 3
    t, _, v, qdd = trajectory(N)
    block = np.column_stack([t, v])
    valid = np.ones(N, bool)
    valid[150] = False
    block[150] = np.nan

    def run(size):
        errors = []
        chunks = ((s, None, block[s:s + size].copy(), valid[s:s + size].copy())
                  for s in range(0, N, size))
        out = list(differentiate(chunks, np.arange(1, 4), 0, window, order, 1e-3, errors))
        return np.concatenate([o[2][:, 4:] for o in out]), np.concatenate([o[3] for o in out])
    acc, ok = run(N)
    for size in (7, 64, 1):
        other, ok2 = run(size)
        np.testing.assert_array_equal(other, acc)
        np.testing.assert_array_equal(ok2, ok)
    assert np.array_equal(ok, valid)
    for run_rows in (np.arange(0, 150), np.arange(151, N)):
        ref = scipy.signal.savgol_filter(v[run_rows], window, order, deriv=1, delta=DT,
                                         mode="interp", axis=0)
        np.testing.assert_allclose(acc[run_rows], ref, rtol=0, atol=1e-9 * np.abs(ref).max())
        # the analytic acceleration: within the bound of the window each row used
        for k, r in enumerate(run_rows):
            first = min(max(k - window // 2, 0), len(run_rows) - window)
            pos = k - first
            c = scipy.signal.savgol_coeffs(window, order, deriv=1, delta=DT, pos=pos, use="dot")
            bound = _derivative_bound(c, (np.arange(window) - pos) * DT, order)
            rounding = 64 * np.finfo(float).eps * np.abs(c).sum() * np.abs(AMP * OMEGA)
            assert np.all(np.abs(acc[r] - qdd[r]) <= bound + rounding), (r, acc[r] - qdd[r], bound)
    assert np.isnan(acc[150]).all()
    jitter = block.copy()
    jitter[200, 0] += 0.01 * DT                    # 1 % off, tolerance 0.1 %
    with pytest.raises(LogTimeError, match="199->200") as info:
        list(differentiate(iter([(0, None, jitter, valid.copy())]), np.arange(1, 4), 0,
                           window, order, 1e-3, []))
    assert 200 in info.value.rows


def test_accelerations_from_velocities_estimate(chain, tmp_path):
    """A log with no acceleration columns: the torques from the derived accelerations are
    Pinocchio's given the analytic ones within |M| times the derivative's Taylor bound; every
    row is estimated (edges as mode="interp"); chunking changes nothing; a log whose step is
    not uniform is refused naming the rows, leaving no output."""
    model, pm = chain
    N, window, order = 120, 21, 3
    t, q, v, qdd = trajectory(N)
    cols = {"t": t, **{f"q_{k}": q[:, k] for k in range(3)},
            **{f"v_{k}": v[:, k] for k in range(3)}}
    path = tmp_path / "log.csv"
    write_csv(path, cols)
    spec = {"model": "chain3", "sensors": [{"type": "JointAccelerations"}], "time": "t",
            "accelerations": {"from": "velocities", "window": window, "order": order}}
    out = tmp_path / "est.csv"
    summary = estimate_log(None, path, out, spec=spec, progress=False, batch_size=1000)
    assert summary["estimated"] == N and not summary["bad_rows"]
    res = np.genfromtxt(out, delimiter=",", names=True)
    tau = np.column_stack([res[f"tau_{k}"] for k in range(3)])
    chunked = estimate_log(None, path, None, spec=spec, progress=False, batch_size=7)
    np.testing.assert_array_equal(frame_values(chunked, "tau_"), tau)
    assert np.array_equal(res["time"], t)
    truth = pin_tau(pm, q, v, qdd)
    for r in range(N):
        first = min(max(r - window // 2, 0), N - window)
        c = scipy.signal.savgol_coeffs(window, order, deriv=1, delta=DT, pos=r - first, use="dot")
        bound = _derivative_bound(c, (np.arange(window) - (r - first)) * DT, order)
        M = pin.crba(pm, pm.createData(), q[r])
        M = np.triu(M) + np.triu(M, 1).T
        assert np.all(np.abs(tau[r] - truth[r]) <= np.abs(M) @ bound + 1e-10), r
    # the time in milliseconds (spec units): the same torques, the time written in seconds
    write_csv(path, {**cols, "t": np.round(t * 1e3)})
    in_ms = estimate_log(None, path, None, progress=False,
                         spec={**spec, "units": {"time": "ms"}})
    assert rel_err(frame_values(in_ms, "tau_"), tau) < 1e-9
    np.testing.assert_allclose(in_ms["time"], t, rtol=1e-15)
    cols["t"] = t.copy()
    cols["t"][60:] += 0.5 * DT                        # a half-step jump
    write_csv(path, cols)
    with pytest.raises(LogTimeError, match="59->60"):
        estimate_log(None, path, tmp_path / "bad.csv", spec=spec, progress=False, batch_size=16)
    assert not (tmp_path / "bad.csv").exists()


def test_parquet_and_dataframes_in_and_out(multirate, tmp_path, monkeypatch):
    """The multi-rate log as Parquet (row groups of 13 rows, nulls for the missing F/T samples,
    a timestamp column) and as a pandas DataFrame give the CSV's estimates, written as Parquet
    or returned as a DataFrame; the per-row residual check p = chi2.sf(chi2, dof) with dof =
    rows - unknowns; a Parquet output over its input is refused; without pyarrow a typed error
    names it."""
    import sys

    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    from sparsedyn.estimation.log_io import MissingPackageError
    m = multirate
    spec = {**SPEC, "streams": {FT: {"align": "linear"}}}
    ref = estimate_log(None, m["path"], None, spec=spec, progress=False)
    frame = pd.DataFrame(m["cols"])
    frame["label"] = "walk"                                  # a text column, not read
    table = pa.Table.from_pandas(frame, preserve_index=False)
    ns = np.round(m["t"] * 1e9).astype(np.int64)             # the time as a timestamp
    table = table.set_column(0, "t", pa.array(ns, type=pa.timestamp("ns")))
    log = tmp_path / "log.parquet"
    pq.write_table(table, log, row_group_size=13)
    out = tmp_path / "est.parquet"
    summary = estimate_log(None, log, out, spec=spec, progress=False, batch_size=5)
    assert summary["bad_rows"] == ref.attrs["summary"]["bad_rows"]
    got = pq.read_table(out).to_pandas()
    assert list(got.columns) == list(ref.columns)
    assert got["row"].dtype == np.int64 and got["ok"].dtype == np.int8
    np.testing.assert_allclose(got.to_numpy(), ref.to_numpy(), rtol=1e-12, atol=1e-12)
    from_frame = estimate_log(None, frame, None, spec=spec, progress=False, batch_size=9)
    np.testing.assert_array_equal(from_frame.to_numpy(), ref.to_numpy())
    # the residual check (named output): p, chi2, dof
    plan = plan_from_spec(spec)
    ok = ref["ok"].to_numpy() == 1
    assert np.all(ref["dof"][ok] == plan.problem.shape[0] - plan.problem.shape[1])
    np.testing.assert_allclose(ref["p"][ok], scipy.stats.chi2.sf(ref["chi2"][ok], ref["dof"][ok]),
                               rtol=1e-12)
    assert np.all(ref["p"][ok] > 1e-3)                 # consistent readings on smooth motion
    with pytest.raises(ValueError, match="input log"):
        estimate_log(None, log, log, spec=spec, progress=False)
    with pytest.raises(ValueError, match="label"):
        estimate_log(None, frame, None, progress=False,
                     spec={**spec, "columns": {"q/joint1": "label"}})
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    for args in ((log, tmp_path / "o.csv"), (m["path"], tmp_path / "o.parquet")):
        with pytest.raises(MissingPackageError, match="pyarrow"):
            estimate_log(None, *args, spec=spec, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["est.parquet", "log.parquet"]


def test_spec_schema_lists_exactly_what_the_reader_accepts(capsys):
    """SPEC_SCHEMA's keys are read_spec's (top level and nested), a spec using every key
    passes read_spec, a value outside the schema's type or enum is refused by name, and
    `sparsedyn estimate --spec-schema` prints the schema."""
    from sparsedyn.cli import main
    from sparsedyn.estimation import log_spec
    schema = log_spec.SPEC_SCHEMA
    props = schema["properties"]
    assert set(props) == set(log_spec.SPEC_KEYS) and schema["additionalProperties"] is False
    assert set(props["accelerations"]["properties"]) == set(log_spec.ACCELERATION_KEYS)
    assert set(props["streams"]["additionalProperties"]["properties"]) == set(log_spec.STREAM_KEYS)
    assert set(props["units"]["properties"]) == set(log_spec.UNIT_KEYS)
    assert props["streams"]["additionalProperties"]["properties"]["align"]["enum"] == list(
        log_spec.ALIGN_MODES)
    full = {"model": "chain3", "floating_base": False, "sensors": [{"type": "JointAccelerations"}],
            "unknown_wrenches": [], "unactuated_base": None, "covariances": {"qdd": 1e-4},
            "columns": {"q/joint1": "a"}, "units": {"angles": "deg", "time": "ms"}, "time": "t",
            "contacts": {}, "streams": {"v": {"align": "linear"}},
            "accelerations": {"from": "velocities", "window": 5, "order": 2, "tolerance": 0.01},
            "output": "named", "std": True}
    assert set(full) == set(props)
    log_spec.read_spec(full)
    wrong = {"model": 3, "floating_base": "yes", "sensors": {}, "unknown_wrenches": "a",
             "unactuated_base": 1, "covariances": {"qdd": "big"}, "columns": {"q_0": 1},
             "units": {"angles": "grad"}, "time": 1, "contacts": {"a": 0},
             "streams": {"v": {"align": "cubic"}},
             "accelerations": {"from": "velocities", "window": 4, "order": 2},
             "output": "wide", "std": "yes"}
    assert set(wrong) == set(props)
    for key, value in wrong.items():
        with pytest.raises(ValueError, match=key):
            log_spec.read_spec({**full, key: value})
    with pytest.raises(ValueError, match="unknown key"):
        log_spec.read_spec({**full, "rate": 400})
    with pytest.raises(SystemExit) as info:
        main(["estimate", "--spec-schema"])
    assert info.value.code == 0
    assert json.loads(capsys.readouterr().out) == schema


def test_streams_and_derived_accelerations_on_a_dask_cluster(multirate, tmp_path):
    """Aligned streams and derived accelerations run before the blocks leave (workers rebuild
    the columns from the spec, the derived ones included): the cluster's file is the local
    one."""
    distributed = pytest.importorskip("distributed")
    m = multirate
    spec = {**SPEC, "streams": {FT: {"align": "linear"}},
            "accelerations": {"from": "velocities", "window": 11, "order": 3}}
    local = estimate_log(None, m["path"], tmp_path / "local.npz", spec=spec, progress=False,
                         batch_size=8)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=None) as cluster:
        remote = estimate_log(None, m["path"], tmp_path / "remote.npz", spec=spec,
                              progress=False, batch_size=8, scheduler=cluster.scheduler_address)
    inside = m["samples"][-1] - m["samples"][0] + 1            # first to last F/T sample
    assert remote == local and local["estimated"] == inside - 1     # but the partial row 21
    a, b = np.load(tmp_path / "local.npz"), np.load(tmp_path / "remote.npz")
    assert a.files == b.files
    for name in a.files:
        np.testing.assert_array_equal(a[name], b[name])


def test_bench_log_stages_runs_at_reduced_size(capsys):
    """experiments/bench_log_stages.py at a reduced size: every row comes out of both stages
    (its own assertion) and it prints a positive rate for each stage and chunk size."""
    import importlib.util
    import pathlib
    path = pathlib.Path(__file__).parents[1] / "experiments" / "bench_log_stages.py"
    spec = importlib.util.spec_from_file_location("bench_log_stages", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(N=3000, nv=4)
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("chunks of")]
    rates = [float(w) for ln in lines for w in ln.replace(",", " ").split() if w[0].isdigit()
             and "e" in w]
    assert len(lines) == 2 and len(rates) == 4 and all(r > 0 for r in rates)
