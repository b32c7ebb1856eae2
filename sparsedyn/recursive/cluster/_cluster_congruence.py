"""The articulated-inertia congruence (kX_lambda(k))^T I^a kX_lambda(k) of seed 003's
Algorithm 1, line 32, by the structure of the cluster transform (eq. 17):

  - one nonzero block per block row: block (Lambda(i), Lambda(j)) of the result is the sum of
    X_i^T I^a_ij X_j over the bodies i, j with those output blocks; only the upper block triangle
    is formed (X_j^T I^a_ji X_i is the transpose of the (i, j) term);
  - bodies whose transforms start with the same tree transform X_T (a rotor on its link's joint
    frame, a belt's rotors, a body below them in the cluster: eq. 17 written with the parent
    cluster's body transforms), X_i = Y_i X_T, share one outer congruence
    X_T^T (sum_ij Y_i^T I^a_ij Y_j) X_T, with Y_i the root joint's rotation (by double angles
    where it is about a coordinate axis, axis_rotation.py) or iX_lambda(i) Y_lambda(i) below it.

Computed in the compact forms (spatial.inertia_to_parent, rows_times_transform); charged from
the patterns (transform_costs.TransformStructure) of every factor.
"""
from __future__ import annotations

import numpy as np

from ...opcount import charge, counting, suspended
from ...spatial import Transform, inertia_to_parent, rows_times_transform
from ...transform_costs import GENERAL, TransformStructure, model_structures, rotation_axis
from ._cluster_patterns import composed_structure
from ._cluster_transform import batched, shared_tree_groups


def _factors(ct):
    """(groups, Y, X_T per group) of cluster ct.k: Y_i for every grouped body."""
    cm, k, q = ct.cm, ct.k, ct.q
    model, c = cm.model, cm.clusters[k]
    groups, roots = shared_tree_groups(cm)[k]
    structures = model_structures(model)
    Y, XT = {}, []
    for g in groups:
        for li in g:                             # Y of each member, its root's joint first
            chain = [li]
            while chain[-1] != roots[li]:
                chain.append(ct.lp[chain[-1]])
            for lj in reversed(chain):
                if lj in Y:
                    continue
                i = c.bodies[lj]
                if lj == roots[li]:
                    R, p = model.joints[i].placement(q[:, model.q_slice(i)])
                    Y[lj] = Transform.from_placement(R, p)
                    Y[lj].structure = TransformStructure((structures[i].factors[1],), rotation_axis(model.joints[i]))
                else:
                    Y[lj] = ct.Xup[lj].compose(Y[ct.lp[lj]])
                    Y[lj].structure = composed_structure(ct.Xup[lj], Y[ct.lp[lj]])
        r = c.bodies[roots[g[0]]]
        T = np.asarray(model.joint_placements[r])
        B = q.shape[0]
        XT.append(Transform(np.broadcast_to(T[:3, :3].T, (B, 3, 3)), np.broadcast_to(T[:3, 3], (B, 3)),
                            TransformStructure((structures[r].factors[0],))))
    return groups, Y, XT


def _pair(Xa, M, Xb):
    """Xa^T M Xb (B, 6, 6) in compact form for transforms given as factor sequences (X = the
    last ... the first, e.g. [Y_i, X_T]): the rows of M by Xb's factors, then Xa's transposes on
    the columns, first factor first."""
    for X in Xb:
        M = rows_times_transform(X, M)
    M = np.swapaxes(M, 1, 2)
    for X in Xa:
        M = batched(X).transpose_apply_force(M)
    return np.swapaxes(M, 1, 2)


def _sequences(ct, groups, Y, XT):
    """Per body, its iX_Lambda(i) as a factor sequence: [Y_i, X_T] if grouped, else [iX_lambda(i)]
    (an ungrouped body's parent is outside its cluster: shared_tree_groups)."""
    seq = [[X] for X in ct.Xup]
    for g, members in enumerate(groups):
        for li in members:
            seq[li] = [Y[li], XT[g]]
    assert all(len(s) == 2 or ct.lp[li] < 0 for li, s in enumerate(seq))
    return seq


def cluster_congruence(ct, Ia, n_parent, pattern=None):
    """(kX_lambda(k))^T Ia kX_lambda(k) (module doc): (B, 6 n_b, 6 n_b) -> (B, 6 n_p, 6 n_p) and,
    with `pattern` (Ia's, when counting), the result's pattern."""
    B, nb = Ia.shape[0], len(ct.Xup)
    blk = [slice(6 * li, 6 * li + 6) for li in range(max(nb, n_parent))]
    with suspended():                               # charged below, from the patterns
        groups, Y, XT = _factors(ct)
        grouped = {li: g for g, members in enumerate(groups) for li in members}
        seq = _sequences(ct, groups, Y, XT)
        out = np.zeros((B, 6 * n_parent, 6 * n_parent))
        for g, members in enumerate(groups):        # X_T^T (sum Y_i^T Ia_ij Y_j) X_T
            M = np.zeros((B, 6, 6))
            for n, li in enumerate(members):
                M += inertia_to_parent(Y[li], Ia[:, blk[li], blk[li]], by_axis=True)
                for lj in members[n + 1:]:
                    T = _pair([Y[li]], Ia[:, blk[li], blk[lj]], [Y[lj]])
                    M += T + np.swapaxes(T, 1, 2)
            a = ct.out_blocks[members[0]]
            out[:, blk[a], blk[a]] += inertia_to_parent(XT[g], M)
        for li, (X, a) in enumerate(zip(ct.Xup, ct.out_blocks)):
            if li not in grouped:
                out[:, blk[a], blk[a]] += inertia_to_parent(X, Ia[:, blk[li], blk[li]])
            for lj in range(li + 1, nb):
                if li in grouped and grouped.get(lj) == grouped[li]:
                    continue
                T = _pair(seq[li], Ia[:, blk[li], blk[lj]], seq[lj])
                b = ct.out_blocks[lj]
                out[:, blk[a], blk[b]] += T
                out[:, blk[b], blk[a]] += np.swapaxes(T, 1, 2)
    if not counting():
        return out, None
    mul, add, P = congruence_cost(ct, groups, Y, XT, n_parent, np.ones(Ia.shape[1:], bool) if pattern is None else pattern)
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


def _pair_cost(seq_a, P, seq_b):
    """(mul, add, pattern) of _pair: the rows of P by each factor of X_b (an X^T f each), then
    each factor of X_a transposed on the columns."""
    mul = add = 0
    W = P.T                                           # columns: the rows of P
    for X in seq_b:
        m, a, W = _transposed_apply(_st(X), W)
        mul, add = mul + m, add + a
    W = W.T
    for X in seq_a:
        m, a, W = _transposed_apply(_st(X), W)
        mul, add = mul + m, add + a
    return mul, add, W


UPPER = np.triu(np.ones((6, 6), bool))


def congruence_cost(ct, groups, Y, XT, n_parent, P):
    """(mul, add, pattern) of cluster_congruence for Ia's pattern P (6 n_b square) and the
    factors of _factors: the terms' congruences and pair products, and the additions of the
    upper triangles they are summed in."""
    nb = len(ct.Xup)
    blk = [slice(6 * li, 6 * li + 6) for li in range(max(nb, n_parent))]
    grouped = {li: g for g, members in enumerate(groups) for li in members}
    seq = _sequences(ct, groups, Y, XT)
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

    for g, members in enumerate(groups):
        M = np.zeros((6, 6), bool)
        for n, li in enumerate(members):
            terms = [_st(Y[li]).congruence_cost(P[blk[li], blk[li]], by_axis=True)]
            for lj in members[n + 1:]:
                dm, da, T = _pair_cost([Y[li]], P[blk[li], blk[lj]], [Y[lj]])
                terms.append((dm, da + int((T & T.T & UPPER).sum()), T | T.T))
            for dm, da, T in terms:
                mul, add = mul + dm, add + da + int((M & T & UPPER).sum())
                M |= T
        dm, da, T = _st(XT[g]).congruence_cost(M)
        mul, add = mul + dm, add + da
        accumulate(ct.out_blocks[members[0]], ct.out_blocks[members[0]], T)
    for li, a in enumerate(ct.out_blocks):
        if li not in grouped and P[blk[li], blk[li]].any():
            dm, da, T = _st(ct.Xup[li]).congruence_cost(P[blk[li], blk[li]])
            mul, add = mul + dm, add + da
            accumulate(a, a, T)
        for lj in range(li + 1, nb):
            if (li in grouped and grouped.get(lj) == grouped[li]) or not P[blk[li], blk[lj]].any():
                continue
            dm, da, T = _pair_cost(seq[li], P[blk[li], blk[lj]], seq[lj])
            mul, add = mul + dm, add + da
            b = ct.out_blocks[lj]
            if a == b:
                add += int((T & T.T & UPPER).sum())
                T = T | T.T
            accumulate(a, b, T)
    return mul, add, out | out.T
