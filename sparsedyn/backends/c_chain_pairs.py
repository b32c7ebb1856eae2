"""Two chains of a pair-chain program (ir/chain_program.py) run as one two-lane vector chain in
the generated C of the MAP route (backends/c_chains.py): lane l computes instruction i_l exactly
as the scalar code does, so the results are the scalar program's bit for bit (up to the sign of
a zero sum).

Two instructions i1, i2 pair when they write neighbouring slots (t2 = t1 + 1), neither reads what
the other writes, neither is a product list, a reciprocal or a mid store, and their last s >= 2
products have equal coefficients and operands that are equal (one value for both lanes) or
neighbours (w[x], w[x + 1]: one vector load). Then

    lane l: acc_l = (w[src] or c0) + its first k_l - s products     (scalar, folded: c_chain_fold)
    {acc_1, acc_2} += ({w[a], w[a']} * {w[b], w[b']}) * c           (the s common products)
    w[t1], w[t1 + 1] = the two sums; each lane's epilogue

Where it occurs (planner/chain_ldlt.py lays the slots out for it): the chains of consecutive
targets l_ik, l_(i+1)k of a factor column that read the same multipliers c_kj (L stored by
columns: l_ij, l_(i+1)j neighbours), and a substitution's chain of y_k next to the probe's
chain of z_k (the same l_kj times y_j and z_j, neighbours): the probe runs inside the solve.

Vectors are GCC/Clang vector extensions (SSE2's two doubles); another C99 compiler gets the
same macros on a struct of two doubles (VECTOR_HEADER)."""
from __future__ import annotations

from ..ir.chain_program import EPI_ADD, EPI_LIST, EPI_RECIP, EPI_SCALE
from .c_source import lit

#: the shortest common tail worth a vector (building and storing one costs about a product)
MIN_COMMON = 2

VECTOR_HEADER = """#if defined(__GNUC__)
typedef double sd_v2 __attribute__((vector_size(16)));
typedef double sd_v2u __attribute__((vector_size(16), aligned(8), may_alias));
#define SD_V(a, b) ((sd_v2){(a), (b)})
#define SD_LD(p) (*(const sd_v2u *)(p))
#define SD_ST(p, v) (*(sd_v2u *)(p) = (v))
#define SD_ADD(a, b) ((a) + (b))
#define SD_SUB(a, b) ((a) - (b))
#define SD_MUL(a, b) ((a) * (b))
#else
typedef struct { double e[2]; } sd_v2;
static sd_v2 SD_V(double a, double b) { sd_v2 r; r.e[0] = a; r.e[1] = b; return r; }
#define SD_LD(p) SD_V((p)[0], (p)[1])
#define SD_ST(p, v) ((p)[0] = (v).e[0], (p)[1] = (v).e[1])
static sd_v2 SD_ADD(sd_v2 a, sd_v2 b) { return SD_V(a.e[0] + b.e[0], a.e[1] + b.e[1]); }
static sd_v2 SD_SUB(sd_v2 a, sd_v2 b) { return SD_V(a.e[0] - b.e[0], a.e[1] - b.e[1]); }
static sd_v2 SD_MUL(sd_v2 a, sd_v2 b) { return SD_V(a.e[0] * b.e[0], a.e[1] * b.e[1]); }
#endif"""


def _pairs(ch, i):
    q, k = int(ch.ins_q[i]), int(ch.ins_k[i])
    return [(int(ch.pa[q + j]), int(ch.pb[q + j]), float(ch.pc[q + j])) for j in range(k)]


def _writes(ch, i):
    return {int(ch.ins_t[i]), int(ch.ins_t2[i])}


def _reads(ch, i):
    out = {x for a, b, _ in _pairs(ch, i) for x in (a, b)} | {int(ch.ins_r2[i])}
    return out | ({int(ch.ins_src[i])} if ch.ins_row[i] else set()) | (
        {int(ch.ins_t2[i])} if ch.ins_mode[i] == EPI_ADD else set())


def common_tail(ch, i1, i2):
    """How many trailing products instructions i1 and i2 run as one vector chain (0: they do
    not pair; module docstring)."""
    if int(ch.ins_t[i2]) != int(ch.ins_t[i1]) + 1:
        return 0
    for i in (i1, i2):
        if int(ch.ins_mode[i]) in (EPI_LIST, EPI_RECIP) or int(ch.ins_kmid[i]) >= 0:
            return 0
    if _writes(ch, i1) & _reads(ch, i2) or _writes(ch, i2) & _reads(ch, i1):
        return 0
    p1, p2 = _pairs(ch, i1), _pairs(ch, i2)
    s = 0
    while s < min(len(p1), len(p2)):
        (a1, b1, c1), (a2, b2, c2) = p1[-1 - s], p2[-1 - s]
        if c1 != c2 or a2 - a1 not in (0, 1) or b2 - b1 not in (0, 1):
            break
        s += 1
    return s if s >= MIN_COMMON else 0


def _operand(x1, x2):
    return f"SD_LD(w + {x1})" if x2 == x1 + 1 else f"SD_V(w[{x1}], w[{x1}])"


def paired_statements(folder, i1, i2, s):
    """The C statements running instructions i1, i2 with their last s products as one vector
    chain, `folder` (c_chain_fold.ChainFolder) tracking what the plan fixes."""
    ch, out = folder.chains, []
    lanes = []
    for lane, i in enumerate((i1, i2)):
        acc = folder.prefix(i, int(ch.ins_k[i]) - s, out, var=f"a{lane}")
        lanes.append(lit(acc) if isinstance(acc, float) else acc)
    p1, p2 = _pairs(ch, i1)[-s:], _pairs(ch, i2)[-s:]
    empty = all(int(ch.ins_k[i]) == s and not ch.ins_row[i] and ch.ins_c0[i] == 0.0
                for i in (i1, i2))
    v = None if empty else f"SD_V({lanes[0]}, {lanes[1]})"
    for (a1, b1, c), (a2, b2, _) in zip(p1, p2):
        term = f"SD_MUL({_operand(a1, a2)}, {_operand(b1, b2)})"
        if c not in (1.0, -1.0):
            term = f"SD_MUL({term}, SD_V({lit(c)}, {lit(c)}))"
        if v is None:              # a sum from 0.0 starts at its first term, as the folder's
            v = term if c != -1.0 else f"SD_SUB(SD_V(0.0, 0.0), {term})"
        else:
            v = f"SD_{'SUB' if c == -1.0 else 'ADD'}({v}, {term})"
        out.append(f"  v = {v};")
        v = "v"
    t = int(ch.ins_t[i1])
    r1, r2 = int(ch.ins_r2[i1]), int(ch.ins_r2[i2])
    scaled = all(int(ch.ins_mode[i]) == EPI_SCALE and int(ch.ins_t2[i]) == int(ch.ins_t[i])
                 for i in (i1, i2)) and r2 - r1 in (0, 1)
    if scaled:                      # l_ik = acc r_k in both lanes: one vector product
        out.append(f"  v = SD_MUL(v, {_operand(r1, r2)});")
    out.append(f"  SD_ST(w + {t}, v);")
    for i in (i1, i2):
        folder.known.pop(int(ch.ins_t[i]), None)
        mode, ti, t2, r = (int(ch.ins_mode[i]), int(ch.ins_t[i]), int(ch.ins_t2[i]),
                           int(ch.ins_r2[i]))
        if mode == EPI_SCALE and not scaled:
            folder.known.pop(t2, None)
            out.append(f"  w[{t2}] = w[{ti}] * w[{r}];")
        elif mode == EPI_ADD:
            x = folder.known.pop(t2, None)
            out.append(f"  w[{t2}] = w[{ti}];" if x == 0.0 else
                       f"  w[{t2}] = {'w[%d]' % t2 if x is None else lit(x)} + w[{ti}];")
    return [line for line in out if line != "  v = v;"]
