"""The compiled route's forward-dynamics derivatives from inverse dynamics' (kernels/
ltl_derivatives.py, problems/plan_derivatives.py): dqdd/d(q, v) = -M^-1 dtau/d(q, v) and
M^-1 through the L^T L factor, against dense NumPy (np.linalg.solve / inv of M) and, end to
end, against central differences on a tree not numbered depth-first; and the plans it runs
through (Plan.derivative_plans)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.kernels.ltl_derivatives import forward_from_inverse
from sparsedyn.problems.mass_matrix import MassMatrixPlan
from sparsedyn.recursive.crba import crba
from sparsedyn.recursive.ltl import ltl, pattern
from test_compiled import mixed_tree


def _models():
    return {"humanoid": sd.models.humanoid(), "mixed": mixed_tree()}


@pytest.mark.parametrize("name", ["humanoid", "mixed"])
def test_forward_from_inverse_equals_dense_solves(name):
    """On a floating humanoid (numbered depth-first) and a random tree of every joint kind that
    is not: -M^-1 dtau for random dtau and M^-1 equal NumPy's dense solve and inverse of the
    reference CRBA's M (factored by the reference recursive.ltl); M^-1 is exactly symmetric."""
    model = _models()[name]
    rng = np.random.default_rng(4)
    B, nv = 5, model.nv
    q = model.random_configuration(rng, batch=B)
    M = crba(model, q)
    L = np.ascontiguousarray(ltl(model, M))
    dtau = rng.normal(size=(B, nv, 2 * nv))
    lam, last = pattern(model).parents, pattern(model).last
    out = np.full((3, B, nv, nv), np.nan)
    forward_from_inverse(lam, last, L, dtau, out[0], out[1], out[2])
    for b in range(B):
        Minv = np.linalg.inv(M[b])
        expect = np.linalg.solve(M[b], -dtau[b])
        got = np.concatenate((out[0, b], out[1, b]), axis=1)
        assert np.abs(got - expect).max() <= 1e-12 * np.abs(expect).max()
        assert np.abs(out[2, b] - Minv).max() <= 1e-12 * np.abs(Minv).max()
        assert np.array_equal(out[2, b], out[2, b].T)


def test_ltl_pattern_ranges_hold_every_descendant():
    """recursive.ltl.pattern's last[i] bounds every descendant of DoF i (the columns the
    kernel's backward pass keeps for the identity), on the tree not numbered depth-first."""
    model = mixed_tree()
    lam, last = pattern(model).parents, pattern(model).last
    assert lam.tolist() == list(model.expanded_parents())
    for k in range(model.nv):
        j = lam[k]
        while j >= 0:
            assert j < k <= last[j]
            j = lam[j]


def test_aba_derivatives_compiled_on_a_tree_not_numbered_depth_first():
    """End to end on the compiled route (backend numba) where Pinocchio is no oracle: the tree
    of every joint kind numbered out of depth-first order, with an external wrench, against
    central differences of sd.aba (test_derivatives' helper)."""
    from test_derivatives import FD_TOL, NAMES, _central_differences, rel, robot, states
    model, _, _, links = robot("mixed")
    q, v, y, f_ext = states(model, links, 2, 5, True)
    got = sd.aba_derivatives(model, q, v, y, f_ext=f_ext, backend="numba")
    for b in range(2):
        fb = {k: w[b] for k, w in f_ext.items()}
        expect = _central_differences(sd.aba, model, q[b], v[b], y[b], fb)
        for what, g, e in zip(NAMES, got, expect):
            assert rel(g[b], e) <= FD_TOL, (what, b, rel(g[b], e))


def test_derivative_plans_once_per_plan_from_many_threads():
    """Inverse dynamics derives through itself; forward dynamics through the inverse dynamics
    of its model with the same external-wrench links, planned once even when eight threads ask
    at once; both with the model's mass-matrix plan."""
    model = sd.models.humanoid()
    links = [model.link_names[-1]]
    inverse = sd.compile(sd.inverse_dynamics(model, f_ext=links))
    base, mass = inverse.derivative_plans()
    assert base is inverse and isinstance(mass, MassMatrixPlan)
    forward = sd.compile(sd.forward_dynamics(model, f_ext=links))
    seen, start = [], threading.Barrier(8)

    def ask():
        start.wait()
        seen.append(forward.derivative_plans())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 8 and all(s[0] is seen[0][0] and s[1] is seen[0][1] for s in seen)
    base = seen[0][0]
    assert base.problem.name == "inverse_dynamics" and base.model is model
    assert base.problem.fx_links == tuple(links)
