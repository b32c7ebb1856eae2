"""Probe iDynTree's BERDY as oracle / benchmark peer on iCub (example-robot-data URDF).

  python experiments/berdy_probe.py [--samples 200] [--seed 0] [--timing-reps 2000]

(a) loads iCub with its six F/T sensors (iDynTree's URDF <sensor> extension),
(b) builds ground truth with Pinocchio (random q, dq, ddq, random wrench on l_foot, rnea torques,
    F/T readings from data.f computed independently of iDynTree),
(c) feeds BERDY F/T readings + joint accelerations (+ zero known external wrenches, l_foot wrench
    unknown) and compares its MAP torques / foot wrench with the truth, fixed and floating base,
(d) times BerdySparseMAPSolver per sample (update + doEstimate) and the full Python wrapper.
See experiments/berdy_notes.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import pinocchio as pin  # noqa: E402

from berdy_oracle import (BerdyOracle, _ft_joints_as_revolute, import_idyntree,  # noqa: E402
                          pin_base_proper_classical_acc, simulate_ft_readings, urdf_ft_sensors)
from oracles import robot_urdf  # noqa: E402

CONTACT = "l_foot"


def fext_list(pm, fext):
    out = [pin.Force.Zero() for _ in range(pm.njoints)]
    for name, w in fext.items():
        fr = pm.frames[pm.getFrameId(name, pin.BODY)]
        out[fr.parentJoint] += fr.placement.act(pin.Force(np.asarray(w)))
    return out


def list_sensors(idyn, urdf):
    ml = idyn.ModelLoader()
    ml.loadModelFromFile(urdf)
    m = ml.model()
    sl = m.sensors()
    print(f"iDynTree full model: {m.getNrOfLinks()} links, {m.getNrOfJoints()} joints, {m.getNrOfDOFs()} DOFs, "
          f"base {m.getLinkName(m.getDefaultBaseLink())}")
    print("  sensors: F/T %d, accelerometers %d, gyroscopes %d" % tuple(
        sl.getNrOfSensors(t) for t in (idyn.SIX_AXIS_FORCE_TORQUE, idyn.ACCELEROMETER, idyn.GYROSCOPE)))
    for i in range(sl.getNrOfSensors(idyn.SIX_AXIS_FORCE_TORQUE)):
        ft = sl.getSixAxisForceTorqueSensor(i)
        T = idyn.Transform()
        ft.getLinkSensorTransform(ft.getSecondLinkIndex(), T)
        print(f"  {ft.getName():17s} joint {ft.getParentJoint():17s} {ft.getFirstLinkName():12s} -> "
              f"{ft.getSecondLinkName():12s} measured wrench applied on {m.getLinkName(ft.getAppliedWrenchLink())}; "
              f"child_H_sensor = identity: {np.allclose(T.asHomogeneousTransform().toNumPy(), np.eye(4))}")


def ground_truth_fixed(pm, pd, urdf, rng):
    q = pin.randomConfiguration(pm)
    v, a = rng.normal(size=pm.nv), rng.normal(size=pm.nv)
    fext = {CONTACT: rng.normal(size=6) * 20.0}
    tau = pin.rnea(pm, pd, q, v, a, fext_list(pm, fext)).copy()
    return q, v, a, fext, tau, simulate_ft_readings(pm, pd, urdf, fext)


def ground_truth_floating(pm, pd, urdf, rng):
    """Free-floating: the l_foot wrench is the one that makes the base wrench zero."""
    q = pin.randomConfiguration(pm)
    q[:3] = rng.normal(size=3)
    v, a = rng.normal(size=pm.nv), rng.normal(size=pm.nv)
    tau0 = pin.rnea(pm, pd, q, v, a).copy()
    fid = pm.getFrameId(CONTACT, pin.BODY)
    pin.computeJointJacobians(pm, pd, q)
    pin.updateFramePlacements(pm, pd)
    J = pin.getFrameJacobian(pm, pd, fid, pin.LOCAL)
    fext = {CONTACT: np.linalg.solve(J[:, :6].T, tau0[:6])}
    tau = pin.rnea(pm, pd, q, v, a, fext_list(pm, fext)).copy()
    assert np.abs(tau[:6]).max() < 1e-8
    ft = simulate_ft_readings(pm, pd, urdf, fext)
    bacc = pin_base_proper_classical_acc(pm, pd, q, v, a, "base_link")
    return q, v, a, fext, tau, ft, bacc


def check_ft_simulation(urdf, pm, q, v, a, fext, ft):
    """Independent cross-check of simulate_ft_readings: Pinocchio model in which the F/T joints
    are revolute joints held at 0 -> data.f of that joint is the wrench across it."""
    sens = urdf_ft_sensors(urdf)
    pm2 = pin.buildModelFromXML(_ft_joints_as_revolute(open(urdf).read(), [s["joint"] for s in sens]))
    pd2 = pm2.createData()
    q2, v2, a2 = np.zeros(pm2.nq), np.zeros(pm2.nv), np.zeros(pm2.nv)
    for j in range(1, pm.njoints):
        j1, j2 = pm.joints[j], pm2.joints[pm2.getJointId(pm.names[j])]
        q2[j2.idx_q:j2.idx_q + j2.nq] = q[j1.idx_q:j1.idx_q + j1.nq]
        v2[j2.idx_v:j2.idx_v + j2.nv] = v[j1.idx_v:j1.idx_v + j1.nv]
        a2[j2.idx_v:j2.idx_v + j2.nv] = a[j1.idx_v:j1.idx_v + j1.nv]
    pin.rnea(pm2, pd2, q2, v2, a2, fext_list(pm2, fext))
    return max(np.abs(ft[s["name"]] + pd2.f[pm2.getJointId(s["joint"])].vector).max() for s in sens)


def errors(r, tau_true, f_true):
    e_tau = np.abs(r["tau"] - tau_true).max()
    e_f = np.abs(r["ext_wrenches"][CONTACT] - f_true).max()
    return e_tau, e_f


def time_solver(o, samples, reps, floating):
    """µs per sample of solver.update* + doEstimate with pre-built iDynTree inputs."""
    idyn = o.idyn
    prepared = []
    for s in samples:
        q, v, a, fext, tau, ft = s[:6]
        qj, vj, aj = (q[7:], v[6:], a[6:]) if floating else (q, v, a)
        y = o.measurement_vector(aj, ft)
        prepared.append((idyn.JointPosDoubleArray.FromPython(o._joint_vector(qj)),
                         idyn.JointDOFsDoubleArray.FromPython(o._joint_vector(vj)),
                         idyn.VectorDynSize.FromPython(y),
                         idyn.Vector3.FromPython(v[3:6].copy() if floating else np.array([0, 0, -9.81]))))
    solver, fi = o.solver, o.frame_index
    upd = solver.updateEstimateInformationFloatingBase if floating else solver.updateEstimateInformationFixedBase
    n = len(prepared)
    for k in range(min(50, reps)):  # warm-up
        jp, jv, y, w = prepared[k % n]
        upd(jp, jv, fi, w, y)
        solver.doEstimate()
    t_upd = t_est = 0.0
    for k in range(reps):
        jp, jv, y, w = prepared[k % n]
        t0 = time.perf_counter()
        upd(jp, jv, fi, w, y)
        t1 = time.perf_counter()
        solver.doEstimate()
        t2 = time.perf_counter()
        t_upd += t1 - t0
        t_est += t2 - t1
    return 1e6 * t_upd / reps, 1e6 * t_est / reps


def time_wrapper(o, samples, reps, floating):
    t0 = time.perf_counter()
    for k in range(reps):
        q, v, a, fext, tau, ft = samples[k % len(samples)][:6]
        if floating:
            o.estimate(q[7:], v[6:], a[6:], ft=ft, base_omega=v[3:6])
        else:
            o.estimate(q, v, a, ft=ft)
    return 1e6 * (time.perf_counter() - t0) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timing-reps", type=int, default=2000)
    args = ap.parse_args()
    idyn = import_idyntree()
    urdf = robot_urdf("icub")
    rng = np.random.default_rng(args.seed)
    print("idyntree module:", idyn.__name__, "| pinocchio", pin.__version__)
    list_sensors(idyn, urdf)

    # ------------------------------------------------------------------ fixed base
    pm = pin.buildModelFromUrdf(urdf)
    pd = pm.createData()
    samples = [ground_truth_fixed(pm, pd, urdf, rng) for _ in range(args.samples)]
    print(f"\nF/T simulation cross-check (revolute-at-0 model): max |diff| = "
          f"{max(check_ft_simulation(urdf, pm, *s[:4], s[5]) for s in samples[:20]):.2e} N/Nm")

    o = BerdyOracle(urdf, floating_base=False, unknown_wrench_links=(CONTACT,))
    print(f"\nFIXED BASE (ORIGINAL_BERDY_FIXED_BASE, F/T joints as revolute-at-0): {o.model.getNrOfDOFs()} DOFs, "
          f"d {o.n_d}, D rows {o.n_eq}, y {o.n_y}; base {o.base_link}; cov: y 1e-6, D 1e-8, d 1e4, "
          f"unknown {CONTACT} wrench 1e6")
    layout = o.dynamic_variable_layout()
    print("  first link block of d:", [(t, i, off, sz) for t, i, off, sz in layout[:6]])
    et, ef, scale = [], [], []
    for q, v, a, fext, tau, ft in samples:
        r = o.estimate(q, v, a, ft=ft)
        e1, e2 = errors(r, tau, fext[CONTACT])
        et.append(e1)
        ef.append(e2)
        scale.append(np.abs(tau).max())
    print(f"  tau max abs err {max(et):.2e} Nm (|tau|max up to {max(scale):.1f}); "
          f"{CONTACT} wrench max abs err {max(ef):.2e}")
    # conventions: proper acceleration / joint wrench variables vs Pinocchio (last sample)
    q, v, a, fext, tau, ft = samples[-1]
    r = o.estimate(q, v, a, ft=ft)
    pin.rnea(pm, pd, q, v, a, fext_list(pm, fext))
    d = r["d"]
    idx = {(t, i): slice(off, off + sz) for t, i, off, sz in layout}
    jk = pm.getJointId("l_knee")
    print("  d[LINK_BODY_PROPER_ACCELERATION l_lower_leg] == Pinocchio a_gf (lin-first, body frame):",
          np.allclose(d[idx[("LINK_BODY_PROPER_ACCELERATION", "l_lower_leg")]], pd.a_gf[jk].vector, atol=1e-6))
    print("  d[JOINT_WRENCH l_knee] == Pinocchio data.f (parent->child, child frame):",
          np.allclose(d[idx[("JOINT_WRENCH", "l_knee")]], pd.f[jk].vector, atol=1e-6))
    print("  d[NET_EXT_WRENCH l_foot] == applied wrench (link frame):",
          np.allclose(d[idx[("NET_EXT_WRENCH", CONTACT)]], fext[CONTACT], atol=1e-6))
    r = o.estimate(q, v, a, ft={k: -w for k, w in ft.items()})
    print(f"  negative control, F/T signs flipped: tau err {errors(r, tau, fext[CONTACT])[0]:.1f} Nm")
    o_noft = BerdyOracle(urdf, floating_base=False, ft_sensors=False, unknown_wrench_links=(CONTACT,))
    r = o_noft.estimate(q, v, a)
    print(f"  negative control, no F/T sensors (foot wrench unobservable): tau err "
          f"{errors(r, tau, fext[CONTACT])[0]:.1f} Nm")
    for cov in (1e-4, 1e-2):
        o2 = BerdyOracle(urdf, floating_base=False, unknown_wrench_links=(CONTACT,), measurement_cov=cov)
        e = max(errors(o2.estimate(*s[:3], ft=s[5]), s[4], s[3][CONTACT])[0] for s in samples[:20])
        print(f"  measurement_cov {cov:g} (exact readings): tau max abs err {e:.2e}")
    tu, te = time_solver(o, samples, args.timing_reps, False)
    tw = time_wrapper(o, samples, min(args.timing_reps, 500), False)
    print(f"  TIMING per sample: updateEstimateInformationFixedBase {tu:.0f} us + doEstimate {te:.0f} us "
          f"= {tu + te:.0f} us; full Python estimate() {tw:.0f} us")

    # ------------------------------------------------------------------ floating base
    pmf = pin.buildModelFromUrdf(urdf, pin.JointModelFreeFlyer())
    pdf = pmf.createData()
    fsamples = [ground_truth_floating(pmf, pdf, urdf, rng) for _ in range(args.samples)]
    of = BerdyOracle(urdf, floating_base=True, unknown_wrench_links=(CONTACT,))
    print(f"\nFLOATING BASE (BERDY_FLOATING_BASE, full model): {of.model.getNrOfDOFs()} DOFs, d {of.n_d}, "
          f"D rows {of.n_eq}, y {of.n_y}; base {of.base_link}; same covariances")
    for pinned in (False, True):
        et, ef, ea = [], [], []
        for q, v, a, fext, tau, ft, bacc in fsamples:
            r = of.estimate(q[7:], v[6:], a[6:], ft=ft, base_omega=v[3:6], base_acc=bacc if pinned else None)
            e1, e2 = errors(r, tau[6:], fext[CONTACT])
            et.append(e1)
            ef.append(e2)
            ea.append(np.abs(r["d"][of.base_acc_slice] - bacc).max())
        print(f"  base acc {'pinned by prior' if pinned else 'free (from dynamics)'}: tau max abs err "
              f"{max(et):.2e}, {CONTACT} wrench {max(ef):.2e}, base proper classical acc {max(ea):.2e}")
    tu, te = time_solver(of, fsamples, args.timing_reps, True)
    tw = time_wrapper(of, fsamples, min(args.timing_reps, 500), True)
    print(f"  TIMING per sample: updateEstimateInformationFloatingBase {tu:.0f} us + doEstimate {te:.0f} us "
          f"= {tu + te:.0f} us; full Python estimate() {tw:.0f} us")


if __name__ == "__main__":
    main()
