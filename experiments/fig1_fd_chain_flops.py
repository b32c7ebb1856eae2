"""Nori's Fig. 1: floating-point operations of forward dynamics of a serial chain, N_B = 2..100.

Lines (operations per state, mul + add (+ div)):
  - ABA, closed form of Featherstone p. 202 (cited by Nori): (224 N - 259) mul + (205 N - 248) add
  - RNEA, closed form (inverse dynamics, for scale): (93 N - 108) mul + (81 N - 100) add
  - our recursive ABA / RNEA, counted by sparsedyn.count_operations on one state
  - matrix ABA: Nori's matrix reformulation of the ABA (Sec. V-C, Property 2, Appendix B), the
    forward substitution on W^L D W^R with the sparse products that form it, counted as Nori's
    code counts it (sparsedyn.problems.matrix_aba; D and b not included, as for the LU columns)
  - sparse LU of the forward-dynamics D (Nori Sec. V-D, fx measured on every link: 5 N blocks)
    under every ordering the planner offers ("natural" is the unpermuted LU of Nori's Fig. 1:
    natural column order, rows only matched to the pivots, as MATLAB's [L, U, P] = lu([D; Y])) (exact count of the online kernel: numeric LU +
    substitutions, constants folded), including the ABA elimination order of Appendix B as a
    pivot sequence (a trusted structural order: its pivots S^T I^A S are fill entries, checked
    online); "auto" picks the ordering of fewest online flops, counting for the orderings whose
    pivots are not stable by construction (the generic ones) the row-wise backward-error check
    they pay on every state (2 nnz(D) flops)
  - assembling D(q) and b(q, qd) for the LU (counted), which the LU lines do not include
  - inverse dynamics of the same chain (external wrenches on every link) under Nori's RNEA order
    (eq. 11-12, zero fill), for scale.
"LU own best" is the cheapest of the orderings sparsedyn computes itself (experiments/
own_orderings.py): it depends on sparsedyn's code alone. The columns of SciPy's and CHOLMOD's
orderings (colamd, mmd_*, amd, metis, nesdis, btf), and so "LU best", "best ordering" and "auto
ordering", can change with those libraries' versions (VERSION_DEPENDENT).

Writes experiments/out/fig1.png and experiments/out/fig1.md.

    python experiments/fig1_fd_chain_flops.py [--max 100] [--step 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import sparsedyn as sd
from sparsedyn.files import atomic_path, atomic_write
from sparsedyn.models import serial_chain
from sparsedyn.problems import compile, forward_dynamics, inverse_dynamics
from sparsedyn.problems.matrix_aba import matrix_aba

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from own_orderings import is_own, own_best, versions_line  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def counted(fn, model):
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    v, x = rng.normal(size=(2, model.nv))
    with sd.count_operations() as ops:
        fn(model, q, v, x)
    return ops.flops


def row_for(n):
    model = serial_chain(n)
    # "all": every ordering's program built (the exact count of each column), chosen as "auto"
    plan = compile(forward_dynamics(model, f_ext=True), ordering="all")
    stats = plan.stats
    orderings = {r["name"]: r["flops"] for r in plan.table if r["pivot_safe"]}
    best = min(orderings, key=lambda name: (orderings[name], name))
    own = min((name for name in orderings if is_own(name)), key=lambda name: (orderings[name], name))
    idplan = compile(inverse_dynamics(model, f_ext=True), ordering="rnea")
    return {
        "N": n,
        "aba_formula": (224 * n - 259) + (205 * n - 248),
        "rnea_formula": (93 * n - 108) + (81 * n - 100),
        "aba_counted": counted(sd.aba, model),
        "rnea_counted": counted(sd.rnea, model),
        "matrix_aba": counted(matrix_aba, model),
        "lu_best": orderings[best], "lu_best_ordering": best,
        "lu_own": orderings[own], "lu_own_ordering": own,
        "own_pick": own_best(plan.table)["name"],
        "id_rnea": idplan.stats["flops"], "id_fill": idplan.stats["fill"],
        "auto_ordering": stats["ordering"],
        "lu_aba_order": orderings["aba"],
        "assembly": stats["assembly_flops"],
        "nnz_D": stats["nnz_D"],
        "orderings": orderings,
    }


#: columns whose values depend on SciPy's / CHOLMOD's orderings (their versions), not on sparsedyn
THIRD_PARTY = ("amd", "btf", "colamd", "metis", "mmd_at_plus_a", "mmd_ata", "nesdis")
VERSION_DEPENDENT = ("LU best", "best ordering", "auto ordering") + tuple(f"LU {n}" for n in THIRD_PARTY)


def table_lines(rows):
    """The Markdown table of `rows` (row_for results), header first."""
    names = sorted({k for r in rows for k in r["orderings"]} - {"aba"})   # own column
    head = (["N", "ABA 224N-259+205N-248", "ABA counted", "matrix ABA", "RNEA 93N-108+81N-100", "RNEA counted",
             "LU own best", "own ordering", "own pick", "LU best", "best ordering", "auto ordering",
             "LU ABA order", "assembly D,b", "nnz D", "ID LU RNEA order", "ID fill"]
            + [f"LU {n}" for n in names])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["N"], r["aba_formula"], r["aba_counted"], r["matrix_aba"], r["rnea_formula"], r["rnea_counted"],
                 r["lu_own"], r["lu_own_ordering"], r["own_pick"], r["lu_best"],
                 r["lu_best_ordering"], r["auto_ordering"], r["lu_aba_order"], r["assembly"],
                 r["nnz_D"], r["id_rnea"], r["id_fill"]]
        cells += [r["orderings"].get(n, "-") for n in names]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return lines


def write_markdown(rows, path):
    lines = ["# Fig. 1 (Nori): forward dynamics of a serial chain, operations per state",
             "",
             "mul + add (+ div). LU columns: the online sparse LU kernel alone (numeric "
             "factorization + substitutions, exact count of the compiled program); 'assembly D,b' "
             "is the counted cost of building D(q) and b(q, qd) that the LU needs in addition. 'LU ABA "
             "order': Nori's Appendix B pivot sequence, a trusted structural order (its pivots "
             "S^T I^A S are created by fill and checked online). 'LU own best': the fewest LU flops "
             "among the orderings sparsedyn computes itself (natural, rcm, min_degree, markowitz, "
             "aba); 'own pick': what `compile` would pick among those, counting for generic "
             "orderings the backward-error check they pay per state (2 nnz D flops). 'LU best', "
             "'best ordering', 'auto ordering' (what `compile` picks) and the columns of SciPy's "
             "and CHOLMOD's orderings (amd, btf, colamd, metis, mmd_*, nesdis) depend on those "
             "libraries' versions. 'ID LU RNEA order': inverse dynamics of the same chain under "
             "Nori's RNEA order (eq. 11-12), for scale. 'matrix ABA': Nori's matrix reformulation of "
             "the ABA (Sec. V-C, Appendix B), forward substitution on W^L D W^R plus the sparse products "
             "forming it and the articulated inertias, counted as Nori's code counts it "
             "(sparsedyn.problems.matrix_aba). 'LU natural' is the unpermuted LU of Nori's Fig. 1 "
             "(natural column order, rows only matched to the pivots). "
             "Generated by `python experiments/fig1_fd_chain_flops.py`.",
             "",
             versions_line(),
             "",
             *table_lines(rows)]
    with atomic_write(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    N = [r["N"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 5.5))
    ax.plot(N, [r["aba_formula"] for r in rows], "k-", lw=2, label="ABA (Featherstone p. 202)")
    ax.plot(N, [r["aba_counted"] for r in rows], "k:", label="ABA, ours (counted)")
    ax.plot(N, [r["matrix_aba"] for r in rows], "b-", lw=2, label="matrix ABA (Nori Sec. V-C, forward substitution)")
    ax.plot(N, [r["orderings"]["natural"] for r in rows], "c-", lw=2, label="unpermuted LU (natural columns)")
    ax.plot(N, [r["rnea_formula"] for r in rows], "g-", label="RNEA (ID, for scale)")
    ax.plot(N, [r["lu_best"] for r in rows], "r-", lw=2, label="sparse LU, best ordering")
    ax.plot(N, [r["lu_aba_order"] for r in rows], "m--", label="sparse LU, ABA pivot order")
    ax.plot(N, [r["lu_best"] + r["assembly"] for r in rows], "r:",
            label="sparse LU, best + assembly of D, b")
    for name in ("colamd", "amd", "metis"):
        if all(name in r["orderings"] for r in rows):
            ax.plot(N, [r["orderings"][name] for r in rows], lw=0.8, alpha=0.6, label=f"sparse LU, {name}")
    ax.set_xlabel("number of links $N_B$")
    ax.set_ylabel("floating-point operations per state")
    ax.set_title("Forward dynamics of a serial chain (Nori, Fig. 1)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max", type=int, default=100)
    ap.add_argument("--step", type=int, default=1)
    args = ap.parse_args(argv)
    os.makedirs(OUT, exist_ok=True)
    t0 = time.perf_counter()
    rows = [row_for(n) for n in range(2, args.max + 1, args.step)]
    write_markdown(rows, os.path.join(OUT, "fig1.md"))
    plot(rows, os.path.join(OUT, "fig1.png"))
    for r in rows:
        if r["N"] in (2, 5, 10, 20, 50, 100):
            print(f"N={r['N']:3d}  ABA {r['aba_formula']:6d} (ours {r['aba_counted']:6d})  "
                  f"LU best {r['lu_best']:6d} [{r['lu_best_ordering']}] = "
                  f"{r['lu_best'] / r['aba_formula']:.2f} x ABA;  LU ABA-order {r['lu_aba_order']:6d};  "
                  f"assembly {r['assembly']:6d}")
    print(f"wrote {OUT}/fig1.md and fig1.png ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
