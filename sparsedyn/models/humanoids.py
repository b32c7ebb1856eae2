"""Representative humanoids of the Delassus studies: an ASIMO-like humanoid (seed 002, EFPA, Sec.
V-C: N = 35 bodies, floating base, revolute joints; Fig. 4 connectivity; Fig. 6 variants) and an
Atlas-like humanoid (seed 000, PV-OSIMr, Sec. IV-C/D: floating base at the hip link, three back
joints from the sternum to it, nv = 36 so that one / two 24-DoF hands give the paper's 60 / 84).

REPRESENTATIVE parameters, not identified ones (use them for algorithm comparisons only):
- total mass M and height H: ASIMO 54 kg, 1.30 m (Honda's published specification of the 2005
  ASIMO, the 34-DoF model: head 3, arms 2 x 7, hands 2 x 2, waist 1, legs 2 x 6); Atlas 150 kg,
  1.88 m (Boston Dynamics' DRC Atlas specification; joints as in its published model: back
  bkz/bky/bkx, neck ry, arms 2 x 7, legs 2 x 6).
- segment masses and lengths: Winter's anthropometric fractions of M and H (D. A. Winter,
  Biomechanics and Motor Control of Human Movement, Table 4.1 and Fig. 4.1): head 0.081 M /
  0.13 H, thorax + abdomen 0.355 M / 0.288 H (shoulder to hip), pelvis 0.142 M, upper arm 0.028 M / 0.186 H, forearm 0.016 M / 0.146 H, hand 0.006 M /
  0.108 H, thigh 0.100 M / 0.245 H, shank 0.0465 M / 0.246 H, foot 0.0145 M / 0.152 H long,
  0.039 H high; shoulder width 0.259 H, hip width 0.191 H.
- our own choices: the pelvis 0.10 H long; a link that carries a joint but no segment (hip yaw,
  wrist yaw, ...) weighs 0.01 M; a finger link 0.002 M and 0.03 H long.
The topology of the ASIMO-like model is the one that gives EFPA's quoted sparsity: 56% zeros in H
and 67% in the hands-and-feet Jacobian, 73% zeros in H with two more arms and legs (the floating
base is the torso; the waist joint carries the pelvis). Geometry and masses do not change any
operation count; they only keep the dynamics plausible.
"""
from __future__ import annotations

import numpy as np

from ..model.joints import FreeFlyerJoint, RevoluteJoint
from ..model.model import WORLD, ModelBuilder

_X, _Y, _Z = np.eye(3)
# Winter's Table 4.1: (mass fraction of M, length fraction of H)
SEGMENTS = {"head": (0.081, 0.13), "torso": (0.355, 0.288), "pelvis": (0.142, 0.10),
            "upper_arm": (0.028, 0.186), "forearm": (0.016, 0.146), "hand": (0.006, 0.108),
            "thigh": (0.100, 0.245), "shank": (0.0465, 0.246), "foot": (0.0145, 0.039)}
JOINT_LINK, FINGER_MASS, FINGER_LENGTH = 0.01, 0.002, 0.03


def _T(xyz=(0.0, 0.0, 0.0)):
    T = np.eye(4)
    T[:3, 3] = xyz
    return T


def _rod(mass, length):
    """Rotational inertia about the COM of a slender cylinder along z (radius 0.15 length)."""
    r = 0.15 * max(abs(length), 0.05)
    side = mass * (3 * r * r + length * length) / 12.0
    return np.diag([side, side, 0.5 * mass * r * r])


def _link(b, name, parent, axis, offset, mass, length, joint=None):
    """A revolute body whose mass lies along z from its joint (default `name`_joint) over `length`
    (negative: downwards)."""
    return b.add_body(name, parent, RevoluteJoint(joint or f"{name}_joint", axis), placement=_T(offset),
                      mass=mass, com=(0.0, 0.0, length / 2), inertia=_rod(mass, length))


def _limb(b, prefix, parent, offset, joints, M, H, sign=-1.0):
    """A serial limb on `parent`, first joint at `offset`: joints = [(name, axis, segment or
    None)], bodies named prefix + name. A segment body carries Winter's mass and length along z
    (sign -1: hanging down) and the next joint sits at its end; a joint-only link weighs 0.01 M.
    Returns the last body's name and its segment length."""
    at, length = offset, 0.0
    for name, axis, seg in joints:
        frac, lf = SEGMENTS[seg] if seg else (JOINT_LINK, 0.0)
        length = lf * H
        _link(b, prefix + name, parent, axis, at, frac * M, sign * length)
        parent, at = prefix + name, (0.0, 0.0, sign * length)
    return parent, length


def _fingers(b, side, hand, names, joints_per_finger, M, H):
    """Fingers of `joints_per_finger` revolute joints (the first about x, the others about y) on
    the hand body, spread across its palm; tip frames `{side}_{finger}_tip`."""
    hand_length = SEGMENTS["hand"][1] * H
    for f, finger in enumerate(names):
        parent, length = hand, FINGER_LENGTH * H
        at = (0.0, 0.02 * H * (f - (len(names) - 1) / 2), -hand_length)
        for j in range(joints_per_finger):
            name = f"{side}_{finger}{j + 1}"
            _link(b, name, parent, _X if j == 0 else _Y, at, FINGER_MASS * M, -length)
            parent, at = name, (0.0, 0.0, -length)
        b.add_frame(f"{side}_{finger}_tip", b._index(parent), _T(at))


ASIMO_ARM = [("shoulder_pitch", _Y, None), ("shoulder_roll", _X, None), ("shoulder_yaw", _Z, "upper_arm"),
             ("elbow", _Y, "forearm"), ("wrist_yaw", _Z, None), ("wrist_pitch", _Y, None),
             ("wrist_roll", _X, "hand")]
ASIMO_LEG = [("hip_yaw", _Z, None), ("hip_roll", _X, None), ("hip_pitch", _Y, "thigh"), ("knee", _Y, "shank"),
             ("ankle_pitch", _Y, None), ("ankle_roll", _X, "foot")]
HANDS = {"two-finger": (("thumb", "forefinger"), 1), "four-finger": (("thumb", "forefinger", "middle", "ring"), 3)}
ASIMO_M, ASIMO_H = 54.0, 1.30


def _extra(joints, after, n, name):
    """`joints` with n extra joint-only links (axes z, x, y, ...) inserted after joint `after`."""
    k = [j[0] for j in joints].index(after) + 1
    extra = [(f"{name}{i + 1}", (_Z, _X, _Y)[i % 3], None) for i in range(n)]
    return joints[:k] + extra + joints[k:]


def _asimo_arm(b, side, torso, M, H, arm, hand, y_shift=0.0):
    s = 1.0 if side.startswith("l") else -1.0
    shoulder = (0.0, s * 0.129 * H, 0.10 * H - y_shift)
    wrist, _ = _limb(b, f"{side}_", torso, shoulder, arm, M, H)
    b.add_frame(f"{side}_hand", b._index(wrist), _T((0.0, 0.0, -0.5 * SEGMENTS["hand"][1] * H)))
    names, per = HANDS[hand]
    _fingers(b, side, wrist, names, per, M, H)


def _asimo_leg(b, side, pelvis, M, H, leg, x_shift=0.0):
    s = 1.0 if side.startswith("l") else -1.0
    ankle, foot_height = _limb(b, f"{side}_", pelvis, (x_shift, s * 0.0955 * H, -0.05 * H), leg, M, H)
    b.add_frame(f"{side}_sole", b._index(ankle), _T((0.0, 0.0, -foot_height)))


def _asimo_head(b, torso, M, H):
    neck = [("neck_yaw", _Z, None), ("neck_pitch", _Y, None), ("neck_roll", _X, "head")]
    head, length = _limb(b, "", torso, (0.0, 0.0, 0.144 * H), neck, M, H, sign=1.0)
    b.add_frame("head", b._index(head), _T((0.0, 0.0, length / 2)))


def asimo_like(arm_dof=7, leg_dof=6, hand="two-finger", extra_limb_pairs=0):
    """ASIMO-like humanoid (seed 002's benchmark, Fig. 4): free-flyer torso; head on neck yaw,
    pitch, roll; arms of 7 joints (shoulder pitch, roll, yaw, elbow, wrist yaw, pitch, roll) with a
    one-joint thumb and forefinger on each hand; a waist yaw joint carrying the pelvis; legs of 6
    joints (hip yaw, roll, pitch, knee, ankle pitch, roll). 35 bodies, nv = 40.

    Fig. 6 variants: arm_dof / leg_dof > 7 / 6 insert joint-only links after the elbow / knee;
    hand="four-finger": four fingers of 3 joints (12-DoF hands); extra_limb_pairs adds that many
    pairs of arms (on the torso, below the first) and legs (on the pelvis, behind the first),
    named l2_ / r2_, .... Frames: head, {side}_hand, {side}_sole, {side}_{finger}_tip."""
    if arm_dof < 7 or leg_dof < 6 or hand not in HANDS or extra_limb_pairs < 0:
        raise ValueError(f"asimo_like: arm_dof >= 7, leg_dof >= 6, hand in {sorted(HANDS)}, "
                         f"extra_limb_pairs >= 0 (got {arm_dof}, {leg_dof}, {hand!r}, {extra_limb_pairs})")
    M, H = ASIMO_M, ASIMO_H
    arm = _extra(ASIMO_ARM, "elbow", arm_dof - 7, "forearm_twist")
    leg = _extra(ASIMO_LEG, "knee", leg_dof - 6, "shank_twist")
    b = ModelBuilder("asimo_like")
    frac, length = SEGMENTS["torso"]
    b.add_body("torso", WORLD, FreeFlyerJoint("root"), mass=frac * M, inertia=_rod(frac * M, length * H))
    _asimo_head(b, "torso", M, H)
    sides = [("l", "r")] + [(f"l{k + 2}", f"r{k + 2}") for k in range(extra_limb_pairs)]
    for k, pair in enumerate(sides):
        for side in pair:
            _asimo_arm(b, side, "torso", M, H, arm, hand, y_shift=0.05 * H * k)
    _link(b, "pelvis", "torso", _Z, (0.0, 0.0, -0.144 * H), SEGMENTS["pelvis"][0] * M, -SEGMENTS["pelvis"][1] * H,
          joint="waist_yaw")
    for k, pair in enumerate(sides):
        for side in pair:
            _asimo_leg(b, side, "pelvis", M, H, leg, x_shift=-0.1 * H * k)
    return b.build()


def asimo_like_on_one_foot():
    """The ASIMO-like humanoid balanced on its right foot, the foot treated as the fixed base
    (seed 002, Fig. 6, last case): a fixed-base tree rooted at the right sole through the right
    leg's joints in reverse order (ankle roll, ankle pitch, knee, hip pitch, roll, yaw) to the
    pelvis, then the waist, torso, head, arms, hands and the left leg as in `asimo_like`. 34
    moving bodies (the stance foot is the world), nv = 34."""
    M, H = ASIMO_M, ASIMO_H
    b = ModelBuilder("asimo_like_on_right_foot")
    foot = SEGMENTS["foot"][1] * H
    up = [("ankle_roll", _X, None), ("ankle_pitch", _Y, "shank"), ("knee", _Y, "thigh"),
          ("hip_pitch", _Y, None), ("hip_roll", _X, None)]
    hip, _ = _limb(b, "r_", WORLD, (0.0, 0.0, foot), up, M, H, sign=1.0)
    pelvis_frac, pelvis_len = SEGMENTS["pelvis"]
    # the right hip yaw joint carries the pelvis; the left hip sits a hip width to its left
    _link(b, "pelvis", hip, _Z, (0.0, 0.0, 0.05 * H), pelvis_frac * M, pelvis_len * H, joint="r_hip_yaw")
    torso_frac, torso_len = SEGMENTS["torso"]
    _link(b, "torso", "pelvis", _Z, (0.0, 0.0955 * H, 0.144 * H), torso_frac * M, torso_len * H, joint="waist_yaw")
    _asimo_head(b, "torso", M, H)
    for side in ("l", "r"):
        _asimo_arm(b, side, "torso", M, H, ASIMO_ARM, "two-finger")
    ankle, foot_height = _limb(b, "l_", "pelvis", (0.0, 0.191 * H, 0.0), ASIMO_LEG, M, H)
    b.add_frame("l_sole", b._index(ankle), _T((0.0, 0.0, -foot_height)))
    return b.build()


ATLAS_M, ATLAS_H = 150.0, 1.88
ATLAS_ARM = [("shz", _Z, None), ("shx", _X, "upper_arm"), ("ely", _Y, None), ("elx", _X, "forearm"),
             ("wry", _Y, None), ("wrx", _X, None), ("wry2", _Y, "hand")]
ATLAS_LEG = [("hpz", _Z, None), ("hpx", _X, None), ("hpy", _Y, "thigh"), ("kny", _Y, "shank"),
             ("aky", _Y, None), ("akx", _X, "foot")]


def atlas_like():
    """Atlas-like humanoid (seed 000's Atlas): free-flyer pelvis; back bkz, bky, bkx carrying the
    upper torso; neck ry carrying the head; arms shz, shx, ely, elx, wry, wrx, wry2; legs hpz, hpx,
    hpy, kny, aky, akx. 31 bodies, nv = 36. Frames: head, {side}_hand (wrist, where a hand
    attaches), {side}_sole and the sole's corners {side}_foot_corner_{fl,fr,rl,rr}."""
    M, H = ATLAS_M, ATLAS_H
    b = ModelBuilder("atlas_like")
    frac, length = SEGMENTS["pelvis"]
    b.add_body("pelvis", WORLD, FreeFlyerJoint("root"), mass=frac * M, inertia=_rod(frac * M, length * H))
    back = [("bkz", _Z, None), ("bky", _Y, None), ("bkx", _X, "torso")]
    utorso, torso_len = _limb(b, "", "pelvis", (0.0, 0.0, 0.05 * H), back, M, H, sign=1.0)
    _link(b, "head", utorso, _Y, (0.0, 0.0, torso_len), SEGMENTS["head"][0] * M, SEGMENTS["head"][1] * H)
    for side, s in (("l", 1.0), ("r", -1.0)):          # depth-first: the upper body's subtree first
        wrist, _ = _limb(b, f"{side}_", utorso, (0.0, s * 0.129 * H, 0.9 * torso_len), ATLAS_ARM, M, H)
        b.add_frame(f"{side}_hand", b._index(wrist), _T((0.0, 0.0, -0.5 * SEGMENTS["hand"][1] * H)))
    for side, s in (("l", 1.0), ("r", -1.0)):
        ankle, foot_height = _limb(b, f"{side}_", "pelvis", (0.0, s * 0.0955 * H, -0.05 * H), ATLAS_LEG, M, H)
        b.add_frame(f"{side}_sole", b._index(ankle), _T((0.0, 0.0, -foot_height)))
        half_length, half_width = 0.076 * H, 0.03 * H
        for corner, (x, y) in {"fl": (1, 1), "fr": (1, -1), "rl": (-1, 1), "rr": (-1, -1)}.items():
            b.add_frame(f"{side}_foot_corner_{corner}", b._index(ankle),
                        _T((x * half_length, y * half_width, -foot_height)))
    return b.build()


__all__ = ["asimo_like", "asimo_like_on_one_foot", "atlas_like", "SEGMENTS"]
