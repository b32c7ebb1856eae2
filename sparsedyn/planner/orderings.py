"""Candidate (row, column) permutations for static-pivot sparse LU.

Every candidate puts an always-nonzero entry on each pivot. The row side comes from a perfect
bipartite matching restricted to the always-nonzero entries (the "safe" structure), preferring the
existing diagonal; the column side is a fill-reducing order. Writing `match[c]` for the row matched
to column c, the matched matrix M = A[match, :] has a safe diagonal, and any column order q yields
the pivot-safe pair (row_perm, col_perm) = (match[q], q): this is the "matching + symmetric
ordering" strategy (MC64 + AMD style) when q is a symmetric ordering of M + M^T, and COLAMD-style
when q orders the columns of A^T A with the rows following the matching.

Preconditions: `pattern` is square CSC; `always_nonzero` is a bool mask over its stored entries.
"""
from __future__ import annotations

import heapq

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import (connected_components, maximum_bipartite_matching,
                                  min_weight_full_bipartite_matching)

from ..errors import IllPosedError

SUPERLU_ORDERINGS = {"colamd": "COLAMD", "mmd_ata": "MMD_ATA", "mmd_at_plus_a": "MMD_AT_PLUS_A"}
CHOLMOD_ORDERINGS = ("amd", "metis", "nesdis")
KNOWN_ORDERINGS = ("natural", *SUPERLU_ORDERINGS, *CHOLMOD_ORDERINGS, "rcm", "min_degree", "btf",
                   "markowitz")


class OrderingUnavailable(RuntimeError):
    """The ordering cannot be computed in this installation (e.g. CHOLMOD built without METIS)."""


def safe_structure(pattern, always_nonzero):
    """The CSC matrix of the always-nonzero entries only (values 1)."""
    safe = pattern.copy()
    safe.data = np.asarray(always_nonzero, dtype=float)
    safe.eliminate_zeros()
    return safe


def unmatched_error(structure, where):
    """None if the structure (CSC) has a perfect bipartite matching, else the IllPosedError
    naming the rows and columns a maximum matching leaves unmatched (`.rows`, `.cols`;
    `.variables` the columns); where: what structure this is, for the message."""
    n = structure.shape[0]
    row_to_col = maximum_bipartite_matching(sp.csr_matrix(structure), perm_type="column")
    rows = np.flatnonzero(row_to_col < 0)
    if not rows.size:
        return None
    cols = np.setdiff1d(np.arange(n), row_to_col[row_to_col >= 0])
    err = IllPosedError(
        f"pattern: structurally singular {where} (structural rank {n - rows.size} < {n}); "
        f"unmatched rows {rows.tolist()}, unmatched columns {cols.tolist()}",
        variables=tuple(int(c) for c in cols))
    err.rows, err.cols = tuple(int(r) for r in rows), tuple(int(c) for c in cols)
    return err


def safe_matching(pattern, always_nonzero):
    """Row matched to each column, using always-nonzero entries only.

    Prefers diagonal entries (a safe diagonal is kept as is). Raises IllPosedError naming the
    rows and columns left unmatched when the safe structure has no perfect matching.
    """
    safe = safe_structure(pattern, always_nonzero)
    err = unmatched_error(safe, "on its always-nonzero entries")
    if err is not None:
        raise err
    # Weight 1 on the diagonal, 2 elsewhere: the cheapest perfect matching keeps every safe
    # diagonal entry it can, so "natural" stays natural on already well-ordered systems.
    coo = safe.tocoo()
    weights = np.where(coo.row == coo.col, 1.0, 2.0)
    weighted = sp.csr_matrix((weights, (coo.row, coo.col)), shape=safe.shape)
    rows, cols = min_weight_full_bipartite_matching(weighted)
    match = np.empty(pattern.shape[0], dtype=np.int64)
    match[cols] = rows
    return match


def _symmetric_structure(matched):
    """Structure of M + M^T with a nonzero diagonal (values are irrelevant to the orderings)."""
    struct = abs(matched) + abs(matched.T)
    struct = struct.tocsc()
    struct.data[:] = 1.0
    return (struct + sp.identity(struct.shape[0], format="csc") * struct.shape[0]).tocsc()


def _superlu_order(matched, spec):
    from scipy.sparse.linalg import splu
    n = matched.shape[0]
    # Diagonal dominance on the given pattern: SuperLU computes perm_c before any numerics, but
    # must not fail while factoring.
    numeric = matched.copy().astype(float)
    numeric.data[:] = 1.0
    numeric = (numeric + sp.identity(n, format="csc") * (2.0 * n)).tocsc()
    lu = splu(numeric, permc_spec=spec)
    return np.argsort(lu.perm_c)  # perm_c[i] is the new position of column i


def _cholmod_order(matched, method):
    from sksparse.cholmod import analyze
    try:
        factor = analyze(_symmetric_structure(matched), ordering_method=method)
    except Exception as exc:  # CHOLMOD reports a missing METIS as a generic CholmodError
        raise OrderingUnavailable(f"CHOLMOD ordering {method!r} failed: {exc}") from exc
    return np.asarray(factor.P(), dtype=np.int64)


def _bfs_levels(adj, degree, start, allowed):
    """Breadth-first levels from start over the nodes marked in allowed."""
    seen = {start}
    levels, frontier = [], [start]
    while frontier:
        levels.append(frontier)
        nxt = []
        for u in frontier:
            for w in sorted(adj[u], key=lambda w: (degree[w], w)):
                if allowed[w] and w not in seen:
                    seen.add(w)
                    nxt.append(w)
        frontier = nxt
    return levels


def _rcm_order(matched):
    """Reverse Cuthill-McKee on the graph of M + M^T (George & Liu): each component from a
    pseudo-peripheral node, neighbours visited by increasing (degree, index). Every tie is
    broken by the node index, so the order depends on the pattern alone (not on a library's
    version or on hash seeds)."""
    sym = _symmetric_structure(matched).tocsr()
    n = sym.shape[0]
    adj = [[int(w) for w in sym.indices[sym.indptr[i]:sym.indptr[i + 1]] if w != i]
           for i in range(n)]
    degree = [len(a) for a in adj]
    unvisited = np.ones(n, dtype=bool)
    order = []
    for seed in range(n):
        if not unvisited[seed]:
            continue
        start = seed
        levels = _bfs_levels(adj, degree, start, unvisited)
        while True:          # pseudo-peripheral node: the farthest level's lowest degree
            last = min(levels[-1], key=lambda w: (degree[w], w))
            deeper = _bfs_levels(adj, degree, last, unvisited)
            if len(deeper) <= len(levels):
                break
            start, levels = last, deeper
        for level in levels:
            order.extend(level)
            unvisited[level] = False
    return np.asarray(order[::-1], dtype=np.int64)


def _min_degree_order(matched):
    """Plain minimum-degree elimination on the graph of M + M^T (explicit cliques, lazy heap)."""
    sym = _symmetric_structure(matched).tocsr()
    n = sym.shape[0]
    adj = [set(sym.indices[sym.indptr[i]:sym.indptr[i + 1]]) - {i} for i in range(n)]
    heap = [(len(adj[i]), i) for i in range(n)]
    heapq.heapify(heap)
    done = np.zeros(n, dtype=bool)
    order = []
    while heap:
        deg, v = heapq.heappop(heap)
        if done[v] or deg != len(adj[v]):
            continue
        done[v] = True
        order.append(v)
        nbrs = adj[v]
        for u in nbrs:
            adj[u].discard(v)
            adj[u] |= nbrs - {u}
            heapq.heappush(heap, (len(adj[u]), u))
    return np.asarray(order, dtype=np.int64)


def _markowitz_order(matched):
    """Greedy unsymmetric elimination of M restricted to its (safe) diagonal: the next pivot k
    minimises the Markowitz cost (r_k - 1)(c_k - 1) of the active submatrix, i.e. the number of
    multiply-adds its elimination costs; ties go to the smaller fill, then the smaller index."""
    n = matched.shape[0]
    csc = matched.tocsc()
    csr = matched.tocsr()
    row_cols = [set(csr.indices[csr.indptr[i]:csr.indptr[i + 1]].tolist()) for i in range(n)]
    col_rows = [set(csc.indices[csc.indptr[j]:csc.indptr[j + 1]].tolist()) for j in range(n)]

    def cost(k):
        return (len(row_cols[k]) - 1) * (len(col_rows[k]) - 1), len(row_cols[k]) + len(col_rows[k]), k

    heap = [cost(k) for k in range(n)]
    heapq.heapify(heap)
    done = np.zeros(n, dtype=bool)
    order = []
    while heap:
        entry = heapq.heappop(heap)
        k = entry[2]
        if done[k] or entry != cost(k):
            continue
        done[k] = True
        order.append(k)
        rows = col_rows[k] - {k}
        cols = row_cols[k] - {k}
        for i in rows:
            row_cols[i].discard(k)
            new = cols - row_cols[i]
            row_cols[i] |= new
            for j in new:
                col_rows[j].add(i)
        for j in cols:
            col_rows[j].discard(k)
        for v in rows | cols:
            heapq.heappush(heap, cost(v))
    return np.asarray(order, dtype=np.int64)


def _block_triangular_order(matched):
    """Block lower-triangular form of M (strong components in topological order), AMD inside.

    A column j must precede row i whenever M[i, j] != 0; a triangularizable system gets 1x1 blocks
    and therefore zero fill.
    """
    n = matched.shape[0]
    coo = matched.tocoo()
    off = coo.row != coo.col
    graph = sp.csr_matrix((np.ones(off.sum()), (coo.col[off], coo.row[off])), shape=(n, n))
    n_comp, label = connected_components(graph, directed=True, connection="strong")
    dag = nx.DiGraph()
    dag.add_nodes_from(range(n_comp))
    src, dst = label[coo.col[off]], label[coo.row[off]]
    cross = src != dst
    dag.add_edges_from(zip(src[cross].tolist(), dst[cross].tolist()))
    members = [[] for _ in range(n_comp)]
    for v in range(n):
        members[label[v]].append(v)
    order = []
    for comp in nx.lexicographical_topological_sort(dag):
        block = np.asarray(members[comp], dtype=np.int64)
        if block.size > 2:
            block = block[_cholmod_order(matched[block][:, block], "amd")]
        order.extend(block.tolist())
    return np.asarray(order, dtype=np.int64)


def column_order(name, matched):
    """Column order q (new -> old) of the named strategy for the safe-diagonal matrix M."""
    n = matched.shape[0]
    if name == "natural":
        return np.arange(n, dtype=np.int64)
    if name in SUPERLU_ORDERINGS:
        return _superlu_order(matched, SUPERLU_ORDERINGS[name])
    if name in CHOLMOD_ORDERINGS:
        return _cholmod_order(matched, name)
    if name == "rcm":
        return _rcm_order(matched)
    if name == "min_degree":
        return _min_degree_order(matched)
    if name == "btf":
        return _block_triangular_order(matched)
    if name == "markowitz":
        return _markowitz_order(matched)
    raise ValueError(f"ordering: unknown name {name!r}; known: {', '.join(KNOWN_ORDERINGS)}")


def matched_pair(match, col_order):
    """(row_perm, col_perm) putting the matched (safe) entries on the diagonal."""
    col_order = np.asarray(col_order, dtype=np.int64)
    return match[col_order], col_order
