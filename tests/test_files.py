"""Files in and out: corrupt plan files (edited arrays behind a valid checksum, flipped bits) are
refused with one error type, every output is written atomically and never over an input, and
the estimate pipeline keeps every good row of a damaged log and leaves nothing behind when it is
interrupted."""
import errno
import io
import json
import os
import zipfile

import numpy as np
import pytest

from estimate_outputs import read_estimate
from oracles import pin, pin_twin, rel_err
from sparsedyn import PlanMismatchError
from sparsedyn.files import atomic_write, read_npz, refuse_overwrite
from sparsedyn.models import serial_chain
from sparsedyn.planner.factorization import _checksum
from sparsedyn.problems import compile, forward_dynamics, inverse_dynamics, load_plan
from sparsedyn.serialization import from_plain as _from_plain, to_plain as _to_plain

CORRUPT = (ValueError, PlanMismatchError)


@pytest.fixture(scope="module")
def chain_plans(tmp_path_factory):
    """A small model's FD plan (pivot checks: RECIPs) and ID plan, saved."""
    d = tmp_path_factory.mktemp("plans")
    model = serial_chain(3)
    out = {}
    for name, problem in (("fd", forward_dynamics(model, f_ext=["link2"])),
                          ("id", inverse_dynamics(model))):
        plan = compile(problem)
        plan.save(d / f"{name}.npz")
        out[name] = (plan, str(d / f"{name}.npz"))
    return model, out


def _stored(path):
    """(header, arrays, factorization dict) of a saved plan, read with plain NumPy."""
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    header = json.loads(str(arrays.pop("header")))
    return header, arrays, _from_plain(header["factorization"], arrays)


def _write_edited(path, out, edit):
    """Re-save the plan at `path` to `out` with edit(factorization dict) applied and the
    factorization's checksum recomputed: a file whose zip CRCs and checksum are all valid."""
    header, arrays, fact = _stored(path)
    edit(fact)
    fact["checksum"] = _checksum(fact)
    new_arrays = {k: v for k, v in arrays.items() if not k.startswith("fact/")}
    header["factorization"] = _to_plain(fact, new_arrays, "fact")
    np.savez_compressed(out, header=np.array(json.dumps(header)), **new_arrays)


def _set(key, index, value):
    def edit(fact):
        arr = np.array(fact[key])
        arr[index] = value
        fact[key] = arr
    return edit


def _replace(key, fn):
    def edit(fact):
        fact[key] = fn(np.asarray(fact[key]))
    return edit


def _edits(fact):
    """(label, edit) pairs of the stored program's index arrays: out of range, negative, the
    wrong dtype, the wrong length, not a permutation."""
    p = {k[len("program_"):]: np.asarray(v) for k, v in fact.items() if k.startswith("program_")}
    n, slots, nnz = int(p["n"]), int(p["n_slots"]), int(p["nnz"])
    recip = np.flatnonzero(p["op_code"] == 0)
    edits = []
    for key in ("op_t", "op_a", "op_b", "init_slots"):
        edits += [(f"{key} past n_slots", _set("program_" + key, 0, slots)),
                  (f"{key} negative", _set("program_" + key, -1, -1))]
    for key in ("load_entries", "scale_entries"):
        edits += [(f"{key} past nnz", _set("program_" + key, 0, nnz)),
                  (f"{key} negative", _set("program_" + key, -1, -3))]
    if recip.size:   # in the slot range, but a pivot check's b is a row of D
        edits.append(("RECIP op_b past n", _set("program_op_b", recip[0], n)))
    for key in ("row_perm", "col_perm"):
        edits += [(f"{key} duplicate", _set("program_" + key, 0, p[key][1])),
                  (f"{key} past n", _set("program_" + key, 0, n)),
                  (f"{key} short", _replace("program_" + key, lambda a: a[:-1]))]
    for key in ("op_code", "op_t", "op_a", "op_b", "row_perm", "load_entries", "scale_ptr",
                "scale_entries", "init_slots", "op_stage"):
        edits += [(f"{key} as float", _replace("program_" + key, lambda a: a.astype(float) + 0.25)),
                  (f"{key} 2-d", _replace("program_" + key, lambda a: a.reshape(1, -1)))]
    edits += [("op_code 257 (wraps to a valid int8)", _replace(
                  "program_op_code", lambda a: np.concatenate(([257], a[1:])).astype(np.int16))),
              ("op_code negative", _set("program_op_code", 0, -1)),
              ("op_t short", _replace("program_op_t", lambda a: a[:-1])),
              ("op_stage short", _replace("program_op_stage", lambda a: a[:-1])),
              ("scale_ptr past the entries", _set("program_scale_ptr", -1, 10 ** 6)),
              ("scale_ptr not starting at 0", _set("program_scale_ptr", 0, 1)),
              ("scale_ptr decreasing", _replace("program_scale_ptr", lambda a: a[::-1].copy())),
              ("n_slots too small", _replace("program_n_slots", lambda a: np.asarray(nnz))),
              ("n_factor_ops past the ops", _replace("program_n_factor_ops",
                                                     lambda a: np.asarray(10 ** 6))),
              ("n as a float", _replace("program_n", lambda a: np.asarray(float(n)))),
              ("tol NaN", _replace("program_tol", lambda a: np.asarray(np.nan))),
              ("init_values NaN", _set("program_init_values", 0, np.nan)),
              ("pattern index past the rows", _set("pattern_indices", -1, 10 ** 6)),
              ("pattern indptr as float", _replace("pattern_indptr", lambda a: a.astype(float))),
              ("pattern of another size", _replace("shape", lambda a: a + 1)),
              ("constant entries edited", _replace("constant_values", lambda a: np.where(
                  np.isnan(a), 1.0, a))),
              ("table columns of different lengths", _replace("table_name", lambda a: a[:-1]))]
    return edits


@pytest.mark.parametrize("which", ["fd", "id"])
def test_edited_index_arrays_with_a_valid_checksum_are_refused(chain_plans, tmp_path, which):
    """Every index array of the stored program out of range, of the wrong dtype or length, or a
    permutation that is not one: load_plan raises ValueError (never a crash in a kernel)."""
    model, plans = chain_plans
    plan, path = plans[which]
    _, _, fact = _stored(path)
    edits = _edits(fact)
    assert len(edits) > 40
    unrefused = []
    for label, edit in edits:
        out = str(tmp_path / "edited.npz")
        try:
            _write_edited(path, out, edit)
        except (ValueError, IndexError):
            continue        # not applicable to this plan (e.g. an empty array)
        try:
            load_plan(out, model)
        except CORRUPT:
            continue
        unrefused.append(label)
    assert not unrefused, f"loaded despite: {unrefused}"
    # the unedited file written the same way loads and solves like the original
    _write_edited(path, str(tmp_path / "same.npz"), lambda fact: None)
    same = load_plan(str(tmp_path / "same.npz"), model)
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng, batch=3)
    v, y = rng.normal(size=(2, 3, model.nv))
    given = plan.problem.given
    out = plan.problem.outputs[0]
    for backend in ("numpy", "numba", "c"):
        assert np.array_equal(same.solve(q, v, **{given: y}, backend=backend)[out],
                              plan.solve(q, v, **{given: y}, backend=backend)[out])


@pytest.mark.parametrize("which", ["fd", "id"])
def test_in_range_edits_of_the_program_are_refused_or_harmless(chain_plans, tmp_path, which):
    """Edits that keep every index in range and every dtype right (an operand moved to another
    slot, the program's constants changed) behind a recomputed checksum: load_plan runs the
    stored program on test states, so an edited plan is refused, or it solves exactly as the
    original (never a plan that loads and answers wrongly)."""
    model, plans = chain_plans
    plan, path = plans[which]
    _, _, fact = _stored(path)
    ops = np.asarray(fact["program_op_a"])
    edits = [(f"op_a[{k}] moved", _set("program_op_a", k, int(ops[(k + 1) % ops.size])))
             for k in range(0, ops.size, max(1, ops.size // 8)) if ops[k] != ops[(k + 1) % ops.size]]
    edits.append(("constants changed", _replace("program_init_values", lambda a: a * 2 + 0.5)))
    rng = np.random.default_rng(1)
    q = model.random_configuration(rng, batch=4)
    v, y = rng.normal(size=(2, 4, model.nv))
    given, out = plan.problem.given, plan.problem.outputs[0]
    refused = 0
    for label, edit in edits:
        edited = str(tmp_path / "edited.npz")
        _write_edited(path, edited, edit)
        try:
            loaded = load_plan(edited, model)
        except ValueError:
            refused += 1
            continue
        for backend in ("numpy", "numba", "c"):
            assert np.abs(loaded.solve(q, v, **{given: y}, backend=backend)[out]
                          - plan.solve(q, v, **{given: y}, backend=backend)[out]).max() <= 1e-12, label
    assert refused >= 1


def test_edited_headers_are_refused(chain_plans, tmp_path):
    """The JSON header of a plan edited (valid zip, wrong content): ValueError or
    PlanMismatchError, never a TypeError or AttributeError from inside load_plan."""
    model, plans = chain_plans
    _, path = plans["fd"]
    header, arrays, _ = _stored(path)
    edits = [lambda h: h.update(model=5), lambda h: h.update(problem=[1]),
             lambda h: h.update(pattern_shape=7), lambda h: h["model"].update(links=3, fingerprint=0),
             lambda h: h["problem"].update(name="kinematics"),
             lambda h: h["problem"].update(fx_links=["no_such_link"]),
             lambda h: h.update(factorization={"__array__": "nowhere"}),
             lambda h: h.update(factorization={"__dict__": {"format": {"__weird__": 1}}}),
             lambda h: h.update(factorization=[]), lambda h: h.update(version="1")]
    for edit in edits:
        h = json.loads(json.dumps(header))
        edit(h)
        np.savez_compressed(tmp_path / "h.npz", header=np.array(json.dumps(h)), **arrays)
        with pytest.raises(CORRUPT):
            load_plan(str(tmp_path / "h.npz"), model)
    np.savez_compressed(tmp_path / "h.npz", header=np.array("{not json"), **arrays)
    with pytest.raises(ValueError, match="not a readable sparsedyn plan file"):
        load_plan(str(tmp_path / "h.npz"), model)


def _plain_contents(path):
    header, arrays, _ = _stored(path)
    return header, arrays


def test_flipped_bits_anywhere_in_a_plan_file_are_refused_or_harmless(chain_plans, tmp_path):
    """300 random single-bit flips over a saved plan: each one either raises ValueError /
    PlanMismatchError (never zlib.error, BadZipFile or a crash) or, where the bit carries no
    data (a zip timestamp), loads a plan identical to the original."""
    model, plans = chain_plans
    _, path = plans["fd"]
    raw = bytearray(open(path, "rb").read())
    ref_header, ref_arrays = _plain_contents(path)
    rng = np.random.default_rng(16)
    refused = harmless = 0
    for bit in rng.choice(8 * len(raw), size=300, replace=False):
        data = bytearray(raw)
        data[bit // 8] ^= 1 << (bit % 8)
        out = tmp_path / "flipped.npz"
        out.write_bytes(bytes(data))
        try:
            load_plan(str(out), model)
        except CORRUPT as exc:
            assert "Traceback" not in str(exc)
            refused += 1
            continue
        header, arrays = _plain_contents(out)
        assert header == ref_header and arrays.keys() == ref_arrays.keys()
        assert all(np.array_equal(arrays[k], ref_arrays[k], equal_nan=arrays[k].dtype.kind == "f")
                   for k in arrays)
        harmless += 1
    assert refused > 200 and refused + harmless == 300


def test_read_npz_checks_the_data_not_only_the_names(tmp_path):
    """read_npz: a member whose .npy header announces more data than it holds, a member that is
    not an array, a pickle: ValueError naming the file; a normal file reads like np.load."""
    good = tmp_path / "good.npz"
    np.savez_compressed(good, a=np.arange(6).reshape(2, 3), s=np.array("text"),
                        f=np.asfortranarray(np.ones((3, 2))))
    got = read_npz(good)
    with np.load(good) as ref:
        assert got.keys() == set(ref.files)
        assert all(np.array_equal(got[k], ref[k]) and got[k].dtype == ref[k].dtype for k in got)
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False,
                                               "shape": (10 ** 9,)})
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as zf:
        zf.writestr("x.npy", buf.getvalue() + b"\0" * 16)
        zf.writestr("notes.txt", b"hello")
    with pytest.raises(ValueError, match="huge.npz: not a readable"):
        read_npz(tmp_path / "huge.npz")
    np.savez(tmp_path / "obj.npz", o=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="Python objects"):
        read_npz(tmp_path / "obj.npz")


# ---------------------------------------------------------------- atomic writes, overwrites

def _listing(folder):
    return sorted(os.listdir(folder))


def test_atomic_write_replaces_only_a_complete_file(tmp_path):
    """A write that fails half-way (or is interrupted) leaves the old file and no temporary;
    a complete one replaces it, keeping its permissions; a link is written through."""
    target = tmp_path / "out.txt"
    target.write_text("old")
    os.chmod(target, 0o640)
    for exc in (RuntimeError("disk on fire"), KeyboardInterrupt()):
        with pytest.raises(type(exc)):
            with atomic_write(target, "w") as fh:
                fh.write("half of the new")
                raise exc
        assert target.read_text() == "old" and _listing(tmp_path) == ["out.txt"]
    with atomic_write(target, "w") as fh:
        fh.write("new")
    assert target.read_text() == "new" and _listing(tmp_path) == ["out.txt"]
    assert os.stat(target).st_mode & 0o777 == 0o640
    link = tmp_path / "link.txt"
    link.symlink_to(target)
    with atomic_write(link, "w") as fh:
        fh.write("through")
    assert link.is_symlink() and target.read_text() == "through"
    with pytest.raises(IsADirectoryError):
        with atomic_write(tmp_path, "w"):
            pass
    with pytest.raises(FileNotFoundError, match="no such directory"):
        with atomic_write(tmp_path / "nope" / "x.txt", "w"):
            pass


def test_a_full_disk_names_the_file_being_written(tmp_path):
    """ENOSPC inside the write: OSError naming the target (not the temporary), nothing left."""
    with pytest.raises(OSError, match="out.bin") as info:
        with atomic_write(tmp_path / "out.bin") as fh:
            fh.write(b"x")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert info.value.errno == errno.ENOSPC and _listing(tmp_path) == []


def test_refuse_overwrite_sees_through_links_and_relative_paths(tmp_path, monkeypatch):
    log = tmp_path / "log.csv"
    log.write_text("x")
    monkeypatch.chdir(tmp_path)
    os.symlink("log.csv", tmp_path / "soft.csv")
    os.link(log, tmp_path / "hard.csv")
    os.mkdir(tmp_path / "sub")
    for same in ("log.csv", "./log.csv", "sub/../log.csv", str(log), "soft.csv", "hard.csv"):
        with pytest.raises(ValueError, match="input log"):
            refuse_overwrite(same, **{"input log": str(log)})
    refuse_overwrite("other.csv", **{"input log": str(log), "spec": None})


def test_plan_save_is_atomic(tmp_path, monkeypatch):
    """Plan.save interrupted while writing: the previous plan file is intact and loads."""
    model = serial_chain(2)
    path = tmp_path / "id.npz"
    compile(inverse_dynamics(model)).save(path)
    before = path.read_bytes()

    def broken(fh, **arrays):
        fh.write(b"PK\x03\x04 half a zip")
        raise KeyboardInterrupt
    monkeypatch.setattr(np, "savez_compressed", broken)
    with pytest.raises(KeyboardInterrupt):
        compile(forward_dynamics(model)).save(path)
    assert path.read_bytes() == before and _listing(tmp_path) == ["id.npz"]
    monkeypatch.undo()
    assert load_plan(path, model).problem.name == "inverse_dynamics"


# ---------------------------------------------------------------- the estimate pipeline

CHAIN_SPEC = {"model": "chain3", "sensors": [{"type": "JointAccelerations"}]}


@pytest.fixture(scope="module")
def chain_log():
    """States of a 3-link chain, their joint accelerations and Pinocchio's torques."""
    model = serial_chain(3)
    rng = np.random.default_rng(5)
    B = 12
    q, v, qdd = model.random_configuration(rng, batch=B), *rng.normal(size=(2, B, model.nv))
    pm = pin_twin(model)
    data = pm.createData()
    tau = np.array([pin.rnea(pm, data, q[b], v[b], qdd[b]) for b in range(B)])
    return model, {"q": q, "v": v, "qdd": qdd}, tau


def _csv_lines(columns):
    names = [f"{k}_{j}" for k, a in columns.items() for j in range(a.shape[1])]
    table = np.hstack(list(columns.values()))
    return [",".join(names).encode()] + [",".join(repr(float(x)) for x in row).encode()
                                         for row in table]


def _write_spec(folder, spec=CHAIN_SPEC):
    path = folder / "spec.json"
    path.write_text(json.dumps(spec))
    return str(path)


def test_damaged_csv_lines_are_reported_and_the_rest_estimated(chain_log, tmp_path):
    """A whitespace-only line, a non-UTF-8 byte, a quoted field spanning two lines, a NUL byte:
    each is a bad row named with its line; empty lines are not rows; quoted numbers are fine;
    every other row is estimated (Pinocchio's torques), with no extra all-zero row."""
    from sparsedyn.estimation import estimate_log
    model, cols, tau = chain_log
    lines = _csv_lines(cols)                  # lines[1 + r] is data row r
    good = lines[1:]
    bad_lines = {
        1: b"   \t ",                                                   # whitespace only
        3: good[2].replace(b",", b",\xff", 1),                           # not UTF-8
        5: good[4].replace(b",", b',"', 1),                              # quote opened ...
        6: good[4].split(b",", 1)[1] + b'"',                             # ... closed a line later
        8: good[6].replace(b",", b",\x00", 1),                           # NUL byte
    }
    rows = [good[0], bad_lines[1], good[1], bad_lines[3], b"", good[3], bad_lines[5],
            bad_lines[6], good[5], bad_lines[8], b'"' + good[7].replace(b",", b'","') + b'"',
            good[8], b"\r", good[9], good[10], good[11]]
    # data rows: 0 good0, 1 blank, 2 good1, 3 non-UTF-8, 4 good3, 5/6 the split quote, 7 good5,
    # 8 NUL, 9 quoted good7, 10 good8, 11 good9, 12 good10, 13 good11 (empty lines: not rows)
    path = tmp_path / "log.csv"
    path.write_bytes(b"\n".join([lines[0]] + rows) + b"\n")
    truth = {0: 0, 2: 1, 4: 3, 7: 5, 9: 7, 10: 8, 11: 9, 12: 10, 13: 11}
    bad = {1: "line 3: blank", 3: "line 5: not UTF-8", 5: "line 8: unbalanced", 6: "line 9: unbalanced",
           8: "line 11: non-numeric"}
    for out in ("est.npz", "est.csv"):
        summary = estimate_log(None, str(path), str(tmp_path / out), spec=CHAIN_SPEC,
                               batch_size=4, progress=False)
        assert summary["rows"] == 14 and summary["estimated"] == len(truth)
        assert {r for r, _ in summary["bad_rows"]} == set(bad)
        for r, why in summary["bad_rows"]:
            assert why.startswith(bad[r]), why
        res = read_estimate(tmp_path / out, model.nv)
        est, ok, row = res["tau"], res["ok"], res["row"]
        assert np.array_equal(row, np.arange(14))
        assert all(ok[r] == -1 and np.isnan(est[r]).all() for r in bad)
        assert all(ok[r] == 1 for r in truth)
        assert rel_err(est[list(truth)], tau[list(truth.values())]) <= 1e-10
    assert _listing(tmp_path) == ["est.csv", "est.npz", "log.csv"]


def test_spec_keys_are_used_or_refused_by_name(chain_log, tmp_path):
    """Unknown keys, unknown or missing sensor arguments and wrong types: ValueError naming the
    key; "covariances" reach the MAP estimate (a precise torque sensor wins over imprecise
    accelerations and the other way round, against Pinocchio's torques), and the methods
    that do not use them refuse them."""
    from sparsedyn.estimation.logs import plan_from_spec, problem_from_spec
    bad = [({**CHAIN_SPEC, "garbage": 1}, "unknown key.*garbage"),
           ({**CHAIN_SPEC, "covarainces": {}}, "unknown key.*covarainces"),
           ({"sensors": []}, "missing \"model\""),
           ({**CHAIN_SPEC, "model": 3}, "model.*expected a string"),
           ({**CHAIN_SPEC, "floating_base": "no"}, "floating_base.*true or false"),
           ({**CHAIN_SPEC, "sensors": {"type": "JointAccelerations"}}, "sensors.*a list"),
           ({**CHAIN_SPEC, "sensors": [{"type": "Thermometer"}]}, "unknown type 'Thermometer'"),
           ({**CHAIN_SPEC, "sensors": [{"type": "ForceTorque"}]}, "ForceTorque needs 'joint'"),
           ({**CHAIN_SPEC, "sensors": [{"type": "ForceTorque", "joint": "joint2", "frame": "x"}]},
            "takes no argument.*frame"),
           ({**CHAIN_SPEC, "sensors": [{"type": "ForceTorque", "joint": 2}]}, "joint.*string"),
           ({**CHAIN_SPEC, "sensors": [{"type": "LoadCells", "link": "link2",
                                        "placement": [[1, 0], [0, 1]]}]}, "placement.*4x4"),
           ({**CHAIN_SPEC, "sensors": [{"type": "JointTorques", "joints": "joint1"}]},
            "joints.*list"),
           ({**CHAIN_SPEC, "unknown_wrenches": "link2"}, "unknown_wrenches.*list"),
           ({**CHAIN_SPEC, "covariances": {"qdd": "small"}}, "covariances.*qdd.*number"),
           ({**CHAIN_SPEC, "covariances": []}, "covariances.*object"),
           ({**CHAIN_SPEC, "model": "chain3", "floating_base": True}, "no floating-base")]
    for spec, match in bad:
        with pytest.raises(ValueError, match=match):
            problem_from_spec(spec)
    with pytest.raises(KeyError, match="nosuch"):
        plan_from_spec({**CHAIN_SPEC, "covariances": {"nosuch": 1.0}})
    for method in ("lstsq", "exact"):
        with pytest.raises(ValueError, match=f"covariances.*{method}"):
            plan_from_spec({**CHAIN_SPEC, "covariances": {"qdd": 1.0}}, method)
    model, cols, tau = chain_log
    spec = {"model": "chain3", "sensors": [{"type": "JointAccelerations"},
                                           {"type": "JointTorques"}]}
    tau_read = tau + np.random.default_rng(1).normal(size=tau.shape)   # a biased torque sensor
    readings = {"qdd": cols["qdd"], "tau": tau_read}
    for trusted, expected, ignored in (("qdd", tau, tau_read), ("tau", tau_read, tau)):
        other = "tau" if trusted == "qdd" else "qdd"
        plan = plan_from_spec({**spec, "covariances": {trusted: 1e-10, other: 1e2}})
        assert plan.method == "map"
        est = plan.solve(cols["q"], cols["v"], readings)["tau"]
        # the MAP estimate follows the trusted sensor up to the prior's bias (~1e-6 here)
        assert rel_err(est, expected) <= 1e-4 and rel_err(est, ignored) >= 0.1


def _interrupting(monkeypatch, after, action):
    """Make the pipeline's block solver run `action` when it is called for block `after`."""
    from sparsedyn.estimation import logs
    real, calls = logs._solve_block, []

    def solve_block(*args):
        calls.append(1)
        if len(calls) == after + 1:
            action()
        return real(*args)
    monkeypatch.setattr(logs, "_solve_block", solve_block)


def _raise_interrupt():
    raise KeyboardInterrupt


@pytest.mark.parametrize("out", ["est.npz", "est.csv"])
def test_an_interrupted_estimate_leaves_no_output_and_no_temporaries(chain_log, tmp_path,
                                                                     monkeypatch, capsys, out):
    """Ctrl-C (KeyboardInterrupt) or SIGTERM in the middle of `estimate`: no output file that
    could pass for a finished run (a previous one stays as it was), no temporary files or
    folders, and from the command line one line and the signal's exit code."""
    import signal
    from sparsedyn.cli import main
    from sparsedyn.estimation import estimate_log
    model, cols, _ = chain_log
    log = tmp_path / "log.npz"
    np.savez(log, **cols)
    spec = _write_spec(tmp_path)
    _interrupting(monkeypatch, 1, _raise_interrupt)
    with pytest.raises(KeyboardInterrupt):
        estimate_log(None, str(log), str(tmp_path / out), spec=spec, batch_size=4, progress=False)
    assert _listing(tmp_path) == ["log.npz", "spec.json"]
    (tmp_path / out).write_text("the previous run's estimates")
    argv = ["estimate", spec, str(log), str(tmp_path / out), "--batch-size", "4", "--no-progress"]
    _interrupting(monkeypatch, 1, _raise_interrupt)
    assert main(argv) == 128 + signal.SIGINT
    _interrupting(monkeypatch, 2, lambda: os.kill(os.getpid(), signal.SIGTERM))
    assert main(argv) == 128 + signal.SIGTERM
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"sparsedyn estimate: interrupted ({name}); outputs not completed were not "
                   f"written" for name in ("SIGINT", "SIGTERM")]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL      # main restored it
    assert _listing(tmp_path) == sorted(["log.npz", "spec.json", out])
    assert (tmp_path / out).read_text() == "the previous run's estimates"
    monkeypatch.undo()
    assert main(argv) == 0
    assert np.array_equal(np.load(tmp_path / out)["row"] if out.endswith("npz") else
                          np.genfromtxt(tmp_path / out, delimiter=",", names=True)["row"],
                          np.arange(len(cols["q"])))


def test_a_full_disk_during_estimate_is_one_line(chain_log, tmp_path, monkeypatch, capsys):
    """ENOSPC while writing the estimates: exit code 2, one line on stderr naming the output
    and the cause (no traceback), nothing left on the disk."""
    from sparsedyn.cli import main
    from sparsedyn.estimation import log_io
    model, cols, _ = chain_log
    log = tmp_path / "log.npz"
    np.savez(log, **cols)
    spec = _write_spec(tmp_path)

    def full(self, *args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(log_io.EstimateWriter, "write", full)
    for out in ("est.npz", "est.csv", "est.parquet"):
        code = main(["estimate", spec, str(log), str(tmp_path / out), "--no-progress"])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert "No space left on device" in err and out in err
        assert _listing(tmp_path) == ["log.npz", "spec.json"]
