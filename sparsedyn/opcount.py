"""One operation counter for every kernel: recursive algorithms and sparse online kernels.

Counts are per state (a batch of B states costs B times as much) and split into multiplications
(divisions and square roots are counted apart) and additions (subtractions included), the way
Featherstone's and Nori's tables count them. The sparse kernels charge the exact flops of their
symbolic factorization. The recursive baselines are counted under one of two conventions:

  "paper" (default)  as the papers count them: compact spatial forms (Featherstone, Appendix A)
                     with the structure of the model at hand exploited (unit-axis motion
                     subspaces, joint rotations about coordinate axes, symmetric inertias, the
                     structural zeros of vectors), see sparsedyn/spatial_costs.py;
  "as_written"       the straightforward dense form each primitive evaluates (the reference).

    with count_operations() as ops:
        sparsedyn.rnea(model, q, v, a)
    ops.mul, ops.add
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field


@dataclass
class OpCount:
    mul: int = 0
    add: int = 0
    div: int = 0
    sqrt: int = 0
    by_kind: dict = field(default_factory=dict)
    convention: str = "paper"

    @property
    def flops(self):
        return self.mul + self.add + self.div + self.sqrt

    def charge(self, mul=0, add=0, div=0, sqrt=0, kind=None):
        self.mul += mul
        self.add += add
        self.div += div
        self.sqrt += sqrt
        if kind is not None:
            self.by_kind[kind] = self.by_kind.get(kind, 0) + mul + add + div + sqrt

    def as_dict(self):
        return {"mul": self.mul, "add": self.add, "div": self.div, "sqrt": self.sqrt, "flops": self.flops}


_active: list[OpCount] = []


CONVENTIONS = ("paper", "as_written")


def charge(mul=0, add=0, div=0, sqrt=0, kind=None, written=None):
    """Add a per-state cost to every active counter (no-op when none is active). `written`:
    (mul, add[, div[, sqrt]]) charged instead to counters of the "as_written" convention, when the
    straightforward form costs otherwise."""
    for c in _active:
        if written is not None and c.convention == "as_written":
            c.charge(*written, kind=kind)
        else:
            c.charge(mul, add, div, sqrt, kind)


def convention_active(name):
    """True if some active counter uses the convention `name` (to skip structure analysis)."""
    return any(c.convention == name for c in _active)


def counting():
    return bool(_active)


@contextlib.contextmanager
def count_operations(convention="paper"):
    if convention not in CONVENTIONS:
        raise ValueError(f"convention: expected one of {CONVENTIONS}, got {convention!r}")
    c = OpCount(convention=convention)
    _active.append(c)
    try:
        yield c
    finally:
        # by identity: OpCount is a dataclass, and list.remove would drop the first counter with
        # equal counts (an outer one that started at zero, when counters nest)
        del _active[next(k for k, x in enumerate(_active) if x is c)]


@contextlib.contextmanager
def suspended():
    """Charge nothing inside (for batch work whose per-state cost was charged already)."""
    saved = _active[:]
    _active.clear()
    try:
        yield
    finally:
        _active[:] = saved


@contextlib.contextmanager
def written_only():
    """Charge what is inside to the "as_written" counters only (its paper cost is charged apart,
    from the operands' structure)."""
    saved = _active[:]
    _active[:] = [c for c in saved if c.convention == "as_written"]
    try:
        yield
    finally:
        _active[:] = saved


def charge_matmul(m, k, n, kind="matmul"):
    """Dense (m x k) @ (k x n)."""
    charge(m * k * n, m * (k - 1) * n, kind=kind)
