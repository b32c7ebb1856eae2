"""Benchmark systems with actuation sub-mechanisms (seed 003, Sec. IX, Fig. 8), as ClusterModels.

Rotors are bodies of the spanning tree attached to the parent of the link they drive, at the
link's joint, spinning about the same axis (seed 003, Fig. 3a). All masses, lengths, gear and belt
ratios are REPRESENTATIVE values of the published robots (order of magnitude of the MIT Mini
Cheetah and MIT Humanoid), not identified parameters: use them for algorithm comparisons only.

- geared_chain(n): n revolute links, each driven by a geared rotor (clusters {link, rotor})
- belt_chain(n): n links (n even) in pairs driven by parallel belt transmissions (clusters
  {link1, rotor1, rotor2, link2}, the knee+ankle sub-mechanism)
- mini_cheetah(): free-flyer base, 4 legs x 3 geared joints (abad, hip, knee): 18 DoF, 25 bodies
- mit_humanoid(): free-flyer torso, legs with geared hip yaw/roll/pitch and a belt knee+ankle
  cluster, arms with 4 geared joints: 24 DoF, 37 bodies
- mit_humanoid_leg(): one of its legs on a fixed hip (5 DoF, 10 bodies; the accuracy test)
- four_bar(): a fixed-base planar four-bar (implicit loop closure) carrying a tail link
"""
from __future__ import annotations

import numpy as np

from ..model.joints import FreeFlyerJoint, RevoluteJoint
from ..model.model import WORLD, ModelBuilder
from .cluster_model import ClusterModel
from .submechanisms import FourBar, GearedMotor, ImplicitConstraint, ParallelBeltTransmission

_X, _Y, _Z = np.eye(3)


def _placement(xyz=(0.0, 0.0, 0.0)):
    T = np.eye(4)
    T[:3, 3] = xyz
    return T


def _rod(mass, length, axis=0):
    """Rotational inertia about the COM of a slender box of `length` along `axis`."""
    r = 0.04 * max(length, 0.05)
    I = np.full(3, mass * (3 * r * r + length * length) / 12.0)
    I[axis] = 0.5 * mass * r * r
    return np.diag(I)


def _rotor_inertia(axis, axial, radial):
    """Axisymmetric rotor about `axis` (its inertia does not change as it spins)."""
    a = np.asarray(axis, float) / np.linalg.norm(axis)
    return radial * (np.eye(3) - np.outer(a, a)) + axial * np.outer(a, a)


#: representative rotor: mass (kg), axial and radial inertia (kg m^2) (Mini-Cheetah-sized motor)
ROTOR = dict(mass=0.07, axial=6.3e-5, radial=3.3e-5)


def add_geared_joint(b, name, parent, axis, placement, mass, com, inertia, ratio, rotor=ROTOR):
    """Add link `name` and its rotor `name_rotor` (on the same parent and joint frame) and return
    the GearedMotor constraint of the pair."""
    b.add_body(name, parent, RevoluteJoint(f"{name}_joint", axis), placement=placement,
               mass=mass, com=com, inertia=inertia)
    b.add_body(f"{name}_rotor", parent, RevoluteJoint(f"{name}_rotor_joint", axis), placement=placement,
               mass=rotor["mass"], inertia=_rotor_inertia(axis, rotor["axial"], rotor["radial"]))
    return GearedMotor(name, f"{name}_rotor", ratio, name=name)


def add_belt_pair(b, name1, name2, parent, axis, placement1, placement2, link1, link2,
                  gear_ratios=(6.0, 6.0), belt_ratios=(2.0, 1.0), rotor=ROTOR):
    """Add link1 (on `parent`), both rotors (on `parent`, at link1's joint), link2 (on link1):
    the parallel-belt knee+ankle cluster. link1/link2 = dict(mass, com, inertia)."""
    b.add_body(name1, parent, RevoluteJoint(f"{name1}_joint", axis), placement=placement1, **link1)
    for r in (1, 2):
        b.add_body(f"{name1}_{name2}_rotor{r}", parent, RevoluteJoint(f"{name1}_{name2}_rotor{r}_joint", axis),
                   placement=placement1, mass=rotor["mass"],
                   inertia=_rotor_inertia(axis, rotor["axial"], rotor["radial"]))
    b.add_body(name2, name1, RevoluteJoint(f"{name2}_joint", axis), placement=placement2, **link2)
    return ParallelBeltTransmission(name1, f"{name1}_{name2}_rotor1", f"{name1}_{name2}_rotor2", name2,
                                    gear_ratios, belt_ratios, name=f"{name1}+{name2}")


_AXES = (_Z, _Y, _X)


def geared_chain(n=12, ratio=6.0, mass=1.0, length=0.3):
    """Fixed-base chain of n revolute links (axes z, y, x, z, ...), each driven by a geared rotor."""
    b = ModelBuilder(f"geared_chain{n}")
    clusters, parent = [], WORLD
    for i in range(int(n)):
        clusters.append(add_geared_joint(b, f"link{i + 1}", parent, _AXES[i % 3],
                                         _placement((0.0 if i == 0 else length, 0, 0)), mass,
                                         (length / 2, 0, 0), _rod(mass, length), ratio))
        parent = f"link{i + 1}"
    return ClusterModel(b.build(), clusters)


def belt_chain(n=12, gear_ratios=(6.0, 6.0), belt_ratios=(2.0, 1.0), mass=1.0, length=0.3):
    """Fixed-base chain of n (even) links, pairs driven by parallel belt transmissions whose two
    rotors sit on the pair's parent link."""
    if int(n) < 2 or int(n) % 2:
        raise ValueError(f"n: a belt chain needs an even number of links >= 2, got {n}")
    b = ModelBuilder(f"belt_chain{n}")
    clusters, parent = [], WORLD
    link = dict(mass=mass, com=(length / 2, 0, 0), inertia=_rod(mass, length))
    for i in range(0, int(n), 2):
        axis = _AXES[(i // 2) % 3]
        clusters.append(add_belt_pair(b, f"link{i + 1}", f"link{i + 2}", parent, axis,
                                      _placement((0.0 if i == 0 else length, 0, 0)),
                                      _placement((length, 0, 0)), link, link, gear_ratios, belt_ratios))
        parent = f"link{i + 2}"
    return ClusterModel(b.build(), clusters)


def mini_cheetah():
    """Mini-Cheetah-like quadruped (representative parameters): free-flyer body, legs FR, FL, HR,
    HL with abad (x), hip (y) and knee (y) joints, gear ratios 6, 6, 9.33; 18 DoF."""
    b = ModelBuilder("mini_cheetah")
    b.add_body("body", WORLD, FreeFlyerJoint("root"), mass=3.3, inertia=np.diag([0.0116, 0.0498, 0.0605]))
    clusters = []
    for leg, (sx, sy) in {"FR": (1, -1), "FL": (1, 1), "HR": (-1, -1), "HL": (-1, 1)}.items():
        clusters.append(add_geared_joint(b, f"{leg}_abad", "body", _X, _placement((0.19 * sx, 0.049 * sy, 0)),
                                         0.54, (0, 0.036 * sy, 0), np.diag([3.8e-4, 3.6e-4, 3.8e-4]), 6.0))
        clusters.append(add_geared_joint(b, f"{leg}_thigh", f"{leg}_abad", _Y, _placement((0, 0.062 * sy, 0)),
                                         0.634, (0, 0.016 * sy, -0.02), np.diag([1.8e-3, 2.3e-3, 5.5e-4]), 6.0))
        clusters.append(add_geared_joint(b, f"{leg}_shank", f"{leg}_thigh", _Y, _placement((0, 0, -0.209)),
                                         0.064, (0, 0, -0.061), np.diag([2.4e-4, 2.4e-4, 6e-6]), 9.33))
    return ClusterModel(b.build(), clusters)


def mit_humanoid():
    """MIT-Humanoid-like biped (representative parameters): free-flyer torso; per leg geared hip
    yaw (z), roll (x), pitch (y) and a parallel-belt knee+ankle cluster (y, y); per arm geared
    shoulder pitch (y), roll (x), yaw (z) and elbow (y); 24 DoF."""
    b = ModelBuilder("mit_humanoid")
    b.add_body("torso", WORLD, FreeFlyerJoint("root"), mass=8.5, com=(0, 0, 0.1),
               inertia=np.diag([0.17, 0.12, 0.08]))
    clusters = []
    for side, s in (("left", 1), ("right", -1)):
        clusters += _humanoid_leg(b, side, s, "torso")
        clusters.append(add_geared_joint(b, f"{side}_shoulder_pitch", "torso", _Y, _placement((0.01, 0.16 * s, 0.3)),
                                         0.5, (0, 0.03 * s, 0), _rod(0.5, 0.08, 1), 6.0))
        clusters.append(add_geared_joint(b, f"{side}_shoulder_roll", f"{side}_shoulder_pitch", _X,
                                         _placement((0, 0.06 * s, 0)), 0.6, (0, 0, -0.05), _rod(0.6, 0.1, 2), 6.0))
        clusters.append(add_geared_joint(b, f"{side}_shoulder_yaw", f"{side}_shoulder_roll", _Z,
                                         _placement((0, 0, -0.1)), 0.7, (0, 0, -0.08), _rod(0.7, 0.16, 2), 6.0))
        clusters.append(add_geared_joint(b, f"{side}_elbow", f"{side}_shoulder_yaw", _Y,
                                         _placement((0, 0, -0.16)), 0.5, (0, 0, -0.12), _rod(0.5, 0.24, 2), 6.0))
    return ClusterModel(b.build(), clusters)


def _humanoid_leg(b, side, s, parent):
    """The MIT-Humanoid-like leg on `parent` (s = +1 left, -1 right): geared hip yaw (z), roll (x),
    pitch (y), then the parallel-belt knee+ankle cluster (y, y); returns its four clusters."""
    return [add_geared_joint(b, f"{side}_hip_yaw", parent, _Z, _placement((-0.005, 0.082 * s, -0.05)),
                             0.85, (0, 0, -0.06), _rod(0.85, 0.12, 2), 6.0),
            add_geared_joint(b, f"{side}_hip_roll", f"{side}_hip_yaw", _X,
                             _placement((0, 0, -0.07)), 1.1, (0, 0, -0.03), _rod(1.1, 0.1, 0), 6.0),
            add_geared_joint(b, f"{side}_thigh", f"{side}_hip_roll", _Y, _placement((0, 0.02 * s, 0)),
                             2.1, (0, 0, -0.12), _rod(2.1, 0.26, 2), 6.0),
            add_belt_pair(b, f"{side}_shank", f"{side}_foot", f"{side}_thigh", _Y, _placement((0, 0, -0.26)),
                          _placement((0, 0, -0.26)), dict(mass=0.6, com=(0, 0, -0.13), inertia=_rod(0.6, 0.26, 2)),
                          dict(mass=0.3, com=(0.02, 0, -0.03), inertia=_rod(0.3, 0.17, 0)), (6.0, 6.0), (2.0, 1.0))]


def mit_humanoid_leg():
    """One leg of mit_humanoid() (the left one) on a fixed hip: 5 DoF, 10 bodies (seed 003,
    Sec. IX-B's accuracy test)."""
    b = ModelBuilder("mit_humanoid_leg")
    clusters = _humanoid_leg(b, "left", 1, WORLD)
    return ClusterModel(b.build(), clusters)


def four_bar(lengths=(0.1, 0.3, 0.25, 0.3), tail=True, generic=False):
    """Fixed-base planar four-bar (crank, coupler, rocker on the world; lengths lA, lB, lC, d),
    optionally with a tail link on the coupler and a geared-free link after it. generic=True
    states the same closure through the user-callable ImplicitConstraint interface."""
    lA, lB, lC, d = lengths
    b = ModelBuilder("four_bar")
    b.add_body("crank", WORLD, RevoluteJoint("crank_joint", _Z), mass=0.3, com=(lA / 2, 0, 0),
               inertia=_rod(0.3, lA) + np.diag([0, 0, 1e-4]))
    b.add_body("coupler", "crank", RevoluteJoint("coupler_joint", _Z), placement=_placement((lA, 0, 0)),
               mass=0.5, com=(lB / 2, 0.02, 0), inertia=_rod(0.5, lB))
    b.add_body("rocker", WORLD, RevoluteJoint("rocker_joint", _Z), placement=_placement((d, 0, 0)),
               mass=0.4, com=(lC / 2, 0, 0.01), inertia=_rod(0.4, lC))
    if tail:
        b.add_body("tail", "coupler", RevoluteJoint("tail_joint", _X), placement=_placement((lB / 2, 0, 0)),
                   mass=0.2, com=(0, 0.05, 0), inertia=_rod(0.2, 0.1, 1))
    model = b.build()
    # assembly mode: coupler up, rocker near vertical, found by solving the closure at y = 0
    fb = FourBar("crank", "coupler", "rocker", lengths, z_guess=(1.2, 1.9), name="four_bar")
    if generic:
        fb = ImplicitConstraint("four_bar", fb.links, [0], fb._phi, fb._K, fb._k, fb.z_guess)
    return ClusterModel(model, [fb])


__all__ = ["geared_chain", "belt_chain", "mini_cheetah", "mit_humanoid", "mit_humanoid_leg", "four_bar",
           "add_geared_joint", "add_belt_pair", "ROTOR"]
