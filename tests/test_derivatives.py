"""Analytical derivatives of the dynamics through compiled plans (issue #22): rnea_derivatives,
aba_derivatives and plan.solve(..., derivatives=True) against Pinocchio's
computeRNEADerivatives / computeABADerivatives (floating humanoid and solo12, fixed-base panda,
a random tree of every joint kind through its Pinocchio twin; with and without f_ext), against
central finite differences of the recursive rnea / aba on the tangent space (model.integrate),
and the identities dtau/da = M (pin.crba), dqdd/dtau = M^-1."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn as sd
from oracles import (pin, pin_fext, pin_model, pin_twin, robot_urdf, singular_rod_model,
                     to_pin_q, twin_q)
from sparsedyn.model import (FreeFlyerJoint, HelicalJoint, ModelBuilder, PlanarJoint,
                             RevoluteJoint, SphericalJoint)
from sparsedyn.model.model import WORLD
from sparsedyn.models import HUMANOID_URDF
from sparsedyn.problems.derivatives import derivative_plan
from test_compiled import mixed_tree

PIN_TOL = 1e-9       # the target: equal to Pinocchio to 1e-9, relative
FD_TOL = 1e-9        # 4th-order central differences (see _central_differences): <= 6e-11 seen
NAMES = ("dq", "dv", "dy")


def rel(a, b):
    """max |a - b| over max |b| (the reference's own scale, no floor)."""
    return float(np.abs(np.asarray(a) - b).max() / np.abs(b).max())


def screw_tree():
    """A free-flyer root carrying a helical, a spherical, a revolute and a planar joint (the
    joint kinds the published robots lack), numbered depth-first."""
    rng = np.random.default_rng(11)
    b = ModelBuilder("screw_tree")
    joints = [FreeFlyerJoint("root"), HelicalJoint("screw", rng.normal(size=3), 0.07),
              SphericalJoint("ball"), RevoluteJoint("hinge", rng.normal(size=3)),
              PlanarJoint("slide")]
    parents = [WORLD, 0, 1, 2, 0]          # depth-first, as Pinocchio's derivatives need
    for i, (joint, parent) in enumerate(zip(joints, parents)):
        T = np.eye(4)
        T[:3, :3] = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        T[:3, 0] *= np.sign(np.linalg.det(T[:3, :3]))           # a rotation, not a reflection
        T[:3, 3] = rng.uniform(-0.4, 0.4, 3)
        b.add_body(f"l{i}", parent, joint, placement=T, mass=rng.uniform(0.5, 3.0),
                   com=rng.uniform(-0.2, 0.2, 3), inertia=np.diag(rng.uniform(0.02, 0.1, 3)))
    return b.build()


_ROBOTS = {}


def robot(name):
    """(model, Pinocchio model, q converter, f_ext links)."""
    if name not in _ROBOTS:
        if name in ("mixed", "screw"):
            m = mixed_tree() if name == "mixed" else screw_tree()
            _ROBOTS[name] = (m, pin_twin(m), twin_q, [m.link_names[-1], m.link_names[1]])
        else:
            path = HUMANOID_URDF if name == "humanoid" else robot_urdf(name)
            floating = name != "panda"
            m = sd.load_urdf(path, floating_base=floating)
            pm = pin_model(path, floating)
            links = [m.link_names[-1], m.link_names[len(m.link_names) // 2]]
            _ROBOTS[name] = (m, pm, to_pin_q, links)
    return _ROBOTS[name]


def states(model, links, B, seed, with_fext):
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng, batch=B)
    v, y = rng.normal(size=(2, B, model.nv))
    f_ext = {link: 20.0 * rng.normal(size=(B, 6)) for link in links} if with_fext else None
    return q, v, y, f_ext


def pinocchio_derivatives(kind, model, pm, convert, q, v, y, f_ext):
    """Pinocchio's three derivatives per state (B, nv, nv) each; the mass matrix and its inverse
    from their upper triangles (the part Pinocchio fills)."""
    pd = pm.createData()
    out = np.zeros((3,) + q.shape[:1] + (model.nv, model.nv))
    for b in range(q.shape[0]):
        args = [pm, pd, convert(model, pm, q[b]), v[b], y[b]]
        if f_ext:
            args.append(pin_fext(model, pm, {k: w[b] for k, w in f_ext.items()}))
        if kind == "rnea":
            dq, dv, _ = pin.computeRNEADerivatives(*args)
            third = pd.M
        else:
            dq, dv, _ = pin.computeABADerivatives(*args)
            third = pd.Minv
        out[:, b] = dq, dv, np.triu(third) + np.triu(third, 1).T
    return out


@pytest.mark.parametrize("name, with_fext", [
    ("humanoid", True), ("panda", False), ("panda", True), ("solo12", False), ("solo12", True),
    ("screw", False), ("screw", True)])         # (the humanoid's plans take longest to compile)
@pytest.mark.parametrize("kind", ["rnea", "aba"])
def test_derivatives_match_pinocchio(kind, name, with_fext):
    model, pm, convert, links = robot(name)
    q, v, y, f_ext = states(model, links, 4, 5, with_fext)
    expect = pinocchio_derivatives(kind, model, pm, convert, q, v, y, f_ext)
    fn = sd.rnea_derivatives if kind == "rnea" else sd.aba_derivatives
    for backend in ("numpy", "numba"):
        got = fn(model, q, v, y, f_ext=f_ext, backend=backend)
        for what, g, e in zip(NAMES, got, expect):
            assert g.shape == (4, model.nv, model.nv)
            assert rel(g, e) <= PIN_TOL, (backend, what, rel(g, e))


def _central_differences(fn, model, q, v, y, f_ext, h=(1e-3, 0.1, 0.1)):
    """(d/dq on the tangent space, d/dv, d/dy) of fn(model, q, v, y, f_ext) at one state, by
    fourth-order central differences (-f(2h) + 8 f(h) - 8 f(-h) + f(-2h)) / 12h, all the
    perturbed states in one batch; q moves along model.integrate. The dynamics are quadratic
    in v and linear in y, where the stencil is exact for any step: a long one keeps round-off
    down."""
    nv = model.nv
    stencil = np.array([2.0, 1.0, -1.0, -2.0])
    weights = np.array([-1.0, 8.0, -8.0, 1.0]) / 12
    # perturbations (what, direction, step, nv): what = q, v, y
    E = (np.asarray(h)[:, None, None, None] * np.eye(nv)[None, :, None, :]
         * stencil[None, None, :, None]).reshape(3, -1, nv)
    Q, V, Y = (np.broadcast_to(x, E.shape[1:2] + x.shape).copy() for x in (q, v, y))
    Q = np.concatenate((model.integrate(Q, E[0]), Q, Q))
    V = np.concatenate((V, V + E[1], V))
    Y = np.concatenate((Y, Y, Y + E[2]))
    n = Q.shape[0]
    fb = None if not f_ext else {k: np.broadcast_to(w, (n, 6)) for k, w in f_ext.items()}
    values = fn(model, Q, V, Y, fb).reshape(3, nv, 4, nv)     # (what, direction, step, output)
    return np.einsum("adso,s->aod", values, weights) / np.asarray(h)[:, None, None]


@pytest.mark.parametrize("name", ["screw", "mixed", "solo12"])
@pytest.mark.parametrize("kind", ["rnea", "aba"])
def test_derivatives_match_central_differences(kind, name):
    """Against central differences of the recursive algorithms (sd.rnea / sd.aba, not the plan)
    along model.integrate, with external wrenches. "mixed" numbers its bodies in a random
    parent-before-child order that is not depth-first: there Pinocchio's derivatives disagree
    with central differences of pin.rnea on its twin (they appear to assume depth-first
    numbering), so it is no oracle; ours agree."""
    model, _, _, links = robot(name)
    q, v, y, f_ext = states(model, links, 2, 9, True)
    fn = sd.rnea_derivatives if kind == "rnea" else sd.aba_derivatives
    got = fn(model, q, v, y, f_ext=f_ext)
    recursive = sd.rnea if kind == "rnea" else sd.aba
    for b in range(2):
        fb = {k: w[b] for k, w in f_ext.items()}
        expect = _central_differences(recursive, model, q[b], v[b], y[b], fb)
        for what, g, e in zip(NAMES, got, expect):
            assert rel(g[b], e) <= FD_TOL, (what, b, rel(g[b], e))


@pytest.mark.parametrize("name", ["humanoid", "panda"])
def test_identities_mass_matrix_and_inverse(name):
    """dtau/da = M (pin.crba) and dqdd/dtau = M^-1 (its inverse); their product is 1 (with
    external wrenches, which change neither)."""
    model, pm, convert, links = robot(name)
    q, v, y, f_ext = states(model, links, 3, 2, True)
    M_got = sd.rnea_derivatives(model, q, v, y, f_ext=f_ext)[2]
    Minv_got = sd.aba_derivatives(model, q, v, y, f_ext=f_ext)[2]
    pd = pm.createData()
    for b in range(3):
        M = pin.crba(pm, pd, convert(model, pm, q[b]))
        M = np.triu(M) + np.triu(M, 1).T
        assert rel(M_got[b], M) <= PIN_TOL
        assert rel(Minv_got[b], np.linalg.inv(M)) <= PIN_TOL
        assert rel(Minv_got[b] @ M, np.eye(model.nv)) <= PIN_TOL


def test_plan_solve_exposes_derivatives_and_shapes():
    """plan.solve(..., derivatives=True) gives the outputs and the derivatives of the same
    call, on every backend; single states drop B, B = 0 gives empty arrays; a Result solved
    without derivatives says how to get them."""
    model, pm, convert, links = robot("solo12")
    q, v, y, f_ext = states(model, links, 3, 4, True)
    plan = sd.compile(sd.forward_dynamics(model, f_ext=links))
    expect = pinocchio_derivatives("aba", model, pm, convert, q, v, y, f_ext)
    for backend in ("numpy", "numba", "auto"):
        res = plan.solve(q, v, tau=y, f_ext=f_ext, backend=backend, derivatives=True)
        assert rel(res["qdd"], sd.aba(model, q, v, y, f_ext=f_ext)) <= PIN_TOL
        for g, e in zip(res.derivatives, expect):
            assert rel(g, e) <= PIN_TOL
    one = plan.solve(q[1], v[1], tau=y[1], f_ext={k: w[1] for k, w in f_ext.items()},
                     derivatives=True)
    for g, e in zip(one.derivatives, expect):
        assert g.shape == (model.nv, model.nv) and rel(g, e[1]) <= PIN_TOL
    empty = sd.rnea_derivatives(model, q[:0], v[:0], y[:0])
    assert [d.shape for d in empty] == [(0, model.nv, model.nv)] * 3
    with pytest.raises(ValueError, match="derivatives=True"):
        plan.solve(q, v, tau=y, f_ext=f_ext).derivatives
    with pytest.raises(ValueError, match="derivatives"):
        plan.solve(q, v, tau=y, derivatives="yes")


@pytest.mark.parametrize("kind", ["rnea", "aba"])
def test_one_state_per_call_matches_pinocchio(kind):
    """One humanoid state per call ((nq,), (nv,) arrays, external wrenches (6,)), as a
    controller calls it, on the automatic and the numba backends: each call's derivatives equal
    Pinocchio's at that state (the one-state route: kinematics and D(q) in one compiled pass,
    the pruned substitutions a state at a time)."""
    model, pm, convert, links = robot("humanoid")
    q, v, y, f_ext = states(model, links, 3, 21, True)
    expect = pinocchio_derivatives(kind, model, pm, convert, q, v, y, f_ext)
    plan = derivative_plan(model, "inverse_dynamics" if kind == "rnea" else "forward_dynamics",
                           f_ext)
    given = "qdd" if kind == "rnea" else "tau"
    for backend in ("auto", "numba"):
        for b in range(3):
            res = plan.solve(q[b], v[b], f_ext={k: w[b] for k, w in f_ext.items()},
                             backend=backend, derivatives=True, **{given: y[b]})
            for what, g, e in zip(NAMES, res.derivatives, expect[:, b]):
                assert g.shape == (model.nv, model.nv)
                assert rel(g, e) <= PIN_TOL, (backend, b, what, rel(g, e))


def test_batches_longer_than_a_group_of_states():
    """Batches run in groups of CHUNK states: every state of a batch that spans several groups
    (and ends in a partial one) equals Pinocchio's, on both routes."""
    from sparsedyn.problems.plan_derivatives import CHUNK
    model, pm, convert, links = robot("panda")
    B = 2 * CHUNK + 3
    q, v, y, f_ext = states(model, links, B, 6, True)
    expect = pinocchio_derivatives("aba", model, pm, convert, q, v, y, f_ext)
    for backend in ("numpy", "numba"):
        got = sd.aba_derivatives(model, q, v, y, f_ext=f_ext, backend=backend)
        for g, e in zip(got, expect):
            assert max(rel(g[b], e[b]) for b in range(B)) <= PIN_TOL


def test_groups_of_states_split_over_two_threads():
    """threads=2 splits the groups of CHUNK states between two threads: every state equals
    Pinocchio's and the one-thread answer exactly, the last group a partial one; singular
    states in both threads' halves are all named by one SingularModelError."""
    from sparsedyn.problems.plan_derivatives import CHUNK
    model, pm, convert, links = robot("panda")
    B = 4 * CHUNK + 5
    q, v, y, f_ext = states(model, links, B, 14, True)
    plan = derivative_plan(model, "forward_dynamics", f_ext)
    expect = pinocchio_derivatives("aba", model, pm, convert, q, v, y, f_ext)
    one, two = (plan.solve(q, v, tau=y, f_ext=f_ext, backend="numba", threads=t,
                           derivatives=True).derivatives for t in (1, 2))
    for g1, g2, e in zip(one, two, expect):
        assert np.array_equal(g1, g2)
        assert max(rel(g2[b], e[b]) for b in range(B)) <= PIN_TOL
    # the derivatives' own route (plan.solve would stop at the solution's singular pass)
    from sparsedyn.problems.plan_derivatives import solve_derivatives
    rod = sd.compile(sd.forward_dynamics(singular_rod_model()))
    zeros = np.zeros((B, 2))
    with pytest.raises(sd.SingularModelError) as info:
        solve_derivatives(rod, zeros, zeros, np.zeros((B, rod.system.shape[1])), "numba", 2)
    assert info.value.batch_indices == tuple(range(B))


def test_plans_are_cached_per_model_problem_and_links():
    model, _, _, links = robot("panda")
    assert derivative_plan(model, "inverse_dynamics", None) is \
        derivative_plan(model, "inverse_dynamics", {})
    with_links = derivative_plan(model, "forward_dynamics", {links[0]: np.zeros(6)})
    assert with_links is derivative_plan(model, "forward_dynamics", {links[0]: np.ones(6)})
    assert with_links.problem.fx_links == (links[0],)
    with pytest.raises(KeyError, match="no_such_link"):
        sd.aba_derivatives(model, model.neutral_configuration(), np.zeros(model.nv),
                           np.zeros(model.nv), f_ext={"no_such_link": np.zeros(6)})


def test_singular_mass_matrix_is_a_typed_error():
    """Forward dynamics of a rod on its own axis (M singular in every state): the derivatives
    raise SingularModelError naming the batch indices, on every route, never return numbers."""
    model = singular_rod_model()
    q, v, tau = np.zeros((3, 2)), np.zeros((3, 2)), np.ones((3, 2))
    for backend in ("numpy", "numba"):
        with pytest.raises(sd.SingularModelError, match="batch indices"):
            sd.aba_derivatives(model, q, v, tau, backend=backend)


def test_many_right_hand_sides_on_lanes():
    """The compiled multi-right-hand-side solve (right-hand sides on the lanes) against dense
    NumPy on D(q), bit-identical to the NumPy LU program; a singular state is reported
    SINGULAR through the partial-pivoting fallback, not returned as numbers."""
    from sparsedyn.kinematics import joint_transforms
    from sparsedyn.planner.factorization import OK, SINGULAR
    from sparsedyn.problems.derivative_solves import solve_many
    model, _, _, _ = robot("solo12")
    plan = derivative_plan(model, "forward_dynamics", None)
    F = plan.factorization
    rng = np.random.default_rng(8)
    values = plan.system.values(joint_transforms(model, model.random_configuration(rng, batch=3)))
    rhs = rng.normal(size=(3, F.program.n, 70))      # more than one block of lanes
    x, status = solve_many(F, values, rhs)
    D = plan.system.dense(values)
    assert (status == OK).all() and rel(x, np.linalg.solve(D, rhs)) <= 1e-12
    assert np.array_equal(x, F.solve_status(values, rhs, backend="numpy")[0])
    rod = sd.compile(sd.forward_dynamics(singular_rod_model()))
    rod_values = rod.system.values(joint_transforms(rod.model, np.zeros((2, 2))))
    ones = np.ones((2, rod.factorization.program.n, 3))
    x, status = solve_many(rod.factorization, rod_values, ones)
    assert (status == SINGULAR).all() and np.isnan(x).all()
