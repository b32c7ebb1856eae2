"""Yamane-Nakamura virtual-work forward dynamics vs ABA, Pinocchio and RNEA joint wrenches."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
import pytest

import sparsedyn as sd
from oracles import pin, pin_fext, pin_model, pin_twin, rel_err, to_pin_q
from sparsedyn.errors import SingularModelError
from sparsedyn.model.joints import RevoluteJoint, SphericalJoint
from sparsedyn.model.model import WORLD, ModelBuilder
from sparsedyn.models import HUMANOID_URDF, branched_tree, random_tree, serial_chain
from sparsedyn.opcount import count_operations
from sparsedyn.recursive.rnea import rnea_sweeps
from sparsedyn.recursive.yamane import virtual_work_plan, yamane_forward_dynamics
from sparsedyn.spatial import to_linear_first

TOL = 1e-10


def _models():
    yield serial_chain(7)
    for seed in (1, 2, 3):
        yield random_tree(10, seed=seed, joint_types=("revolute", "prismatic", "spherical"))
    yield branched_tree(2, 3, branch_length=2)


@pytest.mark.parametrize("split", [True, False])
def test_yamane_equals_aba_and_pinocchio(split):
    rng = np.random.default_rng(0)
    for model in _models():
        pm = pin_twin(model)
        pdata = pm.createData()
        B = 3
        q = model.random_configuration(rng, batch=B)
        v, tau = rng.normal(size=(B, model.nv)), rng.normal(size=(B, model.nv))
        qdd = yamane_forward_dynamics(model, q, v, tau, split=split)
        assert rel_err(qdd, sd.aba(model, q, v, tau)) <= TOL, model.name
        for b in range(B):
            ref = pin.aba(pm, pdata, q[b], v[b], tau[b])
            assert rel_err(qdd[b], ref) <= TOL, model.name
            assert rel_err(yamane_forward_dynamics(model, q[b], v[b], tau[b], split=split), ref) <= TOL


def test_yamane_floating_base_humanoid_with_external_forces():
    model = sd.load_urdf(HUMANOID_URDF, floating_base=True)
    pm = pin_model(HUMANOID_URDF, True)
    pdata = pm.createData()
    rng = np.random.default_rng(4)
    q = model.random_configuration(rng)
    v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
    f_ext = {model.link_names[k]: rng.normal(size=6) for k in (0, 7, model.nbodies - 1)}
    ref = pin.aba(pm, pdata, to_pin_q(model, pm, q), v, tau, pin_fext(model, pm, f_ext))
    for split in (True, False):
        qdd = yamane_forward_dynamics(model, q, v, tau, f_ext=f_ext, split=split)
        assert rel_err(qdd, ref) <= 1e-9
        assert rel_err(qdd, sd.aba(model, q, v, tau, f_ext=f_ext)) <= 1e-9


@pytest.mark.parametrize("split", [True, False])
def test_constraint_forces_equal_rnea_joint_wrenches(split):
    rng = np.random.default_rng(5)
    for model in _models():
        q = model.random_configuration(rng, batch=2)
        v, tau = rng.normal(size=(2, model.nv)), rng.normal(size=(2, model.nv))
        qdd, wrenches = yamane_forward_dynamics(model, q, v, tau, split=split, return_wrenches=True)
        # RNEA at the SAME accelerations (from ABA, an independent route) gives the joint forces
        _, _, _, f = rnea_sweeps(model, q, v, sd.aba(model, q, v, tau), np.zeros((2, model.nbodies, 6)))
        assert rel_err(wrenches, to_linear_first(f)) <= 1e-9
        pm = pin_twin(model)
        pdata = pm.createData()
        pin.rnea(pm, pdata, q[0], v[0], qdd[0])
        ref = np.array([pdata.f[i + 1].vector for i in range(model.nbodies)])   # LOCAL, linear-first
        assert rel_err(wrenches[0], ref) <= 1e-9


def star(n_branches):
    """Yamane's Fig. 7 system: a link on a spherical joint carrying n spherical end links."""
    b = ModelBuilder(f"star{n_branches}")
    b.add_body("hub", WORLD, SphericalJoint("hub_joint"), mass=2.0, com=(0, 0, -0.1), inertia=np.eye(3) * 0.02)
    for k in range(n_branches):
        a = 2 * np.pi * k / n_branches
        T = np.eye(4)
        T[:3, 3] = (0.1 * np.cos(a), 0.1 * np.sin(a), -0.2)
        b.add_body(f"leg{k}", "hub", SphericalJoint(f"leg{k}_joint"), placement=T, mass=1.0,
                   com=(0, 0, -0.15), inertia=np.diag([0.01, 0.01, 0.002]))
    return b.build()


def test_link_splitting_bounds_joints_per_link_and_keeps_the_result():
    model = star(8)
    assert virtual_work_plan(model, split=True).max_joints_per_link <= 3
    assert virtual_work_plan(model, split=False).max_joints_per_link == 9
    rng = np.random.default_rng(6)
    q = model.random_configuration(rng, batch=2)
    v, tau = rng.normal(size=(2, model.nv)), rng.normal(size=(2, model.nv))
    ref = sd.aba(model, q, v, tau)
    for split in (True, False):
        assert rel_err(yamane_forward_dynamics(model, q, v, tau, split=split), ref) <= TOL


def _flops(model, split):
    rng = np.random.default_rng(0)
    q = model.random_configuration(rng)
    with count_operations() as ops:
        yamane_forward_dynamics(model, q, np.ones(model.nv), np.ones(model.nv), split=split)
    return ops.flops


def test_splitting_makes_the_star_linear():
    # operation counts (not timings): with splitting every added branch costs the same; without,
    # the clique of sibling joints on the hub makes each added branch dearer than the last
    n = (4, 8, 16)
    with_split = [_flops(star(k), True) for k in n]
    without = [_flops(star(k), False) for k in n]
    per_branch = lambda f: [(f[i + 1] - f[i]) / (n[i + 1] - n[i]) for i in range(2)]
    a, b = per_branch(with_split)
    assert abs(b - a) <= 0.02 * a
    a, b = per_branch(without)
    assert b > 1.5 * a
    assert without[2] > with_split[2]


def test_singular_link_inertia_names_the_link():
    b = ModelBuilder("massless")
    b.add_body("a", WORLD, RevoluteJoint("ja", [0, 0, 1]), mass=1.0, inertia=np.eye(3))
    b.add_body("ghost", "a", RevoluteJoint("jg", [0, 1, 0]), mass=0.0)
    model = b.build()
    with pytest.raises(SingularModelError, match="ghost"):
        yamane_forward_dynamics(model, np.zeros(2), np.zeros(2), np.zeros(2))


def test_bad_input_names_the_argument():
    model = serial_chain(3)
    with pytest.raises(ValueError, match="tau"):
        yamane_forward_dynamics(model, np.zeros(3), np.zeros(3), np.zeros(4))
