"""The cluster transform kX_lambda(k) (seed 003, eq. 17) and the articulated-inertia congruence
(kX_lambda(k))^T I^a kX_lambda(k) of Algorithm 1, line 32, by its structure:

  - one nonzero block per block row (eq. 17): block (Lambda(i), Lambda(j)) of the result is the
    sum of X_i^T I^a_ij X_j over the bodies i, j with those output blocks; only the upper block
    triangle is formed (X_j^T I^a_ji X_i is the transpose of the (i, j) term);
  - bodies whose transforms start with the same tree transform X_T (a rotor on its link's joint
    frame, a belt's rotors: eq. 17 written with the parent cluster's body transforms), X_i =
    Y_i X_T, share one outer congruence: X_T^T (sum_ij Y_i^T I^a_ij Y_j) X_T, with Y_i the joint's
    rotation (by double angles where it is about a coordinate axis, axis_rotation.py) or, for a
    body below it in the cluster, iX_lambda(i) Y_lambda(i).

Computed in the compact forms (spatial.inertia_to_parent, rows_times_transform); charged from
the patterns (transform_costs.TransformStructure) of every factor.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from ...opcount import charge, counting, suspended
from ...spatial import Transform, inertia_to_parent, rows_times_transform
from ...transform_costs import GENERAL, TransformStructure, model_structures, rotation_axis
from ._cluster_patterns import composed_structure


@dataclass
class ClusterTransform:
    """kX_lambda(k) for one batch of states."""

    X: list                 # per body: iX_Lambda(i) (Transform)
    out_blocks: np.ndarray  # per body: block of Lambda(i) in the parent cluster (-1: world)
    groups: tuple           # tuples of bodies (local indices) sharing their X_T, >= 2 each
    Y: dict                 # body -> Y_i (Transform) for the grouped bodies
    XT: list                # per group: X_T (Transform)


def batched(X):
    """The same transform with a broadcast axis for the columns of a matrix."""
    return Transform(X.E[:, None], X.r[:, None], X.structure)


_GROUPS = weakref.WeakKeyDictionary()


def shared_tree_groups(cm):
    """Per cluster: (groups, root of each body): bodies whose in-cluster root has the same
    joint placement (X_T) and that share their output block."""
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


def cluster_transform(cm, k, q, Xup, Xo):
    """ClusterTransform of cluster k at configurations q (B, nq), joint transforms Xup and the
    bodies' iX_Lambda(i) Xo."""
    model, c = cm.model, cm.clusters[k]
    groups, roots = shared_tree_groups(cm)[k]
    structures = model_structures(model)
    Y, XT = {}, []
    for g in groups:
        for li in g:                             # Y of each member, its root's joint first
            chain = [li]
            while chain[-1] != roots[li]:
                chain.append(cm.local_parents[k][chain[-1]])
            for lj in reversed(chain):
                if lj in Y:
                    continue
                i = c.bodies[lj]
                if lj == roots[li]:
                    R, p = model.joints[i].placement(q[:, model.q_slice(i)])
                    Y[lj] = Transform.from_placement(R, p)
                    Y[lj].structure = TransformStructure((structures[i].factors[1],), rotation_axis(model.joints[i]))
                else:
                    Y[lj] = Xup[i].compose(Y[cm.local_parents[k][lj]])
                    Y[lj].structure = composed_structure(Xup[i], Y[cm.local_parents[k][lj]])
        r = c.bodies[roots[g[0]]]
        T = np.asarray(model.joint_placements[r])
        XT.append(Transform(np.broadcast_to(T[:3, :3].T, (q.shape[0], 3, 3)), np.broadcast_to(T[:3, 3], (q.shape[0], 3)),
                            TransformStructure((structures[r].factors[0],))))
    return ClusterTransform(Xo, cm.output_blocks[k], groups, Y, XT)


def _pair(Xa, M, Xb):
    """Xa^T M Xb (B, 6, 6) in compact form: the rows of M by Xb, then Xa^T on the columns."""
    W = rows_times_transform(Xb, M)
    return np.swapaxes(batched(Xa).transpose_apply_force(np.swapaxes(W, 1, 2)), 1, 2)


def cluster_congruence(ct, Ia, n_parent, pattern=None):
    """(kX_lambda(k))^T Ia kX_lambda(k) (module doc): (B, 6 n_b, 6 n_b) -> (B, 6 n_p, 6 n_p) and,
    with `pattern` (Ia's, when counting), the result's pattern."""
    B, nb = Ia.shape[0], len(ct.X)
    blk = [slice(6 * li, 6 * li + 6) for li in range(max(nb, n_parent))]
    grouped = {li: g for g, members in enumerate(ct.groups) for li in members}
    out = np.zeros((B, 6 * n_parent, 6 * n_parent))
    with suspended():                               # charged below, from the patterns
        for g, members in enumerate(ct.groups):     # X_T^T (sum Y_i^T Ia_ij Y_j) X_T
            M = np.zeros((B, 6, 6))
            for n, li in enumerate(members):
                M += inertia_to_parent(ct.Y[li], Ia[:, blk[li], blk[li]], by_axis=True)
                for lj in members[n + 1:]:
                    T = _pair(ct.Y[li], Ia[:, blk[li], blk[lj]], ct.Y[lj])
                    M += T + np.swapaxes(T, 1, 2)
            a = ct.out_blocks[members[0]]
            out[:, blk[a], blk[a]] += inertia_to_parent(ct.XT[g], M)
        for li, (X, a) in enumerate(zip(ct.X, ct.out_blocks)):
            if li not in grouped:
                out[:, blk[a], blk[a]] += inertia_to_parent(X, Ia[:, blk[li], blk[li]])
            for lj in range(li + 1, nb):
                if li in grouped and grouped.get(lj) == grouped[li]:
                    continue
                T = _pair(X, Ia[:, blk[li], blk[lj]], ct.X[lj])
                b = ct.out_blocks[lj]
                out[:, blk[a], blk[b]] += T
                out[:, blk[b], blk[a]] += np.swapaxes(T, 1, 2)
    if not counting():
        return out, None
    mul, add, P = congruence_cost(ct, n_parent, np.ones(Ia.shape[1:], bool) if pattern is None else pattern)
    charge(mul, add, kind="X^T I X", written=(nb * 216 * (nb + n_parent), nb * 180 * (nb + n_parent)))
    return out, P


def _st(X):
    return TransformStructure((GENERAL,)) if X.structure is None else X.structure


def _transposed_apply(st, M):
    """(mul, add, pattern) of st's X^T applied to each column of a 6x6 pattern M."""
    mul = add = 0
    out = np.zeros((6, 6), bool)
    for c in range(6):
        if M[:, c].any():
            m, a, out[:, c] = st.apply_cost("X^T f", M[:, c])
            mul, add = mul + m, add + a
    return mul, add, out


def _pair_cost(st_a, P, st_b):
    """(mul, add, pattern) of _pair: the rows of P by X_b (X^T f each), X_a^T on the columns."""
    m1, a1, W = _transposed_apply(st_b, P.T)        # (P X_b)^T
    m2, a2, T = _transposed_apply(st_a, W.T)
    return m1 + m2, a1 + a2, T


UPPER = np.triu(np.ones((6, 6), bool))


def congruence_cost(ct, n_parent, P):
    """(mul, add, pattern) of cluster_congruence for Ia's pattern P (6 n_b square): the terms'
    congruences and pair products, and the additions of the upper triangles they are summed in."""
    nb = len(ct.X)
    blk = [slice(6 * li, 6 * li + 6) for li in range(max(nb, n_parent))]
    grouped = {li: g for g, members in enumerate(ct.groups) for li in members}
    out = np.zeros((6 * n_parent, 6 * n_parent), bool)
    mul = add = 0

    def accumulate(a, b, T):                       # T into block (a, b) of the upper triangle
        nonlocal add
        if a == b:
            T = T & UPPER
        elif a > b:
            a, b, T = b, a, T.T
        add += int((out[blk[a], blk[b]] & T).sum())
        out[blk[a], blk[b]] |= T

    for g, members in enumerate(ct.groups):
        M = np.zeros((6, 6), bool)
        for n, li in enumerate(members):
            terms = [_st(ct.Y[li]).congruence_cost(P[blk[li], blk[li]], by_axis=True)]
            for lj in members[n + 1:]:
                dm, da, T = _pair_cost(_st(ct.Y[li]), P[blk[li], blk[lj]], _st(ct.Y[lj]))
                terms.append((dm, da + int((T & T.T & UPPER).sum()), T | T.T))
            for dm, da, T in terms:
                mul, add = mul + dm, add + da + int((M & T & UPPER).sum())
                M |= T
        dm, da, T = _st(ct.XT[g]).congruence_cost(M)
        mul, add = mul + dm, add + da
        accumulate(ct.out_blocks[members[0]], ct.out_blocks[members[0]], T)
    for li, a in enumerate(ct.out_blocks):
        if li not in grouped and P[blk[li], blk[li]].any():
            dm, da, T = _st(ct.X[li]).congruence_cost(P[blk[li], blk[li]])
            mul, add = mul + dm, add + da
            accumulate(a, a, T)
        for lj in range(li + 1, nb):
            if (li in grouped and grouped.get(lj) == grouped[li]) or not P[blk[li], blk[lj]].any():
                continue
            dm, da, T = _pair_cost(_st(ct.X[li]), P[blk[li], blk[lj]], _st(ct.X[lj]))
            mul, add = mul + dm, add + da
            b = ct.out_blocks[lj]
            if a == b:
                add += int((T & T.T & UPPER).sum())
                T = T | T.T
            accumulate(a, b, T)
    return mul, add, out | out.T
