"""Input checking and batching shared by every entry point.

Everything that takes a state takes a batch: (B, n) arrays, or (n,) for one state, in which case
results lose their batch axis again. Bad shapes, NaN/inf and non-unit quaternions raise ValueError
naming the argument (and the joint, for quaternions).
"""
from __future__ import annotations

import weakref

import numpy as np


def as_batch(x, width, name, batch=None, finite=True):
    """Return (array of shape (B, width), was_single). `batch` forces B (broadcasting a single row);
    finite=False leaves the finiteness check to the caller (problems/input_copies.py)."""
    try:
        arr = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected numbers, got {type(x).__name__}") from None
    single = arr.ndim == 1
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != width:
        raise ValueError(f"{name}: expected shape ({width},) or (B, {width}), got {np.shape(x)}")
    if batch is not None and arr.shape[0] != batch:
        if arr.shape[0] == 1:
            arr = np.broadcast_to(arr, (batch, width))
        else:
            raise ValueError(f"{name}: batch size {arr.shape[0]} does not match {batch}")
    if finite and not np.isfinite(arr).all():
        bad = ~np.isfinite(arr)
        rows, cols = np.nonzero(bad)
        raise ValueError(f"{name}: non-finite value at batch index {rows[0]}, column {cols[0]} "
                         f"({int(bad.sum())} non-finite entries)")
    return arr, single


_QUATERNIONS = weakref.WeakKeyDictionary()
#: largest accepted |norm - 1| of a configuration's quaternion
QUATERNION_TOL = 1e-6


def _quaternion_columns(model):
    """(columns (k, 4) of q holding unit quaternions, joint names), computed once per model."""
    if model not in _QUATERNIONS:
        cols, names = [], []
        for i, j in enumerate(model.joints):
            if j.ROTATION == "quaternion":
                start = model.q_index[i] + j.ROTATION_Q
                cols.append(np.arange(start, start + 4))
                names.append(j.name)
        _QUATERNIONS[model] = (np.array(cols, dtype=int).reshape(-1, 4), names)
    return _QUATERNIONS[model]


def check_configuration(model, q, name="q"):
    """Batch q and check that quaternions (free-flyer, spherical) have unit norm."""
    q, single = as_batch(q, model.nq, name)
    _check_quaternions(model, q, name)
    return q, single


def _check_quaternions(model, q, name):
    cols, names = _quaternion_columns(model)
    if len(names) and q.shape[0]:
        quat = q[:, cols]
        err = np.abs(np.sqrt((quat * quat).sum(axis=-1)) - 1.0)
        if err.max() > QUATERNION_TOL:
            b, k = np.unravel_index(int(np.argmax(err)), err.shape)
            raise ValueError(f"{name}: quaternion of joint {names[k]!r} is not unit-norm at batch "
                             f"index {b} (norm {np.linalg.norm(q[b, cols[k]]):.6g})")


def state(model, q, checked=True, **vectors):
    """Batch q and the nv-wide vectors given as keywords (None passes through as zeros=False).
    checked=False leaves the finiteness and quaternion checks to the caller
    (problems/input_copies.state_copies).

    Returns (q, dict of batched vectors, B, single)."""
    q, single = check_configuration(model, q) if checked else as_batch(q, model.nq, "q",
                                                                       finite=False)
    B = q.shape[0]
    out = {}
    for key, val in vectors.items():
        if val is None:
            out[key] = None
            continue
        arr, s = as_batch(val, model.nv, key, finite=checked)
        if arr.shape[0] != B:
            if arr.shape[0] == 1:
                arr = np.broadcast_to(arr, (B, model.nv))
            elif B == 1:
                q = np.broadcast_to(q, (arr.shape[0], model.nq))
                B = arr.shape[0]
                out = {k: (None if v is None else np.broadcast_to(v, (B, model.nv))) for k, v in out.items()}
            else:
                raise ValueError(f"{key}: batch size {arr.shape[0]} does not match q's {B}")
        single = single and s
        out[key] = arr
    return q, out, B, single


def unbatch(x, single):
    return x[0] if single else x
