"""The articulation step shared by C-ABA and C-EFPA (seed 003, Algorithm 1, lines 26-27 and
29-32; Sec. VIII-C): for cluster k, with S_k and I^A_k final,

    U_k = I^A_k S_k,   D_k = S_k^T U_k (+ armature),   I^a_k = I^A_k - U_k D_k^-1 U_k^T,
    I^A_lambda(k) += lambda(k)X_k^* I^a_k kX_lambda(k)

charged by the patterns of S_k and I^A_k (_cluster_patterns): I^A_k is block diagonal before its
children add their output blocks, D_k and U D^-1 U^T are symmetric (upper triangles), D_k^-1 is
formed once (aba.charge_pivot_inverse) and used as a product.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...opcount import charge
from ..aba import charge_pivot_inverse
from ._cluster_common import check_cluster_pivots
from ._cluster_patterns import charged_product, dense, rows_of, solve_rows, zero_axes
from ._cluster_congruence import cluster_congruence


@dataclass
class Articulated:
    U: np.ndarray           # (B, 6 n_b, m)
    D: np.ndarray           # (B, m, m)
    Dinv_Ut: np.ndarray     # (B, m, 6 n_b), None for a root cluster
    Ia: np.ndarray          # (B, 6 n_b, 6 n_b), None for a root cluster
    PU: np.ndarray          # U's pattern (None when not counting)
    PIa: np.ndarray         # I^a's pattern (None when not counting, or a root cluster)


def articulate(cm, k, fp, IA, PIA, pats, armature=None):
    """Lines 26-27 and 29-32 for cluster k: IA[parent] (and its pattern PIA[parent]) updated in
    place; `pats` = cluster_patterns(cm) when counting, else None."""
    S = fp.S[k]
    n6 = S.shape[1]
    PS = None if pats is None else (pats[k].S_nz, pats[k].S_unit)
    St = None if PS is None else (PS[0].T, PS[1].T)
    U, PU = charged_product(IA[k], S, dense(PIA[k]), PS, "U = IA S")              # line 26
    D, _ = charged_product(np.swapaxes(S, 1, 2), U, St, dense(PU), "D = S^T U", symmetric=True)  # line 27
    arm = None if armature is None else armature[cm.y_slice(k)]
    if arm is not None:
        D = D + np.diag(arm)                               # H~ on the joint pivots
    check_cluster_pivots(cm, k, D, IA[k], S, arm)
    charge_pivot_inverse(D.shape[-1])                      # paper count: D^-1 once, then products
    p = cm.parents[k]
    if p < 0:
        return Articulated(U, D, None, None, PU, None)
    Dinv_Ut = solve_rows(D, np.swapaxes(U, 1, 2), None if PU is None else rows_of(PU), "D^-1 U^T")
    PIa = None if PS is None else zero_axes(PIA[k] | np.outer(PU.any(1), PU.any(1)), *PS)
    UDU, _ = charged_product(U, Dinv_Ut, dense(PU), dense(None if PU is None else PU.T), "U D^-1 U^T",
                             symmetric=True, mask=True if PIa is None else PIa)
    Ia = IA[k] - UDU                                                               # line 30
    charge(add=n6 * (n6 + 1) // 2 if PIa is None else int(np.triu(PIa).sum()), kind="U D^-1 U^T",
           written=(0, 0))
    XIX, PX = cluster_congruence(fp.ct[k], Ia, len(cm.clusters[p].bodies), PIa)
    IA[p] += XIX                                                                   # line 32
    if PX is not None:
        charge(add=int(np.triu(PIA[p] & PX).sum()), kind="I^A_p +", written=(0, 0))
        PIA[p] = PIA[p] | PX
    return Articulated(U, D, Dinv_Ut, Ia, PU, PIa)
