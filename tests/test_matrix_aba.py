"""Nori's matrix ABA (problems/matrix_aba.py, seed 001 Property 2): W^L D W^R is lower triangular
under eq. (34)-(35) (matrix_aba raises otherwise) and its forward substitution gives Pinocchio's
ABA accelerations, with and without external wrenches, on a chain and on trees."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import sparsedyn.models as sm  # noqa: E402
from oracles import pin, pin_twin, rel_err  # noqa: E402
from sparsedyn import count_operations  # noqa: E402
from sparsedyn.problems.matrix_aba import matrix_aba  # noqa: E402

MODELS = {"chain": lambda: sm.serial_chain(9), "tree": lambda: sm.branched_tree(2, 2, branch_length=3),
          "random tree": lambda: sm.random_tree(8, 4, ("revolute", "prismatic", "spherical"))}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_matrix_aba_matches_pinocchio_aba(name):
    model = MODELS[name]()
    pm = pin_twin(model)
    pd = pm.createData()
    rng = np.random.default_rng(1)
    q = model.random_configuration(rng)
    qd, tau = rng.normal(size=(2, model.nv))
    fx = rng.normal(size=(model.nbodies, 6))                     # body frames, angular-first
    fext = pin.StdVec_Force()
    fext.append(pin.Force.Zero())
    for f in fx:
        fext.append(pin.Force(f[3:], f[:3]))
    assert rel_err(matrix_aba(model, q, qd, tau), pin.aba(pm, pd, q, qd, tau)) <= 1e-10
    assert rel_err(matrix_aba(model, q, qd, tau, fx), pin.aba(pm, pd, q, qd, tau, fext)) <= 1e-10


def test_matrix_aba_counts_per_state_and_refuses_batches():
    model = sm.serial_chain(6)
    rng = np.random.default_rng(2)
    q = model.random_configuration(rng, batch=2)
    qd, tau = rng.normal(size=(2, 2, model.nv))
    counts = []
    for b in range(2):
        with count_operations() as ops:
            matrix_aba(model, q[b], qd[b], tau[b])
        counts.append(ops.flops)
        assert ops.by_kind["forward substitution"] > 0 and ops.by_kind["matrix-ABA products"] > 0
    assert counts[0] == counts[1]                                # generic states: same structure
    with pytest.raises(ValueError, match="one state"):
        matrix_aba(model, q, qd, tau)


def test_matrix_aba_floating_base_humanoid():
    """A 6-DoF root pivot (W^{L,2} block (S^T I^A S)^-1 of size 6) and a branched tree."""
    from oracles import pin_model, to_pin_q
    import sparsedyn as sd
    model = sd.load_urdf(sm.HUMANOID_URDF, floating_base=True)
    pm = pin_model(sm.HUMANOID_URDF, True)
    rng = np.random.default_rng(3)
    q = model.random_configuration(rng)
    qd, tau = rng.normal(size=(2, model.nv))
    ref = pin.aba(pm, pm.createData(), to_pin_q(model, pm, q), qd, tau)
    assert rel_err(matrix_aba(model, q, qd, tau), ref) <= 1e-9
