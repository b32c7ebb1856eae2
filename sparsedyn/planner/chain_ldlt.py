"""Offline plan of the pair-chain program (sparsedyn.ir.chain_program) of compiled MAP estimation
(kernels/normal_numba.py):
the normal equations N x = g, N = A^T W A + diag(p), g = A^T W r + p mu, solved by a left-looking
(Crout) static-pivot L D L^T of P N P^T, written as "chains"

    w[t] = (w[src] or c0) + sum_j (w[a_j] * w[b_j]) * c_j      (lane_vectors.chain_block)

on the rows of a lane work array (one slot per value). Every step of the online solve is a chain:
  factor  per permuted column k: its multipliers c_kj = l_kj d_j into scratch rows (one product
          list); d_k = N_kk - sum_j l_kj c_kj with N_kk = p_k + sum_r w_r A_rk^2 in the same
          chain (its value stored on the way, for the undetermined test), r_k = 1 / d_k as its
          epilogue; per row i of L[:, k]: l_ik = (N_ik - sum_j l_ij c_kj) r_k, N_ik's products of
          A's entries in the same chain (N is never stored);
  solve   y_k = p_k mu_k - p_k x_k + sum_r A_rk w_r r_r - sum_j l_kj y_j (the gradient at x and
          the forward substitution in one chain); dx_k = y_k r_k - sum_i l_ik dx_i (back
          substitution, last row first, into y_k's row), x_k += dx_k as its epilogue;
  resid   r_r -= sum_k A_rk x_k (in place: the solve part then reads the residual as r);
  probe   z = N^-1 c for a constant c (forward and back substitution into z's rows): the compiled
          route's identifiability probe (compiled_map.py);
  probe2  (optional) z = N^-1 (J z) in place: the probe's second step of inverse iteration (J the
          typical information, so that the step is one in J's scale-free units).
Run as: factor; x = 0; solve (x = N^-1 g); resid; solve (one refinement step on the un-squared
residual, as the reference MAPSolver); probe; and where the probe responds, probe2 and a second
refinement step (kernels/normal_numba.py). After a solve, y's rows hold its last dx. The gradient's prior term -p_k x_k uses the
gradient's precisions (0 where the prior is the uninformative ridge, solve_map.py). The product
of a dynamic entry of A with a constant one is a pair (a, ONE, w_r A_const); products of constants
are folded into c0 offline.

Compared with the planner's right-looking L D L^T program (planner/symbolic_ldlt.py), the updates
of one target are consecutive, so the kernel keeps the target in vector registers for its whole
chain instead of loading and storing it per update, the column's multipliers are read from a few
cache-resident rows, and N and g are formed inside the chains that consume them. Same L
structure, same update count. Pivots: N is SPD, so diagonal pivots in any order are stable (no
growth check is needed); the kernel flags d_k <= 0 (breakdown) and the undetermined test on d_k
and N_kk.

Slots: ONE, the scratch rows, x in the variables' order, then the others in the order the program
first touches them (factor, solve, resid), so each sweep walks the work array nearly
sequentially; except that each column of L takes consecutive slots in row order and z_k the
slot after y_k (_grouped), so that the generated C runs neighbouring chains as vector chains
(backends/c_chain_pairs.py).

Preconditions: A's CSC pattern with its dynamic entries marked and its constant values; weights
w > 0 and prior precisions p >= 0; perm a permutation of the columns (fill-reducing).
"""
from __future__ import annotations

import numpy as np

from ..ir.chain_program import (EPI_ADD, EPI_LIST, EPI_NONE, EPI_RECIP, EPI_SCALE, PRIOR_ROWS,
                                ChainArrays, ChainProgram)


def lower_structure(pattern, perm):
    """Rows i > k of L[:, k] (permuted numbering, sorted) of the L D L^T of P N P^T, N's
    pattern given (symmetric, CSC)."""
    n = pattern.shape[0]
    inv = np.empty(n, dtype=np.int64)
    inv[perm] = np.arange(n)
    coo = pattern.tocoo()
    cols = [set() for _ in range(n)]
    for i, k in zip(inv[coo.row], inv[coo.col]):
        if i > k:
            cols[k].add(int(i))
    for k in range(n):
        if cols[k]:                       # fill: column k's rows join its elimination parent's
            parent = min(cols[k])
            cols[parent] |= cols[k] - {parent}
    return [sorted(c) for c in cols]


class _Builder:
    """Chains -> instructions, with symbolic slot names numbered later."""

    def __init__(self):
        self.names = {}            # name -> slot id (several names may share one)
        self.n_ids = 0
        self.ins = []              # (t, src, from_row, q, k, kmid, mid, mode, t2, r2), c0
        self.c0 = []
        self.pairs = []            # (a, b, c)
        self.flops = 0

    def slot(self, name):
        if name not in self.names:
            self.names[name] = self.n_ids
            self.n_ids += 1
        return self.names[name]

    def products(self, base, pairs):
        """w[(base, p)] = w[a_p] * w[b_p] for the p-th of `pairs` (name, name): one EPI_LIST
        instruction; the (base, p) rows are consecutive slots (_numbered)."""
        if not pairs:
            return
        self.ins.append((self.slot((base, 0)), self.slot((base, 0)), 0, len(self.pairs),
                         len(pairs), 0, self.slot((base, 0)), EPI_LIST, self.slot((base, 0)),
                         self.slot((base, 0))))
        self.c0.append(0.0)
        for p, (a, b_) in enumerate(pairs):
            self.slot((base, p))
            self.pairs.append((self.slot(a), self.slot(b_), 1.0))
        self.flops += len(pairs)

    def chain(self, t, pairs, c0=0.0, src=None, mid=None, kmid=-1, mode=EPI_NONE, t2=None,
              r2=None):
        """w[t] = (w[src] or c0) + sum (w[a] w[b]) c over `pairs` (name, name, coefficient), the
        value before the kmid-th product into `mid`, then the epilogue `mode` into t2
        (lane_vectors.chain_block). With kmid == len(pairs), `mid` names the same slot as t."""
        t = self.slot(t)
        src, from_row = (t, 0) if src is None else (self.slot(src), 1)
        one = self.slot("one")
        pairs = [(self.slot(a), self.slot(b), float(c)) for a, b, c in pairs]
        for a, b, c in pairs:          # products with ONE or by +-1 are free
            self.flops += 1 + (b != one and a != one) + (abs(c) != 1.0)
        self.flops -= (not from_row and c0 == 0.0 and len(pairs) > 0)   # 0 + first product
        self.flops += mode != EPI_NONE
        if mid is not None and kmid == len(pairs):
            self.names[mid] = t
        mid = t if mid is None else self.slot(mid)
        t2, r2 = (t if x is None else self.slot(x) for x in (t2, r2))
        self.ins.append((t, src, from_row, len(self.pairs), len(pairs), kmid, mid, mode, t2, r2))
        self.c0.append(float(c0))
        self.pairs.extend(pairs)


def _normal_products(by_row, cols, dyn, values, weights, inv):
    """N's products per permuted lower entry (i, k): {(i, k): ([pairs], constant part)} from the
    entries of each row of A (by_row[r]: CSC entry numbers e; names ("A", e))."""
    out = {}
    for r, entries in enumerate(by_row):
        w = float(weights[r])
        entries = entries.tolist()
        for x, e1 in enumerate(entries):
            for e2 in entries[x:]:
                i, k = int(inv[cols[e1]]), int(inv[cols[e2]])
                if i < k:
                    i, k, e1_, e2_ = k, i, e2, e1
                else:
                    e1_, e2_ = e1, e2
                pairs, const = out.setdefault((i, k), ([], [0.0]))
                if dyn[e1_] and dyn[e2_]:
                    pairs.append((("A", e1_), ("A", e2_), w))
                elif dyn[e1_] or dyn[e2_]:
                    d, c = (e1_, e2_) if dyn[e1_] else (e2_, e1_)
                    pairs.append((("A", d), "one", w * values[c]))
                else:
                    const[0] += w * values[e1_] * values[e2_]
    return out


def plan_chains(A_pattern, dynamic, values, weights, prior, prior_pmu, perm, normal_pattern,
                gradient_prior=None, probe=None, per_sample=False, probe_scale=None):
    """The ChainProgram of the MAP normal equations (module docstring) for A's CSC pattern
    (m, n), dynamic (nnz,) bool, values (nnz,) A's constants (read where not dynamic), weights
    (m,), prior (n,) the precisions in N, prior_pmu (n,) = p mu, perm (n,) the elimination order
    (perm[k]: the variable eliminated k-th), normal_pattern N's symmetric pattern (n, n),
    gradient_prior (n,) the precisions in the gradient (default: prior), probe (n,) the probe's
    right-hand side c (default: zeros), probe_scale (n,) the typical information J of the
    probe's second step (default: no second step).
    per_sample: the prior's numbers (p, the gradient's precisions, p mu, the probe's c and J)
    are read from slots the kernel fills per state (ChainProgram.prior_slots) instead of being
    folded into the chains; the arguments prior, prior_pmu, gradient_prior, probe and
    probe_scale then only say which terms exist (none is dropped for being zero)."""
    gradient_prior = prior if gradient_prior is None else gradient_prior
    probe = np.zeros(A_pattern.shape[1]) if probe is None else probe

    def prior_term(kind, j, value, name, coef=1.0):
        """(c0 part, pairs) of a prior number: folded (value) or read from its slot."""
        if per_sample:
            return 0.0, [((kind, int(j)), name, coef)]
        return (value, []) if name == "one" else (0.0, [(name, "one", coef * value)] if value else [])
    m, n = A_pattern.shape
    rows = A_pattern.indices.astype(np.int64)
    cols = np.repeat(np.arange(n), np.diff(A_pattern.indptr))
    dynamic = np.asarray(dynamic, dtype=bool)
    inv = np.empty(n, dtype=np.int64)
    inv[perm] = np.arange(n)
    L = lower_structure(normal_pattern, perm)
    Lrows = [[] for _ in range(n)]
    for k in range(n):
        for i in L[k]:
            Lrows[i].append(k)
    Lrow_set = [set(r) for r in Lrows]
    order = np.argsort(rows, kind="stable")
    by_row = np.split(order, np.searchsorted(rows[order], np.arange(1, m)))   # A's rows' entries
    prod = _normal_products(by_row, cols, dynamic, values, weights, inv)
    b = _Builder()
    b.slot("one")

    def normal(i, k):
        pairs, const = prod.get((i, k), ([], [0.0]))
        return pairs, const[0]

    for k in range(n):
        # column k's multipliers c_kj = l_kj d_j, once, into the scratch rows every chain of
        # the column reads (cache-resident; the unscaled columns are never stored)
        b.products("cw", [(("l", k, j), ("d", j)) for j in Lrows[k]])
        cw = {j: ("cw", p) for p, j in enumerate(Lrows[k])}
        pairs, c0 = normal(k, k)
        p0, p_pairs = prior_term("p", perm[k], prior[perm[k]], "one")
        pairs = pairs + p_pairs
        b.chain(("d", k), pairs + [(("l", k, j), cw[j], -1.0) for j in Lrows[k]],
                c0=c0 + p0, mid=("N", k), kmid=len(pairs), mode=EPI_RECIP, t2=("r", k))
        for i in L[k]:
            pairs, c0 = normal(i, k)
            b.chain(("l", i, k), pairs + [(("l", i, j), cw[j], -1.0) for j in Lrows[k]
                                          if j in Lrow_set[i]],
                    c0=c0, mode=EPI_SCALE, t2=("l", i, k), r2=("r", k))
    factor_end, factor_flops = len(b.ins), b.flops

    entries_of = np.split(np.argsort(cols, kind="stable"), A_pattern.indptr[1:-1])
    for k in range(n):
        j = perm[k]
        _, pairs = prior_term("pg", j, gradient_prior[j], ("x", k), -1.0)
        pmu0, pmu_pairs = prior_term("pmu", j, prior_pmu[j], "one")
        pairs += pmu_pairs
        for e in entries_of[j]:
            r = int(rows[e])
            pairs.append((("A", int(e)), ("row", r), weights[r]) if dynamic[e]
                         else (("row", r), "one", weights[r] * values[e]))
        pairs += [(("l", k, jj), ("y", jj), -1.0) for jj in Lrows[k]]
        b.chain(("y", k), pairs, c0=pmu0)
    for k in range(n - 1, -1, -1):      # dx_k overwrites y_k, read only by its own chain
        b.chain(("y", k), [(("y", k), ("r", k), 1.0)]
                + [(("l", i, k), ("y", i), -1.0) for i in L[k]], mode=EPI_ADD, t2=("x", k))
    solve_end, solve_flops = len(b.ins), b.flops - factor_flops

    for r, entries in enumerate(by_row):
        b.chain(("row", r), [(("A", int(e)), ("x", int(inv[cols[e]])), -1.0) if dynamic[e]
                             else (("x", int(inv[cols[e]])), "one", -values[e]) for e in entries],
                src=("row", r))
    resid_end, resid_flops = len(b.ins), b.flops - factor_flops - solve_flops

    def substitution(first_terms):
        """z = N^-1 c in place over z's rows, c_k's terms first_terms(k) (pairs, c0)."""
        for k in range(n):
            pairs, c0 = first_terms(k)
            b.chain(("z", k), pairs + [(("l", k, jj), ("z", jj), -1.0) for jj in Lrows[k]],
                    c0=c0)
        for k in range(n - 1, -1, -1):
            b.chain(("z", k), [(("z", k), ("r", k), 1.0)]
                    + [(("l", i, k), ("z", i), -1.0) for i in L[k]])

    def probe_rhs(k):
        c0, pairs = prior_term("c", perm[k], probe[perm[k]], "one")
        return pairs, c0

    def second_rhs(k):
        # c2_k = J_k z_k: the first step's response in J's units (read before z_k is written)
        _, pairs = prior_term("J", perm[k], probe_scale[perm[k]], ("z", k))
        return pairs, 0.0

    before = b.flops
    substitution(probe_rhs)
    probe_end, probe_flops = len(b.ins), b.flops - before
    if probe_scale is not None:
        substitution(second_rhs)
    flops = {"factor": factor_flops, "solve": solve_flops, "resid": resid_flops,
             "probe": probe_flops, "probe2": b.flops - before - probe_flops}
    return _numbered(b, (factor_end, solve_end, resid_end, probe_end), flops, m, n, rows.size,
                     dynamic, inv, L)


def _grouped(ranked, names, L, n):
    """`ranked` (slot ids in first-touch order) with each column of L (l_ik, i in L[k] in row
    order) and each pair y_k, z_k in consecutive slots, placed where the group's first member
    ranks: so the chains of consecutive targets of a column, and a substitution's y and z
    chains, read and write neighbouring slots (backends/c_chain_pairs.py runs them as vector
    chains). Only the numbering changes: the program computes the same values."""
    groups = [[names[("l", i, k)] for i in L[k]] for k in range(n)]
    groups += [[names[("y", k)], names[("z", k)]] for k in range(n)]
    group_of = {s: g for g in groups for s in g}
    placed, out = set(), []
    for s in ranked.tolist():
        for t in group_of.get(s, (s,)):
            if t not in placed:
                placed.add(t)
                out.append(t)
    return np.array(out, dtype=np.int64)


def _numbered(b, ends, flops, m, n, nnz, dynamic, inv, L):
    """The ChainProgram with slots renumbered: ONE, the scratch rows, x (variable order), then
    by first touch (operands before targets)."""
    ins = np.array(b.ins, dtype=np.int64).reshape(-1, 10)
    pairs = np.array([p[:2] for p in b.pairs], dtype=np.int64).reshape(-1, 2)
    pc = np.array([p[2] for p in b.pairs], dtype=float)
    touched = []
    for (t, src, from_row, q, k, kmid, mid, mode, t2, r2) in ins:
        if from_row:
            touched.append(src)
        touched.extend(pairs[q:q + k].ravel())
        touched.append(mid)
        touched.append(t)
        if mode == EPI_SCALE:
            touched.append(r2)
        if mode != EPI_NONE:
            touched.append(t2)
    touched = np.asarray(touched, dtype=np.int64)
    _, first = np.unique(touched, return_index=True)
    ranked = touched[np.sort(first)]
    # the scratch rows of EPI_LIST instructions, then x in the original order of the variables:
    # consecutive blocks after ONE (the kernel copies x out as one block)
    scratch = sorted((name[1], sid) for name, sid in b.names.items()
                     if isinstance(name, tuple) and name[0] == "cw")
    front = np.array([b.names["one"]] + [sid for _, sid in scratch]
                     + [b.names[("x", int(inv[j]))] for j in range(n)], dtype=np.int64)
    ranked = _grouped(ranked[~np.isin(ranked, front)], b.names, L, n)
    ranked = np.concatenate((front, ranked))
    new = np.full(b.n_ids, -1, dtype=np.int64)
    new[ranked] = np.arange(ranked.size)
    assert (new >= 0).all(), "every slot is touched"
    name_slot = {name: int(new[s]) for name, s in b.names.items()}
    entry_slot = np.array([name_slot.get(("A", e), -1) for e in range(nnz)], dtype=np.int64)
    if not np.array_equal(entry_slot >= 0, dynamic):
        raise AssertionError("every dynamic entry of A takes part in N")

    def by_var(kind):
        return np.array([name_slot[(kind, int(inv[j]))] for j in range(n)], dtype=np.int64)
    # the per-sample prior's slots, (len(PRIOR_ROWS), n) in PRIOR_ROWS order (-1: the term
    # does not exist)
    prior_slot = np.array([[name_slot.get((kind, j), -1) for j in range(n)]
                           for kind in PRIOR_ROWS], dtype=np.int64).reshape(len(PRIOR_ROWS), n)
    return ChainProgram(
        n_slots=ranked.size, one=name_slot["one"],
        chains=ChainArrays(ins_t=new[ins[:, 0]], ins_src=new[ins[:, 1]],
                           ins_c0=np.array(b.c0, dtype=float), ins_row=ins[:, 2],
                           ins_q=ins[:, 3], ins_k=ins[:, 4], ins_kmid=ins[:, 5],
                           ins_mid=new[ins[:, 6]], ins_mode=ins[:, 7], ins_t2=new[ins[:, 8]],
                           ins_r2=new[ins[:, 9]], pa=new[pairs[:, 0]], pb=new[pairs[:, 1]], pc=pc),
        factor_end=ends[0], solve_end=ends[1], resid_end=ends[2], probe_end=ends[3],
        entry_slot=entry_slot,
        row_slot=np.array([name_slot[("row", r)] for r in range(m)], dtype=np.int64),
        x_slot=by_var("x"), d_slot=by_var("d"), nkk_slot=by_var("N"), z_slot=by_var("z"),
        y_slot=by_var("y"),
        flops=flops, nnz_L=sum(len(c) for c in L), prior_slot=prior_slot)
