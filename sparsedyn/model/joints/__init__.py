"""Joint types (the protocol: base.py), one module each; every Joint subclass defined in a module
of this package is registered under its KINDS, so adding a joint type is adding a file."""
from __future__ import annotations

import importlib
import pkgutil

from ...errors import ModelError
from .base import Joint


def _discover():
    """{kind name: class} of the Joint subclasses of this package's modules."""
    types = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for obj in vars(module).values():
            if isinstance(obj, type) and issubclass(obj, Joint) and obj.__module__ == module.__name__:
                for kind in obj.KINDS:
                    if kind in types and types[kind] is not obj:
                        raise ImportError(f"joint kind {kind!r} is claimed by "
                                          f"{types[kind].__name__} and {obj.__name__}")
                    types[kind] = obj
    return types


JOINT_TYPES = _discover()
FreeFlyerJoint = JOINT_TYPES["free"]
HelicalJoint = JOINT_TYPES["helical"]
PlanarJoint = JOINT_TYPES["planar"]
PrismaticJoint = JOINT_TYPES["prismatic"]
RevoluteJoint = JOINT_TYPES["revolute"]
SphericalJoint = JOINT_TYPES["spherical"]


def make_joint(kind, name, axis=None):
    """Instantiate a movable joint by URDF/Python type name; unknown types raise ModelError."""
    try:
        cls = JOINT_TYPES[kind]
    except KeyError:
        raise ModelError(f"joint {name!r}: unknown joint type {kind!r} "
                         f"(known: {', '.join(sorted(JOINT_TYPES))}, fixed)") from None
    return cls.make(name, axis, kind=kind)


__all__ = ["Joint", "JOINT_TYPES", "make_joint", "FreeFlyerJoint", "HelicalJoint", "PlanarJoint",
           "PrismaticJoint", "RevoluteJoint", "SphericalJoint"]
