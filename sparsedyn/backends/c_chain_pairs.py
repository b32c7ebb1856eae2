"""Two or four chains of a pair-chain program (ir/chain_program.py) run as one vector chain in
the generated C of the MAP route (backends/c_chains.py): lane l computes instruction i_l exactly
as the scalar code does, in the same order, so the results are the scalar program's bit for bit
(up to the sign of a zero sum).

Instructions i_0..i_(n-1) go together when they write consecutive slots (t_l = t_0 + l), none
reads what another writes, none is a product list, a reciprocal or a mid store, and their last
s >= MIN_COMMON products have equal coefficients and, operand by operand, one slot for every
lane (a broadcast) or consecutive ones (w[x + l]: one vector load). Then

    lane l: acc_l = (w[src] or c0) + its first k_l - s products    (scalar, folded: c_chain_fold)
    {acc_l} += ({w[a_l]} * {w[b_l]}) * c                           (the s common products)
    w[t_0 .. t_0 + n - 1] = the sums (times {w[r_l]} when every lane scales its target);
    each lane's other epilogue

Where it occurs (planner/chain_ldlt.py lays the slots out for it): the chains of consecutive
targets l_ik, l_(i+1)k, ... of a factor column that read the same multipliers c_kj (L stored by
columns: l_ij, l_(i+1)j neighbours), and a substitution's chain of y_k next to the probe's
chain of z_k (the same l_kj times y_j and z_j, neighbours): the probe runs inside the solve.

A pivot's chain leads its column: d_j = N_jj - sum_k l_jk c_jk (epilogue 1/d_j, N_jj stored on
the way) reads the same c_jk as the chains of l_(j+1)j, ... below it, times l_jk next to
l_(j+1)k, so it goes in lane 0 of their vector although its target is not next to theirs (the
lanes are then stored one by one) and they scale by the 1/d_j it writes: the epilogues run in
lane order after the stores, 1/d_j first, as the scalar code runs them.

Vectors are GCC/Clang vector extensions (two doubles: SSE2; four: AVX, else two SSE2 halves);
another C99 compiler, or SD_SCALAR_VECTORS defined, gets the same macros on structs of doubles
(VECTOR_HEADER), lane by lane."""
from __future__ import annotations

from ..ir.chain_program import EPI_ADD, EPI_LIST, EPI_RECIP, EPI_SCALE
from .c_fold import lit

#: the shortest common tail worth a vector (building and storing one costs about a product)
MIN_COMMON = 2
#: vector widths, widest first: two doubles (SSE2) and four (AVX; two SSE2 halves without it)
WIDTHS = (4, 2)

VECTOR_HEADER = """#if defined(__GNUC__) && !defined(SD_SCALAR_VECTORS)
typedef double sd_v2 __attribute__((vector_size(16)));
typedef double sd_v4 __attribute__((vector_size(32)));
typedef double sd_u2 __attribute__((vector_size(16), aligned(8), may_alias));
typedef double sd_u4 __attribute__((vector_size(32), aligned(8), may_alias));
#define SD_V2(a, b) ((sd_v2){(a), (b)})
#define SD_V4(a, b, c, d) ((sd_v4){(a), (b), (c), (d)})
#define SD_LD2(p) (*(const sd_u2 *)(p))
#define SD_LD4(p) (*(const sd_u4 *)(p))
#define SD_ST2(p, v) (*(sd_u2 *)(p) = (v))
#define SD_ST4(p, v) (*(sd_u4 *)(p) = (v))
#define SD_GET(v, l) ((v)[l])
#define SD_ADD2(a, b) ((a) + (b))
#define SD_SUB2(a, b) ((a) - (b))
#define SD_MUL2(a, b) ((a) * (b))
#define SD_ADD4(a, b) ((a) + (b))
#define SD_SUB4(a, b) ((a) - (b))
#define SD_MUL4(a, b) ((a) * (b))
#else
typedef struct { double e[2]; } sd_v2;
typedef struct { double e[4]; } sd_v4;
static inline sd_v2 SD_V2(double a, double b) { sd_v2 r; r.e[0] = a; r.e[1] = b; return r; }
static inline sd_v4 SD_V4(double a, double b, double c, double d)
{ sd_v4 r; r.e[0] = a; r.e[1] = b; r.e[2] = c; r.e[3] = d; return r; }
#define SD_LD2(p) SD_V2((p)[0], (p)[1])
#define SD_LD4(p) SD_V4((p)[0], (p)[1], (p)[2], (p)[3])
#define SD_ST2(p, v) ((p)[0] = (v).e[0], (p)[1] = (v).e[1])
#define SD_ST4(p, v) ((p)[0] = (v).e[0], (p)[1] = (v).e[1], (p)[2] = (v).e[2], (p)[3] = (v).e[3])
#define SD_GET(v, l) ((v).e[l])
#define SD_OP(name, T, n, op) static inline T name(T a, T b) \\
{ T r; int i; for (i = 0; i < n; i++) r.e[i] = a.e[i] op b.e[i]; return r; }
SD_OP(SD_ADD2, sd_v2, 2, +) SD_OP(SD_SUB2, sd_v2, 2, -) SD_OP(SD_MUL2, sd_v2, 2, *)
SD_OP(SD_ADD4, sd_v4, 4, +) SD_OP(SD_SUB4, sd_v4, 4, -) SD_OP(SD_MUL4, sd_v4, 4, *)
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


def _lanes(xs):
    """Slots, one per lane, that one vector reads: all equal (a broadcast) or consecutive."""
    return all(x == xs[0] for x in xs) or all(x == xs[0] + j for j, x in enumerate(xs))


def _lead(ch, group):
    """Does group[0] lead (module docstring): a pivot's chain (epilogue 1/d_j) before chains
    that each scale by that 1/d_j?"""
    i = group[0]
    return int(ch.ins_mode[i]) == EPI_RECIP and all(
        int(ch.ins_mode[o]) == EPI_SCALE and int(ch.ins_r2[o]) == int(ch.ins_t2[i])
        for o in group[1:])


def common_tail(ch, group):
    """How many trailing products the instructions `group` (one per lane) run as one vector
    chain (0: they do not; module docstring)."""
    t, lead = int(ch.ins_t[group[0]]), _lead(ch, group)
    if not lead and any(int(ch.ins_t[i]) != t + j for j, i in enumerate(group)):
        return 0
    for i in group[lead:]:
        if int(ch.ins_mode[i]) in (EPI_LIST, EPI_RECIP) or int(ch.ins_kmid[i]) >= 0:
            return 0
    writes = [_writes(ch, i) | ({int(ch.ins_mid[i])} if int(ch.ins_kmid[i]) >= 0 else set())
              for i in group]
    # a led lane reads 1/d_j in its epilogue only, after the leader's
    reads = [_reads(ch, i) - ({int(ch.ins_r2[i])} if lead and j else set())
             for j, i in enumerate(group)]
    for j in range(len(group)):
        if any(writes[j] & (reads[o] | (writes[o] if lead else set()))
               for o in range(len(group)) if o != j):
            return 0
    lanes = [_pairs(ch, i) for i in group]
    s = 0
    while s < min(len(p) for p in lanes):
        terms = [p[-1 - s] for p in lanes]
        if (any(c != terms[0][2] for _, _, c in terms) or not _lanes([a for a, _, _ in terms])
                or not _lanes([b for _, b, _ in terms])):
            break
        s += 1
    if lead and int(ch.ins_kmid[group[0]]) >= 0:    # N_jj stored before the vector part
        s = min(s, int(ch.ins_k[group[0]]) - int(ch.ins_kmid[group[0]]))
    return s if s >= MIN_COMMON else 0


def _splat(n, x):
    return f"SD_V{n}({', '.join([x] * n)})"


def _operand(xs):
    """The vector of w[xs[0]], ..., w[xs[-1]] (_lanes: one slot or consecutive ones)."""
    n = len(xs)
    return f"SD_LD{n}(w + {xs[0]})" if xs[-1] == xs[0] + n - 1 else _splat(n, f"w[{xs[0]}]")


def vector_statements(folder, group, s):
    """The C statements running the instructions `group` (2 or 4, one per lane) with their last
    s products as one vector chain, `folder` (c_chain_fold.ChainFolder) tracking what the plan
    fixes."""
    ch, out, n = folder.chains, [], len(group)
    lanes = []
    for lane, i in enumerate(group):
        acc = folder.prefix(i, int(ch.ins_k[i]) - s, out, var=f"a{lane}")
        if int(ch.ins_kmid[i]) == int(ch.ins_k[i]) - s:      # a leader's N_jj, at the prefix's end
            if not isinstance(acc, float):
                out.append(f"  a{lane} = {acc};")
                acc = f"a{lane}"
            folder.store(int(ch.ins_mid[i]), acc, out)
        lanes.append(lit(acc) if isinstance(acc, float) else acc)
    tails = [_pairs(ch, i)[-s:] for i in group]
    empty = all(int(ch.ins_k[i]) == s and not ch.ins_row[i] and ch.ins_c0[i] == 0.0
                for i in group)
    v, var = (None if empty else f"SD_V{n}({', '.join(lanes)})"), f"v{n}"
    for terms in zip(*tails):
        c = terms[0][2]
        term = (f"SD_MUL{n}({_operand([a for a, _, _ in terms])}, "
                f"{_operand([b for _, b, _ in terms])})")
        if c not in (1.0, -1.0):
            term = f"SD_MUL{n}({term}, {_splat(n, lit(c))})"
        if v is None:              # a sum from 0.0 starts at its first term, as the folder's
            v = term if c != -1.0 else f"SD_SUB{n}({_splat(n, '0.0')}, {term})"
        else:
            v = f"SD_{'SUB' if c == -1.0 else 'ADD'}{n}({v}, {term})"
        out.append(f"  {var} = {v};")
        v = var
    t = int(ch.ins_t[group[0]])
    r = [int(ch.ins_r2[i]) for i in group]
    scaled = all(int(ch.ins_mode[i]) == EPI_SCALE and int(ch.ins_t2[i]) == int(ch.ins_t[i])
                 for i in group) and _lanes(r)
    if scaled:                      # l_ik = acc r_k in every lane: one vector product
        out.append(f"  {var} = SD_MUL{n}({var}, {_operand(r)});")
    ts = [int(ch.ins_t[i]) for i in group]
    if ts == list(range(t, t + n)):
        out.append(f"  SD_ST{n}(w + {t}, {var});")
    else:                           # led by a pivot's chain: lane by lane
        out += [f"  w[{x}] = SD_GET({var}, {lane});" for lane, x in enumerate(ts)]
    for i in group:
        folder.known.pop(int(ch.ins_t[i]), None)
        mode, ti, t2, r2 = (int(ch.ins_mode[i]), int(ch.ins_t[i]), int(ch.ins_t2[i]),
                            int(ch.ins_r2[i]))
        if mode == EPI_RECIP:
            folder.known.pop(t2, None)
            out.append(f"  w[{t2}] = 1.0 / w[{ti}];")
        elif mode == EPI_SCALE and not scaled:
            folder.known.pop(t2, None)
            out.append(f"  w[{t2}] = w[{ti}] * w[{r2}];")
        elif mode == EPI_ADD:
            x = folder.known.pop(t2, None)
            out.append(f"  w[{t2}] = w[{ti}];" if x == 0.0 else
                       f"  w[{t2}] = {'w[%d]' % t2 if x is None else lit(x)} + w[{ti}];")
    return [line for line in out if line != f"  {var} = {var};"]
