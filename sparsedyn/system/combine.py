"""One canonical CSC pattern from several disjoint parts of a block system (seed 001, eq. 17:
D extended by further rows D_Y, and here also by further columns).

Each part lists its stored entries in its own order as global (row, column) indices with their
constant value (NaN: state-dependent). `combine_parts` sorts all of them into CSC order once
(offline); online, the parts' values are concatenated in part order and gathered into the CSC
data order with one fancy index. This is the combining step of
sparsedyn.estimation.problem.EstimationProblem._combine, written for any number of parts and
for parts that add columns as well as rows.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class CombinedPattern:
    """pattern          canonical csc_matrix of every part's entries (values 1.0)
    gather           (nnz,) position in the concatenated part entries of each CSC entry
    constant_values  (nnz,) in CSC order, NaN for state-dependent entries
    offsets          (n_parts + 1,) start of each part in the concatenated entry list
    """

    pattern: sp.csc_matrix
    gather: np.ndarray
    constant_values: np.ndarray
    offsets: np.ndarray

    @property
    def always_nonzero(self):
        return ~np.isnan(self.constant_values)

    def values(self, part_values):
        """Concatenate per-part values [(B, nnz_part), ...] and gather them into (B, nnz)."""
        return np.concatenate(part_values, axis=1)[:, self.gather]


def combine_parts(shape, parts):
    """CombinedPattern of `parts`, a sequence of (rows, cols, constant_values) arrays (global
    indices). Raises AssertionError if two parts store the same entry (parts must be disjoint:
    each is a distinct set of equations or unknowns of the system)."""
    R = np.concatenate([np.asarray(p[0], dtype=np.int64) for p in parts])
    C = np.concatenate([np.asarray(p[1], dtype=np.int64) for p in parts])
    K = np.concatenate([np.asarray(p[2], dtype=float) for p in parts])
    order = np.lexsort((R, C))                                  # CSC: by column, then row
    pattern = sp.csc_matrix((np.ones(len(R)), (R[order], C[order])), shape=shape)
    pattern.sort_indices()
    if pattern.nnz != len(R):
        raise AssertionError("two parts of the combined system store the same entry")
    offsets = np.concatenate(([0], np.cumsum([len(p[0]) for p in parts]))).astype(np.int64)
    return CombinedPattern(pattern, order, K[order], offsets)
