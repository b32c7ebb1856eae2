"""Loop constraints of one cluster (seed 003, Sec. II-B and IV; notes: loops-and-virtual-work.md).

A cluster joint is the set of tree joints of the cluster's bodies plus their loop constraints. Its
state is the cluster's spanning-tree coordinates (q, qd: the bodies' own joint coordinates
concatenated in body order, eq. 11). Every constraint here gives both forms:

    implicit (eq. 2):  phi(q) = 0,   K qd = 0,   K qdd = k,        k = -Kdot qd
    explicit (eq. 3):  qd = G yd,    qdd = G ydd + g,              g = Gdot yd

and the independent coordinates y are a subset of q (rows of G at `independent` are the identity),
so a torque tau_y on y is the spanning torque placed at those rows. Implicit -> explicit, with
q = [y; z] and K = [K_y K_z]:  G = [1; -K_z^-1 K_y],  g = [0; K_z^-1 k]  (notes).

Constraints are written in ROLE order (the order of the `links` a constraint is given);
ClusterModel binds them to a model and permutes roles into body order. All functions are batched:
q (B, nq), qd (B, nv) -> G (B, nv, ny), g (B, nv), K (B, nc, nv), k (B, nc).
"""
from __future__ import annotations

import copy

import numpy as np

from ..errors import ModelError
from ..model.joints import PrismaticJoint, RevoluteJoint
from ..opcount import charge


def explicit_from_implicit(K, k, independent):
    """G, g from K (B, nc, n), k (B, nc) with the coordinates `independent` kept as y (notes:
    G = [1; -K_z^-1 K_y], g = [0; K_z^-1 k]). K_z must be square and invertible."""
    B, nc, n = K.shape
    dependent = np.setdiff1d(np.arange(n), independent)
    Ky, Kz = K[:, :, independent], K[:, :, dependent]
    m = len(independent)
    charge(nc ** 3 // 3 + nc * nc * (m + 1), nc ** 3 // 3 + nc * nc * (m + 1), div=nc, kind="implicit->explicit")
    sol = np.linalg.solve(Kz, np.concatenate((Ky, k[:, :, None]), axis=2))
    G = np.zeros((B, n, m))
    G[:, independent, np.arange(m)] = 1.0
    G[:, dependent, :] = -sol[:, :, :m]
    g = np.zeros((B, n))
    g[:, dependent] = sol[:, :, m]
    return G, g


class ClusterConstraint:
    """Base class: the constraint of one cluster, on the links `links` (role order).

    Subclasses set `independent` (role-order velocity indices kept as y) and implement
    `_explicit(q, qd)` and/or `_implicit(q, qd)` / `_closure(q)` in role order."""

    kind = "abstract"
    #: role indices of bodies that are rotors (merged + reflected by the approximate baselines)
    rotor_roles = ()

    def __init__(self, name, links, independent):
        self.name = str(name)
        self.links = tuple(links)
        if len(set(self.links)) != len(self.links):
            raise ModelError(f"cluster {self.name!r}: a link is listed twice in {list(self.links)}")
        self.independent = np.asarray(independent, dtype=int)
        self.bodies = None  # body indices in body order, set by bind()

    # ------------------------------------------------------------------ binding to a model

    def bind(self, model):
        """A copy attached to `model`: role -> body order permutations, spanning sizes."""
        out = copy.copy(self)
        roles = []
        for name in self.links:
            if name not in model.link_names:
                raise ModelError(f"cluster {self.name!r}: model {model.name!r} has no link {name!r}")
            roles.append(model.link_names.index(name))
        out.role_bodies = np.array(roles)
        out.bodies = tuple(sorted(roles))
        # velocity / configuration index maps: body-order position <- role-order position
        role_v, role_q = [], []
        vo = qo = 0
        starts_v, starts_q = {}, {}
        for b in roles:
            starts_v[b], starts_q[b] = vo, qo
            vo += model.joints[b].nv
            qo += model.joints[b].nq
        for b in out.bodies:
            role_v.extend(range(starts_v[b], starts_v[b] + model.joints[b].nv))
            role_q.extend(range(starts_q[b], starts_q[b] + model.joints[b].nq))
        out.to_role_v = np.array(role_v, dtype=int)     # body-order vector[i] = role vector[to_role_v[i]]
        out.to_role_q = np.array(role_q, dtype=int)
        out.from_role_v = np.argsort(out.to_role_v)     # role vector = body-order vector[from_role_v]
        out.from_role_q = np.argsort(out.to_role_q)
        out.nv, out.nq = vo, qo
        out.ny = len(self.independent)
        if out.ny > out.nv or (out.ny and (self.independent.min() < 0 or self.independent.max() >= out.nv)):
            raise ModelError(f"cluster {self.name!r}: independent coordinates {self.independent.tolist()} "
                             f"are not a subset of its {out.nv} spanning velocities")
        out.independent_local = np.sort(out.from_role_v[self.independent])
        out._check_model(model)
        return out

    def _check_model(self, model):
        pass

    def _require_1dof(self, model, kinds=(RevoluteJoint, PrismaticJoint)):
        for r in self.role_bodies:
            if not isinstance(model.joints[r], kinds):
                raise ModelError(f"cluster {self.name!r}: link {model.link_names[r]!r} must have a "
                                 f"one-DoF joint, has {model.joints[r].kind}")

    # ------------------------------------------------------------------ body-order interface

    def explicit(self, q, qd):
        """G (B, nv, ny), g (B, nv) in body order; columns follow `independent` in role order."""
        G, g = self._explicit(q[:, self.to_role_q], qd[:, self.to_role_v])
        return G[:, self.from_role_v, :], g[:, self.from_role_v]

    def update(self, q, yd):
        """[G, g] = updateConstraints (Algorithm 1, line 11) from the cluster's spanning q and its
        independent velocities yd, body order. (None, None) means G = 1, g = 0."""
        B = q.shape[0]
        G, g = self._explicit(q[:, self.to_role_q], np.zeros((B, self.nv)))
        return G[:, self.from_role_v, :], g[:, self.from_role_v]

    def implicit(self, q, qd):
        """K (B, nc, nv), k (B, nc) in body order."""
        K, k = self._implicit(q[:, self.to_role_q], qd[:, self.to_role_v])
        return K[:, :, self.from_role_v], k

    def closure(self, q):
        """phi(q) (B, nc): the position-level loop-closure residual."""
        return self._closure(q[:, self.to_role_q])

    @property
    def nc(self):
        return self.nv - self.ny

    @property
    def constant_K(self):
        """K (nc, nv) in body order if it does not depend on q (then k = -Kdot qd = 0 for every
        state), else None. Lets a sparse system store K's entries as constants."""
        return None

    def configuration(self, y):
        """Spanning q (B, nq, body order) of the cluster from independent coordinates y (B, nyq)."""
        return self._configuration(y)[:, self.from_role_q]

    @property
    def nyq(self):
        return self.ny

    def _explicit(self, q, qd):
        K, k = self._implicit(q, qd)
        return explicit_from_implicit(K, k, self.independent)

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r}, links={list(self.links)})"


class Unconstrained(ClusterConstraint):
    """A cluster without loop constraints (y = q; a single body gives back the ordinary tree
    joint, so every algorithm reduces to its classical version)."""

    kind = "unconstrained"

    def __init__(self, name, links):
        super().__init__(name, links, [])

    def bind(self, model):
        out = copy.copy(self)
        out.independent = np.arange(sum(model.joints[model.link_names.index(n)].nv
                                        for n in self.links if n in model.link_names))
        return ClusterConstraint.bind(out, model)

    def _explicit(self, q, qd):
        B = q.shape[0]
        return np.broadcast_to(np.eye(self.nv), (B, self.nv, self.nv)), np.zeros((B, self.nv))

    def update(self, q, yd):
        return None, None

    def _implicit(self, q, qd):
        B = q.shape[0]
        return np.zeros((B, 0, self.nv)), np.zeros((B, 0))

    def _closure(self, q):
        return np.zeros((q.shape[0], 0))

    @property
    def nyq(self):
        return self.nq

    def _configuration(self, y):
        return y


class LinearTransmission(ClusterConstraint):
    """Constant linear constraint q = G y with G given in role order (rows at `independent` are
    the identity): geared motors and belt transmissions. g = 0, K = [G_dep, -1] (permuted), k = 0,
    phi = G_dep y - q_dep."""

    kind = "linear"

    def __init__(self, name, links, independent, G, rotor_roles=()):
        super().__init__(name, links, independent)
        self.G_role = np.asarray(G, dtype=float)
        self.rotor_roles = tuple(rotor_roles)
        n, m = self.G_role.shape
        if n != len(self.links) or m != len(self.independent):
            raise ModelError(f"cluster {self.name!r}: G must be {len(self.links)} x {len(self.independent)}, "
                             f"got {self.G_role.shape}")
        if not np.allclose(self.G_role[self.independent], np.eye(m)):
            raise ModelError(f"cluster {self.name!r}: the rows of G at the independent coordinates "
                             f"must be the identity")
        self.dependent = np.setdiff1d(np.arange(n), self.independent)
        self.K_role = np.zeros((len(self.dependent), n))
        self.K_role[:, self.independent] = self.G_role[self.dependent]
        self.K_role[np.arange(len(self.dependent)), self.dependent] = -1.0

    def _check_model(self, model):
        self._require_1dof(model)

    @property
    def constant_K(self):
        return self.K_role[:, self.from_role_v]

    def _explicit(self, q, qd):
        B = q.shape[0]
        return np.broadcast_to(self.G_role, (B,) + self.G_role.shape), np.zeros((B, self.nv))

    def _implicit(self, q, qd):
        B = q.shape[0]
        return np.broadcast_to(self.K_role, (B,) + self.K_role.shape), np.zeros((B, len(self.dependent)))

    def _closure(self, q):
        return q @ self.K_role.T

    def _configuration(self, y):
        return y @ self.G_role.T


class GearedMotor(LinearTransmission):
    """Rotor spinning at `ratio` times its link: cluster {link, rotor}, q_rotor = N q_link,
    G = [1; N], K = [N, -1] (seed 003, Fig. 3a; notes). The rotor is a body of the spanning tree
    attached to the link's parent."""

    kind = "geared_motor"

    def __init__(self, link, rotor, ratio, name=None):
        self.ratio = float(ratio)
        super().__init__(name or f"{link}+{rotor}", (link, rotor), [0], [[1.0], [self.ratio]],
                         rotor_roles=(1,))


class ParallelBeltTransmission(LinearTransmission):
    """MIT-Humanoid knee + ankle (seed 003, Fig. 1a; notes): cluster {link1, rotor1, rotor2, link2},
    q_r1 = N1 B1 q1, q_r2 = N2 (B1 q1 + B2 q2), G = [[1,0],[N1B1,0],[N2B1,N2B2],[0,1]]. Both rotors
    sit on the cluster's parent (the thigh); link2 (foot) hangs from link1 (shank)."""

    kind = "parallel_belt"

    def __init__(self, link1, rotor1, rotor2, link2, gear_ratios, belt_ratios, name=None):
        N1, N2 = (float(x) for x in gear_ratios)
        B1, B2 = (float(x) for x in belt_ratios)
        self.gear_ratios, self.belt_ratios = (N1, N2), (B1, B2)
        G = [[1.0, 0.0], [N1 * B1, 0.0], [N2 * B1, N2 * B2], [0.0, 1.0]]
        super().__init__(name or f"{link1}+{link2}", (link1, rotor1, rotor2, link2), [0, 3], G,
                         rotor_roles=(1, 2))


class ImplicitConstraint(ClusterConstraint):
    """A generic user-supplied loop constraint on 1-DoF joints, role order = `links`:
    phi(q) (B, nc), K(q) (B, nc, n), k(q, qd) (B, nc) (k = -Kdot qd). G and g follow from K, k at
    the current q by the implicit -> explicit formula; `configuration` solves phi(y, z) = 0 for z by
    Newton's method from `z_guess` (the assembly mode)."""

    kind = "implicit"

    def __init__(self, name, links, independent, phi, K, k, z_guess=None):
        super().__init__(name, links, independent)
        self._phi, self._K, self._k = phi, K, k
        n = len(self.links)
        self.dependent = np.setdiff1d(np.arange(n), self.independent)
        self.z_guess = np.zeros(len(self.dependent)) if z_guess is None else np.asarray(z_guess, float)

    def _check_model(self, model):
        self._require_1dof(model)

    def _call(self, what, fn, *args, shape):
        out = np.asarray(fn(*args), dtype=float)
        if out.shape != shape:
            raise ModelError(f"cluster {self.name!r}: {what} returned shape {out.shape}, expected {shape}")
        return out

    def _implicit(self, q, qd):
        B, n, nc = q.shape[0], self.nv, len(self.dependent)
        K = self._call("K(q)", self._K, q, shape=(B, nc, n))
        k = self._call("k(q, qd)", self._k, q, qd, shape=(B, nc))
        return K, k

    def update(self, q, yd):
        # G from K at the current q; g = K_z^-1 k needs the spanning velocity qd = G yd first
        qr = q[:, self.to_role_q]
        B, nc = q.shape[0], len(self.dependent)
        K = self._call("K(q)", self._K, qr, shape=(B, nc, self.nv))
        G, _ = explicit_from_implicit(K, np.zeros((B, nc)), self.independent)
        qd = np.einsum("bij,bj->bi", G, yd)
        k = self._call("k(q, qd)", self._k, qr, qd, shape=(B, nc))
        charge(nc * nc, nc * (nc - 1), kind="K_z^-1 k")
        g = np.zeros((B, self.nv))
        g[:, self.dependent] = np.linalg.solve(K[:, :, self.dependent], k[:, :, None])[:, :, 0]
        return G[:, self.from_role_v, :], g[:, self.from_role_v]

    def _closure(self, q):
        return self._call("phi(q)", self._phi, q, shape=(q.shape[0], len(self.dependent)))

    def _configuration(self, y, tol=1e-13, max_iter=50):
        B = y.shape[0]
        q = np.zeros((B, self.nv))
        q[:, self.independent] = y
        q[:, self.dependent] = self.z_guess
        for _ in range(max_iter):
            r = self._closure(q)
            if np.abs(r).max(initial=0.0) < tol:
                return q
            Kz = self._call("K(q)", self._K, q, shape=(B, len(self.dependent), self.nv))[:, :, self.dependent]
            q[:, self.dependent] -= np.linalg.solve(Kz, r[:, :, None])[:, :, 0]
        raise ModelError(f"cluster {self.name!r}: loop closure did not converge for y = "
                         f"{y[np.argmax(np.abs(self._closure(q)).max(axis=1))].tolist()} (not assemblable?)")


class FourBar(ImplicitConstraint):
    """Planar four-bar linkage, three revolute joints about z (seed 003, Fig. 3b): crank A (on the
    cluster's parent at its origin), coupler B (on A at (lA, 0, 0)), rocker C (on the parent at
    (d, 0, 0)). The loop closes where B's point (lB, 0, 0) meets C's point (lC, 0, 0):

        phi = [lA cA + lB cAB - d - lC cC,  lA sA + lB sAB - lC sC]  (cAB = cos(qA + qB), ...)

    y = crank angle; G from K at the current q by the implicit -> explicit formula."""

    kind = "four_bar"

    def __init__(self, crank, coupler, rocker, lengths, z_guess, name=None):
        self.lengths = tuple(float(x) for x in lengths)  # lA, lB, lC, d
        lA, lB, lC, d = self.lengths

        def phi(q):
            a, ab, c = q[:, 0], q[:, 0] + q[:, 1], q[:, 2]
            return np.stack((lA * np.cos(a) + lB * np.cos(ab) - d - lC * np.cos(c),
                             lA * np.sin(a) + lB * np.sin(ab) - lC * np.sin(c)), axis=1)

        def K(q):
            a, ab, c = q[:, 0], q[:, 0] + q[:, 1], q[:, 2]
            sa, sab, sc = np.sin(a), np.sin(ab), np.sin(c)
            ca, cab, cc = np.cos(a), np.cos(ab), np.cos(c)
            charge(14, 4, kind="four-bar K")
            return np.stack((np.stack((-lA * sa - lB * sab, -lB * sab, lC * sc), 1),
                             np.stack((lA * ca + lB * cab, lB * cab, -lC * cc), 1)), 1)

        def k(q, qd):
            a, ab, c = q[:, 0], q[:, 0] + q[:, 1], q[:, 2]
            wa, wab, wc = qd[:, 0], qd[:, 0] + qd[:, 1], qd[:, 2]
            charge(18, 6, kind="four-bar k")
            # k = -Kdot qd: the centripetal terms of the closure point (phi_dd = K qdd + Kdot qd)
            return -np.stack((-lA * np.cos(a) * wa ** 2 - lB * np.cos(ab) * wab ** 2 + lC * np.cos(c) * wc ** 2,
                              -lA * np.sin(a) * wa ** 2 - lB * np.sin(ab) * wab ** 2 + lC * np.sin(c) * wc ** 2), 1)

        super().__init__(name or f"fourbar:{crank}", (crank, coupler, rocker), [0], phi, K, k, z_guess)

    def _check_model(self, model):
        self._require_1dof(model, (RevoluteJoint,))


__all__ = ["ClusterConstraint", "Unconstrained", "LinearTransmission", "GearedMotor",
           "ParallelBeltTransmission", "ImplicitConstraint", "FourBar", "explicit_from_implicit"]
