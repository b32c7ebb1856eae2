"""Model builders: the benchmark topologies of the seeds and the robots shipped with the package.

- serial_chain(n): revolute chain (Nori's Fig. 1 and 2, the PV-OSIMr every-link chain)
- branched_tree(stem, branches_per_side, branch_length=7): the PV-OSIMr scaling study's stem with
  k seven-link branches per side at its tip
- random_tree(n_bodies, seed): random topology, random joint types and inertias
- humanoid(floating_base=True): the embedded 43-DoF humanoid (legs with feet and F/T sensors,
  torso, arms with three-fingered hands, head with an IMU), package data
- hand(): the embedded 24-DoF five-finger hand, package data
- asimo_like(...), asimo_like_on_one_foot(), atlas_like(): representative humanoids of the
  Delassus studies (seed 002's ASIMO and its Fig. 6 variants, seed 000's Atlas), humanoids.py
"""
from __future__ import annotations

import os

import numpy as np

from ..model.joints import PrismaticJoint, RevoluteJoint, SphericalJoint
from ..model.model import WORLD, ModelBuilder
from ..model.urdf import load_urdf
from .humanoids import asimo_like, asimo_like_on_one_foot, atlas_like

DATA_DIR = os.path.join(os.path.dirname(__file__), "data")
HUMANOID_URDF = os.path.join(DATA_DIR, "humanoid.urdf")
HAND_URDF = os.path.join(DATA_DIR, "hand.urdf")


def humanoid(floating_base=True):
    """The embedded humanoid (43 DoF + free-flyer; feet `l_sole`/`r_sole`, F/T joints
    `l_foot_ft_sensor` ..., fingertips `l_index_tip` ...)."""
    return load_urdf(HUMANOID_URDF, floating_base=floating_base)


def hand():
    """The embedded five-finger hand (24 DoF, tips `thumb_tip` ... `little_tip`)."""
    return load_urdf(HAND_URDF)


def _link_placement(length):
    T = np.eye(4)
    T[:3, 3] = (length, 0.0, 0.0)
    return T


def _rod_inertia(mass, length):
    """Slender box of `length` along x (COM at its middle), radius 0.05 * length."""
    r = 0.05 * max(length, 1e-3)
    ixx = 0.5 * mass * r * r
    iyy = izz = mass * (3 * r * r + length * length) / 12.0
    return np.diag([ixx, iyy, izz])


_AXES = ([0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0])


def serial_chain(n, mass=1.0, length=0.3, axes="alternate", name=None):
    """Chain of n revolute links. axes="z": all about z (planar); "alternate": z, y, x, z, ..."""
    if int(n) < 1:
        raise ValueError(f"n: a chain needs at least one link, got {n}")
    b = ModelBuilder(name or f"chain{n}")
    parent = WORLD
    for i in range(int(n)):
        axis = _AXES[0] if axes == "z" else _AXES[i % 3]
        parent = b.add_body(f"link{i + 1}", parent, RevoluteJoint(f"joint{i + 1}", axis),
                            placement=_link_placement(0.0 if i == 0 else length),
                            mass=mass, com=(length / 2, 0, 0), inertia=_rod_inertia(mass, length))
    return b.build()


def branched_tree(stem, branches_per_side, branch_length=7, mass=1.0, length=0.2, name=None):
    """PV-OSIMr scaling topology: a revolute stem of `stem` links (0 allowed: the branches start at
    the base) and, at its tip, `branches_per_side` branches of `branch_length` links on each of two
    sides. Tip links are named `left{k}_tip` / `right{k}_tip` (k = 1..branches_per_side)."""
    b = ModelBuilder(name or f"tree_s{stem}_b{branches_per_side}")
    parent = WORLD
    for i in range(int(stem)):
        parent = b.add_body(f"stem{i + 1}", parent, RevoluteJoint(f"stem_joint{i + 1}", _AXES[i % 3]),
                            placement=_link_placement(0.0 if i == 0 else length),
                            mass=mass, com=(length / 2, 0, 0), inertia=_rod_inertia(mass, length))
    for side, sign in (("left", 1.0), ("right", -1.0)):
        for k in range(int(branches_per_side)):
            angle = sign * np.pi * (k + 1) / (2 * branches_per_side + 2)
            p = parent
            for i in range(int(branch_length)):
                T = np.eye(4)
                if i == 0:
                    T[:3, :3] = [[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]]
                    T[:3, 3] = (length if stem else 0.0, 0.0, 0.0)
                else:
                    T[:3, 3] = (length, 0.0, 0.0)
                last = i == branch_length - 1
                lname = f"{side}{k + 1}_tip" if last else f"{side}{k + 1}_link{i + 1}"
                p = b.add_body(lname, p, RevoluteJoint(f"{side}{k + 1}_joint{i + 1}", _AXES[(i + 1) % 3]),
                               placement=T, mass=mass, com=(length / 2, 0, 0),
                               inertia=_rod_inertia(mass, length))
    return b.build()


def random_tree(n_bodies, seed=0, joint_types=("revolute", "prismatic"), name=None):
    """Random tree: parent(i) uniform in [WORLD, i-1], random axes, placements, masses, COMs and
    positive-definite inertias. joint_types may include "spherical" (multi-DoF)."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder(name or f"random{n_bodies}_{seed}")
    for i in range(int(n_bodies)):
        parent = int(rng.integers(-1, i)) if i else WORLD
        kind = joint_types[int(rng.integers(len(joint_types)))]
        axis = rng.normal(size=3)
        joint = {"revolute": RevoluteJoint, "prismatic": PrismaticJoint}.get(kind)
        joint = joint(f"joint{i + 1}", axis) if joint else SphericalJoint(f"joint{i + 1}")
        T = np.eye(4)
        T[:3, :3] = np.linalg.qr(rng.normal(size=(3, 3)))[0]
        if np.linalg.det(T[:3, :3]) < 0:
            T[:3, 0] *= -1
        T[:3, 3] = rng.uniform(-0.5, 0.5, size=3)
        A = rng.normal(size=(3, 3))
        principal = rng.uniform(0.01, 0.1, size=3)
        principal[2] = min(principal[2], principal[0] + principal[1])  # triangle inequality
        Q = np.linalg.qr(A)[0]
        b.add_body(f"link{i + 1}", parent, joint, placement=T, mass=rng.uniform(0.5, 3.0),
                   com=rng.uniform(-0.2, 0.2, size=3), inertia=Q @ np.diag(principal) @ Q.T)
    return b.build()


__all__ = ["humanoid", "hand", "asimo_like", "asimo_like_on_one_foot", "atlas_like", "serial_chain", "branched_tree", "random_tree",
           "HUMANOID_URDF", "HAND_URDF", "DATA_DIR"]
