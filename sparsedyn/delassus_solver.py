"""delassus_solver(): the Delassus matrix Lambda^-1 = J M^-1 J^T of one state per call, for a
control loop, in the spirit of Plan.solver().

    f = delassus_solver(model, contacts, method="pv-osimr", backend=None)
    f(q (nq,), out=None) -> Lambda^-1 (m, m)        (sparsedyn.delassus's answer, bit for bit)

The method, backend and contacts are checked and resolved once; "pv-osimr" on numba (backend
"numba", or auto once its kernel runs without a JIT compile) calls the kernel bound to (model,
contacts) (delassus_one_state.py: its screens, per-thread buffers) straight away. Anything its
screens do not pass, other methods and backends, kinematic loops and operation counting take
sparsedyn.delassus, which raises the typed error naming the argument (ValueError for q,
SingularModelError, NonFiniteError) or answers. One solver may be shared by threads.
"""
from __future__ import annotations

import numpy as np

from .contacts import Contact
from .delassus import _backend, _method, _resolve, delassus, one_state
from .loops.cluster_model import ClusterModel
from .opcount import counting


def delassus_solver(model, contacts, method="pv-osimr", backend=None):
    """A callable f(q (nq,), out=None) -> Lambda^-1 (m, m) for one state per call; see
    DelassusSolver. method and backend as sparsedyn.delassus's (checked here)."""
    return DelassusSolver(model, contacts, method, backend)


class DelassusSolver:
    """delassus_solver(): sparsedyn.delassus's answer for one state per call, with the
    per-(model, contacts) work done once."""

    def __init__(self, model, contacts, method="pv-osimr", backend=None):
        _method(method)                                       # unknown: ValueError
        _backend(method, backend)                             # an unknown backend: ValueError
        self.model, self.method, self.backend = model, method, backend
        self.contacts = (contacts,) if isinstance(contacts, Contact) else tuple(contacts)
        loops = isinstance(model, ClusterModel)
        self._shape = ((model.model if loops else model).nq,)
        self._fast = method == "pv-osimr" and not loops
        self._rc = _resolve(model, self.contacts) if self._fast else None   # names a bad contact
        self._bound = None

    def __call__(self, q, out=None):
        """Lambda^-1 (m, m) at q (nq,); out: an (m, m) float array to write it into (returned)."""
        if np.ndim(q) != 1:
            raise ValueError(f"q: expected shape {self._shape} (one state; sparsedyn.delassus "
                             f"takes batches), got {np.shape(q)}")
        value = None
        if self._fast and type(q) is np.ndarray and q.dtype == np.float64 and not counting():
            bound = self._bound or self._bind()
            value = None if bound is None else bound.unchecked(q)
        if value is None:
            value = delassus(self.model, q, self.contacts, self.method, self.backend)
        if out is None:
            return value
        if getattr(out, "shape", None) != value.shape:
            raise ValueError(f"out: expected an array of shape {value.shape}, got "
                             f"{np.shape(out)}")
        out[...] = value
        return out

    def _bind(self):
        """The bound kernel once the backend is numba's (auto: once it needs no JIT compile),
        else None (asked again next call); None too when Lambda^-1 = 0."""
        if _backend(self.method, self.backend) == "numba":
            self._bound = one_state(self.model, self._rc)
        return self._bound
