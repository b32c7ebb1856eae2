"""delassus_solver(): the Delassus matrix Lambda^-1 = J M^-1 J^T of one state per call, for a
control loop, in the spirit of Plan.solver().

    f = delassus_solver(model, contacts, method="pv-osimr", backend=None)
    f(q (nq,), out=None) -> Lambda^-1 (m, m)        (sparsedyn.delassus's answer, bit for bit)

Everything that depends on (model, contacts) alone is done once: the resolved contacts, the
world-welded ones split off, the PV-OSIMr program (kernels/pv_osimr_program.py) and the compiled
per-state kernel's entry point (kernels/pv_osimr_numba.serial_entry). A call then copies q into
its buffer and runs that kernel. Its only checks are screens: q an (nq,) float64 array, finite,
unit quaternions (with half of batch.QUATERNION_TOL's margin, so a screen passes only what
check_configuration passes), no pivot flagged, a finite result. Anything else goes to
sparsedyn.delassus, which raises the typed error naming the argument (ValueError for q,
SingularModelError, NonFiniteError) or answers, so a flagged call is slower, never wrong.
Other methods and backends, kinematic loops and operation counting take sparsedyn.delassus on
every call.

One solver may be shared by threads: each thread has its own buffers. The kernel holds the
interpreter lock, so threads take turns on it.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from .batch import QUATERNION_TOL, _quaternion_columns
from .contacts import Contact
from .delassus import _backend, _method, _resolve, delassus, moving_part
from .loops.cluster_model import ClusterModel
from .opcount import counting


def delassus_solver(model, contacts, method="pv-osimr", backend=None):
    """A callable f(q (nq,), out=None) -> Lambda^-1 (m, m) for one state per call; see
    DelassusSolver. method and backend as sparsedyn.delassus's (checked here)."""
    return DelassusSolver(model, contacts, method, backend)


class DelassusSolver:
    """delassus_solver(): sparsedyn.delassus's answer for one state per call, with the
    per-(model, contacts) work done once and the compiled "pv-osimr" kernel bound (backend
    "numba", or auto once the kernel runs without a JIT compile)."""

    def __init__(self, model, contacts, method="pv-osimr", backend=None):
        _method(method)                                       # unknown: ValueError
        _backend(method, backend)                             # an unknown backend: ValueError
        self.model, self.method, self.backend = model, method, backend
        self.contacts = (contacts,) if isinstance(contacts, Contact) else tuple(contacts)
        base = model.model if isinstance(model, ClusterModel) else model
        self._shape = (base.nq,)
        self._fast = method == "pv-osimr" and not isinstance(model, ClusterModel)
        if self._fast:
            self._rc = _resolve(model, self.contacts)         # names a bad contact now
            self._sub, self._rows = moving_part(model, self._rc)
            cols, _ = _quaternion_columns(model)
            self._quats = [slice(int(c[0]), int(c[0]) + 4) for c in cols]
        self._m = None if not self._fast else self._rc.m
        self._kernel = None                     # (entry point, FlatProgram), bound on first use
        self._local = threading.local()

    def __call__(self, q, out=None):
        """Lambda^-1 (m, m) at q (nq,); out: an (m, m) float array to write it into (returned)."""
        if np.ndim(q) != 1:
            raise ValueError(f"q: expected shape {self._shape} (one state; sparsedyn.delassus "
                             f"takes batches), got {np.shape(q)}")
        value = None
        if (self._fast and type(q) is np.ndarray and q.shape == self._shape
                and q.dtype == np.float64 and not counting()):
            value = self._unchecked(q)
        if value is None:
            value = delassus(self.model, q, self.contacts, self.method, self.backend)
        if out is None:
            return value
        if getattr(out, "shape", None) != value.shape:
            raise ValueError(f"out: expected an array of shape {value.shape}, got "
                             f"{np.shape(out)}")
        out[...] = value
        return out

    def _unchecked(self, q):
        """The kernel's Lambda^-1 (a new array), or None: a screen failed or the kernel is not
        bound yet (sparsedyn.delassus then answers or raises)."""
        if self._sub is None:                   # Lambda^-1 = 0: sparsedyn.delassus's checks suffice
            return None
        kernel = self._kernel or self._bind()
        if kernel is None or not math.isfinite(q @ q):
            return None
        for s in self._quats:
            x = q[s]
            if not abs(math.sqrt(x @ x) - 1.0) <= 0.5 * QUATERNION_TOL:
                return None
        bufs = getattr(self._local, "bufs", None) or self._buffers()
        qb, ob, st, flat = bufs
        qb[0] = q
        kernel[0](kernel[1], qb, ob, st)
        if st[0] >= 0 or not math.isfinite(flat @ flat):     # (an overflow goes to delassus too)
            return None
        if self._rows is None:
            return ob[0].copy()
        full = np.zeros((self._m, self._m))              # world-welded contacts: zero rows/columns
        full[self._rows[:, None], self._rows[None, :]] = ob[0]
        return full

    def _bind(self):
        """(entry point, FlatProgram) once the backend is numba's (auto: once the kernel needs
        no JIT compile), else None (asked again next call)."""
        if _backend(self.method, self.backend) != "numba":
            return None
        from .kernels.pv_osimr_numba import _run_serial, program_for, run, serial_entry
        program = program_for(self.model, self._sub)
        if serial_entry(program) is _run_serial:     # the dispatcher: no overload loaded yet
            run(program, self.model.neutral_configuration()[None])   # loads (or compiles) it
        self._kernel = (serial_entry(program), program.flat)
        return self._kernel

    def _buffers(self):
        """This thread's q, Lambda^-1 and status buffers (the kernel writes the same entries of
        Lambda^-1 at every state: the zero blocks stay zero)."""
        m = self._sub.m
        out = np.zeros((1, m, m))
        self._local.bufs = (np.zeros((1, self._shape[0])), out, np.zeros(1, np.int64),
                            out.reshape(-1))
        return self._local.bufs
