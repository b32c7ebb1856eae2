"""The compiled PV-OSIMr Delassus kernel bound to one (model, resolved contact set), for one state
per call: sparsedyn.delassus's single-state fast path and sparsedyn.delassus_solver.

Everything that depends on (model, contacts) alone is done once: the world-welded contacts split
off (their rows and columns are zero), the PV-OSIMr program (kernels/pv_osimr_program.py) and the
per-state kernel's compiled entry point (kernels/pv_osimr_numba.serial_entry: the numba
dispatcher would re-type the ~35-field program on every call). A call copies q into its buffer
and runs that kernel. Its only checks are screens: q an (nq,) float64 array, finite, unit
quaternions (with half of batch.QUATERNION_TOL's margin, so a screen passes only what
check_configuration passes), no pivot flagged, a finite result. `unchecked` returns None for
anything else, and the caller takes sparsedyn.delassus's checked path, which raises the typed
error naming the argument or answers: a flagged state is slower, never wrong.

Each thread has its own buffers: one bound kernel serves every thread (the kernel holds the
interpreter lock, so threads take turns on it).
"""
from __future__ import annotations

import math
import threading

import numpy as np

from .batch import QUATERNION_TOL, _quaternion_columns


class OneState:
    """The bound kernel of (model, sub): sub the resolved contacts on moving bodies, rows their
    rows in the m x m Lambda^-1 (None: all of them)."""

    def __init__(self, model, sub, rows, m):
        from .kernels.pv_osimr_numba import _run_serial, program_for, run, serial_entry
        program = program_for(model, sub)
        if serial_entry(program) is _run_serial:    # the dispatcher: no overload loaded yet
            run(program, model.neutral_configuration()[None])    # loads (or compiles) it
        self._entry, self._flat = serial_entry(program), program.flat
        self._nq, self._ms, self._m, self._rows = model.nq, sub.m, m, rows
        self._quats = [slice(int(c[0]), int(c[0]) + 4) for c in _quaternion_columns(model)[0]]
        self._local = threading.local()

    def unchecked(self, q):
        """Lambda^-1 (m, m) (a new array) of q, a float64 ndarray; None if q is not (nq,) or a
        screen fails."""
        if q.shape != (self._nq,) or not math.isfinite(q @ q):
            return None
        for s in self._quats:
            x = q[s]
            if not abs(math.sqrt(x @ x) - 1.0) <= 0.5 * QUATERNION_TOL:
                return None
        qb, ob, st, flat = getattr(self._local, "bufs", None) or self._buffers()
        qb[0] = q
        self._entry(self._flat, qb, ob, st)
        if st[0] >= 0 or not math.isfinite(flat @ flat):     # (an overflow goes to delassus too)
            return None
        if self._rows is None:
            return ob[0].copy()
        full = np.zeros((self._m, self._m))              # world-welded contacts: zero rows/columns
        full[self._rows[:, None], self._rows[None, :]] = ob[0]
        return full

    def _buffers(self):
        """This thread's q, Lambda^-1, status buffers and Lambda^-1 flat (the kernel writes the
        same entries of Lambda^-1 at every state: the zero blocks stay zero)."""
        out = np.zeros((1, self._ms, self._ms))
        self._local.bufs = (np.zeros((1, self._nq)), out, np.zeros(1, np.int64), out.reshape(-1))
        return self._local.bufs
