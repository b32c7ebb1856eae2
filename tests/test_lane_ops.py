"""The compiled lane interpreter (kernels/lu_numba.run_lanes and its lane_vectors op_run) against
plain NumPy, bit for bit, at every lane count path: whole rows as one vector (the WHOLE_ROWS
counts), blocks of 8 lanes plus the rest one by one, and fewer lanes than a block."""
import numpy as np
import pytest
from lu_ops import apply_op

from sparsedyn.ir import instructions as lu
from sparsedyn.ir.lu_program import opcode_runs
from sparsedyn.kernels.lane_vectors import OP_BLOCK, WHOLE_ROWS
from sparsedyn.ir.instructions import SET
from sparsedyn.kernels.lu_numba import run_lanes

LANE_COUNTS = sorted(set(WHOLE_ROWS) | {1, 3, OP_BLOCK + 5, 24, 72})


def _numpy_run(w, code, t, a, b, scale, tol, consts):
    """The program on every lane with NumPy (tests/lu_ops.py; a SET writes consts[a]); returns
    the failed pivot checks per lane."""
    bad = np.zeros(w.shape[1], dtype=bool)
    for c, ti, ai, bi in zip(code, t, a, b):
        if c == lu.RECIP:
            bad |= ~(np.abs(w[ai]) > tol * (scale[bi] + w[ti]))
        if c == SET:
            w[ti] = consts[ai]
        else:
            apply_op(w, c, ti, ai, bi)
    return bad


@pytest.mark.parametrize("lanes", LANE_COUNTS)
def test_run_lanes_matches_numpy_at_every_lane_count(lanes):
    rng = np.random.default_rng(lanes)
    n_slots, n_checks = 60, 3
    # runs of one opcode (1..12 ops), as the planner emits them; every opcode (and the lane
    # programs' SET) twice. Short
    # enough that no value overflows, so that equality compares finite numbers
    kinds = np.concatenate((rng.permutation(SET + 1), rng.permutation(SET + 1)))
    code = np.repeat(kinds, rng.integers(1, 13, size=kinds.size)).astype(np.int8)
    t = rng.integers(0, n_slots, size=code.size)
    a = (t + rng.integers(1, n_slots, size=code.size)) % n_slots    # a != t: no x - x = 0
    consts = rng.uniform(0.5, 2.0, size=7)
    a[code == SET] = rng.integers(0, consts.size, size=(code == SET).sum())
    b = np.where(code == lu.RECIP, rng.integers(0, n_checks, size=code.size),
                 rng.integers(0, n_slots, size=code.size))
    w0 = rng.uniform(0.5, 2.0, size=(n_slots, lanes)) * rng.choice([-1.0, 1.0],
                                                                    size=(n_slots, lanes))
    scale = rng.uniform(0.0, 3.0, size=(n_checks, lanes)) ** 4
    tol = 0.05                               # the pivot checks fail on some lanes only
    expected = w0.copy()
    expected_bad = _numpy_run(expected, code, t, a, b, scale, tol, consts)
    w = w0.copy()
    bad = np.zeros(lanes, dtype=np.bool_)
    run_lanes(w, opcode_runs(code), t.astype(np.int32), a.astype(np.int32),
              b.astype(np.int32), scale, tol, bad, consts)
    assert np.isfinite(expected).all()
    assert expected_bad.any() and (lanes == 1 or not expected_bad.all())   # checks both ways
    assert np.array_equal(w, expected)
    assert np.array_equal(bad, expected_bad)
