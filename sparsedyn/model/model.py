"""The read-only kinematic-tree model and the builder that makes one.

A Model holds only constant data (topology, joint models, tree placements, inertias, frames), as
Pinocchio's Model does; every algorithm allocates its per-call work storage itself, so one Model
is safely shared by threads and batches. Bodies are numbered 0..N-1 in Pinocchio's order with
parent index lambda(i) < i (-1 is the fixed world), so Featherstone's sweeps are plain loops.
"""
from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from ..errors import ModelError, ModelWarning
from ..spatial import inertia_parameters, spatial_inertia
from .joints import FreeFlyerJoint, Joint

WORLD = -1
GRAVITY = np.array([0.0, 0.0, -9.81])


@dataclass(frozen=True)
class Frame:
    """A named frame rigidly attached to a body (body == WORLD for frames on the fixed base).

    `placement` is the 4x4 homogeneous placement of the frame in the body frame. For link frames,
    `parent` names the URDF link it hangs from (None for the root) and `inertia` is the link's own
    spatial inertia expressed in the BODY frame (the body's inertia is the sum over its links);
    sensors between links merged into one body (F/T sensors on fixed joints) need both."""

    name: str
    body: int
    placement: np.ndarray
    kind: str  # "link", "joint" or "fixed_joint"
    parent: str | None = None
    inertia: np.ndarray | None = None
    child: str | None = None  # for joint frames: the child link


def _readonly(a):
    a = np.array(a, dtype=float) if not isinstance(a, np.ndarray) or a.dtype != float else a.copy()
    a.setflags(write=False)
    return a


class Model:
    """Kinematic tree. Do not construct directly: use ModelBuilder, load_urdf or sparsedyn.models."""

    def __init__(self, name, body_names, parents, joints, joint_placements, inertias, frames,
                 joint_frames, lower, upper, effort, gravity=GRAVITY, floating_base=None,
                 armature=None):
        object.__setattr__(self, "_frozen", False)
        self.name = name
        self.link_names = tuple(body_names)
        self.parents = np.asarray(parents, dtype=int)
        self.parents.setflags(write=False)
        self.joints = tuple(joints)
        self.nbodies = len(self.joints)
        self.joint_placements = _readonly(joint_placements)
        self.inertias = _readonly(inertias)
        self.frames = MappingProxyType(dict(frames))
        self.joint_frames = MappingProxyType(dict(joint_frames))
        self.gravity = _readonly(check_gravity(gravity))
        nq_i = [j.nq for j in self.joints]
        nv_i = [j.nv for j in self.joints]
        self.q_index = np.concatenate(([0], np.cumsum(nq_i)[:-1])).astype(int) if nq_i else np.zeros(0, int)
        self.v_index = np.concatenate(([0], np.cumsum(nv_i)[:-1])).astype(int) if nv_i else np.zeros(0, int)
        self.nq = int(sum(nq_i))
        self.nv = int(sum(nv_i))
        self.lower_position_limit = _readonly(lower)
        self.upper_position_limit = _readonly(upper)
        self.effort_limit = _readonly(effort)
        # a free-flyer root (joint_names leaves it out, as Pinocchio's names do the one its
        # loader adds); None: body 0 moves by a free-flyer. load_urdf says which it added: a
        # URDF's own floating joint is a listed joint, as Pinocchio lists it
        root_ff = bool(self.nbodies and isinstance(self.joints[0], FreeFlyerJoint))
        self.floating_base = root_ff if floating_base is None else bool(floating_base) and root_ff
        self.children = tuple(tuple(int(c) for c in np.flatnonzero(self.parents == i))
                              for i in range(self.nbodies))
        self.masses = _readonly([I[3, 3] for I in self.inertias])
        self.armature = _readonly(self._checked_armature(armature))
        self._check()
        object.__setattr__(self, "_frozen", True)

    def __setattr__(self, key, value):
        if getattr(self, "_frozen", False):
            raise AttributeError(f"Model is read-only (tried to set {key!r}); build a new one")
        object.__setattr__(self, key, value)

    # ---------------------------------------------------------------- names and indices

    @property
    def joint_names(self):
        """Movable joints in Pinocchio's order, the root free-flyer excluded."""
        start = 1 if self.floating_base else 0
        return tuple(j.name for j in self.joints[start:])

    def body_index(self, name):
        """Index of the body that carries link (or frame) `name`; WORLD for the fixed base."""
        if name in self.link_names:
            return self.link_names.index(name)
        if name in self.frames:
            return self.frames[name].body
        raise KeyError(f"model {self.name!r} has no link named {name!r}")

    def joint_index(self, name):
        for i, j in enumerate(self.joints):
            if j.name == name:
                return i
        raise KeyError(f"model {self.name!r} has no movable joint named {name!r}")

    def q_slice(self, i):
        return slice(self.q_index[i], self.q_index[i] + self.joints[i].nq)

    def v_slice(self, i):
        return slice(self.v_index[i], self.v_index[i] + self.joints[i].nv)

    def support(self, i):
        """Bodies from i up to the root (i first)."""
        out = []
        while i != WORLD:
            out.append(i)
            i = int(self.parents[i])
        return out

    def subtree(self, i):
        out, stack = [], [i]
        while stack:
            k = stack.pop()
            out.append(k)
            stack.extend(self.children[k])
        return sorted(out)

    def expanded_parents(self):
        """Featherstone's expanded parent array over DoFs (book Sec. 6.5): lambda(k) < k."""
        lam = np.full(self.nv, -1, dtype=int)
        for i, j in enumerate(self.joints):
            first = self.v_index[i]
            p = int(self.parents[i])
            lam[first] = -1 if p == WORLD else self.v_index[p] + self.joints[p].nv - 1
            for k in range(1, j.nv):
                lam[first + k] = first + k - 1
        return lam

    # ---------------------------------------------------------------- configurations

    def neutral_configuration(self):
        return np.concatenate([j.neutral() for j in self.joints]) if self.joints else np.zeros(0)

    def random_configuration(self, rng=None, batch=None):
        """Random configurations inside finite joint limits ((nq,) or (batch, nq))."""
        rng = np.random.default_rng(rng)
        n = 1 if batch is None else int(batch)
        out = np.empty((n, self.nq))
        for b in range(n):
            for i, j in enumerate(self.joints):
                s = self.q_slice(i)
                if j.nq == 1:
                    out[b, s] = j.random_configuration(rng, self.lower_position_limit[s][0],
                                                       self.upper_position_limit[s][0])
                else:
                    out[b, s] = j.random_configuration(rng)
        return out[0] if batch is None else out

    def with_gravity(self, gravity):
        """The same robot under another gravity (3,) [m/s^2, world frame]: a new Model (this one
        is read-only), with its own fingerprint, so plans compiled for one refuse the other."""
        return self._with(gravity, self.armature)

    def with_armature(self, armature):
        """The same robot with rotor inertias `armature` (nv,) >= 0 [kg m^2 or kg] on the joints'
        velocity coordinates (Pinocchio's model.armature, MuJoCo's dof_armature): they add
        diag(armature) to the joint-space inertia, i.e. tau_i = S_i^T f_i + armature_i qdd_i
        in Nori's joint rows (3tau_i). A new Model with its own fingerprint."""
        return self._with(self.gravity, armature)

    def _with(self, gravity, armature):
        new = Model(self.name, self.link_names, self.parents, self.joints, self.joint_placements,
                    self.inertias, self.frames, self.joint_frames, self.lower_position_limit,
                    self.upper_position_limit, self.effort_limit, gravity, self.floating_base,
                    armature)
        # what loaders attach besides the constructor's data (load_urdf: urdf_source)
        for key, value in vars(self).items():
            if key not in vars(new):
                object.__setattr__(new, key, value)
        return new

    def integrate(self, q, v_dt):
        """q (+) v dt, joint by joint (Pinocchio's integrate for the same layout)."""
        q = np.asarray(q, dtype=float)
        v_dt = np.asarray(v_dt, dtype=float)
        out = np.empty_like(q)
        for i, j in enumerate(self.joints):
            out[..., self.q_slice(i)] = j.integrate(q[..., self.q_slice(i)], v_dt[..., self.v_slice(i)])
        return out

    # ---------------------------------------------------------------- identity

    def fingerprint(self):
        """A hash of everything that determines the dynamics (plans store it to detect mismatch)."""
        h = hashlib.sha256()
        h.update(self.name.encode())
        h.update(np.asarray(self.parents).tobytes())
        for j in self.joints:
            h.update(f"{j.kind}:{j.name}".encode())
            if j.axis is not None:
                h.update(np.round(j.axis, 12).tobytes())
            h.update(j.parameters())
        h.update(np.round(self.joint_placements, 12).tobytes())
        h.update(np.round(self.inertias, 12).tobytes())
        # gravity is compiled into a plan's b(q, v) (ir/assembly.py): another gravity, another plan
        h.update(b"gravity" + np.round(self.gravity, 12).tobytes())
        if self.has_armature:          # (a model without keeps the fingerprint it always had)
            h.update(b"armature" + np.round(self.armature, 12).tobytes())
        return h.hexdigest()[:32]

    def _checked_armature(self, armature):
        if armature is None:
            return np.zeros(self.nv)
        a = np.asarray(armature, dtype=float)
        if a.shape != (self.nv,) or not np.all(np.isfinite(a)):
            raise ModelError(f"armature: expected {self.nv} finite numbers (one per velocity "
                             f"coordinate), got shape {a.shape}")
        negative = np.flatnonzero(a < 0)
        if negative.size:
            raise ModelError(f"armature: must be >= 0 (a rotor inertia); negative on the "
                             f"coordinates of joints {self.joints_of_coordinates(negative)}")
        return a

    def joints_of_coordinates(self, coordinates):
        """Names of the joints owning the velocity coordinates (indices into v), in order."""
        owner = np.repeat(np.arange(self.nbodies), [j.nv for j in self.joints])
        return [self.joints[i].name for i in dict.fromkeys(owner[np.asarray(coordinates, int)])]

    @property
    def has_armature(self):
        return bool(np.any(self.armature))

    def _check(self):
        for i, p in enumerate(self.parents):
            if not (WORLD <= p < i):
                raise ModelError(f"body {self.link_names[i]!r}: parent index {p} must precede it")
        for i, I in enumerate(self.inertias):
            # the links were checked as they were added (ModelBuilder.add_body, load_urdf); a body
            # sums its links, which may still overflow
            check_spatial_inertia(I, f"body {self.link_names[i]!r}")

    def __repr__(self):
        return (f"Model({self.name!r}: {self.nbodies} bodies, nq={self.nq}, nv={self.nv}, "
                f"floating_base={self.floating_base})")


def check_gravity(gravity, what="gravity"):
    """gravity as a finite (3,) float array, or ModelError naming `what`."""
    try:
        g = np.asarray(gravity, dtype=float)
    except (TypeError, ValueError):
        raise ModelError(f"{what}: expected 3 numbers [m/s^2], got {gravity!r}") from None
    if g.shape != (3,) or not np.all(np.isfinite(g)):
        raise ModelError(f"{what}: expected 3 finite numbers [m/s^2], got {np.array2string(g)} "
                         f"(shape {g.shape})")
    return g


#: largest |entry| of a spatial inertia (about the square root of the largest double, so that a
#: product of two inertia terms, as in D's elimination or X^T I X, stays finite)
INERTIA_LIMIT = 1e150

#: a rotational inertia counts as positive semi-definite when its smallest eigenvalue is at least
#: -PSD_TOLERANCE times its largest (round-off in the printed digits of a URDF)
PSD_TOLERANCE = 1e-9


def check_spatial_inertia(I, what):
    """Raise ModelError unless I is a finite 6x6 spatial inertia with mass >= 0 and a symmetric
    rotational inertia about the COM. Zero mass is allowed: published URDFs carry massless links,
    and the singular mass matrices they cause are reported by forward dynamics."""
    I = np.asarray(I, dtype=float)
    if I.shape != (6, 6):
        raise ModelError(f"{what}: spatial inertia must be a 6x6 matrix, got shape {I.shape}")
    if not np.all(np.isfinite(I)):
        raise ModelError(f"{what}: spatial inertia is not finite (a mass, COM or inertia too "
                         f"large for double precision)")
    if np.abs(I).max() > INERTIA_LIMIT:
        raise ModelError(f"{what}: spatial inertia entries up to {np.abs(I).max():.3g} exceed "
                         f"{INERTIA_LIMIT:g}: the dynamics multiply such values and would overflow "
                         f"double precision")
    if I[3, 3] < 0:
        raise ModelError(f"{what}: negative mass {I[3, 3]:g}")
    _, _, Ic = inertia_parameters(I)
    if not np.all(np.isfinite(Ic)):
        raise ModelError(f"{what}: the rotational inertia about the COM overflows")
    if not np.allclose(Ic, Ic.T, atol=1e-9 * max(1.0, np.abs(Ic).max())):
        raise ModelError(f"{what}: rotational inertia is not symmetric")
    return Ic


def check_inertia(I, what, strict=True):
    """check_spatial_inertia, and the rotational inertia about the COM positive semi-definite.

    Published URDFs break the latter (tiago's near-massless antenna links: eigenvalues -3.5e-8,
    3.5e-8, 9.1e-8 kg m^2) and Pinocchio loads them as given, so with strict=False so does this,
    with a ModelWarning naming the link and its eigenvalues; strict=True raises ModelError. The
    inertia is kept as given either way, so results equal Pinocchio's; forward dynamics still
    refuses a singular mass matrix (SingularModelError), and sd.aba an indefinite one."""
    Ic = check_spatial_inertia(I, what)
    ev = np.linalg.eigvalsh(0.5 * Ic + 0.5 * Ic.T)    # (Ic + Ic.T) / 2 may overflow
    # Ic = I_O - m cx cx^T carries round-off of the size of the inertia about the origin I_O
    scale = max(np.abs(ev).max(), np.abs(np.asarray(I, dtype=float)[:3, :3]).max())
    if ev.min() < -PSD_TOLERANCE * scale:
        message = (f"{what}: rotational inertia about the COM is not positive semi-definite "
                   f"(eigenvalues {np.array2string(ev, precision=4)} kg m^2)")
        if strict:
            raise ModelError(message)
        warnings.warn(ModelWarning(f"{message}; loaded as given, as Pinocchio does (strict=True "
                                   f"refuses it)"), stacklevel=4)


#: largest accepted deviation of a placement's rotation block from orthonormal (entry-wise)
ROTATION_TOL = 1e-6


def _rigid_placement(placement, what):
    """A 4x4 rigid placement (finite; rotation orthonormal with determinant +1, not a
    reflection; last row [0 0 0 1]), else ModelError naming `what`."""
    T = np.eye(4) if placement is None else np.array(placement, dtype=float)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise ModelError(f"{what}: placement must be a finite 4x4 homogeneous matrix, got shape "
                         f"{T.shape}")
    R = T[:3, :3]
    if (not np.allclose(T[3], [0.0, 0.0, 0.0, 1.0]) or np.abs(R.T @ R - np.eye(3)).max() > ROTATION_TOL
            or np.linalg.det(R) <= 0):
        raise ModelError(f"{what}: placement is not a rigid transform (its rotation block must be "
                         f"orthonormal with determinant +1, not a reflection; det = "
                         f"{np.linalg.det(R):.6g})")
    return T


class ModelBuilder:
    """Python API for trees with any joint (including multi-DoF spherical/planar joints).

    >>> b = ModelBuilder("arm")
    >>> i = b.add_body("link1", WORLD, RevoluteJoint("j1", [0, 0, 1]), placement=np.eye(4),
    ...                mass=1.0, com=[0, 0, 0.1], inertia=np.eye(3) * 1e-2)
    """

    def __init__(self, name="robot", gravity=GRAVITY, strict=True):
        """strict: refuse (ModelError) a link whose rotational inertia is not positive
        semi-definite; False accepts it with a ModelWarning (check_inertia)."""
        self.name = name
        self.strict = bool(strict)
        self.gravity = check_gravity(gravity)
        self._bodies = []
        self._frames = {}
        self._joint_frames = {}

    @property
    def nbodies(self):
        return len(self._bodies)

    def add_body(self, name, parent, joint, placement=None, mass=0.0, com=(0, 0, 0), inertia=None,
                 spatial=None, lower=None, upper=None, effort=None, link_parent=None,
                 link_inertia=None):
        """Append a body attached by `joint` to `parent` (an index or a link name). Returns its index.
        `link_parent` names the link (frame) of the parent body the joint hangs from, when the
        parent body is made of several merged links (the URDF loader sets it). `link_inertia`:
        the spatial inertia of the link `name` alone when the body's inertia also holds merged
        links (default: the body's)."""
        if not isinstance(joint, Joint):
            raise ModelError(f"body {name!r}: joint must be a Joint instance, got {type(joint).__name__}")
        if isinstance(parent, str):
            parent = self._index(parent)
        if not (WORLD <= parent < len(self._bodies)):
            raise ModelError(f"body {name!r}: parent index {parent} does not exist yet")
        if name in self._frames:
            raise ModelError(f"link {name!r} is defined twice")
        placement = _rigid_placement(placement, f"body {name!r}")
        if spatial is None:
            inertia = np.zeros((3, 3)) if inertia is None else np.asarray(inertia, dtype=float)
            if float(mass) < 0:
                raise ModelError(f"link {name!r}: negative mass {float(mass):g}")
            spatial = spatial_inertia(mass, com, inertia)
        spatial = np.array(spatial, dtype=float)
        check_inertia(spatial, f"link {name!r}", self.strict)
        inf = np.full(joint.nq, np.inf)
        self._bodies.append(dict(name=name, parent=int(parent), joint=joint, placement=placement,
                                 inertia=spatial,
                                 lower=-inf if lower is None else np.broadcast_to(lower, joint.nq),
                                 upper=inf if upper is None else np.broadcast_to(upper, joint.nq),
                                 effort=inf if effort is None else np.broadcast_to(effort, joint.nq)))
        index = len(self._bodies) - 1
        parent_link = link_parent
        if parent_link is None and parent != WORLD:
            parent_link = self._bodies[parent]["name"]
        own = spatial if link_inertia is None else np.asarray(link_inertia, dtype=float)
        self._frames[name] = Frame(name, index, _readonly(np.eye(4)), "link", parent_link, _readonly(own))
        self._joint_frames[joint.name] = Frame(joint.name, index, _readonly(np.eye(4)), "joint",
                                               parent_link, None, name)
        return index

    def add_inertia(self, body, spatial):
        """Rigidly append a spatial inertia (in the body frame) to a body (fixed-joint merging)."""
        self._bodies[body]["inertia"] = self._bodies[body]["inertia"] + spatial

    def add_frame(self, name, body, placement, kind="link", parent=None, inertia=None, child=None):
        table = self._frames if kind == "link" else self._joint_frames
        if name in table:
            raise ModelError(f"{'link' if kind == 'link' else 'joint'} {name!r} is defined twice")
        placement = _rigid_placement(placement, f"{'link' if kind == 'link' else 'joint'} {name!r}")
        table[name] = Frame(name, int(body), _readonly(placement), kind, parent,
                            None if inertia is None else _readonly(inertia), child)

    def _index(self, name):
        for i, b in enumerate(self._bodies):
            if b["name"] == name:
                return i
        raise ModelError(f"no link named {name!r} has been added")

    def build(self, floating_base=None):
        """The read-only Model. floating_base: whether body 0's free-flyer is the model's root
        free-flyer (left out of joint_names); None: whenever body 0 moves by a free-flyer."""
        B = self._bodies
        return Model(
            self.name, [b["name"] for b in B], [b["parent"] for b in B], [b["joint"] for b in B],
            np.array([b["placement"] for b in B]).reshape(len(B), 4, 4),
            np.array([b["inertia"] for b in B]).reshape(len(B), 6, 6),
            self._frames, self._joint_frames,
            np.concatenate([b["lower"] for b in B]) if B else np.zeros(0),
            np.concatenate([b["upper"] for b in B]) if B else np.zeros(0),
            np.concatenate([b["effort"] for b in B]) if B else np.zeros(0),
            self.gravity, floating_base)
