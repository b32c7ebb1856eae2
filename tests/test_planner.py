"""Offline planner: orderings, symbolic LU, flop counts, breakdown handling, stored plans.

Oracles: numpy.linalg.solve on the dense matrix, a dense LU without pivoting of the permuted matrix
(its L and U patterns give the exact flop count), scipy.sparse.linalg.spsolve.
"""
from __future__ import annotations


import numpy as np
import pytest
import scipy.sparse as sp
from lu_ops import apply_op
from scipy.sparse.linalg import spsolve

from sparsedyn import IllPosedError, SingularModelError
from sparsedyn.opcount import count_operations
from sparsedyn.planner import KNOWN_ORDERINGS, Factorization, PivotBreakdownWarning, plan_factorization


# ---------------------------------------------------------------- test systems (shared with test_kernels)
class System:
    """A square sparse system: pattern, masks, entry coordinates and a sampler of states."""

    def __init__(self, rows, cols, n, always, const, sample):
        order = np.lexsort((rows, cols))
        self.rows, self.cols = rows[order], cols[order]
        self.always, self.const = always[order], const[order]
        self.pattern = sp.csc_matrix((np.ones(rows.size), (self.rows, self.cols)), shape=(n, n))
        assert self.pattern.nnz == rows.size and self.pattern.has_canonical_format
        self.n = n
        self._sample, self._order = sample, order

    def sample(self, B, rng):
        return self._sample(B, rng)[:, self._order]

    def dense(self, values):
        D = np.zeros((values.shape[0], self.n, self.n))
        D[:, self.rows, self.cols] = values
        return D


def hidden_diagonal(n, per_col=3, seed=0):
    """Random sparse matrix, diagonally dominant on an always-nonzero diagonal hidden under random
    row and column permutations."""
    rng = np.random.default_rng(seed)
    r = np.concatenate([np.arange(n), rng.integers(0, n, n * per_col)])
    c = np.concatenate([np.arange(n), rng.integers(0, n, n * per_col)])
    keep = np.unique(r * n + c)
    r, c = keep // n, keep % n
    diag = r == c
    pr, pc = rng.permutation(n), rng.permutation(n)

    def sample(B, rng):
        v = rng.normal(size=(B, r.size))
        v[:, diag] = (2.0 + per_col * 2) * np.sign(v[:, diag]) + v[:, diag]
        return v

    return System(pr[r], pc[c], n, diag, np.full(r.size, np.nan), sample)


def block_tridiagonal(n_blocks, size=4, seed=0):
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for i in range(n_blocks):
        for j in (i - 1, i, i + 1):
            if 0 <= j < n_blocks:
                rr, cc = np.meshgrid(np.arange(size) + i * size, np.arange(size) + j * size,
                                     indexing="ij")
                rows.append(rr.ravel())
                cols.append(cc.ravel())
    r, c = np.concatenate(rows), np.concatenate(cols)
    diag = r == c
    perm = rng.permutation(n_blocks * size)

    def sample(B, rng):
        v = rng.normal(size=(B, r.size))
        v[:, diag] += 4.0 * size
        return v

    return System(perm[r], c, n_blocks * size, diag, np.full(r.size, np.nan), sample)


def lower_triangular(n, per_row=3, seed=0, hide=True):
    """Lower-triangular matrix with a constant -1 diagonal, optionally under hidden permutations."""
    rng = np.random.default_rng(seed)
    r = rng.integers(1, n, n * per_row)
    c = (rng.random(r.size) * r).astype(int)
    keep = np.unique(np.concatenate([np.arange(n) * (n + 1), r * n + c]))
    r, c = keep // n, keep % n
    diag = r == c
    const = np.where(diag, -1.0, np.nan)
    pr, pc = (rng.permutation(n), rng.permutation(n)) if hide else (np.arange(n), np.arange(n))

    def sample(B, rng):
        v = rng.normal(size=(B, r.size)) / per_row
        v[:, diag] = -1.0
        return v

    return System(pr[r], pc[c], n, diag, const, sample)


def _rot_z(q):
    c, s = np.cos(q), np.sin(q)
    E = np.zeros(q.shape + (3, 3))
    E[..., 0, 0], E[..., 0, 1], E[..., 1, 0], E[..., 1, 1], E[..., 2, 2] = c, s, -s, c, 1.0
    return E


#: newton_euler_chain's layout: (offset, size) of each variable / row block within a link's 20
_NE_VAR = {"a": (0, 6), "f": (6, 6), "tau": (12, 1), "fx": (13, 6), "qdd": (19, 1)}
_NE_ROW = {"ca": (0, 6), "cf": (6, 6), "ctau": (12, 1), "mfx": (13, 6), "m1": (19, 1)}


def _ne_ids(i, table, name):
    off, size = table[name]
    return list(range(20 * i + off, 20 * i + off + size))


def chain_aba_order(n_links):
    """Appendix B's elimination order on newton_euler_chain's "fd" layout, as (rows, cols): the
    measured fx_i, tau_i first, then for i = N..1 the pivot blocks (c_f_i, f_i), (c_a_i, a_i) and
    (c_tau_i, qdd_i); the last is a structural zero that the first two fill with S^T I^A S."""
    rows, cols = [], []
    for i in range(n_links):
        rows += _ne_ids(i, _NE_ROW, "mfx") + _ne_ids(i, _NE_ROW, "m1")
        cols += _ne_ids(i, _NE_VAR, "fx") + _ne_ids(i, _NE_VAR, "tau")
    for i in range(n_links - 1, -1, -1):
        for r, c in (("cf", "f"), ("ca", "a"), ("ctau", "qdd")):
            rows += _ne_ids(i, _NE_ROW, r)
            cols += _ne_ids(i, _NE_VAR, c)
    return np.array(rows), np.array(cols)


def newton_euler_chain(n_links, problem, seed=0):
    """Nori's Newton-Euler system (eq. 5) of a serial chain of revolute-z joints, angular-first,
    with the measurement rows of inverse ("id": qdd, fx) or forward ("fd": tau, fx) dynamics.

    Per link 20 variables (a 6, f 6, tau 1, fx 6, qdd 1) and 20 rows (c_a 6, c_f 6, c_tau 1,
    fx measurement 6, qdd or tau measurement 1). X = [[E, 0], [-E r x, E]] with E = Rz(q) R0 is
    state dependent; inertias, S and the -1 blocks are known constants.
    Returns (System, rnea_order) with rnea_order the lower-triangular ID order of eq. 11-12.
    """
    rng = np.random.default_rng(seed)
    VAR, ROW = _NE_VAR, _NE_ROW
    R0 = np.linalg.qr(rng.normal(size=(n_links, 3, 3)))[0]
    r_off = rng.normal(size=(n_links, 3)) * 0.3
    skew = np.zeros((n_links, 3, 3))
    skew[:, 0, 1], skew[:, 0, 2], skew[:, 1, 2] = -r_off[:, 2], r_off[:, 1], -r_off[:, 0]
    skew -= skew.transpose(0, 2, 1)
    ents = []  # row, col, const (nan: from X), always, (link, transposed, a, b)

    def block(i_row, rname, i_col, vname, mat=None, xlink=None, transposed=False):
        r0, nr = ROW[rname]
        c0, nc = VAR[vname]
        xmask = np.zeros((6, 6), bool)
        xmask[:3, :3] = xmask[3:, 3:] = xmask[3:, :3] = True
        for a in range(nr):
            for b in range(nc):
                if mat is not None:
                    if mat[a, b] != 0:
                        always = mat[a, b] in (1.0, -1.0) or (rname == "cf" and vname == "a" and a == b)
                        ents.append((20 * i_row + r0 + a, 20 * i_col + c0 + b, mat[a, b], always, None))
                elif (xmask.T if transposed else xmask)[a, b]:
                    ents.append((20 * i_row + r0 + a, 20 * i_col + c0 + b, np.nan, False,
                                 (xlink, transposed, a, b)))

    S = np.zeros((6, 1))
    S[2, 0] = 1.0
    for i in range(n_links):
        m, c = rng.uniform(0.5, 2.0), rng.normal(size=3) * 0.1
        cx = np.array([[0, -c[2], c[1]], [c[2], 0, -c[0]], [-c[1], c[0], 0]])
        inertia = np.block([[np.diag(rng.uniform(0.01, 0.1, 3)) + m * cx @ cx.T, m * cx],
                            [m * cx.T, m * np.eye(3)]])
        block(i, "ca", i, "a", -np.eye(6))
        if i > 0:
            block(i, "ca", i - 1, "a", xlink=i)
        block(i, "ca", i, "qdd", S)
        block(i, "cf", i, "f", -np.eye(6))
        block(i, "cf", i, "a", inertia)
        block(i, "cf", i, "fx", -np.eye(6))
        if i + 1 < n_links:
            block(i, "cf", i + 1, "f", xlink=i + 1, transposed=True)
        block(i, "ctau", i, "tau", -np.eye(1))
        block(i, "ctau", i, "f", S.T)
        block(i, "mfx", i, "fx", np.eye(6))
        block(i, "m1", i, "qdd" if problem == "id" else "tau", np.eye(1))
    r = np.array([e[0] for e in ents])
    c = np.array([e[1] for e in ents])
    const = np.array([e[2] for e in ents], dtype=float)
    always = np.array([e[3] for e in ents])
    dyn = np.flatnonzero(np.isnan(const))
    tag = np.array([ents[k][4] for k in dyn], dtype=int)

    def sample(B, rng):
        E = _rot_z(rng.uniform(-np.pi, np.pi, (B, n_links))) @ R0
        X = np.zeros((B, n_links, 6, 6))
        X[..., :3, :3] = X[..., 3:, 3:] = E
        X[..., 3:, :3] = -E @ skew
        v = np.broadcast_to(np.nan_to_num(const), (B, const.size)).copy()
        a = np.where(tag[:, 1] == 0, tag[:, 2], tag[:, 3])
        b = np.where(tag[:, 1] == 0, tag[:, 3], tag[:, 2])
        v[:, dyn] = X[:, tag[:, 0], a, b]
        return v

    # eq. 11-12: qdd, fx known; a forward (root to tip); f backward; tau last
    ids = _ne_ids
    links, back = range(n_links), range(n_links - 1, -1, -1)
    cols = ([k for i in links for k in ids(i, VAR, "qdd")] + [k for i in links for k in ids(i, VAR, "fx")]
            + [k for i in links for k in ids(i, VAR, "a")] + [k for i in back for k in ids(i, VAR, "f")]
            + [k for i in links for k in ids(i, VAR, "tau")])
    rows = ([k for i in links for k in ids(i, ROW, "m1")] + [k for i in links for k in ids(i, ROW, "mfx")]
            + [k for i in links for k in ids(i, ROW, "ca")] + [k for i in back for k in ids(i, ROW, "cf")]
            + [k for i in links for k in ids(i, ROW, "ctau")])
    return System(r, c, 20 * n_links, always, const, sample), (np.array(rows), np.array(cols))


def plan(system, **kw):
    return plan_factorization(system.pattern, system.always, system.const, **kw)


def rel_err(x, ref):
    return float(np.abs(x - ref).max() / np.abs(ref).max())


def dense_solve(system, values, rhs):
    return np.linalg.solve(system.dense(values), rhs[..., None])[..., 0]


def dense_lu_no_pivot(A):
    """Doolittle LU without pivoting of a dense matrix (L unit lower, U upper)."""
    U = A.astype(float).copy()
    n = U.shape[0]
    L = np.eye(n)
    for k in range(n):
        L[k + 1:, k] = U[k + 1:, k] / U[k, k]
        U[k + 1:, k:] -= np.outer(L[k + 1:, k], U[k, k:])
        U[k + 1:, k] = 0.0
    return L, U


SYSTEMS = {
    "hidden_diagonal": lambda: hidden_diagonal(60, per_col=2, seed=3),
    "block_tridiagonal": lambda: block_tridiagonal(12, size=4, seed=1),
    "ne_fd": lambda: newton_euler_chain(4, "fd")[0],
}


# ---------------------------------------------------------------- solutions
@pytest.mark.parametrize("name", sorted(SYSTEMS))
@pytest.mark.parametrize("ordering", KNOWN_ORDERINGS)
def test_every_ordering_solves_like_dense_numpy(name, ordering):
    system = SYSTEMS[name]()
    rng = np.random.default_rng(7)
    values, rhs = system.sample(5, rng), rng.normal(size=(5, system.n))
    fact = plan(system, ordering=ordering, backend="numpy")
    assert fact.stats["ordering"] == ordering
    assert rel_err(fact.solve(values, rhs), dense_solve(system, values, rhs)) <= 1e-10


@pytest.mark.parametrize("problem", ["id", "fd"])
def test_newton_euler_chain_matches_spsolve(problem):
    system, _ = newton_euler_chain(20, problem, seed=2)
    rng = np.random.default_rng(3)
    values, rhs = system.sample(3, rng), rng.normal(size=(3, system.n))
    fact = plan(system)
    x = fact.solve(values, rhs)
    for b in range(3):
        A = sp.csc_matrix((values[b], system.pattern.indices, system.pattern.indptr), shape=system.pattern.shape)
        assert rel_err(x[b], spsolve(A, rhs[b])) <= 1e-10


def test_auto_picks_the_cheapest_safe_candidate():
    system = hidden_diagonal(80, seed=5)
    fact = plan(system)
    safe = [r for r in fact.table if r["pivot_safe"]]
    assert {r["name"] for r in fact.table} == set(KNOWN_ORDERINGS)
    assert fact.stats["flops"] == min(r["flops"] for r in safe)
    assert fact.stats["ordering"] in {r["name"] for r in safe if r["flops"] == fact.stats["flops"]}
    for r in fact.table:
        assert r["time_s"] >= 0.0
        if not r["pivot_safe"]:  # e.g. CHOLMOD without METIS: the reason is recorded
            assert r["note"]


# ---------------------------------------------------------------- symbolic factorization and flops
@pytest.mark.parametrize("name", sorted(SYSTEMS))
@pytest.mark.parametrize("ordering", ["natural", "colamd", "amd", "btf"])
def test_patterns_and_flops_match_dense_lu_without_pivoting(name, ordering):
    system = SYSTEMS[name]()
    rng = np.random.default_rng(11)
    # no constants: every stored entry is generic, so the dense factors' nonzeros are the structure
    fact = plan_factorization(system.pattern, system.always, ordering=ordering)
    A = system.dense(rng.normal(size=(1, system.pattern.nnz)) + 0.0)[0]
    A[system.rows[system.always], system.cols[system.always]] += 50.0
    L, U = dense_lu_no_pivot(A[np.ix_(fact.row_perm, fact.col_perm)])
    Lnz, Unz = np.abs(np.tril(L, -1)) > 0, np.abs(np.triu(U)) > 0
    n = system.n
    L_count, U_count = Lnz.sum(axis=0), Unz.sum(axis=1) - 1
    updates = int((L_count * U_count).sum())
    nnzL, nnzU_off = int(Lnz.sum()), int(Unz.sum()) - n
    assert fact.stats["nnz_LU"] == nnzL + nnzU_off + n
    assert fact.stats["fill"] == fact.stats["nnz_LU"] - system.pattern.nnz
    fill = nnzL + nnzU_off + n - system.pattern.nnz
    # factorization: per pivot 1 reciprocal, min(|L_k|, |U_k|) scalings, |L_k||U_k| multiply-adds
    # except that the first update of a fill entry is a product only; solves: one multiply-add
    # per off-diagonal entry of L and U, one scaling per pivot
    scalings = int(np.minimum(L_count, U_count).sum())
    assert fact.stats["div"] == n
    assert fact.stats["mul"] == scalings + updates + nnzL + nnzU_off + n
    assert fact.stats["add"] == updates - fill + nnzL + nnzU_off
    assert fact.stats["flops"] == fact.stats["mul"] + fact.stats["add"] + fact.stats["div"]


@pytest.mark.parametrize("hide", [False, True])
def test_permuted_lower_triangular_has_zero_fill(hide):
    system = lower_triangular(120, seed=4, hide=hide)
    fact = plan(system, ordering="natural" if not hide else "btf")
    assert fact.stats["fill"] == 0
    # -1 pivots cost nothing: one multiply-add per strictly lower entry, no division
    offdiag = system.pattern.nnz - system.n
    assert (fact.stats["mul"], fact.stats["add"], fact.stats["div"]) == (offdiag, offdiag, 0)
    rng = np.random.default_rng(0)
    values, rhs = system.sample(4, rng), rng.normal(size=(4, system.n))
    assert rel_err(fact.solve(values, rhs), dense_solve(system, values, rhs)) <= 1e-10


def test_inverse_dynamics_rnea_order_is_forward_substitution():
    system, rnea_order = newton_euler_chain(10, "id", seed=1)
    fact = plan(system, ordering="rnea", structural_orders={"rnea": rnea_order})
    assert fact.stats["fill"] == 0
    perm = sp.csr_matrix(system.pattern)[rnea_order[0]][:, rnea_order[1]]
    assert sp.triu(perm, 1).nnz == 0
    # triangular with known +-1 diagonal: an off-diagonal entry costs an addition, plus a
    # multiplication unless it is a known +-1
    pos_r = np.empty(system.n, int)
    pos_r[rnea_order[0]] = np.arange(system.n)
    pos_c = np.empty(system.n, int)
    pos_c[rnea_order[1]] = np.arange(system.n)
    diag = pos_r[system.rows] == pos_c[system.cols]
    assert np.all(np.abs(system.const[diag]) == 1.0)
    unit = np.abs(system.const) == 1.0
    assert fact.stats["add"] == int((~diag).sum())
    assert fact.stats["mul"] == int((~diag & ~unit).sum())
    assert fact.stats["div"] == 0
    rng = np.random.default_rng(1)
    values, rhs = system.sample(3, rng), rng.normal(size=(3, system.n))
    assert rel_err(fact.solve(values, rhs), dense_solve(system, values, rhs)) <= 1e-10
    # the generic planner finds a zero-fill order on its own
    assert plan(system).stats["fill"] == 0


def test_unsafe_structural_order_is_rejected():
    system, (rows, cols) = newton_euler_chain(3, "fd")
    with pytest.raises(ValueError, match="rnea"):
        plan(system, ordering="rnea", structural_orders={"rnea": (rows, cols)})
    fact = plan(system, structural_orders={"rnea": (rows, cols)})
    row = next(r for r in fact.table if r["name"] == "rnea")
    assert row["pivot_safe"] is False and "always-nonzero" in row["note"]
    assert fact.stats["ordering"] != "rnea"


def test_trusted_structural_order_accepts_fill_created_pivots():
    """Nori's ABA order on the hand-built FD chain: its qdd pivots are structural zeros of D.
    As a plain (rows, cols) pair it is refused; declared trusted it is planned, every
    state-dependent fill-created pivot is divided out through a checked reciprocal, "auto" takes
    it when it is the cheapest, and both backends solve like dense NumPy."""
    from sparsedyn.ir.instructions import RECIP
    from sparsedyn.planner import TRUSTED
    n_links = 6
    system, _ = newton_euler_chain(n_links, "fd", seed=4)
    order = chain_aba_order(n_links)
    with pytest.raises(ValueError, match="always-nonzero.*trusted"):
        plan(system, ordering="aba", structural_orders={"aba": order})
    fact = plan(system, ordering="aba", structural_orders={"aba": (*order, TRUSTED)})
    prog, stored = fact.program, system.pattern.tocsr()
    fill = [k for k in range(system.n) if stored[prog.row_perm[k], prog.col_perm[k]] == 0]
    qdd_cols = {k for i in range(n_links) for k in _ne_ids(i, _NE_VAR, "qdd")}
    assert {int(prog.col_perm[k]) for k in fill} == qdd_cols
    # the first pivot eliminated is the tip's S^T I S: a known constant, folded offline
    checked = set(prog.op_b[prog.op_code == RECIP].tolist())
    assert [k for k in fill if k not in checked] == [fill[0]]
    auto = plan(system, structural_orders={"aba": (*order, TRUSTED)})
    row = next(r for r in auto.table if r["name"] == "aba")
    assert row["pivot_safe"] and row["note"].startswith(TRUSTED) and str(n_links) in row["note"]
    assert auto.stats["flops"] == min(r["flops"] for r in auto.table if r["pivot_safe"])
    rng = np.random.default_rng(5)
    values, rhs = system.sample(7, rng), rng.normal(size=(7, system.n))
    for backend in ("numpy", "numba"):
        assert rel_err(fact.solve(values, rhs, backend=backend),
                       dense_solve(system, values, rhs)) <= 1e-10


def test_trusted_fill_pivot_that_vanishes_is_caught():
    """D = [[1, 0, x1], [0, 1, x2], [y1, y2, .]]: the last pivot -(y1 x1 + y2 x2) exists only
    through fill. A state where it vanishes (exactly, or to round-off) fails the online check and
    splu finds D singular too: SingularModelError naming the state, on both backends."""
    from sparsedyn.planner import TRUSTED
    pattern = sp.csc_matrix(np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0.0]]))
    always = np.isin(np.arange(pattern.nnz), [0, 2])               # CSC order: D[0, 0], D[1, 1]
    natural = (np.arange(3), np.arange(3))
    with pytest.raises(ValueError, match="always-nonzero"):
        plan_factorization(pattern, always, ordering="nat", structural_orders={"nat": natural})
    fact = plan_factorization(pattern, always, ordering="nat",
                              structural_orders={"nat": (*natural, TRUSTED)})
    assert fact.stats["fill"] == 1
    good = np.array([[1.0, 0, 2], [0, 1, 3], [0.5, -1, 0]])
    eps = np.finfo(float).eps
    dense = [good, np.array([[1.0, 0, 1], [0, 1, 1], [1, -1, 0]]),
             np.array([[1.0, 0, 1], [0, 1, 1 + eps], [1, -1, 0]])]
    values = np.stack([np.array([d[0, 0], d[2, 0], d[1, 1], d[2, 1], d[0, 2], d[1, 2]])
                       for d in dense])
    assert np.array_equal(sp.csc_matrix(good).data, values[0])
    rhs = np.ones((3, 3))
    for backend in ("numpy", "numba"):
        with pytest.raises(SingularModelError, match=r"\[1, 2\]") as info:
            fact.solve(values, rhs, backend=backend)
        assert info.value.batch_indices == (1, 2)
        x, ok = fact.solve(values, rhs, return_status=True, backend=backend)
        assert ok.tolist() == [True, False, False]
        assert rel_err(x[0], np.linalg.solve(good, rhs[0])) <= 1e-14


def test_structural_order_must_be_a_pair_or_a_trusted_triple():
    system, order = newton_euler_chain(2, "id")
    for bad in ((*order, True), (*order, "sure"), (order[0],), "rnea"):
        with pytest.raises(ValueError, match=r"structural_orders\['rnea'\]"):
            plan(system, ordering="rnea", structural_orders={"rnea": bad})


# ---------------------------------------------------------------- symmetric (L D L^T) plans
def spd_system(n=50, seed=0):
    """Random SPD matrices G G^T + I on the fixed pattern of G G^T (no constants)."""
    G = sp.random(n, n, density=0.05, random_state=seed) + sp.identity(n)
    r, c = sp.csc_matrix((G @ G.T) != 0, dtype=float).nonzero()

    def sample(B, rng):
        out = np.empty((B, r.size))
        for b in range(B):
            Gb = G.copy()
            Gb.data = rng.normal(size=Gb.nnz)
            out[b] = (Gb @ Gb.T + sp.identity(n)).toarray()[r, c]
        return out

    return System(r, c, n, r == c, np.full(r.size, np.nan), sample)


def quasi_definite(m=30, k=20, seed=0):
    """K = [[I, B], [B^T, -diag(c)]]: constant diagonal blocks (folded offline), B state-dependent;
    symmetric indefinite, yet factorizable with diagonal pivots in any order."""
    rng = np.random.default_rng(seed)
    Bp = sp.random(m, k, density=0.15, random_state=seed).tocoo()
    nb = Bp.nnz
    r = np.concatenate([np.arange(m), Bp.row, m + Bp.col, m + np.arange(k)])
    c = np.concatenate([np.arange(m), m + Bp.col, Bp.row, m + np.arange(k)])
    const = np.concatenate([np.ones(m), np.full(2 * nb, np.nan), -rng.uniform(0.5, 2.0, k)])

    def sample(B, rng):
        v = np.tile(np.nan_to_num(const), (B, 1))
        v[:, m:m + nb] = v[:, m + nb:m + 2 * nb] = rng.normal(size=(B, nb))
        return v

    return System(r, c, m + k, r == c, const, sample)


SYMMETRIC = {"spd": spd_system, "quasi_definite": quasi_definite}


def run_factorization(program, values):
    """The factorization part of a program for one state, op by op as lu_numpy's docstring
    defines the op codes (no kernel involved): the work vector after it."""
    w = np.zeros(program.n_slots)
    w[program.init_slots] = program.init_values
    w[program.load_entries] = values[program.load_entries]
    for o in range(program.n_factor_ops):
        apply_op(w, *(int(x[o]) for x in (program.op_code, program.op_t, program.op_a,
                                           program.op_b)))
    return w


@pytest.mark.parametrize("name", sorted(SYMMETRIC))
@pytest.mark.parametrize("ordering", ["natural", "amd", "rcm", "metis"])
def test_symmetric_plan_computes_l_d_lt(name, ordering):
    """symmetric=True: the program's factors (run op by op) satisfy L D L^T == P N P^T (dense
    NumPy); the solutions equal numpy.linalg.solve on both kernels, for one and several
    right-hand sides; and the factorization costs less than the LU of the same order."""
    from sparsedyn.planner.symbolic_ldlt import symbolic_ldlt
    system = SYMMETRIC[name]()
    fact = plan(system, ordering=ordering, symmetric=True)
    assert fact.stats["symmetric"] and np.array_equal(fact.row_perm, fact.col_perm)
    sym = symbolic_ldlt(system.pattern, fact.col_perm, system.const)
    assert all(np.array_equal(v, getattr(fact.program, k)) for k, v in sym.program.arrays().items())
    rng = np.random.default_rng(8)
    values = system.sample(4, rng)
    n, perm = system.n, fact.col_perm
    for b in range(2):
        w = run_factorization(fact.program, values[b])
        val = lambda op: op[0] if op[0] == op[0] else op[2] * w[op[1]]   # noqa: E731
        L, d = np.eye(n), np.array([1.0 / val(inv) for inv in sym.ldlt[1]])
        for i, k, op in sym.ldlt[0]:
            L[i, k] = val(op)
        N = system.dense(values[b:b + 1])[0][np.ix_(perm, perm)]
        assert np.abs(L @ np.diag(d) @ L.T - N).max() <= 1e-12 * np.abs(N).max()
    rhs = rng.normal(size=(4, n, 3))
    ref = np.linalg.solve(system.dense(values), rhs)
    for backend in ("numpy", "numba"):
        assert rel_err(fact.solve(values, rhs, backend=backend), ref) <= 1e-10
        assert rel_err(fact.solve(values, rhs[:, :, 0], backend=backend), ref[:, :, 0]) <= 1e-10
    lu = plan(system, ordering=ordering)
    factor = lambda f: f.stats["flops"] - f.stats["solve_flops"]        # noqa: E731
    assert factor(fact) < factor(lu) and fact.stats["solve_flops"] <= lu.stats["solve_flops"]


def test_symmetric_plan_flops_match_dense_cholesky_pattern():
    """Exact count without constants, from the pattern of the dense Cholesky factor of the
    permuted matrix: per pivot 1 reciprocal, |L_k| scalings, |L_k| (|L_k| + 1) / 2 multiply-adds
    (the first into a fill entry a product only); solves 2 per entry of L and 1 per pivot."""
    system = spd_system(60, seed=2)
    fact = plan(system, ordering="amd", symmetric=True)
    perm, n = fact.col_perm, system.n
    N = system.dense(system.sample(1, np.random.default_rng(0)))[0][np.ix_(perm, perm)]
    Lnz = np.abs(np.tril(np.linalg.cholesky(N), -1)) > 0
    counts = Lnz.sum(axis=0)
    updates = int((counts * (counts + 1) // 2).sum())
    fill = int(Lnz.sum()) - int((np.tril(N, -1) != 0).sum())
    nnzL = int(Lnz.sum())
    assert fact.stats["nnz_LU"] == 2 * nnzL + n and fact.stats["fill"] == 2 * fill
    assert fact.stats["div"] == n
    assert fact.stats["mul"] == nnzL + updates + 2 * nnzL + n
    assert fact.stats["add"] == updates - fill + 2 * nnzL


def test_auto_symmetric_plan_is_the_cheapest_and_round_trips(tmp_path):
    system = quasi_definite(seed=3)
    fact = plan(system, symmetric=True)
    assert fact.stats["flops"] == min(r["flops"] for r in fact.table if r["pivot_safe"])
    np.savez(tmp_path / "plan.npz", **fact.to_dict())
    with np.load(tmp_path / "plan.npz") as f:
        loaded = Factorization.from_dict(dict(f))
    assert loaded.program.symmetric and loaded.stats == fact.stats
    rng = np.random.default_rng(2)
    values, rhs = system.sample(3, rng), rng.normal(size=(3, system.n))
    assert np.array_equal(loaded.solve(values, rhs), fact.solve(values, rhs))


def test_symmetric_plan_bad_input_names_the_argument():
    system = spd_system(20, seed=1)
    with pytest.raises(ValueError, match="pattern.*structurally symmetric"):
        plan(hidden_diagonal(10), symmetric=True)
    always = system.always.copy()
    always[np.flatnonzero(system.always)[3]] = False
    with pytest.raises(ValueError, match=r"always_nonzero.*\[3\]"):
        plan_factorization(system.pattern, always, symmetric=True)
    const = system.const.copy()
    off = np.flatnonzero(system.rows != system.cols)[0]
    const[off] = 2.0                                      # its transpose stays state-dependent
    with pytest.raises(ValueError, match="constant_values"):
        plan_factorization(system.pattern, system.always, const, symmetric=True)
    n = system.n
    with pytest.raises(ValueError, match="same permutation"):
        plan(system, ordering="rev", symmetric=True,
             structural_orders={"rev": (np.arange(n)[::-1], np.arange(n))})
    fact = plan(system, symmetric=True)
    values = system.sample(3, np.random.default_rng(0))
    values[2, off] += 1e-6 * np.abs(values[2]).max()     # no longer symmetric
    with pytest.raises(ValueError, match=r"values.*symmetric.*\[2\]"):
        fact.solve(values, np.ones((3, n)))


def test_symmetric_plan_catches_a_cancelled_pivot():
    """N = [[1, 0, x1], [0, 1, x2], [x1, x2, x1^2 + x2^2]] is singular (rank 2): its last pivot
    cancels to round-off and fails the check; splu agrees: SingularModelError, both backends."""
    pattern = sp.csc_matrix(np.array([[1, 0, 1], [0, 1, 1], [1, 1, 1.0]]))
    always = pattern.indices == np.repeat(np.arange(3), np.diff(pattern.indptr))
    fact = plan_factorization(pattern, always, ordering="natural", symmetric=True)
    x1, x2 = 1.0 + 2.0 ** -30, 3.0 - 2.0 ** -28
    singular = np.array([[1, 0, x1], [0, 1, x2], [x1, x2, x1 * x1 + x2 * x2]])
    good = np.array([[2.0, 0, 1], [0, 3, 1], [1, 1, 4]])
    values = np.stack([sp.csc_matrix(good).data, sp.csc_matrix(singular).data])
    for backend in ("numpy", "numba"):
        with pytest.raises(SingularModelError, match=r"\[1\]") as info:
            fact.solve(values, np.ones((2, 3)), backend=backend)
        assert info.value.batch_indices == (1,)
        x, ok = fact.solve(values, np.ones((2, 3)), return_status=True, backend=backend)
        assert ok.tolist() == [True, False] and np.isnan(x[1]).all()
        assert rel_err(x[0], np.linalg.solve(good, np.ones(3))) <= 1e-14


# ---------------------------------------------------------------- breakdown and singular states
def _three_by_three():
    """[[1,1,0],[1,1,1],[0,1,1]]: nonsingular, but the second pivot cancels without pivoting."""
    pattern = sp.csc_matrix(np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1.0]]))
    return pattern, np.isin(np.arange(pattern.nnz), [0, 3, 6])  # CSC order: diagonal entries


def test_cancelled_pivot_is_resolved_with_partial_pivoting():
    pattern, always = _three_by_three()
    fact = plan_factorization(pattern, always, ordering="natural")
    good = np.array([2.0, 1.0, 1.0, 3.0, 1.0, 1.0, 4.0])
    values = np.stack([good, pattern.data, good])
    rhs = np.arange(9.0).reshape(3, 3) + 1
    with pytest.warns(PivotBreakdownWarning, match=r"\[1\]"):
        x = fact.solve(values, rhs)
    D = np.stack([pattern.toarray()] * 3)
    D[0] = D[2] = sp.csc_matrix((good, pattern.indices, pattern.indptr)).toarray()
    assert rel_err(x, np.linalg.solve(D, rhs[..., None])[..., 0]) <= 1e-12


def test_zero_always_nonzero_entry_is_resolved():
    system = hidden_diagonal(40, seed=2)
    rng = np.random.default_rng(4)
    values, rhs = system.sample(6, rng), rng.normal(size=(6, system.n))
    fact = plan(system, ordering="amd")
    # zero, in state 4, the first pivot entry that no update reaches and whose loss keeps D
    # nonsingular: the static pivot is then exactly 0
    for k in range(system.n):
        trial = values[4].copy()
        trial[(system.rows == fact.row_perm[k]) & (system.cols == fact.col_perm[k])] = 0.0
        D = system.dense(trial[None])[0]
        with np.errstate(divide="ignore", invalid="ignore"):
            _, U = dense_lu_no_pivot(D[np.ix_(fact.row_perm, fact.col_perm)])
        if U[k, k] == 0.0 and np.linalg.matrix_rank(D) == system.n:
            values[4] = trial
            break
    else:
        pytest.fail("no pivot can be zeroed without making D singular")
    for backend in ("numpy", "numba"):
        with pytest.warns(PivotBreakdownWarning, match=r"\[4\]"):
            x, ok = fact.solve(values, rhs, return_status=True, backend=backend)
        assert ok.all()
        assert rel_err(x, dense_solve(system, values, rhs)) <= 1e-10


def test_singular_state_raises_with_batch_index():
    pattern, always = _three_by_three()
    fact = plan_factorization(pattern, always, ordering="natural")
    singular = np.array([1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0])  # row 1 = row 0 + row 2
    D = sp.csc_matrix((singular, pattern.indices, pattern.indptr)).toarray()
    assert np.linalg.matrix_rank(D) < 3
    good = np.array([2.0, 1.0, 1.0, 3.0, 1.0, 1.0, 4.0])
    values, rhs = np.stack([good, singular]), np.ones((2, 3))
    with pytest.raises(SingularModelError, match=r"\[1\]") as info:
        fact.solve(values, rhs)
    assert info.value.batch_indices == (1,)
    x, ok = fact.solve(values, rhs, return_status=True)
    assert ok.tolist() == [True, False]
    assert np.isnan(x[1]).all() and np.isfinite(x[0]).all()


def test_pivot_cancelled_during_elimination_is_caught():
    """D = [[1, 0, x1], [0, 1, x2], [y1, y2, z]] with z = y1 x1 + y2 x2 (rounded from the exact
    value): the last pivot z - y1 x1 - y2 x2 cancels products of ~32 to round-off (7e-15), which
    is still above tol times its row's original entries (~0.02): only weighing it against what
    was subtracted from it exposes it. splu then finds D numerically singular too."""
    pattern = sp.csc_matrix(np.array([[1, 0, 1], [0, 1, 1], [1, 1, 1.0]]))
    always = np.isin(np.arange(pattern.nnz), [0, 2, 6])          # CSC order: the diagonal
    fact = plan_factorization(pattern, always, ordering="natural")
    x1, x2 = 18574.042765875693, -18574.025439472753
    y1, y2, z = 0.001729655446429944, 0.0017285334383852567, 0.020870174672529225
    D = np.array([[1, 0, x1], [0, 1, x2], [y1, y2, z]])
    pivot = (z - y1 * x1) - y2 * x2
    assert pivot != 0 and pivot == (z - y2 * x2) - y1 * x1
    assert abs(pivot) > fact.program.tol * max(y1, y2, z)        # passes a row-scale check
    sv = np.linalg.svd(D, compute_uv=False)
    assert sv[-1] <= 1e-16 * sv[0]                               # NumPy: numerically singular
    good = np.array([[2.0, 0, 1], [0, 3, 1], [1, 1, 4]])
    values = np.stack([sp.csc_matrix(good).data, sp.csc_matrix(D).data])
    rhs = np.ones((2, 3))
    for backend in ("numpy", "numba"):
        with pytest.raises(SingularModelError, match=r"\[1\]") as info:
            fact.solve(values, rhs, backend=backend)
        assert info.value.batch_indices == (1,)
        x, ok = fact.solve(values, rhs, return_status=True, backend=backend)
        assert ok.tolist() == [True, False] and np.isnan(x[1]).all()
        assert rel_err(x[0], np.linalg.solve(good, rhs[0])) <= 1e-14


# ---------------------------------------------------------------- ill-posed patterns and bad input
def test_structurally_singular_pattern_names_rows_and_columns():
    dense = np.array([[1, 1, 0], [1, 1, 0], [1, 1, 1.0]])
    pattern = sp.csc_matrix(dense)
    always = np.ones(pattern.nnz, bool)
    always[pattern.indices == 2] = False  # row 2 has no safe entry: rank 2 on the safe structure
    with pytest.raises(IllPosedError, match="unmatched rows") as info:
        plan_factorization(pattern, always)
    assert info.value.rows == (2,)
    assert info.value.cols == (2,)


def test_bad_arguments_name_themselves():
    system = hidden_diagonal(10)
    with pytest.raises(ValueError, match="ordering.*known: .*amd"):
        plan(system, ordering="umfpack")
    with pytest.raises(ValueError, match="always_nonzero"):
        plan_factorization(system.pattern, system.always[:-1])
    with pytest.raises(ValueError, match="constant_values"):
        plan_factorization(system.pattern, system.always, np.ones(3))
    with pytest.raises(ValueError, match="pattern"):
        plan_factorization(sp.csc_matrix(np.ones((2, 3))), np.ones(6, bool))
    with pytest.raises(ValueError, match="backend"):
        plan(system, backend="cuda")
    fact = plan(system)
    with pytest.raises(ValueError, match="values"):
        fact.solve(np.ones(3), np.ones(system.n))
    with pytest.raises(ValueError, match="rhs"):
        fact.solve(system.sample(1, np.random.default_rng(0)), np.full(system.n, np.nan))


# ---------------------------------------------------------------- storage and accounting
def test_stored_plan_round_trips_through_a_file(tmp_path):
    system = newton_euler_chain(3, "fd")[0]
    fact = plan(system)
    np.savez(tmp_path / "plan.npz", **fact.to_dict())
    with np.load(tmp_path / "plan.npz") as f:
        loaded = Factorization.from_dict(dict(f))
    rng = np.random.default_rng(2)
    values, rhs = system.sample(4, rng), rng.normal(size=(4, system.n))
    assert np.array_equal(loaded.solve(values, rhs), fact.solve(values, rhs))
    assert loaded.stats == fact.stats
    assert [r["name"] for r in loaded.table] == [r["name"] for r in fact.table]


def test_corrupt_or_foreign_plans_are_rejected():
    fact = plan(hidden_diagonal(20))
    d = fact.to_dict()
    with pytest.raises(ValueError, match="format"):
        Factorization.from_dict({**d, "format": "something.else"})
    with pytest.raises(ValueError, match="version"):
        Factorization.from_dict({**d, "version": 99})
    with pytest.raises(ValueError, match="missing"):
        Factorization.from_dict({k: v for k, v in d.items() if k != "program_op_t"})
    tampered = {**d, "program_op_a": d["program_op_a"].copy()}
    tampered["program_op_a"][0] += 1
    with pytest.raises(ValueError, match="checksum"):
        Factorization.from_dict(tampered)
    with pytest.raises(ValueError, match="mapping"):
        Factorization.from_dict(42)


def test_operation_counter_is_charged_per_state():
    system = block_tridiagonal(5)
    fact = plan(system)
    rng = np.random.default_rng(0)
    with count_operations() as ops:
        fact.solve(system.sample(7, rng), rng.normal(size=(7, system.n)))
    s = fact.stats
    assert (ops.mul, ops.add, ops.div) == (7 * s["mul"], 7 * s["add"], 7 * s["div"])
    assert ops.by_kind["sparse LU"] == 7 * s["flops"]


# ---------------------------------------------------------------- Nori's system (sparsedyn.system)
@pytest.mark.parametrize("problem, recursive_flops", [("qdd", 174 * 50 - 208), ("tau", 429 * 50 - 507)])
def test_newton_euler_system_of_a_50_link_chain(problem, recursive_flops):
    """ID (qdd, fx measured) within 1.5x RNEA's count, FD (tau, fx) within 1.5x ABA's
    (Featherstone's 174 N_B - 208 and 429 N_B - 507), and solutions equal to dense NumPy."""
    system_mod = pytest.importorskip("sparsedyn.system")
    from sparsedyn.kinematics import forward_kinematics
    from sparsedyn.models import serial_chain
    model = serial_chain(50)
    measured = [(problem, i) for i in range(50)] + [("fx", i) for i in range(50)]
    ne = system_mod.NewtonEulerSystem(model, measured=measured)
    fact = plan_factorization(ne.pattern, ne.always_nonzero, ne.constant_values,
                              structural_orders=ne.structural_orders)
    assert fact.stats["flops"] <= 1.5 * recursive_flops
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng, batch=3)
    values = ne.values(forward_kinematics(model, q, rng.normal(size=(3, model.nv))).Xup)
    rhs = rng.normal(size=(3, ne.shape[0]))
    assert rel_err(fact.solve(values, rhs), np.linalg.solve(ne.dense(values), rhs[..., None])[..., 0]) <= 1e-10
