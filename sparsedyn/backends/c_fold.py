"""Plan-time folding of the generated assembly's arithmetic (c_source._body): a value is a Python
float when the plan fixes it (a constant of the model, a product with a structural zero of S, I,
r or a joint's rotation basis) or a C expression when the state decides it, and the helpers
below build each expression with the same operation tree as the unfolded formula, leaving out
only the terms that are exactly zero.

Why: under IEEE semantics a compiler may not drop `0.0 * x` (NaN or inf times 0 is NaN) nor
`x + 0.0` (-0 + 0 is +0), so the unfolded code computes every structural zero of a body's 6x6
algebra at run time; a revolute joint's rotation alone has five constant entries of nine.

Exactness: removing an exactly-zero addend from a sum, or a factor 1.0, leaves the remaining
operations and their rounding unchanged, and constants are combined in IEEE double as C would
(-ffp-contract=off), so a folded value equals the unfolded one bit for bit except possibly in
the sign of a zero result -- as long as every operand of a dropped product `0.0 * x` is finite.
Those operands are the state's q (through sin/cos and the joint offsets), the bodies' velocities
and the u = v_parent linear part - r x v_parent angular part; the generated code checks q and
the velocities finite (c_source.assembly_statements) and u enters a child's velocity through a
rotation, whose every column has a nonzero entry, so a non-finite u makes a velocity non-finite.
A state where a fold could differ is therefore reported (re-solve bit) instead of answered.
"""
from __future__ import annotations


def lit(x):
    """An exact C literal of the double x."""
    x = float(x)
    if x != x or x in (float("inf"), float("-inf")):
        raise ValueError(f"a non-finite constant {x!r} in the plan")
    s = repr(x)
    return s if ("e" in s or "." in s) else s + ".0"


def _atom(x, lit):
    """x as an operand: a literal (negative ones parenthesised) or the expression itself."""
    if isinstance(x, float):
        s = lit(x)
        return f"({s})" if s.startswith("-") else s
    return x


def fmul(x, y, lit):
    """x * y, folded: constant products, 0 * x = 0, 1 * x = x, -1 * x = -x (both exact)."""
    if isinstance(x, float) and isinstance(y, float):
        return x * y
    if isinstance(x, float) or isinstance(y, float):
        c, e = (x, y) if isinstance(x, float) else (y, x)
        if c == 0.0:
            return 0.0
        if c == 1.0:
            return e
        if c == -1.0:
            return fneg(e, lit)
        return f"({_atom(c, lit)} * {e})"
    return f"({x} * {y})"


def fadd(x, y, lit):
    """x + y, folded: constant sums and the exactly-zero addend dropped."""
    if isinstance(x, float) and isinstance(y, float):
        return x + y
    if isinstance(x, float) and x == 0.0:
        return y
    if isinstance(y, float) and y == 0.0:
        return x
    return f"({_atom(x, lit)} + {_atom(y, lit)})"


def fsub(x, y, lit):
    """x - y, folded: constant differences, x - 0 = x and 0 - y = -y."""
    if isinstance(x, float) and isinstance(y, float):
        return x - y
    if isinstance(y, float) and y == 0.0:
        return x
    if isinstance(x, float) and x == 0.0:
        return fneg(y, lit)
    return f"({_atom(x, lit)} - {_atom(y, lit)})"


def fneg(x, lit):
    """-x (exact)."""
    return -x if isinstance(x, float) else f"(-{x})"


def fsum(terms, lit):
    """Left-to-right sum of folded values (0.0 for none)."""
    acc = 0.0
    for k, t in enumerate(terms):
        acc = t if k == 0 else fadd(acc, t, lit)
    return acc


class Locals:
    """Named locals of the generated code: `set` emits `name = expr;` for a state-dependent value
    and keeps a constant as a float (no statement), `[name]` gives what a reader uses."""

    def __init__(self, out, lit, indent="    "):
        self.out, self.lit, self.indent, self.val = out, lit, indent, {}

    def set(self, name, value):
        if isinstance(value, float):
            self.val[name] = value
        else:
            self.out.append(f"{self.indent}{name} = {value};")
            self.val[name] = name

    def __getitem__(self, name):
        return self.val[name]

    def store(self, dest, value):
        """`dest = value;` (a work-array slot), the constant written as its literal."""
        self.out.append(f"{self.indent}{dest} = "
                        f"{self.lit(value) if isinstance(value, float) else value};")
