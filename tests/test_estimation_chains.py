"""The pair-chain kernel of the compiled MAP route (planner/chain_ldlt.py,
kernels/lane_vectors.py, kernels/normal_numba.py) against independent oracles: its vector
chains against the same arithmetic in NumPy, and whole batches, large enough for every lane block
(64, 32 and 8 lanes, one and two threads), against dense NumPy weighted least squares on the
whitened un-squared system."""
import numpy as np
import pytest
from oracles import robot_urdf

import sparsedyn as sd
from sparsedyn import sensors as S
from sparsedyn.estimation import EstimationProblem, compile_estimation
from sparsedyn.ir.chain_program import EPI_ADD, EPI_LIST, EPI_NONE, EPI_RECIP, EPI_SCALE, ChainArrays
from sparsedyn.kernels.normal_numba import run_chains


@pytest.mark.parametrize("lanes", [8, 32, 64, 128])
def test_chains_match_numpy(lanes):
    """Each epilogue, the mid store and the product list on random rows, bit for bit."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=(40, lanes))
    pa, pb = rng.integers(0, 20, 12), rng.integers(0, 20, 12)
    pc = rng.normal(size=12)
    # (t, src, c0, from_row, q, k, kmid, mid, mode, t2, r2)
    ins = [(20, 3, 0.0, 1, 0, 5, 2, 21, EPI_NONE, 20, 20),
           (22, 22, 1.5, 0, 5, 3, -1, 22, EPI_SCALE, 23, 4),
           (24, 24, -2.0, 0, 8, 0, -1, 24, EPI_RECIP, 25, 24),
           (26, 26, 0.5, 0, 8, 4, 4, 27, EPI_ADD, 28, 26),
           (30, 30, 0.0, 0, 0, 4, -1, 30, EPI_LIST, 30, 30)]
    arrays = [np.array([x[f] for x in ins], dtype=float if f == 2 else np.int64)
              for f in range(11)]
    ref = w.copy()

    def chain(src, c0, from_row, q, k, kmid, mid):
        acc = ref[src].copy() if from_row else np.full(lanes, c0)
        for j in range(k):
            if j == kmid:
                ref[mid] = acc
            acc = acc + (ref[pa[q + j]] * ref[pb[q + j]]) * pc[q + j]
        return acc

    v = chain(3, 0.0, 1, 0, 5, 2, 21)
    ref[20] = v
    v = chain(22, 1.5, 0, 5, 3, -1, 22)
    ref[22], ref[23] = v, v * ref[4]
    ref[24], ref[25] = -2.0, 1 / -2.0
    v = chain(26, 0.5, 0, 8, 4, 4, 27)
    ref[26], ref[28] = v, ref[28] + v           # (kmid == k: no mid store)
    ref[30:34] = ref[pa[:4]] * ref[pb[:4]]
    run_chains(w, 0, len(ins), ChainArrays(*arrays, pa, pb, pc))
    assert np.array_equal(w, ref)


def _dense_map(problem, values, rhs, var, prior_var, prior_mean):
    """MAP estimate by dense NumPy least squares on [W^1/2 A; P^1/2] x = [W^1/2 r; P^1/2 mu]."""
    A = problem.dense(values)
    sw, sp = 1 / np.sqrt(var), 1 / np.sqrt(prior_var)
    out = []
    for b in range(A.shape[0]):
        M = np.vstack([A[b] * sw[:, None], np.diag(sp)])
        out.append(np.linalg.lstsq(M, np.r_[rhs[b] * sw, sp * prior_mean], rcond=None)[0])
    return np.array(out)


def test_compiled_map_batches_match_dense_least_squares():
    """Fixed-base iCub with BERDY's variances (tests/test_estimation_compiled.py) and a nonzero
    prior mean, 70 random states: one thread runs a 64-lane group and a padded one, two threads
    32-lane groups; single states 8 lanes."""
    model = sd.load_urdf(robot_urdf("icub"))
    fts = [n for n in model.joint_frames if n.endswith("ft_sensor")]
    problem = EstimationProblem(model, [S.JointAccelerations()] + [S.ForceTorque(j) for j in fts],
                                unknown_wrenches=["l_foot"])
    rng = np.random.default_rng(5)
    n = problem.shape[1]
    mean = rng.normal(size=n) * 0.1
    cov = {"dynamics": 1e-8, "qdd": 1e-6, "prior": 1e4, "prior_mean": mean,
           **{j: 1e-6 for j in fts}}
    plan = compile_estimation(problem, method="map", covariances=cov, map_form="normal")
    assert plan.stats["map_form"] == "normal"
    B = 70
    q = model.random_configuration(rng, batch=B)
    v = rng.normal(size=(B, model.nv))
    readings = {"qdd": rng.normal(size=(B, model.nv)),
                **{j: rng.normal(size=(B, 6)) * 10 for j in fts}}
    values, rhs, _, _ = problem.assemble(q, v, readings)
    var = np.r_[np.full(problem.n_dynamics_rows, 1e-8),
                np.full(problem.shape[0] - problem.n_dynamics_rows, 1e-6)]
    ref = _dense_map(problem, values, rhs, var, np.full(n, 1e4), mean)
    scale = np.abs(ref).max(axis=1)
    for threads in (1, 2):
        est = plan.solve(q, v, readings, threads=threads)
        assert est.ok.all()
        assert (np.abs(est.vector - ref).max(axis=1) / scale).max() < 1e-10
    one = plan.solve(q[7], v[7], {k: r[7] for k, r in readings.items()})
    assert np.abs(one.vector - ref[7]).max() / scale[7] < 1e-10
