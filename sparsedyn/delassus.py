"""The Delassus matrix (inverse operational-space inertia) Lambda^-1(q) = J M^-1 J^T, batched.

    delassus(model, q, contacts, method="pv-osimr", backend=None) -> (B, m, m) or (m, m)

m = sum of the contacts' dimensions (6 per "6d", 3 per "3d"), rows/columns in contact order,
J = contact_jacobian(model, q, contacts) (LOCAL contact frames, Pinocchio's RigidConstraintModel
semantics). The matrix is velocity- and gravity-independent and well defined (symmetric positive
semi-definite) whenever M(q) is positive definite, also for rank-deficient J (repeated contacts,
m > nv). Contacts on links welded to the fixed base have zero Jacobian rows: their rows and
columns are zero.

Methods (one file each in sparsedyn/recursive/; see notes/delassus-pv-osimr-efpa.md):
    "pv-osimr"  seed 000 Algorithm 3, O(n + m^2)         (pv_osimr.py)
    "pv-osim"   seed 000 Algorithm 1, O(n + m^2 d)       (pv_osim.py)
    "efpa"      seed 002 Table I, O(n + m d + m^2)       (efpa.py)
    "kjr"       Kreutz-Delgado, Jain, Rodriguez (seed 000 Table I, seed 002 Sec. V-A),
                O(n + m^2 d)                               (kjr.py)
    "ltl-osim"  CRBA + L^T L + Y = J L^-1, Y Y^T          (ltl_osim.py)
    "dense"     J M^-1 J^T with a dense Cholesky factorization (reference)
    "sparse"    C D^-1 B on Nori's forward-dynamics block system, one sparse LU and m
                substitutions per state (problems/delassus_sparse.py)
With kinematic loops (model a sparsedyn.loops.ClusterModel, q its assembled spanning
configuration): J G (G^T H G)^-1 G^T J^T (seed 003, Sec. II-E), method "sparse" only, on Nori's
system with the loop rows (problems/loop_delassus.py).
New methods register in METHODS with the signature f(model, q, Xup, resolved_contacts) -> (B, m, m).

Backends: "numpy" runs METHODS[method] (the reference path, batched NumPy); "numba" runs the
compiled kernel of COMPILED[method] ("pv-osimr": sparsedyn/backends/c_pv_osimr.py, the same
algorithm in C on vectors of backends/c_vector.LANES states for batches of 2 or more once its
library is built (once per machine, in the background), else
sparsedyn/kernels/pv_osimr_numba.py one state at a time; both split a batch over
NUMBA_NUM_THREADS threads on the idle cores; "sparse": the compiled assembly and LU programs).
One state on numba's "pv-osimr" (a float64 q of shape (nq,) or (1, nq)) runs the per-state kernel
bound once to (model, contacts) (delassus_one_state.py: cheap input screens, anything flagged
takes the checked batch path); sparsedyn.delassus_solver(model, contacts) binds it for a loop.
backend=None picks "numba" when the method has a compiled kernel and numba is importable. Both
charge the same per-state operation counts (the compiled path charges the reference's).
"""
from __future__ import annotations

import importlib.util

import numpy as np

from .batch import check_configuration, unbatch
from .contacts import Contact, ResolvedContacts, contact_jacobian_sweeps, resolve_contacts
from .delassus_one_state import OneState
from .errors import SingularModelError, check_finite
from .identity_cache import IdentityCache
from . import jit
from .kinematics import joint_transforms
from .loops.cluster_model import ClusterModel
from .model.model import WORLD
from .opcount import charge, counting
from .recursive.crba import crba_sweeps
from .recursive.efpa import efpa_sweeps
from .recursive.kjr import kjr_sweeps
from .recursive.ltl import ltl
from .recursive.ltl_osim import ltl_osim_sweeps
from .recursive.pv_osim import pv_osim_sweeps
from .recursive.pv_osimr import pv_osimr_sweeps
from .problems.delassus_sparse import sparse_sweeps
from .problems.loop_delassus import compile_loop_delassus


def dense_sweeps(model, q, Xup, rc):
    """Reference: M by CRBA, J by contacts.contact_jacobian_sweeps, then J M^-1 J^T through a dense
    Cholesky factorization M = C C^T (Lambda^-1 = Z^T Z with Z = C^-1 J^T)."""
    n, m = model.nv, rc.m
    M = check_finite(crba_sweeps(model, q, Xup), "delassus", {"q": q}, "the mass matrix")
    J = contact_jacobian_sweeps(model, Xup, rc)
    charge(n ** 3 // 6, n ** 3 // 6, div=n * (n - 1) // 2, sqrt=n, kind="dense Cholesky")
    try:
        C = np.linalg.cholesky(M)
    except np.linalg.LinAlgError:
        ltl(model, M)                                   # names the DoF whose pivot fails
        raise SingularModelError(f"model {model.name!r}: the mass matrix is not positive definite "
                                 "(dense Cholesky failed)") from None
    charge(m * n * (n + 1) // 2, m * n * (n - 1) // 2, kind="C^-1 J^T")
    Z = np.linalg.solve(C, J.swapaxes(1, 2))
    charge(m * (m + 1) // 2 * n, m * (m + 1) // 2 * (n - 1), kind="Z^T Z")
    return Z.swapaxes(1, 2) @ Z


METHODS = {
    "pv-osimr": pv_osimr_sweeps,
    "pv-osim": pv_osim_sweeps,
    "efpa": efpa_sweeps,
    "kjr": kjr_sweeps,
    "ltl-osim": ltl_osim_sweeps,
    "dense": dense_sweeps,
    "sparse": sparse_sweeps,
}


#: methods with a compiled (numba) kernel: name -> "module:function" f(model, q, rc, reference)
COMPILED = {"pv-osimr": "sparsedyn.backends.c_pv_osimr:pv_osimr_compiled",
            "sparse": "sparsedyn.problems.delassus_sparse:sparse_compiled"}
BACKENDS = ("numba", "numpy")


def _method(method):
    """METHODS[method], or ValueError naming the available ones."""
    try:
        return METHODS[method]
    except (KeyError, TypeError):
        raise ValueError(f"delassus: unknown method {method!r} "
                         f"(available: {', '.join(sorted(METHODS))})") from None


_READY = set()       # methods whose compiled kernels were found ready (they stay so)


def _numba_ready(method):
    """auto's check (sparsedyn/jit.py): True if the method's compiled kernels run without a JIT
    compile now; else their compile starts in the background."""
    if method in _READY:
        return True
    if method == "sparse":                 # (numba's import: on use)
        from .kernels.assemble_numba import _assemble_range
        from .kernels.lu_numba import _batch_inner
        ok = jit.ready("the assembly and LU kernels", (_assemble_range, _batch_inner))
    else:
        from .kernels.pv_osimr_numba import _run_parallel, _run_serial
        ok = jit.ready("the PV-OSIMr Delassus kernel", (_run_serial, _run_parallel))
    if ok:
        _READY.add(method)
    return ok


def _compiled(method):
    """The compiled entry point, imported on first use (numba's import costs ~0.5 s)."""
    module, name = COMPILED[method].split(":")
    return getattr(importlib.import_module(module), name)


def _backend(method, backend):
    if backend is None:     # auto: numba once its kernel runs without a JIT compile (sparsedyn/jit.py)
        if method not in COMPILED:
            return "numpy"
        return "numba" if _numba_ready(method) else "numpy"
    if backend not in BACKENDS:
        raise ValueError(f"delassus: unknown backend {backend!r} (available: {', '.join(BACKENDS)})")
    if backend == "numba" and method not in COMPILED:
        raise ValueError(f"delassus: method {method!r} has no numba backend "
                         f"(compiled: {', '.join(sorted(COMPILED))})")
    return backend


def delassus(model, q, contacts, method="pv-osimr", backend=None):
    """Delassus matrix J M^-1 J^T (B, m, m) (or (m, m) for a single q) of the contacts at q.
    backend: "numba" (compiled, default where available), "numpy" (reference) or None (auto)."""
    sweeps = _method(method)
    backend = _backend(method, backend)
    if isinstance(model, ClusterModel):
        return _with_loops(model, q, contacts, method, backend)
    rc = _resolve(model, contacts)
    if backend == "numba" and method == "pv-osimr" and _one_state_array(q) and not counting():
        bound = one_state(model, rc)        # one state: the bound kernel, its screens passed
        value = None if bound is None else bound.unchecked(q if q.ndim == 1 else q[0])
        if value is not None:
            return value if q.ndim == 1 else value[None]
    q, single = check_configuration(model, q)
    B = q.shape[0]
    sub, rows = moving_part(model, rc)
    if sub is None or not B:
        return unbatch(np.zeros((B, rc.m, rc.m)), single)
    if backend == "numba":
        D = _compiled(method)(model, q, sub, lambda mo, qq, r: sweeps(mo, qq, joint_transforms(mo, qq), r))
    else:
        D = sweeps(model, q, joint_transforms(model, q), sub)
    check_finite(D, f"delassus (method {method!r})", {"q": q}, "Lambda^-1")
    if sub is rc:
        return unbatch(D, single)
    out = np.zeros((B, rc.m, rc.m))                  # world-welded contacts: zero rows/columns
    out[:, rows[:, None], rows[None, :]] = D
    return unbatch(out, single)


_ONE_STATE = IdentityCache()


def _one_state_array(q):
    """q is a float64 array of one state: (nq,) or (1, nq) (its width checked by the screens)."""
    return (type(q) is np.ndarray and q.dtype == np.float64
            and (q.ndim == 1 or (q.ndim == 2 and q.shape[0] == 1)))


def one_state(model, rc):
    """The compiled PV-OSIMr bound to (model, rc) for one state per call (delassus_one_state.py),
    kept with rc (None when Lambda^-1 = 0: no contact moves or no DoF)."""
    hit = _ONE_STATE.get((model, rc))
    if hit is None:
        sub, rows = moving_part(model, rc)
        hit = _ONE_STATE.put((model, rc), (None if sub is None else
                                           OneState(model, sub, rows, rc.m),))
    return hit[0]


def moving_part(model, rc):
    """(the resolved contacts on moving bodies, their rows in Lambda^-1): (rc, None) when every
    contact moves, (None, None) when none does or the model has no DoF (Lambda^-1 = 0)."""
    moving = [k for k, b in enumerate(rc.bodies) if b != WORLD]
    if not moving or not model.nv:
        return None, None
    if len(moving) == len(rc.bodies):
        return rc, None
    rows = np.concatenate([np.arange(rc.offsets[k], rc.offsets[k + 1]) for k in moving])
    return _subset(rc, moving), rows


def _with_loops(cm, q, contacts, method, backend):
    if method != "sparse":
        raise ValueError(f"delassus: a ClusterModel (kinematic loops) takes method='sparse' (Nori's "
                         f"system with the loop rows), not {method!r}")
    q, single = check_configuration(cm.model, q)
    if isinstance(contacts, Contact):
        contacts = [contacts]
    D = compile_loop_delassus(cm, list(contacts)).evaluate(q, backend=backend)
    return unbatch(check_finite(D, "delassus (method 'sparse', kinematic loops)", {"q": q}, "Lambda^-1"), single)


_RESOLVED = IdentityCache()


def _resolve(model, contacts):
    """resolve_contacts, cached by identity: Model and Contact are immutable (read-only arrays),
    and re-resolving costs more than the compiled kernel for small batches."""
    if isinstance(contacts, Contact):
        contacts = [contacts]
    objects = (model,) + tuple(contacts)
    rc = _RESOLVED.get(objects)
    return rc if rc is not None else _RESOLVED.put(objects, resolve_contacts(model, objects[1:]))


def _subset(rc, keep):
    offsets = np.concatenate(([0], np.cumsum([rc.K[k].shape[0] for k in keep]))).astype(int)
    return ResolvedContacts(tuple(rc.contacts[k] for k in keep), tuple(rc.bodies[k] for k in keep),
                            tuple(rc.K[k] for k in keep), offsets, int(offsets[-1]))


__all__ = ["delassus", "Contact", "METHODS", "COMPILED"]
