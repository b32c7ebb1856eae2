"""sparsedyn: rigid-body dynamics as permuted sparse linear algebra (Nori's framework), with the
classical recursive algorithms as first-class baselines.

Conventions (Pinocchio's): joint order as pinocchio.buildModelFromUrdf, free-flyer root
q = [p, quaternion x y z w], v = [linear, angular] local; one coordinate per revolute, continuous
or prismatic joint; public spatial vectors linear-first in link-local frames; every function that
takes a state takes a batch (B, nq) or a single (nq,).
"""
from .errors import IllPosedError, ModelError, PlanMismatchError, SingularModelError, SparsedynError
from .kinematics import forward_kinematics, frame_jacobian
from .model import Model, ModelBuilder, load_urdf
from .opcount import OpCount, count_operations
from .recursive import aba, crba, rnea

__version__ = "0.1.0"

__all__ = [
    "Model", "ModelBuilder", "load_urdf", "forward_kinematics", "frame_jacobian",
    "rnea", "aba", "crba", "count_operations", "OpCount",
    "SparsedynError", "ModelError", "SingularModelError", "IllPosedError", "PlanMismatchError",
]
