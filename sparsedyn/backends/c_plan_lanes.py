"""The plan's C unit (c_source.solve_function) on GCC/Clang vectors of `lanes` states, for
batches: the same statements as the one-state unit on `vd` instead of `double` (c_vector), with
kernels/assemble_numba.sincos's vector Cephes (c_sincos) where the one-state unit calls libm,
so each lane's arithmetic is the numba kernel's. Interface (prefix P, kind "outputs" or
"full"):

    void P_kind_lanes(B, q, qd, y, out, [x,] broken, work)
        c_source's P_kind_batch on lanes: per state b, broken[b] the one-state unit's code
        (0 good, 1 re-solve, +2 a non-unit quaternion of q)

work: lanes_work(...) doubles, caller-owned, 64-byte aligned. A group of lanes states is
transposed into work (state innermost), solved, and its outputs transposed back; a partial
group's idle lanes repeat its first state (finite when it is; their results are never written
out, and the flags are read per lane).
"""
from __future__ import annotations

from .c_sincos import sincos_source
from .c_source import Layout, solve_function, vector_unit_fits
from .c_vector import Dialect, vector_header


def fits(ir):
    """Does every kind of call of the FusedProgram have a vector unit (vector_unit_fits)?"""
    return all(vector_unit_fits(ir.schedule(full)) for full in (False, True))


def _sizes(ir, kind):
    """(nq, nv, n_y, n_out, n_x, Layout) of one kind of call."""
    a, n = ir.assembly, ir.program.n
    sch = ir.schedule(kind == "full")
    return (a.nq, a.nv, sch.dest.y.size, sch.out_slot.size, n if kind == "full" else 0,
            Layout(sch, a.nbodies, n))


def lanes_work(ir, kind, lanes):
    """Doubles of the work array of P_kind_lanes: the group's transposed inputs and outputs,
    then the unit's work, lanes values each."""
    *parts, layout = _sizes(ir, kind)
    return lanes * (sum(parts) + layout.size)


def lanes_source(ir, prefix, kind, lanes):
    """C source of P_kind_lanes (the module doc) for a FusedProgram that fits()."""
    nq, nv, n_y, n_out, n_x, layout = _sizes(ir, kind)
    sch, tables = ir.schedule(kind == "full"), []
    a = ir.assembly
    one = solve_function(f"{prefix}_{kind}_vone", sch, ir.program.col_perm, ir.program.tol,
                         nq, nv, a.nbodies, layout, tables, Dialect(lanes))
    full = kind == "full"
    xarg = " double *x," if full else ""
    offsets, at = {}, 0
    for name, size in (("qv", nq), ("vv", nv), ("yv", n_y), ("ov", n_out), ("xv", n_x)):
        offsets[name], at = at, at + size
    body = [f"void {prefix}_{kind}_lanes(long B, const double *q, const double *qd, "
            f"const double *y, double *out,{xarg} unsigned char *broken, double *work)", "{",
            "  vd *base = (vd *)work;",
            *(f"  vd *{name} = base + {off};" for name, off in offsets.items()),
            f"  vl code; long b, s, c, m, r;", "  (void)xv;",
            f"  for (b = 0; b < B; b += {lanes}) {{",
            f"    m = B - b < {lanes} ? B - b : {lanes};"]
    for name, src, width in (("qv", "q", nq), ("vv", "qd", nv), ("yv", "y", n_y)):
        body += [f"    for (s = 0; s < {lanes}; s++) {{",
                 f"      r = (b + (s < m ? s : 0)) * {width};",
                 f"      for (c = 0; c < {width}; c++) {name}[c][s] = {src}[r + c];", "    }"]
    body.append(f"    code = {prefix}_{kind}_vone(qv, vv, yv, ov, {'xv' if full else '(vd *)0'},"
                f" base + {at});")
    body.append("    for (s = 0; s < m; s++) broken[b + s] = (unsigned char)code[s];")
    for name, dst, width in (("ov", "out", n_out), ("xv", "x", n_x)):
        if width:
            body += ["    for (s = 0; s < m; s++)",
                     f"      for (c = 0; c < {width}; c++) {dst}[(b + s) * {width} + c] = "
                     f"{name}[c][s];"]
    body += ["  }", "}"]
    return "\n".join(["#include <math.h>", "", vector_header(lanes), sincos_source(lanes),
                      *tables, one, "", *body]) + "\n"
