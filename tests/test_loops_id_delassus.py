"""Inverse dynamics and Delassus matrices with kinematic loops in Nori's system (problems/loops.py
given ydd, problems/loop_delassus.py) and loop plans saved and loaded, against independent
oracles: G^T RNEA(q, G yd, G ydd + g) with Pinocchio's RNEA of the spanning tree (seed 003,
Sec. II-C's projected RNEA), the Lagrange multipliers of the KKT system built from Pinocchio's H
and C, J G (G^T H G)^-1 G^T J^T with Pinocchio's H (Sec. II-E), and C-RNEA / C-EFPA."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn as sd
from oracles import pin, pin_twin, rel_err
from sparsedyn.errors import PlanMismatchError
from sparsedyn.loops import four_bar, geared_chain, mini_cheetah, mit_humanoid, mit_humanoid_leg
from sparsedyn.problems import compile, loop_forward_dynamics, loop_inverse_dynamics
from sparsedyn.problems.loop_delassus import compile_loop_delassus
from sparsedyn.recursive.cluster import c_efpa, c_rnea
from test_loops import pin_mass_matrix
from test_loops_sparse import SYSTEMS as FD_SYSTEMS

TOL = 1e-10

SYSTEMS = dict(FD_SYSTEMS, mit_humanoid_leg=mit_humanoid_leg)


@pytest.fixture(scope="module", params=list(SYSTEMS))
def system(request):
    cm = SYSTEMS[request.param]()
    return request.param, cm, pin_twin(cm.model), compile(loop_inverse_dynamics(cm))


def test_loop_id_equals_pinocchio_projected_rnea_and_c_rnea(system):
    name, cm, pm, plan = system
    q, yd, ydd = cm.random_state(30, batch=3)
    qd = cm.spanning_velocity(q, yd)
    res = plan.solve(q, qd, ydd=ydd)
    assert res["tau_y"].shape == (3, cm.ny) and res["lambda"].shape == (3, cm.nc)
    pd = pm.createData()
    for b in range(3):
        G, g = cm.explicit(q[b], yd[b])
        ref = G.T @ pin.rnea(pm, pd, q[b], G @ yd[b], G @ ydd[b] + g)
        assert rel_err(res["tau_y"][b], ref) <= TOL
        single = plan.solve(q[b], qd[b], ydd=ydd[b])
        assert single["tau_y"].shape == (cm.ny,) and rel_err(single["tau_y"], ref) <= TOL
        # the spanning accelerations follow the explicit form, the prescribed ydd included
        assert rel_err(res["qdd"][b], G @ ydd[b] + g) <= TOL
    assert rel_err(res["tau_y"], c_rnea(cm, q, yd, ydd)) <= 1e-9


def test_loop_id_multipliers_are_the_lagrange_ones(system):
    """Fed to the KKT system with Pinocchio's H and C, the torques tau_y reproduce ydd, and the
    multipliers are the Lagrange ones: H qdd + C = tau_s + K^T lambda."""
    name, cm, pm, plan = system
    q, yd, ydd = cm.random_state(31)
    qd = cm.spanning_velocity(q, yd)
    res = plan.solve(q, qd, ydd=ydd)
    H = pin_mass_matrix(pm, q)
    C = pin.rnea(pm, pm.createData(), q, qd, np.zeros(cm.model.nv))
    K, _ = cm.implicit(q, qd)
    tau_s = cm.spanning_torque(res["tau_y"])
    assert rel_err(H @ res["qdd"] + C, tau_s + K.T @ res["lambda"]) <= TOL


def test_loop_id_inverts_loop_fd():
    cm = mit_humanoid()
    fd, id_ = sd.compile(sd.forward_dynamics(cm)), sd.compile(sd.inverse_dynamics(cm))   # the loop problems
    assert (fd.problem.name, id_.problem.name) == ("loop_forward_dynamics", "loop_inverse_dynamics")
    q, yd, tau = cm.random_state(32, batch=2)
    qd = cm.spanning_velocity(q, yd)
    ydd = fd.solve(q, qd, tau)["ydd"]
    assert rel_err(id_.solve(q, qd, ydd=ydd)["tau_y"], tau) <= 1e-9


def test_loop_id_with_external_wrenches():
    cm = mini_cheetah()
    pm = pin_twin(cm.model)
    links = ["FR_shank", "body"]
    plan = compile(loop_inverse_dynamics(cm, f_ext=links))
    q, yd, ydd = cm.random_state(33)
    qd = cm.spanning_velocity(q, yd)
    f_ext = {n: np.random.default_rng(33).normal(size=6) for n in links}
    fext = [pin.Force.Zero() for _ in range(pm.njoints)]
    for n, w in f_ext.items():
        fext[cm.model.frames[n].body + 1] = pin.Force(w)
    G, g = cm.explicit(q, yd)
    ref = G.T @ pin.rnea(pm, pm.createData(), q, G @ yd, G @ ydd + g, fext)
    assert rel_err(plan.solve(q, qd, ydd=ydd, f_ext=f_ext)["tau_y"], ref) <= TOL


# ------------------------------------------------------------------ plans saved and loaded

@pytest.mark.parametrize("make", [mit_humanoid, four_bar])
@pytest.mark.parametrize("problem", [loop_forward_dynamics, loop_inverse_dynamics])
def test_loop_plans_round_trip(tmp_path, make, problem):
    cm = make()
    plan = compile(problem(cm))
    path = tmp_path / "loop_plan.npz"
    plan.save(path)
    loaded = sd.load_plan(path, make())                 # a fresh, equal cluster model
    assert loaded.problem.name == plan.problem.name
    q, yd, y = cm.random_state(35, batch=2)
    qd = cm.spanning_velocity(q, yd)
    given = {"ydd": y} if problem is loop_inverse_dynamics else {"tau": y}
    assert np.array_equal(loaded.solve(q, qd, **given).vector, plan.solve(q, qd, **given).vector)


def test_loop_plans_refuse_another_model(tmp_path):
    path = tmp_path / "loop_plan.npz"
    compile(loop_inverse_dynamics(geared_chain(4))).save(path)
    with pytest.raises(PlanMismatchError, match="other clusters"):
        sd.load_plan(path, geared_chain(4, ratio=9.0))          # same tree, other gear ratio
    with pytest.raises(PlanMismatchError, match="another model"):
        sd.load_plan(path, geared_chain(5))
    with pytest.raises(PlanMismatchError, match="load it with that ClusterModel"):
        sd.load_plan(path, geared_chain(4).model)               # the spanning tree alone
    tree_path = tmp_path / "tree_plan.npz"
    compile(sd.inverse_dynamics(geared_chain(4).model)).save(tree_path)
    with pytest.raises(PlanMismatchError, match="not of a cluster model"):
        sd.load_plan(tree_path, geared_chain(4))


# ------------------------------------------------------------------ Delassus matrices with loops

@pytest.mark.parametrize("name, contacts", [
    ("mit_humanoid", [sd.Contact("left_foot"), sd.Contact("right_foot", "3d", np.eye(4)),
                      sd.Contact("left_elbow", "3d")]),
    ("belt_chain6", [sd.Contact("link6"), sd.Contact("link3", "3d")]),
    ("four_bar", [sd.Contact("tail")]),
    ("four_bar_generic", [sd.Contact("tail", "3d"), sd.Contact("rocker")]),
])
def test_loop_delassus_is_the_projected_inverse_osim(name, contacts):
    cm = SYSTEMS[name]()
    pm = pin_twin(cm.model)
    q, _, _ = cm.random_state(36, batch=2)
    T = np.eye(4)
    T[:3, 3] = (0.05, -0.02, 0.1)
    contacts = contacts[:1] + [sd.Contact(c.link, c.kind, T if c.kind == "3d" else None) for c in contacts[1:]]
    D = sd.delassus(cm, q, contacts, method="sparse")
    for b in range(2):
        G, _ = cm.explicit(q[b], np.zeros(cm.ny))
        H = pin_mass_matrix(pm, q[b])
        J = sd.contact_jacobian(cm.model, q[b], contacts)
        ref = J @ G @ np.linalg.solve(G.T @ H @ G, G.T @ J.T)
        assert rel_err(D[b], ref) <= 1e-9
    assert rel_err(sd.delassus(cm, q, contacts, method="sparse", backend="numpy"), D) <= 1e-12
    six = [c.link for c in contacts if c.kind == "6d"]
    if len(six) == len(contacts):                  # 6D contacts at link frames: C-EFPA's frames
        assert rel_err(D, c_efpa(cm, q, six)) <= 1e-9


def test_loop_delassus_counts_and_bad_method():
    cm = mini_cheetah()
    q, _, _ = cm.random_state(37)
    contacts = [sd.Contact(f"{leg}_shank", "3d") for leg in ("FR", "FL", "HR", "HL")]
    with sd.count_operations() as ops:
        D = sd.delassus(cm, q, contacts, method="sparse")
    assert D.shape == (12, 12)
    # the counted evaluation is the plan's stated cost: assembly + LU + 11 more substitutions + C x
    assert ops.flops == compile_loop_delassus(cm, contacts).stats["total_flops"]
    with pytest.raises(ValueError, match="method='sparse'"):
        sd.delassus(cm, q, contacts)
