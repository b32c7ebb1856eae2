"""The cluster algorithms' structured forms (seed 003, Sec. V) against their straightforward dense
references, and their paper-convention counts against the tree algorithms' closed forms.

Oracles: the dense cluster transform of eq. 17 (one nonzero 6x6 block per block row, assembled
here as a 6 n_b x 6 n_p matrix) and dense products with it; S_k evaluated at states the pattern
probe did not see; Featherstone's closed forms for ABA and RNEA (single-body clusters reduce the
cluster algorithms to them, Sec. VI-VII)."""
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.kinematics import joint_transforms
from sparsedyn.loops import ClusterModel, belt_chain, four_bar, geared_chain, mini_cheetah, tello_like
from sparsedyn.models import serial_chain
from sparsedyn.opcount import count_operations
from sparsedyn.recursive.cluster import c_aba, c_efpa, c_rnea
from sparsedyn.recursive.cluster._cluster_common import forward_pass
from sparsedyn.recursive.cluster._cluster_congruence import cluster_congruence
from sparsedyn.recursive.cluster._cluster_transform import force_to_parent, motion, motion_columns, rows_times
from sparsedyn.recursive.cluster._cluster_patterns import cluster_patterns
from sparsedyn.transform_costs import privileged_children

SYSTEMS = {"geared_chain": lambda: geared_chain(4), "belt_chain": lambda: belt_chain(4),
           "mini_cheetah": mini_cheetah, "tello_like": tello_like, "four_bar": four_bar}


def dense_cluster_transform(cm, k, Xup, n_parent):
    """kX_lambda(k) of eq. 17 as a dense (B, 6 n_b, 6 n_p) matrix: block (i, Lambda(i)) is
    iX_Lambda(i), the product of the joint transforms from Lambda(i) out to i (eq. 20)."""
    bodies = cm.clusters[k].bodies
    B = Xup[0].E.shape[0]
    X = np.zeros((B, 6 * len(bodies), 6 * n_parent))
    for li, (i, ob) in enumerate(zip(bodies, cm.output_blocks[k])):
        M, j = np.eye(6), i
        while j != cm.output_bodies[k][li]:
            M = M @ Xup[j].matrix()
            j = cm.model.parents[j]
        X[:, 6 * li:6 * li + 6, 6 * ob:6 * ob + 6] = M
    return X


def random_symmetric(rng, B, n):
    A = rng.normal(size=(B, n, n))
    return A + np.swapaxes(A, 1, 2)


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_cluster_congruence_equals_the_dense_transform_product(name):
    cm = SYSTEMS[name]()
    rng = np.random.default_rng(7)
    q, yd, _ = cm.random_state(8, batch=3)
    fp = forward_pass(cm, q, yd)
    checked = 0
    for k in range(cm.nclusters):
        p = cm.parents[k]
        if p < 0:
            continue
        n_p, nb = len(cm.clusters[p].bodies), len(cm.clusters[k].bodies)
        X = dense_cluster_transform(cm, k, joint_transforms(cm.model, q), n_p)
        block_diagonal = np.kron(np.eye(nb, dtype=bool), np.ones((6, 6), bool))
        for pattern in (None, block_diagonal):                    # dense I^a; block(I_i) (eq. 14)
            Ia = random_symmetric(rng, 3, 6 * nb) * (1.0 if pattern is None else pattern)
            ref = np.swapaxes(X, 1, 2) @ Ia @ X
            with count_operations():
                out, P = cluster_congruence(fp.ct[k], Ia, n_p, pattern)
            scale = np.abs(ref).max()
            assert np.abs(out - ref).max() <= 1e-12 * scale, (name, k)
            assert not np.any(out[:, ~P]), (name, k)              # zero outside the pattern
        checked += 1
    assert checked > 0


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_body_by_body_cluster_transform_equals_the_dense_matrix(name):
    """Motions outward, forces and rows inward through the in-cluster parents (eq. 20) equal the
    products with the dense eq. 17 matrix; so do C-EFPA's Omega columns carried with their pattern
    (eq. 67), zero outside the returned pattern (but at a privileged child, counted as re-placed)
    and charged less than the dense columns, a zero column not at all."""
    cm = SYSTEMS[name]()
    rng = np.random.default_rng(11)
    q, yd, _ = cm.random_state(12, batch=2)
    fp = forward_pass(cm, q, yd)
    Xup = joint_transforms(cm.model, q)
    for k in range(cm.nclusters):
        p = cm.parents[k]
        if p < 0:
            continue
        n_p, nb = len(cm.clusters[p].bodies), len(cm.clusters[k].bodies)
        X = dense_cluster_transform(cm, k, Xup, n_p)
        x, f = rng.normal(size=(2, n_p, 6)), rng.normal(size=(2, nb, 6))
        M, chi = rng.normal(size=(2, 6 * n_p, 3)), rng.normal(size=(2, 4, 6 * nb))
        for got, ref in ((motion(fp.ct[k], x).reshape(2, -1), np.einsum("bij,bj->bi", X, x.reshape(2, -1))),
                         (force_to_parent(fp.ct[k], f, n_p).reshape(2, -1),
                          np.einsum("bji,bj->bi", X, f.reshape(2, -1))),
                         (motion_columns(fp.ct[k], M), X @ M),
                         (rows_times(fp.ct[k], chi, n_p)[0], chi @ X),
                         (motion(fp.ct[k], x, np.ones((n_p, 6), bool))[0].reshape(2, -1),
                          np.einsum("bij,bj->bi", X, x.reshape(2, -1)))):
            assert np.abs(got - ref).max() <= 1e-12 * np.abs(ref).max(), (name, k)
        P = rng.random(M.shape[1:]) < 0.5
        P[:, 2] = False                                                # a zero column
        with count_operations() as ops:
            got, Pout = motion_columns(fp.ct[k], M * P, P)
        with count_operations() as full:
            motion_columns(fp.ct[k], M * P)
        assert np.abs(got - X @ (M * P)).max() <= 1e-12 * np.abs(X @ M).max(), (name, k)
        assert not Pout[:, 2].any() and ops.flops < full.flops
        if not privileged_children(cm.model):
            assert not np.any(got[:, ~Pout]), (name, k)


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_cluster_patterns_hold_at_unseen_states(name):
    cm = SYSTEMS[name]()
    pats = cluster_patterns(cm)
    q, yd, _ = cm.random_state(99, batch=5)
    with count_operations():
        fp = forward_pass(cm, q, yd)
    for k, pt in enumerate(pats):
        S = fp.S[k]
        assert not np.any(fp.c[k].reshape(5, -1)[:, ~fp.pc[k]]), (name, k)   # c_k's pattern too
        assert not np.any(S[:, ~pt.S_nz]), (name, k)
        assert np.all(np.abs(S[:, pt.S_unit]) == 1.0), (name, k)
        assert pt.S_nz.sum() < pt.S_nz.size, (name, k)                # S_k is structurally sparse


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_counting_conventions_do_not_change_numerics(name):
    cm = SYSTEMS[name]()
    q, yd, w = cm.random_state(3, batch=2)
    ref = c_aba(cm, q, yd, w), c_rnea(cm, q, yd, w)
    for convention in ("paper", "as_written"):
        with count_operations(convention) as ops:
            out = c_aba(cm, q, yd, w), c_rnea(cm, q, yd, w)
        assert ops.flops > 0
        for a, b in zip(out, ref):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("n", [30, 60])
def test_single_body_clusters_count_like_aba_and_rnea(n):
    """On a tree every cluster is one body: C-ABA and C-RNEA are ABA and RNEA (Sec. VI-VII), and
    their paper counts are within 5% of ABA's and RNEA's and within 10% of Featherstone's closed
    forms. (ABA also tracks the structural zeros of the root's velocity and acceleration through
    its sweeps, a constant C-ABA does not save: hence the longer chains.)"""
    model = serial_chain(n)
    cm = ClusterModel(model)
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    v, x = rng.normal(size=(2, model.nv))
    counts = {}
    for name, fn, args in (("c_aba", c_aba, (cm, q, v, x)), ("aba", sd.aba, (model, q, v, x)),
                           ("c_rnea", c_rnea, (cm, q, v, x)), ("rnea", sd.rnea, (model, q, v, x))):
        with count_operations() as ops:
            fn(*args)
        counts[name] = ops.flops
    assert abs(counts["c_aba"] / counts["aba"] - 1) < 0.05
    assert abs(counts["c_rnea"] / counts["rnea"] - 1) < 0.05
    assert abs(counts["c_aba"] / (429 * n - 507) - 1) < 0.10
    assert abs(counts["c_rnea"] / (174 * n - 208) - 1) < 0.10


@pytest.mark.parametrize("n", [3, 5, 10])
def test_c_rnea_tracks_the_root_zeros_like_rnea(n):
    """C-RNEA carries the structural zeros of the root's velocity (S_k yd_k, v_0 = 0) and
    acceleration (the world's -a_g) outward as RNEA does: on single-body clusters its count is
    RNEA's to 1% even on short chains, where those zeros are a large share; numerics unchanged."""
    model = serial_chain(n)
    cm = ClusterModel(model)
    q, yd, w = cm.random_state(1, batch=1)
    ref = c_rnea(cm, q, yd, w)
    with count_operations() as c:
        out = c_rnea(cm, q, yd, w)
    with count_operations() as r:
        sd.rnea(model, q[0], yd[0], w[0])
    np.testing.assert_array_equal(out, ref)
    assert abs(c.flops / r.flops - 1) < 0.01


def test_structured_c_efpa_equals_the_dense_inverse_osim():
    cm = tello_like()
    q, _, _ = cm.random_state(5, batch=2)
    frames = ["left_foot", "right_shin"]
    with count_operations():
        osim = c_efpa(cm, q, frames)
    H = sd.crba(cm.model, q[0])
    G, _ = cm.explicit(q[0], np.zeros(cm.ny))
    J = np.vstack([sd.frame_jacobian(cm.model, q[0], f) for f in frames]) @ G
    ref = J @ np.linalg.solve(G.T @ H @ G, J.T)
    assert np.abs(osim[0] - ref).max() <= 1e-9 * np.abs(ref).max()


def test_c_efpa_diagonal_block_counts_its_upper_triangle():
    """Lambda^-1_ee = chi_g^e Omega_ge is symmetric: 21 of its 36 entries, each a 6-term sum (6m +
    5a: chi's one nonzero 6 x 6 block, eq. 57-58); as written all 36 over chi's 6 n_b columns.
    Both conventions compute the same."""
    cm = geared_chain(4)
    q, _, _ = cm.random_state(2, batch=2)
    ref = c_efpa(cm, q, ["link4"])
    with count_operations() as ops:
        out = c_efpa(cm, q, ["link4"])
    with count_operations("as_written") as w:
        out_w = c_efpa(cm, q, ["link4"])
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(out_w, ref)
    k = 6 * len(cm.clusters[cm.cluster_of[cm.model.frames["link4"].body]].bodies)   # chi: 6 x 6 n_b
    assert ops.by_kind["chi Omega"] == 21 * 11 and w.by_kind["chi Omega"] == 36 * (2 * k - 1)


@pytest.mark.parametrize("name", ["geared_chain", "tello_like"])
def test_baseline_patterns_hold_and_leave_numerics_unchanged(name):
    """The equally optimised baselines' H and K patterns (branch-induced H, the probed loop
    Jacobian K) cover CRBA's H and ClusterModel.implicit's K at unseen states; the Lagrange method
    with L^T L and the sparse-G projection compute the same under both conventions, and their
    paper counts stay below the dense ones."""
    from sparsedyn.recursive.cluster import lagrange_fd, projection_fd
    from sparsedyn.recursive.cluster._cluster_patterns import implicit_pattern, mass_matrix_pattern
    cm = SYSTEMS[name]()
    q, yd, w = cm.random_state(77, batch=3)
    qd = cm.spanning_velocity(q, yd)
    H = np.stack([sd.crba(cm.model, qi) for qi in q])
    K, _ = cm.implicit(q, qd)
    assert not np.any(H[:, ~mass_matrix_pattern(cm.model)]) and not np.any(K[:, ~implicit_pattern(cm)])
    for fn in (lambda: lagrange_fd(cm, q, qd, w, method="ltl")[1], lambda: projection_fd(cm, q, yd, w, sparse_G=True)):
        ref = fn()
        with count_operations() as ops:
            out = fn()
        with count_operations("as_written") as wr:
            out_w = fn()
        np.testing.assert_array_equal(out, ref)
        np.testing.assert_array_equal(out_w, ref)
        assert ops.flops < wr.flops
