"""EFPA: the Delassus matrix Lambda^-1 = J M^-1 J^T by extended force propagators, O(n + md + m^2).

Seed 002 (Wensing, Featherstone, Orin), Table I, in body-local coordinates, X_i = iX_lambda(i):

    K_i = S_i D_i^-1 S_i^T,  L_i = 1 - K_i I^A_i                         (inward sweep)
    kX_lambda(i) = kX_i L_i X_i  for k in ES(i),  kX_lambda(k) = K_k       (extended propagators)
    Lam_ik = L_i X_i Lam_lambda(i)k + K_i kX_i^T,  Lam_0k = 0             (outward sweep, 6 x m_k)
    Lam_k1k2 = k1X_i Lam_ik2 for (k1 < k2) in GCA(i);  Lam_kk = kX_lambda(k) Lam_lambda(k)k

Pairs whose greatest common ancestor is the fixed base get zero blocks. kX_i are row stacks
(m_k x 6) updated as in _osim_common.Pivot.propagate_rows (L_i = 1 - S D^-1 U^T), their
structural patterns tracked for the paper count (the appendix: kX_1^T "has a zero row" when k is
supported by the privileged child).
Preconditions: every articulated pivot invertible (else SingularModelError); contacts on movable
bodies (sparsedyn.delassus drops world-welded ones).
"""
from __future__ import annotations

import numpy as np

from ..model.model import WORLD
from ..opcount import charge, charge_matmul
from ..spatial_costs import product_cost
from ._osim_common import Pivot, initial_inertias, rows_pattern, transform_times_columns
from .pv_osimr import _topology


def efpa_sweeps(model, q, Xup, rc):
    """(B, m, m) Delassus matrix for the resolved contacts rc (contacts.resolve_contacts)."""
    B = q.shape[0]
    top = _topology(model, rc.bodies)                              # ES(i), ancest(k1, k2)
    ne = len(rc.bodies)
    IA = initial_inertias(model, B)                                # init: I^A_i = I_i
    chi = [{} for _ in range(ne)]                                  # chi[k][i] = kX_i (B, m_k, 6)
    for k, b in enumerate(rc.bodies):                              # kX_p(k) = kX_p(k) (= K_k)
        chi[k][b] = np.broadcast_to(rc.K[k], (B,) + rc.K[k].shape)
    Kpat = {(k, b): rows_pattern(rc.K[k]) for k, b in enumerate(rc.bodies)}   # chi's patterns
    pivots = [None] * model.nbodies
    ES = [sorted(e - top.nlinks for e in top.supported[i]) for i in range(model.nbodies)]
    for i in range(model.nbodies - 1, -1, -1):                     # inward, i = N..1
        piv = pivots[i] = Pivot(model, IA[i], i)            # K_i = S D^-1 S^T, L_i
        p = int(model.parents[i])
        if p == WORLD:
            continue
        IA[p] += piv.articulated_to_parent(Xup[i], IA[i])          # I^A_p += X^T L^T I^A X
        for k in ES[i]:                                            # kX_p(i) = kX_i L_i X_i
            _, RS_Dinv = piv.project_rows(chi[k][i], Kpat.get((k, i)))
            chi[k][p], Kpat[(k, p)] = piv.propagate_rows(Xup[i], chi[k][i], RS_Dinv, Kpat.get((k, i)))
    gca = {}                                                       # GCA(i) = {(k1<k2): ancest = i}
    for k1 in range(ne):
        for k2 in range(k1 + 1, ne):
            c = top.cca(top.end_effectors[k1], top.end_effectors[k2])
            if c != WORLD:
                gca.setdefault(c, []).append((k1, k2))
    out = np.zeros((B, rc.m, rc.m))
    Lam = [{} for _ in range(ne)]                                  # Lam[k][i] = Lam_ik (B, 6, m_k)
    for i in range(model.nbodies):                                 # outward, i = 1..N
        piv, p = pivots[i], int(model.parents[i])
        for k in ES[i]:
            KiT = _K_times_rows_T(piv, chi[k][i], Kpat.get((k, i)))   # K_i kX_i^T
            if p == WORLD:                                         # Lam_0k = 0
                Lam[k][i] = KiT
            else:
                Lam[k][i] = _L_times(piv, transform_times_columns(Xup[i], Lam[k][p])) + KiT
                rows = int(np.any(piv.S != 0, axis=1).sum())       # K_i X^T lives on S's rows
                charge(add=rows * KiT.shape[2], kind="Lam + K X^T", written=(0, 6 * KiT.shape[2]))
        for k1, k2 in gca.get(i, ()):                              # Lam_k1k2 = k1X_i Lam_ik2
            _charge_rows_times(Kpat.get((k1, i)), rc.K[k1].shape[0], rc.K[k2].shape[0])
            blk = chi[k1][i] @ Lam[k2][i]
            out[:, rc.rows(k1), rc.rows(k2)] = blk
            out[:, rc.rows(k2), rc.rows(k1)] = blk.swapaxes(1, 2)
    for k, b in enumerate(rc.bodies):                              # Lam_kk = kX_p(k) Lam_p(k)k
        mk = rc.K[k].shape[0]
        _charge_rows_times(Kpat.get((k, b)), mk, mk, symmetric=True)   # Lam_kk is symmetric
        out[:, rc.rows(k), rc.rows(k)] = chi[k][b] @ Lam[k][b]
    return out


def _charge_rows_times(pattern, r, c, symmetric=False):
    """kX_i Lam_ik2 (r x 6 times 6 x c, seed 002's 216m + 180a for 6 x 6): as written dense; paper
    count on kX_i's pattern, the upper triangle of a symmetric Lam_kk only."""
    nz, unit = pattern if pattern is not None else (np.ones((r, 6), bool), np.zeros((r, 6), bool))
    full = np.ones((6, c), bool)
    mul, add, _ = product_cost(nz, unit, full, ~full, symmetric=symmetric)
    charge(mul, add, kind="X Lam", written=(r * 6 * c, r * 5 * c))


def _K_times_rows_T(piv, rows, pattern=None):
    """K_i R^T = S D^-1 (R S)^T for R (B, r, 6) -> (B, 6, r)."""
    RS, RS_Dinv = piv.project_rows(rows, pattern)
    return piv.S_times_columns(RS_Dinv.swapaxes(1, 2), kind="S (D^-1 S^T R^T)")


def _L_times(piv, C):
    """L_i C = C - S D^-1 U^T C for motion columns C (B, 6, c)."""
    c = C.shape[2]
    charge_matmul(piv.n, 6, c, kind="U^T C")
    UtC = piv.U.swapaxes(1, 2) @ C
    if piv.n == 1:
        charge(c, kind="D^-1 U^T C")
        DUC = piv.Dinv * UtC
    else:
        charge_matmul(piv.n, piv.n, c, kind="D^-1 U^T C")
        DUC = piv.Dinv @ UtC
    SDUC = piv.S_times_columns(DUC, kind="C - S (.)")
    rows = int(np.any(piv.S != 0, axis=1).sum())               # the subtraction touches S's rows
    charge(add=rows * c, kind="C - S (.)", written=(0, 6 * c))
    return C - SDUC
