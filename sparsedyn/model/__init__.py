"""Robot models: the read-only Model, joint models, URDF / MJCF / Pinocchio loading."""
from .joints import (FreeFlyerJoint, HelicalJoint, Joint, PlanarJoint, PrismaticJoint,
                     RevoluteJoint, SphericalJoint, make_joint)
from .mjcf import MujocoUnavailableError, from_mujoco, load_mjcf
from .model import GRAVITY, WORLD, Frame, Model, ModelBuilder
from .mujoco_state import (from_mujoco_a, from_mujoco_q, from_mujoco_tau, from_mujoco_v,
                           to_mujoco_a, to_mujoco_q, to_mujoco_tau, to_mujoco_v)
from .pinocchio_io import from_pinocchio, from_pinocchio_q, to_pinocchio_q
from .urdf import load_urdf

__all__ = ["Model", "ModelBuilder", "Frame", "WORLD", "GRAVITY", "Joint", "RevoluteJoint",
           "HelicalJoint", "PrismaticJoint", "SphericalJoint", "PlanarJoint", "FreeFlyerJoint", "make_joint",
           "load_urdf", "load_mjcf", "from_mujoco", "MujocoUnavailableError", "from_pinocchio",
           "to_pinocchio_q", "from_pinocchio_q", "from_mujoco_q", "to_mujoco_q", "from_mujoco_v",
           "to_mujoco_v", "from_mujoco_a", "to_mujoco_a", "from_mujoco_tau", "to_mujoco_tau"]
