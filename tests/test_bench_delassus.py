"""experiments/bench_delassus.py regenerates at reduced size with the Pinocchio C++ peer
(experiments/peers/pin_delassus.cpp, built against the pin wheel): Pinocchio C++'s answers and
ours are checked against the dense J M^-1 J^T before timing, the C++ row and the section of ratios
against it have every compiled row, each ratio is the row's printed time over Pinocchio C++'s,
and the target line quotes the 1-thread ratios. No timing is asserted (slow: builds a C++
program)."""
import re

from md_tables import needs_cpp_peer, number, run_reduced, tables

COMPILED = ["pv-osimr numba 1T", "kernel 1T", "sparse numba 1T"]


def ratio(cell):
    return float(re.search(r"\(([\d.]+)x\)", cell).group(1))


def check(text, batches, threads):
    cols = [f"B={B}" for B in batches]
    main, cpp = tables(text)[""], tables(text)["Against Pinocchio C++ (same run)"]
    by_main = {r["method"]: r for r in main}
    assert [r["method"] for r in main][:2] == ["pinocchio", "pinocchio C++"]
    expected = ["pinocchio C++"] + [k for k in by_main if "numba" in k or k.startswith("kernel")]
    assert all(k in expected for k in COMPILED) and ("2" not in threads or
                                                      "kernel 2T" in expected)
    assert [r["method"] for r in cpp] == expected
    ref = {c: number(cpp[0][c]) for c in cols}
    for c in cols:   # the C++ row of both tables: one time; its ratio there is to Python's
        assert number(by_main["pinocchio C++"][c]) == ref[c] > 0
        slack = 0.005 + 0.05 * ref[c] / number(by_main["pinocchio"][c])
        assert abs(ratio(by_main["pinocchio C++"][c]) - ref[c] / number(by_main["pinocchio"][c])) \
            <= slack
    for row in cpp[1:]:
        for c in cols:
            t = number(row[c])
            assert t == number(by_main[row["method"]][c])
            # printed to 0.1 us: the ratio of the unrounded times lies within the rounding
            lo, hi = (t - 0.05) / (ref[c] + 0.05), (t + 0.05) / (ref[c] - 0.05)
            assert lo - 0.005 <= ratio(row[c]) <= hi + 0.005, (row["method"], c)
    target = re.search(r"target, compiled PV-OSIMr <= 0\.5x Pinocchio C\+\+ per state at "
                       rf"B = {max(batches)} on 1 thread: kernel 1T ([\d.]+)x \((met|not met)\), "
                       r"public call ([\d.]+)x \((met|not met)\)", text)
    assert target, "the target line"
    by_cpp = {r["method"]: ratio(r[cols[-1]]) for r in cpp[1:]}
    assert float(target[1]) == by_cpp["kernel 1T"]
    assert float(target[3]) == by_cpp["pv-osimr numba 1T"]
    for value, verdict in ((target[1], target[2]), (target[3], target[4])):
        if float(value) != 0.5:                    # 0.50 printed: either side of the target
            assert (float(value) < 0.5) == (verdict == "met")
    checked = re.search(r"pv-osimr numba vs dense ([\d.e+-]+), Pinocchio C\+\+ vs pv-osimr "
                        r"([\d.e+-]+), Pinocchio C\+\+ vs dense ([\d.e+-]+)\.", text)
    assert checked and all(float(x) <= 1e-8 for x in checked.groups())
    assert "Load before" in text and "Load after" in text


@needs_cpp_peer
def test_benchmark_runs_at_reduced_size(tmp_path):
    text, threads = run_reduced("bench_delassus", ["--batches", "1", "3"], tmp_path)
    check(text, (1, 3), threads)
    assert "--batches 1 3" in text
