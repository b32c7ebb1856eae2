"""The dynamics derivatives in C (issue #22), on vectors of LANES states: one library per model
and kind, built on first use by generated_c.build (cached by source, compiler, flags and CPU).

    kind "inverse":  dtau/dq, dtau/dv, dtau/dqdd = M at (q, v, qdd)
    kind "forward":  dqdd/dq = -M^-1 dtau/dq, dqdd/dv = -M^-1 dtau/dv, dqdd/dtau = M^-1 at
                     (q, v, qdd*), qdd* forward dynamics' solution (Carpentier and Mansard's
                     identity, problems/plan_derivatives.py)

Per lane group (work: the returned number of doubles, caller-owned, 64-byte aligned):
  1. the group's q, v, qdd transposed into vectors (idle lanes of a partial group repeat its
     first state); c_rnea_derivatives' statements write dtau/dq and dtau/dv into Y (nv rows
     of 2 nv columns, 3 nv for "forward" and negated there, padded to a multiple of 8) and M's
     packed nonzeros into pk;
  2. "forward": M = L^T L in place on pk (Featherstone Table 6.3, the program's factor arrays;
     a pivot not above tol |M_kk| flags the state), then Y <- L^-1 L^-T Y on the columns
     [-dtau/dq, -dtau/dv, I] (kernels/ltl_derivatives.py's passes: in L^-T's pass the
     identity's column j is nonzero only at j's ancestors, so row i touches columns i..last(i));
  3. the outputs per state (M and M^-1 both triangles), status[b] 1 when a value of the state
     is not finite or a pivot failed, else 0.

    void P_batch(B, q, v, a, x, out0, out1, out2, status, work), P_batch_threads (c_team)
        x: the external wrenches (B, 6 n_fx), body frames, angular-first (c_rnea_derivatives)
"""
from __future__ import annotations

import ctypes
import os
import re
import threading

import numpy as np

from ..recursive.aba import SINGULAR_TOLERANCE
from ..recursive._common import gravity_acceleration
from ..recursive.ltl import pattern as ltl_pattern
from .c_fold import lit
from .c_mass_matrix_unit import _LOCALS
from .c_rnea_derivatives import derivative_statements
from .c_sincos import sincos_source
from .c_source import _chunked
from .c_team import TEAM_HEADER, Param, team_function
from .c_vector import LANES, vector_header
from .generated_c import (CFLAGS_LONG, aligned, build, library_path, openmp_flags, split_run,
                          team_run)

#: the units: inverse dynamics' derivatives, forward dynamics' (the module doc)
KINDS = ("inverse", "forward")
_CONST = re.compile(r"^(\s*(?:w|pk|Y)\[\d+\] = )([-+0-9.e]+|\(-[0-9.e+-]+\));$")
_SINCOS = re.compile(r"sn = sin\((q\[\d+\])\); cs = cos\(q\[\d+\]\);")
_P = ctypes.c_void_p
#: columns of Y per block of step 2's passes (a multiple of 8): a block's nv rows stay in the
#: L1 cache through both passes (experiments/kernel_design.md)
SOLVE_COLUMNS = 16


def derivatives_source(program, model, kind, fx_bodies=(), prefix="sdd", lanes=LANES):
    """(C source, work doubles per group, flops of step 1 per state) of a MassMatrixProgram's
    unit (the module doc); fx_bodies: the bodies (ascending) with an external wrench."""
    nq, nv, n_pairs = program.nq, program.nv, program.n_pairs
    nx = 6 * len(fx_bodies)
    forward = kind == "forward"
    width = -(-(3 if forward else 2) * nv // 8) * 8    # Y's rows: a multiple of 8 (step 2)

    def store(what, m, j, expr):
        col = j if what == "dq" else nv + j
        if isinstance(expr, float):
            expr = lit(-expr if forward else expr)
        elif forward:
            expr = f"-({expr})"
        return f"    Y[{m * width + col}] = {expr};"

    stm = derivative_statements(program, gravity_acceleration(model, 1)[0], store,
                                tuple(fx_bodies))
    pieces = [[_SINCOS.sub(r"sd_sincos(\1, &sn, &cs);", _CONST.sub(r"\1vzero + \2;", line))
               for line in piece] for piece in stm.pieces]
    helpers = []
    locals_ = [line.replace("double", "vd") for line in _LOCALS] + [
        "  int s; const vd vzero = {0.0}; (void)s; (void)vzero;"]
    calls = _chunked(f"{prefix}_part", pieces,
                     "const vd *restrict q, const vd *restrict v, const vd *restrict a, "
                     "const vd *restrict x, vd *restrict pk, vd *restrict Y, vd *restrict w",
                     locals_, "void", helpers)
    n_y = nv * width
    body = [f"static void {prefix}_group(const vd *q, const vd *v, const vd *a, const vd *x, "
            "vd *pk, vd *Y, vd *w, vd *acc, vl *bad)", "{", "  long c, s; (void)s;"]
    if forward:                                 # Y = 0 but the identity block (step 1)
        body += [f"  for (c = 0; c < {n_y}; c++) Y[c] = (vd){{0.0}};",
                 f"  for (c = 0; c < {nv}; c++) Y[c * {width + 1} + {2 * nv}] += 1.0;"]
    body += [f"  {name}(q, v, a, x, pk, Y, w);" for name in calls]
    body += [f"  *acc += {x} - {x};" for x in stm.checked]
    if forward:
        tables, solve = _solve_lines(program, ltl_pattern(model), width)
        helpers += tables
        body += _factor_lines(program) + solve
    body += ["  {", "  vd z0 = *acc, z1 = {0.0}, z2 = {0.0}, z3 = {0.0};",   # 4 add chains
             f"  for (c = 0; c < {n_y}; c += 4) {{ z0 += Y[c] - Y[c]; z1 += Y[c + 1] - Y[c + 1]; "
             "z2 += Y[c + 2] - Y[c + 2]; z3 += Y[c + 3] - Y[c + 3]; }",
             f"  for (c = 0; c < {n_pairs}; c++) z0 += pk[c] - pk[c];",
             "  *acc = (z0 + z1) + (z2 + z3);", "  }", "}", ""]
    nn = nv * nv
    body += [f"void {prefix}_batch(long B, const double *q, const double *v, const double *a, "
             "const double *x, double *o0, double *o1, double *o2, long *status, double *work)",
             "{", "  long b, s, c, k, m, t;",
             f"  vd *qv = (vd *)work, *vv = qv + {nq}, *av = vv + {nv}, *xv = av + {nv}, "
             f"*pk = xv + {nx}, *Y = pk + {n_pairs + 1}, *w = Y + {n_y}, acc;", "  vl bad;",
             "  (void)x; (void)xv;",
             f"  for (s = 0; s < {lanes}; s++) pk[{n_pairs}][s] = 0.0;"]
    # "inverse" writes only the pairs' entries: the zeros around them are set once a call
    # ("forward" sets Y per group: step 1)
    if not forward:
        body.append(f"  for (c = 0; c < {n_y}; c++) Y[c] = (vd){{0.0}};")
    body += [f"  for (b = 0; b < B; b += {lanes}) {{",
             f"    m = B - b < {lanes} ? B - b : {lanes};",
             f"    for (s = 0; s < {lanes}; s++) {{",
             "      t = b + (s < m ? s : 0);",
             f"      for (c = 0; c < {nq}; c++) qv[c][s] = q[t * {nq} + c];",
             f"      for (c = 0; c < {nv}; c++) {{ vv[c][s] = v[t * {nv} + c]; "
             f"av[c][s] = a[t * {nv} + c]; }}",
             f"      for (c = 0; c < {nx}; c++) xv[c][s] = x[t * {nx} + c];", "    }",
             "    acc = (vd){0.0}; bad = (vl){0};",
             f"    {prefix}_group(qv, vv, av, xv, pk, Y, w, &acc, &bad);",
             "    for (s = 0; s < m; s++) status[b + s] = (acc[s] != 0.0) | (bad[s] != 0);",
             f"    for (k = 0; k < {nv}; k++)",      # row by row: Y's row stays in L1
             "      for (s = 0; s < m; s++) {",
             f"        double *d0 = o0 + (b + s) * {nn} + k * {nv}, "
             f"*d1 = o1 + (b + s) * {nn} + k * {nv}, *d2 = o2 + (b + s) * {nn} + k * {nv};",
             f"        const vd *y = Y + k * {width};", "        (void)d2;",
             f"        for (c = 0; c < {nv}; c++) {{ d0[c] = y[c][s]; d1[c] = y[{nv} + c][s]; }}"]
    if forward:                                 # M^-1: the upper triangle, then mirrored
        body += [f"        for (c = k; c < {nv}; c++) d2[c] = y[{2 * nv} + c][s];", "      }",
                 "    for (s = 0; s < m; s++) {",
                 f"      double *d2 = o2 + (b + s) * {nn};",
                 f"      for (k = 1; k < {nv}; k++)",
                 f"        for (c = 0; c < k; c++) d2[k * {nv} + c] = d2[c * {nv} + k];", "    }"]
    else:
        slots = ", ".join(str(int(x)) for x in program.arrays.full_slot)
        body += ["      }", "    for (s = 0; s < m; s++)",
                 f"      for (c = 0; c < {nn}; c++) "
                 f"o2[(b + s) * {nn} + c] = pk[{prefix}_full[c]][s];"]
        helpers.append(f"static const int {prefix}_full[{nn}] = {{{slots}}};")
    body += ["  }", "}", ""]
    body += team_function(f"{prefix}_batch", f"{prefix}_batch", [
        Param("const double *", "q", nq), Param("const double *", "v", nv),
        Param("const double *", "a", nv), Param("const double *", "x", nx),
        Param("double *", "o0", nn),
        Param("double *", "o1", nn), Param("double *", "o2", nn), Param("long *", "status", 1),
        Param("double *", "work", "work")], lanes)
    src = "\n".join(["#include <math.h>", "", TEAM_HEADER, vector_header(lanes),
                     sincos_source(lanes)] + helpers + [""] + body) + "\n"
    work = lanes * (nq + 2 * nv + nx + n_pairs + 1 + n_y + stm.n_slots)
    return src, work, stm.mul + stm.add


def _factor_lines(program):
    """Step 2's L^T L on pk (Table 6.3: k = n..1; H_kk = sqrt(H_kk), pivot checked against the
    diagonal before the factorisation; H_ki /= H_kk; H_ij -= H_ki H_kj)."""
    fa, tol = program.factor_arrays, lit(SINGULAR_TOLERANCE)
    lines = ["  {", f"  vd dg[{program.nv}];"]
    lines += [f"  dg[{k}] = pk[{int(fa.piv[k])}];" for k in range(program.nv)]
    for k in (int(x) for x in fa.order):
        p = int(fa.piv[k])
        lines.append(f"  *bad |= ~(pk[{p}] > {tol} * dg[{k}]);")
        lines.append(f"  for (s = 0; s < {LANES}; s++) pk[{p}][s] = sqrt(pk[{p}][s]);")
        lines += [f"  pk[{int(x)}] /= pk[{p}];"
                  for x in fa.anc_slot[fa.anc_ptr[k]:fa.anc_ptr[k + 1]]]
        lines += [f"  pk[{int(d)}] -= pk[{int(x)}] * pk[{int(y)}];" for d, x, y in zip(
            fa.upd_dest[fa.upd_ptr[k]:fa.upd_ptr[k + 1]], fa.upd_a[fa.upd_ptr[k]:fa.upd_ptr[k + 1]],
            fa.upd_b[fa.upd_ptr[k]:fa.upd_ptr[k + 1]])]
    return lines + ["  }"]


def _solve_lines(program, pat, width):
    """(tables, lines) of step 2's Y <- L^-1 L^-T Y (kernels/ltl_derivatives.py's two passes on
    rows of `width`, a multiple of 8) as gathers, L's branch-induced sparsity (Featherstone
    Sec. 6.5) read from tables:
        L^-T (i = n..1):  y_i = (y_i - sum_{k in desc(i)} L_ki y_k) / L_ii
        L^-1 (i = 1..n):  y_i = (y_i - sum_{j in anc(i)} L_ij y_j) / L_ii
    A row's block of 8 columns stays in registers (8 independent chains of multiply-adds) while
    the rows it depends on are subtracted, and is stored once; the columns go in blocks of
    SOLVE_COLUMNS, both passes over all rows per block, so the rows read stay in the L1 cache.
    A row computes only the blocks of 8 columns where its entries can be nonzero: in L^-T's
    pass, row i's columns of directions j related to i (j in anc(i) or i's subtree: -dtau/dq and
    -dtau/dv are zero elsewhere, and L^-T only reaches ancestors) and the identity's columns
    i..last(i) (i's subtree); in L^-1's pass every column of the directions and M^-1's upper
    triangle (columns >= i; it reads the ancestors' columns >= i only; the unit mirrors it).
    Any other column of such a block is an exact zero in and out (0 - L 0)."""
    nv, lower = program.nv, program.arrays.lower_slot.reshape(program.nv, -1)
    last, anc = pat.last, [a.tolist() for a in pat.ancestors]       # (nearest ancestor first)
    desc = [[k for k in range(nv) if i in anc[k]] for i in range(nv)]
    n2 = 2 * nv
    related = [sorted(set(anc[i]) | set(range(i, int(last[i]) + 1))) for i in range(nv)]
    # per pass, per row in order: the blocks of 8 columns it computes (one flag per block),
    # its dependencies (row, L's slot)
    rows, masks, ptr, dep_row, dep_slot = [], [], [0], [], []
    blocks = width // 8

    def mask(columns):
        on = {c // 8 for c in columns}
        return [int(b in on) for b in range(blocks)]
    for i in range(nv - 1, -1, -1):
        rows.append(i)
        masks += (mask(related[i] + [nv + j for j in related[i]]
                          + list(range(n2 + i, n2 + int(last[i]) + 1))))
        dep_row += desc[i]
        dep_slot += [int(lower[k, i]) for k in desc[i]]
        ptr.append(len(dep_row))
    for i in range(nv):
        rows.append(i)
        masks += (mask(list(range(n2)) + list(range(n2 + i, n2 + nv))))
        dep_row += anc[i]
        dep_slot += [int(lower[i, j]) for j in anc[i]]
        ptr.append(len(dep_row))
    tables = [_table("sd_rows", rows), _table("sd_ptr", ptr),
              _table("sd_dep", [r * width for r in dep_row] or [0]),
              _table("sd_slot", dep_slot or [0]), _table("sd_on", masks, "unsigned char")]
    t = [f"t{e}" for e in range(8)]
    lines = ["  {", f"  vd {', '.join(t)}, rd[{nv}], f; const vd *p; long b0, x, i;"]
    lines += [f"  rd[{i}] = 1.0 / pk[{int(lower[i, i])}];" for i in range(nv)]
    lines += [f"  for (b0 = 0; b0 < {blocks}; b0 += {SOLVE_COLUMNS // 8}) {{",
              f"    for (x = 0; x < {len(rows)}; x++) {{",
              "      i = sd_rows[x];",
              f"      for (c = b0; c < b0 + {SOLVE_COLUMNS // 8} && c < {blocks}; c++) {{",
              f"        vd *y = Y + i * {width} + 8 * c;",
              f"        if (!sd_on[x * {blocks} + c]) continue;",
              "        " + " ".join(f"{v} = y[{k}];" for k, v in enumerate(t)),
              "        for (s = sd_ptr[x]; s < sd_ptr[x + 1]; s++) {",
              f"          f = pk[sd_slot[s]]; p = y + sd_dep[s] - i * {width};",
              "          " + " ".join(f"{v} -= f * p[{k}];" for k, v in enumerate(t)),
              "        }",
              "        " + " ".join(f"y[{k}] = {v} * rd[i];" for k, v in enumerate(t)),
              "      }", "    }", "  }", "  }"]
    return tables, lines


def _table(name, values, ctype="int"):
    return (f"static const {ctype} {name}[{len(values)}] = "
            f"{{{', '.join(str(int(v)) for v in values)}}};")


def _flags():
    """-O1 (generated_c.CFLAGS_LONG: ~10^4 long statements; as fast as -O2 here, compiled in
    two thirds of its time) and OpenMP where the compiler has it."""
    return CFLAGS_LONG + openmp_flags()


class CDerivatives:
    """run(q, v, a, out, threads) -> status (B,): the unit of one model and kind into out
    (3, B, nv, nv)."""

    def __init__(self, program, model, kind, fx_bodies=()):
        if kind not in KINDS:
            raise ValueError(f"kind: expected one of {KINDS}, got {kind!r}")
        self.program, self.model, self.kind = program, model, kind
        self.fx_bodies = tuple(int(b) for b in fx_bodies)
        self._src, self._lib, self._lock = None, None, threading.Lock()
        self._local = threading.local()

    def source(self):
        if self._src is None:
            self._src = derivatives_source(self.program, self.model, self.kind,
                                           self.fx_bodies)
        return self._src

    def ready(self):
        """Is the library loaded or in the cache (no compiler run)?"""
        return self._lib is not None or os.path.exists(library_path(self.source()[0],
                                                                    _flags()))

    def library(self):
        """(batch function, its OpenMP team entry or None), the library built on first use."""
        with self._lock:
            if self._lib is None:
                lib = ctypes.CDLL(build(self.source()[0], _flags()))
                args = [ctypes.c_long] + [_P] * 9
                fn, team = lib.sdd_batch, None
                fn.argtypes, fn.restype = args, None
                if lib.sdd_batch_openmp():
                    team = lib.sdd_batch_threads
                    team.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_long] + args[1:]
                    team.restype = None
                self._lib = fn, team, lib
            return self._lib[:2]

    def _work(self, n):
        pool = getattr(self._local, "work", None)
        if pool is None or pool[0].size < n:
            a = aligned(n)
            pool = self._local.work = (a, a.ctypes.data)
        return pool[1]

    def run(self, q, v, a, out, threads=1, fx=None):
        """status (B,) of the derivatives at checked q (B, nq), v, a (B, nv) and the external
        wrenches fx (B, len(fx_bodies), 6) (body frames, angular-first; None: none) into out
        (3, B, nv, nv) C-contiguous float64, 0 good, 1 flagged (the module doc). One state runs
        on a vector's idle lanes too: a vector of 1 costs about what a vector of LANES does
        (kernel_design.md)."""
        q, v, a = (np.ascontiguousarray(x, dtype=np.float64) for x in (q, v, a))
        B, nq, nv, nx = q.shape[0], self.program.nq, self.program.nv, 6 * len(self.fx_bodies)
        fx = np.zeros(1) if not nx else np.ascontiguousarray(fx, dtype=np.float64).reshape(B, nx)
        status = np.zeros(B, dtype=np.int64)
        if B == 0:
            return status
        fn, team = self.library()
        work = self.source()[1]
        ptrs = [x.ctypes.data for x in (q, v, a, fx, out[0], out[1], out[2], status)]
        if team is not None:
            team_run(team, B, threads, work, self._work, lambda w: (*ptrs, w))
            return status
        stride = -(-work // 8) * 8
        sizes = (nq, nv, nv, nx, nv * nv, nv * nv, nv * nv, 1)

        def call(lo, hi, w):
            fn(hi - lo, *[p + 8 * lo * n for p, n in zip(ptrs, sizes)], w)
        split_run(B, threads, lambda k: [self._work(k * stride) + 8 * t * stride
                                         for t in range(k)], call)
        return status
