"""PV-OSIM: the Delassus matrix Lambda^-1 = J M^-1 J^T by Popov-Vereshchagin's two sweeps.

Seed 000, Algorithm 1 (Sathya et al.), in body-local coordinates: K^A_i stacks the constraint-space
motion propagators (CEMPs) of the end-effectors supported by link i (rows in link-i coordinates),
L^A_i is their inverse inertia with link i grounded; Lambda^-1 = L^A_0 (eq. 15). Cost
O(n + m^2 d). Preconditions: every articulated pivot D_i invertible (else SingularModelError);
contacts on movable bodies (the dispatcher sparsedyn.delassus drops world-welded ones).
"""
from __future__ import annotations

import numpy as np

from ..model.model import WORLD
from ..opcount import counting
from ._osim_common import Pivot, initial_inertias, rows_pattern, stacked_pattern


def pv_osim_sweeps(model, q, Xup, rc):
    """(B, m, m) Delassus matrix for the resolved contacts rc (contacts.resolve_contacts)."""
    B = q.shape[0]
    IA = initial_inertias(model, B)                                # line 2: H^A_i = H_i
    KA = [[] for _ in range(model.nbodies)]                        # blocks of K^A_i, in order
    KP = [[] for _ in range(model.nbodies)]                        # their patterns (paper count)
    LA = [[] for _ in range(model.nbodies + 1)]                    # diagonal blocks of L^A_i
    LP = [[] for _ in range(model.nbodies + 1)]                    # their patterns (None: zero)
    order = [[] for _ in range(model.nbodies + 1)]                 # contacts behind each row block
    for k in range(len(rc.bodies) - 1, -1, -1):                    # line 3: i in E_r
        b = rc.bodies[k]
        KA[b].append(np.broadcast_to(rc.K[k], (B,) + rc.K[k].shape))   # line 4: K^A_p = [K^A_p; K_i]
        KP[b].append(rows_pattern(rc.K[k]))
        LA[b].append(np.zeros((B, rc.K[k].shape[0], rc.K[k].shape[0])))  # line 5: blkdiag(L, 0)
        LP[b].append(None)
        order[b].append([k])
    for i in range(model.nbodies - 1, -1, -1):                     # line 6: i in S_r
        piv = Pivot(model, IA[i], i)                        # line 7: D_i, Om_i = S D^-1 S^T
        p = int(model.parents[i])
        if p != WORLD:                                             # lines 8-10
            IA[p] += piv.articulated_to_parent(Xup[i], IA[i])
        if not KA[i]:                                              # line 11: ES(i) empty
            continue
        K = np.concatenate(KA[i], axis=1) if len(KA[i]) > 1 else KA[i][0]
        L = _block_diagonal(LA[i])
        pat = stacked_pattern(KP[i], KA[i])
        KS, KS_Dinv = piv.project_rows(K, pat)
        L, Lpat = piv.rank_update(L, KS, KS_Dinv, piv.RS_pattern(pat), _block_pattern(LP[i], LA[i]))
        slot = p if p != WORLD else model.nbodies                  # line 14: L^A_i + K^A Om_i K^A^T
        if p != WORLD:                                             # line 13: K^A_i lambda(i)P_i^T
            rows, rows_pat = piv.propagate_rows(Xup[i], K, KS_Dinv, pat)
            KA[p].append(rows)
            KP[p].append(rows_pat)
        LA[slot].append(L)                                         # line 14: blkdiag(L^A_p, ...)
        LP[slot].append(Lpat)
        order[slot].append([k for blk in order[i] for k in blk])
    rows = [k for blk in order[model.nbodies] for k in blk]        # line 15: Lambda^-1 = L^A_0
    L0 = _block_diagonal(LA[model.nbodies])
    perm = np.concatenate([np.arange(rc.offsets[k], rc.offsets[k + 1]) for k in rows])
    out = np.empty_like(L0)
    out[:, perm[:, None], perm[None, :]] = L0                      # back to the contacts' order
    return out


def _block_pattern(patterns, blocks):
    """Structural pattern of blkdiag(blocks) (paper count: the zero blocks between end-effector
    groups take no additions); None when not counting."""
    if not counting():
        return None
    P = np.zeros((sum(b.shape[1] for b in blocks),) * 2, bool)
    o = 0
    for pat, b in zip(patterns, blocks):
        r = b.shape[1]
        if pat is not None:
            P[o:o + r, o:o + r] = pat
        o += r
    return P


def _block_diagonal(blocks):
    if len(blocks) == 1:
        return blocks[0]
    B = blocks[0].shape[0]
    n = sum(b.shape[1] for b in blocks)
    out = np.zeros((B, n, n))
    o = 0
    for b in blocks:
        r = b.shape[1]
        out[:, o:o + r, o:o + r] = b
        o += r
    return out
