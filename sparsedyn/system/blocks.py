"""Named variable and constraint blocks of Nori's Newton-Euler system, their index maps and
permutations (seed 001, Sec. II eq. 1 and Sec. III-A).

Variables, per body i (Sec. III-A):  a_i (6), f_i (6), tau_i (n_i), fx_i (6), qdd_i (n_i).
Constraints, per body i:            "ne_a" (3a_i, 6 rows), "ne_f" (3f_i, 6), "ne_tau" (3tau_i, n_i),
and measurement rows "y_<kind>" that fix one variable block to a given value (eq. 8, 9, 15).

The natural order of both sides is by body, then block kind (the order of the tuples below);
every other order is a permutation of it, named by a sequence of (kind, body) keys (eq. 1). A
permutation is an int array `perm` with D_perm = D[row_perm][:, col_perm], i.e. perm[k] is the
natural index that lands at position k.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: variable block kinds in natural order (Sec. III-A: the set D)
VARIABLE_KINDS = ("a", "f", "tau", "fx", "qdd")
#: Newton-Euler constraint kinds (the set C): eq. (3a_i), (3f_i), (3tau_i)
CONSTRAINT_KINDS = ("ne_a", "ne_f", "ne_tau")
#: row kinds in natural order: measurement rows "y_<variable kind>" (eq. 8, 15, 17) follow the
#: Newton-Euler rows of their body
ROW_KINDS = CONSTRAINT_KINDS + ("y_fx", "y_qdd", "y_tau", "y_a", "y_f")


@dataclass(frozen=True)
class Block:
    """One named block: `kind` of body `body`, occupying [start, start + size)."""

    kind: str
    body: int
    start: int
    size: int

    @property
    def stop(self):
        return self.start + self.size

    @property
    def slice(self):
        return slice(self.start, self.stop)

    @property
    def indices(self):
        return np.arange(self.start, self.stop)


class BlockLayout:
    """An ordered list of blocks (one side of D) with lookup by (kind, body)."""

    def __init__(self, entries, kind_order):
        """entries: iterable of (kind, body, size); they are laid out by body, then by the rank of
        the kind in `kind_order` (the natural order)."""
        rank = {k: r for r, k in enumerate(kind_order)}
        for kind, body, _ in entries:
            if kind not in rank:
                raise ValueError(f"unknown block kind {kind!r} (known: {', '.join(kind_order)})")
        ordered = sorted(entries, key=lambda e: (e[1], rank[e[0]]))
        self.blocks = []
        self.index = {}
        start = 0
        for kind, body, size in ordered:
            key = (kind, int(body))
            if key in self.index:
                raise ValueError(f"block {kind!r} of body {body} is defined twice")
            block = Block(kind, int(body), start, int(size))
            self.blocks.append(block)
            self.index[key] = block
            start += int(size)
        self.size = start

    def __contains__(self, key):
        return key in self.index

    def __getitem__(self, key):
        try:
            return self.index[key]
        except KeyError:
            raise KeyError(f"no block {key[0]!r} for body {key[1]}") from None

    def of_kind(self, kind):
        return [b for b in self.blocks if b.kind == kind]

    def permutation(self, keys):
        """Index permutation that lists the blocks `keys` ((kind, body) pairs, each once, all of
        them) in that order."""
        keys = list(keys)
        if len(keys) != len(self.blocks) or set(keys) != set(self.index):
            missing = set(self.index) - set(keys)
            extra = [k for k in keys if k not in self.index]
            raise ValueError(f"a block permutation must list every block exactly once "
                             f"(missing {sorted(missing)[:5]}, unknown {extra[:5]})")
        return np.concatenate([self.index[k].indices for k in keys] + [np.zeros(0, np.int64)])

    def labels(self, body_names):
        """One label per scalar entry, e.g. 'a[link3][2]' (for messages and plots)."""
        out = []
        for b in self.blocks:
            out.extend(f"{b.kind}[{body_names[b.body]}][{k}]" for k in range(b.size))
        return out

    def describe(self):
        """Plain description (kind, body, size) in natural order (stored in plan files)."""
        return [(b.kind, b.body, b.size) for b in self.blocks]


# --------------------------------------------------------------------------------------------
# Nori's structural permutations


def rnea_order(nbodies, rows, cols):
    """Eq. (11)-(12): with q = [fx_1, qdd_1, ..., fx_N, qdd_N, a_1..a_N, f_N, tau_N, ..., f_1,
    tau_1] and the matching p_id, D_{p_id, q} is lower triangular with a diagonal of +-1
    (Property 1): forward substitution on it is the RNEA. Bodies without an fx block skip it.
    Returns (row_perm, col_perm)."""
    col_keys, row_keys = [], []
    for i in range(nbodies):                                    # the measured blocks, eq. (8)
        for kind in ("fx", "qdd"):
            if (kind, i) in cols:
                col_keys.append((kind, i))
                row_keys.append(("y_" + kind, i))
    col_keys += [("a", i) for i in range(nbodies)]              # outward: eq. (3a_i)
    row_keys += [("ne_a", i) for i in range(nbodies)]
    for i in range(nbodies - 1, -1, -1):                        # inward: eq. (3f_i), (3tau_i)
        col_keys += [("f", i), ("tau", i)]
        row_keys += [("ne_f", i), ("ne_tau", i)]
    return rows.permutation(row_keys), cols.permutation(col_keys)


def aba_order(nbodies, rows, cols):
    """The articulated-body elimination order (Appendix B, Property 2), as a pivot sequence.

    Eq. (34)-(35) do not make D itself triangular: the ABA also needs the block row/column
    operations W^L, W^R, and in D the pair (c_tau_i, qdd_i) is structurally zero. The same
    elimination as an LU pivot sequence is: the measured fx_i, tau_i first (eq. 8, 15), then for
    i = N..1 the pivots (3f_i, f_i) [-1_6, Step 1: f_i -> p^A_i], (3a_i, a_i) [-1_6, Steps 2
    and 4] and (3tau_i, qdd_i) [S_i^T I^A_i S_i after the first two, Step 3]; the Schur
    complement left in the parent's (3f) row by the last is I^a_i (Step 5, eq. 13). Returns
    (row_perm, col_perm)."""
    col_keys, row_keys = [], []
    for i in range(nbodies):
        for kind in ("fx", "tau"):
            if (kind, i) in cols:
                col_keys.append((kind, i))
                row_keys.append(("y_" + kind, i))
    for i in range(nbodies - 1, -1, -1):
        col_keys += [("f", i), ("a", i), ("qdd", i)]
        row_keys += [("ne_f", i), ("ne_a", i), ("ne_tau", i)]
    return rows.permutation(row_keys), cols.permutation(col_keys)
