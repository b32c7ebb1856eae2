"""Kinematic loops by clustering (seed 003, Chignoli et al.): cluster trees over a spanning-tree
Model, the loop constraints of the common actuation sub-mechanisms, and benchmark systems."""
from .builders import (belt_chain, four_bar, geared_chain, jvrc_like, mini_cheetah, mit_humanoid,
                       mit_humanoid_leg, tello_like)
from .cluster_model import ClusterModel
from .differential import DifferentialDrive
from .submechanisms import (ClusterConstraint, FourBar, GearedMotor, ImplicitConstraint, LinearTransmission,
                            ParallelBeltTransmission, Unconstrained, explicit_from_implicit)

__all__ = ["ClusterModel", "ClusterConstraint", "Unconstrained", "LinearTransmission", "GearedMotor",
           "ParallelBeltTransmission", "ImplicitConstraint", "FourBar", "explicit_from_implicit",
           "DifferentialDrive", "geared_chain", "belt_chain", "mini_cheetah", "mit_humanoid", "mit_humanoid_leg",
           "tello_like", "jvrc_like", "four_bar"]
