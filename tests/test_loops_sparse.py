"""Forward dynamics with kinematic loops as one sparse block system (problems/loops.py) against
independent oracles: the dense Lagrange-multiplier solution with H and C from Pinocchio's RNEA of
the spanning tree (as tests/test_loops.py), Pinocchio's ABA for single-body clusters, and C-ABA."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

from oracles import pin, rel_err
from sparsedyn.loops import ClusterModel, belt_chain, four_bar, geared_chain, mini_cheetah, mit_humanoid
from sparsedyn.models import random_tree
from sparsedyn.problems import compile, forward_dynamics, loop_forward_dynamics, loop_inverse_dynamics
from sparsedyn.recursive.cluster import c_aba
from test_loops import pin_mass_matrix
from oracles import pin_twin

TOL = 1e-10

SYSTEMS = {
    "geared_chain4": lambda: geared_chain(4),
    "geared_chain8": lambda: geared_chain(8),
    "geared_chain12": lambda: geared_chain(12),
    "belt_chain6": lambda: belt_chain(6),
    "mini_cheetah": mini_cheetah,
    "mit_humanoid": mit_humanoid,
    "four_bar": four_bar,
    "four_bar_generic": lambda: four_bar(generic=True),
}


@pytest.fixture(scope="module", params=list(SYSTEMS))
def system(request):
    cm = SYSTEMS[request.param]()
    return request.param, cm, pin_twin(cm.model), compile(loop_forward_dynamics(cm))


def _lagrange_oracle(cm, pm, q, qd, tau, fext=None):
    """(qdd, lambda, H, G) of [[H, K^T], [K, 0]] [qdd; -lambda] = [tau_s - C; k] for one state,
    with H and C = RNEA(q, qd, 0, f_ext) from Pinocchio (fext: its per-joint force list)."""
    pd = pm.createData()
    H = pin_mass_matrix(pm, q)
    z = np.zeros(cm.model.nv)
    C = pin.rnea(pm, pd, q, qd, z, fext) if fext else pin.rnea(pm, pd, q, qd, z)
    K, k = cm.implicit(q, qd)
    n, c = cm.model.nv, cm.nc
    tau_s = np.zeros(n)
    tau_s[cm.independent_v] = tau
    kkt = np.block([[H, K.T], [K, np.zeros((c, c))]])
    x = np.linalg.solve(kkt, np.concatenate((tau_s - C, k)))
    G, _ = cm.explicit(q, cm.independent_velocity(qd))
    return x[:n], -x[n:], H, G


def _fd_error(H, G, ydd, ydd_ref, tau_scale):
    """Relative ydd error where the constrained mass matrix G^T H G is well conditioned
    (cond < 1e6), else the backward error |G^T H G (ydd - ydd_ref)| / tau scale (any
    double-precision FD differs by ~cond * eps), as tests/test_problems.py's _fd_error."""
    Hy = G.T @ H @ G
    backward = float(np.abs(Hy @ (ydd - ydd_ref)).max() / max(1.0, tau_scale))
    if np.linalg.cond(Hy) < 1e6:
        return max(backward, rel_err(ydd, ydd_ref))
    return backward


def test_loop_fd_equals_lagrange_and_c_aba(system):
    name, cm, pm, plan = system
    B = 3
    q, yd, tau = cm.random_state(20, batch=B)
    qd = cm.spanning_velocity(q, yd)
    res = plan.solve(q, qd, tau)
    assert res["ydd"].shape == (B, cm.ny) and res["qdd"].shape == (B, cm.model.nv)
    assert res["lambda"].shape == (B, cm.nc)
    ydd_caba = c_aba(cm, q, yd, tau)
    for b in range(B):
        qdd_ref, lam_ref, H, G = _lagrange_oracle(cm, pm, q[b], qd[b], tau[b])
        scale = np.abs(tau[b]).max()
        single = plan.solve(q[b], qd[b], tau[b])
        assert single["ydd"].shape == (cm.ny,) and single["lambda"].shape == (cm.nc,)
        for ydd in (res["ydd"][b], single["ydd"]):                  # batched and single
            assert _fd_error(H, G, ydd, qdd_ref[cm.independent_v], scale) <= TOL
            assert _fd_error(H, G, ydd, ydd_caba[b], scale) <= TOL
        assert rel_err(single["lambda"], lam_ref) <= TOL
        # the dependent coordinates follow the explicit form qdd = G ydd + g
        _, g = cm.explicit(q[b], yd[b])
        assert _fd_error(H, np.eye(cm.model.nv), res["qdd"][b], G @ res["ydd"][b] + g, scale) <= TOL
        # torque space: H qdd + C = tau_s + K^T lambda (the constraint forces of the oracle)
        assert rel_err(res["lambda"][b], lam_ref) <= TOL


def test_loop_closure_rows_hold(system):
    name, cm, pm, plan = system
    q, yd, tau = cm.random_state(21, batch=4)
    qd = cm.spanning_velocity(q, yd)
    res = plan.solve(q, qd, tau)
    K, k = cm.implicit(q, qd)
    qdd = res["qdd"]
    residual = np.einsum("bij,bj->bi", K, qdd) - k
    scale = np.abs(K).max() * np.abs(qdd).max() + np.abs(k).max()
    assert np.abs(residual).max() <= TOL * max(1.0, scale)
    # per-cluster multipliers and the spanning joint forces S_i^T f_i = tau_s + K^T lambda
    for kk, c in enumerate(cm.clusters):
        lam_k = res["lambda", c.name]
        assert lam_k.shape == (4, c.nc)
        assert np.array_equal(lam_k, res["lambda"][:, cm.constraint_rows(kk)])
    tau_joint = cm.spanning_torque(tau) + np.einsum("bji,bj->bi", K, res["lambda"])
    assert rel_err(res["tau"], tau_joint) <= TOL


def test_constant_transmissions_store_constant_K(system):
    """Geared and belt clusters put K's constants into D; only four-bars add q-dependent entries."""
    name, cm, pm, plan = system
    loop_rows = slice(plan.system.n_tree_rows, None)
    csc = plan.system.pattern.copy()
    csc.data = plan.system.constant_values.copy()
    K_rows = csc.tocsr()[loop_rows]
    is_four_bar = name.startswith("four_bar")
    assert np.isnan(K_rows.data).any() == is_four_bar
    if not is_four_bar:                    # the constants are K itself (at any state)
        q, _, _ = cm.random_state(22)
        K, _ = cm.implicit(q, np.zeros(cm.model.nv))
        qdd_cols = np.concatenate([plan.system.columns[("qdd", i)].indices
                                   for i in range(cm.model.nbodies)])
        assert np.array_equal(K_rows.toarray()[:, qdd_cols], K)


def test_single_body_clusters_reduce_to_the_tree_fd_plan():
    model = random_tree(9, seed=4, joint_types=("revolute", "prismatic", "spherical"))
    cm = ClusterModel(model)
    assert cm.nc == 0
    plan = compile(loop_forward_dynamics(cm))
    tree = compile(forward_dynamics(model))
    P, Pt = plan.system.pattern, tree.system.pattern
    assert P.shape == Pt.shape and np.array_equal(P.indptr, Pt.indptr) and np.array_equal(P.indices, Pt.indices)
    assert np.array_equal(plan.system.constant_values, tree.system.constant_values, equal_nan=True)
    assert plan.stats["flops"] == tree.stats["flops"] and plan.stats["ordering"] == tree.stats["ordering"]
    pm = pin_twin(model)
    pd = pm.createData()
    rng = np.random.default_rng(23)
    q = model.random_configuration(rng, batch=3)
    v, tau = rng.normal(size=(2, 3, model.nv))
    res = plan.solve(q, v, tau)
    assert res["lambda"].shape == (3, 0)
    for b in range(3):
        ref = pin.aba(pm, pd, q[b], v[b], tau[b])
        M = pin_mass_matrix(pm, q[b])
        assert float(np.abs(M @ (res["qdd"][b] - ref)).max()) / max(1.0, np.abs(tau[b]).max()) <= TOL
        assert rel_err(res["ydd"][b], res["qdd"][b]) == 0.0


def test_external_wrenches_vs_pinocchio_lagrange():
    cm = mini_cheetah()
    pm = pin_twin(cm.model)
    links = ["FR_shank", "body"]
    plan = compile(loop_forward_dynamics(cm, f_ext=links))
    q, yd, tau = cm.random_state(24, batch=2)
    qd = cm.spanning_velocity(q, yd)
    rng = np.random.default_rng(24)
    f_ext = {n: rng.normal(size=(2, 6)) for n in links}
    res = plan.solve(q, qd, tau, f_ext=f_ext)
    for b in range(2):
        # builder links are their joints' frames: the wrench goes to joint body + 1 unchanged
        fext = [pin.Force.Zero() for _ in range(pm.njoints)]
        for n, w in f_ext.items():
            fext[cm.model.frames[n].body + 1] = pin.Force(w[b])
        qdd_ref, _, H, G = _lagrange_oracle(cm, pm, q[b], qd[b], tau[b], fext)
        assert _fd_error(H, G, res["ydd"][b], qdd_ref[cm.independent_v], np.abs(tau[b]).max()) <= TOL
    assert rel_err(res["ydd"], c_aba(cm, q, yd, tau, f_ext=f_ext)) <= 1e-9


def test_stats_report_the_loop_system():
    cm = geared_chain(4)
    plan = compile(loop_forward_dynamics(cm))
    s = plan.stats
    tree_rows = compile(forward_dynamics(cm.model)).system.shape[0]
    assert s["n_rows"] == s["n_cols"] == tree_rows + cm.nc and s["n_loop_rows"] == cm.nc
    assert s["fill"] == s["nnz_LU"] - s["nnz_D"] and s["total_flops"] == s["flops"] + s["assembly_flops"]


def test_bad_input_names_the_argument():
    cm = geared_chain(3)
    plan = compile(loop_forward_dynamics(cm))
    q, yd, tau = cm.random_state(25)
    qd = cm.spanning_velocity(q, yd)
    with pytest.raises(ValueError, match="tau"):
        plan.solve(q, qd, tau[:-1])
    with pytest.raises(ValueError, match="tau"):
        plan.solve(q, qd, None)
    with pytest.raises(ValueError, match="qd"):
        plan.solve(q, qd[:-1], tau)
    with pytest.raises(ValueError, match="qd"):
        plan.solve(q, None, tau)
    with pytest.raises(ValueError, match="q"):
        plan.solve(q[:-1], qd, tau)
    with pytest.raises(ValueError, match="without external"):
        plan.solve(q, qd, tau, f_ext={"link2": np.zeros(6)})
    res = plan.solve(q, qd, tau)
    with pytest.raises(KeyError, match="no_such_cluster"):
        res["lambda", "no_such_cluster"]
    with pytest.raises(TypeError, match="ClusterModel"):
        loop_forward_dynamics(cm.model)
    with pytest.raises(KeyError, match="nolink"):
        loop_forward_dynamics(cm, f_ext=["nolink"])
    fx_plan = compile(loop_forward_dynamics(cm, f_ext=["link2"]))
    with pytest.raises(ValueError, match="link3"):
        fx_plan.solve(q, qd, tau, f_ext={"link3": np.zeros(6)})
    with pytest.raises(TypeError, match="loop_forward_dynamics"):
        compile(cm)
    # inverse dynamics with loops (loop_inverse_dynamics) takes ydd, never tau
    id_plan = compile(loop_inverse_dynamics(cm))
    with pytest.raises(ValueError, match="tau: loop_inverse_dynamics takes ydd"):
        id_plan.solve(q, qd, tau)
    with pytest.raises(ValueError, match="ydd: loop_inverse_dynamics needs"):
        id_plan.solve(q, qd)
    with pytest.raises(ValueError, match="ydd"):
        id_plan.solve(q, qd, ydd=tau[:-1])
    with pytest.raises(ValueError, match="ydd: loop_forward_dynamics takes tau"):
        plan.solve(q, qd, ydd=tau)
    with pytest.raises(KeyError, match="tau_y"):
        res["tau_y"]
    with pytest.raises(TypeError, match="ClusterModel"):
        loop_inverse_dynamics(cm.model)
