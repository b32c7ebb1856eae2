"""PV-OSIMr: the Delassus matrix Lambda^-1 = J M^-1 J^T in O(n + m^2).

Seed 000, Algorithm 3 (Sathya et al.), in body-local coordinates. Force propagators P and inverse
inertias Om are composed only over the spans between "branching links" N (eqs. 16-17), then the
inverse inertias of N are completed in a forward sweep over N (eq. 18), the constraint-space
propagators K in a backward sweep over N (eq. 19), and the blocks assembled by eq. (13).
The q-independent bookkeeping (E, ES, N, A, D, cca) is `pv_osimr_topology`.
Preconditions: every articulated pivot D_i invertible (else SingularModelError); contacts on
movable bodies (sparsedyn.delassus drops world-welded ones).

Compiled twins (default backend of sparsedyn.delassus): sparsedyn/kernels/pv_osimr_numba.py walks a
flattened program of this topology (kernels/pv_osimr_program.py) one state at a time,
sparsedyn/backends/c_pv_osimr.py the same program in C on vectors of states; this file stays the
reference.

Local-frame form: propagators are kept transposed, as row stacks R = kP_d^T (c x 6, link-k
coordinates; c = 6 for a branching link d, m_d for an end-effector d), see _osim_common.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.model import WORLD
from ..opcount import charge, counting, written_only
from ..spatial_costs import add_cost, product_cost, subspace_pattern
from ._osim_common import Pivot, initial_inertias, rows_pattern


@dataclass(frozen=True)
class BranchingTopology:
    """Seed 000, Sec. I: links 0..N-1, fictitious end-effectors N..N+ne-1 (one per contact, child
    of its link), WORLD = -1 plays the paper's link 0. A and D are indexed by node."""

    parents: tuple        # parent of every node (links, then end-effectors)
    nlinks: int
    end_effectors: tuple  # E: node ids N..N+ne-1
    supported: tuple      # ES(i) per node: end-effectors in the subtree of i (an EE supports itself)
    branching: tuple      # N without WORLD, ascending (WORLD is always branching)
    A: tuple              # closest branching ancestor (WORLD if none)
    D: tuple              # closest branching descendant-or-self (None if ES(i) is empty)

    def cca(self, a, b):
        """Closest common ancestor-or-self of nodes a and b (WORLD if none)."""
        anc = set()
        while a != WORLD:
            anc.add(a)
            a = self.parents[a]
        while b != WORLD and b not in anc:
            b = self.parents[b]
        return b


def pv_osimr_topology(parents, contact_bodies):
    """Precomputation of Algorithm 3 from the link parents (parents[i] < i) and each contact's link."""
    parents = [int(p) for p in parents]
    nl = len(parents)
    ee = tuple(range(nl, nl + len(contact_bodies)))
    par = tuple(parents + [int(b) for b in contact_bodies])
    nodes = len(par)
    supported = [set() for _ in range(nodes)]
    for e in ee:                                       # ES(i) = {j in E | j in desc(i) or j = i}
        i = e
        while i != WORLD:
            supported[i].add(e)
            i = par[i]
    children = [[] for _ in range(nodes)]
    for i, p in enumerate(par):
        if p != WORLD:
            children[p].append(i)
    branching = set(ee)                                # N = {0} U E U {i: ES(j) < ES(i) for all j}
    for i in range(nl):
        if supported[i] and all(len(supported[c]) < len(supported[i]) for c in children[i]):
            branching.add(i)
    A = []
    for i in range(nodes):                             # A(i) = max(anc(i) n N)
        j = par[i]
        while j != WORLD and j not in branching:
            j = par[j]
        A.append(j)
    D = [None] * nodes                                 # D(i) = min((desc(i) U {i}) n N)
    for i in range(nodes - 1, -1, -1):
        if i in branching:
            D[i] = i
        elif supported[i]:
            D[i] = next(D[c] for c in children[i] if supported[c])
    return BranchingTopology(par, nl, ee, tuple(frozenset(s) for s in supported),
                             tuple(sorted(branching)), tuple(A), tuple(D))


_TOPOLOGIES = {}


def _topology(model, bodies):
    key = (id(model), bodies)
    hit = _TOPOLOGIES.get(key)
    if hit is None or hit[0] is not model:
        hit = (model, pv_osimr_topology(model.parents, bodies))
        _TOPOLOGIES[key] = hit
    return hit[1]


def pv_osimr_sweeps(model, q, Xup, rc):
    """(B, m, m) Delassus matrix for the resolved contacts rc (contacts.resolve_contacts)."""
    B = q.shape[0]
    top = _topology(model, rc.bodies)
    nl, E = top.nlinks, top.end_effectors
    IA = initial_inertias(model, B)                                # line 2: H^A_i = H_i
    R = {}                                                         # span state per node d:
    Om = {}                                                        # R[d] = kP_d^T, Om[d] = kOm_d
    Rpat, Opat = {}, {}                                            # their patterns (paper count)
    for k, e in enumerate(E):                                      # line 4: lambda(i)P_i = K_i^T,
        R[e] = np.broadcast_to(rc.K[k], (B,) + rc.K[k].shape)      #         lambda(i)Om_i = 0
        Rpat[e] = rows_pattern(rc.K[k])
        Om[e] = Opat[e] = None
    branching = set(top.branching)
    for i in range(nl - 1, -1, -1):                                # line 5: i in S_r
        piv = Pivot(model, IA[i], i)                        # line 8: D_i, S D^-1 S^T
        p = int(model.parents[i])
        if p != WORLD:                                             # lines 10-11
            IA[p] += piv.articulated_to_parent(Xup[i], IA[i])
        d = top.D[i]
        if d is None:                                              # line 14: ES(i) empty
            continue
        if i in branching:                                         # line 7: iP_i = 1, iOm_i = 0,
            S = np.broadcast_to(piv.S, (B,) + piv.S.shape)         # so R S = S costs nothing
            with written_only():                                   # paper: S's structure below
                S_Dinv = piv.times_Dinv(S)
                Om[d], _ = piv.rank_update(None, S, S_Dinv)        # line 15: S D^-1 S^T
            SD = _charge_subspace_products(piv)
            Opat[d] = _outer(SD)
            if p != WORLD:                                         # line 13: (1 - S D^-1 U^T) X
                R[d], Rpat[d] = piv.branch_propagator(Xup[i], S_Dinv, SD)
            continue
        RS, RS_Dinv = piv.project_rows(R[d], Rpat.get(d))
        Om[d], Opat[d] = piv.rank_update(Om[d], RS, RS_Dinv, piv.RS_pattern(Rpat.get(d)), Opat.get(d))  # (16)
        if p != WORLD:
            R[d], Rpat[d] = piv.propagate_rows(Xup[i], R[d], RS_Dinv, Rpat.get(d))   # line 13 (eq. 17)
    # R[d], Om[d] now hold A(d)P_d^T and A(d)Om_d for every d in N (Om None: zero, EE on a branching link)
    Om0, O0pat = {}, {}
    for d in top.branching:                                        # lines 16-17 (eq. 18), forward
        a = top.A[d]
        OmA = Om[d] if Om[d] is not None else 0.0
        if a == WORLD:
            Om0[d], O0pat[d] = OmA, Opat.get(d)
        else:
            T, Tpat = _matmul(R[d], Om0[a], pa=Rpat.get(d), pb=_general(O0pat.get(a)))
            Om0[d], O0pat[d] = _matmul(T, R[d].swapaxes(1, 2), symmetric=True, pa=_general(Tpat),
                                       pb=_T(Rpat.get(d)), plus=(OmA, Opat.get(d)))
    K = {}                                                         # K[(c, e)] = cK_e
    Kpat = {}
    for e in E:                                                    # lines 18-22 (eq. 19)
        c = top.A[e]
        if c == WORLD:
            continue
        K[(c, e)] = R[e]                                           # line 20
        Kpat[(c, e)] = Rpat.get(e)
        while top.A[c] != WORLD:
            K[(top.A[c], e)], nz = _matmul(K[(c, e)], R[c], pa=Kpat.get((c, e)), pb=Rpat.get(c))   # line 22
            Kpat[(top.A[c], e)] = _general(nz)
            c = top.A[c]
    out = np.zeros((B, rc.m, rc.m))
    W = {}
    for k1, e1 in enumerate(E):                                    # lines 23-28 (eq. 13)
        r1 = rc.rows(k1)
        out[:, r1, r1] = Om0[e1]                                   # line 28
        for k2 in range(k1 + 1, len(E)):
            e2 = E[k2]
            c = top.cca(e1, e2)
            if c == WORLD:                                         # grounded common ancestor
                continue
            if (c, e2) not in W:                                   # 0Om_c cK_e2^T, once per (c, e2)
                W[(c, e2)] = _matmul(Om0[c], K[(c, e2)].swapaxes(1, 2), pa=_general(O0pat.get(c)),
                                     pb=_T(Kpat.get((c, e2))))
            blk, _ = _matmul(K[(c, e1)], W[(c, e2)][0], pa=Kpat.get((c, e1)), pb=_general(W[(c, e2)][1]))   # line 25
            out[:, r1, rc.rows(k2)] = blk
            out[:, rc.rows(k2), r1] = blk.swapaxes(1, 2)           # line 26
    return out


def _charge_subspace_products(piv):
    """Paper count of S D^-1 and S D^-1 S^T (a unit-axis S places D^-1's entries: 0 flops);
    returns the pattern of S D^-1."""
    nz, unit = subspace_pattern(piv.S)
    full = np.ones((piv.n, piv.n), bool)
    m1, a1, SD = product_cost(nz, unit, full, ~full)
    m2, a2, _ = product_cost(SD, np.zeros_like(SD), nz.T, unit.T, symmetric=True)
    charge(m1 + m2, a1 + a2, kind="S D^-1 S^T", written=(0, 0))
    return SD


def _T(pattern):
    return None if pattern is None else (pattern[0].T, pattern[1].T)


def _general(nz):
    """(nz, unit) of a computed matrix of pattern nz (no unit entries; None: untracked)."""
    return None if nz is None else (nz, np.zeros_like(nz))


def _outer(SD):
    """Pattern of S D^-1 S^T from S D^-1's (6 x n): rows and columns where S D^-1 is nonzero."""
    rows = SD.any(axis=1)
    return rows[:, None] & rows[None, :]


def _matmul(A, Bm, symmetric=False, pa=None, pb=None, plus=None):
    """(A Bm, its pattern or None), + plus[0] of pattern plus[1] if given. pa, pb: (nz, unit)
    patterns of A and Bm (None: general); the paper count charges the products on them (the
    upper triangle when symmetric) and the additions of `plus` where both terms are nonzero; as
    written the products are dense and the addition uncharged."""
    r, k, c = A.shape[1], A.shape[2], Bm.shape[2]
    kind = "R Om R^T" if symmetric else "K Om K^T"
    written = (r * (r + 1) // 2 * k, r * (r + 1) // 2 * (k - 1)) if symmetric else (r * k * c, r * (k - 1) * c)
    out = A @ Bm
    P = None
    if counting():
        full = lambda m, n: (np.ones((m, n), bool), np.zeros((m, n), bool))   # noqa: E731
        (an, au), (bn, bu) = pa or full(r, k), pb or full(k, c)
        mul, add, P = product_cost(an, au, bn, bu, symmetric=symmetric)
        if plus is not None and plus[1] is not None:
            add += add_cost(np.triu(plus[1]) if symmetric else plus[1], P)
            P = P | plus[1]
        elif plus is not None and not np.isscalar(plus[0]):
            add += int(np.triu(P).sum()) if symmetric else int(P.sum())
        charge(mul, add, kind=kind, written=written)
    if plus is not None:
        out = plus[0] + out
    return out, P
