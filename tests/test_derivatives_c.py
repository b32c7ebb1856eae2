"""The derivatives' C route (backends/c_derivatives.py, c_rnea_derivatives.py: Carpentier and
Mansard's recursion, M^-1 through L^T L, on vectors of states) against Pinocchio's
computeRNEADerivatives / computeABADerivatives on floating and fixed-base robots and a tree of
the joint kinds the robots lack, against central differences of sd.rnea / sd.aba on a tree
numbered other than depth-first; partial lane groups, threads, the caller's derivatives_out, the
routes "auto" and "c" take, and states the unit flags."""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn as sd
from oracles import singular_rod_model
from sparsedyn.backends.c_vector import LANES
from sparsedyn.problems.derivatives import derivative_plan
from sparsedyn.problems.plan_derivatives import c_unit, derivative_backend
from test_derivatives import (FD_TOL, PIN_TOL, _central_differences, pinocchio_derivatives,
                              rel, robot, states)

pytestmark = pytest.mark.skipif(sd.backends.module("c").unavailable() is not None,
                                reason="no C compiler")

PLAN = {"rnea": "inverse_dynamics", "aba": "forward_dynamics"}
GIVEN = {"rnea": "qdd", "aba": "tau"}


def solve(kind, model, q, v, y, **kw):
    plan = derivative_plan(model, PLAN[kind], None)
    return plan.solve(q, v, derivatives=True, **{GIVEN[kind]: y}, **kw).derivatives


@pytest.mark.parametrize("name", ["humanoid", "panda", "screw"])   # floating, fixed, joint kinds
@pytest.mark.parametrize("kind", ["rnea", "aba"])
def test_c_route_matches_pinocchio(kind, name):
    """Every state of a batch that ends in a partial group of LANES states (and one state per
    call) equals Pinocchio's, with the C unit the route taken."""
    model, pm, convert, links = robot(name)
    B = 2 * LANES + 3
    q, v, y, _ = states(model, links, B, 31, False)
    expect = pinocchio_derivatives(kind, model, pm, convert, q, v, y, None)
    plan = derivative_plan(model, PLAN[kind], None)
    assert derivative_backend(plan, "c") == "c"
    got = solve(kind, model, q, v, y, backend="c")
    for what, g, e in zip(("dq", "dv", "dy"), got, expect):
        assert g.shape == (B, model.nv, model.nv)
        assert max(rel(g[b], e[b]) for b in range(B)) <= PIN_TOL, (what, name)
    one = solve(kind, model, q[2], v[2], y[2], backend="c")
    for g, e in zip(one, expect[:, 2]):
        assert g.shape == (model.nv, model.nv) and rel(g, e) <= PIN_TOL


@pytest.mark.parametrize("kind", ["rnea", "aba"])
def test_c_route_on_a_tree_not_numbered_depth_first(kind):
    """A tree of every joint kind whose bodies are not numbered depth-first (there Pinocchio's
    derivatives are no oracle: tests/test_derivatives.py): every state of a batch equals
    fourth-order central differences of the recursive sd.rnea / sd.aba along model.integrate."""
    model, _, _, links = robot("mixed")
    B = LANES + 1
    q, v, y, _ = states(model, links, B, 8, False)
    got = solve(kind, model, q, v, y, backend="c")
    recursive = sd.rnea if kind == "rnea" else sd.aba
    for b in (0, B - 1):                          # a full vector's state, the partial one's
        expect = _central_differences(recursive, model, q[b], v[b], y[b], None)
        for what, g, e in zip(("dq", "dv", "dy"), got, expect):
            assert rel(g[b], e) <= FD_TOL, (what, b, rel(g[b], e))


def test_armature_enters_m_and_its_inverse():
    """Panda with armature on its joints (Pinocchio's model.armature the same): the C unit's
    dtau/dq, dtau/dv, M and the forward derivatives with M^-1 equal Pinocchio's."""
    model, pm, convert, links = robot("panda")
    armature = np.linspace(0.05, 0.4, model.nv)
    arm_model, pm_arm = model.with_armature(armature), pm.copy()
    pm_arm.armature = armature.copy()
    q, v, y, _ = states(arm_model, links, LANES + 1, 23, False)
    for kind in ("rnea", "aba"):
        expect = pinocchio_derivatives(kind, arm_model, pm_arm, convert, q, v, y, None)
        plain = pinocchio_derivatives(kind, model, pm, convert, q, v, y, None)
        assert rel(plain[2], expect[2]) > 1e-2                  # the armature matters here
        got = solve(kind, arm_model, q, v, y, backend="c")
        for g, e in zip(got, expect):
            assert rel(g, e) <= PIN_TOL, kind


def test_threads_and_concurrent_callers():
    """threads=2 splits the batch: the answer equals one thread's bit for bit; four Python
    threads calling one plan at once each get their own states' answers."""
    model, pm, convert, links = robot("panda")
    B = 300                                   # above the per-thread minimum of the C units
    q, v, y, _ = states(model, links, B, 12, False)
    one, two = (solve("aba", model, q, v, y, backend="c", threads=t) for t in (1, 2))
    for g1, g2 in zip(one, two):
        assert np.array_equal(g1, g2)
    expect = pinocchio_derivatives("aba", model, pm, convert, q[:40], v[:40], y[:40], None)
    results, errors = {}, []

    def worker(k):
        try:
            lo = 10 * k
            results[k] = solve("aba", model, q[lo:lo + 10], v[lo:lo + 10], y[lo:lo + 10],
                               backend="c", threads=1)
        except Exception as exc:      # pragma: no cover  (reported below)
            errors.append(exc)
    pool = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors
    for k in range(4):
        for g, e in zip(results[k], expect[:, 10 * k:10 * k + 10]):
            assert rel(g, e) <= PIN_TOL


def test_derivatives_out_is_written_and_checked():
    """derivatives_out receives the derivatives (result.derivatives are its views), on the C
    and the numba routes; a wrong array is a ValueError naming it, before any answer."""
    model, pm, convert, links = robot("panda")
    B, nv = 5, model.nv
    q, v, y, _ = states(model, links, B, 2, False)
    expect = pinocchio_derivatives("aba", model, pm, convert, q, v, y, None)
    for backend in ("c", "numba", "numpy"):
        out = np.full((3, B, nv, nv), np.nan)
        got = solve("aba", model, q, v, y, backend=backend, derivatives_out=out)
        for k in range(3):
            assert np.shares_memory(got[k], out) and rel(out[k], expect[k]) <= PIN_TOL
    single = np.zeros((3, 1, nv, nv))
    got = solve("rnea", model, q[0], v[0], y[0], backend="c", derivatives_out=single)
    assert got[0].shape == (nv, nv) and np.shares_memory(got[0], single)
    plan = derivative_plan(model, "forward_dynamics", None)
    bad = [np.zeros((3, B + 1, nv, nv)), np.zeros((3, B, nv, nv), dtype=np.float32),
           np.zeros((3, B, nv, 2 * nv))[..., ::2], np.zeros((B, nv, nv)), [[0.0]]]
    frozen = np.zeros((3, B, nv, nv))
    frozen.flags.writeable = False
    for arr in bad + [frozen]:
        with pytest.raises(ValueError, match="derivatives_out"):
            plan.solve(q, v, tau=y, derivatives=True, derivatives_out=arr, backend="c")
    with pytest.raises(ValueError, match="derivatives_out.*derivatives=True"):
        plan.solve(q, v, tau=y, derivatives_out=np.zeros((3, B, nv, nv)))
    got = solve("aba", model, q[:0], v[:0], y[:0], derivatives_out=np.zeros((3, 0, nv, nv)))
    assert [g.shape for g in got] == [(0, nv, nv)] * 3
    with pytest.raises(ValueError, match="derivatives_out"):
        solve("aba", model, q[:0], v[:0], y[:0], derivatives_out=np.zeros((3, 1, nv, nv)))


@pytest.mark.parametrize("name", ["panda", "screw"])     # (fixed base; a free-flyer root)
@pytest.mark.parametrize("kind", ["rnea", "aba"])
def test_external_wrenches(kind, name):
    """Wrenches on two links (constant in their frames, so they turn with their subtree) on
    the C route equal Pinocchio's with fext; a plan compiled with wrench links but called
    without any equals the plan without them."""
    model, pm, convert, links = robot(name)
    B = LANES + 2
    q, v, y, f_ext = states(model, links, B, 19, True)
    expect = pinocchio_derivatives(kind, model, pm, convert, q, v, y, f_ext)
    plan = derivative_plan(model, PLAN[kind], f_ext)
    assert c_unit(plan).fx_bodies == plan.problem.fx_bodies and len(plan.problem.fx_bodies)
    got = plan.solve(q, v, f_ext=f_ext, backend="c", derivatives=True,
                     **{GIVEN[kind]: y}).derivatives
    for what, g, e in zip(("dq", "dv", "dy"), got, expect):
        assert max(rel(g[b], e[b]) for b in range(B)) <= PIN_TOL, (what, name)
    bare = plan.solve(q, v, backend="c", derivatives=True, **{GIVEN[kind]: y}).derivatives
    for g, e in zip(bare, solve(kind, model, q, v, y, backend="c")):
        assert rel(g, e) <= PIN_TOL


def test_routes_auto_takes():
    """"auto" takes the C unit once its library is built; "numba" and "numpy" keep their
    routes."""
    model, pm, convert, links = robot("panda")
    plan = derivative_plan(model, "inverse_dynamics", None)
    q, v, y, _ = states(model, links, 3, 9, False)
    solve("rnea", model, q, v, y, backend="c")            # builds the library
    assert c_unit(plan).ready() and derivative_backend(plan, "auto") == "c"
    assert derivative_backend(plan, "numba") == "numba"
    assert derivative_backend(plan, "numpy") == "numpy"


def test_flagged_states_take_the_checked_route():
    """The C unit flags states whose mass matrix fails its pivot check; the batch then takes
    the substitution route, whose checks raise SingularModelError naming every such state
    (a rod on its own axis: M singular in every state), never numbers."""
    rod = sd.compile(sd.forward_dynamics(singular_rod_model()))
    B = LANES + 2
    q, v = np.zeros((B, 2)), np.zeros((B, 2))
    result = np.empty((3, B, 2, 2))
    status = c_unit(rod).run(q, v, np.zeros((B, 2)), result)
    assert status.all()
    from sparsedyn.problems.plan_derivatives import plan_solve_derivatives
    with pytest.raises(sd.SingularModelError) as info:
        plan_solve_derivatives(rod, q, v, np.zeros((B, 2)), np.zeros((B, rod.system.shape[1])),
                               "c", 1, None)
    assert info.value.batch_indices == tuple(range(B))
    with pytest.raises(sd.SingularModelError, match="batch indices"):
        sd.aba_derivatives(singular_rod_model(), q, v, np.ones((B, 2)), backend="c")


@pytest.mark.parametrize("kind", ["rnea", "aba"])
def test_one_state_per_call_takes_the_single_state_route(kind, monkeypatch):
    """One humanoid state per call, as a controller calls it, on "auto" once the C libraries
    are built: the joint-space output from the plan's single-state function and the
    derivatives from the C unit, without the batched path (patched to fail here), equal to
    Pinocchio's; into derivatives_out of one state when given. A state the single-state
    function flags (a quaternion off unit norm) takes the general path, which names it."""
    import sparsedyn.problems.plan as plan_module
    model, pm, convert, links = robot("humanoid")
    q, v, y, _ = states(model, links, 3, 17, False)
    expect = pinocchio_derivatives(kind, model, pm, convert, q, v, y, None)
    plan = derivative_plan(model, PLAN[kind], None)
    plan.solve(q[0], v[0], **{GIVEN[kind]: y[0]}, backend="c")      # the one-state library
    solve(kind, model, q, v, y, backend="c")                          # the derivatives' library

    def batched(*args, **kw):
        raise AssertionError("the batched path ran")
    with monkeypatch.context() as patch:
        patch.setattr(plan_module, "plan_solve_derivatives", batched)
        out = np.zeros((3, 1, model.nv, model.nv))
        for b in range(3):
            res = plan.solve(q[b], v[b], derivatives=True, **{GIVEN[kind]: y[b]})
            for g, e in zip(res.derivatives, expect[:, b]):
                assert g.shape == (model.nv, model.nv) and rel(g, e) <= PIN_TOL
            kept = plan.solve(q[b], v[b], derivatives=True, derivatives_out=out,
                              **{GIVEN[kind]: y[b]}).derivatives
            assert np.shares_memory(kept[0], out) and rel(out[:, 0], expect[:, b]) <= PIN_TOL
        with pytest.raises(ValueError, match="derivatives_out"):
            plan.solve(q[0], v[0], derivatives=True, derivatives_out=np.zeros((3, 2, 2, 2)),
                       **{GIVEN[kind]: y[0]})
    bad = q[0].copy()
    bad[3:7] *= 2.0                                 # the free-flyer's quaternion, norm 2
    with pytest.raises(ValueError, match="q: quaternion of joint 'root_joint'"):
        plan.solve(bad, v[0], derivatives=True, **{GIVEN[kind]: y[0]})
