"""ClusterModel: a cluster connectivity tree (C-CT) over a spanning-tree Model (seed 003, Sec. IV).

Clusters are groups of bodies closed by local loop constraints (sub-mechanisms); bodies not listed
in any cluster become single-body clusters without constraint, so the cluster algorithms reduce to
the classical ones on them. Clusters are numbered by their first body, so the parent cluster
lambda(k) < k ("regular numbering", Sec. IV-A). The output body of body i is the nearest supporting
body outside its cluster (Lambda(B_i), Sec. IV-B); all output bodies of a cluster must lie in one
parent cluster (or be the world).

State conventions of the cluster algorithms: q is the full spanning-tree configuration (B, nq)
satisfying the loop closures (see `configuration`), the velocities/accelerations/torques are
INDEPENDENT ones (B, ny): yd, ydd, tau_y, stacked cluster by cluster. The global loop constraints
in spanning coordinates (`implicit`: K qdd = k; `explicit`: qdd = G ydd + g) are exported per
cluster row block (`constraint_rows`) so they can be appended as extra rows to a sparse system.
"""
from __future__ import annotations

import numpy as np

from ..batch import as_batch, check_configuration
from ..errors import ModelError
from ..model.model import WORLD
from .submechanisms import ClusterConstraint, Unconstrained


class ClusterModel:
    """Read-only cluster tree over `model` (a Model). `clusters`: ClusterConstraint instances or
    plain lists of link names (grouped without constraint)."""

    def __init__(self, model, clusters=(), name=None):
        self.model = model
        self.name = name or f"{model.name}-clusters"
        owner = {}
        bound = []
        for c in clusters:
            if not isinstance(c, ClusterConstraint):
                links = list(c)
                c = Unconstrained("+".join(links), links)
            b = c.bind(model)
            for i in b.bodies:
                if i in owner:
                    raise ModelError(f"cluster {c.name!r}: link {model.link_names[i]!r} already belongs "
                                     f"to cluster {owner[i].name!r}")
                owner[i] = b
            bound.append(b)
        for i in range(model.nbodies):
            if i not in owner:
                b = Unconstrained(model.link_names[i], [model.link_names[i]]).bind(model)
                owner[i] = b
                bound.append(b)
        bound.sort(key=lambda c: c.bodies[0])
        self.clusters = tuple(bound)
        self.nclusters = len(bound)
        self.cluster_of = np.array([next(k for k, c in enumerate(bound) if i in c.bodies)
                                    for i in range(model.nbodies)])
        self._topology()

    def _topology(self):
        m = self.model
        parents, out_blocks, in_parents, out_bodies = [], [], [], []
        for k, c in enumerate(self.clusters):
            outs, local_parent = [], []
            for i in c.bodies:
                p = int(m.parents[i])
                if p != WORLD and self.cluster_of[p] == k:
                    local_parent.append(c.bodies.index(p))
                    outs.append(outs[c.bodies.index(p)])          # Lambda(i) = Lambda(lambda(i))
                else:
                    local_parent.append(-1)
                    outs.append(p)
            parent_clusters = {WORLD if o == WORLD else int(self.cluster_of[o]) for o in outs}
            if len(parent_clusters) != 1:
                names = sorted("world" if o == WORLD else m.link_names[o] for o in set(outs))
                raise ModelError(f"cluster {c.name!r}: its bodies hang from bodies of different clusters "
                                 f"({names}); merge those clusters")
            pk = parent_clusters.pop()
            if pk != WORLD and pk >= k:
                raise ModelError(f"cluster {c.name!r}: parent cluster {self.clusters[pk].name!r} "
                                 f"does not precede it")
            parents.append(pk)
            out_bodies.append(np.array(outs))
            out_blocks.append(np.array([-1 if o == WORLD else self.clusters[pk].bodies.index(o) for o in outs]))
            in_parents.append(np.array(local_parent))
        self.parents = np.array(parents)
        #: per cluster, per body: the output body Lambda(i) (model index, WORLD = -1)
        self.output_bodies = tuple(out_bodies)
        #: per cluster, per body: block index of Lambda(i) in the parent cluster (-1: world)
        self.output_blocks = tuple(out_blocks)
        #: per cluster, per body: local index of lambda(i) if it is in the same cluster, else -1
        self.local_parents = tuple(in_parents)
        self.children = tuple(tuple(int(j) for j in np.flatnonzero(self.parents == k))
                              for k in range(self.nclusters))
        m = self.model
        self.v_indices = tuple(np.concatenate([np.arange(m.v_index[i], m.v_index[i] + m.joints[i].nv)
                                               for i in c.bodies]) for c in self.clusters)
        self.q_indices = tuple(np.concatenate([np.arange(m.q_index[i], m.q_index[i] + m.joints[i].nq)
                                               for i in c.bodies]) for c in self.clusters)
        ny = [c.ny for c in self.clusters]
        self.y_index = np.concatenate(([0], np.cumsum(ny)[:-1])).astype(int)
        self.ny = int(sum(ny))
        nc = [c.nc for c in self.clusters]
        self.c_index = np.concatenate(([0], np.cumsum(nc)[:-1])).astype(int)
        self.nc = int(sum(nc))
        nyq = [c.nyq for c in self.clusters]
        self.yq_index = np.concatenate(([0], np.cumsum(nyq)[:-1])).astype(int)
        self.nyq = int(sum(nyq))
        #: spanning velocity index of every independent coordinate (G's identity rows)
        self.independent_v = np.concatenate([self.v_indices[k][c.independent_local]
                                             for k, c in enumerate(self.clusters)]).astype(int)

    # ------------------------------------------------------------------ indices

    def y_slice(self, k):
        return slice(self.y_index[k], self.y_index[k] + self.clusters[k].ny)

    def constraint_rows(self, k):
        """Rows of cluster k in the global implicit constraint (K, k)."""
        return slice(self.c_index[k], self.c_index[k] + self.clusters[k].nc)

    def cluster_index(self, name):
        for k, c in enumerate(self.clusters):
            if c.name == name:
                return k
        raise KeyError(f"cluster model {self.name!r} has no cluster named {name!r}")

    @property
    def max_cluster_size(self):
        return max(len(c.bodies) for c in self.clusters)

    # ------------------------------------------------------------------ constraints, global

    def cluster_state(self, k, q, qd):
        return q[:, self.q_indices[k]], qd[:, self.v_indices[k]]

    def explicit(self, q, yd):
        """Global G (B, nv, ny) and g (B, nv) at state (q, yd): qd = G yd, qdd = G ydd + g."""
        q, yd, B, single = self._state(q, yd=yd)
        G = np.zeros((B, self.model.nv, self.ny))
        g = np.zeros((B, self.model.nv))
        for k, c in enumerate(self.clusters):
            Gk, gk = self.cluster_explicit(k, q, yd)
            if Gk is None:
                Gk, gk = np.eye(c.nv), 0.0
            G[:, self.v_indices[k][:, None], np.arange(self.y_index[k], self.y_index[k] + c.ny)] = Gk
            g[:, self.v_indices[k]] = gk
        return (G[0], g[0]) if single else (G, g)

    def cluster_explicit(self, k, q, yd):
        """G_k, g_k of cluster k (updateConstraints, Algorithm 1 line 11), from batched q, yd;
        (None, None) for a cluster without constraint (G = 1, g = 0)."""
        return self.clusters[k].update(q[:, self.q_indices[k]], yd[:, self.y_slice(k)])

    def implicit(self, q, qd):
        """Global K (B, nc, nv) and k (B, nc) at spanning state (q, qd): K qdd = k."""
        q, qd, B, single = self._state(q, qd=qd)
        K = np.zeros((B, self.nc, self.model.nv))
        kk = np.zeros((B, self.nc))
        for k, c in enumerate(self.clusters):
            qk, qdk = self.cluster_state(k, q, qd)
            Kk, bk = c.implicit(qk, qdk)
            rows = self.constraint_rows(k)
            if c.nc:
                K[:, rows, self.v_indices[k]] = Kk
            kk[:, rows] = bk
        return (K[0], kk[0]) if single else (K, kk)

    def closure(self, q):
        """Loop-closure residual phi(q) (B, nc)."""
        q, single = check_configuration(self.model, q)
        phi = np.zeros((q.shape[0], self.nc))
        for k, c in enumerate(self.clusters):
            phi[:, self.constraint_rows(k)] = c.closure(q[:, self.q_indices[k]])
        return phi[0] if single else phi

    # ------------------------------------------------------------------ state conversions

    def configuration(self, y):
        """Spanning q (B, nq) satisfying every loop closure, from independent configurations y
        (B, nyq) stacked cluster by cluster (free-flyer clusters take their 7 coordinates)."""
        y, single = as_batch(y, self.nyq, "y")
        q = np.zeros((y.shape[0], self.model.nq))
        for k, c in enumerate(self.clusters):
            q[:, self.q_indices[k]] = c.configuration(y[:, self.yq_index[k]:self.yq_index[k] + c.nyq])
        return q[0] if single else q

    def independent_velocity(self, qd):
        """yd from a spanning velocity that satisfies the constraints."""
        qd, single = as_batch(qd, self.model.nv, "qd")
        return qd[0, self.independent_v] if single else qd[:, self.independent_v]

    def spanning_velocity(self, q, yd):
        G, _ = self.explicit(q, yd)
        return np.einsum("...ij,...j->...i", G, np.asarray(yd, dtype=float))

    def spanning_torque(self, tau_y):
        """Spanning torques whose projection G^T tau equals tau_y (tau_y applied at the independent
        joints; G's rows there are the identity)."""
        tau_y, single = as_batch(tau_y, self.ny, "tau")
        tau = np.zeros((tau_y.shape[0], self.model.nv))
        tau[:, self.independent_v] = tau_y
        return tau[0] if single else tau

    def random_state(self, rng=None, batch=None, spread=0.4):
        """(q, yd, ydd/tau-sized random vector) with q assembled: y drawn per cluster (implicit
        clusters: within `spread` rad of their assembly guess)."""
        rng = np.random.default_rng(rng)
        n = 1 if batch is None else int(batch)
        qr = self.model.random_configuration(rng, batch=n)
        y = np.zeros((n, self.nyq))
        for k, c in enumerate(self.clusters):
            ys = slice(self.yq_index[k], self.yq_index[k] + c.nyq)
            if c.kind == "unconstrained":
                y[:, ys] = qr[:, self.q_indices[k]]
            elif hasattr(c, "z_guess"):
                y[:, ys] = rng.uniform(-spread, spread, size=(n, c.nyq))
            else:
                y[:, ys] = qr[:, self.q_indices[k][c.from_role_q[c.independent]]]
        q = self.configuration(y)
        yd = rng.normal(size=(n, self.ny))
        w = rng.normal(size=(n, self.ny))
        return (q[0], yd[0], w[0]) if batch is None else (q, yd, w)

    def _state(self, q, **vectors):
        q, single = check_configuration(self.model, q)
        B = q.shape[0]
        out = []
        for key, val in vectors.items():
            width = self.ny if key in ("yd", "ydd", "tau") else self.model.nv
            arr, s = as_batch(val, width, key)
            if arr.shape[0] != B:
                if arr.shape[0] == 1:
                    arr = np.broadcast_to(arr, (B, width))
                elif B == 1:
                    q = np.broadcast_to(q, (arr.shape[0], q.shape[1]))
                    B = arr.shape[0]
                else:
                    raise ValueError(f"{key}: batch size {arr.shape[0]} does not match q's {B}")
            single = single and s
            out.append(arr)
        return (q, *out, B, single)

    def __repr__(self):
        return (f"ClusterModel({self.name!r}: {self.nclusters} clusters over {self.model.nbodies} bodies, "
                f"ny={self.ny}, nc={self.nc}, max cluster size {self.max_cluster_size})")
