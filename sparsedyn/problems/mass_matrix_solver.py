"""MassMatrixPlan.solver(): M(q) one state per call for a control loop, on the C backend's
one-state library (backends/c_mass_matrix_kernel.py), with its buffers and the library's
arguments bound once."""
from __future__ import annotations

import numpy as np

from ..backends.generated_c import aligned


class MassMatrixSolver:
    """MassMatrixPlan.solver(): M(q) for one state per call, on the C library of one state
    ("one"), its buffers allocated once and no per-call checks but its own (q finite, unit
    quaternions, M finite); a state it flags, or an argument not an (nq,) array, goes to
    plan.solve, which raises the typed error naming it."""

    def __init__(self, plan):
        self.plan, nv = plan, plan.model.nv
        fn, work = plan.c_kernel.one_state_dense()
        self._q, self._M = np.zeros(plan.model.nq), np.zeros((nv, nv))   # M's zeros stay
        self._work = aligned(work)                # its own: plan.solve may run meanwhile
        args = (self._q.ctypes.data, self._M.ctypes.data, self._work.ctypes.data)
        self._run = lambda: fn(*args)

    def __call__(self, q, out=None):
        """M (nv, nv) of q (nq,); out: an (nv, nv) array to write it into (returned)."""
        M = self.unchecked(q)
        if M is None:
            return self._checked(q, out)
        if out is None:
            return M.copy()
        out[...] = M
        return out

    def unchecked(self, q):
        """M of q in this solver's buffer (the next call overwrites it), or None where q is not
        an (nq,) array or the library flags it (q not finite, a non-unit quaternion, M not
        finite): the caller's checked path then names what is wrong."""
        if getattr(q, "shape", None) != self._q.shape:
            return None
        self._q[:] = q
        return None if self._run() else self._M

    def _checked(self, q, out):
        M = self.plan.solve(q, backend="c")
        if out is None:
            return M
        out[...] = M
        return out
