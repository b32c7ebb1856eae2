"""Offline program of the compiled mass matrix (kernels/crba_numba.py): the constant description
that lets one kernel compute M(q) of any tree, and Featherstone's L^T L factor of it, for a batch
of configurations.

The kernel runs the composite-rigid-body algorithm (Featherstone, Table 6.2) with every quantity
expressed in the frame of the body's ROOT (the first body of its subtree below the world), as
Pinocchio's world-convention crba does with the world frame: composite inertias then add up
without transforms, and M_kj = J_j^T (I^c_i J_k) is a 6-vector dot product for every DoF j that
supports DoF k (J_k: the motion of DoF k, in the root frame). The root's own frame, not the
world's, keeps every position robot-sized (a free-flyer far from the origin loses no digits) and
leaves the root body's placement out of the work (M does not depend on it).

Per body it records the joint transform data (ir.assembly.JointTransformArrays), the spatial
inertia as 10 numbers (mass, h = m c, I about the body origin as xx, xy, xz, yy, yz, zz) and S as
a sparse list. The nonzeros of M are the pairs (k, j) with j = k or j an ancestor of k in the
expanded parent array lambda (Featherstone Sec. 6.5; model.expanded_parents()): slot e of a
compact per-state vector holds pair (pair_row[e], pair_col[e]), row k's pairs in
pair_ptr[k]..pair_ptr[k + 1] with its diagonal last; slot n_pairs is a constant zero, so that
full_slot (nv, nv) (M, symmetric) and lower_slot (the factor L, lower) gather dense matrices.

The L^T L program (Featherstone Table 6.3, tips first, no fill-in in this pattern) lists for
each DoF k = nv-1..0 its pivot slot, the slots (k, i) of its ancestors i and the updates
H_ij -= H_ki H_kj as (dest, slot of (k, i), slot of (k, j)) triples.

Preconditions: a tree with parent(i) < i (Model); constant S per joint; body inertias of the
rigid-body form [[Ibar, hx], [hx^T, m 1]] (spatial.spatial_inertia).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .assembly import joint_transform_arrays

#: the symmetric 3x3 entries (a, b) in the order the 10 inertia numbers store them (after m, h)
SYM3 = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))


class MassMatrixArrays(NamedTuple):
    """Per body: inertia (N, 10) = (m, h, Ibar sym); per DoF: its body dof_body, S's nonzeros
    s_ptr / s_row / s_val (rows angular-first); the pairs (pair_ptr, pair_col) and the dense
    gathers full_slot / lower_slot (nv * nv,) into the compact vector (see the module doc).
    A pair whose j is a DoF of a root body with one nonzero in S (a free-flyer's, a fixed base's
    first joint about a frame axis) has J_j = S_j constant: M_kj = pair_val * F_k[pair_row]
    (pair_row -1: the full dot product). armature (nv,): added to each diagonal (Model.armature)."""
    inertia: np.ndarray
    body_dofs: np.ndarray
    s_ptr: np.ndarray
    s_row: np.ndarray
    s_val: np.ndarray
    pair_ptr: np.ndarray
    pair_col: np.ndarray
    pair_row: np.ndarray
    pair_val: np.ndarray
    full_slot: np.ndarray
    lower_slot: np.ndarray
    armature: np.ndarray


class FactorArrays(NamedTuple):
    """The L^T L program (Table 6.3): DoFs k in `order` (tips first), pivot slot piv[k], the
    slots anc_slot[anc_ptr[k]:anc_ptr[k + 1]] of (k, i), i in anc(k), and the updates
    upd_*[upd_ptr[k]:upd_ptr[k + 1]]: Mc[upd_dest] -= Mc[upd_a] Mc[upd_b]."""
    order: np.ndarray
    piv: np.ndarray
    anc_ptr: np.ndarray
    anc_slot: np.ndarray
    upd_ptr: np.ndarray
    upd_dest: np.ndarray
    upd_a: np.ndarray
    upd_b: np.ndarray


def _inertia_numbers(model):
    out = np.zeros((model.nbodies, 10))
    for i, I in enumerate(model.inertias):
        m, hx = I[3, 3], I[:3, 3:]
        if not (np.allclose(I[3:, 3:], m * np.eye(3), rtol=0, atol=1e-12 * max(1.0, m))
                and np.allclose(hx, -hx.T, rtol=0, atol=1e-12 * max(1.0, np.abs(hx).max()))):
            raise NotImplementedError(f"body {model.link_names[i]!r}: the compiled mass matrix "
                                      f"takes rigid-body inertias (spatial.spatial_inertia form)")
        out[i, 0] = m
        out[i, 1:4] = hx[2, 1], hx[0, 2], hx[1, 0]          # hx = skew(h), h = m c
        out[i, 4:] = [I[a, b] for a, b in SYM3]             # Ibar about the body origin
    return out


class MassMatrixProgram:
    """The constant arrays of one model's compiled CRBA and L^T L (see the module doc)."""

    def __init__(self, model):
        self.nv, self.nq, self.nbodies = model.nv, model.nq, model.nbodies
        self.joints = joint_transform_arrays(model)
        nv = model.nv
        lam = model.expanded_parents()
        anc = []                                             # anc(k), ascending
        for k in range(nv):
            a, j = [], int(lam[k])
            while j >= 0:
                a.append(j)
                j = int(lam[j])
            anc.append(a[::-1])
        pair_ptr, pair_col = [0], []
        for k in range(nv):                                  # row k: ancestors, then the diagonal
            pair_col += anc[k] + [k]
            pair_ptr.append(len(pair_col))
        self.n_pairs = len(pair_col)
        slot = {}
        for k in range(nv):
            for e in range(pair_ptr[k], pair_ptr[k + 1]):
                slot[(k, pair_col[e])] = e
        zero = self.n_pairs
        full = np.full((nv, nv), zero, dtype=np.int64)
        lower = np.full((nv, nv), zero, dtype=np.int64)
        for (k, j), e in slot.items():
            full[k, j] = full[j, k] = lower[k, j] = e
        body_dofs = np.zeros((model.nbodies, 2), dtype=np.int64)   # first DoF, count
        S_cols = []
        for i, joint in enumerate(model.joints):
            body_dofs[i] = model.v_index[i], joint.nv
            S_cols += [joint.S[:, c] for c in range(joint.nv)]
        s_ptr, s_row, s_val = [0], [], []
        for col in S_cols:
            nz = np.flatnonzero(col)
            s_row += nz.tolist()
            s_val += col[nz].tolist()
            s_ptr.append(len(s_row))
        pair_row = np.full(self.n_pairs, -1, dtype=np.int64)
        pair_val = np.zeros(self.n_pairs)
        root_dof = np.repeat(np.asarray(model.parents) < 0, [j.nv for j in model.joints])
        for e, j in enumerate(pair_col):
            nz = np.flatnonzero(S_cols[j])
            if root_dof[j] and len(nz) == 1:
                pair_row[e], pair_val[e] = nz[0], S_cols[j][nz[0]]
        ints = (lambda x: np.asarray(x, dtype=np.int64))
        self.arrays = MassMatrixArrays(
            _inertia_numbers(model), body_dofs, ints(s_ptr), ints(s_row),
            np.asarray(s_val, dtype=float), ints(pair_ptr), ints(pair_col), pair_row, pair_val,
            full.ravel(), lower.ravel(), np.array(model.armature, dtype=float))
        # L^T L (Table 6.3): k = n..1; H_kk = sqrt(H_kk); H_ki /= H_kk; H_ij -= H_ki H_kj
        anc_ptr, anc_slot, upd_ptr, dest, fa, fb = [0], [], [0], [], [], []
        order = list(range(nv - 1, -1, -1))
        for k in range(nv):
            anc_slot += [slot[(k, i)] for i in anc[k]]
            anc_ptr.append(len(anc_slot))
            for x, i in enumerate(anc[k]):
                for j in anc[k][:x + 1]:                     # j in anc(i) U {i}, j <= i
                    dest.append(slot[(i, j)])
                    fa.append(slot[(k, i)])
                    fb.append(slot[(k, j)])
            upd_ptr.append(len(dest))
        self.factor_arrays = FactorArrays(
            ints(order), ints([slot[(k, k)] for k in range(nv)]), ints(anc_ptr), ints(anc_slot),
            ints(upd_ptr), ints(dest), ints(fa), ints(fb))
        self.dof_pairs = (np.repeat(np.arange(nv), np.diff(pair_ptr)), np.asarray(pair_col))
        # output gathers (2, G): out[b, dest] = compact[slot] for (dest, slot) in the columns;
        # "every" entry (zeros from the zero slot) for a caller's buffer, "nonzero" entries
        # alone for a freshly zeroed array, "packed" for the compact layout itself
        every = (lambda slots: np.stack((np.arange(slots.size), slots)))
        nonzero = (lambda slots: every(slots)[:, slots != zero])
        self.gathers = {("M", "every"): every(full.ravel()), ("L", "every"): every(lower.ravel()),
                        ("M", "nonzero"): nonzero(full.ravel()),
                        ("L", "nonzero"): nonzero(lower.ravel()),
                        ("M", "packed"): every(np.arange(self.n_pairs, dtype=np.int64)),
                        ("L", "packed"): every(np.arange(self.n_pairs, dtype=np.int64))}
