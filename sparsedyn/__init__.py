"""sparsedyn: rigid-body dynamics as permuted sparse linear algebra (Nori's framework), with the
classical recursive algorithms as first-class baselines.

Conventions (Pinocchio's): joint order as pinocchio.buildModelFromUrdf, free-flyer root
q = [p, quaternion x y z w], v = [linear, angular] local; one coordinate per revolute, continuous
or prismatic joint; public spatial vectors linear-first in link-local frames; every function that
takes a state takes a batch (B, nq) or a single (nq,).
"""
from .contacts import Contact, contact_jacobian
from .delassus import delassus
from .delassus_solver import delassus_solver
from . import models, sensors
from .estimation import EstimationProblem, compile_estimation, load_estimation_plan
from .errors import (IllPosedError, ModelError, ModelWarning, NonFiniteError, PlanMismatchError,
                     SensorError, SingularModelError, SingularStateWarning, SparsedynError)
from .kinematics import (center_of_mass, centroidal_map, com_jacobian, forward_kinematics,
                         frame_jacobian)
from .loops import ClusterModel
from .model import (Model, ModelBuilder, MujocoUnavailableError, from_mujoco, from_mujoco_a,
                    from_mujoco_q, from_mujoco_tau, from_mujoco_v, from_pinocchio,
                    from_pinocchio_q, load_mjcf, load_urdf, to_mujoco_a, to_mujoco_q,
                    to_mujoco_tau, to_mujoco_v, to_pinocchio_q)
from .kernels.cholesky import SparseCholesky
from .jit import wait as wait_for_kernels
from .opcount import OpCount, count_operations
from .planner import Factorization, PivotBreakdownWarning, plan_factorization
from .problems import (Plan, aba_derivatives, compile, crba, forward_dynamics,
                       inverse_dynamics, load_plan, loop_forward_dynamics, loop_inverse_dynamics,
                       mass_matrix, rnea_derivatives)
from .constrained import RedundantContactsWarning, constrained_forward_dynamics
from .recursive import aba, rnea
from .recursive.cluster import (c_aba, c_efpa, c_rnea, lagrange_fd, projected_rnea, projection_fd)
from .recursive.ltl import ltdl, ltl
from .recursive.yamane import yamane_forward_dynamics
from .recursive.yamane_closed import CutJoint, closed_chain_forward_dynamics

__version__ = "0.1.0"

__all__ = [
    "Model", "ModelBuilder", "load_urdf", "forward_kinematics", "frame_jacobian",
    "center_of_mass", "com_jacobian", "centroidal_map",
    "load_mjcf", "from_mujoco", "from_pinocchio", "to_pinocchio_q", "from_pinocchio_q",
    "from_mujoco_q", "to_mujoco_q", "from_mujoco_v", "to_mujoco_v", "from_mujoco_a", "to_mujoco_a",
    "from_mujoco_tau", "to_mujoco_tau", "MujocoUnavailableError",
    "rnea", "aba", "crba", "count_operations", "OpCount", "rnea_derivatives", "aba_derivatives",
    "inverse_dynamics", "forward_dynamics", "mass_matrix", "compile", "load_plan", "Plan",
    "plan_factorization", "Factorization", "PivotBreakdownWarning", "SparseCholesky",
    "EstimationProblem", "compile_estimation", "load_estimation_plan", "estimate_log", "sensors",
    "models", "wait_for_kernels",
    "Contact", "contact_jacobian", "delassus", "delassus_solver", "ltl", "ltdl", "constrained_forward_dynamics",
    "RedundantContactsWarning",
    "ClusterModel", "loop_forward_dynamics", "loop_inverse_dynamics", "c_rnea", "c_aba", "c_efpa", "projected_rnea", "projection_fd", "lagrange_fd",
    "yamane_forward_dynamics", "CutJoint", "closed_chain_forward_dynamics",
    "SparsedynError", "ModelError", "SingularModelError", "IllPosedError", "PlanMismatchError",
    "SensorError", "NonFiniteError", "ModelWarning", "PivotBreakdownWarning", "SingularStateWarning",
]


def __getattr__(name):                      # estimate_log's module pulls in its readers on use
    if name == "estimate_log":
        from .estimation import estimate_log
        return estimate_log
    raise AttributeError(f"module 'sparsedyn' has no attribute {name!r}")
