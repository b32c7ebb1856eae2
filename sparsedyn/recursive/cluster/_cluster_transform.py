"""The cluster transform kX_lambda(k) of seed 003, eq. 17, applied by its structure: one nonzero
block iX_Lambda(i) per block row, and iX_Lambda(i) = iX_lambda(i) lambda(i)X_Lambda for a body
whose parent is in its cluster (eq. 20), so each body's block is applied as its own joint
transform to its in-cluster parent's result (motions outward, forces and rows inward): no
composed transforms, every product by a structured joint transform (transform_costs.py).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ...opcount import charge, counting, suspended
from ...spatial import Transform, rows_times_transform


@dataclass
class ClusterTransform:
    """kX_lambda(k) for one batch of states."""

    cm: object              # the ClusterModel
    k: int                  # the cluster
    Xup: list               # per body: iX_lambda(i) (Transform)
    lp: np.ndarray          # per body: local index of lambda(i) in the cluster, -1 if outside
    out_blocks: np.ndarray  # per body: block of Lambda(i) in the parent cluster (-1: world)
    q: np.ndarray           # (B, nq) configurations (for the factored congruence)


def batched(X):
    """The same transform with a broadcast axis for the columns of a matrix."""
    return Transform(X.E[:, None], X.r[:, None], X.structure)


_GROUPS = weakref.WeakKeyDictionary()


def shared_tree_groups(cm):
    """Per cluster: (groups, root of each body): bodies whose in-cluster root has the same
    joint placement (X_T) and that share their output block (>= 2 bodies, not the world's)."""
    hit = _GROUPS.get(cm)
    if hit is None:
        hit = []
        for k, c in enumerate(cm.clusters):
            lp, roots, keys = cm.local_parents[k], [], {}
            for li in range(len(c.bodies)):
                r = li
                while lp[r] >= 0:
                    r = lp[r]
                roots.append(r)
                T = np.asarray(cm.model.joint_placements[c.bodies[r]])
                keys.setdefault((int(cm.output_blocks[k][li]), T.tobytes()), []).append(li)
            hit.append((tuple(tuple(g) for g in keys.values() if len(g) > 1 and cm.output_blocks[k][g[0]] >= 0),
                        tuple(roots)))
        hit = _GROUPS[cm] = tuple(hit)
    return hit


def cluster_transform(cm, k, q, Xup):
    """ClusterTransform of cluster k at configurations q (B, nq), joint transforms Xup."""
    c = cm.clusters[k]
    return ClusterTransform(cm, k, [Xup[i] for i in c.bodies], cm.local_parents[k], cm.output_blocks[k], q)


def motion(ct, x_parent, pattern=None):
    """kX_lambda(k) x: x_parent (B, n_p, 6) per body, or (B, 6) for the world -> (B, n_b, 6).
    pattern: x_parent's structural pattern ((n_p, 6), or (6,) for the world), charged on it; then
    (result, its (n_b, 6) pattern)."""
    out, pats = [], []
    for li, (X, ob) in enumerate(zip(ct.Xup, ct.out_blocks)):
        src = out[ct.lp[li]] if ct.lp[li] >= 0 else (x_parent if ob < 0 else x_parent[:, ob])
        if pattern is None:
            out.append(X.apply_motion(src))
            continue
        ps = pats[ct.lp[li]] if ct.lp[li] >= 0 else (pattern if ob < 0 else pattern[ob])
        out.append(X.apply_motion(src, ps))
        pats.append(X.structure_cost("X m", ps)[2])
    res = np.stack(out, axis=1)
    return res if pattern is None else (res, np.array(pats))


def force_to_parent(ct, f, n_parent):
    """lambda(k)X_k^* f = (kX_lambda(k))^T f (eq. 35): f (B, n_b, 6) -> (B, n_p, 6), each body's
    force carried inward through its in-cluster parents; the paper count includes the additions
    into the parents' and output bodies' forces (6 each)."""
    f = f.copy()
    out = np.zeros((f.shape[0], n_parent, 6))
    for li in range(len(ct.Xup) - 1, -1, -1):
        g = ct.Xup[li].transpose_apply_force(f[:, li])
        if ct.lp[li] >= 0:
            f[:, ct.lp[li]] += g
        else:
            out[:, ct.out_blocks[li]] += g
    if counting():
        charge(add=6 * len(ct.Xup), kind="+", written=(0, 0))
    return out


def apply_motion_columns(X, M, pattern=None):
    """X M for a (B, 6, m) matrix of motion columns (charged once per column); pattern: M's
    (6 x m) structural pattern, each column charged on its own (zero columns cost nothing)."""
    m = M.shape[-1]
    if pattern is not None:
        with suspended():
            out = np.swapaxes(batched(X).apply_motion(np.swapaxes(M, 1, 2)), 1, 2)
        P = np.zeros_like(pattern)
        for j in np.flatnonzero(pattern.any(axis=0)):
            mul, add, P[:, j] = X.structure_cost("X m", pattern[:, j])
            charge(mul, add, kind="X*m", written=(24, 18))
        charge(kind="X*m", written=(24 * int((~pattern.any(axis=0)).sum()), 18 * int((~pattern.any(axis=0)).sum())))
        return out, P
    if counting():
        mul, add, _ = X.structure_cost("X m", np.ones(6, bool))
        charge(mul * (m - 1), add * (m - 1), kind="X*m", written=(24 * (m - 1), 18 * (m - 1)))
    return np.swapaxes(batched(X).apply_motion(np.swapaxes(M, 1, 2)), 1, 2)


def motion_columns(ct, M_parent, pattern=None):
    """kX_lambda(k) M for motion columns M_parent (B, 6 n_p, m) -> (B, 6 n_b, m); with M_parent's
    pattern (6 n_p x m): (result, its pattern), charged column by column on it."""
    out, pats = [], []
    for li, (X, ob) in enumerate(zip(ct.Xup, ct.out_blocks)):
        rows = slice(6 * ob, 6 * ob + 6)
        src = out[ct.lp[li]] if ct.lp[li] >= 0 else M_parent[:, rows]
        if pattern is None:
            out.append(apply_motion_columns(X, src))
            continue
        r, P = apply_motion_columns(X, src, pats[ct.lp[li]] if ct.lp[li] >= 0 else pattern[rows])
        out.append(r)
        pats.append(P)
    res = np.concatenate(out, axis=1)
    return res if pattern is None else (res, np.concatenate(pats, axis=0))


def rows_times(ct, chi, n_parent, pattern=None):
    """chi kX_lambda(k): row block (B, r, 6 n_b) -> (B, r, 6 n_p), each body's columns carried
    inward (spatial.rows_times_transform: each row an X^T f). With chi's pattern (r x 6 n_b):
    charged row by row on it, and the result's pattern returned."""
    chi = chi.copy()
    P = None if pattern is None else pattern.copy()
    out = np.zeros(chi.shape[:2] + (6 * n_parent,))
    Pout = None if P is None else np.zeros((chi.shape[1], 6 * n_parent), bool)
    for li in range(len(ct.Xup) - 1, -1, -1):
        X, cols = ct.Xup[li], slice(6 * li, 6 * li + 6)
        lp = ct.lp[li]
        dest, Pd = (chi, P) if lp >= 0 else (out, Pout)
        dc = slice(6 * lp, 6 * lp + 6) if lp >= 0 else slice(6 * ct.out_blocks[li], 6 * ct.out_blocks[li] + 6)
        with suspended():
            dest[:, :, dc] += rows_times_transform(X, chi[:, :, cols])
        if Pd is None:
            continue
        for r in range(P.shape[0]):
            if P[r, cols].any():
                mul, add, pr = X.structure_cost("X^T f", P[r, cols])
                charge(mul, add + int((Pd[r, dc] & pr).sum()), kind="chi X",
                       written=(36, 30 + 6 * bool(Pd[r, dc].any())))
                Pd[r, dc] |= pr
    return out, Pout
