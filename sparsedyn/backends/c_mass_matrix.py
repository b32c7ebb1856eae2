"""C99 source of the compiled mass matrix (ir/mass_matrix.py): kernels/crba_numba.crba_lanes for
ONE state, with everything the program fixes offline turned into literals and folded at plan
time (c_fold): the root's placement (identity, no offset), each joint's rotation kind and basis,
S's nonzeros (a revolute joint's J_k is one column of R and its cross product with p), the body
inertias and their structural zeros. Featherstone, Table 6.2, every quantity in the root's frame
(the program's module doc); the same formulas in the same order as the numba kernel, less the
terms that are exactly zero at plan time, and the same sin and cos (c_sincos.py): the results
equal the numba kernel's bit for bit, but for the sign of a zero.

Per state (w: the work array; out: the n_pairs nonzeros of M's lower triangle in the program's
pair order, as crba_numba's "packed" layout):
  1. forward over bodies: (E, r) = iX_lambda(i) (c_source._transform), R_i = R_p E^T,
     p_i = p_p + R_p r, I_i in the root frame (crba_numba's module doc, Table 2.5) and
     J_k = [R S_w; R S_v + p x (R S_w)] of the body's DoFs k;
  2. backward: F_k = I^c_i J_k, out[(k, j)] = J_j . F_k (+ armature on the diagonal),
     I^c_parent += I^c_i.
The folds' precondition (c_fold: a dropped `0 * x` has a finite x) holds when q, every body
position and every composite inertia are finite: a non-finite p_p stays so in its children's
p = p_p + R_p r, hence in the leaves', and a non-finite inertia in its root's composite one (a
sum), so those (CrbaStatements.checked) and the outputs, checked finite, stand for all. The unit
around the statements: c_mass_matrix_unit.py.
"""
from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from ..ir.mass_matrix import SYM3
from .c_fold import Locals, fadd, fmul, fsub, fsum
from .c_fold import lit
from .c_source import _cross, _transform

class _Slots:
    """Work-array slots: `put` stores a state-dependent value in a free slot (a constant stays a
    float, a copy of a slot is that slot: no statement) and returns what readers use; `release`
    drops the references of values no longer read, and a slot without any is reused (last
    freed first): the work of a lane group then stays near its live values (the open path of
    the forward sweep, the composite inertias and motions awaiting the backward one)."""

    def __init__(self):
        self.n, self.refs, self.free = 0, {}, []

    def put(self, V, value):
        if isinstance(value, float):
            return value
        if _SLOT.fullmatch(value):
            self.refs[value] += 1
            return value
        slot = self.free.pop() if self.free else f"w[{self.n}]"
        self.n += slot == f"w[{self.n}]"
        self.refs[slot] = 1
        V.store(slot, value)
        return slot

    def release(self, values):
        for x in values:
            if isinstance(x, str):
                self.refs[x] -= 1
                if self.refs[x] == 0:
                    self.free.append(x)


def _forward(i, jt, mm, W, R, P, IC, J, out):
    """Step 1 for body i: its placement R[i], P[i], inertia IC[i] and DoF motions J[k]."""
    V = Locals(out, lit)
    par = int(jt.parent[i])
    if par < 0:                                   # a root: its own frame
        R[i] = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        P[i] = [0.0, 0.0, 0.0]
    else:
        _transform(i, jt, V, out)
        E, r, Rp = [V[f"E{e}"] for e in range(9)], [V[f"r{k}"] for k in range(3)], R[par]
        R[i] = [W.put(V, fsum([fmul(Rp[3 * a + c], E[3 * b + c], lit) for c in range(3)], lit))
                for a in range(3) for b in range(3)]
        P[i] = [W.put(V, fsum([P[par][a]] + [fmul(Rp[3 * a + c], r[c], lit)
                                             for c in range(3)], lit))
                for a in range(3)]
    Ri, p = R[i], P[i]
    I = [float(x) for x in mm.inertia[i]]
    m, h = I[0], I[1:4]
    Ibar = np.empty((3, 3), dtype=object)
    for x, (a, b) in enumerate(SYM3):
        Ibar[a, b] = Ibar[b, a] = I[4 + x]
    for a in range(3):                            # T = R Ibar, u = R h, g = u + m p (h')
        for b in range(3):
            V.set(f"T{3 * a + b}", fsum([fmul(Ri[3 * a + c], Ibar[c, b], lit)
                                         for c in range(3)], lit))
        V.set(f"u{a}", fsum([fmul(Ri[3 * a + c], h[c], lit) for c in range(3)], lit))
        V.set(f"g{a}", fadd(V[f"u{a}"], fmul(m, p[a], lit), lit))
    u, g = [V[f"u{a}"] for a in range(3)], [V[f"g{a}"] for a in range(3)]
    V.set("d", fsum([fmul(p[a], u[a], lit) for a in range(3)]
                    + [fmul(p[a], g[a], lit) for a in range(3)], lit))
    vals = [m] + g
    for a, b in SYM3:             # Ibar'_ab = (T R^T)_ab + d 1_ab - u_a p_b - p_a g_b
        x = fsum([fmul(V[f"T{3 * a + c}"], Ri[3 * b + c], lit) for c in range(3)], lit)
        x = fadd(x, V["d"], lit) if a == b else x
        vals.append(fsub(fsub(x, fmul(u[a], p[b], lit), lit), fmul(p[a], g[b], lit), lit))
    IC[i] = [W.put(V, x) for x in vals]
    first, count = (int(x) for x in mm.body_dofs[i])
    for k in range(first, first + count):
        terms = [[] for _ in range(6)]
        for e in range(mm.s_ptr[k], mm.s_ptr[k + 1]):
            row, val = int(mm.s_row[e]), float(mm.s_val[e])
            off, c = 3 * (row // 3), row % 3      # angular rows -> J_w, linear -> J_v
            for a in range(3):
                terms[off + a].append(fmul(val, Ri[3 * a + c], lit))
        for a in range(3):
            V.set(f"c{a}", fsum(terms[a], lit))
        cross = _cross(("P0", "P1", "P2"), ("c0", "c1", "c2"),
                       {**{f"P{a}": p[a] for a in range(3)}, **{f"c{a}": V[f"c{a}"]
                                                                for a in range(3)}})
        J[k] = ([W.put(V, V[f"c{a}"]) for a in range(3)]
                + [W.put(V, fadd(fsum(terms[3 + a], lit), cross[a], lit)) for a in range(3)])


def _backward(i, jt, mm, W, IC, J, out):
    """Step 2 for body i: its DoFs' rows of M (out) and I^c_parent += I^c_i."""
    V = Locals(out, lit)
    m, h0, h1, h2, *S = IC[i]
    xx, xy, xz, yy, yz, zz = S
    first, count = (int(x) for x in mm.body_dofs[i])
    for k in range(first, first + count):
        w0, w1, w2, v0, v1, v2 = J[k]
        F = [fsum([fmul(xx, w0, lit), fmul(xy, w1, lit), fmul(xz, w2, lit),
                   fsub(fmul(h1, v2, lit), fmul(h2, v1, lit), lit)], lit),
             fsum([fmul(xy, w0, lit), fmul(yy, w1, lit), fmul(yz, w2, lit),
                   fsub(fmul(h2, v0, lit), fmul(h0, v2, lit), lit)], lit),
             fsum([fmul(xz, w0, lit), fmul(yz, w1, lit), fmul(zz, w2, lit),
                   fsub(fmul(h0, v1, lit), fmul(h1, v0, lit), lit)], lit),
             fsub(fmul(m, v0, lit), fsub(fmul(h1, w2, lit), fmul(h2, w1, lit), lit), lit),
             fsub(fmul(m, v1, lit), fsub(fmul(h2, w0, lit), fmul(h0, w2, lit), lit), lit),
             fsub(fmul(m, v2, lit), fsub(fmul(h0, w1, lit), fmul(h1, w0, lit), lit), lit)]
        for c in range(6):
            V.set(f"f{c}", F[c])
        F = [V[f"f{c}"] for c in range(6)]
        for e in range(mm.pair_ptr[k], mm.pair_ptr[k + 1]):
            x = fsum([fmul(J[int(mm.pair_col[e])][c], F[c], lit) for c in range(6)], lit)
            if e == mm.pair_ptr[k + 1] - 1 and mm.armature[k] != 0.0:    # H_kk += armature_k
                x = fadd(x, float(mm.armature[k]), lit)
            V.store(f"out[{e}]", x)
    par = int(jt.parent[i])
    if par >= 0:                                  # I^c_parent += I^c_i, same frame
        for c in range(10):
            if isinstance(IC[par][c], str) and W.refs[IC[par][c]] == 1:     # in place
                V.store(IC[par][c], fadd(IC[par][c], IC[i][c], lit))
            else:
                x = W.put(V, fadd(IC[par][c], IC[i][c], lit))
                W.release([IC[par][c]])
                IC[par][c] = x
    if par >= 0:                                  # body i is done: its I^c and J_k no longer
        W.release(IC[i])                          # read (a root's I^c: checked at the end)
    for k in range(first, first + count):
        W.release(J[k])


def crba_statements(program):
    """Steps 1-2 (the module doc) of a MassMatrixProgram for one state: CrbaStatements."""
    jt, mm, N = program.joints, program.arrays, program.nbodies
    W, R, P, IC, J = _Slots(), [None] * N, [None] * N, [None] * N, [None] * program.nv
    pieces = []
    last = {i: max([c for c in range(N) if jt.parent[c] == i], default=i) for i in range(N)}
    for i in range(N):
        pieces.append([f"  /* body {i} forward */"])
        _forward(i, jt, mm, W, R, P, IC, J, pieces[-1])
        for b in [b for b in range(i + 1) if last[b] == i]:    # no child reads R_b, p_b now
            W.release(R[b] + (P[b] if b != i else []))          # (a leaf's p: checked at the end)
    leaves = np.setdiff1d(np.arange(N), jt.parent)
    checked = [x for i in leaves for x in P[i] if isinstance(x, str)]
    for i in range(N - 1, -1, -1):
        pieces.append([f"  /* body {i} backward */"])
        _backward(i, jt, mm, W, IC, J, pieces[-1])
    checked += [x for i in range(N) if jt.parent[i] < 0 for x in IC[i] if isinstance(x, str)]
    lines = [line for piece in pieces for line in piece]
    mul = sum(line.count(" * ") for line in lines)
    add = sum(line.count(" + ") + line.count(" - ") for line in lines)
    return CrbaStatements(pieces, W.n, checked, mul, add)


class CrbaStatements(NamedTuple):
    """pieces: per body the lines of its forward step (body order), then of its backward one
    (reverse order), reading q[], writing out[] (the packed M) and w[0..n_slots); checked: the
    slots whose finiteness stands for every fold's (the module doc), as the last piece leaves
    them; mul, add: the multiplications and the additions (subtractions included) as generated,
    opcount's convention (sin and cos apart: not included; a sign flip is no operation)."""
    pieces: list
    n_slots: int
    checked: list
    mul: int
    add: int

    @property
    def flops(self):
        return self.mul + self.add


_SLOT = re.compile(r"w\[\d+\]")
