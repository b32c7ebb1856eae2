"""Contacts (rigid constraints on single links) and their LOCAL contact-frame Jacobian.

A Contact constrains the motion of one link at a contact frame rigidly attached to it (Pinocchio's
RigidConstraintModel with reference frame LOCAL):

    "6d": the contact frame's spatial velocity in the contact frame, linear-first  (m_k = 6)
    "3d": the linear velocity of the contact point in the contact frame            (m_k = 3)

Internally each contact k on body b(k) is the constant selection K_k (m_k x 6, angular-first
columns) with v_contact = K_k v_b(k): the rows of the motion transform cX_b picked and ordered as
above. K_k is what the seeds call the end-effector constraint matrix (EFPA's kX_p(k), PV-OSIMr's
K_i); J_k = K_k bJ, bJ the body's LOCAL Jacobian.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .batch import check_configuration, unbatch
from .errors import check_finite
from .kinematics import joint_transforms
from .model.model import WORLD
from .opcount import counting
from .spatial import S_product, Transform, rows_times_transform, rows_transform_cost

KINDS = {"6d": 6, "3d": 3}

# rows of an angular-first 6x6 motion transform giving [linear; angular] resp. [linear]
_ROWS = {"6d": np.r_[3:6, 0:3], "3d": np.r_[3:6]}


@dataclass(frozen=True)
class Contact:
    """A 6D (weld) or 3D (point) contact on `link` at `placement` (4x4 in the link's frame)."""

    link: str
    kind: str = "6d"
    placement: np.ndarray | None = None

    def __post_init__(self):
        if not isinstance(self.link, str):
            raise ValueError(f"Contact link must be a link name (str), got {type(self.link).__name__}")
        kind = str(self.kind).lower() if isinstance(self.kind, str) else self.kind
        if kind not in KINDS:
            raise ValueError(f"Contact on {self.link!r}: bad kind {self.kind!r} (expected '6d' or '3d')")
        object.__setattr__(self, "kind", kind)
        T = np.eye(4) if self.placement is None else np.array(self.placement, dtype=float)
        if T.shape != (4, 4):
            raise ValueError(f"Contact on {self.link!r}: placement must be a 4x4 homogeneous matrix, "
                             f"got shape {np.shape(self.placement)}")
        R = T[:3, :3]
        if (not np.all(np.isfinite(T)) or not np.allclose(T[3], [0, 0, 0, 1])
                or not np.allclose(R.T @ R, np.eye(3), atol=1e-9) or np.linalg.det(R) < 0):
            raise ValueError(f"Contact on {self.link!r}: placement is not a rigid transform "
                             "(finite, rotation block orthonormal with det +1, last row [0 0 0 1])")
        T.setflags(write=False)
        object.__setattr__(self, "placement", T)

    @property
    def dim(self):
        return KINDS[self.kind]


def contact_flags(contacts, links, B, what):
    """{link: (B,) bool} from a call's {link: bool or (B,) bool}: which of `links` (the plan's
    switchable contacts, `what` names them in errors) hold in each of B states."""
    if not isinstance(contacts, dict):
        raise ValueError("contacts: expected a dict {link: bool or (B,) bool}")
    out = {}
    for link, flag in contacts.items():
        if link not in links:
            raise KeyError(f"contacts: {link!r} is not one of {what} {list(links)}")
        flag = np.asarray(flag)
        if flag.dtype != bool or flag.shape not in ((), (B,)):
            raise ValueError(f"contacts[{link!r}]: expected a bool or a ({B},) bool array, got "
                             f"{flag.dtype} {flag.shape}")
        out[link] = np.broadcast_to(flag, (B,))
    return out


@dataclass(frozen=True)
class ResolvedContacts:
    """Contacts bound to a model: body index, constant K_k (m_k x 6), row offsets in Lambda."""

    contacts: tuple
    bodies: tuple          # body index per contact (WORLD for links welded to the fixed base)
    K: tuple               # (m_k, 6) angular-first constraint selections
    offsets: np.ndarray    # offsets[k]:offsets[k+1] are contact k's rows
    m: int

    def rows(self, k):
        return slice(int(self.offsets[k]), int(self.offsets[k + 1]))


def resolve_contacts(model, contacts):
    """Check the contacts against the model and precompute their constant K_k."""
    if isinstance(contacts, Contact):
        contacts = [contacts]
    contacts = tuple(contacts)
    bodies, K = [], []
    for c in contacts:
        if not isinstance(c, Contact):
            raise ValueError(f"contacts: expected Contact instances, got {type(c).__name__}")
        if c.link not in model.frames:
            raise KeyError(f"contact: model {model.name!r} has no link named {c.link!r}")
        frame = model.frames[c.link]
        T = frame.placement @ c.placement                # contact frame in the body frame
        cXb = Transform.from_placement(T[:3, :3], T[:3, 3]).matrix()
        bodies.append(int(frame.body))
        K.append(np.ascontiguousarray(cXb[_ROWS[c.kind]]))
    offsets = np.concatenate(([0], np.cumsum([c.dim for c in contacts]))).astype(int)
    return ResolvedContacts(contacts, tuple(bodies), tuple(K), offsets, int(offsets[-1]))


def contact_jacobian_sweeps(model, Xup, rc):
    """Stacked J (B, m, nv): for each contact walk up its support, R <- R jX_lambda(j), with
    J_k[:, j] = R S_j (Featherstone Sec. 8.1: a LOCAL Jacobian's columns are bX_j S_j). Paper
    count: R's structural pattern is tracked (K_k's zeros and units, then each R X's: the angular
    rows of a composed motion transform keep their zero linear block)."""
    B = Xup[0].E.shape[0] if Xup else 1
    J = np.zeros((B, rc.m, model.nv))
    for k, b in enumerate(rc.bodies):
        rows = np.broadcast_to(rc.K[k], (B,) + rc.K[k].shape)
        K = np.asarray(rc.K[k], float)
        nz, unit = (K != 0, np.abs(K) == 1) if counting() else (None, None)
        j = b
        while j != WORLD:
            S = model.joints[j].S
            J[:, rc.rows(k), model.v_slice(j)] = S_product(rows, S, A_pattern=nz, A_unit=unit)
            p = int(model.parents[j])
            if p != WORLD:
                rows = rows_times_transform(Xup[j], rows, nz)
                if nz is not None:
                    nz = rows_transform_cost(Xup[j], nz)[2]
                    unit = np.zeros_like(nz)
            j = p
    return J


def contact_jacobian(model, q, contacts):
    """LOCAL contact Jacobian (B, m, nv) (or (m, nv)) of the stacked contacts, rows in contact
    order: 6D contacts give [linear; angular] velocity rows, 3D contacts the linear rows, all in
    the contact frame (Pinocchio's getConstraintsJacobian for LOCAL RigidConstraintModels)."""
    rc = resolve_contacts(model, contacts)
    q, single = check_configuration(model, q)
    J = contact_jacobian_sweeps(model, joint_transforms(model, q), rc)
    return unbatch(check_finite(J, "contact_jacobian", dict(q=q), "J"), single)
