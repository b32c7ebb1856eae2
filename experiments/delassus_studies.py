"""Operation counts of the Delassus algorithms, reproducing the studies of seed 000 (PV-OSIMr,
Sec. IV) and seed 002 (EFPA, Sec. V-C), with sparsedyn's operation counter (one B = 1 call each).

    (a) stem of 0..100 links + 1, 2, 4, 7, 10 seven-link branches per side, 6D welds at the tips
    (b) chain of k^2 links with a 6D weld every k links (PV-OSIMr O(k^2), EFPA O(k^3), PV-OSIM O(k^4))
    (c) chain with a 6D weld on every link
    (d) humanoid: 6D feet (m = 12), 4 x 3D corners per foot (m = 24)
    (e) five-finger hand alone (5 x 3D tips), on the humanoid's left wrist, on both wrists, both +
        6D feet (the humanoid's own three-finger hands are replaced by the five-finger hand model,
        attached with ModelBuilder); EFPA's hands + feet (4 x 6D) on the humanoid itself.
    (h) EFPA's Fig. 5 / Fig. 6 on the representative ASIMO-like humanoid (35 bodies): EFPA vs
        LTL-OSIM (Featherstone's SFA) for hands + feet and the Fig. 6 variants
    (i) seed 000's Atlas studies on the representative Atlas-like humanoid (nv = 36; + the
        24-DoF hand: 60 / 84 DoF as in the paper)
    Recursive methods: PV-OSIMr, PV-OSIM, EFPA and KJR (Kreutz-Delgado, Jain, Rodriguez; seed
    002's RJKA). (d) and (e) also count every non-recursive method, the sparse route through Nori's system
    included (column "sparse", planned with the cheapest of the orderings sparsedyn computes
    itself, experiments/own_orderings.py, so that its count does not depend on SciPy's or
    CHOLMOD's versions).

Writes experiments/out/delassus_*.png and experiments/out/delassus_tables.md.
Usage: python experiments/delassus_studies.py [--quick]
"""
from __future__ import annotations

import os
import sys

import numpy as np

import sparsedyn.models as sm
from sparsedyn.contacts import Contact
from sparsedyn.delassus import delassus
from sparsedyn.files import atomic_path, atomic_write
from sparsedyn.model import ModelBuilder, make_joint
from sparsedyn.opcount import count_operations
from sparsedyn.problems.delassus_sparse import compile_delassus

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from own_orderings import own_best, versions_line  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
# "kjr": Kreutz-Delgado, Jain, Rodriguez (seed 000 Table I; seed 002's RJKA), recursive/kjr.py
RECURSIVE = ("pv-osimr", "pv-osim", "efpa", "kjr")
# "sparse": C D^-1 B on Nori's block system (problems/delassus_sparse.py): assembly + one sparse
# LU + m substitutions + C x, planned offline per contact set (planning is not counted)
ALL = ("pv-osimr", "pv-osim", "efpa", "kjr", "ltl-osim", "dense", "sparse")
# the library's own "sparse" (auto ordering: SciPy's and CHOLMOD's orderings included, so its count
# depends on their versions; shown for reference, not regenerated exactly elsewhere)
SPARSE_AUTO = "sparse (auto, this installation)"
ROBOT_COLUMNS = ALL + (SPARSE_AUTO,)
VERSION_DEPENDENT = (SPARSE_AUTO,)
# kinds charged by the articulated-inertia sweep every recursive method shares (_osim_common.Pivot)
ABI_KINDS = ("X^T I X", "U = H S", "D = S^T U", "D^-1", "U D^-1 U^T")
FINGERS = ("thumb", "index", "middle", "ring", "little")


def flops(model, contacts, method):
    q = model.neutral_configuration() if not model.floating_base else _random_q(model)
    if method == "sparse":
        return sparse_flops(model, contacts, q)
    with count_operations() as ops:
        delassus(model, q, contacts, method="sparse" if method == SPARSE_AUTO else method)
    abi = sum(ops.by_kind.get(k, 0) for k in ABI_KINDS) if method in RECURSIVE else 0
    return ops.flops, ops.flops - abi


def sparse_flops(model, contacts, q):
    """delassus(..., method="sparse") under the planner's pick among sparsedyn's own orderings
    (the same count as the library's "auto" plan when that pick is the same ordering):
    (counted flops, the plan's stats: its cost breakdown)."""
    name = own_best(compile_delassus(model, contacts).plan.factorization.table)["name"]
    plan = compile_delassus(model, contacts, ordering=name)
    with count_operations() as ops:
        plan(q)
    assert ops.flops == plan.stats["total_flops"], (ops.flops, plan.stats["total_flops"])
    return ops.flops, plan.stats


def _random_q(model):
    return model.random_configuration(np.random.default_rng(0))


# ------------------------------------------------------------------------------- model building

def chain_with_welds(n, every):
    model = sm.serial_chain(n)
    return model, [Contact(f"link{i}") for i in range(every, n + 1, every)]


def humanoid_with_hands(sides=("l", "r"), base=None):
    """The embedded humanoid (or `base`) with its three-finger hands, if any, replaced by the
    five-finger hand model (wrist joint chain included) attached at the `{side}_hand` frame."""
    hum, hand = sm.humanoid() if base is None else base, sm.hand()
    b = ModelBuilder(f"{'humanoid' if base is None else base.name}_hands_{''.join(sides)}")
    keep, new_index = [], {}
    fingers = {i for s in ("l", "r") for i in range(hum.nbodies)
               if hum.link_names[i].startswith(s + "_") and any(f in hum.link_names[i] for f in ("index", "middle", "thumb"))}
    for i in range(hum.nbodies):
        if i in fingers and hum.link_names[i][0] in sides:
            continue
        p = int(hum.parents[i])
        _add_copy(b, hum, i, new_index[p] if p >= 0 else -1, "", hum.joint_placements[i])
        new_index[i] = b.nbodies - 1
        keep.append(i)
    for name, fr in hum.frames.items():
        if fr.kind == "link" and fr.body in new_index and name not in b._frames:
            b.add_frame(name, new_index[fr.body], fr.placement)
    for s in sides:
        wrist = hum.frames[f"{s}_hand"]
        hidx = {}
        for i in range(hand.nbodies):
            p = int(hand.parents[i])
            T = hand.joint_placements[i]
            if p < 0:
                parent, T = new_index[wrist.body], wrist.placement @ T
            else:
                parent = hidx[p]
            _add_copy(b, hand, i, parent, f"{s}_", T)
            hidx[i] = b.nbodies - 1
        for name, fr in hand.frames.items():
            if fr.body >= 0 and f"{s}_{name}" not in b._frames:
                b.add_frame(f"{s}_{name}", hidx[fr.body], fr.placement)
    return b.build()


def _add_copy(b, model, i, parent, prefix, placement):
    j = model.joints[i]
    joint = make_joint(j.kind, prefix + j.name, j.axis)
    s = model.q_slice(i)
    b.add_body(prefix + model.link_names[i], parent, joint, placement=placement,
               spatial=model.inertias[i], lower=model.lower_position_limit[s],
               upper=model.upper_position_limit[s],
               effort=model.effort_limit[s] if j.nq == j.nv else None)


# ------------------------------------------------------------------------------- studies

def study_tree(stems, branches):
    rows = []
    for k in branches:
        for s in stems:
            model = sm.branched_tree(s, k)
            contacts = [Contact(f"{side}{j}_tip") for side in ("left", "right") for j in range(1, k + 1)]
            rows.append((k, s, {m: flops(model, contacts, m)[0] for m in RECURSIVE}))
    return rows


def study_chain_k2(ks):
    rows = []
    for k in ks:
        model, contacts = chain_with_welds(k * k, k)
        rows.append((k, {m: flops(model, contacts, m)[0] for m in RECURSIVE}))
    return rows


def study_chain_every(ns):
    rows = []
    for n in ns:
        model, contacts = chain_with_welds(n, 1)
        rows.append((n, {m: flops(model, contacts, m)[0] for m in RECURSIVE}))
    return rows


def study_robots(labels=None):
    """The robot cases (all, or those whose label is in `labels`)."""
    hum = sm.humanoid()
    corners = [Contact(f"{s}_foot_corner_{c}", "3d") for s in ("l", "r") for c in ("fl", "fr", "rl", "rr")]
    feet = [Contact("l_sole"), Contact("r_sole")]
    tips = lambda s: [Contact(f"{s}_{f}_tip", "3d") for f in FINGERS]
    hand = sm.hand()
    one, two = humanoid_with_hands(("l",)), humanoid_with_hands(("l", "r"))
    cases = [
        ("humanoid, 6D feet", hum, feet),
        ("humanoid, 4 x 3D corners per foot", hum, corners),
        ("humanoid, 6D feet + six 3D fingertips (bench_delassus.py)", hum,
         feet + [Contact(f"{s}_{f}_tip", "3d") for s in ("l", "r") for f in ("thumb", "index", "middle")]),
        ("humanoid, 6D hands + 6D feet (EFPA HF; seed 000's 1.5% case)", hum,
         feet + [Contact("l_hand"), Contact("r_hand")]),
        ("five-finger hand alone, 5 x 3D tips", hand, [Contact(f"{f}_tip", "3d") for f in FINGERS]),
        ("humanoid + left hand, 5 x 3D tips", one, tips("l")),
        ("humanoid + two hands, 10 x 3D tips", two, tips("l") + tips("r")),
        ("humanoid + two hands, tips + 6D feet", two, tips("l") + tips("r") + feet),
    ]
    rows = []
    for label, model, contacts in cases:
        if labels is not None and label not in labels:
            continue
        m = sum(c.dim for c in contacts)
        rows.append((label, model.nv, m, {meth: flops(model, contacts, meth) for meth in ROBOT_COLUMNS}))
    return rows


# seed 002, Sec. V-C: SFA (LTL-OSIM) / EFPA flops and the sparsity of the hands-and-feet case
EFPA_METHODS = ("efpa", "ltl-osim", "pv-osimr", "pv-osim")
HF_LINKS = ("l_hand", "r_hand", "l_sole", "r_sole")
ASIMO_HF = "ASIMO-like, HF: 6D hands + feet"
EFPA_PAPER = {ASIMO_HF: "78%; 67% / 56% zeros",
              "ASIMO-like + 2 arms + 2 legs, HF of all limbs": "SFA < EFPA, ratio ~ HF's; 73% zeros in H"}
# what LTL-OSIM charges for computing H itself (crba.py: composite inertias, F = X^T F up the
# support); seed 002 gives only the ratio, so the column "H given" shows it without these kinds
CRBA_KINDS = ("X^T I X", "I^c_p +", "X^T*f")
# seed 002, Sec. V-B: the SFA's steps, as the kinds ltl_osim.py charges them
SFA_STEPS = (("H by CRBA", CRBA_KINDS), ("H = L^T L", ("LTL",)), ("J", ("R X", "A S")),
             ("Y = J L^-1", ("L^-T x",)), ("Y Y^T", ("Y Y^T",)))


def structural_zeros(model, links):
    """Percent of structural zeros of H and of the 6D Jacobian of `links` (branch-induced sparsity:
    H[i, j] != 0 iff one DoF's body supports the other's; J_k's columns are the DoFs of the bodies
    supporting link k)."""
    dof_body = np.concatenate([[i] * j.nv for i, j in enumerate(model.joints)])
    supp = [set(model.support(i)) for i in range(model.nbodies)]
    nnz_h = sum(int(a in supp[b] or b in supp[a]) for a in dof_body for b in dof_body)
    nnz_j = sum(sum(int(d in supp[model.frames[f].body]) for d in dof_body) for f in links)
    return 100 * (1 - nnz_h / model.nv ** 2), 100 * (1 - nnz_j / (len(links) * model.nv))


def efpa_cases():
    """(label, model, end-effector links): seed 002's Fig. 5 / Fig. 6 operational spaces (6D)."""
    asimo = sm.asimo_like()
    tips = [f"{s}_{f}_tip" for s in ("l", "r") for f in ("forefinger", "thumb")]
    extra = [f"{s}{k}_{e}" for k in ("", "2") for s in ("l", "r") for e in ("hand", "sole")]
    return [
        (ASIMO_HF, asimo, HF_LINKS),
        ("ASIMO-like, HFH: + 6D head", asimo, HF_LINKS + ("head",)),
        ("ASIMO-like, FTF: 6D forefingers, thumbs, feet", asimo, tuple(tips) + ("l_sole", "r_sole")),
        ("ASIMO-like, 8-DoF arms, HF", sm.asimo_like(arm_dof=8), HF_LINKS),
        ("ASIMO-like, 7-DoF legs, HF", sm.asimo_like(leg_dof=7), HF_LINKS),
        ("ASIMO-like, 12-DoF four-finger hands, HF", sm.asimo_like(hand="four-finger"), HF_LINKS),
        ("ASIMO-like + 2 arms + 2 legs, HF of all limbs", sm.asimo_like(extra_limb_pairs=1), tuple(extra)),
        ("ASIMO-like on the right foot (fixed), 6D hands + left foot", sm.asimo_like_on_one_foot(),
         ("l_hand", "r_hand", "l_sole")),
    ]


def study_efpa(labels=None):
    rows = []
    for label, model, links in efpa_cases():
        if labels is not None and label not in labels:
            continue
        zh, zj = structural_zeros(model, links)
        contacts = [Contact(f) for f in links]
        counts = {m: flops(model, contacts, m)[0] for m in EFPA_METHODS}
        counts["ltl-osim, H given"] = counts["ltl-osim"] - sum(
            kinds_flops(model, contacts, "ltl-osim").get(k, 0) for k in CRBA_KINDS)
        rows.append((label, model.nbodies, model.nv, 6 * len(links), zh, zj, counts))
    return rows


def kinds_flops(model, contacts, method):
    """ops.by_kind of one delassus call (every charge of these methods names its kind)."""
    with count_operations() as ops:
        delassus(model, _random_q(model), contacts, method=method)
    assert sum(ops.by_kind.values()) == ops.flops, (method, ops.flops, ops.by_kind)
    return ops.by_kind


def atlas_cases():
    """Seed 000's Sec. IV-C / IV-D cases on the Atlas-like humanoid and the 24-DoF hand."""
    atlas = sm.atlas_like()
    one, two = humanoid_with_hands(("l",), atlas), humanoid_with_hands(("l", "r"), atlas)
    feet = [Contact("l_sole"), Contact("r_sole")]
    corners = [Contact(f"{s}_foot_corner_{c}", "3d") for s in ("l", "r") for c in ("fl", "fr", "rl", "rr")]
    tips = lambda s: [Contact(f"{s}_{f}_tip", "3d") for f in FINGERS]
    return [
        ("Atlas-like, 6D feet", atlas, feet),
        ("Atlas-like, 4 x 3D corners per foot", atlas, corners),
        ("Atlas-like, 6D hands + 6D feet", atlas, feet + [Contact("l_hand"), Contact("r_hand")]),
        ("Atlas-like + left hand, 5 x 3D tips", one, tips("l")),
        ("Atlas-like + two hands, 10 x 3D tips", two, tips("l") + tips("r")),
        ("Atlas-like + two hands, tips + 6D feet", two, tips("l") + tips("r") + feet),
    ]


HANDS_CLAIM = "PV-OSIMr best, up to ~34% fewer ops than PV-OSIM"
ATLAS_PAPER = {"Atlas-like, 6D feet": "identical", "Atlas-like, 4 x 3D corners per foot": "+19.9%",
               "Atlas-like, 6D hands + 6D feet": "~-1.5%", "Atlas-like + left hand, 5 x 3D tips": HANDS_CLAIM,
               "Atlas-like + two hands, 10 x 3D tips": HANDS_CLAIM,
               "Atlas-like + two hands, tips + 6D feet": HANDS_CLAIM}


def breakdown_line(label, model, contacts, methods):
    """Where the flops of `methods` go on one case: every kind the counter charged, largest first."""
    parts = []
    for method in methods:
        by_kind = kinds_flops(model, contacts, method)
        kinds = sorted(by_kind.items(), key=lambda kv: (-kv[1], kv[0]))
        parts.append(f"{method} {sum(by_kind.values()):,} = " + " + ".join(f"{k} {v:,}" for k, v in kinds))
    return f"{label}, flops by kind: " + "; ".join(parts) + "."


def efpa_breakdown_line():
    """EFPA and LTL-OSIM on the ASIMO-like hands + feet case (Fig. 5's breakdown)."""
    label, model, links = efpa_cases()[0]
    return breakdown_line(label, model, [Contact(f) for f in links], ("efpa", "ltl-osim"))


# seed 000's feet-only and "1.5%" cases on the embedded humanoid: where PV-OSIMr and PV-OSIM differ
PV_BREAKDOWN = ("humanoid, 6D feet", "humanoid, 6D hands + 6D feet (EFPA HF; seed 000's 1.5% case)")


def pv_breakdown_lines():
    hum = sm.humanoid()
    feet = [Contact("l_sole"), Contact("r_sole")]
    cases = dict(zip(PV_BREAKDOWN, (feet, feet + [Contact("l_hand"), Contact("r_hand")])))
    return [breakdown_line(label, hum, cases[label], ("pv-osimr", "pv-osim")) for label in PV_BREAKDOWN]


def sfa_steps_line():
    """LTL-OSIM's flops on the ASIMO-like hands + feet case by the SFA's steps (seed 002, Sec.
    V-B), and its ratio to EFPA with and without computing H (the seed states only the ratio)."""
    label, model, links = efpa_cases()[0]
    contacts = [Contact(f) for f in links]
    ltl, efpa = kinds_flops(model, contacts, "ltl-osim"), sum(kinds_flops(model, contacts, "efpa").values())
    steps = [(name, sum(ltl.get(k, 0) for k in kinds)) for name, kinds in SFA_STEPS]
    assert sum(f for _, f in steps) == sum(ltl.values())
    total, h = sum(ltl.values()), steps[0][1]
    return (f"{label}, SFA (LTL-OSIM) by step: " + " + ".join(f"{n} {f:,}" for n, f in steps)
            + f" = {total:,}; / EFPA {efpa:,}: {100 * total / efpa:.0f}%, with H given (without its "
            f"CRBA) {100 * (total - h) / efpa:.0f}% (paper: 78%, its absolute counts are not stated).")


def study_atlas(labels=None):
    rows = []
    for label, model, contacts in atlas_cases():
        if labels is not None and label not in labels:
            continue
        rows.append((label, model.nv, sum(c.dim for c in contacts),
                     {m: flops(model, contacts, m) for m in EFPA_METHODS}))
    return rows


# ------------------------------------------------------------------------------- output

def slope(x, y):
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def tree_lines(tree):
    lines = ["## (a) stem + k seven-link branches per side, 6D welds at the tips", "",
             "| branches/side | stem | " + " | ".join(RECURSIVE) + " | PV-OSIM / PV-OSIMr | EFPA / PV-OSIMr |",
             "|---|---|" + "---|" * (len(RECURSIVE) + 2)]
    for k, s, f in tree:
        lines.append(f"| {k} | {s} | " + " | ".join(f"{f[m]:,}" for m in RECURSIVE)
                     + f" | {f['pv-osim'] / f['pv-osimr']:.2f} | {f['efpa'] / f['pv-osimr']:.2f} |")
    return lines


CHAIN_TITLES = (("(b) chain of k^2 links, 6D weld every k links", "k", "delassus_chain_k2.png"),
                ("(c) chain, 6D weld on every link", "n", "delassus_chain_every.png"))


def chain_lines(title, xlabel, rows):
    lines = [f"## {title}", "", f"| {xlabel} | " + " | ".join(RECURSIVE) + " |",
             "|---|" + "---|" * len(RECURSIVE)]
    for r in rows:
        lines.append(f"| {r[0]} | " + " | ".join(f"{r[1][m]:,}" for m in RECURSIVE) + " |")
    return lines


def chain_slopes(rows):
    """{method: log-log slope over the larger half of the rows} (asymptotic slope)."""
    x = np.array([r[0] for r in rows], dtype=float)
    tail = slice(len(x) // 2, None)
    return {m: slope(x[tail], np.array([r[1][m] for r in rows], dtype=float)[tail]) for m in RECURSIVE}


def robot_lines(robots):
    lines = ["## (d), (e) humanoid, five-finger hands; total flops (and without the shared "
             "articulated-inertia sweep)", "",
             "| case | nv | m | " + " | ".join(ROBOT_COLUMNS) + " | PV-OSIM / PV-OSIMr - 1 |",
             "|---|---|---|" + "---|" * (len(ROBOT_COLUMNS) + 1)]
    for label, nv, m, f in robots:
        cells = [f"{f[meth][0]:,}" + (f" ({f[meth][1]:,})" if meth in RECURSIVE else "")
                 for meth in ROBOT_COLUMNS]
        lines.append(f"| {label} | {nv} | {m} | " + " | ".join(cells)
                     + f" | {100 * (f['pv-osim'][0] / f['pv-osimr'][0] - 1):+.1f}% |")
    return lines


def sparse_lines(robots):
    """Where the sparse route's flops go (DelassusPlan.stats): assembly of D, one LU with the first
    substitution, m - 1 further substitutions, C x."""
    lines = ["## (f) the sparse route C D^-1 B: where its flops go", "",
             "| case | m | ordering | assembly | LU + 1st substitution | each further substitution | "
             "(m - 1) substitutions | C x | total |", "|---|---|---|---|---|---|---|---|---|"]
    for label, _, m, f in robots:
        st = f["sparse"][1]
        lines.append(f"| {label} | {m} | {st['ordering']} | {st['assembly_flops']:,} | {st['flops']:,} | "
                     f"{st['solve_flops']:,} | {(m - 1) * st['solve_flops']:,} | {st['read_flops']:,} | "
                     f"{st['total_flops']:,} |")
    return lines


def sparsity_line():
    """Seed 002's sparsity figures for the EFPA hands + feet case: exact zeros in the contact
    Jacobian J (m x nv) and in the mass matrix H at the random configuration of the counts."""
    from sparsedyn.contacts import contact_jacobian
    from sparsedyn.recursive.crba import crba
    hum = sm.humanoid()
    q = _random_q(hum)
    J = contact_jacobian(hum, q, [Contact(n) for n in ("l_sole", "r_sole", "l_hand", "r_hand")])
    H = crba(hum, q)
    return (f"Humanoid ({hum.nbodies} bodies, nv = {hum.nv}), 6D hands + 6D feet: zeros in J "
            f"({J.shape[0]} x {J.shape[1]}) {100 * np.mean(J == 0):.0f}%, in H {100 * np.mean(H == 0):.0f}%.")


def efpa_lines(rows):
    lines = ["## (h) seed 002 (EFPA) Fig. 5 / Fig. 6: ASIMO-like humanoid (representative, "
             "sparsedyn.models.asimo_like), 6D end-effectors", "",
             "| case | bodies | nv | m | zeros in H | zeros in J | " + " | ".join(EFPA_METHODS)
             + " | LTL-OSIM / EFPA | H given | paper |", "|---|---|---|---|---|---|" + "---|" * (len(EFPA_METHODS) + 3)]
    for label, nb, nv, m, zh, zj, f in rows:
        lines.append(f"| {label} | {nb} | {nv} | {m} | {zh:.1f}% | {zj:.1f}% | "
                     + " | ".join(f"{f[k]:,}" for k in EFPA_METHODS)
                     + f" | {100 * f['ltl-osim'] / f['efpa']:.0f}% | {100 * f['ltl-osim, H given'] / f['efpa']:.0f}%"
                     + f" | {EFPA_PAPER.get(label, '')} |")
    return lines


def atlas_lines(rows):
    lines = ["## (i) seed 000 (PV-OSIMr) Figs. 5-6: Atlas-like humanoid (representative, "
             "sparsedyn.models.atlas_like) and the 24-DoF five-finger hand; total flops (and without "
             "the shared articulated-inertia sweep)", "",
             "| case | nv | m | " + " | ".join(EFPA_METHODS) + " | PV-OSIM / PV-OSIMr - 1 | paper |",
             "|---|---|---|" + "---|" * (len(EFPA_METHODS) + 2)]
    for label, nv, m, f in rows:
        cells = [f"{f[k][0]:,} ({f[k][1]:,})" if k in RECURSIVE else f"{f[k][0]:,}" for k in EFPA_METHODS]
        lines.append(f"| {label} | {nv} | {m} | " + " | ".join(cells)
                     + f" | {100 * (f['pv-osim'][0] / f['pv-osimr'][0] - 1):+.1f}% | {ATLAS_PAPER.get(label, '')} |")
    return lines


def write(tree, k2, every, robots, quick, efpa=(), atlas=()):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(OUT, exist_ok=True)
    lines = ["# Delassus operation counts (sparsedyn counter, paper convention, B = 1 call, flops = mul + add + div + sqrt)", "",
             "Generated by `python experiments/delassus_studies.py`. Column \"sparse\": C D^-1 B on "
             "Nori's block system, planned with the cheapest of the orderings sparsedyn computes "
             "itself (experiments/own_orderings.py).", "", versions_line(), ""]
    lines += tree_lines(tree)
    branches = sorted({k for k, _, _ in tree})
    fig, axes = plt.subplots(1, len(branches), figsize=(4 * len(branches), 3.5), squeeze=False)
    for ax, k in zip(axes[0], branches):
        sub = [(s, f) for kk, s, f in tree if kk == k]
        for meth in RECURSIVE:
            ax.plot([s for s, _ in sub], [f[meth] for _, f in sub], label=meth)
        ax.set_title(f"{k} branch(es)/side, m = {12 * k}")
        ax.set_xlabel("stem length")
    axes[0][0].set_ylabel("flops")
    axes[0][0].legend()
    fig.tight_layout()
    with atomic_path(os.path.join(OUT, "delassus_tree.png")) as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)

    for (title, xlabel, fname), rows in zip(CHAIN_TITLES, (k2, every)):
        lines += [""] + chain_lines(title, xlabel, rows)
        fits = chain_slopes(rows)
        lines += ["", "log-log slope over the larger half: " + ", ".join(f"{m} {fits[m]:.2f}" for m in RECURSIVE)]
        x = np.array([r[0] for r in rows], dtype=float)
        fig, ax = plt.subplots(figsize=(5, 4))
        for meth in RECURSIVE:
            ax.loglog(x, [r[1][meth] for r in rows], "o-", label=meth)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("flops")
        ax.set_title(title, fontsize=9)
        ax.legend()
        fig.tight_layout()
        with atomic_path(os.path.join(OUT, fname)) as tmp:
            fig.savefig(tmp, dpi=110)
        plt.close(fig)

    lines += [""] + robot_lines(robots) + [""] + sparse_lines(robots)
    for line in pv_breakdown_lines():
        lines += ["", line]
    lines += ["", "## (g) sparsity (seed 002, Sec. V-C)", "", sparsity_line()]
    lines += [""] + efpa_lines(efpa) + ["", "Column \"H given\": LTL-OSIM / EFPA without the CRBA "
                                        "that computes H (kinds " + ", ".join(CRBA_KINDS) + ").", "",
                                        efpa_breakdown_line(), "", sfa_steps_line(), ""] + atlas_lines(atlas)
    fig, ax = plt.subplots(figsize=(9, 4))
    w = 0.16
    for j, meth in enumerate(ALL[:5]):
        ax.bar(np.arange(len(robots)) + j * w, [r[3][meth][0] for r in robots], w, label=meth)
    ax.set_xticks(np.arange(len(robots)) + 2 * w)
    ax.set_xticklabels([f"{r[0][:26]}\n(m={r[2]})" for r in robots], fontsize=6)
    ax.set_ylabel("flops")
    ax.legend(fontsize=7)
    fig.tight_layout()
    with atomic_path(os.path.join(OUT, "delassus_robots.png")) as tmp:
        fig.savefig(tmp, dpi=110)
    plt.close(fig)
    if quick:
        lines.insert(1, "(--quick run: reduced sweeps)")
    path = os.path.join(OUT, "delassus_tables.md")
    with atomic_write(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"\nwrote {path} and {OUT}/delassus_*.png")


def main(quick=False):
    stems = [0, 20, 50] if quick else list(range(0, 101, 10))
    branches = [1, 2, 4] if quick else [1, 2, 4, 7, 10]
    ks = [2, 3, 4, 6] if quick else [2, 3, 4, 5, 6, 8, 10, 12]
    ns = [2, 4, 8, 16] if quick else [2, 4, 6, 8, 12, 16, 24, 32]
    write(study_tree(stems, branches), study_chain_k2(ks), study_chain_every(ns), study_robots(), quick,
          study_efpa(), study_atlas())


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
