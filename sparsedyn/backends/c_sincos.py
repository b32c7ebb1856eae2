"""C source of kernels/assemble_numba.sincos (Cephes' sin.c and cos.c, branch-free) for the
generated C (c_mass_matrix_unit.py, c_plan_lanes.py): the same constants and operations in the
same order, so a generated kernel's sin and cos equal the numba kernels' (|error| ~ 1 ulp for
|x| < SINCOS_RANGE; libm's sin and cos beyond, or for a non-finite x). With lanes > 1 on GCC/Clang
vectors `vd` of that many doubles (after c_vector.vector_header's typedefs of `vd` and `vl`), the
octant's selections as bit masks: libm would cost a call per lane, as much as the rest of a
revolute body's kinematics.
"""
from __future__ import annotations

from ..kernels.assemble_numba import (SINCOS_RANGE, _C0, _C1, _C2, _C3, _C4, _C5, _DP1, _DP2,
                                      _DP3, _FOPI, _S0, _S1, _S2, _S3, _S4, _S5)
from .c_fold import lit


def sincos_source(lanes):
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
        "static void sd_sincos(vd x, vd *sn, vd *cs)\n{\n"
        "  const vl zero = {0}, sbit = zero + (-9223372036854775807L - 1);   /* the sign bit */\n"
        "  vl neg = (vl)x < zero, m2, m4, mc;\n"
        "  vd ax = (vd)((vl)x & ~sbit), y, z, zz, ps, pc, a, b;\n"
        "  vl j, o; int s, big = 0;\n"
        "  for (s = 0; s < %d; s++) big |= !(ax[s] < SD_RANGE);\n" % lanes +
        "  if (big) { for (s = 0; s < %d; s++) { (*sn)[s] = sin(x[s]); (*cs)[s] = cos(x[s]); }\n"
        "             return; }\n" % lanes +
        "  j = __builtin_convertvector(ax * SD_FOPI, vl); j += j & 1;\n"
        "  y = __builtin_convertvector(j, vd);\n"
        "  z = ((ax - y * SD_DP1) - y * SD_DP2) - y * SD_DP3;\n" + poly +
        "  o = j & 7; m2 = (o & 2) != 0; m4 = o >= 4; mc = (o == 2) | (o == 4);\n"
        "  a = (vd)(((vl)pc & m2) | ((vl)ps & ~m2)); b = (vd)(((vl)ps & m2) | ((vl)pc & ~m2));\n"
        "  a = (vd)((vl)a ^ (m4 & sbit)); b = (vd)((vl)b ^ (mc & sbit));\n"
        "  *sn = (vd)((vl)a ^ (neg & sbit)); *cs = b;\n}\n")
