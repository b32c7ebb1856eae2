"""Structural patterns of the Plucker transforms iX_lambda(i) = X_J(q) X_T and what applying them
costs under the operation counter's "paper" convention (see spatial_costs.py).

A transform is kept as its factors [X_T, X_J], each a compact (E, r) with constant patterns: the
tree transform's from its constant entries, the joint's from probing its placement at random
configurations (its rotation and translation zeros are the same for every state). Applying it
costs the cheaper of the factored product and one merged general compact form (24m + 18a,
Featherstone Appendix A), so a revolute joint about a coordinate axis behind a translation along
one axis costs 10m + 6a, a pure rotation about a coordinate axis 8m + 4a.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from .axis_rotation import rotate_cost
from .spatial_costs import FULL6, linear_cost, skew_pattern


@dataclass(frozen=True)
class Factor:
    """One compact transform (E, r) with constant patterns: E (3x3 nz, unit), r (3 nz)."""

    E_nz: np.ndarray
    E_unit: np.ndarray
    r_nz: np.ndarray

    def matrices(self, op):
        """The 6x6 (nz, unit) matrices, applied right to left, of the compact formula of `op`:
        'X m' = rot . [[1, 0], [-rx, 1]]; 'X^T f' = [[1, rx], [0, 1]] . rot^T (Featherstone
        eq. 2.24, Appendix A); 'X* f' = rot . [[1, -rx], [0, 1]]; 'X^-1 m' = [[1, 0], [rx, 1]] . rot^T."""
        E, U = (self.E_nz, self.E_unit) if op in ("X m", "X* f") else (self.E_nz.T, self.E_unit.T)
        rot = (np.kron(np.eye(2, dtype=bool), E), np.kron(np.eye(2, dtype=bool), U))
        tr_nz = np.eye(6, dtype=bool)
        rx = skew_pattern(self.r_nz)
        if op in ("X m", "X^-1 m"):
            tr_nz[3:, :3] = rx
        else:
            tr_nz[:3, 3:] = rx
        tr = (tr_nz, np.eye(6, dtype=bool))
        return [tr, rot] if op in ("X m", "X* f") else [rot, tr]


GENERAL = Factor(np.ones((3, 3), bool), np.zeros((3, 3), bool), np.ones(3, bool))


def factor_of(E, r):
    """The constant pattern of a numeric (E, r) (a tree transform)."""
    E, r = np.asarray(E, float), np.asarray(r, float)
    return Factor(E != 0, np.abs(E) == 1, r != 0)


@dataclass(frozen=True)
class TransformStructure:
    """iX_lambda(i) = X_J(q) X_T as the factors [X_T, X_J] (applied first to last to a motion);
    axis: k when X_T has no rotation and X_J is a pure rotation about the coordinate axis k (so
    iX_lambda(i)'s E is one: axis_rotation.py applies), else None."""

    factors: tuple
    axis: int | None = None

    def _sequence(self, op):
        """The matrices of `op`, applied first to last: X = X_J X_T applies X_T first; X^T and
        X^-1 apply X_J's part first."""
        factors = self.factors if op in ("X m", "X* f") else self.factors[::-1]
        return [m for f in factors for m in f.matrices(op)]

    def apply_cost(self, op, x_nz=FULL6):
        """(mul, add, output pattern) of applying the transform (op as in Factor.matrices) to a
        vector of pattern x_nz: the cheaper of the factored product and the one merged compact
        (E, r) (24m + 18a when general)."""
        key = (op, x_nz.tobytes())
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            best = None
            for seq in (self._sequence(op), GENERAL.matrices(op)):
                mul = add = 0
                p = x_nz
                for nz, unit in seq:
                    m, a, p = linear_cost(nz, unit, p)
                    mul, add = mul + m, add + a
                if best is None or mul + add < best[0] + best[1]:
                    best = (mul, add, p)
            cache[key] = best
        return cache[key]

    def congruence_cost(self, I_nz, by_axis=False):
        """(mul, add, pattern) of X^T I X for a symmetric I of pattern I_nz (6x6): factor by factor
        (X_J's rotation first), G = I F then the upper triangle of F^T G only (the result is
        symmetric); by_axis (with self.axis): X_J's rotation by double angles on the blocks
        (axis_rotation.py); at most the general compact form's 198m + 144a
        (spatial.inertia_to_parent)."""
        key = ("XtIX", I_nz.tobytes(), by_axis)
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            mul = add = 0
            P = I_nz
            steps = [m for f in reversed(self.factors) for m in reversed(f.matrices("X m"))]
            if by_axis and self.axis is not None:
                mul, add, (A, B, C) = rotate_cost([(P[:3, :3], True), (P[:3, 3:], False),
                                                  (P[3:, 3:], True)], self.axis)
                P = np.block([[A, B], [B.T, C]])
                steps = steps[1:]                       # X_J's rotation done; its r is zero
            for F_nz, F_unit in steps:
                m, a, P = _congruence_step(P, F_nz, F_unit)
                mul, add = mul + m, add + a
            if mul + add > 198 + 144:
                mul, add, P = 198, 144, np.ones((6, 6), dtype=bool)
            cache[key] = (mul, add, P)
        return cache[key]


    def motion_congruence_cost(self, M_nz):
        """(mul, add, pattern) of X M X^T (spatial.motion_congruence) for a symmetric M of
        pattern M_nz: F M F^T matrix by matrix (X_T's translation first), X_J's rotation about
        self.axis by double angles; at most the general 198m + 144a."""
        key = ("XMXt", M_nz.tobytes())
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            mul = add = 0
            P = M_nz
            steps = [m for f in self.factors for m in f.matrices("X m")]
            if self.axis is not None:
                steps = steps[:-1]                      # X_J's rotation, last: by double angles
            for F_nz, F_unit in steps:
                m, a, P = _congruence_step(P, F_nz.T, F_unit.T)
                mul, add = mul + m, add + a
            if self.axis is not None:
                m, a, (A, B, C) = rotate_cost([(P[:3, :3], True), (P[:3, 3:], False),
                                              (P[3:, 3:], True)], self.axis)
                mul, add, P = mul + m, add + a, np.block([[A, B], [B.T, C]])
            if mul + add > 198 + 144:
                mul, add, P = 198, 144, np.ones((6, 6), dtype=bool)
            cache[key] = (mul, add, P)
        return cache[key]


def _congruence_step(P, F_nz, F_unit):
    """F^T P F for a symmetric pattern P: G = P F row by row, then the 21 upper entries of F^T G."""
    mul = add = 0
    G = np.zeros((6, 6), dtype=bool)
    for i in range(6):
        m, a, G[i] = linear_cost(F_nz.T, F_unit.T, P[i])
        mul, add = mul + m, add + a
    out = np.zeros((6, 6), dtype=bool)
    for i in range(6):
        for j in range(i, 6):
            terms = F_nz[:, i] & G[:, j]
            t = int(terms.sum())
            mul += int((terms & ~F_unit[:, i]).sum())
            add += max(t - 1, 0)
            out[i, j] = out[j, i] = t > 0
    return mul, add, out


def joint_factor(joint, samples=4, seed=0):
    """The pattern of X_J = (R_J^T, p_J) of a joint, probed at random configurations: an entry is
    structurally nonzero if it is nonzero at any of them, a unit if it is +-1 at all of them."""
    rng = np.random.default_rng(seed)
    qs = np.stack([joint.random_configuration(rng) for _ in range(samples)])
    R, p = joint.placement(qs)
    E = np.swapaxes(np.asarray(R, float), -1, -2)
    return Factor(np.any(E != 0, axis=0), np.all(np.abs(E) == 1, axis=0), np.any(np.asarray(p) != 0, axis=0))


def rotation_axis(joint, samples=4, seed=0):
    """k if X_J is a pure rotation about the coordinate axis k (E[k, k] = 1, the rest of row and
    column k zero, no translation) at random configurations, else None."""
    rng = np.random.default_rng(seed)
    qs = np.stack([joint.random_configuration(rng) for _ in range(samples)])
    R, p = (np.asarray(a, float) for a in joint.placement(qs))
    if np.any(p != 0):
        return None
    for k in range(3):
        rest = [a for a in range(3) if a != k]
        if np.all(R[:, k, k] == 1) and not np.any(R[:, k, rest]) and not np.any(R[:, rest, k]):
            return k
    return None


_STRUCTURES = weakref.WeakKeyDictionary()     # model -> its transforms' structures


IDENTITY = Factor(np.eye(3, dtype=bool), np.eye(3, dtype=bool), np.zeros(3, dtype=bool))


def privileged_children(model):
    """{child: floating body}: for each body on a 6-DoF joint whose S permutes the unit axes (a
    floating base), its first child on a 1-DoF joint. Seed 002, appendix (after its ref. [23]): the floating base's
    coordinate frame can be located at that child's joint frame, so the child's transform is a
    pure rotation about a fixed axis; the floating body's inertia and its other children's tree
    transforms are general either way, so the count is that of the same algorithm on the
    equivalently placed model (the numerics here keep the model's own frame)."""
    out = {}
    for b, joint in enumerate(model.joints):
        S = np.abs(np.asarray(joint.S))
        if joint.nv == 6 and np.array_equal(S @ S.T, np.eye(6)) and set(S.ravel()) <= {0.0, 1.0}:
            kids = [i for i in range(model.nbodies) if model.parents[i] == b and model.joints[i].nv == 1]
            if kids:
                out[kids[0]] = b
    return out


def model_structures(model):
    """TransformStructure of every iX_lambda(i) of the model (cached per model object)."""
    hit = _STRUCTURES.get(model)
    if hit is None:
        out = []
        privileged = privileged_children(model)
        for i, joint in enumerate(model.joints):
            T = np.asarray(model.joint_placements[i])
            tree = IDENTITY if i in privileged else factor_of(T[:3, :3].T, T[:3, 3])
            plain = np.array_equal(T[:3, :3], np.eye(3))
            out.append(TransformStructure((tree, joint_factor(joint)), rotation_axis(joint) if plain else None))
        hit = _STRUCTURES[model] = tuple(out)
    return hit
