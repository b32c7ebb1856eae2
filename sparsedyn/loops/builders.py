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
- tello_like(): free-flyer torso, legs with a geared hip yaw and two differential-drive clusters
  (hip: gimbal + thigh; knee + ankle), MIT-Humanoid-like arms: 24 DoF, 37 bodies
- jvrc_like(): JVRC-1-like humanoid, every joint geared: 38 DoF, 65 bodies
- four_bar(): a fixed-base planar four-bar (implicit loop closure) carrying a tail link
"""
from __future__ import annotations

import numpy as np

from ..model.joints import FreeFlyerJoint, RevoluteJoint
from ..model.model import WORLD, ModelBuilder
from .cluster_model import ClusterModel
from .differential import DifferentialDrive
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
        clusters += _mit_arm(b, side, s, "torso")
    return ClusterModel(b.build(), clusters)


def _mit_arm(b, side, s, parent):
    """MIT-Humanoid-like arm: geared shoulder pitch (y), roll (x), yaw (z) and elbow (y)."""
    return [add_geared_joint(b, f"{side}_shoulder_pitch", parent, _Y, _placement((0.01, 0.16 * s, 0.3)),
                             0.5, (0, 0.03 * s, 0), _rod(0.5, 0.08, 1), 6.0),
            add_geared_joint(b, f"{side}_shoulder_roll", f"{side}_shoulder_pitch", _X,
                             _placement((0, 0.06 * s, 0)), 0.6, (0, 0, -0.05), _rod(0.6, 0.1, 2), 6.0),
            add_geared_joint(b, f"{side}_shoulder_yaw", f"{side}_shoulder_roll", _Z,
                             _placement((0, 0, -0.1)), 0.7, (0, 0, -0.08), _rod(0.7, 0.16, 2), 6.0),
            add_geared_joint(b, f"{side}_elbow", f"{side}_shoulder_yaw", _Y,
                             _placement((0, 0, -0.16)), 0.5, (0, 0, -0.12), _rod(0.5, 0.24, 2), 6.0)]


def add_differential(b, name1, name2, parent, axis1, axis2, rotor_offsets, placement1, placement2,
                     link1, link2, ratio=6.0, rotor=ROTOR):
    """Add both rotors (on `parent`, spinning about z at `rotor_offsets`), link1 (on `parent`) and
    link2 (on link1): the differential-drive cluster of the Tello leg. link1/link2 = dict(mass,
    com, inertia)."""
    rotors = []
    for r, offset in enumerate(rotor_offsets, 1):
        rotors.append(f"{name1}_{name2}_rotor{r}")
        b.add_body(rotors[-1], parent, RevoluteJoint(f"{rotors[-1]}_joint", _Z), placement=_placement(offset),
                   mass=rotor["mass"], inertia=_rotor_inertia(_Z, rotor["axial"], rotor["radial"]))
    b.add_body(name1, parent, RevoluteJoint(f"{name1}_joint", axis1), placement=placement1, **link1)
    b.add_body(name2, name1, RevoluteJoint(f"{name2}_joint", axis2), placement=placement2, **link2)
    return DifferentialDrive(*rotors, name1, name2, ratio, name=f"{name1}+{name2}")


def tello_like():
    """Tello-like biped with arms (seed 003, Fig. 1b and 8b; 24 DoF, 37 bodies): free-flyer torso;
    per leg a geared hip yaw ("hip clamp", z), a hip differential (gimbal roll x, thigh pitch y)
    and a knee-ankle differential (shin y, foot y), both DifferentialDrive clusters of two rotors
    and two links; per arm the MIT-Humanoid-like geared shoulder pitch, roll, yaw and elbow (the
    benchmark's Tello-with-arms). Representative values, rounded from the authors' published
    Tello model (generalized_rbda, Tello.hpp): masses torso 2.30, hip clamp 1.33, gimbal 0.44,
    thigh 1.54, shin 0.31, foot 0.10, rotor 0.07 kg; gear ratio 6; hip clamp at (0, +-0.126,
    -0.087) m on the torso, gimbal 0.1425 m below the clamp, knee 0.2268 m below the hip, ankle
    0.26 m below the knee, hip rotors +-0.04 m and knee-ankle rotors +-0.0266 m beside their
    joint. The differentials' crank-rocker lengths are DifferentialDrive's defaults (not Tello's
    linkage geometry, which the paper does not give)."""
    b = ModelBuilder("tello_like")
    b.add_body("torso", WORLD, FreeFlyerJoint("root"), mass=2.30, com=(0.007, 0, 0),
               inertia=np.diag([0.037, 0.014, 0.029]))
    clusters = []
    for side, s in (("left", 1), ("right", -1)):
        clusters.append(add_geared_joint(b, f"{side}_hip_clamp", "torso", _Z, _placement((0, 0.126 * s, -0.087)),
                                         1.33, (0, 0, -0.007), np.diag([0.0032, 0.0033, 0.0027]), 6.0))
        clusters.append(add_differential(
            b, f"{side}_gimbal", f"{side}_thigh", f"{side}_hip_clamp", _X, _Y, ((0, 0.04, 0), (0, -0.04, 0)),
            _placement((0, 0, -0.1425)), _placement(),
            dict(mass=0.44, com=(-0.003, 0, 0.026), inertia=np.diag([0.0018, 0.0017, 0.0015])),
            dict(mass=1.54, com=(0.003, 0, -0.032), inertia=np.diag([0.0103, 0.0097, 0.0027]))))
        clusters.append(add_differential(
            b, f"{side}_shin", f"{side}_foot", f"{side}_thigh", _Y, _Y, ((0, 0.0266, 0), (0, -0.0266, 0)),
            _placement((0, 0, -0.2268)), _placement((0, 0, -0.26)),
            dict(mass=0.31, com=(0.005, 0, -0.104), inertia=np.diag([0.0054, 0.0054, 0.0001])),
            dict(mass=0.10, com=(0.004, 0, -0.025), inertia=np.diag([9.4e-5, 1.8e-4, 9.0e-5]))))
    for side, s in (("left", 1), ("right", -1)):
        clusters += _mit_arm(b, side, s, "torso")
    return ClusterModel(b.build(), clusters)


# JVRC-1 (seed 003, Fig. 8d, "modified so all its joints are actuated with geared transmissions"):
# (name, parent, axis, offset from the parent's joint, mass, com, principal inertia), rounded from
# the JVRC-1 description as used by the authors' benchmark (generalized_rbda, JVRC1_Humanoid.hpp)
_JVRC_TRUNK = [("waist_y", "pelvis", _Z, (0, 0, 0.192), 1.0, (0, 0, -0.07), (0.0017, 0.0017, 0.0032)),
               ("waist_p", "waist_y", _Y, (0, 0, 0), 1.0, (0, 0, 0), (0.0024, 0.0024, 0.0024)),
               ("waist_r", "waist_p", _X, (0, 0, 0), 10.0, (0.02, 0, 0.24), (0.157, 0.101, 0.137)),
               ("neck_y", "waist_r", _Z, (-0.003, 0, 0.453), 0.5, (0, 0, -0.05), (7.3e-4, 7.3e-4, 6.3e-4)),
               ("neck_r", "neck_y", _X, (0, 0, 0), 0.5, (0, 0, 0), (5e-4, 5e-4, 5e-4)),
               ("neck_p", "neck_r", _Y, (0, 0, 0), 2.0, (0.01, 0, 0.11), (0.0097, 0.0097, 0.0097))]
_JVRC_ARM = [("shoulder_p", "waist_r", _Y, (0, 0.24, 0.33), 1.0, (0, 0, 0), (0.002, 0.002, 0.002)),
             ("shoulder_r", "shoulder_p", _X, (0, 0, 0), 1.0, (0, 0, 0), (0.002, 0.002, 0.002)),
             ("shoulder_y", "shoulder_r", _Z, (0, 0, 0), 2.0, (-0.01, 0, -0.19), (0.0137, 0.0146, 0.0064)),
             ("elbow_p", "shoulder_y", _Y, (0.004, 0, -0.305), 1.0, (-0.02, 0, -0.1), (0.0107, 0.0107, 0.0027)),
             ("elbow_y", "elbow_p", _Z, (-0.004, 0, -0.239), 1.0, (0, 0, 0), (6.4e-4, 6.4e-4, 6.4e-4)),
             ("wrist_r", "elbow_y", _X, (0, 0, 0), 0.5, (0, 0, 0), (3.2e-4, 3.2e-4, 3.2e-4)),
             ("wrist_y", "wrist_r", _Z, (0, 0, 0), 0.5, (0, 0.01, -0.06), (4.6e-4, 7.6e-4, 4.6e-4))]
_JVRC_LEG = [("hip_p", "pelvis", _Y, (0, 0.096, 0), 1.0, (0, 0, 0), (0.002, 0.002, 0.002)),
             ("hip_r", "hip_p", _X, (0, 0, 0), 1.0, (0, 0, 0), (0.002, 0.002, 0.002)),
             ("hip_y", "hip_r", _Z, (0, 0, 0), 3.0, (0.01, 0, -0.22), (0.0319, 0.0345, 0.0087)),
             ("knee", "hip_y", _Y, (-0.02, 0, -0.389), 3.0, (0.04, 0, -0.16), (0.0319, 0.0345, 0.0087)),
             ("ankle_r", "knee", _X, (0.04, 0, -0.357), 1.0, (0, 0, 0), (6.4e-4, 6.4e-4, 6.4e-4)),
             ("ankle_p", "ankle_r", _Y, (0, 0, 0), 1.5, (0.03, 0, -0.07), (0.0014, 0.0056, 0.0062))]


def jvrc_like(ratio=6.0):
    """JVRC-1-like humanoid with every joint geared (seed 003's modified JVRC-1: 38 DoF, 65
    bodies): free-flyer pelvis (10 kg); waist yaw, pitch, roll; neck yaw, roll, pitch on the chest
    (waist roll); arms shoulder pitch, roll, yaw, elbow pitch, yaw, wrist roll, yaw; legs hip
    pitch, roll, yaw, knee, ankle roll, pitch. Each joint is a GearedMotor cluster {link, rotor}
    with ratio 6 and this module's representative rotor. Links named as the joints, prefixed
    left_ / right_ on the limbs (feet: {side}_ankle_p)."""
    b = ModelBuilder("jvrc_like")
    b.add_body("pelvis", WORLD, FreeFlyerJoint("root"), mass=10.0, com=(-0.01, 0, 0.034),
               inertia=np.diag([0.0896, 0.0896, 0.1125]))
    limbs = [("", 1, _JVRC_TRUNK)] + [(f"{side}_", s, _JVRC_ARM) for side, s in (("left", 1), ("right", -1))] \
        + [(f"{side}_", s, _JVRC_LEG) for side, s in (("left", 1), ("right", -1))]
    clusters = []
    for prefix, s, joints in limbs:
        for name, parent, axis, offset, mass, com, inertia in joints:
            parent = parent if parent in ("pelvis", "waist_r") else prefix + parent
            mirror = np.array([1.0, s, 1.0])
            clusters.append(add_geared_joint(b, prefix + name, parent, axis, _placement(mirror * offset), mass,
                                             mirror * com, np.diag(inertia), ratio))
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


__all__ = ["geared_chain", "belt_chain", "mini_cheetah", "mit_humanoid", "mit_humanoid_leg", "tello_like",
           "jvrc_like", "four_bar", "add_differential",
           "add_geared_joint", "add_belt_pair", "ROTOR"]
