"""The Delassus matrix WITH kinematic loops through Nori's block system: Lambda^-1 = J G (G^T H G)^-1
G^T J^T = C D^-1 B on the loop forward-dynamics system (problems/loops.py, system/loop_rows.py).

Seed 003, Sec. II-E defines the constrained inverse operational-space inertia as J G (G^T H G)^-1
G^T J^T (the projection method; C-EFPA computes it recursively). In Nori's system it is the
response of the contact-frame accelerations to unit contact wrenches, as for a tree
(problems/delassus_sparse.py, whose B, C and evaluation this reuses), but with D the loop
system: the loop rows K qdd = 0 (v = 0: k = -Kdot qd = 0) and the constraint-force columns
lambda keep the accelerations on the constraint manifold, so the solved accelerations are those
of the constrained system, tau = 0 and gravity off (neither enters C D^-1 B).

    plan = compile_loop_delassus(cluster_model, contacts); plan(q) -> (B, m, m)
    sparsedyn.delassus(cluster_model, q, contacts, method="sparse")

Online: NumPy assembly of D(q) (the q-dependent K of implicit clusters included), one numeric
factorization per state (its LU on the "numba" or "numpy" backend) and m substitutions.
Preconditions: q assembled (loop closures hold); contacts on links of the spanning tree.
"""
from __future__ import annotations

import weakref

from ..contacts import resolve_contacts
from ..kinematics import joint_transforms
from .delassus_sparse import DelassusPlan, cached_plan
from .loops import loop_forward_dynamics
from .plan import compile

_PLANS = weakref.WeakKeyDictionary()     # cluster model -> {(ordering, contact key): plan}


class LoopDelassusPlan(DelassusPlan):
    """Lambda^-1(q) = C D(q)^-1 B for one ClusterModel and contact set (see the module doc)."""

    def __init__(self, cluster_model, rc, ordering="auto"):
        self.cluster_model = cluster_model
        super().__init__(cluster_model.model, rc, ordering)

    def _fd_plan(self, bodies, ordering):
        links = [self.model.link_names[b] for b in bodies]
        return compile(loop_forward_dynamics(self.cluster_model, f_ext=links), ordering=ordering)

    def _values(self, q, Xup):
        return self.plan.system.values(q, joint_transforms(self.model, q) if Xup is None else Xup)

    def _compiled_values(self, q):
        return self._values(q, None)        # no compiled assembly of the loop rows: NumPy's


def compile_loop_delassus(cluster_model, contacts, ordering="auto"):
    """The LoopDelassusPlan of `contacts` (Contact list, or already resolved) on the ClusterModel,
    planned once and cached per (cluster model, contact set, ordering)."""
    model = cluster_model.model
    rc = contacts if hasattr(contacts, "K") else resolve_contacts(model, contacts)
    return cached_plan(_PLANS, cluster_model, rc, ordering, LoopDelassusPlan)


__all__ = ["LoopDelassusPlan", "compile_loop_delassus"]
