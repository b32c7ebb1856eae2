"""The compiled PV-OSIMr Delassus kernel on vectors of LANES states (c_pv_osimr_source: seed
000, Algorithm 3 on GCC vectors, one library for every program, built once per machine by
generated_c.build and cached), for batches of MIN_BATCH states or more; for one state, or while
the library is not built or no C compiler exists, kernels/pv_osimr_numba's per-state kernel.
Called through ctypes, which releases the GIL: threads run their ranges of a batch
(generated_c.split_run), each on its own work array.

    run(program, q, threads=None) -> (out (B, m, m), status (B,))
        pv_osimr_numba.run's contract (status -1, or the body whose pivot failed).
    run_lanes(program, q, threads=1)
        the same, always on the vectors (the library built first if need be).
    pv_osimr_compiled(model, q, rc, reference)
        pv_osimr_numba.pv_osimr_compiled on this run (sparsedyn.delassus's compiled "pv-osimr").
"""
from __future__ import annotations

import ctypes
import os
import threading

import numpy as np
from numba import get_num_threads

from ..identity_cache import IdentityCache
from ..kernels import pv_osimr_numba
from ..kernels.parallel import MIN_STATES_PER_THREAD, idle_cores
from .c_pv_osimr_source import ARRAYS, DIMS, kernel_source, work_doubles
from .generated_c import (aligned, build, library_path, split_run, team_flags, team_run,
                          unavailable)

#: the fewest states run on vectors: a group of LANES costs about what 2 states cost numba's
#: per-state kernel (experiments/kernel_design.md, "The PV-OSIMr kernel on vectors of states")
MIN_BATCH = 2
_P = ctypes.c_void_p
_lock, _local = threading.Lock(), threading.local()
_lib = {}
_ARGS = IdentityCache()


def library(block=True):
    """The ctypes kernel; block=False: None unless it is loaded or in the cache, starting its
    build in a background thread (the compiler runs as a subprocess: no interpreter lock held)
    so that later calls find it."""
    with _lock:
        if "fn" in _lib:
            return _lib["fn"]
        if unavailable() is not None:
            return None
        src = kernel_source()
        flags = team_flags()
        if not block and not _lib.get("building"):
            _lib["building"] = True
            threading.Thread(target=build, args=(src, flags), daemon=True).start()
        if not block and not os.path.exists(library_path(src, flags)):
            return None
        lib = ctypes.CDLL(build(src, flags))
        fn = lib.sd_pvo_lanes
        fn.argtypes = [ctypes.c_long] + [_P] * 6 + [ctypes.c_double]
        fn.restype = None
        team = None
        if lib.sd_pvo_lanes_openmp():
            team = lib.sd_pvo_lanes_threads
            team.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_long] + fn.argtypes[1:]
            team.restype = None
        _lib["fn"], _lib["lib"], _lib["team"] = fn, lib, team
        return fn


def _args(program):
    """(addresses of the program's arrays, dims, work doubles), kept with the program."""
    hit = _ARGS.get((program,))
    if hit is None:
        P = program.flat
        addr = np.array([getattr(P, a).ctypes.data for a in ARRAYS], dtype=np.uint64)
        dims = np.array([P.jtype.size, P.nslots, P.npairs, P.w_slot.size, P.ee_slot.size,
                         P.kc_dst.size, P.blk_k1.size, program.nq, program.m], dtype=np.int64)
        assert len(dims) == len(DIMS)
        # the entry holds the program: the arrays whose addresses it keeps stay alive
        hit = _ARGS.put((program,), (addr, dims, work_doubles(*dims[[0, 1, 2, 3, 7, 8]])))
    return hit


def _work(n, k):
    """This thread's k work arrays of n doubles (kept between calls), 64-byte aligned."""
    pool = getattr(_local, "pool", None)
    if pool is None or pool[0] < n or len(pool[1]) < k:
        _local.pool = pool = (n, [aligned(n) for _ in range(k)])
    return pool[1]


def run_lanes(program, q, threads=1):
    """(out, status) of the vector kernel (built on first use) on checked q (B, nq)."""
    fn = library()
    q = np.ascontiguousarray(q, dtype=np.float64)
    B, m, nq = q.shape[0], program.m, program.nq
    out = np.zeros((B, m, m))
    status = np.empty(B, np.int64)
    addr, dims, n = _args(program)
    pq, pout, pst = q.ctypes.data, out.ctypes.data, status.ctypes.data

    # a thread's range costs ~5 us per state: MIN_STATES_PER_THREAD of them repay a hand-off
    if B and _lib["team"] is not None:      # one call: the ranges on an OpenMP team (c_team)
        team_run(_lib["team"], B, threads, n, lambda size: _work(size, 1)[0].ctypes.data,
                 lambda work: (pq, pout, pst, work, addr.ctypes.data, dims.ctypes.data,
                               program.flat.tol), min_states=MIN_STATES_PER_THREAD)
        return out, status

    def call(lo, hi, work):
        if hi > lo:
            fn(hi - lo, pq + 8 * lo * nq, pout + 8 * lo * m * m, pst + 8 * lo, work.ctypes.data,
               addr.ctypes.data, dims.ctypes.data, program.flat.tol)
    split_run(B, threads, lambda k: _work(n, k), call, min_states=MIN_STATES_PER_THREAD)
    return out, status


def run(program, q, threads=None):
    """pv_osimr_numba.run's contract: the vector kernel for B >= MIN_BATCH once it is built,
    else the per-state numba kernel. threads=None: numba's thread count (NUMBA_NUM_THREADS /
    numba.set_num_threads) on the cores idle at the call."""
    B = q.shape[0]
    if B < MIN_BATCH or library(block=False) is None:
        return pv_osimr_numba.run(program, q, parallel=None if threads is None else threads > 1)
    if threads is None:
        threads = get_num_threads()
        idle = idle_cores()
        threads = threads if idle is None else max(1, min(threads, idle))
    return run_lanes(program, q, threads)


def pv_osimr_compiled(model, q, rc, reference):
    """pv_osimr_numba.pv_osimr_compiled (typed errors, operation counts) on `run`."""
    return pv_osimr_numba.pv_osimr_compiled(model, q, rc, reference, runner=run)
