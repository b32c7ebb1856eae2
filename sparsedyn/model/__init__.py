"""Robot models: the read-only Model, joint models, URDF loading."""
from .joints import (FreeFlyerJoint, HelicalJoint, Joint, PlanarJoint, PrismaticJoint,
                     RevoluteJoint, SphericalJoint, make_joint)
from .model import GRAVITY, WORLD, Frame, Model, ModelBuilder
from .urdf import load_urdf

__all__ = ["Model", "ModelBuilder", "Frame", "WORLD", "GRAVITY", "Joint", "RevoluteJoint",
           "HelicalJoint", "PrismaticJoint", "SphericalJoint", "PlanarJoint", "FreeFlyerJoint", "make_joint",
           "load_urdf"]
