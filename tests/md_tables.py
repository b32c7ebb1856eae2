"""Markdown tables of experiments/out/*.md, for tests/test_experiment_outputs.py.

tables(text) -> {section heading: [row dicts]}: every pipe table of the text under the "## "
heading that precedes it ("" before the first heading), each row a {column header: cell} dict
(cells stripped). Two tables under one heading are concatenated (their headers are kept per row).
"""
from __future__ import annotations


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def tables(text):
    out, heading, header = {}, "", None
    for line in text.splitlines():
        if line.startswith("## "):
            heading, header = line[3:].strip(), None
            continue
        if not line.startswith("|"):
            header = None
            continue
        cells = _cells(line)
        if header is None:
            header = cells
            continue
        if all(set(c) <= set("-:") and c for c in cells):     # the |---| separator line
            continue
        out.setdefault(heading, []).append(dict(zip(header, cells)))
    return out


def keyed(rows, key):
    """{tuple of the key columns' cells: row} (the key must be unique)."""
    out = {}
    for row in rows:
        k = tuple(row[c] for c in key)
        assert k not in out, f"duplicate key {k}"
        out[k] = row
    return out


def compare(fresh_text, committed_text, key, skip=()):
    """Every row of every table of `fresh_text` (recomputed at reduced size) equals the committed
    row of the same section and key, cell by cell except the `skip` columns. Returns the number
    of cells compared."""
    fresh, committed = tables(fresh_text), tables(committed_text)
    assert fresh, "nothing recomputed"
    compared = 0
    for heading, rows in fresh.items():
        assert heading in committed, f"section {heading!r} missing from the committed output"
        ref = keyed(committed[heading], [c for c in key if c in committed[heading][0]])
        for row in rows:
            k = tuple(row[c] for c in key if c in row)
            assert k in ref, f"{heading!r}: no committed row {k}"
            old = ref[k]
            assert set(row) == set(old), (heading, k, sorted(set(row) ^ set(old)))
            for col, cell in row.items():
                if col in skip:
                    continue
                assert cell == old[col], (f"{heading!r} row {k} column {col!r}: committed {old[col]!r}, "
                                          f"the current code gives {cell!r}: rerun the experiment")
                compared += 1
    return compared


def number(cell):
    """A table cell as a number: 12,345 -> 12345, '+7.5%' -> 7.5, '29,304 (8,208)' -> 29304."""
    return float(cell.split(" (")[0].replace(",", "").rstrip("%x"))


def table_rows(text):
    """Every pipe-table line of `text` but the |---| separators, as written (for checking that
    the README quotes a committed table as it is)."""
    return [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]


def readme_quotes(out_path, n_rows):
    """The pipe-table lines of a committed output (header included), after checking there are
    n_rows of them and that README.md quotes each one as it is."""
    import pathlib
    rows = table_rows(pathlib.Path(out_path).read_text())
    assert len(rows) == n_rows, rows
    readme = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    for row in rows:
        assert row in readme, row
    return rows


def needs_cpp_peer(test):
    """A slow test that builds a C++ peer against the pin wheel: skipped without g++ or
    Eigen's headers (libeigen3-dev; run.sh installs them)."""
    import os
    import shutil
    import pytest
    missing = shutil.which("g++") is None or not os.path.isdir("/usr/include/eigen3")
    return pytest.mark.slow(pytest.mark.skipif(
        missing, reason="needs g++ and Eigen headers (libeigen3-dev)")(test))


def run_reduced(name, argv, tmp_path):
    """experiments/<name>.py's main(argv) at reduced size, writing into tmp_path: (its output
    text, the thread counts "1", "2" that numba allows, as its tables list them)."""
    import importlib
    import pathlib
    import sys

    import numba
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "experiments"))
    out = tmp_path / f"{name}.md"
    importlib.import_module(name).main(list(argv) + ["--out", str(out)])
    return out.read_text(), tuple(str(t) for t in (1, 2) if t <= numba.config.NUMBA_NUM_THREADS)
