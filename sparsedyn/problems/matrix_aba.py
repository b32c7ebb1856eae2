"""Matrix ABA: forward dynamics by Nori's matrix reformulation of the articulated-body algorithm,
W^L D W^R d + W^L b = 0 with W^L D W^R lower triangular (seed 001, Sec. V-C, Property 2, proof in
Appendix B), evaluated with sparse matrix products and one forward substitution; its operation
count is the "forward substitution" (matrix-ABA) curve of Nori's Fig. 1.

On D of forward dynamics with every tau_i and fx_i measured (problems.forward_dynamics(model,
f_ext=True)), given the articulated inertias I^A_i (eq. 13, recursive/_osim_common.Pivot):

    W^R     (29)  W^R[f_i, a_i] = I^A_i                 Step 1: f_i stands for p^A_i = f_i - I^A_i a_i
    W^{L,1} (30)  W[c_tau_i, c_a_i] = S_i^T I^A_i       Step 2: a_i substituted in (3tau_i)
    W^{L,2} (31)  W[c_tau_i, c_tau_i] = (S_i^T I^A_i S_i)^-1   Step 3
    W^{L,3} (32)  W[c_a_i, c_tau_i] = -S_i              Step 4: qdd_i substituted in (3a_i)
    W^{L,4} (33)  W[c_f_i, c_a_j] = iX*_j I^A_j, j in mu(i)    Step 5: a_j substituted in (3f_i)
    (34), (35)    columns [fx_i, tau_i]_i, f_N..f_1, a_1..a_N, qdd_1..qdd_N; rows in the same
                  order (measurements, (3f_N)..(3f_1), (3a_1)..(3a_N), (3tau_1)..(3tau_N))

(every W also has a unit diagonal, W^{L,2} but on the c_tau rows). T = W^L D W^R is formed as
W^{L,4}(W^{L,3}(W^{L,2}(W^{L,1} D))) W^R, the right-hand side as W^L rhs, then T y = W^L rhs by
forward substitution and d = W^R y. Entries the steps cancel exactly in exact arithmetic (I^A_i
in (3f_i), S_i^T I^A_i a_i in (3tau_i)) are round-off here: below TOLERANCE times the largest
entry they are dropped, anything larger in the upper triangle raises (Property 2 violated).

Counted like Nori's code (bnt_time_varying ABA/serial/compare: mult_cost, fw_cost), per state:
every scalar product of the sparse products but those by +-1, one addition per further term of
an entry (on the products' structure: an entry whose terms cancel is still computed), and the
forward substitution's off-diagonal multiply-adds and non-unit diagonal divisions; plus the
articulated inertias the W need (Pivot, as the recursive algorithms charge them). Not counted, as for the LU
columns: assembling D(q) and b(q, qd). One state at a time (a reference, not a fast path).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve_triangular

from ..batch import state
from ..errors import SingularModelError
from ..kinematics import body_velocities, joint_transforms
from ..model.model import WORLD
from ..opcount import charge, suspended
from ..recursive._osim_common import Pivot, initial_inertias
from .dynamics import forward_dynamics

#: relative size (against the largest |entry| of T) of an entry taken as an exact cancellation
TOLERANCE = 1e-11


def matrix_aba(model, q, qd, tau, f_ext_body=None):
    """qdd (nv,) for one state; f_ext_body (N, 6): body-frame wrenches, angular-first (None: 0)."""
    q, vec, B, _ = state(model, q, qd=qd, tau=tau)
    if B != 1:
        raise ValueError(f"matrix_aba: one state at a time, got a batch of {B}")
    qd, tau = vec["qd"], vec["tau"]
    N = model.nbodies
    fx = np.zeros((N, 6)) if f_ext_body is None else np.asarray(f_ext_body, dtype=float).reshape(N, 6)
    with suspended():                                              # assembly: not counted
        system = forward_dynamics(model, f_ext=True).system()
        rows, cols = system.rows, system.columns
        Xup = joint_transforms(model, q)
        measured = {("fx", i): fx[i][None] for i in range(N)}
        measured.update({("tau", i): tau[:, model.v_slice(i)] for i in range(N)})
        D = sp.csc_matrix((system.values(Xup)[0], system.pattern.indices, system.pattern.indptr),
                          shape=system.shape)
        rhs = system.rhs(Xup, body_velocities(model, Xup, qd), qd, measured)[0]
    IA = initial_inertias(model, 1)
    pivots = [None] * N
    for i in range(N - 1, -1, -1):                                 # eq. (13): I^A_i
        pivots[i] = Pivot(model, IA[i], i)
        if model.parents[i] != WORLD:
            # two-product rotations, as the ABA it is compared with (recursive/aba.py)
            IA[model.parents[i]] += pivots[i].articulated_to_parent(Xup[i], IA[i], by_axis=False)
    W = {k: sp.lil_matrix(system.shape) for k in ("R", 1, 2, 3, 4)}
    for k in W:
        W[k].setdiag(1.0)
    for i, piv in enumerate(pivots):
        f, a, ct, ca, cf = (cols[("f", i)].slice, cols[("a", i)].slice, rows[("ne_tau", i)].slice,
                            rows[("ne_a", i)].slice, rows[("ne_f", i)].slice)
        W["R"][f, a] = IA[i][0]                                    # (29)
        W[1][ct, ca] = piv.U[0].T                                  # (30)
        W[2][ct, ct] = np.atleast_2d(piv.Dinv[0])                  # (31)
        W[3][ca, ct] = -piv.S                                      # (32)
        p = int(model.parents[i])
        if p != WORLD:                                             # (33): pX*_i I^A_i
            XT = Xup[i].matrix()[0].T
            _product(_with_structure(XT), _with_structure(IA[i][0]))
            W[4][rows[("ne_f", p)].slice, ca] = XT @ IA[i][0]
    T = (D.tocsr(), _ones(D))                                      # (values, structure)
    r = _with_structure(sp.csr_matrix(rhs[:, None]))
    for k in (1, 2, 3, 4):                                         # Steps 2-5, left products
        Wk = _with_structure(W[k].tocsr())
        T, r = _product(Wk, T), _product(Wk, r)
    WR = _with_structure(W["R"].tocsr())
    T = _product(T, WR)[0]                                         # Step 1, right product
    row_perm, col_perm = _permutations(model, rows, cols)          # (34), (35)
    Tp = T.tocsr()[row_perm][:, col_perm].tocoo()
    scale = np.abs(Tp.data).max()
    keep = np.abs(Tp.data) > TOLERANCE * scale
    upper = keep & (Tp.col > Tp.row)
    if upper.any():
        k = int(np.argmax(np.where(upper, np.abs(Tp.data), 0)))
        raise SingularModelError(f"matrix_aba: W^L D W^R is not lower triangular under eq. (34)-(35) "
                                 f"(entry {Tp.data[k]:.3g} at permuted row {Tp.row[k]}, column "
                                 f"{Tp.col[k]}, model {model.name!r})")
    L = sp.csr_matrix((Tp.data[keep], (Tp.row[keep], Tp.col[keep])), shape=Tp.shape)
    coo = L.tocoo()
    strict = coo.col < coo.row
    diag = coo.data[~strict]
    charge(int(np.sum(~_unit(coo.data[strict]))), int(strict.sum()),
           div=int(np.sum(~_unit(diag))), kind="forward substitution")
    y_perm = spsolve_triangular(L, r[0].toarray()[row_perm, 0], lower=True)
    y = np.empty_like(y_perm)
    y[col_perm] = y_perm
    x = _product(WR, _with_structure(sp.csr_matrix(y[:, None])))[0].toarray()[:, 0]   # d = W^R y
    return np.concatenate([x[cols[("qdd", i)].slice] for i in range(N)])


def _permutations(model, rows, cols):
    """Eq. (34) (columns) and (35) (rows), as index arrays (new -> old)."""
    N = model.nbodies
    col_keys = [(k, i) for i in range(N) for k in ("fx", "tau")]
    row_keys = [("y_" + k, i) for i in range(N) for k in ("fx", "tau")]
    col_keys += [("f", i) for i in range(N - 1, -1, -1)] + [("a", i) for i in range(N)]
    row_keys += [("ne_f", i) for i in range(N - 1, -1, -1)] + [("ne_a", i) for i in range(N)]
    col_keys += [("qdd", i) for i in range(N)]
    row_keys += [("ne_tau", i) for i in range(N)]
    return rows.permutation(row_keys), cols.permutation(col_keys)


def _unit(values):
    """Entries equal to +-1 (to round-off: Step 3 makes the qdd pivots D^-1 D = 1)."""
    return np.abs(np.abs(values) - 1) <= TOLERANCE


def _ones(M):
    """The stored entries of M (its structure) as ones."""
    M = sp.csr_matrix(M, copy=True)
    M.data[:] = 1.0
    return M


def _with_structure(M):
    """(values, structure) of a matrix whose zeros are structural (the W, a right-hand side):
    entries at round-off size (I^A_i's structural zeros, computed) are zeros."""
    M = sp.csr_matrix(M, copy=True)
    if M.nnz:
        M.data[np.abs(M.data) <= TOLERANCE * np.abs(M.data).max()] = 0.0
    M.eliminate_zeros()
    return M, _ones(M)


def _product(A, B):
    """(values, structure) of A B. The structure is the product of the structures: an entry whose
    terms cancel at this state is still computed, so the count does not depend on the state."""
    (Av, As), (Bv, Bs) = A, B
    _charge_product(Av, As, Bv, Bs)
    return (Av @ Bv).tocsr(), _ones(As @ Bs)


def _charge_product(Av, As, Bv, Bs):
    """Charge the sparse product A B as Nori's mult_cost counts it, without its omission of the
    multiplications: a product by an exact +-1 is free, an entry of z terms costs z - 1 additions."""
    def nonunit(V, S):
        unit = sp.csr_matrix(V, copy=True)
        unit.data = _unit(unit.data).astype(float)
        return S - S.multiply(unit)
    terms = (As @ Bs).tocsr()
    charge(int((nonunit(Av, As) @ nonunit(Bv, Bs)).sum()), int(terms.sum()) - terms.nnz,
           kind="matrix-ABA products")
