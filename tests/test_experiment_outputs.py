"""Committed experiment outputs cannot go stale, and the prose quotes them as they are.

1. Each operation-count experiment recomputes some of its table rows (the same functions as the
   full run, fewer sizes, no timings) and they must equal the committed experiments/out/*.md row
   of the same key, cell by cell (integer op counts exactly, ratios as printed). Columns that are
   timings, or that depend on SciPy's / CHOLMOD's orderings (their versions, not our code: each
   script lists them), are not compared. A failure means: rerun that experiment.
2. Every number that experiments/README.md, delassus.md and berdy_notes.md quote from an output
   is looked up in (or computed from) the committed tables (QUOTES below).
"""
from __future__ import annotations

import functools
import math
import pathlib
import re
import sys

import numpy as np
import pytest

from md_tables import compare, keyed, number, tables

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXP = ROOT / "experiments"
OUT = EXP / "out"
sys.path.insert(0, str(EXP))


def committed(name):
    return (OUT / name).read_text(encoding="utf-8")


def version_dependent(name, *columns):
    """`columns` when this installation's SciPy / scikit-sparse differ from those the committed
    output was computed with (so they are skipped), else () (compared exactly)."""
    from own_orderings import versions_line
    return () if versions_line() in committed(name).splitlines() else tuple(columns)


# ------------------------------------------------------------------ 1. recomputed rows

def test_fig1_rows_regenerate():
    import fig1_fd_chain_flops as fig1
    rows = [fig1.row_for(n) for n in (2, 5, 7, 20, 50)]
    fresh = "\n".join(fig1.table_lines(rows))
    skip = version_dependent("fig1.md", *fig1.VERSION_DEPENDENT)
    assert compare(fresh, committed("fig1.md"), key=["N"], skip=skip) == 5 * (28 - len(skip))


def test_fig2_rows_regenerate():
    import fig2_estimation_flops as fig2
    fresh = "\n".join(fig2.table_lines([fig2.row_for(n) for n in (3, 12)]))
    skip = version_dependent("fig2.md", *fig2.VERSION_DEPENDENT)
    assert compare(fresh, committed("fig2.md"), key=["N_B"], skip=skip) == 2 * (11 - len(skip))
    assert fig2.humanoid_line() in committed("fig2.md")
    fresh = "\n".join(fig2.sie_lines([fig2.sie_row(n) for n in (4, 10)]))
    skip = version_dependent("fig2.md", *fig2.SIE_VERSION_DEPENDENT, *fig2.SIE_MATCHING_DEPENDENT)
    assert compare(fresh, committed("fig2.md"), key=["N_B"], skip=skip) == 2 * (9 - len(skip))


def test_delassus_rows_regenerate():
    import delassus_studies as ds
    text = committed("delassus_tables.md")
    fresh = "\n".join(ds.tree_lines(ds.study_tree([0, 10], [1, 2])))
    assert compare(fresh, text, key=["branches/side", "stem"]) == 4 * 8
    for (title, xlabel, _), rows in zip(ds.CHAIN_TITLES, (ds.study_chain_k2([2, 3]),
                                                          ds.study_chain_every([2, 4]))):
        assert compare("\n".join(ds.chain_lines(title, xlabel, rows)), text, key=[xlabel]) == 2 * 5
    cases = ["humanoid, 6D feet", "five-finger hand alone, 5 x 3D tips",
             "humanoid + left hand, 5 x 3D tips"]
    robots = ds.study_robots(cases)
    skip = version_dependent("delassus_tables.md", *ds.VERSION_DEPENDENT)
    assert compare("\n".join(ds.robot_lines(robots)), text, key=["case"], skip=skip) == 3 * (12 - len(skip))
    assert compare("\n".join(ds.sparse_lines(robots)), text, key=["case"]) == 3 * 9
    assert ds.sparsity_line() in text.splitlines()


def test_delassus_representative_humanoid_rows_regenerate():
    """Sections (h) and (i): EFPA's ASIMO-like cases and seed 000's Atlas-like cases."""
    import delassus_studies as ds
    text = committed("delassus_tables.md")
    efpa = ds.study_efpa([ds.ASIMO_HF, "ASIMO-like on the right foot (fixed), 6D hands + left foot"])
    assert compare("\n".join(ds.efpa_lines(efpa)), text, key=["case"]) == 2 * 13
    assert ds.efpa_breakdown_line() in text.splitlines()
    assert ds.sfa_steps_line() in text.splitlines()
    assert all(line in text.splitlines() for line in ds.pv_breakdown_lines())
    atlas = ds.study_atlas(["Atlas-like, 6D feet", "Atlas-like, 4 x 3D corners per foot"])
    assert compare("\n".join(ds.atlas_lines(atlas)), text, key=["case"]) == 2 * 9


def test_loops_tables_rows_regenerate():
    import loops_tables as lt
    rows = lt.run_tables(batch=1, repeat=0, systems=["12-link GT chain", "Mini Cheetah"])
    scaling = lt.run_scaling([2, 4], batch=1, repeat=0)
    fresh = "\n".join(lt.table_lines(rows, scaling))
    fresh = fresh.split("Log-log slope")[0]                 # two lengths: not the full sweep's fit
    skip = lt.TIMING_COLUMNS
    assert compare(fresh, committed("loops_tables.md"), key=["system", "algorithm", "chain", "links"],
                   skip=skip) > 60
    osim = "\n".join(lt.osim_scaling_lines(lt.run_osim_scaling([2, 4, 24])))
    osim = osim.split("Log-log slope")[0]                   # three lengths: not the full sweep's fit
    assert compare(osim, committed("loops_tables.md"), key=["links", "algorithm"]) == 3 * 3 * 4


def test_loops_accuracy_rows_regenerate():
    import loops_accuracy as la
    result = la.run()                         # the whole run: 1,334 batched states, ~0.1 s
    fresh = "\n".join(la.table_lines(la.rows(result)))
    assert compare(fresh, committed("loops_accuracy.md"), key=["joint"]) == 6 * 6 + 1 * 6


def test_loops_tables_tello_and_jvrc_rows_regenerate():
    import loops_tables as lt
    rows = lt.run_tables(batch=1, repeat=0, systems=["Tello Humanoid", "JVRC-1"])
    fresh = "\n".join(lt.table_lines(rows, []))
    assert compare(fresh, committed("loops_tables.md"), key=["system", "algorithm"],
                   skip=lt.TIMING_COLUMNS) == 2 * 14 * 5


def test_loops_sparse_rows_regenerate():
    import loops_sparse as ls
    lines = [ls.system_line(label, make) for label, make in ls.SYSTEMS
             if label in ("12-link GT chain", "four-bar + tail")]
    sweep = [ls.sweep_line(n)[0] for n in (2, 4)]
    fresh = "\n".join(ls.SYSTEM_HEAD + lines + ["", "## Geared chain over length", ""]
                      + ls.SWEEP_HEAD + sweep)
    skip = version_dependent("loops_sparse.md", *ls.VERSION_DEPENDENT, *ls.MATCHING_DEPENDENT)
    # always compared: the sizes, assembly, tree plan, C-ABA and both Lagrange counts
    assert compare(fresh, committed("loops_sparse.md"), key=["system", "links"], skip=skip) >= 2 * 9 + 2 * 4
    fresh = "\n".join(["## Inverse dynamics and Delassus matrices with loops", ""] + ls.ID_HEAD
                      + [ls.id_delassus_line(label, make) for label, make in ls.SYSTEMS
                         if label in ("12-link PBT chain", "four-bar + tail")])
    skip = version_dependent("loops_sparse.md", *ls.ID_MATCHING_DEPENDENT)
    assert compare(fresh, committed("loops_sparse.md"), key=["system"], skip=skip) >= 2 * 6


def test_yamane_rows_regenerate():
    import yamane_scaling as ys
    results = ys.run(serial=[2, 16], branched=[2, 4, 12], batch=1, repeat=0)
    fresh = "\n".join(ys.table_lines(results))
    assert compare(fresh, committed("yamane_scaling.md"), key=["joints", "end links"],
                   skip=ys.TIMING_COLUMNS) == 2 * 7 + 3 * 8


# ------------------------------------------------------------------ 2. quoted numbers

@functools.lru_cache(maxsize=None)
def _tables(name):
    return tables(committed(name))


def row(name, section="", **key):
    """The committed row of output `name` (section heading prefix) whose cells equal `key`
    (keyword = column header with spaces as underscores, or a dict via **{...})."""
    sections = [h for h in _tables(name) if h.startswith(section)]
    sections = [section] if section in sections else sections       # "" : the untitled one
    assert len(sections) == 1, (name, section, sections)
    hits = [r for r in _tables(name)[sections[0]]
            if all(r.get(k.replace("_", " "), r.get(k)) == str(v) for k, v in key.items())]
    assert len(hits) == 1, (name, section, key, len(hits))
    return hits[0]


def col(name, section, column, **key):
    return number(row(name, section, **key)[column])


def section_rows(name, section=""):
    return next(rows for h, rows in _tables(name).items() if h.startswith(section))


def text_line(name, start):
    """The committed output's line that starts with `start`."""
    return next(line for line in committed(name).splitlines() if line.startswith(start))


def c(x):
    """12,345"""
    return f"{round(x):,}"


def r2(x):
    return f"{x:.2f}"


def r1(x):
    return f"{x:.1f}"


def pct0(x):
    return f"{x:.0f}"


# fig1
F1 = "fig1.md"
ABA_F = "ABA 224N-259+205N-248"


def f1(n, column):
    return col(F1, "", column, N=n)


def f1_ratio(n, column="LU own best"):
    return f1(n, column) / f1(n, ABA_F)


def f1_first_above_aba():
    """The N_B from which on the cheapest own-ordering LU needs more flops than ABA's closed form."""
    rows = section_rows(F1)
    above = [number(r["LU own best"]) > number(r[ABA_F]) for r in rows]
    return int(rows[next(i for i in range(len(rows)) if all(above[i:]))]["N"])


def f1_third_party_wins_below():
    wins = [int(r["N"]) for r in section_rows(F1) if number(r["LU best"]) < number(r["LU own best"])]
    return max(wins) + 1


def f1_auto_aba():
    rows = section_rows(F1)
    return sum(r["auto ordering"] == "aba" for r in rows), len(rows)


def f1_natural_above_matrix():
    """The N_B from which on the unpermuted LU needs more flops than the matrix ABA."""
    rows = section_rows(F1)
    above = [number(r["LU natural"]) > number(r["matrix ABA"]) for r in rows]
    return int(rows[next(i for i in range(len(rows)) if all(above[i:]))]["N"])


def f1_band(lo=20):
    ratios = [number(r["LU own best"]) / number(r[ABA_F]) - 1 for r in section_rows(F1) if int(r["N"]) >= lo]
    return pct0(100 * min(ratios)), pct0(100 * max(ratios))


# fig2
F2 = "fig2.md"


def f2(n, column):
    return col(F2, "", column, N_B=n)


SIE = "Nori's own set-up"


def sie(n, column):
    return col(F2, SIE, column, N_B=n)


def sie_ratio_range():
    """min, max of unpermuted / permuted LU flops over the committed N_B (from the counts)."""
    ratios = [number(r["unpermuted LU"]) / number(r["permuted LU"]) for r in section_rows(F2, SIE)]
    return r2(min(ratios)), r2(max(ratios))


def kjr_vs_efpa():
    """(cases where EFPA needs fewer flops than KJR, all cases, the cases where KJR wins)."""
    rows = section_rows(DT, ROB)
    wins = [r["case"] for r in rows if number(r["kjr"]) < number(r["efpa"])]
    return len(rows) - len(wins), len(rows), wins


def f2_humanoid(what):
    line = text_line(F2, "Humanoid, exactly determined")
    return re.search({"flops": r"sparse LU flops (\d+)", "dense": r"dense LU (\S+)\.$"}[what], line).group(1)


# delassus
DT = "delassus_tables.md"
ROB = "(d), (e)"


def dr(case, method, part=0):
    cell = row(DT, ROB, case=case)[method]
    if part == 0:
        return number(cell)
    return number(cell.split("(")[1].rstrip(")"))


HANDS2 = "humanoid + two hands, 10 x 3D tips"
CORNERS = "humanoid, 4 x 3D corners per foot"
HF = "humanoid, 6D hands + 6D feet (EFPA HF; seed 000's 1.5% case)"
HAND = "five-finger hand alone, 5 x 3D tips"
FEET = "humanoid, 6D feet"
TIPS_FEET = "humanoid + two hands, tips + 6D feet"
LEFT = "humanoid + left hand, 5 x 3D tips"
BENCH = "humanoid, 6D feet + six 3D fingertips (bench_delassus.py)"


def hands_max():
    """The hands-on-humanoid case where PV-OSIM needs the most flops more than PV-OSIMr."""
    return max((LEFT, HANDS2, TIPS_FEET), key=lambda k: more(dr(k, "pv-osim"), dr(k, "pv-osimr")))


def efpa_overtakes_from(k):
    """First stem from which EFPA needs fewer flops than PV-OSIM with k branches per side (to the
    end of the sweep), None if never."""
    stems = range(0, 101, 10)
    below = [col(DT, "(a)", "efpa", **{"branches/side": k, "stem": s})
             < col(DT, "(a)", "pv-osim", **{"branches/side": k, "stem": s}) for s in stems]
    return next((s for i, s in enumerate(stems) if all(below[i:])), None)


def every_link_pv_osim_cheaper():
    """(smallest, largest) n of study (c) at which PV-OSIM needs fewer flops than PV-OSIMr, the
    n between them included (None if it never does or the n are not contiguous)."""
    ns = [int(r["n"]) for r in section_rows(DT, "(c)")]
    idx = [k for k, n in enumerate(ns) if col(DT, "(c)", "pv-osim", n=n) < col(DT, "(c)", "pv-osimr", n=n)]
    return (ns[idx[0]], ns[idx[-1]]) if idx and idx == list(range(idx[0], idx[-1] + 1)) else (None, None)


def hands_row(case, bold):
    """A row of delassus.md's hands table: the four counts (the cheapest in bold) and PV-OSIMr's
    saving against PV-OSIM."""
    counts = {m: dr(case, m) for m in ("pv-osimr", "pv-osim", "efpa", "ltl-osim")}
    assert min(counts, key=counts.get) == bold, (case, counts)
    return (*((f"**{c(v)}**" if m == bold else c(v)) for m, v in counts.items()),
            pct0(saving(dr(case, "pv-osimr"), dr(case, "pv-osim"))))


def more(a, b):
    """a needs x% more than b"""
    return 100 * (a / b - 1)


def saving(mine, other):
    """mine needs x% fewer than other"""
    return 100 * (1 - mine / other)


def tree_per_link(k, method):
    return (col(DT, "(a)", method, **{"branches/side": k, "stem": 100})
            - col(DT, "(a)", method, **{"branches/side": k, "stem": 90})) / 10


def slope_text(section):
    line = next(line for line in committed(DT).split(f"## {section}")[1].splitlines()
                if line.startswith("log-log slope"))
    return dict(re.findall(r"(\S+) (\d\.\d\d)", line))


# (h) EFPA on the ASIMO-like humanoid, (i) seed 000 on the Atlas-like humanoid
ASIMO_HF = "ASIMO-like, HF: 6D hands + feet"
ASIMO_VARIANTS = ("ASIMO-like, 8-DoF arms, HF", "ASIMO-like, 7-DoF legs, HF", "ASIMO-like, 12-DoF four-finger hands, HF")
ASIMO_EXTRA = "ASIMO-like + 2 arms + 2 legs, HF of all limbs"
ASIMO_FTF = "ASIMO-like, FTF: 6D forefingers, thumbs, feet"
ASIMO_FOOT = "ASIMO-like on the right foot (fixed), 6D hands + left foot"


def ltl_efpa(case):
    """LTL-OSIM / EFPA flops of an (h) case, in percent."""
    return 100 * col(DT, "(h)", "ltl-osim", case=case) / col(DT, "(h)", "efpa", case=case)


def sfa_step(name):
    """Flops of one SFA step in (h)'s per-step line of the ASIMO-like hands + feet case."""
    line = text_line(DT, ASIMO_HF + ", SFA (LTL-OSIM) by step: ")
    return number(re.search(re.escape(name) + r" ([\d,]+)", line.split(": ", 1)[1]).group(1))


def efpa_kinds(*kinds):
    """Flops of some kinds in (h)'s by-kind line of EFPA on the ASIMO-like hands + feet case."""
    line = text_line(DT, ASIMO_HF + ", flops by kind: ").split("efpa ", 1)[1].split(";")[0]
    return sum(number(re.search(r"(?:= |\+ )" + re.escape(k) + r" ([\d,]+)", line).group(1)) for k in kinds)


def pv_kinds(case, method, *kinds):
    """Flops of some kinds in the by-kind line of `method` on one of the humanoid cases."""
    line = text_line(DT, case + ", flops by kind: ").split(method + " ", 1)[1].split(";")[0]
    return sum(number(re.search(r"(?:= |\+ )" + re.escape(k) + r" ([\d,]+)", line).group(1)) for k in kinds)


EFPA_SWEEP = ("X^T I X", "U = H S", "D = S^T U", "D^-1", "U D^-1 U^T")     # delassus_studies.ABI_KINDS


def sfa_sides():
    """(SFA constraint side, EFPA without its articulated-inertia sweep, SFA joint-space side, that
    sweep), when the first is the cheaper and the third the dearer pair."""
    cons = sum(sfa_step(k) for k in ("J", "Y = J L^-1", "Y Y^T"))
    joint = sfa_step("H by CRBA") + sfa_step("H = L^T L")
    sweep = efpa_kinds(*EFPA_SWEEP)
    rest = col(DT, "(h)", "efpa", case=ASIMO_HF) - sweep
    return (c(cons), c(rest), c(joint), c(sweep)) if cons < rest and joint > sweep else ("x",) * 4


def not_78():
    """Neither LTL-OSIM / EFPA nor its H-given ratio is the paper's 78% (rounded)."""
    return pct0(ltl_efpa(ASIMO_HF)) != "78" and row(DT, "(h)", case=ASIMO_HF)["H given"] != "78%"


def rigid_vs_general():
    """CRBA's rigid-body congruence and the general symmetric 6x6 one across a revolute about z
    behind a translation along x (flops)."""
    from sparsedyn.rigid_congruence import rigid_congruence_cost
    from sparsedyn.transform_costs import Factor, TransformStructure
    E = np.zeros((3, 3), bool)
    E[:2, :2] = E[2, 2] = True
    tree = Factor(np.eye(3, dtype=bool), np.eye(3, dtype=bool), np.array([True, False, False]))
    st = TransformStructure((tree, Factor(E, np.diag([False, False, True]), np.zeros(3, bool))), 2)
    return sum(rigid_congruence_cost(st)), sum(st.congruence_cost(np.ones((6, 6), bool))[:2])


def at(case, method, part=0):
    cell = row(DT, "(i)", case=case)[method]
    return number(cell) if part == 0 else number(cell.split("(")[1].rstrip(")"))


ATLAS_HANDS = ("Atlas-like + left hand, 5 x 3D tips", "Atlas-like + two hands, 10 x 3D tips",
               "Atlas-like + two hands, tips + 6D feet")


def atlas_hands_quote():
    """PV-OSIM's extra flops over PV-OSIMr with the hands, PV-OSIMr's savings (total and
    method-specific), after checking that PV-OSIMr is the cheapest method in each case."""
    for case in ATLAS_HANDS:
        counts = {m: at(case, m) for m in ("pv-osimr", "pv-osim", "efpa", "ltl-osim")}
        assert min(counts, key=counts.get) == "pv-osimr", (case, counts)
    return (*(r1(more(at(k, "pv-osim"), at(k, "pv-osimr"))) for k in ATLAS_HANDS),
            *(pct0(saving(at(k, "pv-osimr"), at(k, "pv-osim"))) for k in ATLAS_HANDS),
            *(pct0(saving(at(k, "pv-osimr", 1), at(k, "pv-osim", 1))) for k in ATLAS_HANDS))


def tello_xix_share():
    """Percent of the Tello-like biped's C-ABA flops charged as X^T I X (counted live)."""
    from sparsedyn.loops import tello_like
    from sparsedyn.opcount import count_operations
    from sparsedyn.recursive.cluster import c_aba
    cm = tello_like()
    q, yd, w = cm.random_state(0)
    with count_operations() as ops:
        c_aba(cm, q, yd, w)
    return pct0(100 * ops.by_kind["X^T I X"] / ops.flops)


def bench_delassus(method, B):
    rows = tables(committed("bench_delassus.md"))[""]
    cell = next(r for r in rows if r["method"] == method)[f"B={B}"]
    return cell


def delassus_against_cpp(B=4096):
    """(kernel 1T us, Pinocchio C++ us, their ratio, "met"/"not met" against 0.5x) of
    bench_delassus.md's section against Pinocchio's C++."""
    sec = "Against Pinocchio C++"
    ours, ratio = row("bench_delassus.md", sec, method="kernel 1T")[f"B={B}"].split()
    cpp = row("bench_delassus.md", sec, method="pinocchio C++")[f"B={B}"]
    ratio = ratio.strip("()")
    return ours, cpp, ratio, "met" if float(ratio.rstrip("x")) <= 0.5 else "not met"


def delassus_cpp_ratios(B=4096):
    """(kernel 1T, public call 1T) ratios to Pinocchio C++ of bench_delassus.md's section
    against it, and "met"/"not met" for both at 0.5x."""
    sec = "Against Pinocchio C++"
    r = [row("bench_delassus.md", sec, method=m)[f"B={B}"].split()[1].strip("()")
         for m in ("kernel 1T", "pv-osimr numba 1T")]
    return (*r, "met" if max(float(x.rstrip("x")) for x in r) <= 0.5 else "not met")


def bench_ratio(method, B=1024):
    return re.search(r"\((.*)\)", bench_delassus(method, B)).group(1)


def delassus_target(threads):
    """'met' if the compiled PV-OSIMr call is at most 1.0x Pinocchio at every B >= 64."""
    ratios = [float(bench_ratio(f"pv-osimr numba {threads}", B)[:-1]) for B in (64, 1024, 4096)]
    return "met" if max(ratios) <= 1.0 else "not met"


def bench_us(method, B):
    return float(bench_delassus(method, B).split(" ")[0])


# loops
LT = "loops_tables.md"
LS = "loops_sparse.md"
GT, PBT, MC, MIT = ("12-link GT chain (24 bodies, ny=12)", "12-link PBT chain (24 bodies, ny=12)",
                    "Mini Cheetah (25 bodies, ny=18)", "MIT Humanoid (37 bodies, ny=24)")
TELLO, JVRC = "Tello Humanoid (37 bodies, ny=24)", "JVRC-1 (65 bodies, ny=38)"


def lt(table, system, algorithm, column="ops %"):
    return col(LT, table, column, system=system, algorithm=algorithm)


def lt_pct(table, system, algorithm):
    return f"{lt(table, system, algorithm):+.1f}%"


def lt_range(table, systems, algorithm, column="ops %"):
    vals = sorted(lt(table, s, algorithm, column) for s in systems)
    return f"{vals[0]:+.1f}", f"{vals[-1]:+.1f}"


def fig11(n, algorithm, chain="geared"):
    return col(LT, "Fig. 11", "ops", chain=chain, links=n, algorithm=algorithm)


def fig11_cheaper_from(algorithm):
    """First geared-chain length from which C-ABA needs fewer ops than `algorithm` (to the end)."""
    ns = sorted({int(r["links"]) for r in section_rows(LT, "Fig. 11") if r["chain"] == "geared"})
    cheaper = [fig11(n, "C-ABA") < fig11(n, algorithm) for n in ns]
    first = next(i for i in range(len(ns)) if all(cheaper[i:]))
    return ns[first]


def lt_slopes():
    return dict(re.findall(r"(C-ABA|projection|Lagrange \(L\^T L\)|Lagrange \(dense LU\)) (\d\.\d\d)",
                           text_line(LT, "Log-log slope")))


def osim_slopes():
    return dict(re.findall(r"(C-EFPA|projected inverse OSIM|approximate EFPA) (\d\.\d\d)",
                           text_line(LT, "Log-log slope of the op count over the longer half of the belt")))


LA = "loops_accuracy.md"


def la_ankle():
    return row(LA, "", joint="left_foot_joint")


def la_paper():
    return row(LA, "", joint="paper: MIT Humanoid ankle")


def ls(system, column):
    return col(LS, "", column, system=system)


def ls_sweep(n, column):
    return col(LS, "Geared chain", column, links=n)


def ls_x_range():
    vals = [number(r["x C-ABA"]) for r in section_rows(LS, "")]
    return r2(min(vals)), r2(max(vals))


def ls_tree_range():
    vals = [100 * (number(r["sparse loop plan"]) / number(r["tree FD plan"]) - 1) for r in section_rows(LS, "")]
    return f"{min(vals):.1f}", f"{max(vals):.0f}"


def ls_id_range(column, systems):
    vals = [number(row(LS, "Inverse dynamics", system=sy)[column]) for sy in systems]
    return r2(min(vals)), r2(max(vals))


def ls_slopes():
    return dict(re.findall(r"(sparse|C-ABA|Lagrange dense) (\d\.\d\d)", text_line(LS, "Log-log slope")))


# yamane
YS = "yamane_scaling.md"


def ys_increments(kind):
    line = text_line(YS, "Ops added per extra end link")
    part = line.split(kind)[1].split(";")[0]
    return [int(x) for x in re.findall(r"\d+", part)]


def ys_increments_recomputed(method):
    rows = section_rows(YS, "Fig. 7")
    return [round((number(b[f"{method} ops"]) - number(a[f"{method} ops"]))
                  / (int(b["end links"]) - int(a["end links"]))) for a, b in zip(rows, rows[1:])]


def bench_dynamics_plans():
    line = text_line("bench_dynamics.md", "Plans:")
    return re.search(r"ID: ordering '(\w+)', (\d+) LU flops per state; FD: ordering '(\w+)', (\d+) LU", line).groups()


@functools.lru_cache(maxsize=None)
def chain_count_ratio(algorithm, n, convention):
    """Counted RNEA / ABA over Featherstone's closed form on fig1's chain (its state)."""
    import sparsedyn as sd
    from sparsedyn.models import serial_chain
    model = serial_chain(n)
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    v, x = rng.normal(size=(2, model.nv))
    with sd.count_operations(convention) as ops:
        getattr(sd, algorithm)(model, q, v, x)
    return ops.flops / ((174 * n - 208) if algorithm == "rnea" else (429 * n - 507))


def chain_ratio_range(algorithm, convention="paper", ns=(10, 50, 100)):
    vals = sorted(r2(chain_count_ratio(algorithm, n, convention)) for n in ns)
    return vals[0] if vals[0] == vals[-1] else f"{vals[0]}-{vals[-1]}"


def seed002_congruences():
    """Our counts of seed 002's two privileged-child congruences (rotation about z, double angles):
    X^T I^a X on I^a's 15 entries and X Lambda X^T on a dense symmetric 6x6."""
    from sparsedyn.spatial_costs import zero_axes_after_projection
    from sparsedyn.transform_costs import IDENTITY, Factor, TransformStructure
    E = np.zeros((3, 3), bool)
    E[:2, :2] = E[2, 2] = True
    st = TransformStructure((IDENTITY, Factor(E, np.diag([False, False, True]), np.zeros(3, bool))), 2)
    S = np.zeros((6, 1))
    S[2, 0] = 1.0
    return (sum(st.congruence_cost(zero_axes_after_projection(np.ones((6, 6), bool), S), by_axis=True)[:2]),
            sum(st.motion_congruence_cost(np.ones((6, 6), bool))[:2]))


def bench_dynamics_humanoid(problem, B="1024"):
    """(ours on 1 thread, Pinocchio per call, their ratio) of bench_dynamics.md's humanoid row."""
    r = row("bench_dynamics.md", "Embedded humanoid", problem=problem, B=B)
    return r["compiled 1 thread"], r["pinocchio per call"], r["1 thread / pinocchio"]


def bench_dynamics_chain_ns(problem):
    """The chains' ns per link (1 thread), rounded, at N = 10 .. 1000, and the exponent of the
    per-state time in N from the first to the last (bench_dynamics.md)."""
    rows = [r for r in section_rows("bench_dynamics.md", "Serial chains") if r["problem"] == problem]
    ns = [float(r["ns per link (1 thread)"]) for r in rows]
    n = [int(r["N"]) for r in rows]
    exponent = 1 + math.log(ns[-1] / ns[0]) / math.log(n[-1] / n[0])
    return [f"{x:.0f}" for x in ns], f"{exponent:.2f}"


def bench_delassus_pv_osimr(B="B=1024"):
    """(ours, Pinocchio, ratio) of bench_delassus.md: the public PV-OSIMr call on 1 thread."""
    ours, ratio = row("bench_delassus.md", "", method="pv-osimr numba 1T")[B].split()
    return ours, row("bench_delassus.md", "", method="pinocchio")[B], ratio.strip("()x")


R = "README.md"
D = "delassus.md"
TOP = "../README.md"          # the project README (the lead's): its numbers taken from outputs
QUOTES = [
    (TOP, "inverse dynamics {} ({}x RNEA's closed form 174 N_B - 208), forward dynamics {} with the cheapest LU "
          "ordering, reverse Cuthill-McKee ({}x ABA's closed form 429 N_B - 507), and {} in Nori's Appendix B "
          "(ABA) order ({}x)",
     lambda: (c(f1(50, "ID LU RNEA order")), r2(f1(50, "ID LU RNEA order") / f1(50, "RNEA 93N-108+81N-100")),
              c(f1(50, "LU own best")), r2(f1_ratio(50)), c(f1(50, "LU ABA order")), r2(f1_ratio(50, "LU ABA order")))
     if row(F1, "", N=50)["own ordering"] == "rcm" else ("x",) * 6),
    (TOP, "on that chain counted RNEA is {}x and counted ABA {}x Featherstone's closed forms at N_B = 10, 50 and 100",
     lambda: (chain_ratio_range("rnea"), chain_ratio_range("aba"))),
    (TOP, "(`count_operations(\"as_written\")`: {}x and {}x at N_B = 100)",
     lambda: (r2(chain_count_ratio("rnea", 100, "as_written")), r2(chain_count_ratio("aba", 100, "as_written")))),
    (TOP, "| inverse dynamics, compiled sparse plan (zero fill, {} LU flops), 1 thread | {} | `pin.rnea` | {} | {} |",
     lambda: (c(int(bench_dynamics_plans()[1])), *bench_dynamics_humanoid("ID"))),
    (TOP, "| forward dynamics, compiled sparse plan (Nori's ABA order, {} LU flops), 1 thread | {} | "
          "`pin.aba` | {} | {} |",
     lambda: (c(int(bench_dynamics_plans()[3])), *bench_dynamics_humanoid("FD"))
     if bench_dynamics_plans()[2] == "aba" else ("x",) * 4),
    (TOP, "| Delassus, compiled PV-OSIMr (feet 6D + 6 fingertips 3D, m = 30), 1 thread | {} | "
          "`pin.computeDelassusMatrix` | {} | {} |", bench_delassus_pv_osimr),
    # --- Fig. 1
    (R, "from N_B = {} on, by {}x at N_B = 20, {}x at 50 and {}x at 100 ({} / {} flops)",
     lambda: (f1_first_above_aba(), r2(f1_ratio(20)), r2(f1_ratio(50)), r2(f1_ratio(100)),
              c(f1(50, "LU own best")), c(f1(100, "LU own best")))),
    (R, "our own orderings there, reverse Cuthill-McKee",
     lambda: () if {row(F1, "", N=n)["own ordering"] for n in (20, 50, 100)} == {"rcm"} else ("x",)),
    (R, "beat it only below {} links", lambda: (f1_third_party_wins_below(),)),
    (R, "gives {}x at 20 and {}x at 50 and 100 ({} / {})",
     lambda: (r2(f1_ratio(20, "LU ABA order")), r2(f1_ratio(50, "LU ABA order")),
              c(f1(50, "LU ABA order")), c(f1(100, "LU ABA order")))
     if r2(f1_ratio(50, "LU ABA order")) == r2(f1_ratio(100, "LU ABA order")) else ("x",) * 4),
    (R, "(the 'auto ordering' column: {} of {} rows)", f1_auto_aba),
    (R, "Below {} links the sparse LU is cheaper ({}x at N_B = 2)",
     lambda: (f1_first_above_aba(), r2(f1_ratio(2)))),
    (R, "we land {}-{}% above it from 20 links on", f1_band),
    (R, "zero fill: {} flops at N_B = 50, {}x RNEA's closed form",
     lambda: (c(f1(50, "ID LU RNEA order")), r2(f1(50, "ID LU RNEA order") / f1(50, "RNEA 93N-108+81N-100")))
     if f1(50, "ID fill") == 0 else ("x", "x")),
    (R, "needs {} flops at N_B = 10 and {} at 100 ({}x and {}x ABA's closed form); the unpermuted LU (natural "
        "column order, rows only matched to the pivots) {} and {} ({}x and {}x), above the matrix ABA from N_B = {} on. "
        "Both stay above the permuted LU at every N_B",
     lambda: (c(f1(10, "matrix ABA")), c(f1(100, "matrix ABA")), r2(f1_ratio(10, "matrix ABA")),
              r2(f1_ratio(100, "matrix ABA")), c(f1(10, "LU natural")), c(f1(100, "LU natural")),
              r2(f1_ratio(10, "LU natural")), r2(f1_ratio(100, "LU natural")), f1_natural_above_matrix())
     if all(min(number(r["matrix ABA"]), number(r["LU natural"])) > number(r["LU own best"])
            for r in section_rows(F1)) else ("x",) * 9),
    # --- Fig. 2
    (R, "costs {} flops at N_B = 3 and {} at 30 (linear; our own orderings, RCM from 6 links), the "
        "dense LU {} to {} (cubic): {}x to {}x",
     lambda: (c(f2(3, "sparse LU(P)")), c(f2(30, "sparse LU(P)")), c(f2(3, "dense LU(P)")),
              c(f2(30, "dense LU(P)")), r1(f2(3, "dense/sparse")), r1(f2(30, "dense/sparse")))),
    (R, "RCM from 6 links",
     lambda: () if all(r["ordering"] == "rcm" for r in section_rows(F2) if int(r["N_B"]) >= 6) else ("x",)),
    (R, "Load cells alone are ill-posed for every state",
     lambda: () if {r["load cells alone"] for r in section_rows(F2)} == {"ill-posed"} else ("x",)),
    (R, "the floating chain is solvable (over-determined by {})",
     lambda: (int(f2(3, "rows") - f2(3, "unknowns")),)
     if len({number(r["rows"]) - number(r["unknowns"]) for r in section_rows(F2)}) == 1 else ("x",)),
    (R, "sparse LU {} flops vs dense {}", lambda: (c(float(f2_humanoid("flops"))), f2_humanoid("dense"))),
    (R, "the unpermuted LU (natural column order, rows only matched to the pivots) costs {} flops at N_B = 4 and "
        "{} at 30, the permuted LU (Markowitz) {} and {}: {}..{}x fewer with the permutation",
     lambda: (c(sie(4, "unpermuted LU")), c(sie(30, "unpermuted LU")), c(sie(4, "permuted LU")),
              c(sie(30, "permuted LU")), *sie_ratio_range())
     if {r["ordering"] for r in section_rows(F2, SIE)} == {"markowitz"} else ("x",) * 6),
    # --- counting conventions
    (R, "counted RNEA is {}x and counted ABA {}x Featherstone's closed forms on the revolute chain of "
        "Fig. 1 at N_B = 10, 50 and 100",
     lambda: (chain_ratio_range("rnea"), chain_ratio_range("aba"))),
    (R, "(`count_operations(\"as_written\")`: {}x and {}x at N_B = 100)",
     lambda: (r2(chain_count_ratio("rnea", 100, "as_written")), r2(chain_count_ratio("aba", 100, "as_written")))),
    (R, "X^T I^a X by double angles about the joint's axis ({} flops, the seed's 22m + 25a = 47); KJR's "
        "X Lambda X^T, one symmetric congruence the same way, costs {} (seed: 63m + 54a = 117)", seed002_congruences),
    (D, "by double angles about the joint's axis, {} flops for X^T I^a X (seed: 22m + 25a = 47) and {} for KJR's "
        "X Lambda X^T", seed002_congruences),
    # --- Delassus (seed 000, 002)
    (R, "PV-OSIM needs up to {}% more flops, i.e. PV-OSIMr up to {}% fewer; {}% fewer on the "
        "method-specific part",
     lambda: (r1(more(dr(hands_max(), "pv-osim"), dr(hands_max(), "pv-osimr"))),
              pct0(saving(dr(hands_max(), "pv-osimr"), dr(hands_max(), "pv-osim"))),
              pct0(saving(dr(hands_max(), "pv-osimr", 1), dr(hands_max(), "pv-osim", 1))))),
    (R, "KJR (Kreutz-Delgado, Jain, Rodriguez, `method=\"kjr\"`, paper O(n + m^2 d)): slope {} on the k^2 chain",
     lambda: (slope_text("(b)")["kjr"],)),
    (R, "EFPA is cheaper on {} of our {} robot cases (hands + feet: {} vs {} flops;",
     lambda: kjr_vs_efpa()[:2] + (c(dr(HF, "efpa")), c(dr(HF, "kjr")))),
    (R, "also on 4 x 3D corners per foot ({} vs {}), where the contacts share their bodies",
     lambda: (c(dr(CORNERS, "efpa")), c(dr(CORNERS, "kjr"))) if kjr_vs_efpa()[2] == [] else ("x", "x")),
    (R, "{}% more flops", lambda: (r1(max(more(dr(k, "pv-osim"), dr(k, "pv-osimr"))
                                          for k in (LEFT, HANDS2, TIPS_FEET))),)),
    (R, "4x3D feet +{}% (paper +19.9%; +{}% without the shared articulated-inertia sweep)",
     lambda: (r1(more(dr(CORNERS, "pv-osim"), dr(CORNERS, "pv-osimr"))),
              r1(more(dr(CORNERS, "pv-osim", 1), dr(CORNERS, "pv-osimr", 1))))),
    (R, "the ~1.5% caveat seen ({}%, and {}% on the lone hand)",
     lambda: (r1(saving(dr(HF, "pv-osim"), dr(HF, "pv-osimr"))), r1(saving(dr(HAND, "pv-osim"), dr(HAND, "pv-osimr"))))),
    (R, "k^2 chain slopes {} / {} / {} for PV-OSIMr / EFPA / PV-OSIM",
     lambda: tuple(slope_text("(b)")[m] for m in ("pv-osimr", "efpa", "pv-osim"))),
    (R, "LTL-OSIM needs {}% of EFPA's flops on our humanoid",
     lambda: (pct0(100 * dr(HF, "ltl-osim") / dr(HF, "efpa")),)),
    (R, "LTL-OSIM needs {}% of EFPA's flops for hands + feet (paper: 78%), with the paper's sparsity "
        "(structural zeros {} of H, {} of J; paper ~56% / ~67%)",
     lambda: (pct0(ltl_efpa(ASIMO_HF)), row(DT, "(h)", case=ASIMO_HF)["zeros in H"],
              row(DT, "(h)", case=ASIMO_HF)["zeros in J"])
     if (row(DT, "(h)", case=ASIMO_HF)["bodies"], row(DT, "(h)", case=ASIMO_HF)["nv"]) == ("35", "40") else ("x",) * 3),
    (R, "longer arms, legs and 12-DoF hands raise the ratio ({}%, {}%, {}%",
     lambda: tuple(pct0(ltl_efpa(k)) for k in ASIMO_VARIANTS)
     if all(ltl_efpa(k) > ltl_efpa(ASIMO_HF) for k in ASIMO_VARIANTS) else ("x",) * 3),
    (R, "with two more arms and legs ({} zeros in H, paper 73%) the ratio is {}%, about the hands + feet ratio as in "
        "the paper (whose sparse method stays cheaper there)",
     lambda: (row(DT, "(h)", case=ASIMO_EXTRA)["zeros in H"], pct0(ltl_efpa(ASIMO_EXTRA)))
     if 100 < ltl_efpa(ASIMO_EXTRA) and abs(ltl_efpa(ASIMO_EXTRA) - ltl_efpa(ASIMO_HF)) < 2 else ("x", "x")),
    (R, "the ratio drops to {}%, and balanced on one foot it is {}%",
     lambda: (pct0(ltl_efpa(ASIMO_FTF)), pct0(ltl_efpa(ASIMO_FOOT)))),
    (R, "nv = {}; 60 / 84 with one / two 24-DoF hands",
     lambda: (row(DT, "(i)", case="Atlas-like, 6D feet")["nv"],)
     if [row(DT, "(i)", case=k)["nv"] for k in ATLAS_HANDS] == ["60", "84", "84"] else ("x",)),
    (R, "6D feet {}% (paper: identical), 4x3D feet +{}% (paper +19.9%; +{}% without the shared sweep), "
        "6D hands + feet {}% (paper ~-1.5%)",
     lambda: (r1(more(at("Atlas-like, 6D feet", "pv-osim"), at("Atlas-like, 6D feet", "pv-osimr"))),
              r1(more(at("Atlas-like, 4 x 3D corners per foot", "pv-osim"), at("Atlas-like, 4 x 3D corners per foot", "pv-osimr"))),
              r1(more(at("Atlas-like, 4 x 3D corners per foot", "pv-osim", 1),
                      at("Atlas-like, 4 x 3D corners per foot", "pv-osimr", 1))),
              r1(more(at("Atlas-like, 6D hands + 6D feet", "pv-osim"), at("Atlas-like, 6D hands + 6D feet", "pv-osimr"))))),
    (R, "PV-OSIM needs +{}%, +{}% and +{}% more (PV-OSIMr {}%, {}% and {}% fewer; {}%, {}% and {}% fewer on the "
        "method-specific part", atlas_hands_quote),
    (R, "on the lone hand LTL-OSIM is cheaper than EFPA ({}%)",
     lambda: (pct0(100 * dr(HAND, "ltl-osim") / dr(HAND, "efpa")),)),
    (D, "PV-OSIM {}% cheaper ({} vs {}) | {} vs {} |",
     lambda: (r1(saving(dr(FEET, "pv-osim"), dr(FEET, "pv-osimr"))), c(dr(FEET, "pv-osim")), c(dr(FEET, "pv-osimr")),
              c(dr(FEET, "pv-osim", 1)), c(dr(FEET, "pv-osimr", 1)))),
    (D, "| +19.9% | **+{}%** ({} vs {}) | +{}% |",
     lambda: (r1(more(dr(CORNERS, "pv-osim"), dr(CORNERS, "pv-osimr"))), c(dr(CORNERS, "pv-osim")),
              c(dr(CORNERS, "pv-osimr")), r1(more(dr(CORNERS, "pv-osim", 1), dr(CORNERS, "pv-osimr", 1))))),
    (D, "| yes: EFPA {}, LTL-OSIM {} |", lambda: (c(dr(CORNERS, "efpa")), c(dr(CORNERS, "ltl-osim")))),
    (D, "| ~1.5% | {}% ({} vs {}) | {}% |",
     lambda: (r1(saving(dr(HF, "pv-osim"), dr(HF, "pv-osimr"))), c(dr(HF, "pv-osim")), c(dr(HF, "pv-osimr")),
              r1(saving(dr(HF, "pv-osim", 1), dr(HF, "pv-osimr", 1))))),
    (D, "eqs. (18), (13): R Om R^T {}, K Om K^T {} flops) where PV-OSIM does one symmetric rank-6 update "
        "of the 12 stacked rows ({} + {} for it and its R S D^-1, against PV-OSIMr's {} + {})",
     lambda: (c(pv_kinds(FEET, "pv-osimr", "R Om R^T")), c(pv_kinds(FEET, "pv-osimr", "K Om K^T")),
              c(pv_kinds(FEET, "pv-osim", "Om + RS D^-1 SR^T")), c(pv_kinds(FEET, "pv-osim", "A D^-1")),
              c(pv_kinds(FEET, "pv-osimr", "Om + RS D^-1 SR^T")), c(pv_kinds(FEET, "pv-osimr", "A D^-1")))),
    (D, "PV-OSIMr's eqs. (18), (19) and (13) on the propagated rows cost {} flops (K Om K^T {}, R Om R^T "
        "{}) against PV-OSIM's rank-1 updates and their R S D^-1 ({} + {})",
     lambda: (c(pv_kinds(HF, "pv-osimr", "K Om K^T", "R Om R^T")), c(pv_kinds(HF, "pv-osimr", "K Om K^T")),
              c(pv_kinds(HF, "pv-osimr", "R Om R^T")), c(pv_kinds(HF, "pv-osim", "Om + RS D^-1 SR^T")),
              c(pv_kinds(HF, "pv-osim", "A D^-1")))),
    (D, "without it we get {}%.",
     lambda: (r1(more(dr(CORNERS, "pv-osim", 1), dr(CORNERS, "pv-osimr", 1))),)),
    *[(D, f"| {label} | {{}} | {{}} | {{}} | {{}} | {{}}% {tail}|", functools.partial(hands_row, case, bold))
      for label, case, bold, tail in (
          ("lone hand, 5 x 3D (15) | LTL better than EFPA", HAND, "pv-osim", "(PV-OSIM beats PV-OSIMr) "),
          ("humanoid + 1 hand (15) | PV-OSIMr best", LEFT, "pv-osimr", ""),
          ("humanoid + 2 hands (30) | PV-OSIMr best", HANDS2, "pv-osimr", ""),
          ("+ 6D feet (42) | PV-OSIMr best, \"up to ~34% fewer ops\"", TIPS_FEET, "pv-osimr", ""))],
    (D, "our largest saving against PV-OSIM is {}% in total flops, not ~34%. On the method-specific "
        "part (without the shared sweep) it is {}% ({} vs {})",
     lambda: (pct0(saving(dr(hands_max(), "pv-osimr"), dr(hands_max(), "pv-osim"))),
              pct0(saving(dr(hands_max(), "pv-osimr", 1), dr(hands_max(), "pv-osim", 1))),
              c(dr(hands_max(), "pv-osimr", 1)), c(dr(hands_max(), "pv-osim", 1)))),
    (D, "nv = 67 with one hand, 85 with two",
     lambda: () if (row(DT, ROB, case=LEFT)["nv"], row(DT, ROB, case=HANDS2)["nv"], row(DT, ROB, case=FEET)["nv"])
     == ("67", "85", "49") else ("x",)),
    (D, "an ASIMO-like humanoid of {} bodies with EFPA's Fig. 6 variants, and an Atlas-like humanoid with nv = {} "
        "({} and {} with the hands)",
     lambda: (row(DT, "(h)", case=ASIMO_HF)["bodies"], row(DT, "(i)", case="Atlas-like, 6D feet")["nv"],
              row(DT, "(i)", case=ATLAS_HANDS[0])["nv"], row(DT, "(i)", case=ATLAS_HANDS[1])["nv"])),
    (D, "LTL-OSIM beats EFPA on the lone hand ({} vs {})", lambda: (c(dr(HAND, "ltl-osim")), c(dr(HAND, "efpa")))),
    (D, "PV-OSIMr grows by ~{} flops per stem link independently of k",
     lambda: (c(tree_per_link(1, "pv-osimr")),) if len({tree_per_link(k, "pv-osimr") for k in (1, 2, 4, 7, 10)}) == 1
     else ("x",)),
    (D, "PV-OSIM by {} (k = 1) to {} (k = 10) per link, EFPA by {} to {}",
     lambda: (c(tree_per_link(1, "pv-osim")), c(tree_per_link(10, "pv-osim")),
              c(tree_per_link(1, "efpa")), c(tree_per_link(10, "efpa")))),
    (D, "At stem 100: PV-OSIM / PV-OSIMr = {}, {}, {}, {}, {} for k = 1, 2, 4, 7, 10",
     lambda: tuple(row(DT, "(a)", **{"branches/side": k, "stem": 100})["PV-OSIM / PV-OSIMr"] for k in (1, 2, 4, 7, 10))),
    (D, "EFPA overtakes PV-OSIM on long stems with many branches (k = 4 from stem {}, k = 7 from {}, "
        "k = 10 from {}; never for k = 1, 2)",
     lambda: tuple(efpa_overtakes_from(k) for k in (4, 7, 10))
     if efpa_overtakes_from(1) is None and efpa_overtakes_from(2) is None else ("x",) * 3),
    (D, "PV-OSIMr {}, EFPA {}, PV-OSIM {} (paper: O(k^2)",
     lambda: tuple(slope_text("(b)")[m] for m in ("pv-osimr", "efpa", "pv-osim"))),
    (D, "slopes PV-OSIMr {}, EFPA {}, PV-OSIM {} (paper:",
     lambda: tuple(slope_text("(c)")[m] for m in ("pv-osimr", "efpa", "pv-osim"))),
    (D, "in our count EFPA needs {}% of PV-OSIMr's flops at n = 32 ({} vs {}) and PV-OSIM is cheaper than "
        "PV-OSIMr for n = {} to {}",
     lambda: (pct0(100 * col(DT, "(c)", "efpa", n=32) / col(DT, "(c)", "pv-osimr", n=32)),
              c(col(DT, "(c)", "efpa", n=32)), c(col(DT, "(c)", "pv-osimr", n=32)), *every_link_pv_osim_cheaper())),
    (D, "| zeros in J / in H | 67% / 56% | {}% / {}% |",
     lambda: re.search(r"zeros in J \(24 x 49\) (\d+)%, in H (\d+)%", text_line(DT, "Humanoid (44 bodies")).groups()),
    (D, "| paper (ASIMO, N = 35) | ours (humanoid, {} bodies) |",
     lambda: re.search(r"Humanoid \((\d+) bodies", text_line(DT, "Humanoid (")).groups()),
    (D, "| **{}%** ({} / {}) |",
     lambda: (pct0(100 * dr(HF, "ltl-osim") / dr(HF, "efpa")), c(dr(HF, "ltl-osim")), c(dr(HF, "efpa")))),
    *[(D, f"| {label} | not stated | {{}} |", functools.partial(lambda step: (c(sfa_step(step)),), step))
      for label, step in (("H by CRBA", "H by CRBA"), ("H = L^T L, no fill-in", "H = L^T L"),
                          ("J (rows on the supporting DoFs only)", "J"),
                          ("Y = J L^-1 (each row over its support chain)", "Y = J L^-1"),
                          ("Y Y^T (block over the common chain; diagonal blocks: upper triangle)", "Y Y^T"))],
    (D, "| SFA / EFPA | 78% | {}% ({} / {}) |",
     lambda: (pct0(ltl_efpa(ASIMO_HF)), c(col(DT, "(h)", "ltl-osim", case=ASIMO_HF)), c(col(DT, "(h)", "efpa", case=ASIMO_HF)))),
    (D, "| SFA without H (H given) / EFPA | | {} |", lambda: (row(DT, "(h)", case=ASIMO_HF)["H given"],)),
    (D, "The SFA's constraint-side work (J, Y, Y Y^T: {} flops) is cheaper than EFPA's propagators and outward "
        "sweep ({}, EFPA without its articulated-inertia sweep); what reverses the order is the joint-space side, "
        "CRBA plus L^T L ({}) against EFPA's articulated-inertia sweep ({})", sfa_sides),
    (D, "the constraint side alone is {}% of EFPA's ({} / {}), against the paper's 78% for the whole method; "
        "the joint-space side, {}x EFPA's articulated-inertia sweep, is what puts our ratio above it",
     lambda: (lambda cons, rest, joint, sweep: (pct0(100 * number(cons) / number(rest)), cons, rest,
                                                f"{number(joint) / number(sweep):.2f}"))(*sfa_sides())),
    (R, "the constraint side alone is {}% of EFPA's ({} / {}), against the paper's 78% for the whole method; "
        "the joint-space side, {}x EFPA's articulated-inertia sweep, is what puts our ratio above it",
     lambda: (lambda cons, rest, joint, sweep: (pct0(100 * number(cons) / number(rest)), cons, rest,
                                                f"{number(joint) / number(sweep):.2f}"))(*sfa_sides())),
    (D, "40 flops for a revolute behind a translation along one axis, against 162 for a general symmetric 6x6",
     lambda: () if rigid_vs_general() == (40, 162) else ("x",)),
    (D, "The paper's 78% is then reproduced neither with H computed ({}%) nor with H given ({}, and {} with two "
        "more arms and legs",
     lambda: (pct0(ltl_efpa(ASIMO_HF)), row(DT, "(h)", case=ASIMO_HF)["H given"],
              row(DT, "(h)", case=ASIMO_EXTRA)["H given"]) if not_78() else ("x",) * 3),
    (R, "H by CRBA {} of LTL-OSIM's {} flops (its composite inertias in the 10-parameter rigid-body form, "
        "Featherstone Table 2.5); without it (column \"H given\") LTL-OSIM needs {} of EFPA's flops (the seed "
        "states ratios only, no absolute counts, and does not say whether its SFA count computes H), and {} with "
        "two more arms and legs: with EFPA's congruences in the seed's form and this CRBA, the paper's 78% is "
        "reproduced neither with H computed nor with H given",
     lambda: (c(sfa_step("H by CRBA")), c(col(DT, "(h)", "ltl-osim", case=ASIMO_HF)),
              row(DT, "(h)", case=ASIMO_HF)["H given"], row(DT, "(h)", case=ASIMO_EXTRA)["H given"])
     if not_78() else ("x",) * 4),
    (D, "| Pinocchio `computeDelassusMatrix`, per-state Python loop | {} | {} | {} | {} |",
     lambda: tuple(bench_delassus("pinocchio", B) for B in (1, 64, 1024, 4096))),
    (D, "| PV-OSIMr, compiled (C on vectors of 4 or 8 states; numba at B = 1), 1 thread | {} | {} | {} | {} |",
     lambda: tuple(bench_delassus("pv-osimr numba 1T", B) for B in (1, 64, 1024, 4096))),
    (D, "| PV-OSIMr, NumPy reference | {} | {} | {} | {} |",
     lambda: tuple(bench_delassus("pv-osimr numpy", B) for B in (1, 64, 1024, 4096))),
    (D, "| PV-OSIMr, compiled (C on vectors of 4 or 8 states; numba at B = 1), 2 threads | {} | {} | {} | {} |",
     lambda: tuple(bench_delassus("pv-osimr numba 2T", B) for B in (1, 64, 1024, 4096))),
    (TOP, "inverse dynamics {} / {} / {} / {} / {} at N_B = 10 / 30 / 100 / 300 / 1000; forward "
          "dynamics (Nori's Appendix B order) {} / {} / {} / {} / {}, i.e. per-state time ~ N_B^{} "
          "from 10 to 1000 links (ID ~ N_B^{})",
     lambda: (*bench_dynamics_chain_ns("ID")[0], *bench_dynamics_chain_ns("FD")[0],
              bench_dynamics_chain_ns("FD")[1], bench_dynamics_chain_ns("ID")[1])),
    (TOP, "thread (issue #20; {}: the C kernel on vectors of states {}, the public call {},",
     lambda: (lambda k, p, met: (met, k, p))(*delassus_cpp_ratios())),
    (D, "compiled PV-OSIMr kernel takes {} us per state against Pinocchio C++'s {} us ({}); issue "
        "#20's target (<= 0.5x) is {}.",
     lambda: (*delassus_against_cpp(),)),
    (D, "**The target (PV-OSIMr at most 1.0x Pinocchio's per-state time) is {} on one thread from "
        "B = 64 on ({} at B = 1024) and {} on two threads ({}); the NumPy reference stays at {} there.**",
     lambda: (delassus_target("1T"), bench_ratio("pv-osimr numba 1T"), delassus_target("2T"),
              bench_ratio("pv-osimr numba 2T"), bench_ratio("pv-osimr numpy"))),
    (D, "counts {} flops for the humanoid's 6D feet ({}x PV-OSIMr, {}x the dense J M^-1 J^T) and {} for "
        "the two-hand humanoid with tips + feet ({}x PV-OSIMr, {}x dense)",
     lambda: (c(dr(FEET, "sparse")), r2(dr(FEET, "sparse") / dr(FEET, "pv-osimr")),
              r2(dr(FEET, "sparse") / dr(FEET, "dense")), c(dr(TIPS_FEET, "sparse")),
              r2(dr(TIPS_FEET, "sparse") / dr(TIPS_FEET, "pv-osimr")), r2(dr(TIPS_FEET, "sparse") / dr(TIPS_FEET, "dense")))),
    (D, "benchmark scenario, {} x {} of the {} flops",
     lambda: (col(DT, "(f)", "m", case=BENCH).__int__() - 1, row(DT, "(f)", case=BENCH)["each further substitution"],
              row(DT, "(f)", case=BENCH)["total"])),
    (D, "it takes {}-{} us per state at B >= 64 in the benchmark scenario (m = {}), about {}x Pinocchio's "
        "`computeDelassusMatrix` and {}-{}x the compiled PV-OSIMr",
     lambda: (pct0(min(bench_us("sparse numba 1T", B) for B in (64, 1024, 4096))),
              pct0(max(bench_us("sparse numba 1T", B) for B in (64, 1024, 4096))),
              row(DT, "(f)", case=BENCH)["m"],
              pct0(min(float(re.search(r"\((.*)x\)", bench_delassus("sparse numba 1T", B)).group(1))
                       for B in (64, 1024, 4096))),
              pct0(min(bench_us("sparse numba 1T", B) / bench_us("pv-osimr numba 1T", B) for B in (64, 1024, 4096))),
              pct0(max(bench_us("sparse numba 1T", B) / bench_us("pv-osimr numba 1T", B) for B in (64, 1024, 4096))))),
    # --- loops (seed 003)
    (R, "Table III: the projection method needs {} on the geared chain, {} on the belt chain, {} and {} on the quadruped "
        "and biped (paper +86.8%, +73.5%, +21.0% and +32.5% in time), dense Lagrange multipliers {}..{}% (paper "
        "+76.3..+133.1%)",
     lambda: tuple(lt_pct("Table III", sy, "projection method") for sy in (GT, PBT, MC, MIT))
     + lt_range("Table III", (GT, PBT, MC, MIT), "Lagrange multipliers (dense LU)")),
    (R, "Lagrange with the sparse L^T L (not in the paper) is cheaper than C-ABA on the belt chain ({}) and the "
        "Tello-like biped ({}) only",
     lambda: (lt_pct("Table III", PBT, "Lagrange multipliers (L^T L)"), lt_pct("Table III", TELLO, "Lagrange multipliers (L^T L)"))
     if [sy for sy in (GT, PBT, MC, MIT, TELLO, JVRC) if lt("Table III", sy, "Lagrange multipliers (L^T L)") < 0]
     == [PBT, TELLO] else ("x", "x")),
    (R, "Table II: projected RNEA {}..{}% on the four systems (paper +35.9..+38.0%). Table IV: projected inverse OSIM "
        "{}..{}% (paper +6.3..+51.8%)",
     lambda: lt_range("Table II:", (GT, PBT, MC, MIT), "projected RNEA")
     + lt_range("Table IV", (GT, PBT, MC, MIT), "projected inverse OSIM")),
    (R, "projected RNEA {} and {} (paper +22.4% and +36.6%), projection method {} and {} (paper +22.2% and "
        "+87.3%), dense Lagrange {} and {} (paper +82.7% and +212.8%), Lagrange with L^T L {} and {}, projected "
        "inverse OSIM {} and {} (paper +7.8% and +107.4%)",
     lambda: tuple(lt_pct(t, sy, a) for t, a in (("Table II:", "projected RNEA"), ("Table III", "projection method"),
                                                 ("Table III", "Lagrange multipliers (dense LU)"),
                                                 ("Table III", "Lagrange multipliers (L^T L)"),
                                                 ("Table IV", "projected inverse OSIM")) for sy in (TELLO, JVRC))),
    (R, "the cluster algorithms win on both{} except C-ABA against Lagrange with L^T L on the Tello-like biped;",
     lambda: ("",) if [(sy, a) for sy in (TELLO, JVRC) for t, a in (
         ("Table II:", "projected RNEA"), ("Table III", "projection method"), ("Table III", "Lagrange multipliers (L^T L)"),
         ("Table III", "Lagrange multipliers (dense LU)"), ("Table IV", "projected inverse OSIM")) if lt(t, sy, a) <= 0]
     == [(TELLO, "Lagrange multipliers (L^T L)")] else ("x",)),
    (R, "X^T I^a X is still {}% of C-ABA's count on the Tello-like biped", lambda: (tello_xix_share(),)),
    (R, "the projection method needs {}..{}% of C-ABA's operations on five systems ({} on JVRC-1), projected RNEA "
        "{}..{}% of C-RNEA's on all six, and the projected inverse OSIM {} and {} on the chains but {}..{}% on the "
        "legged systems",
     lambda: lt_range("Table III", (GT, PBT, MC, MIT, TELLO), "projection method (sparse G)")
     + (lt_pct("Table III", JVRC, "projection method (sparse G)"),)
     + lt_range("Table II:", (GT, PBT, MC, MIT, TELLO, JVRC), "projected RNEA (sparse G)")
     + tuple(lt_pct("Table IV", sy, "projected inverse OSIM (sparse G)") for sy in (PBT, GT))
     + lt_range("Table IV", (MC, MIT, TELLO, JVRC), "projected inverse OSIM (sparse G)")
     if max(lt("Table III", sy, "projection method (sparse G)") for sy in (GT, PBT, MC, MIT, TELLO)) < 0
     < lt("Table III", JVRC, "projection method (sparse G)")
     and max(lt("Table II:", sy, "projected RNEA (sparse G)") for sy in (GT, PBT, MC, MIT, TELLO, JVRC)) < 0
     else ("x",) * 11),
    (R, "The approximate (reflected-inertia) EFPA of Sec. II-E needs {}..{}% of C-EFPA's operations",
     lambda: lt_range("Table IV", (GT, PBT, MC, MIT), "approximate EFPA")),
    (R, "C-EFPA grows as length^{}, the projected inverse OSIM as ^{} over 24..48 links",
     lambda: tuple(osim_slopes()[k] for k in ("C-EFPA", "projected inverse OSIM"))
     if sorted({int(r["links"]) for r in section_rows(LT, "Fig. 13")})[-5:][0] == 24 else ("x", "x")),
    (R, "C-EFPA needs fewer operations than the projection from {} links on (at 12 links the projection needs {}x "
        "C-EFPA's;",
     lambda: (re.search(r"from (\d+) links on", text_line(LT, "Log-log slope of the op count over the longer half of "
                                                       "the belt")).group(1),
              row(LT, "Fig. 13", links=12, algorithm="projected inverse OSIM")["x C-EFPA"])),
    (R, "The approximate EFPA stays at {}-{}x C-EFPA from 12 links on",
     lambda: (min(r["x C-EFPA"] for r in section_rows(LT, "Fig. 13")
                  if r["algorithm"] == "approximate EFPA" and int(r["links"]) >= 12),
              max(r["x C-EFPA"] for r in section_rows(LT, "Fig. 13")
                  if r["algorithm"] == "approximate EFPA" and int(r["links"]) >= 12))),
    (R, "Ankle: unconstrained {} N m RMS ({}% of its maximum torque), approximate {} N m ({}%); paper {} and {} N m "
        "({}% and {}%)",
     lambda: tuple(r[k] for r, k in ((la_ankle(), "RMS error unconstrained (N m)"),
                                      (la_ankle(), "unconstrained, % of max"),
                                      (la_ankle(), "RMS error approximate (N m)"),
                                      (la_ankle(), "approximate, % of max"),
                                      (la_paper(), "RMS error unconstrained (N m)"),
                                      (la_paper(), "RMS error approximate (N m)"),
                                      (la_paper(), "unconstrained, % of max"),
                                      (la_paper(), "approximate, % of max")))),
    (R, "{} N m peak ankle torque against the paper's ~{})",
     lambda: (la_ankle()["max abs torque, exact (N m)"], pct0(number(la_paper()["max abs torque, exact (N m)"])))),
    (R, "the approximation also helps less ({}x against the paper's {}x)",
     lambda: re.search(r"error (\d+\.\d)x \(paper: (\d+\.\d)x\)", text_line(LA, "Ankle:")).groups()),
    (R, "with that off-diagonal term added the ankle's error falls to {} N m",
     lambda: (la_ankle()["approximate + off-diagonal H~ (N m)"],)),
    (R, "C-ABA grows as length^{}, projection ^{}, Lagrange ^{} (L^T L) and ^{} (dense LU) over 12..24 links",
     lambda: tuple(lt_slopes()[k] for k in ("C-ABA", "projection", "Lagrange (L^T L)", "Lagrange (dense LU)"))),
    (R, "C-ABA is cheaper than dense Lagrange from {} links, than projection from {} and than Lagrange with "
        "L^T L from {}",
     lambda: (fig11_cheaper_from("Lagrange (dense LU)"), fig11_cheaper_from("projection"),
              fig11_cheaper_from("Lagrange (L^T L)"))),
    (R, "costs {}-{}x our counted C-ABA on the five systems and {}..+{}% of the tree FD plan",
     lambda: ls_x_range() + ls_tree_range()),
    (R, "Markowitz here",
     lambda: () if all(r["ordering"] == "markowitz" for r in section_rows(LS, "")) else ("x",)),
    (R, "grow as length^{} over 12..24 links ({}x C-ABA at 24 links; C-ABA {}, dense Lagrange {})",
     lambda: (ls_slopes()["sparse"], r2(ls_sweep(24, "x C-ABA")), ls_slopes()["C-ABA"], ls_slopes()["Lagrange dense"])),
    (R, "needs {} flops there instead of {} ({}x)",
     lambda: (c(number(row(LS, "Geared chain", links=24)["auto (this installation)"])), c(ls_sweep(24, "sparse loop plan")),
              r2(number(row(LS, "Geared chain", links=24)["auto (this installation)"]) / ls_sweep(24, "C-ABA")))),
    (R, "The loop ID plan (assembly, LU, tau_y = tau - K_y^T lambda) costs {}-{}x our counted C-RNEA on the five systems",
     lambda: ls_id_range("x C-RNEA", [r["system"] for r in section_rows(LS, "Inverse dynamics")])),
    (R, "The loop Delassus matrix costs {}-{}x C-EFPA on the two chains and the four-bar (one 6D contact) but {}-{}x on "
        "the quadruped and the biped (four 6D contacts: {} substitutions after the one factorization), below the "
        "projected inverse OSIM except on the four-bar",
     lambda: ls_id_range("x C-EFPA", ["12-link GT chain", "12-link PBT chain", "four-bar + tail"])
     + ls_id_range("x C-EFPA", ["Mini Cheetah", "MIT Humanoid"]) + (6 * 4,)
     if [r["system"] for r in section_rows(LS, "Inverse dynamics")
         if number(r["loop Delassus"]) >= number(r["projected inverse OSIM"])] == ["four-bar + tail"]
     else ("x",) * 5),
    # --- Yamane (seed 004)
    (R, "{}x the unit-vector method's operations at 48 DoF",
     lambda: (row(YS, "Fig. 6", DoF=48)["ops Yamane/unit-vector"],)),
    (R, "more expensive than our ABA on serial chains ({}x ABA's operations at 2 joints, {}x at 16)",
     lambda: (row(YS, "Fig. 6", joints=2)["ops Yamane/ABA"], row(YS, "Fig. 6", joints=16)["ops Yamane/ABA"])),
    (R, "more expensive on the branched system ({}x at 2 end links to {}x at 12)",
     lambda: (row(YS, "Fig. 7", **{"end links": 2})["ops Yamane/ABA"], row(YS, "Fig. 7", **{"end links": 12})["ops Yamane/ABA"])),
    (R, "each added branch costs a constant {} operations",
     lambda: (c(ys_increments("with splitting")[-1]),) if len(set(ys_increments("with splitting")[1:])) == 1 else ("x",)),
    (R, "without splitting the per-branch cost grows ({} -> {}) but stays cheaper up to 12 branches",
     lambda: (c(ys_increments("without splitting")[0]), c(ys_increments("without splitting")[-1]))
     if all(number(r["Yamane (no split) ops"]) <= number(r["Yamane (split) ops"]) for r in section_rows(YS, "Fig. 7"))
     else ("x", "x")),
]


def _flat(text):
    return " ".join(text.split())


@pytest.mark.parametrize("doc, template, values", QUOTES,
                         ids=[f"{d}:{t[:40]}" for d, t, _ in QUOTES])
def test_quoted_numbers_match_outputs(doc, template, values):
    text = _flat((EXP / doc).read_text(encoding="utf-8"))
    quoted = _flat(template.format(*values()))
    assert quoted in text, f"{doc} should say: {quoted!r}"


def test_output_sentences_match_their_tables():
    """The sentences the scripts derive from their tables (slopes, increments) agree with the
    committed rows (no half-regenerated file)."""
    ds_slopes = __import__("delassus_studies").slope
    for section, x in (("(b)", "k"), ("(c)", "n")):
        rows = section_rows(DT, section)
        xs = np.array([number(r[x]) for r in rows])
        tail = slice(len(xs) // 2, None)
        for m, quoted in slope_text(section).items():
            ys = np.array([number(r[m]) for r in rows])
            assert f"{ds_slopes(xs[tail], ys[tail]):.2f}" == quoted, (section, m)
    rows = [r for r in section_rows(LT, "Fig. 11") if r["chain"] == "geared"]
    ns = sorted({int(r["links"]) for r in rows})
    for alg, quoted in lt_slopes().items():
        f = {int(r["links"]): number(r["ops"]) for r in rows if r["algorithm"] == alg}
        half = ns[len(ns) // 2:]
        fit = np.polyfit(np.log(half), np.log([f[n] for n in half]), 1)[0]
        assert f"{fit:.2f}" == quoted, alg
    sweep = section_rows(LS, "Geared chain")
    half = sweep[len(sweep) // 2:]
    n = np.log([number(r["links"]) for r in half])
    for key, column in (("sparse", "sparse loop plan"), ("C-ABA", "C-ABA"), ("Lagrange dense", "Lagrange dense")):
        fit = np.polyfit(n, np.log([number(r[column]) for r in half]), 1)[0]
        assert f"{fit:.2f}" == ls_slopes()[key], key
    for kind, method in (("with splitting", "Yamane (split)"), ("without splitting", "Yamane (no split)")):
        assert ys_increments(kind) == ys_increments_recomputed(method), kind
    for r in section_rows(F1):                           # 'LU best' is the row's cheapest column
        lus = [number(v) for k, v in r.items() if k.startswith("LU ") and v != "-" and k != "LU own best"]
        assert number(r["LU best"]) == min(lus), r["N"]
        own = [number(r[f"LU {o}"]) for o in ("natural", "rcm", "min_degree", "markowitz", "ABA order")]
        assert number(r["LU own best"]) == min(own), r["N"]
