"""The C unit of the compiled mass matrix (c_mass_matrix.crba_statements) for one state at a time
or, with lanes > 1, for vectors of `lanes` states (GCC/Clang vector extensions: the batch
innermost, as kernels/crba_numba's lanes; the same statements on `vd` instead of `double`):

    int P(q, out, w)                     one state (lanes 1): out the packed M (n_pairs)
    int P_dense(q, M, work)              one state (lanes 1) into M (nv * nv, both triangles):
                                         its structural zeros are not written
    void P_batch(B, q, out, width, G, dest, src, status, work)
        per state b: out[b * width + dest[c]] = M's packed nonzeros[src[c]], c < G, (slot
        n_pairs: a zero; ir/mass_matrix.py's gathers), status[b] 0 good, 1 not finite (q, a
        fold's precondition or M: c_mass_matrix), +2 (lanes 1) a non-unit quaternion of q
    void P_batch_threads(B, threads, work_stride, <P_batch's arguments>), int P_batch_openmp()
        (lanes > 1) the batch on an OpenMP team (c_team)

work: the returned number of doubles, caller-owned, 64-byte aligned for vectors; no globals, no
allocation: calls on different work arrays may run concurrently.
"""
from __future__ import annotations

import re

import numpy as np

from ..batch import QUATERNION_TOL
from ..ir.assembly import ROT_QUAT
from .c_mass_matrix import crba_statements
from .c_sincos import sincos_source
from .c_fold import lit
from .c_source import BAD_QUATERNION, _chunked
from .c_team import TEAM_HEADER, Param, team_function
from .c_vector import vector_header

_LOCALS = ["  double sn, cs, qx, qy, qz, qw, R0, R1, R2, R3, R4, R5, R6, R7, R8;",
           "  double E0, E1, E2, E3, E4, E5, E6, E7, E8, r0, r1, r2;",
           "  double T0, T1, T2, T3, T4, T5, T6, T7, T8, u0, u1, u2, g0, g1, g2, d;",
           "  double f0, f1, f2, f3, f4, f5, c0, c1, c2;"]
_LOCALS.append("  " + " ".join(f"(void){x.strip(',;')};" for line in _LOCALS
                               for x in line.split()[1:]))
#: a constant stored into a vector slot (broadcast by adding it to a zero vector)
_CONST = re.compile(r"^(\s*(?:w|out)\[\d+\] = )([-+0-9.e]+|\(-[0-9.e+-]+\));$")
_SINCOS = re.compile(r"sn = sin\((q\[\d+\])\); cs = cos\(q\[\d+\]\);")


def mass_matrix_source(program, prefix, lanes=1):
    """(C source, work doubles, flops per state) of the unit (the module doc) of a
    MassMatrixProgram; flops: c_mass_matrix.CrbaStatements.flops."""
    nq, n_out = program.nq, program.n_pairs
    st = crba_statements(program)
    pieces = st.pieces
    T = "double" if lanes == 1 else "vd"
    if lanes > 1:
        pieces = [[_CONST.sub(r"\1vzero + \2;", line) for line in piece] for piece in pieces]
    pieces = [[_SINCOS.sub(r"sd_sincos(\1, &sn, &cs);", line) for line in piece]
              for piece in pieces]
    helpers = []
    locals_ = [line.replace("double", T) for line in _LOCALS] + (
        [] if lanes == 1 else ["  int s; const vd vzero = {0.0}; (void)s; (void)vzero;"])
    calls = _chunked(f"{prefix}_part", pieces, f"const {T} *restrict q, {T} *restrict out, "
                     f"{T} *restrict w", locals_, "void", helpers)
    checked = [f"q[{c}]" for c in range(nq)] + st.checked + [f"out[{e}]" for e in range(n_out)]
    body = [f"static {T} {prefix}_one(const {T} *restrict q, {T} *restrict out, "
            f"{T} *restrict w)", "{", f"  {T} acc = {{0.0}};"]
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
        jt = program.joints
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
        # one state into a dense M whose zeros the caller keeps (plan.solver()): three
        # pointers, the call's cost from Python
        nv = program.nv
        body += [f"int {prefix}_dense(const double *q, double *M, double *work)", "{",
                 f"  double *pk = work, *w = pk + {n_out + 1};",
                 f"  int status = {prefix}(q, pk, w);"]
        for e, (k, j) in enumerate(zip(*program.dof_pairs)):
            body.append(f"  M[{k * nv + j}] = pk[{e}];" if k == j else
                        f"  M[{k * nv + j}] = M[{j * nv + k}] = pk[{e}];")
        body += ["  return status;", "}"]
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
                         "      for (s = 0; s < m; s++)",
                         "        out[(b + s) * width + dest[c]] = pk[src[c]][s];",
                         "  }", "}", ""]
        body += team_function(f"{prefix}_batch", f"{prefix}_batch", [
            Param("const double *", "q", nq), Param("double *", "out", "width"),
            Param("long", "width"), Param("long", "G"), Param("const long *", "dest"),
            Param("const long *", "src"), Param("long *", "status", 1),
            Param("double *", "work", "work")], lanes)
        head = [TEAM_HEADER, vector_header(lanes)]
    src = "\n".join(["#include <math.h>", ""] + head + [sincos_source(lanes)] + helpers + [""]
                    + body) + "\n"
    return src, lanes * ((nq if lanes > 1 else 0) + n_out + 1 + st.n_slots), st.flops


