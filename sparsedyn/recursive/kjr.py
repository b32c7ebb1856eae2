"""KJR: the Delassus matrix Lambda^-1 = J M^-1 J^T by Kreutz-Delgado, Jain and Rodriguez, O(n + m^2 d).

Seed 000, Sec. I and Table I (KJR [13], three sweeps, O(n + m^2 d)); seed 002, Sec. V-A (the
RJK algorithm, Lilly's force propagation) and its Appendix (notation of Featherstone's Table 4:
P_i = I^A_i, tau_bar_i = L_i^T, phi_i = iX_lambda(i)^T, Omega_ij = Lambda^-1_ij). In body-local
coordinates, X_i = iX_lambda(i), K_i = S_i D_i^-1 S_i^T, L_i = 1 - K_i I^A_i (seed 002, Table I):

    inward    I^A_lambda(i) += X_i^T L_i^T I^A_i X_i                        (articulated inertias)
    outward   Om_ii = L_i X_i Om_lambda(i)lambda(i) X_i^T L_i^T + K_i,  Om_00 = 0
              (X Om X^T one symmetric congruence, by double angles about a joint's axis: the
              appendix's X Lambda_p(i)p(i) X^T)
              ("RJK calculates Lambda^-1_kk via a recursion that calculates Lambda^-1_ii from
              Lambda^-1_p(i)p(i)", Sec. V-A)
    cross     Om_jc = L_j X_j Om_lambda(j)c  down from the common ancestor c = GCA(b1, b2) to
              either body, local articulated transforms only (Sec. V-A, third difference):
              Om_b2b1 = psi(b2, c) Om_cc psi(b1, c)^T
    post      Lambda^-1_k1k2 = K_k1 Om_b1b2 K_k2^T (the Appendix's post-processing of Omega into
              general end-effector coordinates; K_k the contact's m_k x 6 rows in its body frame)

Pairs whose common ancestor is the fixed base get zero blocks. Om_jc is memoised per (j, c) and
the cross propagation per (j, b1), so contacts sharing a body or a path share the transforms (on
a chain the cross pass is O(m n) transforms, inside the O(n + m^2 d) bound).
Preconditions: every articulated pivot invertible (else SingularModelError); contacts on movable
bodies (sparsedyn.delassus drops world-welded ones).
"""
from __future__ import annotations

import numpy as np

from ..model.model import WORLD
from ..opcount import charge_matmul
from ..spatial import motion_congruence
from ._osim_common import Pivot, initial_inertias, transform_times_columns
from .efpa import _L_times
from .pv_osimr import _topology


def kjr_sweeps(model, q, Xup, rc):
    """(B, m, m) Delassus matrix for the resolved contacts rc (contacts.resolve_contacts)."""
    B = q.shape[0]
    top = _topology(model, rc.bodies)
    IA = initial_inertias(model, B)                                # I^A_i = I_i
    pivots = [None] * model.nbodies
    for i in range(model.nbodies - 1, -1, -1):                     # inward, i = N..1
        piv = pivots[i] = Pivot(model, IA[i], i)                   # D_i, K_i = S D^-1 S^T
        p = int(model.parents[i])
        if p != WORLD:
            IA[p] += piv.articulated_to_parent(Xup[i], IA[i])      # I^A_p += X^T L^T I^A X
    Om = {}                                                        # Om[i] = Om_ii (B, 6, 6)
    for i in range(model.nbodies):                                 # outward over the supports
        if not top.supported[i]:
            continue
        piv, p = pivots[i], int(model.parents[i])
        S = np.broadcast_to(piv.S, (B,) + piv.S.shape)
        prop = None if p == WORLD else _L_congruence(piv, motion_congruence(Xup[i], Om[p]))
        Om[i], _ = piv.rank_update(prop, S, piv.times_Dinv(S))     # + K_i (Om_00 = 0 at the root)

    down = {}                                                      # down[(j, a)] = Om_ja, a anc-or-self of j

    def om_down(j, a):
        if j == a:
            return Om[a]
        if (j, a) not in down:
            p = int(model.parents[j])
            down[(j, a)] = _propagate(pivots[j], Xup[j], om_down(p, a))   # Om_ja = L_j X_j Om_pa
        return down[(j, a)]

    cross = {}                                                     # cross[(j, b1)] = Om_j b1

    def om_cross(j, b1, c):
        if j == c:
            return om_down(b1, c).swapaxes(1, 2)                   # Om_c b1 = Om_b1c^T
        if (j, b1) not in cross:
            p = int(model.parents[j])
            cross[(j, b1)] = _propagate(pivots[j], Xup[j], om_cross(p, b1, c))
        return cross[(j, b1)]

    out = np.zeros((B, rc.m, rc.m))
    for k1, b1 in enumerate(rc.bodies):
        K1 = rc.K[k1]
        m1 = K1.shape[0]
        charge_matmul(m1, 6, 6, kind="K Om K^T")                   # Lambda^-1_kk = K Om_bb K^T
        charge_matmul(1, 6, m1 * (m1 + 1) // 2, kind="K Om K^T")   # symmetric
        out[:, rc.rows(k1), rc.rows(k1)] = K1 @ Om[b1] @ K1.T
        for k2 in range(k1 + 1, len(rc.bodies)):
            b2 = rc.bodies[k2]
            c = top.cca(b1, b2)
            if c == WORLD:                                         # grounded common ancestor
                continue
            K2 = rc.K[k2]
            charge_matmul(K2.shape[0], 6, 6, kind="K Om K^T")
            charge_matmul(K2.shape[0], 6, m1, kind="K Om K^T")
            blk = K2 @ om_cross(b2, b1, c) @ K1.T                  # Lambda^-1_k2k1
            out[:, rc.rows(k2), rc.rows(k1)] = blk
            out[:, rc.rows(k1), rc.rows(k2)] = blk.swapaxes(1, 2)
    return out


def _L_congruence(piv, C):
    """L_i C L_i^T = L_i (L_i C)^T for a symmetric C (B, 6, 6)."""
    return _L_times(piv, _L_times(piv, C).swapaxes(1, 2))


def _propagate(piv, X, C):
    """L_i X_i C for 6-row motion columns C (B, 6, c): one local articulated transform."""
    return _L_times(piv, transform_times_columns(X, C))
