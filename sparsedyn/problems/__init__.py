"""Dynamics problems on Nori's Newton-Euler system and their compiled plans (seed 001, Sec. IV-V).

    plan = compile(inverse_dynamics(model, f_ext=True))     # offline
    res = plan.solve(q, v, qdd=qdd, f_ext={...})             # online, batched
    plan = compile(loop_forward_dynamics(cluster_model))     # kinematic loops (Lagrange form)
    plan = compile(loop_inverse_dynamics(cluster_model))     # tau_y with loops; plan.save / load_plan
    inverse_dynamics(cluster_model), forward_dynamics(cluster_model): the same loop problems (api.py)
    dtau_dq, dtau_dv, M = rnea_derivatives(model, q, v, a)   # analytical, through a cached plan
    plan = compile(mass_matrix(model)); M = plan.solve(q)     # compiled CRBA (and L^T L factor)
"""
from .derivatives import aba_derivatives, rnea_derivatives
from .api import forward_dynamics, inverse_dynamics
from .dynamics import Problem
from .loops import (LoopPlan, LoopProblem, LoopResult, load_loop_plan, loop_forward_dynamics,
                    loop_inverse_dynamics)
from .mass_matrix import MassMatrixPlan, MassMatrixProblem, crba, mass_matrix
from .plan import PLAN_VERSION, Plan, Result, compile, load_plan

__all__ = ["Problem", "inverse_dynamics", "forward_dynamics", "compile", "Plan", "Result",
           "load_plan", "PLAN_VERSION", "loop_forward_dynamics", "loop_inverse_dynamics", "load_loop_plan",
           "LoopProblem", "LoopPlan",
           "LoopResult", "rnea_derivatives", "aba_derivatives", "mass_matrix",
           "MassMatrixProblem", "MassMatrixPlan", "crba"]
