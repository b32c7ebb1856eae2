"""A cheap upper bound on the online flops of a candidate ordering, before its program is built.

The structure of the static-pivot LU of B = P D Q (no cancellation) is found column by column
(Gilbert & Peierls, "Sparse partial pivoting in time proportional to arithmetic operations",
1988): the pattern of column j of L + U is the set of nodes reachable from the pattern of
B[:, j] in the graph with an edge k -> i for every L[i, k] != 0, k < j. Reached nodes above j
are U's column j, below j L's. From |L_k| (below-diagonal entries of column k of L) and |U_k|
(right-of-diagonal entries of row k of U) the count of symbolic.py's program without constant
folding is
    sum_k (1 + min(|L_k|, |U_k|) + 2 |L_k| |U_k|)       factorization (reciprocal, scalings,
                                                          multiply-adds)
  + 2 sum_k (|L_k| + |U_k|) + n                          substitutions and their pivot scalings,
an upper bound of the built program's flops (folding known constants, +-1 factors and the first
product into a fill entry only remove operations). An L D L^T (symbolic_ldlt.py) of a symmetric
pattern, |L_k| = |U_k| = c_k, costs instead
    sum_k (1 + c_k + c_k (c_k + 1)) + 4 sum_k c_k + n      (reciprocal, scalings, the lower
                                                          Schur complement's multiply-adds;
                                                          substitutions by L and L^T, scalings). The traversal costs sum_k |L_k| |U_k| steps
(as many as the multiply-adds), so a candidate that explodes is stopped at `cap` steps (its
count is then only known to exceed the cap): the planner's budget (factorization.py).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from numba import njit

from .. import jit

#: estimate() of a candidate whose structural elimination went over its step budget
OVER_BUDGET = -1
#: estimate() of a candidate with a structurally zero pivot (neither stored nor filled in)
ZERO_PIVOT = -2
#: while numba compiles the counter (sparsedyn/jit.py) the interpreter counts a pattern of up to
#: this many nonzeros for up to this many steps (~1 s); larger work waits for the compiler, a
#: small part of its planning
INTERPRETED_NNZ, INTERPRETED_STEPS = 50_000, 10 ** 6


@njit(cache=True, inline="always")
def _reach(i, j, mark, stack, top, Li, Lp, L_count):
    """Column j reaches row i: a row above j goes on the stack (U[i, j], its L column to visit),
    a row below j into L's column j. Returns (top, 1 if i is j's own pivot else 0, Li (grown
    when full))."""
    pivot = 0
    if mark[i] != j:
        mark[i] = j
        if i < j:
            stack[top] = i
            top += 1
        elif i == j:
            pivot = 1
        else:
            if Lp[j] + L_count[j] >= Li.size:
                Li = np.concatenate((Li, np.empty(Li.size, dtype=np.int64)))
            Li[Lp[j] + L_count[j]] = i
            L_count[j] += 1
    return top, pivot, Li


@njit(cache=True)
def _structure_counts(n, indptr, indices, cap):
    """(status, |L_k|, |U_k|): status 0, OVER_BUDGET or ZERO_PIVOT (k in the first slot of
    L_count: the pivot that is structurally zero)."""
    L_count = np.zeros(n, dtype=np.int64)
    U_count = np.zeros(n, dtype=np.int64)
    Lp = np.zeros(n + 1, dtype=np.int64)
    Li = np.empty(max(16, 2 * indices.size), dtype=np.int64)   # rows of L, column by column
    mark = np.full(n, -1, dtype=np.int64)
    stack = np.empty(n, dtype=np.int64)
    steps = 0
    for j in range(n):
        top = 0
        has_pivot = 0
        for p in range(indptr[j], indptr[j + 1]):
            top, pivot, Li = _reach(indices[p], j, mark, stack, top, Li, Lp, L_count)
            has_pivot |= pivot
        while top > 0:               # depth-first through the columns of L already built
            top -= 1
            k = stack[top]
            U_count[k] += 1          # U[k, j] != 0
            steps += Lp[k + 1] - Lp[k]
            if steps > cap:
                L_count[0] = j
                return OVER_BUDGET, L_count, U_count
            for p in range(Lp[k], Lp[k + 1]):
                top, pivot, Li = _reach(Li[p], j, mark, stack, top, Li, Lp, L_count)
                has_pivot |= pivot
        if not has_pivot:
            L_count[0] = j
            return ZERO_PIVOT, L_count, U_count
        Lp[j + 1] = Lp[j] + L_count[j]
    return 0, L_count, U_count


def estimate(pattern, row_perm, col_perm, cap, symmetric=False):
    """(flops, nnz_LU) bound for the LU (symmetric: the L D L^T) of
    pattern[row_perm][:, col_perm] (see the module docstring), or (OVER_BUDGET, -1) when the elimination needs more than `cap` multiply-adds,
    (ZERO_PIVOT, k) when pivot k is structurally zero."""
    n = pattern.shape[0]
    B = sp.csc_matrix(pattern)[row_perm][:, col_perm].tocsc()
    args = (n, B.indptr.astype(np.int64), B.indices.astype(np.int64))
    cap = int(min(cap, 2 ** 62))
    counts = _structure_counts
    if B.nnz <= INTERPRETED_NNZ:
        counts = jit.runnable_now("the planner's kernels", _structure_counts)
    interpreted = counts is not _structure_counts
    status, L_count, U_count = counts(*args, min(cap, INTERPRETED_STEPS) if interpreted else cap)
    if interpreted and status == OVER_BUDGET and cap > INTERPRETED_STEPS:   # undecided there
        status, L_count, U_count = _structure_counts(*args, cap)
    if status == OVER_BUDGET:
        return OVER_BUDGET, -1
    if status == ZERO_PIVOT:
        return ZERO_PIVOT, int(L_count[0])
    nnz_LU = int(L_count.sum() + U_count.sum()) + n
    if symmetric:
        c = L_count
        return int(n + c.sum() + c @ (c + 1) + 4 * c.sum() + n), nnz_LU
    updates = int(L_count @ U_count)
    flops = (n + int(np.minimum(L_count, U_count).sum()) + 2 * updates
             + 2 * int(L_count.sum() + U_count.sum()) + n)
    return flops, nnz_LU
