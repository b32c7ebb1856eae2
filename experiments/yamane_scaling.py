"""Seed 004's Fig. 6 and Fig. 7 analogue: Yamane-Nakamura virtual-work forward dynamics scaling.

Fig. 6: serial chains of 2..16 spherical joints. Fig. 7: 2..12 spherical end links hanging from
one link on a spherical joint, with and without link splitting. Peers measured in the same run:
ABA (sparsedyn.aba) and the unit-vector method (H column by column from nv RNEA calls, then a
dense Cholesky solve: the method the paper compares against). Reports the operation count (one
state) and the Python time per state (batch of B, best of R), and the ratios to the peers.

Published (seed 004, Pentium III, C++; no operation counts): faster than the unit-vector method
above 15 DoF on serial chains; on the branched system, time linear in DoF only with splitting
(faster than unit-vector above ~30 DoF), without splitting about as slow as the unit-vector method.
Python timings are dominated by per-call overhead; op counts are the fairer comparison.

    python experiments/yamane_scaling.py [--batch 64] [--repeat 3]
(--repeat 0 skips the timings: operation counts only.)
Outputs: experiments/out/yamane_scaling.md, experiments/out/yamane_scaling.png
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import sparsedyn as sd  # noqa: E402
from sparsedyn.files import atomic_path, atomic_write
from sparsedyn.model.joints import SphericalJoint  # noqa: E402
from sparsedyn.model.model import WORLD, ModelBuilder  # noqa: E402
from sparsedyn.opcount import charge, count_operations  # noqa: E402
from sparsedyn.recursive.yamane import yamane_forward_dynamics  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "out")


def spherical_chain(n):
    b = ModelBuilder(f"sph_chain{n}")
    parent = WORLD
    for i in range(n):
        T = np.eye(4)
        T[2, 3] = 0.0 if i == 0 else -0.3
        parent = b.add_body(f"l{i}", parent, SphericalJoint(f"j{i}"), placement=T, mass=1.0,
                            com=(0, 0, -0.15), inertia=np.diag([0.01, 0.01, 0.002]))
    return b.build()


def star(n):
    b = ModelBuilder(f"star{n}")
    b.add_body("hub", WORLD, SphericalJoint("hub"), mass=2.0, com=(0, 0, -0.1), inertia=np.eye(3) * 0.02)
    for k in range(n):
        a = 2 * np.pi * k / n
        T = np.eye(4)
        T[:3, 3] = (0.1 * np.cos(a), 0.1 * np.sin(a), -0.2)
        b.add_body(f"leg{k}", "hub", SphericalJoint(f"leg{k}"), placement=T, mass=1.0, com=(0, 0, -0.15),
                   inertia=np.diag([0.01, 0.01, 0.002]))
    return b.build()


def unit_vector_method(model, q, v, tau):
    """Walker-Orin method 1: C = RNEA(q, v, 0), H e_j = RNEA(q, 0, e_j) - RNEA(q, 0, 0), then a
    dense Cholesky solve (one RNEA call per column so the op counter charges each)."""
    B, n = q.shape[0], model.nv
    z = np.zeros((B, n))
    C = sd.rnea(model, q, v, z)
    G = sd.rnea(model, q, z, z)
    H = np.stack([sd.rnea(model, q, z, np.broadcast_to(e, (B, n))) - G for e in np.eye(n)], axis=-1)
    charge(n ** 3 // 6 + 2 * n * n, n ** 3 // 6 + 2 * n * n, div=n, sqrt=n, kind="chol(H)")
    return np.linalg.solve(H, (tau - C)[..., None])[..., 0]


def measure(fn, model, batch, repeat):
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng, batch=batch)
    v, tau = rng.normal(size=(batch, model.nv)), rng.normal(size=(batch, model.nv))
    with count_operations() as ops:
        fn(model, q[:1], v[:1], tau[:1])
    best = np.inf if repeat else np.nan
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(model, q, v, tau)
        best = min(best, time.perf_counter() - t0)
    return ops.flops, best / batch * 1e6


METHODS = {
    "Yamane (split)": lambda m, q, v, t: yamane_forward_dynamics(m, q, v, t, split=True),
    "Yamane (no split)": lambda m, q, v, t: yamane_forward_dynamics(m, q, v, t, split=False),
    "ABA": lambda m, q, v, t: sd.aba(m, q, v, t),
    "unit-vector": unit_vector_method,
}


SERIAL = range(2, 17, 2)
BRANCHED = range(2, 13, 2)
#: columns that are timings (not regenerated exactly by a rerun)
TIMING_COLUMNS = ("Yamane (split) us", "Yamane (no split) us", "ABA us", "unit-vector us",
                  "time Yamane/unit-vector")


def run(serial=SERIAL, branched=BRANCHED, batch=64, repeat=3):
    """{"serial": [(joints, DoF, {method: (ops, us)})], "branched": [...]}."""
    results = {"serial": [], "branched": []}
    for n in serial:
        m = spherical_chain(n)
        results["serial"].append((n, m.nv, {k: measure(f, m, batch, repeat)
                                            for k, f in METHODS.items() if k != "Yamane (no split)"}))
    for n in branched:
        m = star(n)
        results["branched"].append((n, m.nv, {k: measure(f, m, batch, repeat) for k, f in METHODS.items()}))
    return results


def increments(branched, method):
    """Ops added per extra end link between consecutive rows of the branched study."""
    return [(branched[i + 1][2][method][0] - branched[i][2][method][0]) / (branched[i + 1][0] - branched[i][0])
            for i in range(len(branched) - 1)]


def table_lines(results):
    lines = []
    for key, title, unit in (("serial", "Fig. 6: serial chains of spherical joints", "joints"),
                             ("branched", "Fig. 7: end links on one link (hub on a spherical joint)", "end links")):
        if not results[key]:
            continue
        names = list(results[key][0][2])
        lines += [f"## {title}", "", f"| {unit} | DoF | " + " | ".join(f"{k} ops | {k} us" for k in names) +
                  " | ops Yamane/ABA | ops Yamane/unit-vector | time Yamane/unit-vector |",
                  "|" + "---:|" * (2 + 2 * len(names) + 3)]
        for n, dof, r in results[key]:
            y = r["Yamane (split)"]
            lines.append(f"| {n} | {dof} | " + " | ".join(f"{r[k][0]} | {r[k][1]:.1f}" for k in names) +
                         f" | {y[0] / r['ABA'][0]:.2f} | {y[0] / r['unit-vector'][0]:.2f} | "
                         f"{y[1] / r['unit-vector'][1]:.2f} |")
        lines.append("")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    results = run(batch=args.batch, repeat=args.repeat)
    lines = ["# Seed 004 Fig. 6 / Fig. 7 analogue: Yamane-Nakamura forward dynamics", "",
             f"Command: `python experiments/yamane_scaling.py --batch {args.batch} --repeat {args.repeat}`", "",
             "ops = operation count for one state (sparsedyn.opcount, paper convention); us = Python time per state (batch "
             f"{args.batch}, best of {args.repeat}); ratios are Yamane / peer from the same run. "
             "Published (C++, no op counts): Fig. 6 faster than the unit-vector method above 15 DoF; "
             "Fig. 7 linear only with splitting, faster than unit-vector above ~30 DoF.", ""]
    lines += table_lines(results)
    br = results["branched"]
    lines += ["Ops added per extra end link (branched): with splitting " +
              ", ".join(f"{x:.0f}" for x in increments(br, "Yamane (split)")) + "; without splitting " +
              ", ".join(f"{x:.0f}" for x in increments(br, "Yamane (no split)")) + "."]
    os.makedirs(OUT, exist_ok=True)
    with atomic_write(os.path.join(OUT, "yamane_scaling.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(2, 2, figsize=(11, 8))
        for col, key in enumerate(("serial", "branched")):
            for k in results[key][0][2]:
                dof = [d for _, d, _ in results[key]]
                axes[0, col].plot(dof, [r[k][0] for _, _, r in results[key]], "o-", label=k)
                axes[1, col].plot(dof, [r[k][1] for _, _, r in results[key]], "o-", label=k)
            axes[0, col].set(title=f"{key}: op count", xlabel="DoF", ylabel="operations")
            axes[1, col].set(title=f"{key}: Python time", xlabel="DoF", ylabel="us per state")
            axes[0, col].legend(fontsize=8)
        fig.tight_layout()
        with atomic_path(os.path.join(OUT, "yamane_scaling.png")) as tmp:
            fig.savefig(tmp, dpi=120)
    except ImportError:
        pass


if __name__ == "__main__":
    main()
