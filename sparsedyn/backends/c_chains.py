"""C99 source of the compiled MAP route (estimation/compiled_map.CompiledMAP: its weights and
prior folded into the program, or read per state) for ONE state, and its ctypes kernel: what kernels/normal_numba's
_map_range does per lane, with the lanes taken out and the program's indices and constants
written as literals:

  1. the sensor assembly (c_source.assembly_statements, its zero terms folded: c_fold) into
     the chain program's slots;
  2. the chain program (ir/chain_program.py) as straight-line statements, the products rounding
     as written ((a * b) * c, then the sum left to right; -ffp-contract=off), so x equals the
     numba kernel's up to the rounding of libm's sin/cos against its own and the sign of a
     zero: factor; x = 0; solve with the probe's substitutions interleaved; resid; solve (the
     refinement step), each folded at plan time where the plan fixes values (c_chain_fold:
     ONE, x = 0, state-independent columns of the factor), and neighbouring chains that end
     in the same products over equal or consecutive slots run as one vector chain of two or
     four lanes, each lane rounding as its scalar chain, a pivot's chain in lane 0 of its
     column's (c_chain_pairs);
  3. the flags: 1 (a pivot not positive; q, a body velocity, x or the probe not finite), else 2
     (a direction the data may not determine: d_j - p_j <= tol (N_jj - p_j) or |z_j| >
     z_tol_j; the tests of x four variables at a time on vectors: c_chain_flags), plus 4
     when a quaternion of q is not unit-norm.

Interface of a unit with prefix P:
    #define P_WORK_DOUBLES n, P_SAMPLE_DOUBLES s
    int P_map(q, qd, y, samp, x, work)                 one state: x (n,) and its flag
    void P_map_batch(B, q, qd, y, samp, x, flag, work) B states, flag (B,) unsigned char
    int P_map_packed(a)                                P_map(a[0], ..., a[5]): one argument
samp: a per-sample route's numbers of the state (s = m + 4 n doubles: the row weights, the
prior precisions in N and in the gradient, the prior mean, 1/0 per active/known variable;
solve_map.SampleData), read as _scale_samples does; NULL for a route without.
No globals are written and nothing is allocated: calls on different work arrays may run
concurrently.

Compile time grows with the program (tens of seconds for a humanoid's, at -O1:
generated_c.CFLAGS_LONG), so a route is built on first use and cached (generated_c.build).
"""
from __future__ import annotations

import ctypes
import functools
import os
import threading

import numpy as np

from ..ir.chain_program import EPI_ADD, EPI_LIST, EPI_RECIP, EPI_SCALE
from ..ir.chain_program import PRIOR_ROWS
from .c_chain_fold import ChainFolder
from .c_chain_pairs import VECTOR_HEADER, WIDTHS, common_tail, vector_statements
from .c_chain_flags import contiguous, gathered, flag_statements
from .c_fold import lit
from .c_source import BAD_QUATERNION, _table, assembly_statements
from .generated_c import CFLAGS_LONG, build, library_path, split_run

#: flag bit of a state whose q has a quaternion that is not unit-norm
QUATERNION_FLAG = 4
#: fewest samples per thread of a batch split over threads (generated_c.split_run)
MAP_MIN_STATES_PER_THREAD = 4
#: lines per static helper of the chain program (half c_source.CHUNK): a compiler's time per
#: function grows faster than its length, and the machine code of shorter helpers is no longer
MAP_CHUNK = 200


class _Layout:
    """The work array: the chain program's slots, the body velocities (6 per body) and gravity
    vectors (3 per body), and for a per-sample route sqrt(w) (m) and the typical information J
    (n) of the call."""

    def __init__(self, n_slots, n_bodies, m=0, n=0, n_kept=0):
        self.vel = n_slots
        self.grav = self.vel + 6 * n_bodies
        self.rs = self.grav + 3 * n_bodies
        self.J = self.rs + m
        self.kept = self.J + n
        self.size = self.kept + n_kept


def _product(a, b, c):
    """' + w[a] * w[b] * c' as the chain rounds it ((a * b) * c; times +-1 is exact)."""
    if c == 1.0:
        return f" + w[{a}] * w[{b}]"
    if c == -1.0:
        return f" - w[{a}] * w[{b}]"
    return f" + (w[{a}] * w[{b}]) * {lit(c)}"


def chain_statements(chains, i):
    """The C statements of instruction i of a ChainArrays (ir/chain_program.py semantics)."""
    t, src, c0, fr = (int(chains.ins_t[i]), int(chains.ins_src[i]), float(chains.ins_c0[i]),
                      int(chains.ins_row[i]))
    q, k, kmid, mid = (int(chains.ins_q[i]), int(chains.ins_k[i]), int(chains.ins_kmid[i]),
                       int(chains.ins_mid[i]))
    mode, t2, r2 = int(chains.ins_mode[i]), int(chains.ins_t2[i]), int(chains.ins_r2[i])
    pa, pb, pc = chains.pa, chains.pb, chains.pc
    if mode == EPI_LIST:
        return [f"  w[{t + j}] = w[{int(pa[q + j])}] * w[{int(pb[q + j])}];" for j in range(k)]
    out, expr = [], (f"w[{src}]" if fr else lit(c0))
    for j in range(k):
        if j == kmid:
            out.append(f"  acc = {expr}; w[{mid}] = acc;")
            expr = "acc"
        expr += _product(int(pa[q + j]), int(pb[q + j]), float(pc[q + j]))
        if len(expr) > 240:                        # keep lines short: same order of sums
            out.append(f"  acc = {expr};")
            expr = "acc"
    out.append(f"  acc = {expr}; w[{t}] = acc;")
    if mode == EPI_SCALE:
        out.append(f"  w[{t2}] = acc * w[{r2}];")
    elif mode == EPI_RECIP:
        out.append(f"  w[{t2}] = 1.0 / acc;")
    elif mode == EPI_ADD:
        out.append(f"  w[{t2}] = w[{t2}] + acc;")
    return out


def _part(name, statements, helpers):
    """Statements (one list per instruction, never split) as static helpers of about MAP_CHUNK
    lines; the lines calling them."""
    calls, body = [], []

    def flush():
        fn = f"{name}_{len(calls)}"
        helpers.append("\n".join([f"static void {fn}(double *restrict w)", "{",
                                  "  double acc, a0, a1, a2, a3;",
                                  "  sd_v2 v2;", "  sd_v4 v4;", "  (void)acc; (void)a0; (void)a1; "
                                  "(void)a2; (void)a3; (void)v2; (void)v4;", *body, "}"]))
        calls.append(f"  {fn}(w);")
    for lines in statements:
        body.extend(lines)
        if len(body) >= MAP_CHUNK:
            flush()
            body = []
    if body:
        flush()
    return calls


def _run(folder, chains, order):
    """The statements of the instructions in `order` (one list per unit), runs of neighbours
    that share a tail of products (c_chain_pairs.common_tail) as one vector chain: four lanes
    where that saves more scalar products than two pairs of two would."""
    out, j = [], 0
    while j < len(order):
        s = {n: common_tail(chains, order[j:j + n]) if j + n <= len(order) else 0
             for n in WIDTHS}
        # products a vector takes off the scalar code: (lanes - 1) per common product
        n = 4 if s[4] and 3 * s[4] > s[2] + common_tail(chains, order[j + 2:j + 4]) else 2
        if s[n]:
            out.append(vector_statements(folder, order[j:j + n], s[n]))
            j += n
        else:
            out.append(folder.statements(order[j]))
            j += 1
    return out


def _program(prefix, chains, ms, helpers):
    """(the lines running the program, the calls of its parts {name: lines}): factor; x = 0;
    solve and probe; resid; solve again (the refinement step); "probe2", the probe's second
    step, is called only where the probe responds (map_source). Folded at plan time
    (c_chain_fold, each part in the state the previous ones leave), the probe's substitutions
    interleaved with the first solve's chain by chain (independent: y_k's and z_k's chains run
    as one vector chain, c_chain_pairs); the refinement step runs the same code when folding
    gives the same statements (the probe then runs twice, to the same values), else the
    solve's alone. As written, without vectors, when a folded value would not be finite."""
    solve = list(range(ms.factor_end, ms.solve_end))
    probe = list(range(ms.resid_end, ms.probe_end))
    probe2 = list(range(ms.probe_end, chains.ins_t.size))
    merged = ([i for both in zip(solve, probe) for i in both] if len(solve) == len(probe)
              else solve + probe)
    try:
        folder = ChainFolder(chains, {int(ms.one): 1.0})
        code = {"factor": _run(folder, chains, list(range(ms.factor_end))),
                "solve": _run(folder, chains, merged),
                "resid": _run(folder, chains, list(range(ms.solve_end, ms.resid_end)))}
        known = dict(folder.known)
        code["refine"] = _run(folder, chains, merged)
        if code["refine"] != code["solve"]:
            folder = ChainFolder(chains, known)
            code["refine"] = _run(folder, chains, solve)
        second = {"probe2": _run(folder, chains, probe2)}     # after the refinement step
    except ValueError:
        parts = (("factor", range(ms.factor_end)), ("solve", solve),
                 ("resid", range(ms.solve_end, ms.resid_end)), ("refine", solve),
                 ("probe", probe))
        code = {name: [chain_statements(chains, i) for i in order] for name, order in parts}
        second = {"probe2": [chain_statements(chains, i) for i in probe2]}
    calls = {name: _part(f"{prefix}_{name}", code[name], helpers) for name in code
             if name != "refine" or code["refine"] != code["solve"]}
    calls.setdefault("refine", calls["solve"])
    calls["probe2"] = _part(f"{prefix}_probe2", second["probe2"], helpers)
    return [line for name in code for line in calls[name]], calls


def _sample_statements(route, prefix, L, m, n, tables):
    """The statements reading a per-sample call's numbers samp = [w (m), p, p_grad, mu, active
    (n each)] (solve_map.SampleData) into the program, as kernels/normal_numba._scale_samples and
    estimation/compiled_map.CompiledMAP.sample_inputs do: W^1/2 A diag(active), W^1/2 r, the
    prior's slots and the probe's right-hand side scaled by the call's typical information."""
    e_slot, e_row, e_col, e_value, row_slot, prior_slot = route.sample_slots
    assembled = np.isnan(e_value)
    t = f"{prefix}_s"
    tables += [_table(f"{t}_slot", e_slot, "int"), _table(f"{t}_row", e_row, "int"),
               _table(f"{t}_col", e_col, "int"),
               _table(f"{t}_val", np.where(assembled, 0.0, e_value), "double"),
               _table(f"{t}_asm", assembled, "unsigned char"),
               _table(f"{t}_sq", route.entry_squares, "double"),
               _table(f"{t}_rows", row_slot, "int"), _table(f"{t}_delta", route.delta, "double")]
    tables += [_table(f"{t}_{name}", prior_slot[i], "int") for i, name in enumerate(PRIOR_ROWS)]
    nnz = e_slot.size
    return [
        f"  sw = samp; sp = samp + {m}; sg = samp + {m + n}; smu = samp + {m + 2 * n};",
        f"  sa = samp + {m + 3 * n}; rs = work + {L.rs}; J = work + {L.J};",
        f"  for (k = 0; k < {m}; k++) rs[k] = sqrt(sw[k]);",
        f"  for (k = 0; k < {nnz}; k++) {{ e = {t}_slot[k];",
        f"    w[e] = ({t}_asm[k] ? w[e] : {t}_val[k]) * rs[{t}_row[k]] * sa[{t}_col[k]]; }}",
        f"  for (k = 0; k < {m}; k++) w[{t}_rows[k]] *= rs[k];",
        f"  for (k = 0; k < {n}; k++) J[k] = 0.0;",
        f"  for (k = 0; k < {nnz}; k++) J[{t}_col[k]] += {t}_sq[k] * sw[{t}_row[k]];",
        "  small = HUGE_VAL;",
        f"  for (k = 0; k < {n}; k++) if (J[k] > 0.0 && J[k] < small) small = J[k];",
        "  if (!(small < HUGE_VAL)) small = 1.0;",
        f"  for (k = 0; k < {n}; k++) {{ if (!(J[k] > 0.0)) J[k] = small;",
        f"    if ({t}_p[k] >= 0) w[{t}_p[k]] = sp[k];",
        f"    if ({t}_pg[k] >= 0) w[{t}_pg[k]] = sg[k];",
        f"    if ({t}_pmu[k] >= 0) w[{t}_pmu[k]] = sp[k] * smu[k];",
        f"    if ({t}_J[k] >= 0) w[{t}_J[k]] = J[k];",
        f"    if ({t}_c[k] >= 0) w[{t}_c[k]] = fmax(sp[k], {lit(route.probe_ridge)} * J[k]) * "
        f"{t}_delta[k] / sqrt(J[k]) * sa[k]; }}"]


def map_source(route, prefix):
    """(C source, work doubles, sizes) of a CompiledMAP (per-sample or not)."""
    model, xr, dest, chains, ms = route._bound
    prog = route.program
    assembly = route.assembly
    nq, nv, N, n = assembly.nq, assembly.nv, assembly.nbodies, route.n
    m = route.problem.shape[0]
    n_y = dest.y.size
    per_sample = route.per_sample
    second = ms.probe_end < chains.ins_t.size       # the probe has a second step
    L = _Layout(prog.n_slots, N, m if per_sample else 0, n if per_sample else 0,
                n if second else 0)
    helpers, tables = [], []
    body = [f"int {prefix}_map(const double *restrict q, const double *restrict qd, "
            "const double *restrict y, const double *restrict samp, double *restrict x, "
            "double *restrict work)", "{",
            "  double *restrict w = work;", "  double mag, d, v, z, bad = 0.0, und = 0.0;",
            "  const double *sw, *sp, *sg, *smu, *sa;", "  double *rs, *J, small, zt, p0;",
            "  int quat_bad = 0, k, e, probe = 0;",
            "  (void)mag; (void)samp; (void)sw; (void)sp; (void)sg; (void)smu; (void)sa;",
            "  (void)rs; (void)J; (void)small; (void)zt; (void)p0; (void)k; (void)e;",
            f"  w[{ms.one}] = 1.0;"]
    body += assembly_statements(f"{prefix}_map", model, xr, dest, L, nq, N, helpers)
    if per_sample:
        body += _sample_statements(route, prefix, L, m, n, tables)
    x0 = int(ms.x_slot[0]) if n else 0      # x's slots consecutive: zeroed (all-zero bytes are
    direct = np.array_equal(ms.x_slot, x0 + np.arange(n))       # +0.0) and read without a table
    body += ([f"  memset(w + {x0}, 0, {n} * sizeof(double));"] if direct else
             [f"  w[{int(s)}] = 0.0;" for s in ms.x_slot])
    lines, calls = _program(prefix, chains, ms, helpers)
    body += lines
    # the tests per variable over tables (c_chain_flags), x copied out on the way
    t = f"{prefix}_f"
    xk = f"w[{x0} + k]" if direct else f"w[{t}_x[k]]"
    tables += [_table(f"{t}_{name}", getattr(ms, f"{name}_slot"), "int")
               for name in ("d", "nkk", "z", "y") + ("x",) * (not direct)]
    if per_sample:                           # the call's prior and probe scale, known columns
        p0, zt, known = "sp[k]", f"{lit(float(route.sample_tol))} / sqrt(J[k])", "(sa[k] != 0.0)"
        zt2 = f"{lit(float(route.sample_tol2))} / sqrt(J[k])"
        tests = dict(p0=contiguous("sp"), zt=gathered(f"{lit(float(route.sample_tol))} / "
                                                      "sqrt(J[{k}])"),
                     known=(known, "(SD_LD4(sa + k) != 0.0)"))
        # the second step accepts no state where an active variable's prior is strong
        eligible = [f"  for (k = 0; k < {n}; k++) go &= !(sa[k] != 0.0 && "
                    f"sp[k] > {lit(float(route.prior2_max))} * J[k]);"]
    else:
        tables += [_table(f"{t}_p", route._static_tests[3][0], "double"),
                   _table(f"{t}_zt", route._static_tests[4][0], "double"),
                   _table(f"{t}_zt2", route._static_tests[5][0], "double")]
        p0, zt, known, zt2 = f"{t}_p[k]", f"{t}_zt[k]", "1", f"{t}_zt2[k]"
        tests = dict(p0=contiguous(f"{t}_p"), zt=contiguous(f"{t}_zt"))
        eligible = [f"  go &= {t}_zt2[0] >= 0.0;"]
    body += ["  { double fin = 0.0; int ibad = 0, iund = 0;",
             *flag_statements(n, gathered(f"w[{t}_d[{{k}}]]"),
                              contiguous(f"(w + {x0})") if direct else
                              gathered(f"w[{t}_x[{{k}}]]"),
                              gathered(f"w[{t}_z[{{k}}]]"), gathered(f"w[{t}_nkk[{{k}}]]"),
                              tol=lit(ms.sing_tol), **tests),
             "  bad += ibad + (fin != 0.0); und += iund; }"]
    if second:
        # only the probe responded: its second step and a second refinement step on
        # r - A x2 = (r - A x1) - A dx (dx in y's rows); accepted if the second response stays
        # under its tolerance (kernels/normal_numba.py, _second_step)
        kept = f"work[{L.kept} + k]"
        body += ["  { int go = bad == 0.0 && und == 0.0 && probe;", *eligible,
                 "  if (go) {",
                 f"  for (k = 0; k < {n}; k++) {{ {kept} = {xk}; {xk} = w[{t}_y[k]]; }}",
                 *calls["resid"],
                 f"  for (k = 0; k < {n}; k++) {xk} = {kept};",
                 *calls["refine"], *calls["probe2"],
                 "  { double fin = 0.0; int ibad = 0, iund = 0;",
                 f"  for (k = 0; k < {n}; k++) {{",
                 f"    d = w[{t}_d[k]]; v = {xk}; z = w[{t}_z[k]]; p0 = {p0}; zt = {zt2};",
                 "    fin += (v - v) + (z - z); ibad |= !(d > 0.0);",
                 f"    iund |= {known} & ((d - p0 <= {lit(ms.sing_tol)} * (w[{t}_nkk[k]] - p0)) "
                 "| (fabs(z) > zt));", "  }",
                 "  if (!ibad && fin == 0.0 && !iund) {",
                 f"    probe = 0; for (k = 0; k < {n}; k++) x[k] = {xk}; }}", "  } } }"]
    body += [f"  return (bad > 0.0 ? 1 : (und > 0.0 || probe ? 2 : 0)) + "
             f"(quat_bad ? {QUATERNION_FLAG} : 0);", "}"]
    n_samp = m + 4 * n if per_sample else 0
    api = [f"#define {prefix.upper()}_WORK_DOUBLES {L.size}",
           f"#define {prefix.upper()}_SAMPLE_DOUBLES {n_samp}",
           f"int {prefix}_work_doubles(void) {{ return {L.size}; }}",
           f"int {prefix}_map_packed(void *const *a) "
           f"{{ return {prefix}_map(a[0], a[1], a[2], a[3], a[4], a[5]); }}",
           f"void {prefix}_map_batch(long B, const double *q, const double *qd, const double *y, "
           "const double *samp, double *x, unsigned char *flag, double *work)", "{", "  long b;",
           "  for (b = 0; b < B; b++)",
           f"    flag[b] = (unsigned char){prefix}_map(q + b * {nq}, qd + b * {nv}, "
           f"y + b * {n_y}, samp ? samp + b * {n_samp} : samp, x + b * {n}, work);", "}"]
    assert BAD_QUATERNION == 2          # assembly_statements sets quat_bad to it
    src = "\n\n".join(["#include <math.h>\n#include <string.h>", VECTOR_HEADER] + tables + helpers
                       + ["\n".join(body), "\n".join(api)]) + "\n"
    return src, L.size, dict(nq=nq, nv=nv, n_y=n_y, n=n, n_samp=n_samp)


class CMapKernel:
    """A CompiledMAP written as C and compiled on first use: run() has CompiledMAP.run's
    contract (flag 4 added for a bad quaternion); one() is the function for one state."""

    PREFIX = "sdmap"

    def __init__(self, route):
        self.route = route
        self.source, self.work_doubles, self.sizes = map_source(route, self.PREFIX)
        self._lib = None
        self._lock = threading.Lock()
        self._local = threading.local()

    def ready(self):
        """Is the library loaded or compiled already (no compiler run)?"""
        return self._lib is not None or os.path.exists(library_path(self.source, CFLAGS_LONG))

    def library(self):
        with self._lock:
            if self._lib is None:
                lib = ctypes.CDLL(build(self.source, CFLAGS_LONG))
                batch = getattr(lib, f"{self.PREFIX}_map_batch")
                batch.argtypes = [ctypes.c_long] + [ctypes.c_void_p] * 7
                batch.restype = None
                one = getattr(lib, f"{self.PREFIX}_map")
                one.argtypes = [ctypes.c_void_p] * 6
                one.restype = ctypes.c_int
                packed = getattr(lib, f"{self.PREFIX}_map_packed")
                packed.argtypes = [ctypes.c_void_p]
                packed.restype = ctypes.c_int
                self._lib = lib, batch, one, packed
            return self._lib

    def one(self):
        """int f(q, qd, y, samp, x, work): one state (pointers; samp: sample_row's numbers of
        a per-sample route, else NULL; work of work_doubles doubles)."""
        return self.library()[2]

    def bound(self, pointers):
        """f() -> one()'s flag for fixed buffers `pointers` (q, qd, y, samp or None, x, work):
        one ctypes argument per call (the six pointers as an array) instead of six."""
        packed = (ctypes.c_void_p * 6)(*pointers)
        call = functools.partial(self.library()[3], ctypes.addressof(packed))
        call.pointers = packed                 # alive as long as the callable
        return call

    @staticmethod
    def sample_rows(sample):
        """A per-sample call's numbers as the C reads them: (B, m + 4 n) rows [w, p, p_grad,
        mu, active] of a SampleData."""
        return np.ascontiguousarray(np.concatenate(
            (sample.weights, sample.prior, sample.gradient, sample.mean,
             sample.active.astype(float)), axis=1))

    def run(self, q, qd, y, threads=1, sample=None):
        q, qd, y = (np.ascontiguousarray(a, dtype=np.float64) for a in (q, qd, y))
        B, s = q.shape[0], self.sizes
        if s["n_samp"] and sample is None:
            sample = self.route.reference.sample_data(None, B)
        elif sample is not None and not s["n_samp"]:
            raise ValueError("this compiled route was planned without per_sample=True: it takes "
                             "no per-sample weights, prior or contacts")
        samp = self.sample_rows(sample) if s["n_samp"] else None
        x = np.empty((B, s["n"]))
        flag = np.zeros(B, dtype=np.uint8)
        batch = self.library()[1]

        def call(lo, hi, work):
            ptr = (lambda a, width: a.ctypes.data + 8 * lo * width)
            batch(hi - lo, ptr(q, s["nq"]), ptr(qd, s["nv"]), ptr(y, s["n_y"]),
                  None if samp is None else ptr(samp, s["n_samp"]), ptr(x, s["n"]),
                  flag.ctypes.data + lo, work.ctypes.data)
        # tens of microseconds per sample: a few samples repay a thread's hand-off
        split_run(B, threads, self._work, call, min_states=MAP_MIN_STATES_PER_THREAD)
        return x, flag.astype(np.int64)

    def _work(self, k):
        pool = getattr(self._local, "work", None)
        if pool is None or pool.shape[0] < k:
            pool = self._local.work = np.empty((k, self.work_doubles))
        return pool
