"""The layout the derivatives read from a dynamics plan (plan_derivatives.py), built once per
plan: the measurement columns e_k of the given qdd / tau (the reference route's), the solution's
output columns, and the tangent kernel's TangentData (kernels/tangent_numba.py); per call the
compiled D(q) with the kinematics the tangent kernel reads."""
from __future__ import annotations

import threading
import weakref

import numpy as np

from ..kernels.assemble_numba import assemble_batch
from ..kernels.tangent_numba import TangentData
from ..model.model import WORLD
from ..recursive._common import gravity_acceleration

_TANGENT_DATA = weakref.WeakKeyDictionary()      # plan -> TangentData
_MEASUREMENT = weakref.WeakKeyDictionary()       # plan -> measurement_columns
_JOINT = weakref.WeakKeyDictionary()             # plan -> {kind: joint_columns}
_WIDTH = weakref.WeakKeyDictionary()             # plan -> entries of the measured blocks
_ONE_STATE = threading.local()                   # .buffers: plan -> one state's rhs_buffer


def measurement_columns(plan):
    """(n_rows, nv) constant right-hand sides e_k: a unit in the measurement row of y_k (the
    given qdd or tau, in Pinocchio's joint layout)."""
    return _per_plan(_MEASUREMENT, plan, _measurement_columns)


def output_columns(plan):
    """Columns of the solution holding the joint-space output (tau or qdd), in Pinocchio's
    joint layout."""
    return joint_columns(plan, plan.problem.outputs[0])


def rhs_buffer(plan, width, reuse=False):
    """The compiled derivatives' right-hand sides (n_rows, 2 nv, width), states last, zero.
    reuse: a single state's (width 1) is allocated once per plan and thread and reused by every
    call (the tangent kernel writes its pattern and nothing else, so the columns stay zero
    outside it)."""
    buffers = getattr(_ONE_STATE, "buffers", None)
    reuse = reuse and width == 1
    if reuse and buffers is not None and plan in buffers:
        return buffers[plan]
    buffer = np.zeros((plan.system.rows.size, 2 * plan.model.nv, width))
    if reuse:
        if buffers is None:
            buffers = _ONE_STATE.buffers = weakref.WeakKeyDictionary()
        buffers[plan] = buffer
    return buffer


def _per_plan(cache, plan, build):
    if plan not in cache:
        cache[plan] = build(plan)
    return cache[plan]


def _measurement_columns(plan):
    system, model, given = plan.system, plan.model, plan.problem.given
    E = np.zeros((system.rows.size, model.nv))
    for i in range(model.nbodies):
        E[system.rows[("y_" + given, i)].indices, np.arange(model.nv)[model.v_slice(i)]] = 1.0
    return E


def joint_columns(plan, kind):
    """Columns of the solution holding the joint-space variable `kind` ("qdd", "tau"), in
    Pinocchio's joint layout."""
    columns = _per_plan(_JOINT, plan, lambda plan: {})
    if kind not in columns:
        columns[kind] = np.concatenate([plan.system.columns[(kind, i)].indices
                                        for i in range(plan.model.nbodies)]
                                       + [np.zeros(0, dtype=int)])
    return columns[kind]


def compiled_values(plan, q, v):
    """(D's entries (B, nnz), the joint transforms kin (B, N, 12), the body velocities vel
    (B, N, 6)) at checked q, v: plan.system.values(joint_transforms(model, q)) and
    body_velocities, compiled in one pass (kernels/assemble_numba.assemble_batch on the plan's
    assembly program; the given y is passed as zeros: D depends on q alone, b is dropped)."""
    order = list(plan.system.measured)
    width = _per_plan(_WIDTH, plan, lambda plan: sum(plan.system.rows[("y_" + k, b)].size
                                                     for k, b in order))
    values, _, kin, vel = assemble_batch(plan.ir.assembly, q, v, np.zeros((q.shape[0], width)),
                                         order, kinematics=True)
    return values, kin, vel


def tangent_data(plan):
    """The compiled kernel's TangentData of a plan (built once)."""
    if plan not in _TANGENT_DATA:
        system, model = plan.system, plan.model
        N = model.nbodies
        S = np.zeros((N, 6, max([j.nv for j in model.joints] + [1])))
        for i, joint in enumerate(model.joints):
            S[i, :, :joint.nv] = joint.S
        support = [np.concatenate([np.arange(model.nv)[model.v_slice(j)] for j in model.support(i)])
                   for i in range(N)]
        joint_of = np.empty(model.nv, dtype=np.int64)                     # direction -> joint
        for i in range(N):
            joint_of[model.v_slice(i)] = i
        # each support entry's entry in the parent's support (same direction), -1 if own
        up = [np.array([-1 if j == WORLD or d not in support[j] else
                        sum(len(x) for x in support[:j]) + int(np.flatnonzero(support[j] == d)[0])
                        for d in support[i]], dtype=np.int64)
              for i, j in ((i, model.parents[i]) for i in range(N))]
        first = (lambda layout, kind: np.array([layout[(kind, i)].start for i in range(N)],
                                               dtype=np.int64))
        _TANGENT_DATA[plan] = TangentData(
            parents=np.array([p if p != WORLD else -1 for p in model.parents], dtype=np.int64),
            S=S, v_start=np.array(model.v_index[:N], dtype=np.int64),
            v_size=np.array([j.nv for j in model.joints], dtype=np.int64),
            inertias=np.ascontiguousarray(model.inertias, dtype=float),
            a0=gravity_acceleration(model, 1)[0],
            col_a=first(system.columns, "a"), col_f=first(system.columns, "f"),
            row_a=first(system.rows, "ne_a"), row_f=first(system.rows, "ne_f"),
            support_ptr=np.cumsum([0] + [len(d) for d in support]).astype(np.int64),
            support_dirs=np.concatenate(support + [np.zeros(0, dtype=np.int64)]).astype(np.int64),
            support_up=np.concatenate(up + [np.zeros(0, dtype=np.int64)]).astype(np.int64),
            q_moves=np.concatenate([np.zeros(0, dtype=bool)] + [
                np.array([model.parents[joint_of[d]] != WORLD for d in dirs], dtype=bool)
                for dirs in support]))
    return _TANGENT_DATA[plan]
