"""What a compiled MuJoCo model adds to its kinematic tree's rigid-body dynamics that
sparsedyn's Model does not carry, named in ModelWarnings when loading (see mjcf.py):

- armature (rotor inertia), which MuJoCo adds to the mass matrix's diagonal: sparsedyn's M is
  MuJoCo's qM minus diag(dof_armature);
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


def warn_armature(m, joints):
    """A ModelWarning naming the joints with armature; joints: our joint names by MuJoCo id."""
    armature = np.asarray(getattr(m, "dof_armature", np.zeros(0)), dtype=float)
    named = list(dict.fromkeys(joints[int(m.dof_jntid[k])] for k in np.flatnonzero(armature)))
    if named:
        warnings.warn(ModelWarning(
            f"{len(named)} joints have armature (rotor inertia, e.g. {named[0]!r}: "
            f"{armature[np.flatnonzero(armature)[0]]:g}), which MuJoCo adds to the mass matrix's "
            f"diagonal: not modelled here (sparsedyn's M is MuJoCo's qM minus diag(dof_armature)); "
            f"joints: {_listed(named)}"), stacklevel=3)


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
