"""What a compiled MuJoCo model adds to its kinematic tree's rigid-body dynamics that
sparsedyn's Model does not carry, named in ModelWarnings when loading (see mjcf.py):

- a free joint's translational armature (mujoco_armature: every other dof_armature is the
  Model's armature);
- equality constraints (connect, weld, joint, tendon, ...), which MuJoCo enforces on top of the
  tree (Cassie's leg loops, a gripper's coupled fingers, a body welded to a mocap body): the
  Model is the open tree, and forward dynamics is MuJoCo's with the constraints switched off.
  Nothing is said when the model itself disables them (<flag constraint/equality="disable"/>).

Springs, dampers, friction loss, limits, contacts, actuators and gravity compensation are forces
applied to the tree, not part of it, and are left to the caller without a warning.
"""
from __future__ import annotations

import warnings

import numpy as np

from ..errors import ModelWarning


def _listed(names):
    return f"{', '.join(names[:8])}{' ...' if len(names) > 8 else ''}"


def mujoco_armature(m, model, joints):
    """MuJoCo's dof_armature as the Model's armature (nv,): our v is MuJoCo's qvel dof by dof,
    except a free joint's linear part, whose acceleration is the world frame's there and the
    body frame's here (MuJoCo's armature force R^T I_a (a + w x v) is no diagonal term in our
    coordinates): a free joint's translational armature is left out, named in a ModelWarning
    (its angular part, body frame in both, is kept)."""
    armature = np.array(getattr(m, "dof_armature", np.zeros(model.nv)), dtype=float)
    dropped = []
    for i, joint in enumerate(model.joints):
        if joint.kind != "free":
            continue
        lin = armature[model.v_index[i]:model.v_index[i] + 3]
        if lin.any():
            dropped.append(joint.name)
            lin[:] = 0.0
    if dropped:
        warnings.warn(ModelWarning(
            f"free joints {_listed(dropped)}: their translational armature (MuJoCo's, on world-"
            f"frame accelerations) has no diagonal form in the body-frame velocities used here: "
            f"left out (MuJoCo's qM and qacc differ from ours there; the angular part is kept)"),
            stacklevel=3)
    return armature


def _equality(mujoco, m, i):
    """'connect left-plantar-rod/left-foot': the constraint's kind and name, or its objects."""
    kind = mujoco.mjtEq(int(m.eq_type[i])).name.removeprefix("mjEQ_").lower()
    if m.eq(i).name:
        return f"{kind} {m.eq(i).name}"
    by_kind = {"joint": "mjOBJ_JOINT", "tendon": "mjOBJ_TENDON"}
    if kind in by_kind or kind.startswith("flex") or not hasattr(m, "eq_objtype"):
        objtype = int(getattr(mujoco.mjtObj, by_kind.get(kind, "mjOBJ_FLEX" if kind.startswith("flex")
                                                         else "mjOBJ_BODY")))
    else:                                         # connect, weld: a body, or a site (MuJoCo >= 3.2)
        objtype = int(m.eq_objtype[i])
    objects = [mujoco.mj_id2name(m, objtype, int(k)) or str(int(k))
               for k in (m.eq_obj1id[i], m.eq_obj2id[i]) if k >= 0]
    return f"{kind} {'/'.join(objects)}"


def warn_equality(mujoco, m):
    """A ModelWarning naming the equality constraints MuJoCo would enforce."""
    bits = mujoco.mjtDisableBit
    off = int(bits.mjDSBL_CONSTRAINT) | int(bits.mjDSBL_EQUALITY)
    if not int(getattr(m, "neq", 0)) or int(m.opt.disableflags) & off:
        return
    named = [_equality(mujoco, m, i) for i in range(m.neq)]
    warnings.warn(ModelWarning(
        f"{len(named)} equality constraints (e.g. {named[0]!r}), which MuJoCo enforces on top "
        f"of the kinematic tree: not modelled here (the Model is the open tree: its forward "
        f"dynamics is MuJoCo's with the constraints off; closed loops can be added with "
        f"sparsedyn.closed_chain_forward_dynamics and CutJoint); constraints: {_listed(named)}"),
        stacklevel=3)
