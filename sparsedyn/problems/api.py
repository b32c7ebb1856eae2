"""The public problem constructors: a Model gives the tree problems of Nori's system (dynamics.py),
a ClusterModel (kinematic loops, seed 003) their loop versions in Lagrange form (loops.py):

    compile(inverse_dynamics(model)).solve(q, v, qdd=qdd)["tau"]
    compile(inverse_dynamics(cluster_model)).solve(q, qd, ydd=ydd)["tau_y"]    # = C-RNEA
    compile(forward_dynamics(cluster_model)).solve(q, qd, tau_y)["ydd"]        # = C-ABA
"""
from __future__ import annotations

from ..loops.cluster_model import ClusterModel
from . import dynamics
from .loops import loop_forward_dynamics, loop_inverse_dynamics


def inverse_dynamics(model, f_ext=False):
    """tau from (q, qd, qdd[, f_ext]) for a Model (dynamics.inverse_dynamics); tau_y from
    (q, qd, ydd[, f_ext]) for a ClusterModel (loops.loop_inverse_dynamics)."""
    if isinstance(model, ClusterModel):
        return loop_inverse_dynamics(model, f_ext)
    return dynamics.inverse_dynamics(model, f_ext)


def forward_dynamics(model, f_ext=False):
    """qdd from (q, qd, tau[, f_ext]) for a Model (dynamics.forward_dynamics); ydd from
    (q, qd, tau_y[, f_ext]) for a ClusterModel (loops.loop_forward_dynamics)."""
    if isinstance(model, ClusterModel):
        return loop_forward_dynamics(model, f_ext)
    return dynamics.forward_dynamics(model, f_ext)
