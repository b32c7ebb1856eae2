"""How the generated C reads for one state (lanes 1: C doubles) or for a vector of `lanes` states
(GCC/Clang vector extensions, the batch innermost as the numba kernels' lanes): the types, the
header of the vector types and their helpers, and the few statements whose form differs. Every
other statement of a unit is the same text on either type: +, -, *, / of a vector and a double
act lane by lane (the double broadcast), so each lane computes exactly what the one-state code
computes for its state.

Flags on vectors are masks (`vl`, -1 where true, 0 where false, as vector comparisons give them),
so a pivot check, a finiteness check or a quaternion check fails for the lanes it fails for.
"""
from __future__ import annotations

import functools
import os
import platform

from .c_fold import lit

#: the vector widths a unit may be generated for (SPARSEDYN_C_LANES)
LANE_CHOICES = (2, 4, 8, 16)


@functools.lru_cache(maxsize=None)
def cpu_description():
    """What -march=native compiles for: the CPU's model and feature-flag lines of /proc/cpuinfo
    (else the processor's and machine's names): part of every C library's cache key."""
    try:
        with open("/proc/cpuinfo") as fh:
            return "".join(sorted({line for line in fh if line.startswith(("model name", "flags"))}))
    except OSError:
        return platform.processor() + platform.machine()


@functools.lru_cache(maxsize=None)
def cpu_flags():
    """The CPU's feature flags (empty where /proc/cpuinfo is absent)."""
    line = next((ln for ln in cpu_description().splitlines() if ln.startswith("flags")), None)
    return frozenset(line.split(":", 1)[1].split()) if line else frozenset()


def cpu_vectors():
    """The widest double-precision vectors the CPU has ("AVX-512", "AVX2", "SSE2" or the
    machine's name): what -march=native gives the C units and Pinocchio's Eigen."""
    for flag, name in (("avx512f", "AVX-512"), ("avx2", "AVX2"), ("sse2", "SSE2")):
        if flag in cpu_flags():
            return name
    return platform.machine()


def native_lanes(environ=os.environ):
    """States per vector: $SPARSEDYN_C_LANES if set (one of LANE_CHOICES), else one register of
    doubles on AVX-512 (8) and 4 elsewhere. A vector wider than a register is split by the
    compiler into several, and the units' live values then no longer fit the registers: on AVX2
    8 states per vector ran every unit 1.25-2.7x slower than 4 (experiments/kernel_design.md)."""
    given = environ.get("SPARSEDYN_C_LANES")
    if given is None:
        return 8 if "avx512f" in cpu_flags() else 4
    try:
        lanes = int(given)
    except ValueError:
        lanes = None
    if lanes not in LANE_CHOICES:
        raise ValueError(f"SPARSEDYN_C_LANES={given!r}: states per C vector must be one of "
                         f"{', '.join(map(str, LANE_CHOICES))}")
    return lanes


#: states per vector of the C units (native_lanes; fixed at import: the units' sources, work
#: sizes and batch splits all read it)
LANES = native_lanes()


def vector_header(lanes):
    """The typedefs `vd` (lanes doubles) and `vl` (lanes longs: masks), SD_SPLAT(x) (x in every
    lane: a vector may not be assigned a double), sd_vabs (fabs lane by lane: the sign bit
    cleared) and sd_vbigger(x, cur) (x where x > cur, else cur: NaN keeps cur, as
    `if (x > cur) cur = x;` does)."""
    n = 8 * lanes
    return (f"typedef double vd __attribute__((vector_size({n})));\n"
            f"typedef long vl __attribute__((vector_size({n})));\n"
            "#define SD_SPLAT(x) ((vd){0.0} + (x))\n"
            "#define SD_SIGN ((vl){0} + (-9223372036854775807L - 1))\n"
            "static inline vd sd_vabs(vd x) { return (vd)((vl)x & ~SD_SIGN); }\n"
            "static inline vd sd_vbigger(vd x, vd cur)\n"
            "{ vl m = x > cur; return (vd)(((vl)x & m) | ((vl)cur & ~m)); }\n")


class Dialect:
    """The statement forms of a unit on `lanes` states: T the value type, F the flag type
    (int / vl), const(x) a constant as a stored value, abs(x) and the flag statements."""

    def __init__(self, lanes=1):
        self.lanes = lanes
        self.vector = lanes > 1
        self.T = "vd" if self.vector else "double"
        self.F = "vl" if self.vector else "int"
        self.zero_T = "{0.0}" if self.vector else "0.0"
        self.zero_F = "{0}" if self.vector else "0"

    def const(self, x):
        """A constant stored into a value of type T."""
        return f"SD_SPLAT({lit(x)})" if self.vector else lit(x)

    def const_of(self, x):
        """A double expression (a constant table's entry) as a value of type T."""
        return f"SD_SPLAT({x})" if self.vector else x

    def abs(self, x):
        return f"sd_vabs({x})" if self.vector else f"fabs({x})"

    def sincos(self, x):
        """sn, cs of x: libm's for one state (the exported unit, unchanged), else c_sincos's
        vector Cephes (kernels/assemble_numba.sincos's arithmetic, lane by lane)."""
        return (f"sd_sincos({x}, &sn, &cs);" if self.vector
                else f"sn = sin({x}); cs = cos({x});")

    def pivot_check(self):
        """A RECIP's statement: bad when |pivot| is not above tol times its row's scale (NaN
        included), then the reciprocal."""
        if self.vector:
            return ("  p = w[{a}]; bad |= ~(sd_vabs(p) > tol * (scale[{b}] + w[{t}])); "
                    "w[{t}] = 1.0 / p;")
        return "  p = w[{a}]; bad |= !(fabs(p) > tol * (scale[{b}] + w[{t}])); w[{t}] = 1.0 / p;"

    def bigger(self, x, cur):
        """`cur = max(cur, x)` as the scalar code's `if (x > cur) cur = x;`."""
        if self.vector:
            return f"{cur} = sd_vbigger({x}, {cur});"
        return f"if ({x} > {cur}) {cur} = {x};"

    def quaternion_check(self, c, tol, flag):
        """quat_bad = flag (per lane) when |q[c:c + 4]| differs from 1 by more than tol; the
        norm's sqrt lane by lane (a handful per state)."""
        if not self.vector:
            return [f"  mag = sqrt(q[{c}] * q[{c}] + q[{c + 1}] * q[{c + 1}] + q[{c + 2}] * "
                    f"q[{c + 2}] + q[{c + 3}] * q[{c + 3}]);",
                    f"  if (!(fabs(mag - 1.0) <= {tol})) quat_bad = {flag};"]
        sq = " + ".join(f"q[{c + k}][s] * q[{c + k}][s]" for k in range(4))
        return [f"  for (s = 0; s < {self.lanes}; s++) {{ double m1 = sqrt({sq});",
                f"    if (!(fabs(m1 - 1.0) <= {tol})) quat_bad[s] = {flag}; }}"]

    def status(self):
        """The returned code: 1 when bad (a flag that is nonzero), plus quat_bad."""
        return "(bad & 1) + quat_bad" if self.vector else "(bad ? 1 : 0) + quat_bad"
