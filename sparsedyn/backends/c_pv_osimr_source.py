"""C source of the PV-OSIMr Delassus kernel on vectors of LANES states (seed 000, Algorithm 3):
kernels/pv_osimr_numba._state's statements with `vd` (c_vector: LANES doubles, the batch
innermost) in place of double, so one vector instruction serves LANES states (numba runs no SLP
vectoriser: its per-state 6x6 code stays scalar). The equations and the reasons for each step
are in pv_osimr_numba.py; this text follows it statement by statement (same formulas, same
order of sums), except sin and cos: c_sincos's vector Cephes (numba's kernel calls libm), ~1 ulp.

One fixed source for every model and contact set: the program (pv_osimr_program.FlatProgram)
arrives as a table of addresses, so the library compiles once per machine. Interface:

    void sd_pvo_lanes(B, q, out, status, work, arrays, dims, tol)
        out (B, m, m), status (B,) per state: -1, or the first body (in sweep order) whose
        articulated pivot is <= tol (the state's other outputs are then meaningless);
        arrays: ARRAYS' addresses in order; dims: DIMS; work: work_doubles(...) doubles,
        64-byte aligned. A partial group's idle lanes repeat its first state.
    void sd_pvo_lanes_threads(B, threads, work_stride, <sd_pvo_lanes's arguments>),
    int sd_pvo_lanes_openmp(void): the batch on an OpenMP team (c_team)
"""
from __future__ import annotations

from .c_pv_osimr_backward import BACKWARD
from .c_pv_osimr_forward import FORWARD
from .c_sincos import sincos_source
from .c_team import TEAM_HEADER, Param, team_function
from .c_vector import LANES, vector_header

#: FlatProgram fields passed by address, in the order the C reads them
ARRAYS = ("jtype", "parent", "qidx", "axis", "XT_R", "XT_p", "inertia", "nvj", "S_idx", "S_val",
          "S_nnz", "armature", "half", "d_slot", "branching", "rows", "a_slot", "pair_rows",
          "ee_slot", "K0", "kc_dst", "kc_src", "kc_rslot", "w_slot", "w_pair", "blk_k1",
          "blk_k2", "blk_p1", "blk_w", "offsets")
#: the sizes passed in `dims`, in order
DIMS = ("nb", "ns", "npairs", "nw", "ne", "nkc", "nblk", "nq", "m")


def work_doubles(nb, ns, npairs, nw, nq, m, lanes=LANES):
    """Doubles of the work array: IA (nb), R, Om, Om0 (ns each), K (npairs), W (nw) as 6x6
    blocks, the group's transposed q and its m x m output, lanes values each."""
    return lanes * (36 * (nb + 3 * ns + npairs + nw) + nq + m * m)


_FLOATS = ("axis", "XT_R", "XT_p", "inertia", "S_val", "armature", "K0")
_FIELDS = "".join(f"  const {'double' if a in _FLOATS else 'long'} *{a};\n" for a in ARRAYS)

_KERNEL = r"""
enum { REVOLUTE, PRISMATIC, SPHERICAL, PLANAR, FREE };
typedef struct {
%(fields)s  long nb, ns, npairs, nw, ne, nkc, nblk, nq, m;
  double tol;
} Prog;
#define B6(a, i, r, c) a[(i) * 36 + (r) * 6 + (c)]

static void quat_rot(vd x, vd y, vd z, vd w, vd *R)
{
  R[0] = 1 - 2 * (y * y + z * z); R[1] = 2 * (x * y - z * w); R[2] = 2 * (x * z + y * w);
  R[3] = 2 * (x * y + z * w); R[4] = 1 - 2 * (x * x + z * z); R[5] = 2 * (y * z - x * w);
  R[6] = 2 * (x * z - y * w); R[7] = 2 * (y * z + x * w); R[8] = 1 - 2 * (x * x + y * y);
}

/* pv_osimr_numba._pivot: U = H^A S, D = S^T U + diag(armature), D^-1 by Cholesky; bad lanes */
static vl pivot(const Prog *P, long n, long i, const vd *IA, vd *U, vd *D, vd *Dinv)
{
  const long *Si = P->S_idx + i * 18, *nz = P->S_nnz + i * 6;
  const double *Sv = P->S_val + i * 18;
  vl bad = {0};
  long a, b, k, j, t, row, s;
  for (a = 0; a < n; a++)
    for (row = 0; row < 6; row++) {
      vd acc = {0.0};
      for (t = 0; t < nz[a]; t++) acc += B6(IA, i, row, Si[a * 3 + t]) * Sv[a * 3 + t];
      U[row * 6 + a] = acc;
    }
  for (a = 0; a < n; a++) {
    for (b = 0; b < n; b++) {
      vd acc = {0.0};
      for (t = 0; t < nz[a]; t++) acc += Sv[a * 3 + t] * U[Si[a * 3 + t] * 6 + b];
      D[a * 6 + b] = acc;
    }
    D[a * 6 + a] += P->armature[i * 6 + a];
  }
  for (k = 0; k < n; k++) {                       /* D = L L^T (lower), in place */
    vd v = D[k * 6 + k];
    for (t = 0; t < k; t++) v -= D[k * 6 + t] * D[k * 6 + t];
    bad |= ~(v > P->tol);
    for (s = 0; s < LN; s++) v[s] = sqrt(v[s]);
    D[k * 6 + k] = v;
    for (j = k + 1; j < n; j++) {
      vd w = D[j * 6 + k];
      for (t = 0; t < k; t++) w -= D[j * 6 + t] * D[k * 6 + t];
      D[j * 6 + k] = w / v;
    }
  }
  for (k = 0; k < n; k++) {                       /* Dinv (lower) = L^-1 */
    Dinv[k * 6 + k] = 1.0 / D[k * 6 + k];
    for (j = k + 1; j < n; j++) {
      vd w = {0.0};
      for (t = k; t < j; t++) w -= D[j * 6 + t] * Dinv[t * 6 + k];
      Dinv[j * 6 + k] = w / D[j * 6 + j];
    }
  }
  for (a = 0; a < n; a++)                         /* D^-1 = L^-T L^-1 (upper of D) */
    for (b = a; b < n; b++) {
      vd w = {0.0};
      for (t = b; t < n; t++) w += Dinv[t * 6 + a] * Dinv[t * 6 + b];
      D[a * 6 + b] = w;
    }
  for (a = 0; a < n; a++)
    for (b = a; b < n; b++) Dinv[a * 6 + b] = Dinv[b * 6 + a] = D[a * 6 + b];
  return bad;
}
"""


def kernel_source(lanes=LANES):
    """The C source (the module doc) on vectors of `lanes` >= 2 states (c_sincos's vector form)."""
    unpack = "".join(f"  P.{a} = x[{k}];\n" for k, a in enumerate(ARRAYS))
    team = team_function("sd_pvo_lanes", "sd_pvo_lanes", [
        Param("const double *", "q", "dims[7]"), Param("double *", "out", "dims[8] * dims[8]"),
        Param("long *", "status", 1), Param("double *", "work", "work"),
        Param("const void *const *", "arr"), Param("const long *", "dims"),
        Param("double", "tol")], lanes)
    return "\n".join(["#include <math.h>", TEAM_HEADER, f"#define LN {lanes}",
                      vector_header(lanes), sincos_source(lanes), _KERNEL % {"fields": _FIELDS},
                      BACKWARD, FORWARD % {"unpack": unpack}, *team])
