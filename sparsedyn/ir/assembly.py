"""Offline "assembly program" of a NewtonEulerSystem: the constant, integer/float description that
lets a compiled kernel (sparsedyn.kernels.assemble_numba) write D(q) and b(q, qd) for a batch of
states without Python loops over bodies (Nori Sec. IV-D: everything that does not depend on the
state is fixed offline).

Per body i (parent(i) < i) it records
  - the joint transform as data, not as a joint class (so one compiled kernel serves every model):
        R_i = TR_i R_J(q),  r_i = Tp_i + TR_i p_J(q),  E_i = R_i^T     (kinematics.joint_transforms)
    rotation kind from the joint's ROTATION (model/joints/base.py): ROT_NONE (E = TR^T),
    ROT_ANGLE (one angle theta at q[rot_q], E = Eb0 + sin(theta) Eb1 + cos(theta) Eb2 with the
    Rodrigues basis of Joint.rotation_basis pre-multiplied by TR and transposed) or ROT_QUAT
    (the unit quaternion (x, y, z, w) at q[rot_q:rot_q + 4]); translation p_J = sum_k
    q[trans_q + k] tdir_k from the joint's translation(), tdir already rotated by TR;
  - S_i as a sparse list (row, velocity index, value) and I_i as a sparse list of its nonzeros;
  - the values-array (CSC data) position of every state-dependent entry of iX_lambda(i) (eq. 5a)
    and of its transpose in the parent's c_f rows (eq. 5d), each with its source in the compact
    form [E (9, row-major), -E rx (9, row-major)] of spatial.Transform;
  - the rhs rows of c_a_i (-c_i, or -iX_0 a_0 at a root), c_f_i (-nu_i), c_tau_i (zero) and of
    every measured block (y).
Constant entries of D are not part of the program: they are the system's template (written once).

A peer that appends rows to D (sensor rows of an estimation problem) embeds the program in its
larger pattern (`embed`) with an ExtraRows section: entries that are constant combinations of a
body's 18 transform components (e.g. M (jX_lambda(j))^T), right-hand sides read from y, and
biases quadratic in one body's velocity; the same kernel writes them (assemble_numba).

Preconditions: a NewtonEulerSystem (constant S per joint, parent(i) < i).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


ROT_NONE, ROT_ANGLE, ROT_QUAT = 0, 1, 2


def _sparse_rows(mats, cols_of=None):
    """CSR-like (ptr, row, col, val) of the nonzeros of a list of small dense matrices; column c of
    matrix i is renamed cols_of[i][c] when given (e.g. S's columns -> global velocity indices)."""
    ptr, rows, cols, vals = [0], [], [], []
    for i, M in enumerate(mats):
        r, c = np.nonzero(M)
        rows.append(r)
        cols.append(c if cols_of is None else np.asarray(cols_of[i])[c])
        vals.append(M[r, c])
        ptr.append(ptr[-1] + len(r))
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
    return (np.asarray(ptr, dtype=np.int64), cat(rows, np.int64), cat(cols, np.int64),
            cat(vals, np.float64))


class JointTransformArrays(NamedTuple):
    """The joint transforms iX_lambda(i)(q) of a model as data (see the module doc): parents,
    rotation kind and its q column, the Rodrigues basis (or TR^T), the tree rotation TR
    (row-major) and offset Tp, and the translation directions tdir with their first q column.
    The kernels compute (E, r) from it (assemble_numba._assemble_lanes, crba_numba.crba_lanes)."""
    parent: np.ndarray
    rot_kind: np.ndarray
    rot_q: np.ndarray
    n_trans: np.ndarray
    trans_q: np.ndarray
    rot_basis: np.ndarray
    TR: np.ndarray
    Tp: np.ndarray
    tdir: np.ndarray


def joint_transform_arrays(model):
    """The JointTransformArrays of a model (joints whose translation reads other than their
    first coordinates, one direction each, raise NotImplementedError naming the joint)."""
    N = model.nbodies
    parent = np.asarray(model.parents, dtype=np.int64)
    rot_kind = np.zeros(N, dtype=np.int64)
    rot_q = np.zeros(N, dtype=np.int64)
    n_trans = np.zeros(N, dtype=np.int64)
    trans_q = np.zeros(N, dtype=np.int64)
    rot_basis = np.zeros((N, 3, 9))      # E = Eb0 + sin Eb1 + cos Eb2 (ROT_ANGLE), or TR^T
    TR = np.zeros((N, 9))                # row-major tree rotation (ROT_QUAT)
    Tp = np.zeros((N, 3))
    tdir = np.zeros((N, 3, 3))
    for i, joint in enumerate(model.joints):
        T = model.joint_placements[i]
        R_T, p_T = T[:3, :3], T[:3, 3]
        TR[i], Tp[i] = R_T.ravel(), p_T
        q0 = int(model.q_index[i])
        rot_basis[i, 0] = R_T.T.ravel()                       # ROT_NONE: E = TR^T
        rot_q[i] = q0 + joint.ROTATION_Q
        if joint.ROTATION == "angle":
            # E = (TR R_J)^T, one basis matrix per function (1, sin, cos) of the joint's
            # rotation_basis (Rodrigues)
            for b, Rb in enumerate(joint.rotation_basis()[0]):
                rot_basis[i, b] = (R_T @ Rb).T.ravel()
            rot_kind[i] = ROT_ANGLE
        elif joint.ROTATION == "quaternion":
            rot_kind[i] = ROT_QUAT
        translation = joint.translation()
        offsets = [k for k, _ in translation]
        if offsets != list(range(len(offsets))) or len(offsets) > 3:
            raise NotImplementedError(f"joint {joint.name!r}: the compiled kernels read "
                                      f"translations from the joint's first coordinates, "
                                      f"one direction each (got offsets {offsets})")
        n_trans[i], trans_q[i] = len(translation), q0
        for k, (_, d) in enumerate(translation):
            tdir[i, k] = R_T @ d                               # r = Tp + TR p_J
    return JointTransformArrays(parent, rot_kind, rot_q, n_trans, trans_q, rot_basis, TR, Tp,
                                tdir)


class ExtraRows:
    """Rows appended to a NewtonEulerSystem's D (natural rows n_rows_D.. of a larger system).

    t_*: value slots (CSC positions in the larger pattern) that are sum_k coef_k * X_body[src_k]
         with X_body the compact form [E (9), -E rx (9)] of body's joint transform; every term of
         one slot belongs to one body;
    y_rows: natural rows whose right-hand side is read from y (appended after the measured
         blocks' values, in this order);
    q_*: rhs[row] -= coef * v_body[k] * v_body[l] (body velocities, angular-first);
    g_*: rhs[row] -= coef * g_body[k], g_body = E_body0 g the gravity vector in body
         coordinates (a rigid contact's true acceleration is a_body - X a_0, Nori's a_0 = -a_g)."""

    def __init__(self, nbodies, t_body=(), t_dest=(), t_src=(), t_coef=(), y_rows=(), q_row=(),
                 q_body=(), q_k=(), q_l=(), q_coef=(), g_row=(), g_body=(), g_k=(), g_coef=()):
        ints = (lambda a: np.asarray(a, dtype=np.int64).reshape(-1))
        t_body = ints(t_body)
        order = np.argsort(t_body, kind="stable")
        self.t_ptr = np.searchsorted(t_body[order], np.arange(nbodies + 1)).astype(np.int64)
        self.t_dest, self.t_src = ints(t_dest)[order], ints(t_src)[order]
        self.t_coef = np.asarray(t_coef, dtype=float).reshape(-1)[order]
        if self.t_src.size and (self.t_src.min() < 0 or self.t_src.max() >= 18):
            raise ValueError("t_src: transform components are 0..17")
        self.y_rows = ints(y_rows)
        self.q_row, self.q_body = ints(q_row), ints(q_body)
        self.q_k, self.q_l = ints(q_k), ints(q_l)
        self.q_coef = np.asarray(q_coef, dtype=float).reshape(-1)
        self.g_row, self.g_body, self.g_k = ints(g_row), ints(g_body), ints(g_k)
        self.g_coef = np.asarray(g_coef, dtype=float).reshape(-1)
        if self.g_k.size and (self.g_k.min() < 0 or self.g_k.max() >= 3):
            raise ValueError("g_k: gravity components are 0..2")

    @property
    def dynamic_slots(self):
        return np.unique(self.t_dest)


class AssemblyProgram:
    """The per-body constants of D(q), b(q, qd) of one NewtonEulerSystem (see the module doc).

    Row destinations are natural rhs rows here; `bind(row_slot)` maps them to the slots a kernel
    writes (rhs columns, or the permuted right-hand-side slots of an LU program)."""

    def __init__(self, system):
        model = system.model
        N = model.nbodies
        self.nbodies, self.nq, self.nv = N, model.nq, model.nv
        self.nnz, self.n_rows = system.nnz, system.shape[0]
        jt = joint_transform_arrays(model)
        (self.parent, self.rot_kind, self.rot_q, self.n_trans, self.trans_q, self.rot_basis,
         self.TR, self.Tp, self.tdir) = jt
        self.s_ptr, self.s_row, self.s_col, self.s_val = _sparse_rows(
            [j.S for j in model.joints], [np.arange(model.v_index[i], model.v_index[i] + j.nv)
                                          for i, j in enumerate(model.joints)])
        self.i_ptr, self.i_row, self.i_col, self.i_val = _sparse_rows(list(model.inertias))
        self.gravity = np.asarray(model.gravity, dtype=float).copy()

        # state-dependent entries of D: which body's transform, which compact component
        body = system._x_bodies[system._dynamic_source // 18]
        order = np.argsort(body, kind="stable")
        self.x_ptr = np.searchsorted(body[order], np.arange(N + 1)).astype(np.int64)
        self.x_dest = np.asarray(system._dynamic_index, dtype=np.int64)[order]
        self.x_src = np.asarray(system._dynamic_source % 18, dtype=np.int64)[order]
        self.dynamic_index = np.asarray(system._dynamic_index, dtype=np.int64)

        # rhs rows (natural numbering)
        rows = system.rows
        self.a_rows = np.array([rows[("ne_a", i)].indices for i in range(N)], dtype=np.int64).reshape(N, 6)
        self.f_rows = np.array([rows[("ne_f", i)].indices for i in range(N)], dtype=np.int64).reshape(N, 6)
        zero = [rows[("ne_tau", i)].indices for i in range(N)]
        self.zero_rows = np.concatenate(zero).astype(np.int64) if zero else np.zeros(0, np.int64)
        self.measured_rows = {key: rows[("y_" + key[0], key[1])].indices.astype(np.int64)
                              for key in system.measured}
        self.template = system._template
        self.extra = ExtraRows(N)

    def embed(self, entry_map, template, n_rows, extra):
        """This program inside a larger system whose first n_rows_D rows are D's (same numbering):
        entry_map (nnz_D,) the CSC position of each of D's entries in the larger pattern, template
        its constants (nnz,), n_rows its row count, extra (ExtraRows) the rows beyond D's."""
        import copy
        out = copy.copy(self)
        entry_map = np.asarray(entry_map, dtype=np.int64)
        out.x_dest = entry_map[self.x_dest]
        out.dynamic_index = np.union1d(entry_map[self.dynamic_index], extra.dynamic_slots)
        out.template = np.asarray(template, dtype=float)
        out.nnz, out.n_rows, out.extra = out.template.size, int(n_rows), extra
        return out

    def bind(self, row_slot, measured_order):
        """Destinations for a kernel: row_slot (n_rows,) maps natural rhs rows to slots;
        measured_order lists the measured keys in the order their values are concatenated in the
        kernel's y input (the extra rows' y_rows follow them). Returns (a_dest (N, 6),
        f_dest (N, 6), zero_dest, y_dest)."""
        row_slot = np.asarray(row_slot, dtype=np.int64)
        missing = set(self.measured_rows) - set(measured_order)
        if missing:
            raise ValueError(f"measured_order: no place for the measured blocks {sorted(missing)}")
        y_rows = [self.measured_rows[key] for key in measured_order] + [self.extra.y_rows]
        y_rows = np.concatenate(y_rows)
        covered = np.concatenate([self.a_rows.ravel(), self.f_rows.ravel(), self.zero_rows, y_rows])
        assert np.array_equal(np.sort(covered), np.arange(self.n_rows)), "every rhs row once"
        return row_slot[self.a_rows], row_slot[self.f_rows], row_slot[self.zero_rows], row_slot[y_rows]

    def bind_extra(self, row_slot):
        """The extra rows' arrays for a kernel (its `xr` argument), rhs rows mapped by row_slot;
        g_need (N,) marks the bodies whose gravity vector the g_* terms need (with ancestors)."""
        x = self.extra
        row_slot = np.asarray(row_slot, dtype=np.int64)
        g_need = np.zeros(self.nbodies, dtype=np.bool_)
        for b in x.g_body:
            while b >= 0 and not g_need[b]:
                g_need[b] = True
                b = self.parent[b]
        return (x.t_ptr, x.t_dest, x.t_src, x.t_coef, x.q_body, x.q_k, x.q_l, x.q_coef,
                row_slot[x.q_row], g_need, x.g_body, x.g_k, x.g_coef, row_slot[x.g_row])

    def model_arrays(self):
        """The constant per-body arrays, in the order the kernels take them."""
        return (self.parent, self.rot_kind, self.rot_q, self.n_trans, self.trans_q, self.rot_basis,
                self.TR, self.Tp, self.tdir, self.s_ptr, self.s_row, self.s_col, self.s_val,
                self.i_ptr, self.i_row, self.i_col, self.i_val, self.gravity,
                self.x_ptr, self.x_dest, self.x_src)
