"""The per-variable tests of the MAP route's C (backends/c_chains.py, its flags 1 and 2) after the
refinement step, and x copied out on the way: for every variable k

    x_k and z_k finite         (x - x is 0 for a finite x and NaN otherwise: one sum `fin`)
    d_k > 0                    (the pivot; else `ibad`)
    d_k - p_k <= tol (N_kk - p_k)   for a known variable: a direction the data may not determine
    |z_k| > zt_k               for a known variable: the probe responds (`probe`)

(kernels/normal_numba.py, _map_flags). Four variables at a time on GCC/Clang vectors (one
variable's tests and or-ed flags were ~35 scalar instructions, n of them per sample), the rest (and every variable with another compiler, or SD_SCALAR_VECTORS
defined) one at a time: lane l computes variable k + l's tests with the same operations, so the
flags are the scalar loop's (`fin` sums +0.0 or NaN terms: in any order NaN exactly when one
term is; |z| > zt is z > zt or -z > zt, both false for a NaN). Each operand is a pair (scalar
expression of `k`, vector expression of the four lanes from `k`): contiguous(p) reads p[k..k+3]
as one vector, gathered(e) four scalars e(k), ..., e(k + 3) put in one."""
from __future__ import annotations

#: variables per vector of the tests (sd_v4 of c_chain_pairs.VECTOR_HEADER)
TEST_LANES = 4


def contiguous(pointer):
    """The operand pointer[k]: four consecutive doubles on vectors."""
    return f"{pointer}[k]", f"SD_LD4({pointer} + k)"


def gathered(template):
    """The operand template.format(k=k) (an expression of k), one lane at a time on vectors."""
    lanes = ", ".join(template.format(k=f"k + {lane}" if lane else "k")
                      for lane in range(TEST_LANES))
    return template.format(k="k"), f"SD_V4({lanes})"


def flag_statements(n, d, x, z, nkk, p0, zt, tol, known=None):
    """C lines of the tests over the n variables (operands as pairs: module docstring; `known`
    the pair (scalar 0/1 expression, vector mask expression) of the known variables, None: all),
    declaring nothing outside their block: they leave `fin`, `ibad` and `iund` set and `probe`
    or-ed in the caller's block (int k and probe declared there), x[0..n-1] written."""
    ks, kv = ("1", None) if known is None else known
    vector = [
        "#if defined(__GNUC__) && !defined(SD_SCALAR_VECTORS)",
        "  { typedef long long sd_m4 __attribute__((vector_size(32)));    /* lane masks */",
        "    sd_v4 tf = SD_V4(0.0, 0.0, 0.0, 0.0), td, tx, tz, tp, tt;",
        "    sd_m4 tb = {0, 0, 0, 0}, tu = tb, tr = tb;",
        f"    for (; k + {TEST_LANES} <= {n}; k += {TEST_LANES}) {{",
        f"      td = {d[1]}; tx = {x[1]}; tz = {z[1]}; tp = {p0[1]}; tt = {zt[1]};",
        "      tf += (tx - tx) + (tz - tz); tb |= ~(td > 0.0); SD_ST4(x + k, tx);",
        f"      tu |= {'' if kv is None else kv + ' & '}(td - tp <= {tol} * ({nkk[1]} - tp));",
        f"      tr |= {'' if kv is None else kv + ' & '}((tz > tt) | (-tz > tt));",
        "    }",
        "    fin = (tf[0] + tf[1]) + (tf[2] + tf[3]);",
        "    ibad = (tb[0] | tb[1] | tb[2] | tb[3]) != 0;",
        "    iund = (tu[0] | tu[1] | tu[2] | tu[3]) != 0;",
        "    probe |= (tr[0] | tr[1] | tr[2] | tr[3]) != 0; }",
        "#endif"]
    return ["  k = 0;", *vector,
            f"  for (; k < {n}; k++) {{",
            f"    d = {d[0]}; v = {x[0]}; z = {z[0]}; p0 = {p0[0]}; zt = {zt[0]};",
            "    fin += (v - v) + (z - z); ibad |= !(d > 0.0); x[k] = v;",
            f"    iund |= {ks} & (d - p0 <= {tol} * ({nkk[0]} - p0));",
            f"    probe |= {ks} & (fabs(z) > zt);", "  }"]
