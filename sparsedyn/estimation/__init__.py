"""Sensor-based estimation of joint torques and external wrenches (seed 001, Sec. VI, eq. 17-24):
EstimationProblem (problem.py) -> compile_estimation (plan.py: exact LU via solve_exact.py, MAP /
least squares via solve_map.py; their compiled online routes via compiled_rows.py (sensor rows in
the assembly program), compiled_map.py (normal matrix) and compiled_augmented.py (quasi-definite
augmented system)) -> Estimate; estimate_log (logs.py) for recorded logs."""
from .plan import Estimate, EstimationPlan, SingularStateWarning, compile_estimation
from .problem import EstimationProblem
from .loading import load_estimation_plan

__all__ = ["EstimationProblem", "compile_estimation", "EstimationPlan", "Estimate",
           "SingularStateWarning", "estimate_log", "run_estimate_command", "load_estimation_plan"]


def __getattr__(name):                      # logs.py pulls in tqdm/csv only when used
    if name in ("estimate_log", "run_estimate_command"):
        from . import logs
        return getattr(logs, name)
    raise AttributeError(name)
