"""The pruned multi-right-hand-side substitutions of the derivatives (kernels/lu_pruned.py, and
a state at a time: lu_pruned_columns.py): on random right-hand-side patterns and wanted rows,
against dense NumPy (np.linalg.solve) and the unpruned multi-right-hand-side solve; the tangent
right-hand sides' structural pattern against the NumPy tangent route (system/tangent.py), whose
nonzeros must all lie in it. The pruned route against Pinocchio (humanoid, fixed-base panda,
with f_ext) is test_derivatives.py's test_derivatives_match_pinocchio."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn as sd
from oracles import robot_urdf
from sparsedyn.kernels.lu_multi_rhs import multi_rhs_program, solve_multi_rhs
from sparsedyn.kernels.lu_pruned import LANES, solve_pruned
from sparsedyn.kernels.lu_pruned_columns import solve_pruned_columns
from sparsedyn.kernels.lu_pruned_plan import pruned_program
from sparsedyn.kernels.tangent_numba import rhs_pattern
from sparsedyn.kinematics import body_velocities, joint_transforms
from sparsedyn.models import HUMANOID_URDF
from sparsedyn.problems.derivatives import derivative_plan
from sparsedyn.problems.derivative_layout import tangent_data
from sparsedyn.system.tangent import residual_tangents
from test_compiled import mixed_tree

ROUND_OFF = 1e-12


@pytest.mark.parametrize("kind", ["forward_dynamics", "inverse_dynamics"])
@pytest.mark.parametrize("seed", [3, 6])
def test_pruned_equals_dense_and_unpruned_solve(kind, seed):
    """Random column patterns (some empty, some full, a repeated one: a group) and random wanted
    rows, B not a multiple of LANES: the wanted entries equal the full multi-right-hand-side
    solve's (lu_multi_rhs, to the sign of a zero) and, where the plan takes the pruned route
    (no accuracy check: seed 6's forward and both inverse dynamics), dense NumPy's to
    round-off."""
    rng = np.random.default_rng(seed)
    model = mixed_tree(seed)
    plan = derivative_plan(model, kind, None)
    F = plan.factorization
    n, k, B = F.program.n, 9, LANES + 3
    pattern = rng.random((n, k)) < rng.uniform(0.02, 0.3, k)
    pattern[:, 0], pattern[:, 1], pattern[:, 2] = False, True, pattern[:, 3]
    wanted = rng.choice(n, size=rng.integers(1, n), replace=False)
    values = plan.system.values(joint_transforms(model, model.random_configuration(rng, batch=B)))
    rhs = np.where(pattern, rng.normal(size=(B, n, k)), 0.0)
    M = multi_rhs_program(F.program)
    Q = pruned_program(M, pattern, wanted)
    got, broken = np.empty((B, wanted.size, k)), np.zeros(B, dtype=np.bool_)
    solve_pruned(Q, values, np.ascontiguousarray(rhs.transpose(1, 2, 0)), got, broken)
    full, full_broken = np.empty(rhs.shape), np.zeros(B, dtype=np.bool_)
    solve_multi_rhs(M, values, rhs, full, full_broken)
    full = full[:, wanted]
    dense = np.linalg.solve(plan.system.dense(values), rhs)[:, wanted]
    assert not broken.any() and not full_broken.any()
    assert np.array_equal(got, full)
    if not F.checks_accuracy:          # (else its static pivots may lose accuracy: the plans
        # then take the unpruned route, whose fallback re-solves with partial pivoting)
        assert np.abs(got - dense).max() <= ROUND_OFF * np.abs(dense).max()
    assert not got[:, :, 0].any()                      # an empty column solves to 0
    # only the pattern's entries are read: NaN elsewhere changes nothing
    rhs_nan = np.where(pattern, rhs, np.nan)
    again = np.empty_like(got)
    solve_pruned(Q, values, np.ascontiguousarray(rhs_nan.transpose(1, 2, 0)), again, broken)
    assert not broken.any() and np.array_equal(again, got)
    # a non-finite right-hand side in one state: that state flagged and NaN, the others as
    # before (the flag is per lane)
    rhs_inf = rhs.copy()
    rhs_inf[5, :, 1] = np.inf                          # column 1's pattern is every row
    solve_pruned(Q, values, np.ascontiguousarray(rhs_inf.transpose(1, 2, 0)), again, broken)
    assert broken[5] and broken.sum() == 1 and np.isnan(again[5]).all()
    assert np.array_equal(np.delete(again, 5, 0), np.delete(got, 5, 0))
    # a state with NaN entries of D (its pivot checks fail) is flagged alone, as in the
    # unpruned solve
    nan_state = values.copy()
    nan_state[LANES + 1] = np.nan
    solve_multi_rhs(M, nan_state, rhs, np.empty(rhs.shape), full_broken)
    solve_pruned(Q, nan_state, np.ascontiguousarray(rhs.transpose(1, 2, 0)), again, broken)
    assert np.array_equal(broken, full_broken) and np.flatnonzero(broken).tolist() == [LANES + 1]
    assert np.isnan(again[LANES + 1]).all()
    assert np.array_equal(np.delete(again, LANES + 1, 0), np.delete(got, LANES + 1, 0))
    mg, og = np.diff(Q.group_ptr), np.diff(Q.op_ptr)
    assert (mg * og).sum() < k * np.size(Q.P.t)        # pruning dropped ops
    # entries wanted per column (a random mask): those equal the full solve's, the others
    # are left as they were
    mask = rng.random((wanted.size, k)) < 0.5
    Qm = pruned_program(M, pattern, wanted, mask)
    part = np.full_like(got, 7.0)
    solve_pruned(Qm, values, np.ascontiguousarray(rhs.transpose(1, 2, 0)), part, broken)
    assert not broken.any()
    assert np.array_equal(part[:, mask], full[:, mask]) and (part[:, ~mask] == 7.0).all()
    assert (np.diff(Qm.group_ptr) * np.diff(Qm.op_ptr)).sum() <= (mg * og).sum()
    # a state at a time, blocks of columns on the lanes (lu_pruned_columns; each block runs the
    # union of its columns' ops): the same wanted entries, the same flags
    blocks = [[2, 0, 5], [1, 3, 4, 6, 7], [8]]
    Qb = pruned_program(M, pattern, wanted, mask, blocks)
    assert sorted(Qb.group_cols.tolist()) == list(range(k))
    one = np.full_like(got, 7.0)
    solve_pruned_columns(Qb, values, np.ascontiguousarray(rhs.transpose(1, 2, 0)), one, broken)
    assert not broken.any() and np.array_equal(one[:, mask], full[:, mask])
    solve_pruned_columns(Qb, nan_state, np.ascontiguousarray(rhs_inf.transpose(1, 2, 0)), one,
                         broken)
    assert np.flatnonzero(broken).tolist() == [5, LANES + 1]
    assert np.isnan(one[5]).all() and np.isnan(one[LANES + 1]).all()
    assert np.array_equal(np.delete(one, [5, LANES + 1], 0)[:, mask],
                          np.delete(full, [5, LANES + 1], 0)[:, mask])


def tangent_cases(model, B, seed):
    """Per dynamics problem (kind, plan, v, x, Xup, body velocities, dr_q, dr_v) at B random
    states: the NumPy tangents of system/tangent.py at the plan's solution x."""
    rng = np.random.default_rng(seed)
    q = model.random_configuration(rng, batch=B)
    v, y = rng.normal(size=(2, B, model.nv))
    for kind, given in (("forward_dynamics", "tau"), ("inverse_dynamics", "qdd")):
        plan = derivative_plan(model, kind, None)
        x = plan.solve(q, v, outputs="all", **{given: y}).vector
        Xup = joint_transforms(model, q)
        vel = body_velocities(model, Xup, v)
        yield (kind, plan, v, x, Xup, vel, *residual_tangents(plan.system, Xup, vel, v, x))


@pytest.mark.parametrize("name", ["humanoid", "panda"])
def test_tangent_rhs_lies_in_its_pattern(name):
    """The NumPy tangent right-hand sides (every direction, no pruning) are zero outside
    rhs_pattern, the structure the pruned substitutions are planned for."""
    floating = name == "humanoid"
    model = sd.load_urdf(HUMANOID_URDF if floating else robot_urdf(name), floating_base=floating)
    for kind, plan, _, _, _, _, dr_q, dr_v in tangent_cases(model, 3, 4):
        pattern = rhs_pattern(tangent_data(plan), plan.system.rows.size, model.nv)
        dense = np.concatenate((dr_q, dr_v), axis=2)
        assert (dense != 0).any(axis=0)[pattern].mean() > 0.5      # the pattern is not vacuous
        assert not dense[:, ~pattern].any(), kind


@pytest.mark.parametrize("name", ["humanoid", "mixed"])
def test_compiled_tangent_rhs_equals_numpy_tangents(name):
    """The compiled tangent right-hand sides (states on lanes: a full group of LANES states and
    a partial one; a single state on one lane) equal minus the NumPy tangents of
    system/tangent.py in their pattern, and leave every other entry of the output as it was; a
    mixed tree has every joint kind."""
    from sparsedyn.kernels.tangent_numba import LANES, tangent_rhs
    model = (sd.load_urdf(HUMANOID_URDF, floating_base=True) if name == "humanoid"
             else mixed_tree())
    B = LANES + 3
    rng = np.random.default_rng(9)
    for kind, plan, v, x, Xup, vel, dr_q, dr_v in tangent_cases(model, B, 9):
        expect = -np.concatenate((dr_q, dr_v), axis=2)
        n, nv = plan.system.rows.size, model.nv
        pattern = rhs_pattern(tangent_data(plan), n, nv)
        kin = np.ascontiguousarray(np.stack([np.concatenate((X.E.reshape(B, 9), X.r), 1)
                                             for X in Xup], 1))
        out = rng.normal(size=(n, 3 * nv, B + 2))          # junk: the kernel overwrites its pattern
        before = out.copy()
        tangent_rhs(tangent_data(plan), kin, vel, v, x, out)
        got = out[:, :2 * nv, :B].transpose(2, 0, 1)
        scale = np.abs(expect).max()
        assert np.abs(got - expect)[:, pattern].max() <= ROUND_OFF * scale, kind
        kept = before[:, :2 * nv, :B].transpose(2, 0, 1)
        assert np.array_equal(got[:, ~pattern], kept[:, ~pattern])
        assert np.array_equal(out[:, 2 * nv:], before[:, 2 * nv:])
        assert np.array_equal(out[:, :, B:], before[:, :, B:])
        # a single state runs on one lane (its own compiled instance): the same tangents
        one = rng.normal(size=(n, 3 * nv, 1))
        tangent_rhs(tangent_data(plan), kin[:1], vel[:1], v[:1], x[:1], one)
        assert np.abs(one[:, :2 * nv, 0] - expect[0])[pattern].max() <= ROUND_OFF * scale, kind


@pytest.mark.parametrize("name", ["humanoid", "panda"])
def test_pinocchio_checked_plans_take_the_pruned_route(name):
    """The plans test_derivatives_match_pinocchio checks on the compiled route (humanoid and
    panda, with and without f_ext links) run the pruned substitutions (on the inverse dynamics
    they derive through), not the unpruned fallback."""
    from sparsedyn.problems.derivative_solves import pruned_derivative_program
    floating = name == "humanoid"
    model = sd.load_urdf(HUMANOID_URDF if floating else robot_urdf(name), floating_base=floating)
    links = {model.link_names[-1]: np.zeros(6)}
    for kind in ("forward_dynamics", "inverse_dynamics"):
        for f_ext in (None, links):
            base = derivative_plan(model, kind, f_ext).derivative_plans()[0]
            Q = pruned_derivative_program(base)
            assert Q is not None and Q.group_cols.size == 2 * model.nv


@pytest.mark.parametrize("kind", ["rnea", "aba"])
def test_pruned_route_matches_pinocchio_humanoid(kind):
    """A batch of CHUNK + 3 humanoid states with external wrenches: the first group of states
    runs the pruned substitutions on lanes of states, the last 3 (fewer than
    PRUNED_MIN_STATES) a state at a time (lu_pruned_columns); every state equals Pinocchio's
    derivatives."""
    from sparsedyn.problems.derivative_solves import PRUNED_MIN_STATES
    from sparsedyn.problems.plan_derivatives import CHUNK
    from test_derivatives import NAMES, PIN_TOL, pinocchio_derivatives, rel, robot, states
    assert CHUNK >= PRUNED_MIN_STATES > 3
    model, pm, convert, links = robot("humanoid")
    B = CHUNK + 3
    q, v, y, f_ext = states(model, links, B, 12, True)
    expect = pinocchio_derivatives(kind, model, pm, convert, q, v, y, f_ext)
    fn = sd.rnea_derivatives if kind == "rnea" else sd.aba_derivatives
    got = fn(model, q, v, y, f_ext=f_ext, backend="numba")
    for what, g, e in zip(NAMES, got, expect):
        worst = max(rel(g[b], e[b]) for b in range(B))
        assert worst <= PIN_TOL, (what, worst)


def test_forward_derivatives_substitute_through_inverse_dynamics():
    """README's reason for deriving forward dynamics through inverse dynamics: on the humanoid
    the inverse-dynamics substitutions of the 2 nv tangent directions keep fewer than half the
    (operation, column) pairs per state that forward dynamics' own D keeps for the same
    directions (its LU couples every body to the whole tree)."""
    from sparsedyn.problems.derivative_layout import output_columns
    from sparsedyn.problems.derivative_solves import pruned_derivative_program
    model = sd.models.humanoid()
    pairs = (lambda Q: int((np.diff(Q.group_ptr) * np.diff(Q.op_ptr)).sum()))
    inverse = sd.compile(sd.inverse_dynamics(model))
    forward = sd.compile(sd.forward_dynamics(model))
    M = multi_rhs_program(forward.factorization.program)
    own = pruned_program(M, rhs_pattern(tangent_data(forward), forward.system.rows.size,
                                        model.nv), output_columns(forward))
    through = pruned_derivative_program(inverse)
    assert 0 < pairs(through) < pairs(own) / 2
