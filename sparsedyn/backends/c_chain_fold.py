"""Plan-time folding of a pair-chain program's C statements (ir/chain_program.py semantics,
backends/c_chains.py): the generated code for ONE state, in execution order, with every slot
whose value the plan fixes (ONE, x = 0 before the first solve, and whatever chains compute from
such slots alone) carried as a Python float instead of being read and multiplied at run time.

    w[t] = (w[src] or c0) + sum_j (w[a_j] * w[b_j]) * c_j

  - a product of two known slots is the float (a * b) * c; added to a known partial sum, the
    sum is a float too (the chain's prefix of known terms, left to right, as C adds it);
  - a known factor 1.0 is left out ((x * 1) * c = x * c exactly), another known factor
    becomes a literal;
  - a chain whose value is known stores its literal (readers outside the chains, the flags and
    x's copy, read w), and so do its epilogues when their operands are known;
  - a sum starting from the constant 0.0 starts at its first run-time term instead (so does
    an epilogue x += acc on a known x = 0.0), and an addend -0.0 is left out (x + -0.0 == x).

Why: C may not fold `x * 1.0` or `0.0 + x` under IEEE semantics (NaN, the sign of zero), and
its constant propagation cannot see through the work array w, so the unfolded program reads ONE
in every product with a constant entry of A and recomputes the factor's state-independent
columns on every call.

Exactness: every folded operation is the one the unfolded code performs, in IEEE double as C
rounds it (-ffp-contract=off), in the same order; dropping a factor 1.0 or an addend -0.0 is
exact. Starting a sum at its first term instead of 0.0 + it changes only the sign of a zero sum
(-0.0 instead of +0.0); a zero pivot is flagged either way (d > 0 fails for both). So the
results equal the unfolded program's bit for bit up to the sign of zeros. A folded value that is
not finite is refused (ValueError from c_source.lit): c_chains then emits the unfolded program.
"""
from __future__ import annotations

import math

from ..ir.chain_program import EPI_ADD, EPI_LIST, EPI_RECIP, EPI_SCALE
from .c_fold import lit

#: a run-time expression longer than this is cut into `acc = ...;` statements (the same order
#: of additions), keeping lines short
MAX_EXPR = 240


def _negative_zero(x):
    return x == 0.0 and math.copysign(1.0, x) < 0.0


class ChainFolder:
    """Emits instructions of one ChainArrays in execution order, tracking `known` {slot: value}
    (the slots the plan fixes at this point of the program)."""

    def __init__(self, chains, known):
        self.chains, self.known = chains, dict(known)

    def _factor(self, a, b):
        """(the run-time part, the known factor or None) of w[a] * w[b] when at most one of the
        two is known (x * y == y * x exactly)."""
        va, vb = self.known.get(a), self.known.get(b)
        if va is not None and vb is not None:
            return None
        if va is not None:
            return f"w[{b}]", va
        return (f"w[{a}]", vb) if vb is not None else (f"w[{a}] * w[{b}]", None)

    def _term(self, a, b, c):
        """(sign, text) of the run-time addend (w[a] * w[b]) * c, rounded as written."""
        x, v = self._factor(a, b)
        if v is not None and v != 1.0:
            x = f"({x} * {lit(v)})"
        elif v is None and c not in (1.0, -1.0):
            x = f"({x})"
        if c == 1.0:
            return "+", x
        if c == -1.0:
            return "-", x
        return "+", f"{x} * {lit(c)}"

    def store(self, t, value, out):
        """w[t] = value (a float: known from here on) or a run-time expression."""
        if isinstance(value, float):
            lit(value)                                   # refuses non-finite values
            self.known[t] = value
            out.append(f"  w[{t}] = {lit(value)};")
        else:
            self.known.pop(t, None)
            out.append(f"  w[{t}] = {value};")

    def prefix(self, i, stop, out, var="acc"):
        """The value of instruction i's chain after its first `stop` products: a float while
        the plan fixes it, else an expression (statements into `out`, `var` the C variable
        holding a partial sum)."""
        ch, known = self.chains, self.known
        src, c0, fr = int(ch.ins_src[i]), float(ch.ins_c0[i]), int(ch.ins_row[i])
        q, kmid, mid = int(ch.ins_q[i]), int(ch.ins_kmid[i]), int(ch.ins_mid[i])
        pairs = [(int(ch.pa[q + j]), int(ch.pb[q + j]), float(ch.pc[q + j]))
                 for j in range(stop)]
        acc = (known.get(src, f"w[{src}]") if fr else c0)   # a float while the plan fixes it
        for j, (a, b, c) in enumerate(pairs):
            if j == kmid:
                if isinstance(acc, float):
                    self.store(mid, acc, out)
                else:
                    out.append(f"  {var} = {acc}; w[{mid}] = {var};")
                    known.pop(mid, None)
                    acc = var
            if a in known and b in known:
                p = (known[a] * known[b]) * c
                if isinstance(acc, float):
                    acc = acc + p
                elif not _negative_zero(p):
                    acc = f"{acc} + {lit(p)}" if p >= 0 else f"{acc} - {lit(-p)}"
                continue
            sign, term = self._term(a, b, c)
            if isinstance(acc, float):
                acc = (f"{lit(acc)} {sign} {term}" if acc != 0.0
                       else (term if sign == "+" else f"-({term})"))
            else:
                acc = f"{acc} {sign} {term}"
            if len(acc) > MAX_EXPR:
                out.append(f"  {var} = {acc};")
                acc = var
        return acc

    def statements(self, i):
        """The C statements of instruction i."""
        ch, known, out = self.chains, self.known, []
        t, q, k = int(ch.ins_t[i]), int(ch.ins_q[i]), int(ch.ins_k[i])
        mode, t2, r2 = int(ch.ins_mode[i]), int(ch.ins_t2[i]), int(ch.ins_r2[i])
        if mode == EPI_LIST:
            pairs = [(int(ch.pa[q + j]), int(ch.pb[q + j])) for j in range(k)]
            for j, (a, b) in enumerate(pairs):
                if a in known and b in known:
                    self.store(t + j, known[a] * known[b], out)
                else:
                    x, v = self._factor(a, b)
                    self.store(t + j, x if v in (None, 1.0) else f"{x} * {lit(v)}", out)
            return out
        acc = self.prefix(i, k, out)
        if isinstance(acc, float):
            self.store(t, acc, out)
            value, r = acc, known.get(r2)
            if mode == EPI_SCALE:
                self.store(t2, value * r if r is not None else f"{lit(value)} * w[{r2}]", out)
            elif mode == EPI_RECIP:
                self.store(t2, 1.0 / value if value != 0.0 else f"1.0 / {lit(value)}", out)
            elif mode == EPI_ADD:
                self.store(t2, known[t2] + value if t2 in known else
                            f"w[{t2}] + {lit(value)}", out)
            return out
        out.append(f"  acc = {acc}; w[{t}] = acc;")
        known.pop(t, None)
        if mode == EPI_SCALE:
            r = known.get(r2)
            self.store(t2, f"acc * {lit(r)}" if r is not None else f"acc * w[{r2}]", out)
        elif mode == EPI_RECIP:
            self.store(t2, "1.0 / acc", out)
        elif mode == EPI_ADD:
            x = known.get(t2)
            self.store(t2, f"w[{t2}] + acc" if x is None else
                        ("acc" if x == 0.0 else f"{lit(x)} + acc"), out)
        return out
