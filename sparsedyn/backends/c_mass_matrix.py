"""C99 source of the compiled mass matrix (ir/mass_matrix.py): kernels/crba_numba.crba_lanes for
ONE state, with everything the program fixes offline turned into literals and folded at plan
time (c_fold): the root's placement (identity, no offset), each joint's rotation kind and basis,
S's nonzeros (a revolute joint's J_k is one column of R and its cross product with p), the body
inertias and their structural zeros. Featherstone, Table 6.2, every quantity in the root's frame
(the program's module doc); the same formulas in the same order as the numba kernel, less the
terms that are exactly zero at plan time.

Per state (w: the work array; out: the n_pairs nonzeros of M's lower triangle in the program's
pair order, as crba_numba's "packed" layout):
  1. forward over bodies: (E, r) = iX_lambda(i) (c_source._transform), R_i = R_p E^T,
     p_i = p_p + R_p r, I_i in the root frame (crba_numba's module doc, Table 2.5) and
     J_k = [R S_w; R S_v + p x (R S_w)] of the body's DoFs k;
  2. backward: F_k = I^c_i J_k, out[(k, j)] = J_j . F_k (+ armature on the diagonal),
     I^c_parent += I^c_i.
Returns 0 when the result is good; 1 when q, a body position (the leaves' stand for all:
p_child = p_p + R_p r keeps a non-finite p_p), a root's composite inertia (the sum of its
subtree's) or an output is not finite, i.e. when a fold's dropped `0 * x` could have been NaN
(c_fold) or M is not finite; +2 when a quaternion of q is not unit-norm.
"""
from __future__ import annotations

import re

import numpy as np

from ..batch import QUATERNION_TOL
from ..ir.assembly import ROT_QUAT
from ..ir.mass_matrix import SYM3
from ..kernels.assemble_numba import (SINCOS_RANGE, _C0, _C1, _C2, _C3, _C4, _C5, _DP1, _DP2,
                                      _DP3, _FOPI, _S0, _S1, _S2, _S3, _S4, _S5)
from .c_fold import Locals, fadd, fmul, fsub, fsum
from .c_source import BAD_QUATERNION, _chunked, _cross, _transform, lit

_LOCALS = ["  double sn, cs, qx, qy, qz, qw, R0, R1, R2, R3, R4, R5, R6, R7, R8;",
           "  double E0, E1, E2, E3, E4, E5, E6, E7, E8, r0, r1, r2;",
           "  double T0, T1, T2, T3, T4, T5, T6, T7, T8, u0, u1, u2, g0, g1, g2, d;",
           "  double f0, f1, f2, f3, f4, f5, c0, c1, c2;"]
_LOCALS.append("  " + " ".join(f"(void){x.strip(',;')};" for line in _LOCALS
                               for x in line.split()[1:]))


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
        P[i] = [W.put(V, fadd(P[par][a], fsum([fmul(Rp[3 * a + c], r[c], lit)
                                                for c in range(3)], lit), lit))
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
    for a, b in SYM3:                             # Ibar'_ab = (T R^T)_ab + d 1_ab - u_a p_b - p_a g_b
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
    W.release(IC[i])                              # body i is done: its I^c and J_k no longer read
    for k in range(first, first + count):
        W.release(J[k])


def mass_matrix_source(program, prefix, lanes=1):
    """(C source, work doubles, flops per state) of the one-state function
    `int prefix(q, out, w)` (the module doc) with its batch loop
    `void prefix_batch(B, q, out, status, w)`, or with lanes > 1 of the same statements on
    GCC/Clang vectors of `lanes` states (the batch innermost, as crba_numba's lanes) in
    `void prefix_batch(B, q, out, status, w)`; flops: the binary operations of steps 1-2 as
    generated (sin and cos apart, not included)."""
    jt, mm, N, nq = program.joints, program.arrays, program.nbodies, program.nq
    n_out = program.n_pairs
    W, R, P, IC, J = _Slots(), [None] * N, [None] * N, [None] * N, [None] * program.nv
    pieces = []
    last = {i: max([c for c in range(N) if jt.parent[c] == i], default=i) for i in range(N)}
    for i in range(N):
        pieces.append([f"  /* body {i} forward */"])
        _forward(i, jt, mm, W, R, P, IC, J, pieces[-1])
        for b in [b for b in range(i + 1) if last[b] == i]:    # no child reads R_b, p_b now
            W.release(R[b] + P[b])
    for i in range(N - 1, -1, -1):
        pieces.append([f"  /* body {i} backward */"])
        _backward(i, jt, mm, W, IC, J, pieces[-1])
    flops = sum(line.count(" * ") + line.count(" + ") + line.count(" - ")
                for piece in pieces for line in piece)
    T = "double" if lanes == 1 else "vd"
    if lanes > 1:                                 # libm's sin and cos lane by lane
        pieces = [[_CONST.sub(r"\1vzero + \2;", line) for line in piece] for piece in pieces]
    pieces = [[_SINCOS.sub(r"sd_sincos(\1, &sn, &cs);", line) for line in piece]
              for piece in pieces]
    helpers = []
    locals_ = [line.replace("double", T) for line in _LOCALS] + (
        [] if lanes == 1 else ["  int s; const vd vzero = {0.0}; (void)s; (void)vzero;"])
    calls = _chunked(f"{prefix}_part", pieces, f"const {T} *restrict q, {T} *restrict out, "
                     f"{T} *restrict w", locals_, "void", helpers)
    leaves = np.setdiff1d(np.arange(N), jt.parent)
    checked = ([f"q[{c}]" for c in range(nq)]
               + [x for i in leaves for x in P[i] if isinstance(x, str)]
               + [x for i in range(N) if jt.parent[i] < 0 for x in IC[i] if isinstance(x, str)]
               + [f"out[{e}]" for e in range(n_out)])
    body = [f"static {T} {prefix}_one(const {T} *restrict q, {T} *restrict out, "
            f"{T} *restrict w)", "{", f"  {T} acc = q[0] - q[0];"]
    body += [f"  {name}(q, out, w);" for name in calls]
    body += [f"  acc += {x} - {x};" for x in checked]         # NaN unless every x is finite
    body += ["  return acc;", "}"]
    # the batch: per state (or lane group) the packed M into pk (n_out + 1 values, the last a
    # constant zero), then out[b * width + dest[c]] = pk[src[c]] (ir/mass_matrix.py's gathers)
    batch = [f"void {prefix}_batch(long B, const double *q, double *out, long width, long G, "
             "const long *dest, const long *src, long *status, double *work)", "{",
             "  long b, s, c, m;"]
    if lanes == 1:
        body += [f"int {prefix}(const double *restrict q, double *restrict out, "
                 "double *restrict w)", "{", "  double mag; int quat_bad = 0; (void)mag;"]
        for i in np.flatnonzero(jt.rot_kind == ROT_QUAT):
            c = int(jt.rot_q[i])
            body.append(f"  mag = sqrt(q[{c}] * q[{c}] + q[{c + 1}] * q[{c + 1}] + q[{c + 2}] * "
                        f"q[{c + 2}] + q[{c + 3}] * q[{c + 3}]);")
            body.append(f"  if (!(fabs(mag - 1.0) <= {lit(QUATERNION_TOL)})) "
                        f"quat_bad = {BAD_QUATERNION};")
        body += [f"  return ({prefix}_one(q, out, w) != 0.0) + quat_bad;", "}"]
        body += batch + [f"  double *pk = work, *w = pk + {n_out + 1};", "  (void)s; (void)m;",
                         f"  pk[{n_out}] = 0.0;", "  for (b = 0; b < B; b++) {",
                         f"    status[b] = {prefix}(q + b * {nq}, pk, w);",
                         "    for (c = 0; c < G; c++) out[b * width + dest[c]] = pk[src[c]];",
                         "  }", "}"]
        head = []
    else:
        # a group's q transposed into work's first nq vectors; a partial group's idle lanes
        # repeat its first state (finite, never written out)
        body += batch + [f"  vd *qv = (vd *)work, *pk = qv + {nq}, *w = pk + {n_out + 1}, acc;",
                         f"  for (s = 0; s < {lanes}; s++) pk[{n_out}][s] = 0.0;",
                         f"  for (b = 0; b < B; b += {lanes}) {{",
                         f"    m = B - b < {lanes} ? B - b : {lanes};",
                         f"    for (c = 0; c < {nq}; c++)",
                         f"      for (s = 0; s < {lanes}; s++)",
                         f"        qv[c][s] = q[(b + (s < m ? s : 0)) * {nq} + c];",
                         f"    acc = {prefix}_one(qv, pk, w);",
                         "    for (s = 0; s < m; s++) status[b + s] = acc[s] != 0.0;",
                         "    for (c = 0; c < G; c++)",
                         "      for (s = 0; s < m; s++) out[(b + s) * width + dest[c]] = pk[src[c]][s];",
                         "  }", "}"]
        head = [f"typedef double vd __attribute__((vector_size({8 * lanes})));"]
    src = "\n".join(["#include <math.h>", ""] + head + [_sincos_source(lanes)] + helpers + [""] + body) + "\n"
    work = lanes * ((nq if lanes > 1 else 0) + n_out + 1 + W.n)
    return src, work, flops


def _sincos_source(lanes):
    """C of kernels/assemble_numba.sincos (Cephes, branch-free) for one value (lanes 1) or a
    vector of lanes, with libm's sin and cos for every lane when one is beyond SINCOS_RANGE
    (or not finite), as _sincos_lanes does."""
    k = dict(FOPI=_FOPI, DP1=_DP1, DP2=_DP2, DP3=_DP3, S0=_S0, S1=_S1, S2=_S2, S3=_S3, S4=_S4,
             S5=_S5, C0=_C0, C1=_C1, C2=_C2, C3=_C3, C4=_C4, C5=_C5, RANGE=SINCOS_RANGE)
    consts = "".join(f"#define SD_{name} {lit(v)}\n" for name, v in k.items())
    poly = ("  zz = z * z;\n"
            "  ps = z + z * zz * (((((SD_S0 * zz + SD_S1) * zz + SD_S2) * zz + SD_S3) * zz "
            "+ SD_S4) * zz + SD_S5);\n"
            "  pc = 1.0 - 0.5 * zz + zz * zz * (((((SD_C0 * zz + SD_C1) * zz + SD_C2) * zz "
            "+ SD_C3) * zz + SD_C4) * zz + SD_C5);\n")
    if lanes == 1:
        return consts + (
            "static void sd_sincos(double x, double *sn, double *cs)\n{\n"
            "  double ax = fabs(x), y, z, zz, ps, pc, a, b; long j, o;\n"
            "  if (!(ax < SD_RANGE)) { *sn = sin(x); *cs = cos(x); return; }\n"
            "  j = (long)(ax * SD_FOPI); j += j & 1; y = (double)j;\n"
            "  z = ((ax - y * SD_DP1) - y * SD_DP2) - y * SD_DP3;\n" + poly +
            "  o = j & 7;\n  a = (o & 2) ? pc : ps; b = (o & 2) ? ps : pc;\n"
            "  a = o >= 4 ? -a : a; b = (o == 2 || o == 4) ? -b : b;\n"
            "  *sn = x < 0 ? -a : a; *cs = b;\n}\n")
    return consts + (
        "typedef long vl __attribute__((vector_size(%d)));\n" % (8 * lanes) +
        "static void sd_sincos(vd x, vd *sn, vd *cs)\n{\n"
        "  const vl sign = {0}; vl neg = (vl)x < sign, m2, m4, mc;\n"
        "  vd ax = (vd)((vl)x & ~(sign + ((vl){0} + 1 << 63))), y, z, zz, ps, pc, a, b;\n"
        "  vl j, o; int s, big = 0;\n"
        "  for (s = 0; s < %d; s++) big |= !(ax[s] < SD_RANGE);\n" % lanes +
        "  if (big) { for (s = 0; s < %d; s++) { (*sn)[s] = sin(x[s]); (*cs)[s] = cos(x[s]); }\n"
        "             return; }\n" % lanes +
        "  j = __builtin_convertvector(ax * SD_FOPI, vl); j += j & 1;\n"
        "  y = __builtin_convertvector(j, vd);\n"
        "  z = ((ax - y * SD_DP1) - y * SD_DP2) - y * SD_DP3;\n" + poly +
        "  o = j & 7; m2 = (o & 2) != 0; m4 = o >= 4; mc = (o == 2) | (o == 4);\n"
        "  a = (vd)(((vl)pc & m2) | ((vl)ps & ~m2)); b = (vd)(((vl)ps & m2) | ((vl)pc & ~m2));\n"
        "  a = (vd)((vl)a ^ (m4 & ((vl){0} + 1 << 63))); b = (vd)((vl)b ^ (mc & ((vl){0} + 1 << 63)));\n"
        "  *sn = (vd)((vl)a ^ (neg & ((vl){0} + 1 << 63))); *cs = b;\n}\n")


_SLOT = re.compile(r"w\[\d+\]")
#: a constant stored into a vector slot (broadcast by adding it to a zero vector)
_CONST = re.compile(r"^(\s*(?:w|out)\[\d+\] = )([-+0-9.e]+|\(-[0-9.e+-]+\));$")
_SINCOS = re.compile(r"sn = sin\((q\[\d+\])\); cs = cos\(q\[\d+\]\);")
