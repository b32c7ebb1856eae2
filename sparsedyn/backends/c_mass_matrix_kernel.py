"""The compiled mass matrix on the C backend: the program (ir/mass_matrix.py) as C
(c_mass_matrix_unit.py) in two libraries built on first use by generated_c.build (cached by source,
compiler, flags and CPU): "one", a state at a time (plan.solver(), a control loop), and "lanes",
LANES states at a time on vectors (batches). Called through ctypes, which releases the GIL:
threads run their ranges of a batch in parallel, each on its own work array."""
from __future__ import annotations

import ctypes
import os
import threading

import numpy as np

from .c_mass_matrix_unit import mass_matrix_source
from .c_vector import LANES
from .generated_c import (CFLAGS, aligned, build, library_path, split_run, team_flags,
                          team_run)

KINDS = {"one": 1, "lanes": LANES}
_P = ctypes.c_void_p


class CMassMatrix:
    """run(q, gather, width, threads) -> (out (B, width), status (B,) 0 good, else 1: not
    finite, +2 (kind "one") a non-unit quaternion): out[b, gather[0]] = M's packed
    nonzeros[gather[1]] (MassMatrixProgram.gathers)."""

    def __init__(self, program):
        self.program = program
        self._src, self._libs, self._gathers, self._built = {}, {}, {}, set()
        self._lock, self._local = threading.Lock(), threading.local()

    def source(self, kind):
        if kind not in self._src:
            self._src[kind] = mass_matrix_source(self.program, "sdmm", KINDS[kind])
        return self._src[kind]

    @staticmethod
    def _flags(kind):
        return team_flags() if kind == "lanes" else CFLAGS

    def ready(self, kind="lanes"):
        """Is this library loaded or in the cache (no compiler run)?"""
        if kind not in self._built and (kind in self._libs or os.path.exists(
                library_path(self.source(kind)[0], self._flags(kind)))):
            self._built.add(kind)         # (a cache cleared later: library() builds it again)
        return kind in self._built

    def library(self, kind):
        """(batch function, work doubles) of a library, compiled or loaded on first use."""
        with self._lock:
            if kind not in self._libs:
                lib = ctypes.CDLL(build(self.source(kind)[0], self._flags(kind)))
                fn = lib.sdmm_batch
                args = [ctypes.c_long, _P, _P, ctypes.c_long, ctypes.c_long, _P, _P, _P, _P]
                fn.argtypes, fn.restype = args, None
                team = None
                if kind == "lanes" and lib.sdmm_batch_openmp():
                    team = lib.sdmm_batch_threads
                    team.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_long] + args[1:]
                    team.restype = None
                self._libs[kind] = fn, lib, team
            return self._libs[kind][0], self.source(kind)[1]

    def one_state_dense(self):
        """(f(q, M, work) -> status, work doubles): the "one" library's P_dense (its module
        doc), for callers that bind their buffers' addresses once."""
        self.library("one")
        lib = self._libs["one"][1]
        fn = lib.sdmm_dense
        fn.argtypes, fn.restype = [_P] * 3, ctypes.c_int
        return fn, self.source("one")[1]

    def _work(self, kind, k, n=None):
        """This thread's k work arrays of a library (kept between calls), n doubles each at
        least (default: the library's), 64-byte aligned, as (array, address) pairs (an array's
        .ctypes costs microseconds: once)."""
        pools = self._local.__dict__.setdefault("pools", {})
        if n is None:
            n = -(-self.source(kind)[1] // 8) * 8
        if kind not in pools or len(pools[kind]) < k or pools[kind][0][0].size < n:
            pools[kind] = [(a, a.ctypes.data) for a in (aligned(n) for _ in range(k))]
        return pools[kind]

    def gather_args(self, gather):
        """(G, dest address, src address) of a (2, G) gather, kept with it."""
        key = id(gather)
        if key not in self._gathers or self._gathers[key][0] is not gather:
            dest, src = (np.ascontiguousarray(g, dtype=np.int64) for g in gather)
            self._gathers[key] = gather, dest, src, (dest.size, dest.ctypes.data,
                                                     src.ctypes.data)
        return self._gathers[key][3]

    def run(self, q, gather, width, threads=1, out=None, kind="lanes"):
        q = np.ascontiguousarray(q, dtype=np.float64)
        B, nq = q.shape
        out = np.zeros((B, width)) if out is None else out
        status = np.zeros(B, dtype=np.int64)
        fn, _ = self.library(kind)
        G, pdest, psrc = self.gather_args(gather)
        pq, pout, pstatus = q.ctypes.data, out.ctypes.data, status.ctypes.data

        team = self._libs[kind][2]
        if B and team is not None:       # one call: the ranges on an OpenMP team (c_team)
            team_run(team, B, threads, self.source(kind)[1],
                     lambda n: self._work(kind + "_team", 1, n)[0][1],
                     lambda work: (pq, pout, width, G, pdest, psrc, pstatus, work))
            return out, status

        def call(lo, hi, work):
            fn(hi - lo, pq + 8 * lo * nq, pout + 8 * lo * width, width, G, pdest, psrc,
               pstatus + 8 * lo, work[1])
        if B:
            split_run(B, threads, lambda k: self._work(kind, k), call)
        return out, status
