"""Sensors as measurement equations on Nori's dynamic variables (seed 001, Sec. VI, eq. 17, 19, 24).

Every sensor reading is LINEAR in the variables d = {a_i, f_i, tau_i, fx_i, qdd_i} with
coefficients that depend on the state (q, v) only:

    y = sum_k C_k(q) d_(kind_k, body_k) + bias(q, v)          (one block row of D_Y d + b_Y = 0)

`sensor.linear_map(model, kin, wrench_links)` returns the terms C_k (constant 2-D arrays or
state-dependent (B, size, n) arrays) and the bias; `structure(...)` gives the worst-case pattern
of each term (Remark 4), so the estimation problem can be planned offline.

Frames and signs (public values are linear-first, [force; torque] and [linear; angular]):

  JointAccelerations(joints=None, base=True) qdd of the named movable joints (default: all, in
                            Pinocchio's v order), preceded by the free-flyer's 6 ([lin; ang] local,
                            Pinocchio's spatial, not classical, acceleration) if `base`; the
                            default is the whole qdd (nv,). base=False: the base acceleration is
                            unknown (see "Floating base" below). v_indices(model) says where each
                            reading sits in qdd.
  JointTorques(joints)      tau of the named movable joints (default: all, free-flyer excluded).
  UnactuatedBase()          pseudo-measurement tau_root = 0 (6,) of a floating base.
  ExternalWrench(link)      the external wrench acting ON `link`, in the link frame (6,).
  ForceTorque(joint)        six-axis F/T: the wrench exerted by the parent side ON the child side
                            across `joint`, in the joint frame (6,). Movable joint: the joint
                            wrench f_i (Pinocchio's data.f). Fixed joint merged into body b: the
                            Newton-Euler balance of the child-side links of b (see ForceTorque).
  LoadCells(link, placement) three-axis load cells (f_z, mu_x, mu_y) of the contact wrench on
                            `link` in the contact frame (link frame o placement) (3,) (eq. 19).
  ZeroTangentialForce(link, placement) slippery-floor pseudo-measurement f_x = f_y = 0 in the
                            contact frame (2,) (eq. 24); readings default to zeros.
  Accelerometer(link, placement) proper linear acceleration (classical acceleration minus
                            gravity) of the sensor origin, in the sensor frame (3,).
  Gyroscope(link, placement) angular velocity in the sensor frame (3,). It depends on (q, v) only
                            and carries no information on d, so it adds NO rows: the estimator
                            reports its residual (reading - prediction) as a consistency check.
  AngularAccelerometer(link, placement) angular acceleration in the sensor frame (3,), e.g. the
                            time derivative of a gyroscope's reading (in a frame fixed on the link,
                            d/dt of the angular velocity IS the angular acceleration) (iDynTree's
                            THREE_AXIS_ANGULAR_ACCELEROMETER).

Floating base (iDynTree's BERDY_FLOATING_BASE in these terms; tests/test_floating_base_estimation):
  * Base acceleration measured: JointAccelerations() (default) reads the free-flyer's 6.
  * Base acceleration unknown: JointAccelerations(base=False). Its 6 unknowns are determined by
    - the unactuated-base rows tau_root = 0 when every external wrench is known or measured (e.g.
      an F/T between each unknown contact and the base): the base acceleration is then an output;
    - an IMU on the base: Accelerometer (3 rows, proper linear acceleration) + AngularAccelerometer
      (3 rows). A Gyroscope adds no rows: its reading is an INPUT, the base angular velocity
      (v[3:6] if mounted along the base frame). Accelerometer + AngularAccelerometer determine the
      whole base acceleration and free the 6 base rows for one more unknown wrench; an
      accelerometer alone determines 3 of the 6.
    Otherwise EstimationProblem.check() raises IllPosedError naming qdd[<root joint>], the base's.
  * What the Newton-Euler equations in body frames depend on: the base POSITION never (gravity is
    a free vector: a_root = rootX_world (-a_g) + qdd_root, and X (0; g) = (0; E g)); the base
    ORIENTATION only through that gravity term; the base LINEAR VELOCITY through velocity products
    (v x S qd, v x* I v, omega x v of an accelerometer) that cancel in every force (Galilean
    invariance) but not in spatial accelerations. So with base=False (qdd_root then appears in
    no other row) the base pose enters only the estimate of qdd_root, the base linear velocity
    only those of a and qdd_root: the estimated tau, f, fx and joint qdd depend on neither
    (exactly for "exact" / "lstsq" plans; a MAP prior on a and qdd_root adds the difference of
    its bias, ~1e-11 relative on iCub).
    EstimationProblem.floating_base_state(q_joints, v_joints, base_omega) builds (q, v) with an
    identity base pose and zero base linear velocity, as BERDY_FLOATING_BASE takes its inputs;
    est["a", <base link>] is then the base's proper classical acceleration
    [R^T (p'' - g); omega'] (BERDY's LINK_BODY_PROPER_CLASSICAL_ACCELERATION).

Internally everything is angular-first in body frames (spatial.py); the swap to the public
linear-first order is part of each sensor's coefficient matrix.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import SensorError
from .model.model import WORLD
from .spatial import Transform, cross3, cross_force

#: angular-first index of each public linear-first component (fx fy fz mx my mz)
_LIN_FIRST = np.r_[3:6, 0:3]
_STRUCT_TOL = 1e-12


@dataclass
class Term:
    """y += coeff @ d[(kind, body)]: coeff (size, n) constant or (B, size, n) state-dependent.

    For state-dependent terms, `basis` = (constant factor M (size, 6), joint j) says the coefficient
    is M (jX_lambda(j))^T, whose worst-case pattern follows from the joint's structure."""

    kind: str
    body: int
    coeff: np.ndarray
    basis: tuple | None = None

    @property
    def key(self):
        return (self.kind, self.body)


def _placement_transform(T):
    """Motion transform sX_b (6x6, angular-first) of a frame with placement T (4x4) in body b."""
    X = Transform.from_placement(T[:3, :3][None], T[:3, 3][None])
    return X.matrix()[0]


def _force_transform(T):
    """sX_b^* = (sX_b)^-T: a body-frame wrench expressed in the frame placed at T."""
    return np.linalg.inv(_placement_transform(T)).T


def _link_frame(model, link, what):
    if link not in model.frames:
        raise SensorError(f"{what}: model {model.name!r} has no link named {link!r}")
    frame = model.frames[link]
    if frame.body == WORLD:
        raise SensorError(f"{what}: link {link!r} is welded to the fixed world: it has no dynamics")
    return frame


def _placement(placement, what):
    if placement is None:
        return np.eye(4)
    T = np.asarray(placement, dtype=float)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise SensorError(f"{what}: placement must be a finite 4x4 homogeneous matrix")
    R = T[:3, :3]
    if not np.allclose(R.T @ R, np.eye(3), atol=1e-9) or np.linalg.det(R) <= 0:
        raise SensorError(f"{what}: placement rotation is not a proper rotation matrix")
    return T


class Sensor:
    """Base class: `name`, `size`, `rows` (False: adds no rows to D_Y), `default_reading`."""

    rows = True
    default_reading = None     # a sensor with a known reading (pseudo-measurement) sets 0.0

    def __init__(self, name):
        self.name = str(name)

    # ------------------------------------------------------------------ model binding
    def validate(self, model):
        """Raise SensorError naming the element if the model cannot carry this sensor."""

    def wrench_links(self, model):
        """Links whose external wrench this sensor measures (they get an fx variable)."""
        return ()

    # ------------------------------------------------------------------ the measurement map
    def linear_map(self, model, kin, wrench_links):
        """(terms, bias (B, size)) with y = sum terms + bias; wrench_links {body: link}."""
        raise NotImplementedError

    def gravity_terms(self, model):
        """[(body, G (size, 3))]: the part of linear_map's bias that is sum G E_body0 g, linear
        in the gravity vector in body coordinates (the compiled rows propagate it; the rest of
        the bias is quadratic in one body's velocity). None here."""
        return []

    def simulate(self, model, q, v, truth):
        """Reading (B, size) from a ground truth: `truth` = sparsedyn.sensors.ground_truth(...)."""
        from .kinematics import forward_kinematics
        kin = forward_kinematics(model, q, v)
        terms, bias = self.linear_map(model, kin, truth.wrench_links)
        y = np.array(bias, dtype=float)
        for t in terms:
            x = truth.blocks.get(t.key)
            if x is None:
                continue                    # a variable that does not exist is zero
            y += np.einsum("bij,bj->bi" if np.ndim(t.coeff) == 3 else "ij,bj->bi", t.coeff, x)
        return y

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r}, size={self.size})"


class JointAccelerations(Sensor):
    """Joint accelerations: a floating base's 6 ([lin; ang] local) if `base`, then the named
    movable joints' (default: all) in the given (default: Pinocchio's) order. The default reads
    the whole qdd (nv,) in Pinocchio's order.

    base=False leaves the floating base's acceleration unknown, to be determined by the dynamics
    or an IMU (module docstring, "Floating base"); it is refused on a model without a floating base
    (there is nothing to leave out). The root free-flyer is selected by `base`, not `joints`."""

    def __init__(self, name="qdd", *, joints=None, base=True):
        super().__init__(name)
        if base not in (True, False):
            raise SensorError(f"sensor {self.name!r}: base must be True or False, got {base!r}")
        self.joints = None if joints is None else [str(j) for j in joints]
        self.base = bool(base)
        self.size = None          # known once bound to a model (validate)

    def _bodies(self, model):
        """Measured bodies, in reading order."""
        floating = model.floating_base
        if not floating and not self.base:
            raise SensorError(f"sensor {self.name!r}: base=False, but model {model.name!r} has no "
                              f"floating base")
        if self.joints is None:
            listed = list(range(int(floating), model.nbodies))
        else:
            listed = _joint_bodies(self.name, self.joints, model)
            if floating and 0 in listed:
                raise SensorError(f"sensor {self.name!r}: joint {model.joints[0].name!r} is the "
                                  f"floating base: select it with base=True/False, not joints")
        out = ([0] if floating and self.base else []) + listed
        if not out:
            raise SensorError(f"sensor {self.name!r}: measures nothing (no joints, base=False)")
        return out

    def v_indices(self, model):
        """Index in qdd (nv,) of each reading entry: reading = qdd[..., v_indices(model)]."""
        return np.concatenate([np.arange(model.nv)[model.v_slice(i)] for i in self._bodies(model)])

    def validate(self, model):
        self.size = sum(model.joints[i].nv for i in self._bodies(model))

    def linear_map(self, model, kin, wrench_links):
        self.validate(model)
        terms, start = [], 0
        for i in self._bodies(model):
            n = model.joints[i].nv
            terms.append(Term("qdd", i, _row_block(self.size, slice(start, start + n), n)))
            start += n
        return terms, np.zeros((kin.Xup[0].E.shape[0], self.size))


def _joint_bodies(sensor, names, model):
    """Bodies of the named joints (SensorError naming an unknown or repeated one)."""
    out = []
    for n in names:
        try:
            out.append(model.joint_index(n))
        except KeyError:
            raise SensorError(f"sensor {sensor!r}: model {model.name!r} has no movable "
                              f"joint named {n!r}") from None
    if len(set(out)) != len(out):
        raise SensorError(f"sensor {sensor!r}: a joint is listed twice in {names}")
    return out


def _row_block(size, rows, n):
    """(size, n) selection: the n columns land on `rows` (a slice) of the reading."""
    C = np.zeros((size, n))
    C[rows, :] = np.eye(n)
    return C


class JointTorques(Sensor):
    """Torques of the named movable joints (default: every movable joint, root free-flyer
    excluded), in the given (default: Pinocchio's) order."""

    def __init__(self, joints=None, name="tau"):
        super().__init__(name)
        self.joints = None if joints is None else [str(j) for j in joints]
        self.size = None          # known once bound to a model (validate)

    def _bodies(self, model):
        names = list(model.joint_names) if self.joints is None else self.joints
        return _joint_bodies(self.name, names, model)

    def validate(self, model):
        bodies = self._bodies(model)
        self.size = sum(model.joints[i].nv for i in bodies)

    def linear_map(self, model, kin, wrench_links):
        bodies = self._bodies(model)
        self.size = sum(model.joints[i].nv for i in bodies)
        terms, start = [], 0
        for i in bodies:
            n = model.joints[i].nv
            terms.append(Term("tau", i, _row_block(self.size, slice(start, start + n), n)))
            start += n
        return terms, np.zeros((kin.Xup[0].E.shape[0], self.size))


class UnactuatedBase(Sensor):
    """Pseudo-measurement: the free-flyer is not actuated, tau_root = 0 (6 rows)."""

    default_reading = 0.0

    def __init__(self, name="base_unactuated"):
        super().__init__(name)
        self.size = 6

    def validate(self, model):
        if not model.floating_base:
            raise SensorError(f"sensor {self.name!r}: model {model.name!r} has no floating base")

    def linear_map(self, model, kin, wrench_links):
        return [Term("tau", 0, np.eye(6))], np.zeros((kin.Xup[0].E.shape[0], 6))


class _WrenchSensor(Sensor):
    """A sensor on the external wrench of one link, seen in a frame placed on that link."""

    rows_af = _LIN_FIRST          # angular-first components read, in reading order

    def __init__(self, link, placement, name):
        super().__init__(name)
        self.link = str(link)
        self.placement = _placement(placement, f"sensor {self.name!r}")
        self.size = len(self.rows_af)

    def validate(self, model):
        _link_frame(model, self.link, f"sensor {self.name!r}")

    def wrench_links(self, model):
        return (self.link,)

    def linear_map(self, model, kin, wrench_links):
        frame = _link_frame(model, self.link, f"sensor {self.name!r}")
        if wrench_links.get(frame.body) != self.link:
            raise SensorError(f"sensor {self.name!r}: link {self.link!r} has no wrench variable "
                              f"(declare it unknown or measured)")
        # fx_b is the body-frame wrench of the single wrench link of body b
        C = _force_transform(frame.placement @ self.placement)[self.rows_af]
        return [Term("fx", frame.body, C)], np.zeros((kin.Xup[0].E.shape[0], self.size))


class ExternalWrench(_WrenchSensor):
    """The external wrench on `link` in the link frame, linear-first [force; torque] (6,)."""

    def __init__(self, link, name=None):
        super().__init__(link, None, name or f"{link}_wrench")


class LoadCells(_WrenchSensor):
    """Three-axis load cells: [f_z, mu_x, mu_y] of the contact wrench in the contact frame
    (link frame composed with `placement`; z is the contact normal) (eq. 19)."""

    rows_af = np.array([5, 0, 1])

    def __init__(self, link, placement=None, name=None):
        super().__init__(link, placement, name or f"{link}_load_cells")


class ZeroTangentialForce(_WrenchSensor):
    """Slippery floor (eq. 24): f_x = f_y = 0 in the contact frame; readings default to zeros."""

    rows_af = np.array([3, 4])
    default_reading = 0.0

    def __init__(self, link, placement=None, name=None):
        super().__init__(link, placement, name or f"{link}_slippery")


class ForceTorque(Sensor):
    """Six-axis F/T across `joint`: the wrench exerted by the parent side on the child side, in the
    joint frame, linear-first (6,).

    Movable joint of body i: y = f_i (eq. 3f_i). Fixed joint s merged into body b (child-side
    links L_c of b, child bodies J_c hanging from them): the Newton-Euler balance of that
    rigid sub-assembly, in body b's frame, moved to the joint frame,

        y = sX_b^* [ I_c a_b + v_b x* I_c v_b - [wrench link of b in L_c] fx_b + sum_(j in J_c) jX_b^T f_j ]

    with I_c the sum of the link inertias of L_c (all linear in a_b, fx_b, f_j)."""

    def __init__(self, joint, name=None):
        super().__init__(name or joint)
        self.joint = str(joint)
        self.size = 6

    def _frame(self, model):
        f = model.joint_frames.get(self.joint)
        if f is None:
            raise SensorError(f"sensor {self.name!r}: model {model.name!r} has no joint named "
                              f"{self.joint!r}")
        if f.body == WORLD:
            raise SensorError(f"sensor {self.name!r}: joint {self.joint!r} is welded to the fixed "
                              f"world: the wrench across it acts on the world")
        return f

    def validate(self, model):
        self._frame(model)

    def child_side(self, model):
        """(links of the body on the child side of the fixed joint, child bodies hanging from them)."""
        f = self._frame(model)
        b = f.body
        links = {f.child}
        grew = True
        while grew:
            grew = False
            for name, lf in model.frames.items():
                if lf.body == b and name not in links and lf.parent in links and name != model.link_names[b]:
                    links.add(name)
                    grew = True
        children = [j for j in model.children[b]
                    if model.joint_frames[model.joints[j].name].parent in links]
        return links, children

    def linear_map(self, model, kin, wrench_links):
        f = self._frame(model)
        B = kin.Xup[0].E.shape[0]
        swap = np.eye(6)[_LIN_FIRST]
        if f.kind == "joint":
            return [Term("f", f.body, swap)], np.zeros((B, 6))       # y = f_i (joint frame = body i)
        b = f.body
        links, children = self.child_side(model)
        Xs = swap @ _force_transform(f.placement)                     # sX_b^*, linear-first rows
        Ic = sum(model.frames[l].inertia for l in links)
        terms = [Term("a", b, Xs @ Ic)]
        if wrench_links.get(b) in links:
            terms.append(Term("fx", b, -Xs))
        for j in children:
            XjT = np.swapaxes(kin.Xup[j].matrix(), -1, -2)            # lambda(j)X*_j = (jX_b)^T
            terms.append(Term("f", j, Xs @ XjT, basis=(Xs, j)))
        vb = kin.body_velocities[:, b]
        bias = cross_force(vb, np.einsum("ij,bj->bi", Ic, vb)) @ Xs.T
        return terms, bias


class _PointSensor(Sensor):
    def __init__(self, link, placement, name):
        super().__init__(name)
        self.link = str(link)
        self.placement = _placement(placement, f"sensor {self.name!r}")
        self.size = 3

    def validate(self, model):
        _link_frame(model, self.link, f"sensor {self.name!r}")

    def _sensor_transform(self, model):
        frame = _link_frame(model, self.link, f"sensor {self.name!r}")
        return frame.body, _placement_transform(frame.placement @ self.placement)


class Accelerometer(_PointSensor):
    """Proper linear acceleration of the sensor origin in the sensor frame (3,):
    y = lin(sX_b a_b) + omega_s x v_s, a_b including -a_g (Nori's a_0 = -a_g)."""

    def __init__(self, link, placement=None, name=None):
        super().__init__(link, placement, name or f"{link}_acc")

    def linear_map(self, model, kin, wrench_links):
        b, Xs = self._sensor_transform(model)
        vs = kin.body_velocities[:, b] @ Xs.T
        return [Term("a", b, Xs[3:])], cross3(vs[:, :3], vs[:, 3:])


class Gyroscope(_PointSensor):
    """Angular velocity in the sensor frame (3,). Adds no rows (see the module docstring)."""

    rows = False

    def __init__(self, link, placement=None, name=None):
        super().__init__(link, placement, name or f"{link}_gyro")

    def predict(self, model, kin):
        b, Xs = self._sensor_transform(model)
        return kin.body_velocities[:, b] @ Xs[:3].T

    def linear_map(self, model, kin, wrench_links):
        return [], self.predict(model, kin)


class AngularAccelerometer(_PointSensor):
    """Angular acceleration in the sensor frame (3,): y = ang(sX_b a_b) (gravity, a linear
    acceleration, does not enter; nor do velocities: the spatial and classical angular
    accelerations are equal)."""

    def __init__(self, link, placement=None, name=None):
        super().__init__(link, placement, name or f"{link}_angacc")

    def linear_map(self, model, kin, wrench_links):
        b, Xs = self._sensor_transform(model)
        return [Term("a", b, Xs[:3])], np.zeros((kin.Xup[0].E.shape[0], 3))


# ------------------------------------------------------------------------------------------
# ground truth for simulate()


@dataclass
class GroundTruth:
    """Variable blocks {(kind, body): (B, n)} of a simulated state (internal convention)."""

    blocks: dict
    wrench_links: dict


def ground_truth(model, q, v, qdd, f_ext=None):
    """Every dynamic variable for (q, v, qdd, f_ext) by the RNEA sweeps (Nori eq. 2-3): a (incl.
    -a_g), f, tau, qdd, and fx for the links in f_ext ({link: linear-first wrench, link frame};
    at most one link per body)."""
    from .batch import state
    from .recursive._common import external_forces
    from .recursive.rnea import rnea_sweeps
    q, vecs, B, _ = state(model, q, v=v, a=qdd)
    f_ext = dict(f_ext or {})
    wrench_links = {}
    for link in f_ext:
        body = _link_frame(model, link, "f_ext").body
        if body in wrench_links:
            raise SensorError(f"f_ext: links {wrench_links[body]!r} and {link!r} are merged into "
                              f"one body: their wrenches cannot be told apart")
        wrench_links[body] = link
    fx = external_forces(model, f_ext, B)
    tau, _, a, f = rnea_sweeps(model, q, vecs["v"], vecs["a"], fx)
    blocks = {}
    for i in range(model.nbodies):
        s = model.v_slice(i)
        blocks[("a", i)], blocks[("f", i)] = a[:, i], f[:, i]
        blocks[("tau", i)], blocks[("qdd", i)] = tau[:, s], vecs["a"][:, s]
    for body in wrench_links:
        blocks[("fx", body)] = fx[:, body]
    return GroundTruth(blocks, wrench_links)


__all__ = ["Sensor", "SensorError", "Term", "JointAccelerations", "JointTorques", "UnactuatedBase",
           "ExternalWrench", "ForceTorque", "LoadCells", "ZeroTangentialForce", "Accelerometer",
           "Gyroscope", "AngularAccelerometer", "GroundTruth", "ground_truth"]


# ------------------------------------------------------------------------------------------
# sensors declared in a URDF (iDynTree's extension). The reader lives here, not in
# sparsedyn.urdf_sensors, because that module re-exports it: an import in both directions would
# be a cycle (tests/test_architecture.py). sparsedyn.urdf_sensors documents the format.


class UnmappedSensorWarning(UserWarning):
    """A sensor declared in a URDF has no sparsedyn counterpart and was skipped (names it)."""


class DeclaredForceTorque(ForceTorque):
    """A ForceTorque read in another frame and sign, as a URDF declaration may define it:

        y = sign * (wrench parent side -> child side, expressed in the frame placed at
            `placement` in the joint frame)  =  transform @ y_ForceTorque

    with `transform` a constant 6x6 (linear-first); sign -1 reads the wrench the child side
    exerts on the parent side."""

    def __init__(self, joint, placement=None, sign=1, name=None):
        super().__init__(joint, name)
        if sign not in (1, -1):
            raise SensorError(f"sensor {self.name!r}: sign must be 1 or -1, got {sign!r}")
        self.placement = _placement(placement, f"sensor {self.name!r}")
        self.sign = int(sign)
        swap = np.eye(6)[_LIN_FIRST]
        self.transform = self.sign * swap @ _force_transform(self.placement) @ swap.T

    def linear_map(self, model, kin, wrench_links):
        terms, bias = super().linear_map(model, kin, wrench_links)
        M = self.transform
        # a constant left factor keeps every term linear in its variable; a state-dependent
        # term's basis factor absorbs it, so its worst-case pattern stays known offline
        terms = [Term(t.kind, t.body, M @ t.coeff,
                      None if t.basis is None else (M @ t.basis[0], t.basis[1])) for t in terms]
        return terms, bias @ M.T


_FT_FRAMES = ("child", "parent", "sensor")
_FT_DIRECTIONS = ("child_to_parent", "parent_to_child")


def _urdf_parent(elem, attr):
    parent = elem.find("parent")
    return None if parent is None else parent.get(attr)


def _urdf_force_torque(elem, name, joints, convention, origin):
    """The sensor of one <sensor type="force_torque">, or None (warned) if it cannot be mapped."""
    jname = _urdf_parent(elem, "joint")
    if jname not in joints:
        raise SensorError(f"sensor {name!r}: " + ("no <parent joint=...>" if jname is None else
                                                  f"the URDF has no joint named {jname!r}"))
    ft = elem.find("force_torque")
    frame, direction = ((ft.findtext(tag) or "").strip() if ft is not None else ""
                        for tag in ("frame", "measure_direction"))
    # iDynTree rejects a declaration without both, so accepting one would guess its meaning
    if frame not in _FT_FRAMES or direction not in _FT_DIRECTIONS:
        raise SensorError(f"sensor {name!r}: <force_torque> needs <frame> in {_FT_FRAMES} and "
                          f"<measure_direction> in {_FT_DIRECTIONS}, got {frame!r}, {direction!r}")
    if convention == "sparsedyn":
        return ForceTorque(jname, name=name)
    joint = joints[jname]
    if frame == "parent" and joint.get("type") != "fixed":
        import warnings
        warnings.warn(f"sensor {name!r}: an F/T reading in the parent link frame of the movable "
                      f"joint {jname!r} is in a moving frame: skipped", UnmappedSensorWarning,
                      stacklevel=3)
        return None
    # the joint frame is the child link frame; the parent link frame sits at origin^-1 in it
    placement = {"child": None, "parent": np.linalg.inv(origin(joint, f"joint {jname!r}")),
                 "sensor": origin(elem, f"sensor {name!r}")}[frame]
    return DeclaredForceTorque(jname, placement, -1 if direction == "child_to_parent" else 1, name)


def from_urdf(model_or_path, convention="sparsedyn"):
    """Sensor objects for the F/T sensors, accelerometers and gyroscopes a URDF declares with
    iDynTree's <sensor> extension, named as in the URDF (see sparsedyn.urdf_sensors).

    model_or_path: a Model loaded by load_urdf (it keeps its URDF), or the URDF path / XML text.
    convention: "sparsedyn" (F/T readings in ForceTorque's convention) or "idyntree" (as the
    declaration's frame / measure_direction define them: DeclaredForceTorque).
    Raises SensorError naming a sensor on a joint/link the URDF does not have; warns
    (UnmappedSensorWarning) naming every sensor it skips."""
    import os
    import warnings
    from .model.urdf import _origin, _read_xml
    if convention not in ("sparsedyn", "idyntree"):
        raise ValueError(f"convention: expected 'sparsedyn' or 'idyntree', got {convention!r}")
    if not isinstance(model_or_path, (str, os.PathLike)):
        source = getattr(model_or_path, "urdf_source", None)
        if source is None:
            raise TypeError(f"model_or_path: expected a URDF path (or XML text) or a Model "
                            f"loaded by load_urdf, got {type(model_or_path).__name__}")
        model_or_path = source
    robot = _read_xml(model_or_path)
    joints = {j.get("name"): j for j in robot.findall("joint")}
    links = {l.get("name") for l in robot.findall("link")}
    out = []
    for elem in robot.findall("sensor"):
        name, kind = elem.get("name"), elem.get("type")
        if not name:
            raise SensorError(f"a URDF <sensor type={kind!r}> has no name attribute")
        if kind == "force_torque":
            s = _urdf_force_torque(elem, name, joints, convention, _origin)
        elif kind in ("accelerometer", "gyroscope"):
            link = _urdf_parent(elem, "link")
            if link not in links:
                raise SensorError(f"sensor {name!r}: " + ("no <parent link=...>" if link is None
                                  else f"the URDF has no link named {link!r}"))
            cls = Accelerometer if kind == "accelerometer" else Gyroscope
            s = cls(link, _origin(elem, f"sensor {name!r}"), name=name)
        else:
            s = None
            warnings.warn(f"sensor {name!r}: type {kind!r} has no sparsedyn counterpart: skipped",
                          UnmappedSensorWarning, stacklevel=2)
        if s is not None:
            out.append(s)
    # Gazebo's <sensor>s are plugin settings that iDynTree ignores; an F/T one on a joint that
    # already has an iDynTree declaration (iCub's case) repeats it
    ft_joints = {s.joint for s in out if isinstance(s, ForceTorque)}
    for g in robot.findall("gazebo"):
        for elem in g.findall("sensor"):
            if elem.get("type") == "force_torque" and g.get("reference") in ft_joints:
                continue
            warnings.warn(f"sensor {elem.get('name')!r}: Gazebo <sensor type={elem.get('type')!r}> "
                          f"on {g.get('reference')!r} is not read (only iDynTree's top-level "
                          f"<sensor> is): skipped", UnmappedSensorWarning, stacklevel=2)
    return out


__all__ += ["UnmappedSensorWarning", "DeclaredForceTorque", "from_urdf"]
