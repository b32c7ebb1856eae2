"""The PV-OSIMr "program": seed 000, Algorithm 3 flattened into integer/float arrays for
sparsedyn.kernels.pv_osimr_numba, built once per (model, resolved contact set).

Everything q-independent is resolved here: per body the joint type code, the sparse motion
subspace S, the tree placement X_T and the spatial inertia H_i; per node of the branching set N a
storage slot and row count; the order of the forward sweep over N (eq. 18), the K chains (eq. 19)
and the assembly list (eq. 13). The topology itself (E, ES, N, A, D, cca) is pv_osimr_topology's,
not recomputed. Preconditions: the contacts' bodies are movable (sparsedyn.delassus drops
world-welded ones); every joint kind is one of JOINT_CODES.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..model.model import WORLD
from ..recursive._osim_common import inertia_scale
from ..recursive.aba import SINGULAR_TOLERANCE
from ..recursive.pv_osimr import pv_osimr_topology

#: joint type codes understood by the kernel (sparsedyn.model.joints kinds)
JOINT_CODES = {"revolute": 0, "prismatic": 1, "spherical": 2, "planar": 3, "free": 4}


class FlatProgram(NamedTuple):
    """What the kernel walks: arrays (C-contiguous; int64 indices, -1 for "none") and scalars
    only, so its numba type does not depend on the model and the kernel compiles once."""

    # bodies (Featherstone Table 4.1 joint models, eq. 4.29 tree placements)
    jtype: np.ndarray       # (nb,) JOINT_CODES
    parent: np.ndarray      # (nb,) parent body or -1
    qidx: np.ndarray        # (nb,) first q coordinate
    axis: np.ndarray        # (nb, 3) revolute/prismatic axis (zeros otherwise)
    XT_R: np.ndarray        # (nb, 3, 3) joint frame orientation in the parent body
    XT_p: np.ndarray        # (nb, 3) joint frame origin in the parent body
    inertia: np.ndarray     # (nb, 6, 6) H_i, angular-first, body frame
    nvj: np.ndarray         # (nb,) joint DoFs n_i
    S_idx: np.ndarray       # (nb, 6, 3) column a of S_i has entries S_val[i, a, t] at rows
    S_val: np.ndarray       # (nb, 6, 3)  S_idx[i, a, t], t < S_nnz[i, a]
    S_nnz: np.ndarray       # (nb, 6)
    armature: np.ndarray    # (nb, 6) rotor inertia of joint i's coordinates, added to D_i's diagonal
    half: np.ndarray        # (nb,) 1-DoF joints: S_i = s on rows half..half+2 (0 revolute, 3 prismatic)
    # backward sweep (Algorithm 3 lines 5-15)
    d_slot: np.ndarray      # (nb,) slot of D(i) in N storage, -1 if ES(i) is empty
    branching: np.ndarray   # (nb,) 1 if link i is in N
    # storage over N (links in N, then end-effectors)
    nslots: int
    rows: np.ndarray        # (nslots,) rows of R[d] = A(d)P_d^T: 6 (link) or m_e (end-effector)
    a_slot: np.ndarray      # (nslots,) slot of A(d), -1 for WORLD; slots ascend in node order
    pair_rows: np.ndarray   # (npairs,) rows m_e of K[(c, e)]
    ee_slot: np.ndarray     # (ne,) slot of end-effector k
    K0: np.ndarray          # (ne, 6, 6) K_k (m_k x 6 used), the contact's constant selection
    # eq. (19): K[dst] = K[src] R[r_slot] (src -1: K[dst] = R[ee_slot[ee]]); dst (c, e) pairs
    kc_dst: np.ndarray
    kc_src: np.ndarray
    kc_rslot: np.ndarray
    kc_ee: np.ndarray
    npairs: int
    # eq. (13): W[w] = Om0[w_slot] K[w_pair]^T once per (c, e2); blocks Lambda[k1, k2] = K[p1] W[w]
    w_slot: np.ndarray
    w_pair: np.ndarray
    blk_k1: np.ndarray
    blk_k2: np.ndarray
    blk_p1: np.ndarray
    blk_w: np.ndarray
    offsets: np.ndarray     # (ne + 1,) contact row offsets in Lambda
    tol: float              # a pivot counts as singular at <= tol (aba.check_articulated_pivots)


@dataclass(frozen=True)
class PvOsimrProgram:
    flat: FlatProgram
    m: int                  # rows of Lambda^-1
    nq: int


def _sparse_subspace(joint):
    """S_i (6 x n, angular-first) as at most 3 non-zeros per column: revolute/prismatic have
    one zero half, the multi-DoF joints are column selections (model/joints.py)."""
    S = joint.S
    n = S.shape[1]
    idx = np.zeros((6, 3), np.int64)
    val = np.zeros((6, 3))
    nnz = np.zeros(6, np.int64)
    for a in range(n):
        rows = np.flatnonzero(S[:, a])
        if len(rows) > 3 or (len(rows) and rows.max() // 3 != rows.min() // 3):
            raise NotImplementedError(f"joint {joint.name!r}: motion subspace column {a} mixes "
                                      "angular and linear parts")
        nnz[a] = len(rows)
        idx[a, :len(rows)] = rows
        val[a, :len(rows)] = S[rows, a]
    return idx, val, nnz


def _armature_rows(model):
    out = np.zeros((model.nbodies, 6))
    for i, j in enumerate(model.joints):
        out[i, :j.nv] = model.armature[model.v_slice(i)]
    return out


def build_program(model, rc):
    """The program of Algorithm 3 for `model` and resolved contacts `rc` (contacts.resolve_contacts)."""
    top = pv_osimr_topology(model.parents, rc.bodies)
    nb, ne = model.nbodies, len(rc.bodies)
    jtype = np.empty(nb, np.int64)
    axis = np.zeros((nb, 3))
    S_idx = np.zeros((nb, 6, 3), np.int64)
    S_val = np.zeros((nb, 6, 3))
    S_nnz = np.zeros((nb, 6), np.int64)
    for i, j in enumerate(model.joints):
        if j.kind not in JOINT_CODES:
            raise NotImplementedError(f"joint {j.name!r}: kind {j.kind!r} has no compiled model")
        jtype[i] = JOINT_CODES[j.kind]
        if j.axis is not None:
            axis[i] = j.axis
        S_idx[i], S_val[i], S_nnz[i] = _sparse_subspace(j)
    nodes = list(top.branching)                         # ascending: A(d) < d, links before EEs
    slot = {d: s for s, d in enumerate(nodes)}
    rows = np.array([6 if d < top.nlinks else rc.K[d - top.nlinks].shape[0] for d in nodes], np.int64)
    a_slot = np.array([slot.get(top.A[d], -1) for d in nodes], np.int64)
    K0 = np.zeros((ne, 6, 6))
    for k, K in enumerate(rc.K):
        K0[k, :K.shape[0]] = K
    pair = {}                                           # (c, e) -> K storage index, eq. (19)
    kc = []
    for k, e in enumerate(top.end_effectors):
        c, src, prev = top.A[e], -1, -1
        while c != WORLD:                               # lines 20-22: walk A up to the root
            pair[(c, e)] = len(pair)
            rslot = slot[e] if src < 0 else slot[prev]
            kc.append((pair[(c, e)], src, rslot, k))
            src, prev, c = pair[(c, e)], c, top.A[c]
    W, wl, blocks = {}, [], []
    E = top.end_effectors
    for k1, e1 in enumerate(E):                         # lines 23-26, eq. (13)
        for k2 in range(k1 + 1, ne):
            c = top.cca(e1, E[k2])
            if c == WORLD:                              # zero block: no common moving ancestor
                continue
            if (c, E[k2]) not in W:
                W[(c, E[k2])] = len(wl)
                wl.append((slot[c], pair[(c, E[k2])]))
            blocks.append((k1, k2, pair[(c, e1)], W[(c, E[k2])]))
    kc = np.array(kc, np.int64).reshape(-1, 4)
    wl = np.array(wl, np.int64).reshape(-1, 2)
    blocks = np.array(blocks, np.int64).reshape(-1, 4)
    i64 = lambda a: np.ascontiguousarray(a, dtype=np.int64)
    flat = FlatProgram(
        jtype=jtype, parent=i64(model.parents), qidx=i64(model.q_index), axis=axis,
        XT_R=np.ascontiguousarray(model.joint_placements[:, :3, :3]),
        XT_p=np.ascontiguousarray(model.joint_placements[:, :3, 3]),
        inertia=np.ascontiguousarray(model.inertias), nvj=i64([j.nv for j in model.joints]),
        S_idx=S_idx, S_val=S_val, S_nnz=S_nnz, armature=_armature_rows(model),
        half=i64([3 if j.nv == 1 and not j.S[:3].any() else 0 for j in model.joints]),
        d_slot=i64([-1 if top.D[i] is None else slot[top.D[i]] for i in range(nb)]),
        branching=i64([i in slot for i in range(nb)]),
        nslots=len(nodes), rows=rows, a_slot=a_slot,
        ee_slot=i64([slot[e] for e in E]), K0=K0,
        kc_dst=i64(kc[:, 0]), kc_src=i64(kc[:, 1]), kc_rslot=i64(kc[:, 2]), kc_ee=i64(kc[:, 3]),
        pair_rows=i64([rc.K[k].shape[0] for k in _pair_ee(kc, len(pair))]),
        npairs=len(pair), w_slot=i64(wl[:, 0]), w_pair=i64(wl[:, 1]),
        blk_k1=i64(blocks[:, 0]), blk_k2=i64(blocks[:, 1]), blk_p1=i64(blocks[:, 2]),
        blk_w=i64(blocks[:, 3]), offsets=i64(rc.offsets),
        tol=SINGULAR_TOLERANCE * float(inertia_scale(model)))
    return PvOsimrProgram(flat, int(rc.m), int(model.nq))


def _pair_ee(kc, npairs):
    ee = np.empty(npairs, np.int64)
    ee[kc[:, 0]] = kc[:, 3]
    return ee
