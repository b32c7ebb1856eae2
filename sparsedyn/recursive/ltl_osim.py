"""LTL-OSIM: the Delassus matrix by Featherstone's sparse factorization, O(n d^2 + m^2 d + m d^2).

Seed 000, Sec. II-A, eqs. (4)-(6) (= the SFA of seed 002, Sec. V-B):

    M = L^T L                 CRBA (crba.py) then ltl.py, no fill-in (expanded parent array)
    Y = J L^-1                row r of J (contact on body b) vanishes outside the DoFs supporting
                              b, and so does row r of Y: Y_r^T = L^-T J_r^T visits only that chain
    Lambda^-1 = Y Y^T         block (k1, k2) sums over the DoFs supporting cca(b_k1, b_k2) only;
                              a diagonal block is symmetric: its upper triangle is counted (the
                              SFA, like EFPA's Table I, computes the upper triangle of Lambda^-1)

Preconditions: M positive definite (else SingularModelError naming the DoF); contacts on movable
bodies (sparsedyn.delassus drops world-welded ones).
"""
from __future__ import annotations

import numpy as np

from ..contacts import contact_jacobian_sweeps
from ..errors import check_finite
from ..model.model import WORLD
from ..opcount import charge, charge_matmul
from .crba import crba_sweeps
from .ltl import ltl, pattern, solve_lower_transpose
from .pv_osimr import _topology


def ltl_osim_sweeps(model, q, Xup, rc):
    """(B, m, m) Delassus matrix for the resolved contacts rc (contacts.resolve_contacts)."""
    B = q.shape[0]
    M = check_finite(crba_sweeps(model, q, Xup), "delassus", {"q": q}, "the mass matrix")
    L = ltl(model, M)                                               # eq. (4)
    J = contact_jacobian_sweeps(model, Xup, rc)
    pat = pattern(model)
    chains = []                                                     # DoFs supporting each contact
    Y = []
    for k, b in enumerate(rc.bodies):
        last = int(model.v_index[b] + model.joints[b].nv - 1)
        chain = np.sort(np.concatenate(([last], pat.ancestors[last]))).astype(int)
        chains.append(chain)
        x = np.zeros((B, model.nv, rc.K[k].shape[0]))
        x[:, chain] = J[:, rc.rows(k)][:, :, chain].swapaxes(1, 2)
        y = solve_lower_transpose(model, L, x, deepest=last)       # eq. (5), Y_k^T = L^-T J_k^T
        Y.append(y[:, chain].swapaxes(1, 2))                        # (B, m_k, |chain|)
    top = _topology(model, rc.bodies)
    out = np.empty((B, rc.m, rc.m))
    for k1 in range(len(rc.bodies)):                               # eq. (6), Y Y^T blockwise
        for k2 in range(k1, len(rc.bodies)):
            c = top.cca(rc.bodies[k1], rc.bodies[k2])
            r1, r2 = rc.rows(k1), rc.rows(k2)
            if c == WORLD:
                out[:, r1, r2] = 0.0
                out[:, r2, r1] = 0.0
                continue
            n_common = int(model.v_index[c] + model.joints[c].nv)
            common = int(np.searchsorted(chains[k1], n_common))    # chains share their first DoFs
            m1, m2 = rc.K[k1].shape[0], rc.K[k2].shape[0]
            if k1 == k2:                                            # symmetric: upper triangle
                tri = m1 * (m1 + 1) // 2
                charge(tri * common, tri * (common - 1), kind="Y Y^T",
                       written=(m1 * m1 * common, m1 * m1 * (common - 1)))
            else:
                charge_matmul(m1, common, m2, kind="Y Y^T")
            blk = Y[k1][:, :, :common] @ Y[k2][:, :, :common].swapaxes(1, 2)
            out[:, r1, r2] = blk
            out[:, r2, r1] = blk.swapaxes(1, 2)
    return out
