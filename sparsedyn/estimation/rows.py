"""Measurement rows D_Y(q) d + b_Y(q, qd) = 0 of a sensor set (seed 001, eq. 17), on a fixed
worst-case pattern (Remark 4), assembled for a batch of states.

Each row-producing sensor contributes `size` rows  sum_k C_k(q) d_k = y - bias(q, qd)  (see
sparsedyn.sensors). Offline, every term's entries are classified: constant (known value, pruned
if zero) or state-dependent; a state-dependent term M (jX_lambda(j))^T gets the worst-case pattern
of the joint transform (system.pattern.transform_coefficients), so an entry is stored iff it is
nonzero for some q.

Preconditions: sensors validated against the model; `columns` is the NewtonEulerSystem's column
layout (a, f, tau, qdd per body, fx for the wrench bodies).
"""
from __future__ import annotations

import numpy as np

from ..kinematics import forward_kinematics
from ..system import STRUCTURAL_TOLERANCE, transform_coefficients


def _term_structure(model, term, tol=STRUCTURAL_TOLERANCE):
    """(nonzero mask (size, n), constant values (size, n), NaN where state-dependent)."""
    if term.basis is None:
        C = np.asarray(term.coeff, dtype=float)
        scale = max(1.0, float(np.abs(C).max(initial=0.0)))
        nz = np.abs(C) > tol * scale
        return nz, np.where(nz, C, 0.0)
    M, j = term.basis
    Ck, one = transform_coefficients(model.joints[j], model.joint_placements[j])
    prod = np.einsum("ik,qlk->qil", M, Ck)                 # M C_k^T for every basis function
    scale = max(1.0, float(np.abs(prod).max()))
    prod = np.where(np.abs(prod) > tol * scale, prod, 0.0)
    coeff = prod.reshape(len(prod), -1).T                   # (size*n, K)
    nz = np.any(coeff != 0.0, axis=1)
    lam = coeff @ one / (one @ one)
    const = np.abs(coeff - np.outer(lam, one)).max(axis=1) <= tol * scale
    shape = M.shape[0], Ck.shape[1]
    return nz.reshape(shape), np.where(const, lam, np.nan).reshape(shape)


class MeasurementRows:
    """The rows of a sensor set: `row_slices` {sensor name: slice}, COO entries (`rows`, `cols`,
    `constant_values` with NaN for state-dependent ones) and batched `values` / `rhs`."""

    def __init__(self, model, sensors, columns, wrench_links):
        self.model = model
        self.sensors = [s for s in sensors if s.rows]
        self.wrench_links = dict(wrench_links)
        kin = forward_kinematics(model, model.neutral_configuration(), np.zeros(model.nv))
        R, C, K = [], [], []
        self._dynamic = []          # per sensor: [(term index, local rows, local cols, entry ids)]
        self.row_slices = {}
        start = 0
        for s in self.sensors:
            terms, _ = s.linear_map(model, kin, self.wrench_links)
            dyn = []
            for t_index, t in enumerate(terms):
                if t.key not in columns:
                    raise ValueError(f"sensor {s.name!r}: variable {t.kind!r} of body "
                                     f"{model.link_names[t.body]!r} is not in the problem")
                nz, const = _term_structure(model, t)
                r, c = np.nonzero(nz)
                first = sum(len(x) for x in R)
                R.append(start + r)
                C.append(columns[t.key].start + c)
                K.append(const[r, c])
                ids = first + np.arange(len(r))
                is_dyn = np.isnan(const[r, c])
                if is_dyn.any():
                    dyn.append((t_index, r[is_dyn], c[is_dyn], ids[is_dyn]))
            self._dynamic.append(dyn)
            self.row_slices[s.name] = slice(start, start + s.size)
            start += s.size
        self.n_rows = start
        cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
        self.rows, self.cols = cat(R, np.int64), cat(C, np.int64)
        self.constant_values = cat(K, float)
        self.nnz = len(self.rows)
        self._constant_index = np.flatnonzero(~np.isnan(self.constant_values))

    def labels(self):
        """One label per row, e.g. 'l_foot_ft_sensor[3]'."""
        out = [None] * self.n_rows
        for s in self.sensors:
            sl = self.row_slices[s.name]
            for k in range(sl.start, sl.stop):
                out[k] = f"{s.name}[{k - sl.start}]"
        return out

    def evaluate(self, kin):
        """(values (B, nnz) in entry order, bias (B, n_rows)) for the kinematics `kin`."""
        B = kin.Xup[0].E.shape[0]
        values = np.empty((B, self.nnz))
        values[:, self._constant_index] = self.constant_values[self._constant_index]
        bias = np.zeros((B, self.n_rows))
        for s, dyn in zip(self.sensors, self._dynamic):
            terms, b = s.linear_map(self.model, kin, self.wrench_links)
            bias[:, self.row_slices[s.name]] = b
            for t_index, r, c, ids in dyn:
                values[:, ids] = terms[t_index].coeff[:, r, c]
        return values, bias

    def readings_vector(self, readings, B):
        """Stack the readings {sensor name: (B, size)} into (B, n_rows) (rows order)."""
        y = np.zeros((B, self.n_rows))
        for s in self.sensors:
            y[:, self.row_slices[s.name]] = readings[s.name]
        return y
