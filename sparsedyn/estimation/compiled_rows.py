"""The sensor rows D_Y(q) d = y - b_Y(q, qd) of an EstimationProblem as the ExtraRows section of
the Newton-Euler assembly program (ir/assembly.py), so that one compiled kernel
(kernels/assemble_numba) writes all of [D; D_Y], [b; y - b_Y] per state (seed 001, Sec. VI with
the offline/online split of Sec. IV-D).

Offline, per sensor:
  - a state-dependent term C = M (jX_lambda(j))^T (sensors.Term.basis) becomes, per stored entry
    (r, c), the constant combination sum_k M[r, k] X_j[c, k] of the 18 compact components of
    joint j's transform (X = [E 0; -E rx E]);
  - the bias is read off the sensor's own linear_map by polarization: for each body b, evaluating
    it at velocities e_k and e_k + e_l of body b alone gives the coefficients of v_b[k] v_b[l];
    the part a sensor declares linear in gravity (Sensor.gravity_terms) is taken out first and
    becomes terms on the body's gravity vector, which the kernel propagates.
The result is checked against the reference assembly (problem.assemble) at random states: a
sensor whose coefficients or bias are not of these forms raises NotImplementedError naming it
(the plan then keeps the NumPy route).

Preconditions: problem is an EstimationProblem on a model the assembly program supports.
"""
from __future__ import annotations

import numpy as np

from ..kinematics import Kinematics, forward_kinematics
from ..ir.assembly import AssemblyProgram, ExtraRows

CHECK_TOL = 1e-12      # relative agreement of the compiled rows with the reference, offline


def _transform_sources():
    """(src, sign) (6, 6) of each entry X[c, k] of a motion transform in the compact form
    [E (9), -E rx (9)] (src -1: structurally zero)."""
    src = np.full((6, 6), -1, dtype=np.int64)
    for c in range(3):
        for k in range(3):
            src[c, k] = 3 * c + k                  # E
            src[3 + c, 3 + k] = 3 * c + k          # E
            src[3 + c, k] = 9 + 3 * c + k          # -E rx
    return src


def _coefficient_terms(problem, inv, kin0):
    """(body, dest, src, coef) of every state-dependent sensor entry."""
    model, rows = problem.model, problem.rows
    n_sys = problem.system.nnz
    src_of = _transform_sources()
    body, dest, src, coef = [], [], [], []
    for s, dyn in zip(rows.sensors, rows._dynamic):
        if not dyn:
            continue
        terms, _ = s.linear_map(model, kin0, rows.wrench_links)
        for t_index, r, c, ids in dyn:
            basis = terms[t_index].basis
            if basis is None:
                raise NotImplementedError(f"sensor {s.name!r}: a state-dependent coefficient "
                                          f"without a joint-transform basis has no compiled form")
            M, j = np.asarray(basis[0], dtype=float), int(basis[1])
            for rr, cc, e in zip(r, c, ids):
                for k in range(6):
                    if M[rr, k] != 0.0 and src_of[cc, k] >= 0:
                        body.append(j)
                        dest.append(inv[n_sys + e])
                        src.append(src_of[cc, k])
                        coef.append(M[rr, k])
    return body, dest, src, coef


def _bias_terms(problem, kin0):
    """(row, body, k, l, coef) with bias[row] = sum coef v_body[k] v_body[l] (polarization)."""
    model, rows = problem.model, problem.rows
    N = model.nbodies
    pairs = [(k, k) for k in range(6)] + [(k, l) for k in range(6) for l in range(k + 1, 6)]
    P = len(pairs)
    vel = np.zeros((N * P, N, 6))
    for b in range(N):
        for p, (k, l) in enumerate(pairs):
            vel[b * P + p, b, k] = 1.0
            vel[b * P + p, b, l] = 1.0
    reps = N * P
    Xup = [type(X)(np.broadcast_to(X.E[:1], (reps, 3, 3)), np.broadcast_to(X.r[:1], (reps, 3)))
           for X in kin0.Xup]
    kin = Kinematics(model, Xup, Xup, vel, False)
    ks, ls = (np.array(side, dtype=np.int64) for side in zip(*pairs))
    off = ks != ls
    out = [], [], [], [], []
    n_sys = problem.n_dynamics_rows
    for s in rows.sensors:
        _, bias = s.linear_map(model, kin, rows.wrench_links)
        bias = np.array(bias, dtype=float)
        for body, G in s.gravity_terms(model):      # linear in gravity: the g_* terms
            bias -= G @ (kin.Xworld[body].E[0] @ model.gravity)
        c = bias.reshape(N, P, -1)
        c[:, off] -= c[:, ks[off]] + c[:, ls[off]]      # f(e_k + e_l) - Q_kk - Q_ll = Q_kl
        b, p, r = np.nonzero(c)                         # body-major, as the rows are read
        for lst, val in zip(out, (n_sys + rows.row_slices[s.name].start + r, b, ks[p], ls[p],
                                  c[b, p, r])):
            lst.append(val)
    return tuple(np.concatenate(lst) if lst else np.zeros(0) for lst in out)


def _gravity_terms(problem):
    """(row, body, k, coef) with bias[row] += sum coef g_body[k] (Sensor.gravity_terms)."""
    rows, n_sys = problem.rows, problem.n_dynamics_rows
    out = [], [], [], []
    for s in rows.sensors:
        for body, G in s.gravity_terms(problem.model):
            r, k = np.nonzero(G)
            for lst, val in zip(out, (n_sys + rows.row_slices[s.name].start + r,
                                      np.full(r.size, body), k, G[r, k])):
                lst.append(val)
    return tuple(np.concatenate(lst) if lst else np.zeros(0) for lst in out)


def sensor_assembly(problem, rng=0):
    """The embedded AssemblyProgram of [D; D_Y] for the compiled kernels; its y input is the
    readings in rows order (MeasurementRows.readings_vector). Raises NotImplementedError naming
    the sensor if a sensor's rows have no compiled form."""
    model = problem.model
    nnz = problem.pattern.nnz
    inv = np.empty(nnz, dtype=np.int64)
    inv[problem._gather] = np.arange(nnz)              # concatenated entry -> CSC position
    kin0 = forward_kinematics(model, model.neutral_configuration()[None], np.zeros((1, model.nv)))
    t_body, t_dest, t_src, t_coef = _coefficient_terms(problem, inv, kin0)
    q_row, q_body, q_k, q_l, q_coef = _bias_terms(problem, kin0)
    n_sys = problem.n_dynamics_rows
    extra = ExtraRows(model.nbodies, t_body, t_dest, t_src, t_coef,
                      n_sys + np.arange(problem.rows.n_rows), q_row, q_body, q_k, q_l, q_coef,
                      *_gravity_terms(problem))
    program = AssemblyProgram(problem.system).embed(
        inv[:problem.system.nnz], np.nan_to_num(problem.constant_values, nan=0.0),
        problem.shape[0], extra)
    _check(problem, program, np.random.default_rng(rng))
    return program


def _check(problem, program, rng, B=2):
    """Compare the compiled [D; D_Y], rhs with the reference at random states."""
    from ..kernels.assemble_numba import assemble_batch
    model, rows = problem.model, problem.rows
    q = model.random_configuration(rng, batch=B)
    v = rng.normal(size=(B, model.nv))
    readings = {s.name: rng.normal(size=(B, s.size)) for s in problem.sensors}
    values, rhs, _, _ = problem.assemble(q, v, readings)
    y = rows.readings_vector(problem.check_readings(readings, B), B)
    cv, crhs = assemble_batch(program, q, v, y, [], interpret_while_compiling=True)
    for what, a, b in (("coefficients", cv, values), ("bias", crhs, rhs)):
        err = np.abs(a - b).max(axis=0) / max(1.0, float(np.abs(b).max()))
        if not np.all(err <= CHECK_TOL):
            bad = np.argmax(err)
            raise NotImplementedError(
                f"sensor rows: the compiled {what} differ from the reference ({err[bad]:.1e} at "
                f"{'row' if what == 'bias' else 'entry'} {bad}{_sensor_of(problem, bad, what)}): "
                f"a sensor's terms are not of the compiled forms")


def _sensor_of(problem, index, what):
    row = index if what == "bias" else problem.pattern.indices[index]
    row -= problem.n_dynamics_rows
    for name, sl in problem.rows.row_slices.items():
        if sl.start <= row < sl.stop:
            return f", sensor {name!r}"
    return ""
