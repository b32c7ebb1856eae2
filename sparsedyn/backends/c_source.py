"""C99 source of a plan's fused program (sparsedyn.ir.fused): one function per kind of call that,
for ONE state, assembles D(q) and b(q, qd) straight into the program's work vector, runs the LU
program and reports whether the state must be re-solved, plus a loop over a batch.

The generated code is the numba fused kernel (kernels/assemble_numba.py: _assemble_lanes,
lane_scales, run_lanes, _residual_check) with the lanes taken out and everything the IR fixes
offline turned into literals: per body the joint's rotation kind, the nonzeros of S and I and the
destinations of its entries; the op stream as straight-line statements on w[...]; the constants
as exact literals ("%.17g" round-trips a double). The same formulas in the same order, less the
assembly's terms that are exactly zero at plan time (c_fold: the structural zeros of a joint's
rotation, offset, S and I), so the results equal the numba kernel's up to the rounding of libm's
sin/cos against its own and the sign of a zero; a state where a dropped term could have been
NaN (a non-finite q or body velocity) is reported for re-solving.

Interface of a generated unit with prefix P (see header_text for the documented copy):

    #define P_WORK_DOUBLES n         caller-owned work, n doubles per concurrent call
    int P_outputs(q, qd, y, out, work)        the outputs alone (e.g. tau or qdd)
    int P_full(q, qd, y, out, x, work)        the outputs and the whole solution x
    void P_outputs_batch(B, q, qd, y, out, broken, work) / P_full_batch(..., x, broken, work)
returning (per state) 0 when the solution is good, 1 when it must be re-solved (a failed pivot
check, a non-finite q, body velocity or solution, or a failed backward-error check), with 2 added when a quaternion
of q is not unit-norm (|norm - 1| > QUATERNION_TOL, as sparsedyn.batch checks it). No globals are written, no
memory is allocated: calls on different work arrays may run concurrently.

The statements' forms that differ on vectors of states (types, constants, fabs, the flags) come
from a c_vector.Dialect, one state's by default: c_plan_lanes.py writes the same unit on vectors
for batches.
"""
from __future__ import annotations

import numpy as np

from ..batch import QUATERNION_TOL
from ..ir.instructions import (ABSADD, ABSFMA, ADD, FMA, FMS, MOV, MUL, NEG, RECIP, SET, SUB)
from ..ir.assembly import ROT_ANGLE, ROT_QUAT
from .c_fold import Locals, fadd, fmul, fneg, fsub, fsum, lit
from .c_vector import Dialect

from . import BAD_QUATERNION            # a return-code bit of a generated solve
#: the statement forms of one state (c_vector.Dialect)
SCALAR = Dialect(1)


class Layout:
    """Where the work array's parts start (in doubles): the program's slots, the body velocities
    (6 per body), the bodies' gravity vectors (3 per body), the pivot-check scales, and the
    backward-error check's copies."""

    def __init__(self, schedule, n_bodies, n_unknowns):
        rc = schedule.rc
        self.w = 0
        self.vel = schedule.n_slots
        self.grav = self.vel + 6 * n_bodies
        self.scale = self.grav + 3 * n_bodies
        checks = schedule.prog.chk_const.size
        self.saved = self.scale + checks
        residual = rc.tol.size > 0
        n_saved = rc.r_slot.size if residual else 0
        n_res = n_unknowns if residual else 0
        self.bsave = self.saved + n_saved
        self.res = self.bsave + n_res
        self.rmax = self.res + n_res
        self.size = self.rmax + (rc.rowmax.size if residual else 0)


def _transform(i, m, V, out, d=SCALAR):
    """E (E0..E8) and r (r0..r2) of body i's joint transform iX_lambda(i) = (E, r), folded
    (c_fold) into the locals V (d: the c_vector.Dialect of sin and cos)."""
    kind, rq = int(m.rot_kind[i]), int(m.rot_q[i])
    if kind == ROT_ANGLE:
        out.append(f"    {d.sincos(f'q[{rq}]')}")
        for e in range(9):
            b0, b1, b2 = (float(m.rot_basis[i, k, e]) for k in range(3))
            V.set(f"E{e}", fsum([b0, fmul("sn", b1, lit), fmul("cs", b2, lit)], lit))
    elif kind == ROT_QUAT:
        out.append(f"    qx = q[{rq}]; qy = q[{rq + 1}]; qz = q[{rq + 2}]; qw = q[{rq + 3}];")
        # R_J from the unit quaternion (spatial.quaternion_to_rotation)
        R = ["1 - 2 * (qy * qy + qz * qz)", "2 * (qx * qy - qz * qw)", "2 * (qx * qz + qy * qw)",
             "2 * (qx * qy + qz * qw)", "1 - 2 * (qx * qx + qz * qz)", "2 * (qy * qz - qx * qw)",
             "2 * (qx * qz - qy * qw)", "2 * (qy * qz + qx * qw)", "1 - 2 * (qx * qx + qy * qy)"]
        for k in range(9):
            out.append(f"    R{k} = {R[k]};")
        TR = m.TR[i]
        for a in range(3):                  # E = (TR R_J)^T: E[a, b] = sum_k TR[b, k] R_J[k, a]
            for b in range(3):
                V.set(f"E{3 * a + b}", fsum([fmul(float(TR[3 * b + k]), f"R{3 * k + a}", lit)
                                              for k in range(3)], lit))
    else:
        for e in range(9):
            V.set(f"E{e}", float(m.rot_basis[i, 0, e]))
    for k in range(3):
        V.set(f"r{k}", fsum([float(m.Tp[i, k])] + [
            fmul(f"q[{int(m.trans_q[i]) + j}]", float(m.tdir[i, j, k]), lit)
            for j in range(int(m.n_trans[i]))], lit))


def _sparse_products(ptr, rows, cols, vals, i, operand):
    """Per row 0..5 the folded products val * operand(col) of matrix i's nonzeros, in storage
    order."""
    terms = [[] for _ in range(6)]
    for e in range(ptr[i], ptr[i + 1]):
        terms[int(rows[e])].append(fmul(float(vals[e]), operand(int(cols[e])), lit))
    return terms


def _cross(x, y, V):
    """x_1 y_2 - x_2 y_1 etc. of two triples of local names (folded)."""
    return [fsub(fmul(V[x[(k + 1) % 3]], V[y[(k + 2) % 3]], lit),
                 fmul(V[x[(k + 2) % 3]], V[y[(k + 1) % 3]], lit), lit) for k in range(3)]


def _body(i, m, xr, dest, L, known, out, d=SCALAR):
    """The statements of _assemble_lanes for body i (one state, or lanes: d), folded at plan
    time (c_fold); known: per body the values of its velocity (6) and gravity vector (3) as its
    children read them (a float where the plan fixes it, else its slot)."""
    out.append(f"  /* body {i} */")
    V = Locals(out, d.const)
    _transform(i, m, V, out, d)
    p = int(m.parent[i])
    E = [V[f"E{e}"] for e in range(9)]
    grav = [None] * 3
    if xr.g_need[i]:                               # g_i = E_i g_parent (the world's at the root)
        g = known[p][6:] if p >= 0 else [float(x) for x in m.gravity]
        grav = [fsum([fmul(E[3 * k + c], g[c], lit) for c in range(3)], lit) for k in range(3)]
        gi = L.grav + 3 * i
        for k in range(3):
            V.store(f"w[{gi + k}]", grav[k])
        grav = [x if isinstance(x, float) else f"w[{gi + k}]" for k, x in enumerate(grav)]
    S = _sparse_products(m.s_ptr, m.s_row, m.s_col, m.s_val, i, lambda c: f"qd[{c}]")
    for k in range(6):
        V.set(f"j{k}", fsum(S[k], lit))                                # S_i qd_i
    a = [int(d) for d in dest.a[i]]
    A, LL, J = ("a0", "a1", "a2"), ("l0", "l1", "l2"), [f"j{k}" for k in range(6)]
    if p >= 0:
        for k in range(3):
            V.set(f"w{k}", known[p][k])
        rw = _cross(("r0", "r1", "r2"), ("w0", "w1", "w2"), V)
        for k in range(3):
            V.set(f"u{k}", fsub(known[p][3 + k], rw[k], lit))
        for k in range(3):                                        # v_i = iX_p v_p + S_i qd_i
            V.set(f"a{k}", fsum([fmul(E[3 * k + c], V[f"w{c}"], lit) for c in range(3)]
                                + [V[J[k]]], lit))
        for k in range(3):
            V.set(f"l{k}", fsum([fmul(E[3 * k + c], V[f"u{c}"], lit) for c in range(3)]
                                + [V[J[3 + k]]], lit))
        # -c_i = -(v_i x S_i qd_i)
        aj, aj2, lj = _cross(A, J[:3], V), _cross(A, J[3:], V), _cross(LL, J[:3], V)
        for k in range(3):
            V.store(f"w[{a[k]}]", fneg(aj[k], lit))
        for k in range(3):
            V.store(f"w[{a[3 + k]}]", fneg(fadd(aj2[k], lj[k], lit), lit))
    else:
        for k in range(3):
            V.set(A[k], V[J[k]])
            V.set(LL[k], V[J[3 + k]])
        for k in range(3):
            V.store(f"w[{a[k]}]", 0.0)
        g0 = [float(x) for x in m.gravity]                        # root: -c = [0; E g]
        for k in range(3):
            V.store(f"w[{a[3 + k]}]", fsum([fmul(E[3 * k + c], g0[c], lit) for c in range(3)],
                                          lit))
    names = A + LL
    v = L.vel + 6 * i
    for k in range(6):
        V.store(f"w[{v + k}]", V[names[k]])
    known[i] = [V[nm] if isinstance(V[nm], float) else f"w[{v + k}]"
                for k, nm in enumerate(names)] + grav
    Iv = _sparse_products(m.i_ptr, m.i_row, m.i_col, m.i_val, i, lambda c: V[names[c]])
    for k in range(6):
        V.set(J[k], fsum(Iv[k], lit))                                  # I_i v_i
    f = [int(d) for d in dest.f[i]]
    # -nu_i = -(v_i x* I_i v_i)
    aj, lj2, aj2 = _cross(A, J[:3], V), _cross(LL, J[3:], V), _cross(A, J[3:], V)
    for k in range(3):
        V.store(f"w[{f[k]}]", fneg(fadd(aj[k], lj2[k], lit), lit))
    for k in range(3):
        V.store(f"w[{f[3 + k]}]", fneg(aj2[k], lit))
    xs = range(m.x_ptr[i], m.x_ptr[i + 1])
    ts = range(xr.t_ptr[i], xr.t_ptr[i + 1])
    if len(xs) or len(ts):
        for k in range(3):                         # row k of -E rx is r x E[k]
            rE = _cross(("r0", "r1", "r2"), (f"E{3 * k}", f"E{3 * k + 1}", f"E{3 * k + 2}"), V)
            for c in range(3):
                V.set(f"X{3 * k + c}", rE[c])

        def comp(src):
            return V[f"E{src}"] if src < 9 else V[f"X{src - 9}"]
        for e in xs:
            V.store(f"w[{int(m.x_dest[e])}]", comp(int(m.x_src[e])))
        by_dest = {}
        for e in ts:
            by_dest.setdefault(int(xr.t_dest[e]), []).append(
                fmul(float(xr.t_coef[e]), comp(int(xr.t_src[e])), lit))
        for d, terms in by_dest.items():
            V.store(f"w[{d}]", fsum([0.0] + terms, lit))


#: one C statement per opcode (t, a, b: slots; a RECIP's b: its pivot check's row scale)
_C_OPS = {FMS: "  w[{t}] = w[{t}] - w[{a}] * w[{b}];", FMA: "  w[{t}] = w[{t}] + w[{a}] * w[{b}];",
          SUB: "  w[{t}] = w[{t}] - w[{a}];", ADD: "  w[{t}] = w[{t}] + w[{a}];",
          MUL: "  w[{t}] = w[{a}] * w[{b}];", NEG: "  w[{t}] = -w[{t}];", MOV: "  w[{t}] = w[{a}];",
          RECIP: "  p = w[{a}]; bad |= !(fabs(p) > tol * (scale[{b}] + w[{t}])); w[{t}] = 1.0 / p;",
          ABSFMA: "  w[{t}] = w[{t}] + fabs(w[{a}] * w[{b}]);",
          ABSADD: "  w[{t}] = w[{t}] + fabs(w[{a}]);"}


def _ops(prog, out, d=SCALAR):
    """The op stream as statements (d: one state or lanes); a RECIP checks its pivot against its
    row scale first, a SET writes its constant."""
    t, a, b = prog.t, prog.a, prog.b
    for code, lo, hi in prog.runs:
        if code == SET:
            out.extend(f"  w[{int(t[o])}] = {d.const(prog.consts[a[o]])};" for o in range(lo, hi))
            continue
        if code not in _C_OPS:
            raise ValueError(f"opcode {code}: not in the instruction set")
        template = _C_OPS[code]
        if code == RECIP:
            template = d.pivot_check()
        elif d.vector and "fabs(" in template:
            template = template.replace("fabs(", "sd_vabs(")
        out.extend(template.format(t=int(t[o]), a=int(a[o]), b=int(b[o])) for o in range(lo, hi))


#: programs with more operations run as tables read by a loop (_interpreter): compile time
#: stays seconds whatever the size, at some cost per operation
STRAIGHT_LINE_MAX_OPS = 20000


def _interpreter(fn, prog, tol, tables, helpers):
    """A helper `int fn(w, scale)` running the op stream from constant tables (opcode, t, a, b
    per op; a SET's a indexes the constants): the same operations in the same order as the
    straight-line form."""
    code = np.zeros(prog.t.size, dtype=np.int64)
    for c, lo, hi in prog.runs:
        code[lo:hi] = c
    tables += [_table(f"{fn}_code", code, "unsigned char"), _table(f"{fn}_t", prog.t, "int"),
               _table(f"{fn}_a", prog.a, "int"), _table(f"{fn}_b", prog.b, "int"),
               _table(f"{fn}_consts", prog.consts, "double")]
    cases = []
    for c, template in _C_OPS.items():
        stmt = template.strip().format(t="t", a="a", b="b")
        cases.append(f"      case {c}: {stmt} break;")
    helpers.append("\n".join([
        f"static int {fn}(double *restrict w, const double *restrict scale)", "{",
        f"  const double tol = {lit(tol)};", "  double p;", "  int bad = 0, o, t, a, b;",
        f"  for (o = 0; o < {prog.t.size}; o++) {{",
        f"    t = {fn}_t[o]; a = {fn}_a[o]; b = {fn}_b[o];",
        f"    switch ({fn}_code[o]) {{", *cases,
        f"      case {SET}: w[t] = {fn}_consts[a]; break;",
        "    }", "  }", "  (void)p; (void)scale;", "  return bad;", "}"]))
    return fn


def _table(name, values, ctype):
    values = np.asarray(values).ravel()
    fmt = lit if ctype == "double" else (lambda v: str(int(v)))
    body = ", ".join(fmt(v) for v in values) if values.size else ("0" if ctype != "double" else "0.0")
    return f"static const {ctype} {name}[{max(values.size, 1)}] = {{{body}}};"


def _residual(fn, rc, sol_slot, L, n, out, tables, d=SCALAR):
    """The backward-error check of _residual_check for one state (or lanes: d; loops over
    constant tables): row-wise when rc.rowmax holds each row's largest constant |entry|, else
    normwise."""
    t, T, z, ab = f"{fn}_rc", d.T, d.zero_T, d.abs
    tables += [_table(f"{t}_r_row", rc.r_row, "int"), _table(f"{t}_r_col", rc.r_col, "int"),
               _table(f"{t}_c_row", rc.c_row, "int"), _table(f"{t}_c_col", rc.c_col, "int"),
               _table(f"{t}_c_val", rc.c_val, "double"), _table(f"{t}_rowmax", rc.rowmax, "double"),
               _table(f"{t}_sol", sol_slot, "int")]
    rowwise = rc.rowmax.size > 0
    out += [f"  {{ /* backward error: |D x - b| against tol (|D| |x| + |b|) */",
            f"    {T} *saved = work + {L.saved}, *bsave = work + {L.bsave};",
            f"    {T} *res = work + {L.res}, *rmax = work + {L.rmax};",
            f"    {T} xmax = {z}, amax = {z}, bmax = {z}, excess = {z}, d;",
            "    int k, e;",
            f"    for (k = 0; k < {n}; k++) {{ res[k] = -bsave[k];"
            + (f" rmax[k] = {d.const_of(f'{t}_rowmax[k]')};" if rowwise else "") + " }",
            f"    for (e = 0; e < {rc.c_row.size}; e++) res[{t}_c_row[e]] += {t}_c_val[e] * w[{t}_c_col[e]];",
            f"    for (e = 0; e < {rc.r_row.size}; e++) {{",
            f"      d = saved[e]; res[{t}_r_row[e]] += d * w[{t}_r_col[e]];",
            "      " + (d.bigger(ab("d"), f"rmax[{t}_r_row[e]]") if rowwise
                        else d.bigger(ab("d"), "amax")),
            "    }",
            f"    for (k = 0; k < {n}; k++) " + d.bigger(ab(f"w[{t}_sol[k]]"), "xmax")]
    if rowwise:
        out += [f"    for (k = 0; k < {n}; k++) {{",
                f"      d = {ab('res[k]')} - tol_res * (rmax[k] * xmax + {ab('bsave[k]')});",
                "      " + d.bigger("d", "excess"),
                "    }"]
    else:
        out += [f"    for (e = 0; e < {rc.c_row.size}; e++) "
                + d.bigger(d.const_of(f"fabs({t}_c_val[e])"), "amax"),
                f"    for (k = 0; k < {n}; k++) {{",
                "      " + d.bigger(ab("bsave[k]"), "bmax"),
                "      " + d.bigger(ab("res[k]"), "excess"),
                "    }",
                "    excess -= tol_res * (amax * xmax + bmax);"]
    out += ["    bad |= excess > 0.0;", "  }"]


#: statements per generated helper function: compilers optimise straight-line code in time
#: superlinear in a function's length, so long programs are cut into calls of this many
CHUNK = 400
#: the op stream's helpers are longer: its statements are one operation each, and a compiler
#: keeps values in registers only within a function (fewer reloads at the cuts)
OPS_CHUNK = 1200

_BODY_LOCALS = ["  double sn, cs, qx, qy, qz, qw, R0, R1, R2, R3, R4, R5, R6, R7, R8;",
                "  double E0, E1, E2, E3, E4, E5, E6, E7, E8, r0, r1, r2;",
                "  double X0, X1, X2, X3, X4, X5, X6, X7, X8;",
                "  double j0, j1, j2, j3, j4, j5, a0, a1, a2, l0, l1, l2, w0, w1, w2, u0, u1, u2;",
                "  (void)sn; (void)cs; (void)qx; (void)qy; (void)qz; (void)qw; (void)R0; (void)R1;",
                "  (void)R2; (void)R3; (void)R4; (void)R5; (void)R6; (void)R7; (void)R8; (void)X0;",
                "  (void)X1; (void)X2; (void)X3; (void)X4; (void)X5; (void)X6; (void)X7; (void)X8;",
                "  (void)w0; (void)w1; (void)w2; (void)u0; (void)u1; (void)u2; (void)q; (void)qd;",
                "  (void)E0; (void)E1; (void)E2; (void)E3; (void)E4; (void)E5; (void)E6; (void)E7;",
                "  (void)E8; (void)r0; (void)r1; (void)r2; (void)j0; (void)j1; (void)j2; (void)j3;",
                "  (void)j4; (void)j5; (void)a0; (void)a1; (void)a2; (void)l0; (void)l1; (void)l2;"]


def _chunked(fn, pieces, header, locals_, ret, helpers, size=None):
    """Statements `pieces` (lists of lines, never split) grouped into static helper functions
    of about `size` (default CHUNK) statements; returns the lines that call them in order."""
    calls, group, count = [], [], 0
    size = size or CHUNK

    def flush():
        if group:
            name = f"{fn}_{len(helpers)}"
            helpers.append("\n".join([f"static {ret} {name}({header})", "{", *locals_,
                                       *group, "" if ret == "void" else "  return bad;", "}"]))
            calls.append(name)
    for piece in pieces:
        group.extend(piece)
        count += len(piece)
        if count >= size:
            flush()
            group, count = [], 0
    flush()
    return calls


def assembly_statements(fn, m, xr, dest, L, nq, n_bodies, helpers, d=SCALAR):
    """The lines of a one-state function (locals q, qd, y, w, mag, quat_bad, bad; on lanes (d)
    s too) that assemble
    the entries and right-hand side of an AssemblyProgram bound to w's slots (m AssemblyArrays,
    xr ExtraRowArrays, dest RhsDestinations; the body velocities at w[L.vel + 6 i], gravity
    vectors at w[L.grav + 3 i]): per body statements chunked into `helpers`, the finiteness
    check of the folds (bad += 1 when it fails), the quaternion check (quat_bad), zeroed rows,
    the readings y and the extra rows' bias."""
    bodies, known = [], {}
    for i in range(n_bodies):
        lines = []
        _body(i, m, xr, dest, L, known, lines, d)
        bodies.append(lines)
    T = d.T
    asm = _chunked(f"{fn}_asm", bodies, f"const {T} *restrict q, const {T} *restrict qd, "
                   f"{T} *restrict w", [x.replace("double", T) for x in _BODY_LOCALS], "void",
                   helpers)
    out = [f"  {name}(q, qd, w);" for name in asm]
    # the folds' precondition (c_fold): q and every body velocity finite. A non-finite velocity
    # makes each child's non-finite (v_child = iX v + S qd: every column of a rotation has a
    # nonzero entry, NaN * 0 is NaN), so the leaves' velocities stand for all
    leaves = np.setdiff1d(np.arange(n_bodies), m.parent)
    checked = [f"q[{k}]" for k in range(nq)] + [f"w[{L.vel + 6 * int(i) + k}]"
                                                 for i in leaves for k in range(6)]
    out.append(f"  {{ {T} fin; {d.F} nonfinite = {d.zero_F};      "
               "/* x - x: NaN unless x is finite */")
    out += [f"    fin = {x} - {x}; nonfinite |= fin != fin;" for x in checked]
    out.append(f"    bad {'|' if d.vector else '+'}= nonfinite; }}")
    for i in np.flatnonzero(m.rot_kind == ROT_QUAT):
        out += d.quaternion_check(int(m.rot_q[i]), lit(QUATERNION_TOL), BAD_QUATERNION)
    for k in range(dest.zero.size):
        out.append(f"  w[{int(dest.zero[k])}] = {d.const(0.0)};")
    for j in range(dest.y.size):
        out.append(f"  w[{int(dest.y[j])}] = y[{j}];")
    for e in range(xr.q_dest.size):         # extra rows' bias, quadratic in a body's velocity
        vb = L.vel + 6 * int(xr.q_body[e])
        out.append(f"  w[{int(xr.q_dest[e])}] -= {lit(xr.q_coef[e])} * w[{vb + int(xr.q_k[e])}]"
                   f" * w[{vb + int(xr.q_l[e])}];")
    for e in range(xr.g_dest.size):         # and linear in a body's gravity vector
        gb = L.grav + 3 * int(xr.g_body[e]) + int(xr.g_k[e])
        out.append(f"  w[{int(xr.g_dest[e])}] -= {lit(xr.g_coef[e])} * w[{gb}];")
    return out


def vector_unit_fits(schedule):
    """Can the program run on lanes (solve_function with a vector Dialect)? Straight-line
    programs: the table-driven ones (_interpreter) run one state at a time."""
    return schedule.prog.t.size <= STRAIGHT_LINE_MAX_OPS


def solve_function(fn, schedule, col_perm, tol, nq, nv, n_bodies, layout, tables, d=SCALAR):
    """C source of `int fn(q, qd, y, out, x, work)` running `schedule` (a Schedule) for one
    state (or, d a vector Dialect, `vl fn(...)` on vectors of lanes: vector_unit_fits): x (the
    whole solution, natural column order) is written when not NULL and the schedule computes
    it."""
    sch, m, xr, dest, prog, rc = (schedule, schedule.model_arrays, schedule.xr, schedule.dest,
                                  schedule.prog, schedule.rc)
    L, n = layout, col_perm.size
    residual = rc.tol.size > 0
    if d.vector and not vector_unit_fits(schedule):
        raise ValueError("a table-driven program (_interpreter) runs one state at a time")
    helpers, T, F = [], d.T, d.F
    if prog.t.size <= STRAIGHT_LINE_MAX_OPS:
        ops = []
        _ops(prog, ops, d)
        run = _chunked(f"{fn}_ops", [[line] for line in ops], f"{T} *restrict w, "
                       f"const {T} *restrict scale",
                       [f"  const double tol = {lit(tol)};", f"  {T} p;", f"  {F} bad = {d.zero_F};",
                        "  (void)p; (void)tol; (void)scale;"], F, helpers, OPS_CHUNK)
    else:
        run = [_interpreter(f"{fn}_ops", prog, tol, tables, helpers)]
    out = [f"static {F} {fn}(const {T} *restrict q, const {T} *restrict qd, "
           f"const {T} *restrict y, {T} *restrict out, {T} *restrict x, "
           f"{T} *restrict work)", "{",
           f"  {T} *restrict w = work + {L.w};",
           f"  {T} *restrict scale = work + {L.scale};",
           f"  {T} acc = {d.zero_T}, v, mag;",
           f"  {F} bad = {d.zero_F}, quat_bad = {d.zero_F};",
           "  (void)mag; (void)scale; (void)y;"]
    if d.vector:
        out.append("  int s; (void)s;")
    if residual:
        out.append(f"  const double tol_res = {lit(rc.tol[0])};")
    for s, v in zip(sch.init_slots, sch.init_values):
        out.append(f"  w[{int(s)}] = {d.const(v)};")
    out += assembly_statements(fn, m, xr, dest, L, nq, n_bodies, helpers, d)
    # pivot-check row scales from the freshly assembled entries
    for c in range(prog.chk_const.size):
        out.append(f"  scale[{c}] = {d.const(prog.chk_const[c])};")
        for e in range(prog.chk_ptr[c], prog.chk_ptr[c + 1]):
            out.append(f"  mag = {d.abs(f'w[{int(prog.chk_entries[e])}]')}; "
                       + d.bigger("mag", f"scale[{c}]"))
    if residual:
        for k, s in enumerate(rc.r_slot):
            out.append(f"  work[{L.saved + k}] = w[{int(s)}];")
        for k in range(n):
            out.append(f"  work[{L.bsave + k}] = w[{int(sch.sol_slot[k])}];")
    out += [f"  bad |= {name}(w, scale);" for name in run]
    if residual:
        _residual(fn, rc, sch.sol_slot, L, n, out, tables, d)
    # x - x is 0 for a finite x and NaN otherwise
    for s in sch.sol_slot:
        out.append(f"  v = w[{int(s)}]; acc += v - v;")
    out.append("  bad |= acc != 0.0;")
    for j, s in enumerate(sch.out_slot):
        out.append(f"  out[{j}] = w[{int(s)}];")
    if sch.sol_slot.size == n:
        out.append("  if (x) {")
        for k in range(n):
            out.append(f"    x[{int(col_perm[k])}] = w[{int(sch.sol_slot[k])}];")
        out.append("  }")
    out += [f"  return {d.status()};", "}"]
    return "\n\n".join(helpers + ["\n".join(out)])


KINDS = ("outputs", "full")


def unit_source(ir, prefix, kinds=KINDS):
    """(C source, work size in doubles, sizes) of a FusedProgram: for each of `kinds` the
    function (outputs only, or the full solution too) and its batch loop, prefix_* (a C
    identifier). The work size covers both kinds, so a caller's work array serves either."""
    assembly, program = ir.assembly, ir.program
    nq, nv, N, n = assembly.nq, assembly.nv, assembly.nbodies, program.n
    schedules = {"outputs": ir.schedule(False), "full": ir.schedule(True)}
    work = max(Layout(sch, N, n).size for sch in schedules.values())
    n_y, n_out = schedules["outputs"].dest.y.size, schedules["outputs"].out_slot.size
    parts, tables = [], []
    api = [f"#define {prefix.upper()}_WORK_DOUBLES {work}",
           f"int {prefix}_work_doubles(void) {{ return {work}; }}"]
    for kind in kinds:
        sch = schedules[kind]
        parts.append(solve_function(f"{prefix}_{kind}_one", sch, program.col_perm, program.tol,
                                    nq, nv, N, Layout(sch, N, n), tables))
        full = kind == "full"
        xarg, xval, xptr = ((" double *x,", "x", f"x + b * {n}") if full
                            else ("", "(double *)0", "(double *)0"))
        api += [f"int {prefix}_{kind}(const double *q, const double *qd, const double *y, "
                f"double *out,{xarg} double *work)",
                f"{{ return {prefix}_{kind}_one(q, qd, y, out, {xval}, work); }}",
                f"void {prefix}_{kind}_batch(long B, const double *q, const double *qd, "
                f"const double *y, double *out,{xarg} unsigned char *broken, double *work)",
                "{", "  long b;",
                "  for (b = 0; b < B; b++)",
                f"    broken[b] = (unsigned char){prefix}_{kind}_one(q + b * {nq}, qd + b * {nv}, "
                f"y + b * {n_y}, out + b * {n_out}, {xptr}, work);",
                "}"]
    src = "\n".join(["#include <math.h>", ""] + tables + [""] + parts + [""] + api) + "\n"
    return src, work, dict(nq=nq, nv=nv, n_y=n_y, n_out=n_out, n=n)
