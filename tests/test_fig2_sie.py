"""Nori's own Fig. 2 set-up (experiments/fig2_estimation_flops.py, sie_system): the square system
is solvable and its solution is the state's, against Pinocchio's RNEA (tau, joint wrench f_1)."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "experiments"))

from oracles import pin, pin_twin, rel_err  # noqa: E402

import fig2_estimation_flops as fig2  # noqa: E402
from sparsedyn.kinematics import body_velocities, joint_transforms  # noqa: E402
from sparsedyn.problems.plan import plan_system  # noqa: E402
from sparsedyn.spatial import to_angular_first  # noqa: E402


@pytest.mark.parametrize("N, ordering", [(5, "natural"), (8, "markowitz"), (8, "natural")])
def test_sie_square_system_recovers_torques_and_unmeasured_accelerations(N, ordering):
    system = fig2.sie_system(N)
    assert system.shape[0] == system.shape[1] == 20 * N           # square (13 N + 7 N rows)
    model = system.model
    fact = plan_system(system, np.ones(system.nnz, dtype=bool), ordering=ordering)
    rng = np.random.default_rng(N)
    B = 3
    q = model.random_configuration(rng, batch=B)
    qd, qdd = rng.normal(size=(2, B, model.nv))
    pm = pin_twin(model)
    pd = pm.createData()
    tau, f1 = np.zeros((B, N)), np.zeros((B, 6))
    for b in range(B):
        tau[b] = pin.rnea(pm, pd, q[b], qd[b], qdd[b])
        f1[b] = to_angular_first(pd.f[1].vector)                   # wrench across joint 1
    measured = {("fx", i): np.zeros((B, 6)) for i in range(N - 1)}
    measured.update({("qdd", i): qdd[:, i:i + 1] for i in range(2, N - 2)})
    measured[("f", 0)] = f1 @ fig2.SIE_SELECTOR.T                   # no tangential friction...
    measured[("fx", N - 1)] = np.zeros((B, 5))                      # ...and no wrench at the tip
    Xup = joint_transforms(model, q)
    x = fact.solve(system.values(Xup), system.rhs(Xup, body_velocities(model, Xup, qd), qd, measured))
    got_tau = np.concatenate([x[:, system.columns[("tau", i)].slice] for i in range(N)], axis=1)
    assert rel_err(got_tau, tau) <= 1e-9
    for i in (0, 1, N - 2, N - 1):                                  # the unmeasured qdd
        assert rel_err(x[:, system.columns[("qdd", i)].slice], qdd[:, i:i + 1]) <= 1e-9
    assert rel_err(x[:, system.columns[("fx", N - 1)].slice], np.zeros((B, 6))) <= 1e-9
