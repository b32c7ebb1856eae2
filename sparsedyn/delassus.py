"""The Delassus matrix (inverse operational-space inertia) Lambda^-1(q) = J M^-1 J^T, batched.

    delassus(model, q, contacts, method="pv-osimr") -> (B, m, m) or (m, m)

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
    "ltl-osim"  CRBA + L^T L + Y = J L^-1, Y Y^T          (ltl_osim.py)
    "dense"     J M^-1 J^T with a dense Cholesky factorization (reference)
New methods register in METHODS with the signature f(model, q, Xup, resolved_contacts) -> (B, m, m).
"""
from __future__ import annotations

import numpy as np

from .batch import check_configuration, unbatch
from .contacts import Contact, ResolvedContacts, contact_jacobian_sweeps, resolve_contacts
from .errors import SingularModelError
from .kinematics import joint_transforms
from .model.model import WORLD
from .opcount import charge
from .recursive.crba import crba_sweeps
from .recursive.efpa import efpa_sweeps
from .recursive.ltl import ltl
from .recursive.ltl_osim import ltl_osim_sweeps
from .recursive.pv_osim import pv_osim_sweeps
from .recursive.pv_osimr import pv_osimr_sweeps


def dense_sweeps(model, q, Xup, rc):
    """Reference: M by CRBA, J by contacts.contact_jacobian_sweeps, then J M^-1 J^T through a dense
    Cholesky factorization M = C C^T (Lambda^-1 = Z^T Z with Z = C^-1 J^T)."""
    n, m = model.nv, rc.m
    M = crba_sweeps(model, q, Xup)
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
    "ltl-osim": ltl_osim_sweeps,
    "dense": dense_sweeps,
}


def delassus(model, q, contacts, method="pv-osimr"):
    """Delassus matrix J M^-1 J^T (B, m, m) (or (m, m) for a single q) of the contacts at q."""
    try:
        sweeps = METHODS[method]
    except (KeyError, TypeError):
        raise ValueError(f"delassus: unknown method {method!r} "
                         f"(available: {', '.join(sorted(METHODS))})") from None
    rc = resolve_contacts(model, contacts)
    q, single = check_configuration(model, q)
    B = q.shape[0]
    out = np.zeros((B, rc.m, rc.m))
    moving = [k for k, b in enumerate(rc.bodies) if b != WORLD]
    if moving and model.nv:
        sub = rc if len(moving) == len(rc.bodies) else _subset(rc, moving)
        D = sweeps(model, q, joint_transforms(model, q), sub)
        idx = np.concatenate([np.arange(rc.offsets[k], rc.offsets[k + 1]) for k in moving])
        if len(moving) == len(rc.bodies):
            out = D
        else:
            out[:, idx[:, None], idx[None, :]] = D
    return unbatch(out, single)


def _subset(rc, keep):
    offsets = np.concatenate(([0], np.cumsum([rc.K[k].shape[0] for k in keep]))).astype(int)
    return ResolvedContacts(tuple(rc.contacts[k] for k in keep), tuple(rc.bodies[k] for k in keep),
                            tuple(rc.K[k] for k in keep), offsets, int(offsets[-1]))


__all__ = ["delassus", "Contact", "METHODS"]
