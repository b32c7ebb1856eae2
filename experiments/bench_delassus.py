"""Per-state time of every Delassus method, batched (B = 1, 64, 1024), against Pinocchio's
computeDelassusMatrix called once per state from Python, measured in the same run.

Scenario: the embedded humanoid (free-flyer, nv = 49) with 6D welds at both soles and 3D point
contacts at the six fingertips (m = 12 + 18 = 30). Prints per-state microseconds and the ratio
ours / Pinocchio (< 1: faster). Usage: python experiments/bench_delassus.py [--quick]
"""
from __future__ import annotations

import sys
import time

import numpy as np
import pinocchio as pin

import sparsedyn.models as sm
from sparsedyn.contacts import Contact
from sparsedyn.delassus import METHODS, delassus

TIPS = ["l_thumb_tip", "l_index_tip", "l_middle_tip", "r_thumb_tip", "r_index_tip", "r_middle_tip"]


def best_time(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def pin_setup(model, pmodel, contacts):
    cms, cds = pin.StdVec_RigidConstraintModel(), pin.StdVec_RigidConstraintData()
    for c in contacts:
        fr = pmodel.frames[pmodel.getFrameId(c.link)]
        kind = pin.ContactType.CONTACT_6D if c.kind == "6d" else pin.ContactType.CONTACT_3D
        cm = pin.RigidConstraintModel(kind, pmodel, fr.parentJoint, fr.placement * pin.SE3(c.placement),
                                      pin.ReferenceFrame.LOCAL)
        cms.append(cm)
        cds.append(cm.createData())
    return cms, cds


def to_pin_q(model, pmodel, q):
    out = np.zeros(pmodel.nq)
    for i, joint in enumerate(model.joints):
        pj = pmodel.joints[pmodel.getJointId(joint.name)]
        qi = q[model.q_slice(i)]
        if pj.nq == 2 and joint.nq == 1:
            out[pj.idx_q:pj.idx_q + 2] = np.cos(qi[0]), np.sin(qi[0])
        else:
            out[pj.idx_q:pj.idx_q + pj.nq] = qi
    return out


def main(quick=False):
    model = sm.humanoid()
    pmodel = pin.buildModelFromUrdf(sm.HUMANOID_URDF, pin.JointModelFreeFlyer())
    pdata = pmodel.createData()
    contacts = [Contact("l_sole"), Contact("r_sole")] + [Contact(t, "3d") for t in TIPS]
    m = sum(c.dim for c in contacts)
    rng = np.random.default_rng(0)
    batches = (1, 64) if quick else (1, 64, 1024)
    Bmax = max(batches)
    q = model.random_configuration(rng, batch=Bmax)
    pq = [to_pin_q(model, pmodel, qb) for qb in q]
    cms, cds = pin_setup(model, pmodel, contacts)
    ref = np.array([pin.computeDelassusMatrix(pmodel, pdata, x, cms, cds, 0.0) for x in pq[:8]])
    err = np.abs(delassus(model, q[:8], contacts) - ref).max() / np.abs(ref).max()
    print(f"humanoid nv={model.nv}, m={m}; PV-OSIMr vs Pinocchio rel. diff {err:.1e}")

    def pin_loop(B):
        for x in pq[:B]:
            pin.computeDelassusMatrix(pmodel, pdata, x, cms, cds, 0.0)

    print(f"{'method':10s} " + " ".join(f"{'B=' + str(B):>22s}" for B in batches))
    t_pin = {}
    for B in batches:
        reps = 3 if B >= 1024 else 20
        t_pin[B] = best_time(lambda: pin_loop(B), reps) / B
    print(f"{'pinocchio':10s} " + " ".join(f"{t_pin[B] * 1e6:12.1f} us/state     " for B in batches))
    for method in METHODS:
        cells = []
        for B in batches:
            reps = 3 if B >= 1024 else (5 if B >= 64 else 10)
            t = best_time(lambda: delassus(model, q[:B], contacts, method=method), reps) / B
            cells.append(f"{t * 1e6:12.1f} us ({t / t_pin[B]:5.2f}x)")
        print(f"{method:10s} " + " ".join(cells))
    print("ratio = ours / Pinocchio per state (< 1 means faster than Pinocchio from Python)")


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
