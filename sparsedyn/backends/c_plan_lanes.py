"""The plan's C unit (c_source.solve_function) on GCC/Clang vectors of `lanes` states, for
batches: the same statements as the one-state unit on `vd` instead of `double` (c_vector), with
kernels/assemble_numba.sincos's vector Cephes (c_sincos) where the one-state unit calls libm,
so each lane's arithmetic is the numba kernel's. Interface (prefix P, kind "outputs" or
"full"):

    void P_kind_lanes(B, q, qd, y, out, [x,] broken, work, qc, qdc, yc)
        c_source's P_kind_batch on lanes: per state b, broken[b] the one-state unit's code
        (0 good, 1 re-solve, +2 a non-unit quaternion of q); qc, qdc, yc: NULL, or where q, qd
        and y are copied as they are read, broken[b] then + INPUT_NOT_FINITE (4) for a state
        whose q, qd or y holds NaN or inf
    void P_kind_lanes_threads(B, threads, work_stride, <P_kind_lanes's arguments>)
        the batch in `threads` ranges on an OpenMP team (c_team)
    int P_kind_lanes_openmp(void)
        1 where the unit was compiled with OpenMP

work: lanes_work(...) doubles per thread, caller-owned, 64-byte aligned. A group of lanes states
is transposed into work (state innermost), solved, and its outputs transposed back; a partial
group's idle lanes repeat its first state (finite when it is; their results are never written
out, and the flags are read per lane).
"""
from __future__ import annotations

from . import INPUT_NOT_FINITE
from .c_sincos import sincos_source
from .c_team import TEAM_HEADER, Param, team_function
from .c_source import Layout, solve_function, vector_unit_fits
from .c_vector import Dialect, vector_header


#: sd_stream_copy(d, s, n): n doubles from s to d by non-temporal stores where the target has
#: them: the copies are read again only by an on-demand pass, and stores that bypass the cache
#: skip reading the destination's lines first (the copies are the part of a call that is bound
#: by memory and shares it between threads); SD_STREAM_FENCE() orders them before the return
STREAM_COPY = """#if defined(__AVX512F__) || defined(__AVX__) || defined(__SSE2__)
#include <immintrin.h>
#define SD_STREAM_FENCE() _mm_sfence()
#if defined(__AVX512F__)
#define SD_STREAM_WIDTH 8
#define SD_STREAM(d, s) _mm512_stream_pd(d, _mm512_loadu_pd(s))
#elif defined(__AVX__)
#define SD_STREAM_WIDTH 4
#define SD_STREAM(d, s) _mm256_stream_pd(d, _mm256_loadu_pd(s))
#else
#define SD_STREAM_WIDTH 2
#define SD_STREAM(d, s) _mm_stream_pd(d, _mm_loadu_pd(s))
#endif
static void sd_stream_copy(double *d, const double *s, long n)
{
  long i = 0;
  while (i < n && ((unsigned long)(d + i) % (8 * SD_STREAM_WIDTH))) { d[i] = s[i]; i++; }
  for (; i + SD_STREAM_WIDTH <= n; i += SD_STREAM_WIDTH) SD_STREAM(d + i, s + i);
  for (; i < n; i++) d[i] = s[i];
}
#else
#define SD_STREAM_FENCE() ((void)0)
static void sd_stream_copy(double *d, const double *s, long n)
{
  long i;
  for (i = 0; i < n; i++) d[i] = s[i];
}
#endif
"""


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
            f"const double *y, double *out,{xarg} unsigned char *broken, double *work, "
            f"double *qc, double *qdc, double *yc)", "{",
            "  vd *base = (vd *)work;",
            *(f"  vd *{name} = base + {off};" for name, off in offsets.items()),
            f"  vl code; vd z[4]; long b, s, c, m, r;", "  (void)xv;",
            f"  for (b = 0; b < B; b += {lanes}) {{",
            f"    m = B - b < {lanes} ? B - b : {lanes};"]
    for name, src, width in (("qv", "q", nq), ("vv", "qd", nv), ("yv", "y", n_y)):
        body += [f"    for (s = 0; s < {lanes}; s++) {{",
                 f"      r = (b + (s < m ? s : 0)) * {width};",
                 f"      for (c = 0; c < {width}; c++) {name}[c][s] = {src}[r + c];", "    }"]
    body.append(f"    code = {prefix}_{kind}_vone(qv, vv, yv, ov, {'xv' if full else '(vd *)0'},"
                f" base + {at});")
    body.append("    for (s = 0; s < m; s++) broken[b + s] = (unsigned char)code[s];")
    # the caller's private copies of the inputs, written from the rows just read (still in
    # cache), and a state whose inputs are not all finite flagged INPUT_NOT_FINITE: x - x is 0
    # for finite x and NaN for inf and NaN, summed over the transposed inputs (a lane per
    # state) into four accumulators (one would chain every add on the last one's latency)
    body += ["    if (qc) {"]
    for src, dst, width in (("q", "qc", nq), ("qd", "qdc", nv), ("y", "yc", n_y)):
        body.append(f"      sd_stream_copy({dst} + b * {width}, {src} + b * {width}, m * {width});")
    body.append("      z[0] = z[1] = z[2] = z[3] = SD_SPLAT(0.0);")
    k = 0
    for name, width in (("qv", nq), ("vv", nv), ("yv", n_y)):
        for c in range(width):
            body.append(f"      z[{k % 4}] += {name}[{c}] - {name}[{c}];")
            k += 1
    body += ["      z[0] = (z[0] + z[1]) + (z[2] + z[3]);",
             "      for (s = 0; s < m; s++)",
             f"        if (z[0][s] != 0.0) broken[b + s] |= {INPUT_NOT_FINITE};", "    }"]
    for name, dst, width in (("ov", "out", n_out), ("xv", "x", n_x)):
        if width:
            body += ["    for (s = 0; s < m; s++)",
                     f"      for (c = 0; c < {width}; c++) {dst}[(b + s) * {width} + c] = "
                     f"{name}[c][s];"]
    body += ["  }", "  if (qc) SD_STREAM_FENCE();", "}", ""]
    params = [Param("const double *", "q", nq), Param("const double *", "qd", nv),
              Param("const double *", "y", n_y), Param("double *", "out", n_out)]
    params += [Param("double *", "x", n_x)] if full else []
    params += [Param("unsigned char *", "broken", 1), Param("double *", "work", "work")]
    params += [Param("double *", name, width, nullable=True)
               for name, width in (("qc", nq), ("qdc", nv), ("yc", n_y))]
    body += team_function(f"{prefix}_{kind}_lanes", f"{prefix}_{kind}_lanes", params, lanes)
    return "\n".join(["#include <math.h>", TEAM_HEADER, vector_header(lanes), STREAM_COPY,
                      sincos_source(lanes), *tables, one, "", *body]) + "\n"
