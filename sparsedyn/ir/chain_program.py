"""The pair-chain program of compiled MAP estimation (planned by sparsedyn.planner.chain_ldlt, run
by kernels/normal_numba.py): instructions over the rows of a lane work array w (one slot per
value), each a chain

    acc = w[src] if from_row else c0 (broadcast)
    acc = acc + (w[pa[j]] * w[pb[j]]) * pc[j]     for j = q .. q+k-1, in this order, and
                                                  w[mid] = acc before product q + kmid
    w[t] = acc
    mode EPI_SCALE: w[t2] = acc * w[r2];  EPI_RECIP: w[t2] = 1 / acc;
    mode EPI_ADD:   w[t2] = w[t2] + acc;  EPI_NONE: nothing more
or, with mode EPI_LIST, the product list w[t + j] = w[pa[q + j]] * w[pb[q + j]], j < k.
Products round as written ((a * b) * c, then the sum, left to right: no fused multiply-adds).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

EPI_NONE, EPI_SCALE, EPI_RECIP, EPI_ADD = 0, 1, 2, 3
#: not a chain: the product list w[t + j] = w[pa[q + j]] * w[pb[q + j]] for j < k
EPI_LIST = 4
#: the per-sample prior numbers a per-sample program reads from slots (ChainProgram.prior_slot):
#: p in N, the gradient's precision, p mu, the probe's right-hand side c and its second step's
#: scale J (the typical information)
PRIOR_ROWS = ("p", "pg", "pmu", "c", "J")


class ChainArrays(NamedTuple):
    """A chain program's instructions (ins_*: one chain each, as in the module docstring) and
    pairs (pa, pb, pc), as a kernel reads them."""
    ins_t: np.ndarray
    ins_src: np.ndarray
    ins_c0: np.ndarray
    ins_row: np.ndarray
    ins_q: np.ndarray
    ins_k: np.ndarray
    ins_kmid: np.ndarray
    ins_mid: np.ndarray
    ins_mode: np.ndarray
    ins_t2: np.ndarray
    ins_r2: np.ndarray
    pa: np.ndarray
    pb: np.ndarray
    pc: np.ndarray


@dataclass(frozen=True)
class ChainProgram:
    """The instructions (`chains`; mode EPI_LIST: a product list), parts [0, factor_end) factor,
    [factor_end, solve_end) solve, [solve_end, resid_end) resid, [resid_end, probe_end) probe,
    [probe_end, n_ins) the probe's second step (empty if the program has none); slots of ONE,
    of A's dynamic entries (entry_slot, -1 for constants), A's rows (row_slot) and per variable
    (original numbering) of x (consecutive), d, N_kk, the probe's z and the solve's y (its last
    dx after a solve); `flops` per part (counted arithmetic per state); nnz_L below the
    diagonal; prior_slot (len(PRIOR_ROWS), n): per variable,
    the slots of the PRIOR_ROWS numbers a per-sample program reads (-1: folded into the chains,
    or the term does not exist)."""

    n_slots: int
    one: int
    chains: ChainArrays
    factor_end: int
    solve_end: int
    resid_end: int
    probe_end: int
    entry_slot: np.ndarray
    row_slot: np.ndarray
    x_slot: np.ndarray
    d_slot: np.ndarray
    nkk_slot: np.ndarray
    z_slot: np.ndarray
    y_slot: np.ndarray
    flops: dict
    nnz_L: int
    prior_slot: np.ndarray
