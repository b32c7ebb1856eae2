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

Inverse dynamics (given="qdd"): the bodies whose coordinates are independent keep the
measurement rows qdd_i = ydd_i (eq. 8), the dependent bodies the torque rows above with
y_tau_i = 0 (no actuator on a dependent joint), so -K^T lambda enters only at dependent
coordinates; the unknowns are the dependent qdd (fixed by the loop rows), lambda (by the
dependent torque rows, K_z^T invertible) and the tree's tau, a, f. The independent torques are
then tau_y = tau_y_joints - K_y^T lambda (independent_torques): the actuator torque is the joint
force minus the loop's share of it.

Preconditions: q assembled (loop closures hold), qd spanning with K qd = 0 (not checked: the
Lagrange system is solvable for any qd and then is the Lagrange solution at that qd); for
inverse dynamics, no body whose joint mixes independent and dependent coordinates.
"""
from __future__ import annotations

import numpy as np

from ..errors import ModelError
from ..kinematics import body_velocities, joint_transforms
from ..opcount import charge
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

    def __init__(self, cluster_model, fx_bodies=(), tol=STRUCTURAL_TOLERANCE, given="tau"):
        cm = self.cluster_model = cluster_model
        model = self.model = cm.model
        N = model.nbodies
        fx_bodies = tuple(sorted(set(int(b) for b in fx_bodies)))
        if given not in ("tau", "qdd"):
            raise ValueError(f"given: expected 'tau' (forward) or 'qdd' (inverse dynamics), got {given!r}")
        self.given = given
        independent = np.zeros(model.nv, bool)
        independent[cm.independent_v] = True
        kinds = []
        for i in range(N):
            ind = independent[model.v_slice(i)]
            if given == "qdd" and ind.any() and not ind.all():
                raise ModelError(f"link {model.link_names[i]!r}: its joint mixes independent and dependent "
                                 "coordinates; loop inverse dynamics needs one or the other per joint")
            kinds.append("qdd" if given == "qdd" and ind.all() else "tau")
        measured = [(kind, i) for i, kind in enumerate(kinds)] + [("fx", i) for i in fx_bodies]
        self.tree = NewtonEulerSystem(model, measured, fx_bodies=fx_bodies)
        m0, n0 = self.tree.shape
        self.n_tree_rows, self.n_tree_cols = m0, n0
        self.shape = (m0 + cm.nc, n0 + cm.nc)
        qdd_col, tau_row = np.empty(model.nv, np.int64), np.full(model.nv, -1, np.int64)
        tau_col = np.empty(model.nv, np.int64)
        for i in range(N):
            qdd_col[model.v_slice(i)] = self.tree.columns[("qdd", i)].indices
            tau_col[model.v_slice(i)] = self.tree.columns[("tau", i)].indices
            if kinds[i] == "tau":
                tau_row[model.v_slice(i)] = self.tree.rows[("y_tau", i)].indices
        # one entry list per K entry (r, j) of each cluster; it appears twice in D: K_rj in loop
        # row r on qdd (K_k qdd_k = k_k) and -K_rj in the tau row of coordinate j on lambda_r
        loop_row, qdd, tau, lam, val, pivot, coord = [], [], [], [], [], [], []
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
            coord.append(v[j])
            count += len(r)
        cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
        loop_row, qdd, tau, lam, coord = (cat(x, np.int64) for x in (loop_row, qdd, tau, lam, coord))
        val, pivot = cat(val, float), cat(pivot, bool)
        # -K^T lambda sits in the torque rows only (inverse dynamics: the dependent coordinates)
        self._force_mask = tau >= 0
        m = self._force_mask
        P = self.tree.pattern
        tree_part = (P.indices, np.repeat(np.arange(n0), np.diff(P.indptr)), self.tree.constant_values)
        self._combined = combine_parts(self.shape, [tree_part, (loop_row, qdd, val),
                                                    (tau[m], lam[m], -val[m])])
        self.pattern = self._combined.pattern
        self.constant_values = self._combined.constant_values
        self.always_nonzero = self._combined.always_nonzero
        candidates = np.concatenate((self.tree.always_nonzero, pivot, pivot[m]))
        self.pivot_candidates = candidates[self._combined.gather]
        self._loop_template = np.where(np.isnan(val), 0.0, val)
        # the K entries at independent coordinates: tau_y = tau_joint - K_y^T lambda
        ind = ~m if given == "qdd" else np.zeros(len(val), bool)
        self._indep_entries = np.flatnonzero(ind)
        self._indep_lambda = lam[ind] - n0
        y_of_v = np.full(model.nv, -1)
        y_of_v[cm.independent_v] = np.arange(cm.ny)
        self._indep_y = y_of_v[coord[ind]]
        self._tau_y_cols = tau_col[cm.independent_v]

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

    @property
    def rows(self):
        """The tree's named row blocks (the loop rows follow them)."""
        return self.tree.rows

    @property
    def output_flops(self):
        """Operations of independent_torques per state (0 for forward dynamics)."""
        return 2 * len(self._indep_entries)

    def lambda_slice(self, k):
        """Columns of cluster k's constraint forces in the solution vector."""
        start = self.n_tree_cols + self.cluster_model.c_index[k]
        return slice(start, start + self.cluster_model.clusters[k].nc)

    # ------------------------------------------------------------------ online assembly

    def _loop_values(self, q, qd):
        """(K entries (B, n_entries) in the entry-list order, k (B, nc)) at (q, qd)."""
        cm = self.cluster_model
        B = q.shape[0]
        loop = np.repeat(self._loop_template[None], B, axis=0)
        k_all = np.zeros((B, cm.nc))            # a constant K has k = -Kdot qd = 0
        for k, r, j, ids in self._dynamic:
            K, kk = cm.clusters[k].implicit(q[:, cm.q_indices[k]], qd[:, cm.v_indices[k]])
            loop[:, ids] = K[:, r, j]
            k_all[:, cm.constraint_rows(k)] = kk
        return loop, k_all

    def values(self, q, Xup):
        """D's entries (B, nnz) at batched, checked q with its joint transforms Xup (velocity-free:
        what the Delassus matrix needs)."""
        loop, _ = self._loop_values(q, np.zeros((q.shape[0], self.model.nv)))
        return self._combined.values([self.tree.values(Xup), loop, -loop[:, self._force_mask]])

    def assemble(self, q, qd, y_s, fx=None, with_K=False):
        """(values (B, nnz), rhs (B, n)) for batched, checked q (B, nq), spanning qd (B, nv), the
        given spanning vector y_s (B, nv) (forward dynamics: the spanning torque of the applied
        torques; inverse dynamics: the spanning qdd, read at the independent coordinates) and
        internal fx (B, len(fx_bodies), 6). with_K: also the K entries (for independent_torques)."""
        cm, model, tree = self.cluster_model, self.model, self.tree
        Xup = joint_transforms(model, q)
        measured = {(kind, i): (y_s[:, model.v_slice(i)] if kind == "qdd" else
                                np.zeros((q.shape[0], model.joints[i].nv)) if self.given == "qdd" else
                                y_s[:, model.v_slice(i)])
                    for kind, i in tree.measured if kind != "fx"}
        for n, i in enumerate(tree.fx_bodies):
            measured[("fx", i)] = fx[:, n]
        rhs_tree = tree.rhs(Xup, body_velocities(model, Xup, qd), qd, measured)
        loop, k_all = self._loop_values(q, qd)
        values = self._combined.values([tree.values(Xup), loop, -loop[:, self._force_mask]])
        out = (values, np.concatenate((rhs_tree, k_all), axis=1))
        return out + (loop,) if with_K else out

    def independent_torques(self, x, loop):
        """tau_y (B, ny) = tau at the independent joints - K_y^T lambda, from the solution x and
        the K entries `loop` of assemble(..., with_K=True) (inverse dynamics)."""
        lam = x[:, self.n_tree_cols:]
        tau_y = x[:, self._tau_y_cols].copy()
        n = len(self._indep_entries)
        charge(n, n, kind="K_y^T lambda")
        np.subtract.at(tau_y.T, self._indep_y, (loop[:, self._indep_entries] * lam[:, self._indep_lambda]).T)
        return tau_y

    def unpack(self, x):
        """x (B, n) -> {(kind, body): (B, size)} of the tree's variable blocks (views)."""
        return self.tree.unpack(x[:, :self.n_tree_cols])

    def joint_columns(self, kind):
        """The tree's (the lambda columns follow the tree's columns)."""
        return self.tree.joint_columns(kind)
