"""Batched assembly of Nori's Newton-Euler system D(q) d + b(q, qd) = 0 (seed 001, eq. 3, 5a-5e,
6) extended by measurement rows (eq. 8-9, 15, 17), exposed through a fixed worst-case pattern.

    (3a_i)    0 = -a_i + iX_lambda(i) a_lambda(i) + S_i qdd_i + c_i       c_i = v_i x S_i qd_i
    (3f_i)    0 = -f_i + I_i a_i - fx_i + sum_j iX*_j f_j + nu_i          nu_i = v_i x* I_i v_i
    (3tau_i)  0 = -tau_i + S_i^T f_i + diag(armature_i) qdd_i   (rotor inertia, model.armature;
              zero in the seed: a constant entry of D only where the armature is nonzero)
    (8, 15)   0 = d_block - y           (17): 0 = Y d_block - y for a constant selector Y

At the root, a_lambda(i) = a_0 = -a_g is known and moves into b (Sec. III-A). The system solved
is D x = rhs with rhs = -b. Everything is internal (angular-first, body frames); conversion to
the public linear-first convention happens in problems/plan.py.

Preconditions: a tree with parent(i) < i; q already batched and checked (batch.state).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..kinematics import body_velocities, joint_transforms
from ..model.model import WORLD
from ..opcount import charge, count_operations
from ..ir.lu_program import TRUSTED
from ..recursive._common import S_times, gravity_acceleration, inertia_times
from ..spatial import cross3, cross_force, cross_motion
from .blocks import CONSTRAINT_KINDS, ROW_KINDS, VARIABLE_KINDS, BlockLayout, aba_order, rnea_order
from .pattern import SystemPattern


class NewtonEulerSystem:
    """D(q), b(q, qd) of one model with a given set of measured variable blocks.

    measured:  iterable of (variable kind, body) blocks fixed by a measurement row (eq. 8, 15),
               or (kind, body, selector): the rows selector @ d_block = y with a constant
               (m x size) selector (eq. 17 for sensors that see part of a block, e.g. the
               load cells of Sec. VI measuring some components of a foot's fx)
    fx_bodies: bodies that carry an external-wrench variable fx_i (default: every body)

    Contract with the planner (sparsedyn.planner): `pattern`, `always_nonzero`,
    `constant_values`, `structural_orders`; online: `values(Xup)` (B, nnz) in the pattern's CSC
    data order and `rhs(...)` (B, n_rows).
    """

    def __init__(self, model, measured=(), fx_bodies=None):
        self.model = model
        N = model.nbodies
        self.fx_bodies = tuple(range(N)) if fx_bodies is None else tuple(sorted(set(int(b) for b in fx_bodies)))
        for b in self.fx_bodies:
            if not 0 <= b < N:
                raise ValueError(f"fx_bodies: body index {b} is not a body of model {model.name!r}")
        col_entries = []
        for i, joint in enumerate(model.joints):
            col_entries += [("a", i, 6), ("f", i, 6), ("tau", i, joint.nv), ("qdd", i, joint.nv)]
        col_entries += [("fx", i, 6) for i in self.fx_bodies]
        self.columns = BlockLayout(col_entries, VARIABLE_KINDS)
        row_entries = [(kind, i, self.columns[(kind[3:], i)].size)
                       for i in range(N) for kind in CONSTRAINT_KINDS]
        self.measured, self.selectors = [], {}
        for item in measured:
            kind, body = str(item[0]), int(item[1])
            if (kind, body) not in self.columns:
                raise ValueError(f"measured: there is no variable block {kind!r} of body {body} "
                                 f"(fx exists only for fx_bodies)")
            size = self.columns[(kind, body)].size
            selector = None if len(item) < 3 or item[2] is None else np.array(item[2], dtype=float)
            if selector is not None and (selector.ndim != 2 or selector.shape[1] != size
                                         or not np.all(np.isfinite(selector))):
                raise ValueError(f"measured: the selector of {kind!r} of body {body} must be a "
                                 f"finite (m, {size}) matrix, got shape {selector.shape}")
            self.measured.append((kind, body))
            self.selectors[(kind, body)] = selector
            row_entries.append(("y_" + kind, body, size if selector is None else len(selector)))
        self.measured = tuple(sorted(self.measured, key=lambda kb: (kb[1], VARIABLE_KINDS.index(kb[0]))))
        self.rows = BlockLayout(row_entries, ROW_KINDS)
        structure = SystemPattern(model, self.rows, self.columns, self.selectors)
        self.pattern = structure.pattern
        self.constant_values = structure.constant_values
        self.always_nonzero = structure.always_nonzero
        self._dynamic_index = structure.dynamic_index
        self._constant_index = np.flatnonzero(self.always_nonzero)
        self._x_bodies = np.array([i for i in range(N) if model.parents[i] != WORLD], dtype=int)
        self._template = np.where(self.always_nonzero, self.constant_values, 0.0)
        # a state-dependent entry is E[r, c] (both diagonal blocks, eq. 5a and its transpose in
        # 5d) or (-E rx)[r - 3, c]: remap (body, 6x6 position) to the compact (E, -E rx) rows
        slot = np.full(N, -1)
        slot[self._x_bodies] = np.arange(len(self._x_bodies))
        body, rc = np.divmod(structure.dynamic_source, 36)
        r6, c6 = np.divmod(rc, 6)
        lower_left = (r6 >= 3) & (c6 < 3)
        assert not np.any((r6 < 3) & (c6 >= 3)) and np.all(slot[body] >= 0)
        self._dynamic_source = (18 * slot[body] + np.where(lower_left, 9 + 3 * (r6 - 3) + c6,
                                                           3 * (r6 % 3) + c6 % 3))
        self._roots = [i for i in range(N) if model.parents[i] == WORLD]
        # block-diagonal S (6N x nv): every joint velocity S_i qd_i in one product; sparse, as
        # a dense one holds 6 N nv numbers (4.8 GB for a 10,000-link chain)
        S_rows, S_cols, S_vals = [], [], []
        for i, joint in enumerate(model.joints):
            r, c = np.divmod(np.arange(joint.S.size), joint.S.shape[1])
            S_rows.append(6 * i + r)
            S_cols.append(model.v_slice(i).start + c)
            S_vals.append(np.asarray(joint.S, dtype=float).ravel())
        self._S_all = sp.csr_matrix(
            (np.concatenate(S_vals + [np.zeros(0)]),
             (np.concatenate(S_rows + [np.zeros(0, dtype=int)]),
              np.concatenate(S_cols + [np.zeros(0, dtype=int)]))), shape=(6 * N, model.nv))
        # rhs = [-c (6N), -nu (6N), y (measured), 0][:, rhs_gather]: one gather in row order
        parts = ([self.rows[("ne_a", i)].indices for i in range(N)]
                 + [self.rows[("ne_f", i)].indices for i in range(N)]
                 + [self.rows[("y_" + k, b)].indices for k, b in self.measured])
        parts = np.concatenate(parts + [np.zeros(0, dtype=int)])             # [] for no bodies
        self._rhs_gather = np.full(self.rows.size, len(parts))               # (3tau_i): b = 0
        self._rhs_gather[parts] = np.arange(len(parts))
        # the spatial primitives charge one state's cost per call; the calls below cover all
        # bodies at once, so the other bodies' share is charged from this measured unit cost
        # (both counting conventions, opcount.CONVENTIONS)
        z = np.zeros((1, 6))
        units = []
        for convention in ("paper", "as_written"):
            with count_operations(convention) as unit_c:
                cross_motion(z, z)
            with count_operations(convention) as unit_nu:
                cross_force(z, inertia_times(np.eye(6), z))
            with count_operations(convention) as unit_vJ:
                for joint in model.joints:
                    S_times(joint.S, np.zeros((1, joint.nv)))
            units.append((unit_c, unit_nu, unit_vJ))
        self._unit_costs = units

    # ------------------------------------------------------------------ offline data

    @property
    def shape(self):
        return self.pattern.shape

    @property
    def nnz(self):
        return self.pattern.nnz

    @property
    def structural_orders(self):
        """Nori's permutations, offered to the planner as candidates: "rnea" (eq. 11-12) when
        qdd and every fx are measured, (row_perm, col_perm); "aba" (Appendix B) when tau and
        every fx are, (row_perm, col_perm, TRUSTED). The ABA order's qdd pivots S_i^T I^A_i S_i
        are structural zeros of D that fill creates, not always-nonzero entries; they are the
        ABA's D_i, positive whenever the mass matrix is positive definite, so the order is
        declared trusted (the planner's online pivot checks catch the singular states)."""
        N = self.model.nbodies
        measured = set(self.measured)
        fx = {("fx", i) for i in self.fx_bodies}
        orders = {}
        if any(sel is not None for sel in self.selectors.values()):
            return orders
        if measured == {("qdd", i) for i in range(N)} | fx:
            orders["rnea"] = rnea_order(N, self.rows, self.columns)
        if measured == {("tau", i) for i in range(N)} | fx:
            orders["aba"] = (*aba_order(N, self.rows, self.columns), TRUSTED)
        return orders

    def bodies_of_columns(self, columns):
        """Bodies owning the given columns of D (e.g. the planner's unmatched columns)."""
        cols = np.asarray(columns, dtype=int)
        return sorted({blk.body for blk in self.columns.blocks
                       if np.any((blk.start <= cols) & (cols < blk.stop))})

    # ------------------------------------------------------------------ online assembly

    def values(self, Xup):
        """Numeric entries of D (B, nnz) for the joint transforms Xup (kinematics.joint_transforms)."""
        B = Xup[0].E.shape[0] if Xup else 1
        out = np.repeat(self._template[None], B, axis=0)         # constants in place, 0 elsewhere
        if self._dynamic_index.size:
            k = len(self._x_bodies)
            E = np.stack([Xup[i].E for i in self._x_bodies], axis=1)          # (B, k, 3, 3)
            r = np.stack([Xup[i].r for i in self._x_bodies], axis=1)[:, :, None, :]
            # iX = [[E, 0], [-E rx, E]] (Featherstone 2.24); row m of -E rx is r x E[m]
            minus_E_rx = cross3(np.broadcast_to(r, E.shape), E)
            charge(18 * k, 9 * k, kind="E rx")                   # skew(r) has 2 nonzeros a column
            compact = np.concatenate((E, minus_E_rx), axis=2).reshape(B, 18 * k)
            out[:, self._dynamic_index] = compact[:, self._dynamic_source]
        return out

    def rhs(self, Xup, body_velocities, qd, measured_values=None):
        """rhs = -b (B, n_rows): eq. (3) biases and measured values y (eq. 9, 15).

        body_velocities (B, N, 6) angular-first (eq. 2); measured_values {(kind, body): (B, m)}
        (m: the block size, or the selector's rows)."""
        model = self.model
        B, N = qd.shape[0], model.nbodies
        v = body_velocities
        vJ = np.ascontiguousarray((self._S_all @ qd.T).T).reshape(B, N, 6)  # S_i qd_i
        c = cross_motion(v, vJ)                                              # c_i = v_i x S_i qd_i
        nu = cross_force(v, inertia_times(model.inertias, v))               # nu_i = v_i x* I_i v_i
        (unit_c, unit_nu, unit_vJ), (w_c, w_nu, w_vJ) = self._unit_costs
        k = N - len(self._roots) - 1                       # c_i is needed below the roots only
        charge(unit_c.mul * k, unit_c.add * k, kind="v x m", written=(w_c.mul * k, w_c.add * k))
        charge(unit_nu.mul * (N - 1), unit_nu.add * (N - 1), kind="v x* I v",
               written=(w_nu.mul * (N - 1), w_nu.add * (N - 1)))
        charge(unit_vJ.mul, unit_vJ.add, kind="S*x", written=(w_vJ.mul, w_vJ.add))
        a0 = gravity_acceleration(model, B)
        for i in self._roots:
            # b_(3a_i) = iX_0 a_0 + c_i at the root, where c_i = 0 since v_i = S_i qd_i
            c[:, i] = Xup[i].apply_motion(a0)
        y = []
        if self.measured:
            measured_values = measured_values or {}
            for key in self.measured:
                if key not in measured_values:
                    raise ValueError(f"no value given for the measured block {key[0]!r} of body "
                                     f"{model.link_names[key[1]]!r}")
                size = self.rows[("y_" + key[0], key[1])].size
                y.append(np.broadcast_to(measured_values[key], (B, size)))
        parts = np.concatenate([-c.reshape(B, 6 * N), -nu.reshape(B, 6 * N)]   # -b (3a), (3f)
                               + y + [np.zeros((B, 1))], axis=1)             # -b = y (9, 15)
        out = parts[:, self._rhs_gather]
        return out

    def assemble(self, q, qd, measured_values=None):
        """(values (B, nnz), rhs (B, n_rows)) for batched, checked q (B, nq) and qd (B, nv)."""
        # q, qd are checked by the caller: no second check, and no world transforms (D and b
        # only need the joint transforms and the body velocities)
        q, qd = np.atleast_2d(np.asarray(q, dtype=float)), np.atleast_2d(np.asarray(qd, dtype=float))
        Xup = joint_transforms(self.model, q)
        return self.values(Xup), self.rhs(Xup, body_velocities(self.model, Xup, qd), qd, measured_values)

    # ------------------------------------------------------------------ helpers

    def dense(self, values):
        """Dense D (B, n_rows, n_cols) from values (B, nnz) (for tests and small examples)."""
        values = np.atleast_2d(values)
        P = self.pattern
        out = np.zeros((values.shape[0],) + P.shape)
        cols = np.repeat(np.arange(P.shape[1]), np.diff(P.indptr))
        out[:, P.indices, cols] = values
        return out

    def unpack(self, x):
        """x (B, n_cols) -> {(kind, body): (B, size)} (views)."""
        return {key: x[:, b.slice] for key, b in self.columns.index.items()}

    def joint_columns(self, kind):
        """Columns (nv,) of a joint-space kind ("tau", "qdd") in the model's v order, computed
        once per system (a result reads them on every call)."""
        cache = self.__dict__.setdefault("_joint_columns", {})
        if kind not in cache:
            model = self.model
            idx = np.empty(model.nv, dtype=np.int64)
            for i in range(model.nbodies):
                idx[model.v_slice(i)] = self.columns[(kind, i)].indices
            cache[kind] = idx
        return cache[kind]

    def pack(self, blocks, B):
        """{(kind, body): (B, size)} -> x (B, n_cols); missing blocks are zero."""
        x = np.zeros((B, self.columns.size))
        for key, val in blocks.items():
            x[:, self.columns[key].slice] = val
        return x
