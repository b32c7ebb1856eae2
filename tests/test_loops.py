"""Cluster trees and the cluster algorithms (C-RNEA, C-ABA, C-EFPA) against independent oracles:
sparsedyn's and Pinocchio's tree algorithms for single-body clusters, and dense projection /
Lagrange-multiplier solutions built from Pinocchio's CRBA and RNEA of the spanning tree."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn as sd
from oracles import pin, pin_model, rel_err, to_pin_q
from sparsedyn.errors import ModelError, SingularModelError
from sparsedyn.loops import (ClusterModel, GearedMotor, ImplicitConstraint, belt_chain, four_bar, geared_chain,
                             jvrc_like, mini_cheetah, mit_humanoid, mit_humanoid_leg, tello_like)
from sparsedyn.model.joints import RevoluteJoint
from sparsedyn.model.model import WORLD, ModelBuilder
from sparsedyn.models import HUMANOID_URDF, random_tree
from sparsedyn.recursive.cluster import (approximate_aba, approximate_efpa, approximate_rnea, c_aba, c_efpa, c_rnea, lagrange_fd,
                                         projected_rnea, projection_fd, projection_inverse_osim,
                                         reflected_inertia_model)
from oracles import pin_twin

TOL = 1e-10

SYSTEMS = {
    "geared_chain": (lambda: geared_chain(6), ["link6", "link3"]),
    "belt_chain": (lambda: belt_chain(6), ["link6", "link3"]),
    "mini_cheetah": (mini_cheetah, ["FR_shank", "HL_shank", "body"]),
    "mit_humanoid": (mit_humanoid, ["left_foot", "right_foot", "left_elbow"]),
    "four_bar": (four_bar, ["tail", "rocker"]),
    "tello_like": (tello_like, ["left_foot", "right_shin", "left_elbow"]),
    "jvrc_like": (jvrc_like, ["left_ankle_p", "right_ankle_p", "left_wrist_y"]),
    "mit_humanoid_leg": (mit_humanoid_leg, ["left_foot", "left_shank"]),
}


@pytest.fixture(scope="module", params=list(SYSTEMS))
def system(request):
    make, frames = SYSTEMS[request.param]
    cm = make()
    return request.param, cm, frames, pin_twin(cm.model)


def pin_mass_matrix(pm, q):
    """H by Pinocchio's RNEA, column by column (the unit-vector method). pin.crba assumes
    depth-first joint numbering (contiguous subtrees), which the builders' regular numbering
    (rotor after its link, both on the link's parent) does not follow."""
    pd = pm.createData()
    z = np.zeros(pm.nv)
    g0 = pin.rnea(pm, pd, q, z, z)
    return np.stack([pin.rnea(pm, pd, q, z, e) - g0 for e in np.eye(pm.nv)], axis=1)


def _dense_oracle(cm, pm, q, yd, tau):
    """ydd by the projection method and by dense Lagrange multipliers, with H and C from
    Pinocchio's RNEA of the spanning tree (one state)."""
    pd = pm.createData()
    G, g = cm.explicit(q, yd)
    qd = G @ yd
    H = pin_mass_matrix(pm, q)
    C = pin.rnea(pm, pd, q, qd, np.zeros(cm.model.nv))
    ydd_proj = np.linalg.solve(G.T @ H @ G, tau - G.T @ (C + H @ g))
    K, k = cm.implicit(q, qd)
    n, c = cm.model.nv, cm.nc
    kkt = np.block([[H, K.T], [K, np.zeros((c, c))]])
    tau_q = np.zeros(n)
    tau_q[cm.independent_v] = tau
    qdd = np.linalg.solve(kkt, np.concatenate((tau_q - C, k)))[:n]
    return ydd_proj, qdd


# ------------------------------------------------------------------ single-body clusters

@pytest.mark.parametrize("seed", [0, 1])
def test_single_body_clusters_reduce_to_rnea_and_aba(seed):
    model = random_tree(9, seed=seed, joint_types=("revolute", "prismatic", "spherical"))
    cm = ClusterModel(model)
    assert cm.nclusters == model.nbodies and cm.ny == model.nv and cm.nc == 0
    pm = pin_twin(model)
    pd = pm.createData()
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng, batch=3)
    v, a = rng.normal(size=(3, model.nv)), rng.normal(size=(3, model.nv))
    tau = c_rnea(cm, q, v, a)
    assert rel_err(tau, sd.rnea(model, q, v, a)) <= TOL
    qdd = c_aba(cm, q, v, tau)
    assert rel_err(qdd, sd.aba(model, q, v, tau)) <= TOL
    for b in range(3):
        assert rel_err(tau[b], pin.rnea(pm, pd, q[b], v[b], a[b])) <= TOL
        assert rel_err(qdd[b], pin.aba(pm, pd, q[b], v[b], tau[b])) <= TOL
    frames = [model.link_names[-1], model.link_names[3]]
    osim = c_efpa(cm, q[0], frames)
    Minv = np.linalg.inv(sd.crba(model, q[0]))
    J = np.vstack([sd.frame_jacobian(model, q[0], f) for f in frames])
    assert rel_err(osim, J @ Minv @ J.T) <= 1e-9


def test_single_body_clusters_floating_humanoid_vs_pinocchio():
    model = sd.load_urdf(HUMANOID_URDF, floating_base=True)
    pm = pin_model(HUMANOID_URDF, True)
    pd = pm.createData()
    cm = ClusterModel(model)
    rng = np.random.default_rng(3)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    f_ext = {model.link_names[5]: rng.normal(size=6)}
    pq = to_pin_q(model, pm, q)
    tau = c_rnea(cm, q, v, a)
    assert rel_err(tau, pin.rnea(pm, pd, pq, v, a)) <= TOL
    assert rel_err(c_aba(cm, q, v, tau), pin.aba(pm, pd, pq, v, tau)) <= 1e-9
    assert rel_err(c_aba(cm, q, v, tau, f_ext=f_ext), sd.aba(model, q, v, tau, f_ext=f_ext)) <= 1e-9


# ------------------------------------------------------------------ clusters with loops

def test_c_rnea_inverts_c_aba(system):
    name, cm, _, _ = system
    q, yd, tau = cm.random_state(1, batch=4)
    ydd = c_aba(cm, q, yd, tau)
    assert rel_err(c_rnea(cm, q, yd, ydd), tau) <= TOL
    # batched == one state at a time
    assert rel_err(c_aba(cm, q[2], yd[2], tau[2]), ydd[2]) <= TOL


def test_c_aba_equals_dense_projection_and_lagrange(system):
    name, cm, _, pm = system
    q, yd, tau = cm.random_state(2, batch=2)
    ydd = c_aba(cm, q, yd, tau)
    for b in range(2):
        ydd_proj, qdd_kkt = _dense_oracle(cm, pm, q[b], yd[b], tau[b])
        assert rel_err(ydd[b], ydd_proj) <= 1e-9
        assert rel_err(ydd[b], qdd_kkt[cm.independent_v]) <= 1e-9
        G, g = cm.explicit(q[b], yd[b])
        assert rel_err(G @ ydd[b] + g, qdd_kkt) <= 1e-9        # dependent coordinates too
    # the library's baselines agree as well
    qd = cm.spanning_velocity(q, yd)
    assert rel_err(projection_fd(cm, q, yd, tau), ydd) <= 1e-9
    assert rel_err(lagrange_fd(cm, q, qd, tau, method="dense")[0], ydd) <= 1e-9
    assert rel_err(lagrange_fd(cm, q, qd, tau, method="ltl")[0], ydd) <= 1e-9
    assert rel_err(projected_rnea(cm, q, yd, ydd), tau) <= TOL


def test_c_rnea_equals_pinocchio_projected_rnea(system):
    name, cm, _, pm = system
    pd = pm.createData()
    q, yd, ydd = cm.random_state(3)
    G, g = cm.explicit(q, yd)
    ref = G.T @ pin.rnea(pm, pd, q, G @ yd, G @ ydd + g)
    assert rel_err(c_rnea(cm, q, yd, ydd), ref) <= TOL


def test_c_efpa_equals_projected_inverse_osim(system):
    name, cm, frames, pm = system
    q, _, _ = cm.random_state(4, batch=2)
    osim = c_efpa(cm, q, frames)
    assert rel_err(osim, projection_inverse_osim(cm, q, frames)) <= 1e-9
    # independent dense oracle: Pinocchio's mass matrix and frame Jacobians
    G, _ = cm.explicit(q[0], np.zeros(cm.ny))
    H = pin_mass_matrix(pm, q[0])
    J = np.vstack([sd.frame_jacobian(cm.model, q[0], f) for f in frames])
    ref = J @ G @ np.linalg.solve(G.T @ H @ G, G.T @ J.T)
    assert rel_err(osim[0], ref) <= 1e-9


def test_external_forces_enter_like_the_projection_method():
    cm = mini_cheetah()
    q, yd, tau = cm.random_state(5)
    f_ext = {"FR_shank": np.arange(6.0), "body": -np.ones(6)}
    ydd = c_aba(cm, q, yd, tau, f_ext=f_ext)
    assert rel_err(ydd, projection_fd(cm, q, yd, tau, f_ext=f_ext)) <= 1e-9
    assert rel_err(c_rnea(cm, q, yd, ydd, f_ext=f_ext), tau) <= TOL


# ------------------------------------------------------------------ constraints

@pytest.mark.parametrize("make", [lambda: geared_chain(4), lambda: belt_chain(4), four_bar,
                                  lambda: four_bar(generic=True), lambda: _differential_pair()])
def test_constraint_jacobians_against_finite_differences(make):
    cm = make()
    rng = np.random.default_rng(6)
    q, yd, _ = cm.random_state(rng)
    y = q[cm.independent_v]                   # 1-DoF joints: q and v coordinates coincide
    G, g = cm.explicit(q, yd)
    qd = G @ yd
    K, k = cm.implicit(q, qd)
    assert np.abs(cm.closure(q)).max() <= 1e-12
    assert np.abs(K @ G).max() <= 1e-12                                   # K G = 0
    assert np.abs(K @ g - k).max() <= 1e-12                               # K g = k
    h = 1e-6
    G_fd = np.stack([(cm.configuration(y + h * e) - cm.configuration(y - h * e)) / (2 * h)
                     for e in np.eye(cm.ny)], axis=1)
    assert np.abs(G - G_fd).max() <= 1e-7                                  # G = d gamma / dy
    Gp, _ = cm.explicit(cm.configuration(y + h * yd), yd)
    Gm, _ = cm.explicit(cm.configuration(y - h * yd), yd)
    assert np.abs(g - (Gp - Gm) / (2 * h) @ yd).max() <= 1e-6            # g = Gdot yd
    K_fd = np.stack([(cm.closure(q + h * e) - cm.closure(q - h * e)) / (2 * h)
                     for e in np.eye(cm.model.nq)], axis=1)
    assert np.abs(K - K_fd).max() <= 1e-7                                  # K = d phi / dq
    Kp, _ = cm.implicit(q + h * qd, qd)
    Km, _ = cm.implicit(q - h * qd, qd)
    assert np.abs(k + (Kp - Km) / (2 * h) @ qd).max() <= 1e-6             # k = -Kdot qd


def _differential_pair():
    """One Tello-like knee-ankle differential on a fixed base (two rotors, shin, foot)."""
    from sparsedyn.loops.builders import add_differential
    b = ModelBuilder("differential")
    link = dict(mass=0.5, com=(0.01, 0, -0.1), inertia=np.diag([0.005, 0.005, 0.001]))
    T = np.eye(4)
    T[2, 3] = -0.25
    c = add_differential(b, "shin", "foot", WORLD, np.array([0.0, 1, 0]), np.array([0.0, 1, 0]),
                         ((0, 0.03, 0), (0, -0.03, 0)), np.eye(4), T, link, link)
    return ClusterModel(b.build(), [c])


def test_seed_003_system_sizes():
    """Sec. IX: the 24-DoF Tello humanoid (with arms) and the 38-DoF modified JVRC-1."""
    tello, jvrc = tello_like(), jvrc_like()
    assert (tello.ny, tello.model.nbodies, tello.max_cluster_size) == (24, 37, 4)
    assert sum(c.kind == "differential" for c in tello.clusters) == 4
    assert (jvrc.ny, jvrc.model.nbodies, jvrc.nclusters) == (38, 65, 33)


def test_generic_user_constraint_equals_four_bar():
    a, b = four_bar(), four_bar(generic=True)
    q, yd, tau = a.random_state(7, batch=2)
    assert rel_err(c_aba(b, q, yd, tau), c_aba(a, q, yd, tau)) <= TOL


def test_constraint_rows_export_the_global_system():
    cm = mit_humanoid()
    q, yd, _ = cm.random_state(8)
    K, k = cm.implicit(q, cm.spanning_velocity(q, yd))
    assert K.shape == (cm.nc, cm.model.nv) and cm.nc == cm.model.nv - cm.ny
    blocks = [cm.constraint_rows(j) for j in range(cm.nclusters)]
    assert sum(s.stop - s.start for s in blocks) == cm.nc
    for j, s in enumerate(blocks):                      # each row block touches its cluster only
        cols = np.flatnonzero(np.abs(K[s]).sum(axis=0))
        assert set(cols) <= set(cm.v_indices[j].tolist())


# ------------------------------------------------------------------ approximations

def test_reflected_inertia_is_exact_for_one_motor_on_the_fixed_base():
    b = ModelBuilder("one_motor")
    b.add_body("link", WORLD, RevoluteJoint("j", [0, 0, 1]), mass=1.0, com=(0.2, 0, 0), inertia=np.eye(3) * 0.01)
    b.add_body("rotor", WORLD, RevoluteJoint("jr", [0, 0, 1]), mass=0.1, inertia=np.diag([1e-4, 1e-4, 3e-4]))
    cm = ClusterModel(b.build(), [GearedMotor("link", "rotor", 9.0)])
    approx = reflected_inertia_model(cm)
    assert np.allclose(approx.armature, [81 * 3e-4])
    q, yd, tau = cm.random_state(9, batch=3)
    assert rel_err(approximate_aba(approx, q, yd, tau), c_aba(cm, q, yd, tau)) <= TOL


def test_approximate_pair_is_consistent_and_only_approximate():
    cm = mini_cheetah()
    approx = reflected_inertia_model(cm)
    q, yd, tau = cm.random_state(10, batch=2)
    ydd = approximate_aba(approx, q, yd, tau)
    assert rel_err(approximate_rnea(approx, q, yd, ydd), tau) <= TOL
    assert rel_err(ydd, c_aba(cm, q, yd, tau)) > 1e-6         # gyroscopic coupling is ignored


@pytest.mark.parametrize("make, frames", [(mini_cheetah, ["FR_shank", "HL_shank"]),
                                          (mit_humanoid, ["left_foot", "right_elbow"]),
                                          (lambda: belt_chain(6), ["link6", "link3"])])
def test_approximate_efpa_is_the_reflected_inertia_osim(make, frames):
    """Seed 003, Sec. II-E: Lambda^-1 ~ J_ind (H_ind + H~)^-1 J_ind^T, with H_ind from Pinocchio's
    RNEA of the independent tree and H~ = diag(N^2 I_rot) built here from the rotors."""
    cm = make()
    approx = reflected_inertia_model(cm)
    tree = approx.model
    q, _, _ = cm.random_state(12, batch=2)
    osim = approximate_efpa(approx, q, frames)
    armature = np.zeros(tree.nv)                   # N^2 I_rot per driven coordinate, from scratch
    for c in cm.clusters:
        for r in getattr(c, "rotor_roles", ()):
            rotor = int(c.role_bodies[r])
            axis = cm.model.joints[rotor].axis
            for role, ratio in enumerate(c.G_role[r]):
                if ratio:
                    link = cm.model.link_names[int(c.role_bodies[c.independent[role]])]
                    armature[tree.v_index[tree.link_names.index(link)]] += (
                        ratio ** 2 * axis @ cm.model.inertias[rotor][:3, :3] @ axis)
    assert np.count_nonzero(armature) == cm.ny - (6 if cm.model.joints[0].nv == 6 else 0)
    pm = pin_twin(tree)
    for b in range(2):
        qt = q[b, approx.q_index]
        H = pin_mass_matrix(pm, qt) + np.diag(armature)
        J = np.vstack([sd.frame_jacobian(tree, qt, f) for f in frames])
        assert rel_err(osim[b], J @ np.linalg.solve(H, J.T)) <= 1e-9
    exact = c_efpa(cm, q, frames)
    assert rel_err(osim, exact) > 1e-6                # only an approximation of the exact OSIM


def test_unconstrained_is_pinocchio_rnea_of_the_independent_tree():
    """reflect=False (H~ = 0, seed 003 Sec. II-C's unconstrained RNEA): Pinocchio's RNEA of the
    independent tree; with reflect=True the difference is exactly diag(N^2 I_rot) ydd."""
    cm = mit_humanoid_leg()
    q, yd, ydd = cm.random_state(13)
    unc, approx = reflected_inertia_model(cm, reflect=False), reflected_inertia_model(cm)
    assert not unc.armature.any() and approx.armature.all()
    pm = pin_twin(unc.model)
    ref = pin.rnea(pm, pm.createData(), q[unc.q_index], yd[unc.y_order], ydd[unc.y_order])
    tau = approximate_rnea(unc, q, yd, ydd)
    assert rel_err(tau[unc.y_order], ref) <= TOL
    extra = approximate_rnea(approx, q, yd, ydd) - tau
    assert rel_err(extra[approx.y_order], approx.armature * ydd[approx.y_order]) <= TOL


# ------------------------------------------------------------------ bad input

def _two_link_builder():
    b = ModelBuilder("pair")
    b.add_body("a", WORLD, RevoluteJoint("ja", [0, 0, 1]), mass=1.0, inertia=np.eye(3) * 0.01)
    b.add_body("ra", WORLD, RevoluteJoint("jra", [0, 0, 1]), mass=0.1, inertia=np.eye(3) * 1e-4)
    b.add_body("b", "a", RevoluteJoint("jb", [0, 1, 0]), mass=1.0, inertia=np.eye(3) * 0.01)
    b.add_body("c", "ra", RevoluteJoint("jc", [0, 1, 0]), mass=1.0, inertia=np.eye(3) * 0.01)
    return b.build()


def test_bad_clusters_raise_model_errors_naming_them():
    model = _two_link_builder()
    with pytest.raises(ModelError, match="'ra'.*already belongs"):
        ClusterModel(model, [GearedMotor("a", "ra", 2.0, name="m1"), GearedMotor("c", "ra", 2.0, name="m2")])
    with pytest.raises(ModelError, match="cluster 'b\\+c'.*different clusters"):
        ClusterModel(model, [["b", "c"]])
    with pytest.raises(ModelError, match="no link 'nope'"):
        ClusterModel(model, [GearedMotor("a", "nope", 2.0)])
    bad = ImplicitConstraint("broken", ["a", "ra"], [0], lambda q: q[:, :1], lambda q: np.zeros((1, 2)),
                             lambda q, qd: np.zeros((q.shape[0], 1)))
    cm = ClusterModel(model, [bad])
    with pytest.raises(ModelError, match="cluster 'broken'.*K\\(q\\)"):
        c_aba(cm, np.zeros(4), np.zeros(cm.ny), np.zeros(cm.ny))


def test_bad_state_and_singular_cluster():
    cm = geared_chain(3)
    q, yd, tau = cm.random_state(11)
    with pytest.raises(ValueError, match="tau"):
        c_aba(cm, q, yd, tau[:-1])
    with pytest.raises(ValueError, match="yd"):
        c_rnea(cm, q, np.full(cm.ny, np.nan), tau)
    b = ModelBuilder("ghost")
    b.add_body("a", WORLD, RevoluteJoint("ja", [0, 0, 1]), mass=1.0, inertia=np.eye(3) * 0.01)
    b.add_body("g", "a", RevoluteJoint("jg", [0, 0, 1]))
    b.add_body("rg", "a", RevoluteJoint("jrg", [0, 0, 1]))
    cm = ClusterModel(b.build(), [GearedMotor("g", "rg", 3.0, name="ghost_motor")])
    with pytest.raises(SingularModelError, match="ghost_motor"):
        c_aba(cm, np.zeros(3), np.zeros(2), np.zeros(2))


def test_unassemblable_four_bar_names_the_cluster():
    cm = four_bar(lengths=(0.1, 0.1, 0.1, 1.0))
    with pytest.raises(ModelError, match="four_bar"):
        cm.configuration(np.zeros(cm.nyq))
