"""Side-by-side per-state times against Pinocchio, measured in the same run (`sparsedyn bench`).

Every row times one batched sparsedyn call over B states and Pinocchio called once per state
from Python on the same states, and reports the ratio and the largest relative difference.
Pinocchio is a test extra (`pip install -e .[test]`).
"""
from __future__ import annotations

import time

import numpy as np

from .model.pinocchio_io import to_pinocchio_q


def pin_configuration(model, pmodel, q):
    """Our q -> Pinocchio's: kept for older callers; the public function is
    sparsedyn.to_pinocchio_q(model, q, pmodel)."""
    return to_pinocchio_q(model, q, pmodel)


def pin_contact_models(pmodel, contacts):
    """Pinocchio's RigidConstraintModel/Data (LOCAL frame) for our Contacts."""
    import pinocchio as pin
    cms, cds = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for c in contacts:
        fr = pmodel.frames[pmodel.getFrameId(c.link, pin.BODY)]
        kind = pin.ContactType.CONTACT_6D if c.kind == "6d" else pin.ContactType.CONTACT_3D
        cms.append(pin.RigidConstraintModel(kind, pmodel, fr.parentJoint, fr.placement * pin.SE3(c.placement),
                                            pin.ReferenceFrame.LOCAL))
        cds.append(cms[-1].createData())
    return cms, cds


def pinocchio_twin(model, urdf_path, floating_base):
    """Pinocchio's model of the same URDF and a converter of our q to Pinocchio's."""
    import pinocchio as pin
    pm = (pin.buildModelFromUrdf(urdf_path, pin.JointModelFreeFlyer()) if floating_base
          else pin.buildModelFromUrdf(urdf_path))
    return pin, pm, lambda qb: pin_configuration(model, pm, qb)


def best_time(fn, repeat=3):
    out, best = None, np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def _rel(x, y):
    return float(np.abs(np.asarray(x) - np.asarray(y)).max() / max(1.0, np.abs(y).max()))


def run_benchmarks(robot, batch=1024, floating_base=None, repeat=3, seed=0):
    """Rows {what, ours_us, peer, peer_us, err} for ID/FD plans, RNEA/ABA/CRBA and (for the
    embedded humanoid) the Delassus matrix."""
    import sparsedyn as sd
    from . import models
    from .robots import CommandError, load_robot, make_problem

    model = load_robot(robot, floating_base)
    urdf = {"humanoid": models.HUMANOID_URDF, "hand": models.HAND_URDF}.get(robot, robot)
    if not urdf.endswith(".urdf"):
        raise CommandError(f"bench: {robot!r} has no URDF for Pinocchio; give a URDF or humanoid/hand")
    pin, pm, pin_q = pinocchio_twin(model, urdf, model.floating_base)
    pd = pm.createData()
    rng = np.random.default_rng(seed)
    B = int(batch)
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(B, model.nv)), rng.normal(size=(B, model.nv))
    pq = [pin_q(qb) for qb in q]
    rows = []

    def row(what, ours, peer_name, peer):
        (x, t), (y, tp) = best_time(ours, repeat), best_time(peer, repeat)
        rows.append({"what": what, "ours_us": 1e6 * t / B, "peer": peer_name, "peer_us": 1e6 * tp / B,
                     "err": _rel(x, y)})
        return x

    plan_id = sd.compile(make_problem(model, "id"))
    plan_fd = sd.compile(make_problem(model, "fd"))
    plan_id.solve(q[:2], v[:2], qdd=a[:2])  # compile the kernels outside the timing
    plan_fd.solve(q[:2], v[:2], tau=a[:2])
    tau = row("sparse ID (compiled plan)", lambda: plan_id.solve(q, v, qdd=a)["tau"], "pin.rnea",
              lambda: np.array([pin.rnea(pm, pd, pq[b], v[b], a[b]) for b in range(B)]))
    row("sparse FD (compiled plan)", lambda: plan_fd.solve(q, v, tau=tau)["qdd"], "pin.aba",
        lambda: np.array([pin.aba(pm, pd, pq[b], v[b], tau[b]) for b in range(B)]))
    row("RNEA (NumPy, batched)", lambda: sd.rnea(model, q, v, a), "pin.rnea",
        lambda: np.array([pin.rnea(pm, pd, pq[b], v[b], a[b]) for b in range(B)]))
    row("ABA (NumPy, batched)", lambda: sd.aba(model, q, v, tau), "pin.aba",
        lambda: np.array([pin.aba(pm, pd, pq[b], v[b], tau[b]) for b in range(B)]))

    def pin_crba():
        out = np.array([pin.crba(pm, pd, pq[b]) for b in range(B)])
        return np.triu(out) + np.swapaxes(np.triu(out, 1), 1, 2)
    row("CRBA (NumPy, batched)", lambda: sd.crba(model, q), "pin.crba", pin_crba)

    if robot == "humanoid":
        contacts = [sd.Contact("l_sole", "6d"), sd.Contact("r_sole", "6d")] + [
            sd.Contact(f"{s}_{f}_tip", "3d") for s in "lr" for f in ("thumb", "index", "middle")]
        cms, cds = pin_contact_models(pm, contacts)
        sd.delassus(model, q[:2], contacts)

        def pin_delassus():
            return np.array([pin.computeDelassusMatrix(pm, pd, pq[b], cms, cds, 0.0).copy() for b in range(B)])
        row(f"Delassus PV-OSIMr (m = {sum(6 if c.kind == '6d' else 3 for c in contacts)})",
            lambda: sd.delassus(model, q, contacts, method="pv-osimr"), "pin.computeDelassusMatrix",
            pin_delassus)
    return rows
