"""Loop-closure rows and constraint-force columns on Nori's forward-dynamics system of a spanning
tree: forward dynamics with kinematic loops in Lagrange form (seed 001, eq. 3, 15-17, extended by
the implicit loop constraints of seed 003, Sec. II-B eq. 2 and Sec. II-D).

On the spanning tree, H qdd + C = tau_s + K^T lambda and K qdd = k (k = -Kdot qd), where tau_s
is the spanning torque of the applied actuator torques (ClusterModel.spanning_torque). In D
(seed 001, eq. 16) this adds, per cluster k with n_c > 0 loop constraints:

    columns  lambda_k (n_c): the constraint forces of the cluster's loops
    (15tau_i)  0 = tau_i - (K^T lambda)_i - y_tau_i     the joint force S_i^T f_i is the applied
               torque plus the loop's constraint force (-K^T entries on lambda_k, rows of the
               cluster's bodies only: K_k touches the cluster's coordinates only)
    loop_k   0 = K_k qdd_k - k_k                        on the qdd blocks of the cluster's bodies

Worst-case pattern (Remark 4): a constant K (geared motors, belt transmissions: constant_K) is
stored by its nonzero entries with their values; a q-dependent K (four-bars, user constraints)
by every entry over the cluster's coordinates, all state-dependent — the constraint's structure
is unknown to the system, so every entry may be nonzero.

Static pivots (planner): D's constants as in the tree system, plus the entries of K_z and -K_z^T
at the cluster's dependent coordinates z for q-dependent K: K_z is invertible wherever the
explicit form G = [1; -K_z^-1 K_y] exists (the precondition of the cluster algorithms), so
those entries are nonzero except on a measure-zero set of states (breakdowns are re-solved with
partial pivoting by the planner's Factorization).

Preconditions: q assembled (loop closures hold), qd spanning with K qd = 0 (not checked: the
Lagrange system is solvable for any qd and then is the Lagrange solution at that qd).
"""
from __future__ import annotations

import numpy as np

from ..kinematics import body_velocities, joint_transforms
from .assemble import NewtonEulerSystem
from .combine import combine_parts
from .pattern import STRUCTURAL_TOLERANCE


class LoopSystem:
    """Forward dynamics with loops on the spanning tree of `cluster_model`: the tree's
    NewtonEulerSystem (measured tau_i and fx_i of `fx_bodies`) composed with the loop rows and
    lambda columns on one CSC pattern (system.combine).

    Contract with the planner as NewtonEulerSystem: `pattern`, `constant_values`, plus
    `pivot_candidates` (the entries static pivots may use, see the module docstring);
    `structural_orders` is empty (Nori's orders do not cover the loop rows)."""

    def __init__(self, cluster_model, fx_bodies=(), tol=STRUCTURAL_TOLERANCE):
        cm = self.cluster_model = cluster_model
        model = self.model = cm.model
        N = model.nbodies
        fx_bodies = tuple(sorted(set(int(b) for b in fx_bodies)))
        measured = [("tau", i) for i in range(N)] + [("fx", i) for i in fx_bodies]
        self.tree = NewtonEulerSystem(model, measured, fx_bodies=fx_bodies)
        m0, n0 = self.tree.shape
        self.n_tree_rows, self.n_tree_cols = m0, n0
        self.shape = (m0 + cm.nc, n0 + cm.nc)
        qdd_col, tau_row = np.empty(model.nv, np.int64), np.empty(model.nv, np.int64)
        for i in range(N):
            qdd_col[model.v_slice(i)] = self.tree.columns[("qdd", i)].indices
            tau_row[model.v_slice(i)] = self.tree.rows[("y_tau", i)].indices
        # one entry list per K entry (r, j) of each cluster; it appears twice in D: K_rj in loop
        # row r on qdd (K_k qdd_k = k_k) and -K_rj in the tau row of coordinate j on lambda_r
        loop_row, qdd, tau, lam, val, pivot = [], [], [], [], [], []
        self._dynamic = []          # (cluster, r, j, entry ids) of q-dependent K
        count = 0
        for k, c in enumerate(cm.clusters):
            if c.nc == 0:
                continue
            K = c.constant_K
            if K is None:
                r, j = np.nonzero(np.ones((c.nc, c.nv), bool))
                val.append(np.full(len(r), np.nan))
                pivot.append(np.isin(j, np.setdiff1d(np.arange(c.nv), c.independent_local)))
                self._dynamic.append((k, r, j, count + np.arange(len(r))))
            else:
                K = np.asarray(K, dtype=float)
                r, j = np.nonzero(np.abs(K) > tol * max(1.0, np.abs(K).max()))
                val.append(K[r, j])
                pivot.append(np.ones(len(r), bool))
            v = cm.v_indices[k]
            loop_row.append(m0 + cm.c_index[k] + r)
            lam.append(n0 + cm.c_index[k] + r)
            qdd.append(qdd_col[v[j]])
            tau.append(tau_row[v[j]])
            count += len(r)
        cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
        loop_row, qdd, tau, lam = (cat(x, np.int64) for x in (loop_row, qdd, tau, lam))
        val, pivot = cat(val, float), cat(pivot, bool)
        P = self.tree.pattern
        tree_part = (P.indices, np.repeat(np.arange(n0), np.diff(P.indptr)), self.tree.constant_values)
        self._combined = combine_parts(self.shape, [tree_part, (loop_row, qdd, val), (tau, lam, -val)])
        self.pattern = self._combined.pattern
        self.constant_values = self._combined.constant_values
        self.always_nonzero = self._combined.always_nonzero
        candidates = np.concatenate((self.tree.always_nonzero, pivot, pivot))
        self.pivot_candidates = candidates[self._combined.gather]
        self._loop_template = np.where(np.isnan(val), 0.0, val)
        self._force_template = -self._loop_template

    # ------------------------------------------------------------------ offline data

    @property
    def nnz(self):
        return self.pattern.nnz

    @property
    def structural_orders(self):
        return {}

    @property
    def columns(self):
        """The tree's named variable blocks (the lambda columns follow them)."""
        return self.tree.columns

    def lambda_slice(self, k):
        """Columns of cluster k's constraint forces in the solution vector."""
        start = self.n_tree_cols + self.cluster_model.c_index[k]
        return slice(start, start + self.cluster_model.clusters[k].nc)

    # ------------------------------------------------------------------ online assembly

    def assemble(self, q, qd, tau_s, fx=None):
        """(values (B, nnz), rhs (B, n)) for batched, checked q (B, nq), spanning qd (B, nv), the
        spanning torque tau_s (B, nv) of the applied torques and internal fx (B, len(fx_bodies), 6)."""
        cm, model, tree = self.cluster_model, self.model, self.tree
        B = q.shape[0]
        Xup = joint_transforms(model, q)
        measured = {("tau", i): tau_s[:, model.v_slice(i)] for i in range(model.nbodies)}
        for n, i in enumerate(tree.fx_bodies):
            measured[("fx", i)] = fx[:, n]
        rhs_tree = tree.rhs(Xup, body_velocities(model, Xup, qd), qd, measured)
        loop = np.repeat(self._loop_template[None], B, axis=0)
        force = np.repeat(self._force_template[None], B, axis=0)
        k_all = np.zeros((B, cm.nc))            # a constant K has k = -Kdot qd = 0
        for k, r, j, ids in self._dynamic:
            K, kk = cm.clusters[k].implicit(q[:, cm.q_indices[k]], qd[:, cm.v_indices[k]])
            loop[:, ids] = K[:, r, j]
            force[:, ids] = -K[:, r, j]
            k_all[:, cm.constraint_rows(k)] = kk
        values = self._combined.values([tree.values(Xup), loop, force])
        return values, np.concatenate((rhs_tree, k_all), axis=1)

    def unpack(self, x):
        """x (B, n) -> {(kind, body): (B, size)} of the tree's variable blocks (views)."""
        return self.tree.unpack(x[:, :self.n_tree_cols])
