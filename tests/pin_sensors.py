"""Independent sensor readings and ground truth from PINOCCHIO for the estimation tests.

A ground-truth state: random q, v, joint torques (zero on a free-flyer) and external wrenches on
chosen links; qdd = pin.aba (so the state is consistent with the dynamics). Readings come from
Pinocchio's own quantities only: data.f (joint wrenches), data.a_gf / data.v (per-joint spatial
acceleration with gravity offset, velocity), frame placements, getFrameClassicalAcceleration,
and the per-link inertias Pinocchio keeps on the FIXED_JOINT frames of merged links.
"""
from __future__ import annotations

import numpy as np

from oracles import pin, pin_fext, to_pin_q


class PinTruth:
    """Ground truth for a batch: q (ours), v, qdd, tau (B, nv), f_ext {link: (B, 6)}, plus one
    Pinocchio data per state after rnea(q, v, qdd, fext) (data.f, data.a_gf, data.v, oMf)."""

    def __init__(self, model, pmodel, q, v, tau, f_ext):
        self.model, self.pmodel = model, pmodel
        self.q, self.v, self.tau = q, v, np.array(tau, dtype=float)
        tau = self.tau
        self.f_ext = f_ext
        B = q.shape[0]
        self.datas, self.pq = [], []
        qdd = np.empty_like(v)
        for b in range(B):
            pq = to_pin_q(model, pmodel, q[b])
            fe = pin_fext(model, pmodel, {k: w[b] for k, w in f_ext.items()})
            d = pmodel.createData()
            qdd[b] = pin.aba(pmodel, d, pq, v[b], tau[b], fe)
            d = pmodel.createData()
            # the exact torques of this qdd (a free-flyer's entries are 0 up to round-off of
            # the ABA; tests pass them as the reading of the unactuated-base pseudo-sensor)
            tau[b] = pin.rnea(pmodel, d, pq, v[b], qdd[b], fe)
            pin.forwardKinematics(pmodel, d, pq, v[b], qdd[b])     # placements (rnea keeps data.f)
            pin.updateFramePlacements(pmodel, d)
            self.datas.append(d)
            self.pq.append(pq)
        self.qdd = qdd

    @classmethod
    def random(cls, model, pmodel, rng, B, wrench_links, scale=30.0, tangential_free=()):
        q = model.random_configuration(rng, batch=B)
        v = rng.normal(size=(B, model.nv))
        tau = rng.normal(size=(B, model.nv)) * 5.0
        if model.floating_base:
            tau[:, :6] = 0.0
        f_ext = {}
        for link in wrench_links:
            w = rng.normal(size=(B, 6)) * scale
            if link in tangential_free:
                w[:, :2] = 0.0                   # slippery floor: f_x = f_y = 0 in the link frame
            f_ext[link] = w
        return cls(model, pmodel, q, v, tau, f_ext)

    # ------------------------------------------------------------------ readings
    def joint_wrench(self, joint):
        jid = self.pmodel.getJointId(joint)
        return np.array([d.f[jid].vector for d in self.datas])

    def _frame(self, name, ftype=None):
        for k, f in enumerate(self.pmodel.frames):
            if f.name == name and (ftype is None or f.type == ftype):
                return k, f
        raise KeyError(name)

    def fixed_joint_wrench(self, joint):
        """Wrench parent side -> child side across a FIXED joint, in its frame: the Newton-Euler
        balance of the child-side links (inertias from Pinocchio's FIXED_JOINT frames), minus the
        external wrenches on them, plus the joint wrenches of the child joints hanging from them."""
        pm = self.pmodel
        sid, sframe = self._frame(joint, pin.FrameType.FIXED_JOINT)
        side = {sid}
        grew = True
        while grew:
            grew = False
            for k, f in enumerate(pm.frames):
                if k not in side and f.parentFrame in side and f.type in (pin.FrameType.BODY,
                                                                          pin.FrameType.FIXED_JOINT):
                    side.add(k)
                    grew = True
        child_joints = [f.parentJoint for f in pm.frames
                        if f.type == pin.FrameType.JOINT and f.parentFrame in side]
        ext_links = [n for n in self.f_ext if self._frame(n, pin.FrameType.BODY)[0] in side]
        out = np.zeros((len(self.datas), 6))
        for b, d in enumerate(self.datas):
            oMs = d.oMf[sid]
            w = pin.Force.Zero()
            for k in side:
                f = pm.frames[k]
                if f.type != pin.FrameType.FIXED_JOINT or f.inertia.mass == 0.0:
                    continue
                jMf = f.placement
                a = jMf.actInv(d.a_gf[f.parentJoint])
                vel = jMf.actInv(d.v[f.parentJoint])
                I = f.inertia
                h = I * a + vel.cross(I * vel)
                w += oMs.actInv(d.oMf[k]).act(h)
            for n in ext_links:
                k, _ = self._frame(n, pin.FrameType.BODY)
                w -= oMs.actInv(d.oMf[k]).act(pin.Force(self.f_ext[n][b]))
            for j in child_joints:
                w += oMs.actInv(d.oMi[j]).act(d.f[j])
            out[b] = w.vector
        return out

    def frame_motion(self, link, placement=None):
        """(classical linear acceleration minus gravity, angular velocity) of a frame placed at
        `placement` on `link`, in that frame (B, 3) each."""
        pm = self.pmodel
        fid, frame = self._frame(link, pin.FrameType.BODY)
        T = np.eye(4) if placement is None else placement
        lMs = pin.SE3(T[:3, :3].copy(), T[:3, 3].copy())
        acc, gyro = [], []
        for b, d in enumerate(self.datas):
            dd = pm.createData()
            pin.forwardKinematics(pm, dd, self.pq[b], self.v[b], self.qdd[b])
            pin.updateFramePlacements(pm, dd)
            jMs = frame.placement * lMs
            vs = jMs.actInv(dd.v[frame.parentJoint])
            as_ = jMs.actInv(dd.a[frame.parentJoint])
            classical = as_.linear + np.cross(vs.angular, vs.linear)
            R = (dd.oMi[frame.parentJoint] * jMs).rotation
            acc.append(classical - R.T @ pm.gravity.linear)
            gyro.append(vs.angular)
        return np.array(acc), np.array(gyro)

    def wrench_in(self, link, placement=None):
        """The true external wrench of `link` (linear-first) in frame link o placement."""
        T = np.eye(4) if placement is None else placement
        lMc = pin.SE3(T[:3, :3].copy(), T[:3, 3].copy())
        return np.array([lMc.actInv(pin.Force(w)).vector for w in self.f_ext[link]])


_ROBOTS = {}


def robot_and_pin(name):
    """(our floating-base model, Pinocchio's twin) of the embedded humanoid or an
    example-robot-data robot, built once per test session."""
    if name not in _ROBOTS:
        import sparsedyn as sd
        from oracles import pin_model, robot_urdf
        from sparsedyn.models import HUMANOID_URDF, humanoid
        if name == "humanoid":
            _ROBOTS[name] = humanoid(), pin_model(HUMANOID_URDF, True)
        else:
            _ROBOTS[name] = (sd.load_urdf(robot_urdf(name), floating_base=True),
                             pin_model(robot_urdf(name), True))
    return _ROBOTS[name]


def singular_chain_setting(seed):
    """A 6-link chain, joint accelerations and all torques measured, unknown tip wrench, three
    Pinocchio truth states of which the first (q[0] = 0: the two x axes aligned) is singular.
    Returns (model, checked EstimationProblem, truth)."""
    from oracles import pin_twin
    from sparsedyn import sensors as S
    from sparsedyn.estimation import EstimationProblem
    from sparsedyn.models import serial_chain
    model = serial_chain(6)
    pm = pin_twin(model)
    truth = PinTruth.random(model, pm, np.random.default_rng(seed), 3, ["link6"], scale=5.0)
    q = truth.q.copy()
    q[0] = 0.0
    truth = PinTruth(model, pm, q, truth.v, truth.tau, truth.f_ext)
    problem = EstimationProblem(model, [S.JointAccelerations(), S.JointTorques()],
                                unknown_wrenches=["link6"]).check()
    return model, problem, truth


def square_ankles_setting(seed, B, links=("l_sole", "r_sole", "chest")):
    """The humanoid with qdd and F/T at both ankles and unknown wrenches on `links` (default:
    both feet and the chest, a square estimation problem; both feet alone: over-determined).
    Returns (model, EstimationProblem, truth)."""
    from sparsedyn import sensors as S
    from sparsedyn.estimation import EstimationProblem
    model, pm = robot_and_pin("humanoid")
    links = list(links)
    truth = PinTruth.random(model, pm, np.random.default_rng(seed), B, links)
    problem = EstimationProblem(model, [S.JointAccelerations(), S.ForceTorque("l_foot_ft_sensor"),
                                        S.ForceTorque("r_foot_ft_sensor")], unknown_wrenches=links)
    return model, problem, truth


def walking_truth(model, pmodel, rng, contacts, scale=30.0):
    """A PinTruth whose links' external wrenches are random where `contacts[link]` (B,) is True
    and zero where it is False (a foot in the air); random q, v, and torques (zero on a
    free-flyer)."""
    B = len(next(iter(contacts.values())))
    q = model.random_configuration(rng, batch=B)
    v = rng.normal(size=(B, model.nv))
    tau = rng.normal(size=(B, model.nv)) * 5.0
    if model.floating_base:
        tau[:, :6] = 0.0
    f_ext = {l: rng.normal(size=(B, 6)) * scale * np.asarray(c)[:, None]
             for l, c in contacts.items()}
    return PinTruth(model, pmodel, q, v, tau, f_ext)


def moderate_icub_state(rng, B, links, contacts=None):
    """(model, PinTruth) of iCub states of moderate accelerations (|qdd| ~ 1-30): random joint
    accelerations and wrenches on `links` (zero where contacts[link] (B,) is False: a foot in
    the air), the base's 6 accelerations solved from tau_root = 0 (a random torque on iCub's
    light links gives 1e6-1e12 rad/s^2, where any MAP prior's bias dominates)."""
    import pinocchio as pin
    from oracles import pin_fext, to_pin_q
    model, pm = robot_and_pin("icub")
    q = model.random_configuration(rng, batch=B)
    v = rng.normal(size=(B, model.nv))
    f_ext = {l: rng.normal(size=(B, 6)) * 10.0 for l in links}
    for l, c in (contacts or {}).items():
        f_ext[l] = f_ext[l] * np.asarray(c)[:, None]
    qdd = rng.normal(size=(B, model.nv))
    tau = np.empty_like(qdd)
    for b in range(B):
        pq, fe = to_pin_q(model, pm, q[b]), pin_fext(model, pm, {l: w[b] for l, w in f_ext.items()})
        M = pin.crba(pm, pm.createData(), pq)
        M = np.triu(M) + np.triu(M, 1).T
        tau_root = pin.rnea(pm, pm.createData(), pq, v[b], qdd[b], fe)[:6]
        qdd[b, :6] -= np.linalg.solve(M[:6, :6], tau_root)            # tau_root is affine in it
        tau[b] = pin.rnea(pm, pm.createData(), pq, v[b], qdd[b], fe)
    return model, PinTruth(model, pm, q, v, tau, f_ext)
