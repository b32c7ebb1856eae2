"""plan.solve's private input copies (sparsedyn/problems/input_copies.py): the compiled copy
checks what NumPy's isfinite says, within the copied rows only, and every kind of input array
(contiguous, strided, read-only, broadcast, unaligned) gives the caller's values and names a bad one."""
import numpy as np
import pytest

from sparsedyn.kernels.input_copies import copy_checked
from sparsedyn.models import humanoid
from sparsedyn.problems.input_copies import CopyBlocks, state_copies


def test_compiled_copy_flags_exactly_the_non_finite_rows_it_copies():
    rng = np.random.default_rng(0)
    src = rng.normal(size=(40, 7)) * 1e300                # finite, however large
    for bad in (np.nan, np.inf, -np.inf):
        for row in (0, 17, 39):
            a = src.copy()
            a[row, 3] = bad
            for lo, hi in ((0, 40), (0, row), (row, row + 1), (row + 1, 40), (5, 30)):
                dst = np.full_like(a, 7.0)
                ok = copy_checked(a, dst, lo, hi)
                assert ok == bool(np.isfinite(a[lo:hi]).all()), (bad, row, lo, hi)
                assert np.array_equal(dst[lo:hi], a[lo:hi], equal_nan=True)
                assert (dst[:lo] == 7.0).all() and (dst[hi:] == 7.0).all()


def test_every_kind_of_input_array_is_copied_and_checked():
    model = humanoid()
    rng = np.random.default_rng(1)
    B = 6
    q = model.random_configuration(rng, batch=B)
    v, a = rng.normal(size=(2, B, model.nv))
    wide = np.zeros((B, 2 * model.nv))
    wide[:, ::2] = v                                       # a strided view holds v
    frozen = a.copy()
    frozen.flags.writeable = False
    raw = bytearray(8 * v.size + 1)                        # float64 at an odd address
    unaligned = np.frombuffer(raw, dtype=np.float64, count=v.size, offset=1).reshape(v.shape)
    unaligned[...] = v
    kinds = {"contiguous": (v, a), "strided": (wide[:, ::2], frozen),
             "broadcast": (np.broadcast_to(v[2], (B, model.nv)), a), "unaligned": (unaligned, a)}
    for name, (vv, aa) in kinds.items():
        qc, vecs, n, single = state_copies(model, q, CopyBlocks(), threads=2, v=vv, qdd=aa)
        assert n == B and not single, name
        assert np.array_equal(qc, q) and np.array_equal(vecs["v"], vv), name
        assert np.array_equal(vecs["qdd"], aa), name
        assert not np.shares_memory(vecs["v"], vv) and vecs["v"].flags.c_contiguous, name
        bad = np.array(vv)
        bad[4, 5] = np.nan
        with pytest.raises(ValueError, match=r"v: non-finite value at batch index 4, column 5"):
            state_copies(model, q, CopyBlocks(), v=bad, qdd=aa)
