"""backends/c_chain_flags.py: the MAP route's per-variable tests in C, four variables at a time
on GCC vectors and one at a time in the remainder and in the portable fallback, raise exactly
the flags that their definition (the module docstring, evaluated in NumPy) raises, whichever
variable -- any lane of any vector, or the remainder -- trips which test; x is copied out."""
import ctypes
import os
import shutil

import numpy as np
import pytest

from sparsedyn.backends.c_chain_pairs import VECTOR_HEADER
from sparsedyn.backends.c_chain_flags import contiguous, gathered, flag_statements
from sparsedyn.backends.generated_c import CFLAGS_LONG, build

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("CC", "cc")) is None,
                                reason="no C compiler")

N = 11                  # two vectors of four and a remainder of three
TOL = 1e-9
#: w: x in [0, N), then d, z and N_kk at shuffled slots (tables, as the route's)
SLOTS = 4 * N


def _library(known, scalar):
    ops = dict(p0=contiguous("P"), zt=contiguous("ZT"))
    if known:
        ops["known"] = ("(KN[k] != 0.0)", "(SD_LD4(KN + k) != 0.0)")
    lines = flag_statements(N, gathered("w[TD[{k}]]"), contiguous("w"), gathered("w[TZ[{k}]]"),
                            gathered("w[TN[{k}]]"), tol=repr(TOL), **ops)
    src = "\n".join(["#include <math.h>", *(["#define SD_SCALAR_VECTORS"] if scalar else []),
                     VECTOR_HEADER,
                     "int run(const double *restrict w, const int *TD, const int *TZ, "
                     "const int *TN, const double *P, const double *ZT, const double *KN, "
                     "double *restrict x)", "{",
                     "  double d, v, z, p0, zt; int k, probe = 0;",
                     "  { double fin = 0.0; int ibad = 0, iund = 0;", *lines,
                     "  return (ibad + (fin != 0.0) > 0) + 2 * (iund != 0) + 4 * (probe != 0); }",
                     "}"]) + "\n"
    fn = ctypes.CDLL(build(src, CFLAGS_LONG)).run
    fn.argtypes = [ctypes.c_void_p] * 8
    fn.restype = ctypes.c_int
    return fn


def _definition(w, td, tz, tn, p, zt, kn):
    """The flags as the module docstring defines them."""
    x, d, z, nkk = w[:N], w[td], w[tz], w[tn]
    with np.errstate(invalid="ignore"):
        bad = not (np.isfinite(x).all() and np.isfinite(z).all() and (d > 0.0).all())
        und = (kn & (d - p <= TOL * (nkk - p))).any()
        probe = (kn & (np.abs(z) > zt)).any()
    return int(bad) + 2 * int(und) + 4 * int(probe)


def _cases(rng):
    """A state passing every test, then each variable k tripping one test at a time."""
    slots = N + rng.permutation(SLOTS - N)
    td, tz, tn = (slots[i * N:(i + 1) * N].astype(np.int32) for i in range(3))
    w = rng.normal(size=SLOTS)
    p = rng.uniform(0.1, 1.0, N)
    w[tn] = p + rng.uniform(1.0, 2.0, N)                 # N_kk
    w[td] = p + rng.uniform(0.5, 1.0, N) * (w[tn] - p)   # d_k - p_k well above tol (N_kk - p_k)
    zt = rng.uniform(1.0, 2.0, N)
    w[tz] = rng.uniform(-0.9, 0.9, N) * zt               # |z_k| under zt_k
    yield w, td, tz, tn, p, zt
    trips = [lambda k: (k, np.nan), lambda k: (k, -np.inf),              # x_k not finite
             lambda k: (tz[k], np.inf), lambda k: (tz[k], np.nan),        # z_k not finite
             lambda k: (td[k], 0.0), lambda k: (td[k], np.nan),           # d_k not positive
             lambda k: (td[k], p[k] + 0.5 * TOL * (w[tn[k]] - p[k])),     # undetermined
             lambda k: (tz[k], 1.5 * zt[k]), lambda k: (tz[k], -1.5 * zt[k])]   # the probe
    for k in range(N):
        for trip in trips:
            slot, value = trip(k)
            w2 = w.copy()
            w2[slot] = value
            yield w2, td, tz, tn, p, zt


@pytest.mark.parametrize("scalar", [False, True], ids=["vectors", "fallback"])
@pytest.mark.parametrize("known", [False, True], ids=["all-known", "known-mask"])
def test_flags_follow_the_definition(scalar, known, monkeypatch, tmp_path):
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
    run = _library(known, scalar)
    rng = np.random.default_rng(7)
    kn = rng.random(N) < 0.6 if known else np.ones(N, dtype=bool)
    kn_c = np.ascontiguousarray(kn, dtype=float)
    seen = set()
    for w, td, tz, tn, p, zt in _cases(rng):
        x = np.full(N, 7.0)
        flag = run(*(a.ctypes.data for a in (w, td, tz, tn, p, zt, kn_c, x)))
        expected = _definition(w, td, tz, tn, p, zt, kn)
        assert flag == expected
        assert np.array_equal(x, w[:N], equal_nan=True)
        seen.add(expected)
    assert {0, 1, 2, 4} <= seen and (kn.all() or not kn.any()) != known
