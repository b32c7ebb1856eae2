"""The C backend (protocol: sparsedyn.backends): the plan's fused program written as C99
(backends/c_source.py) for one state, and the same statements on vectors of LANES states for
batches (backends/c_plan_lanes.py), compiled once by the system C compiler into shared libraries
cached by the hash of their source and flags, and called through ctypes (which releases the GIL:
threads run their ranges of a batch in parallel, each on its own work array).

Why C next to numba: one state costs what its arithmetic costs (no dispatch of dozens of typed
arrays per call, no JIT on a fresh machine), and the same source runs on a robot's controller
without Python (export_c).
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading

import numpy as np

from ..files import atomic_write
from ..kernels.parallel import ParallelRegion
from ..threads import run_ranges
from .c_plan_lanes import fits, lanes_source, lanes_work
from .c_source import unit_source
from .c_vector import LANES, cpu_description

NAME = "c"
#: -O2 keeps compile time of straight-line programs of ~10^4 statements in seconds; without
#: the SLP vectorizer (EXPORT_FLAGS) they compile faster and run faster
CFLAGS = ("-O2", "-march=native", "-std=c99", "-fPIC", "-shared", "-fno-math-errno",
          "-ffp-contract=off", "-fno-tree-slp-vectorize")
#: what the exported header recommends: no contraction into fused multiply-adds keeps the
#: results equal to sparsedyn's own backends; the SLP vectorizer only packs the straight-line
#: code's scalars into vectors through shuffles and spills (experiments/kernel_design.md)
EXPORT_FLAGS = "-O2 -std=c99 -ffp-contract=off -fno-tree-slp-vectorize"
#: the chain programs of MAP routes are ~10^5 statements: -O1 compiles them in half -O2's time
#: and runs them as fast (straight-line code leaves -O2 little more to do)
CFLAGS_LONG = ("-O1",) + CFLAGS[1:]
PREFIX = "sd"
#: what the vector units are compiled with where the compiler has OpenMP (openmp_flags): their
#: _threads entry then splits a batch over an OpenMP team
OPENMP_FLAGS = ("-fopenmp",)


def compiler():
    """The C compiler command ($CC, else cc), or None."""
    return _which(os.environ.get("CC", "cc"))


@functools.lru_cache(maxsize=8)
def _which(cc):
    return shutil.which(cc)


def unavailable():
    return None if compiler() else ("no C compiler found (set $CC or install one, e.g. "
                                    "apt-get install gcc)")


def cache_dir():
    """$SPARSEDYN_CACHE_DIR/c, else ~/.cache/sparsedyn/c."""
    root = os.environ.get("SPARSEDYN_CACHE_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "sparsedyn")
    path = os.path.join(root, "c")
    os.makedirs(path, exist_ok=True)
    return path


@functools.lru_cache(maxsize=32)
def _library_key(source, cc, flags):
    """The cache key of a library (hashing a plan's source takes ~0.2 ms: once per source); the
    CPU is part of it, so a cache shared by machines with other CPUs never hands them a library
    with instructions they lack."""
    key = (source, cc, cpu_description()) + flags
    return hashlib.sha256("\0".join(key).encode()).hexdigest()[:24]


def library_path(source, flags=CFLAGS):
    """Where the shared library of `source` is cached (by source, compiler, flags and CPU)."""
    return os.path.join(cache_dir(), f"sparsedyn_{_library_key(source, compiler(), tuple(flags))}.so")


def build(source, flags=CFLAGS):
    """Path of the shared library of `source`, compiled with `flags` on first use: written under
    a temporary name in the cache and moved into place, so concurrent builders never see half a
    library."""
    cc = compiler()
    lib = library_path(source, flags)
    if os.path.exists(lib):
        return lib
    folder = cache_dir()
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=folder)
    os.close(fd)
    src = tmp[:-3] + ".c"
    try:
        with open(src, "w") as fh:
            fh.write(source)
        proc = subprocess.run([cc, *flags, "-o", tmp, src, "-lm"], capture_output=True,
                              text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"backend 'c': {cc} failed to compile the plan:\n"
                               f"{proc.stderr[-2000:]}")
        os.replace(tmp, lib)
    finally:
        for path in (tmp, src):
            if os.path.exists(path):
                os.remove(path)
    return lib


@functools.lru_cache(maxsize=8)
def _openmp(cc):
    """Does `cc` compile and link an OpenMP unit? A probe once per compiler, its answer kept in
    the cache (a compiler run costs ~0.1 s; auto asks on a process's first call)."""
    if cc is None:
        return False
    stat = os.stat(cc)
    key = hashlib.sha256(f"{cc}\0{stat.st_size}\0{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    answer = os.path.join(cache_dir(), f"openmp_{key}.txt")
    if os.path.exists(answer):
        with open(answer) as fh:
            return fh.read().strip() == "1"
    folder = tempfile.mkdtemp()
    try:
        src = os.path.join(folder, "probe.c")
        with open(src, "w") as fh:
            fh.write("#include <omp.h>\nint probe(void) { return omp_get_max_threads(); }\n")
        works = subprocess.run([cc, *CFLAGS, *OPENMP_FLAGS, "-o", os.path.join(folder, "p.so"),
                                src], capture_output=True, text=True).returncode == 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    try:
        with atomic_write(answer, "w") as fh:
            fh.write("1" if works else "0")
    except OSError:                     # a cache we cannot write to: asked again next process
        pass
    return works


def openmp_flags():
    """OPENMP_FLAGS where the compiler has OpenMP, else () (the units then split batches over
    the package's Python pool: split_run)."""
    return OPENMP_FLAGS if _openmp(compiler()) else ()


def team_flags():
    """What a unit with a team function (c_team) is compiled with: CFLAGS, and OpenMP where
    the compiler has it."""
    return CFLAGS + openmp_flags()


_P = ctypes.c_void_p


def aligned(n):
    """A zeroed float64 array of n values at a 64-byte boundary (vector loads need it)."""
    raw = np.zeros(n + 8)
    off = (-raw.ctypes.data % 64) // 8
    return raw[off:off + n]


class CKernel:
    """A FusedProgram compiled to C, one library per kind of call ("outputs", "full": one state
    at a time; "outputs_lanes", "full_lanes": LANES states at a time on vectors, c_plan_lanes),
    each built on first use: `run` has FusedSolver.run's contract."""

    def __init__(self, ir):
        self.ir = ir
        _, self.work_doubles, self.sizes = unit_source(ir, PREFIX, kinds=())
        #: do batches run on vectors (c_plan_lanes.fits: else one state at a time)?
        self.vector = fits(ir)
        self._sources = {}
        self._libs = {}
        self._doubles = {}
        self._build_lock = threading.Lock()
        self._local = threading.local()

    def source(self, kind):
        """The C source of one kind of call ("outputs", "full", "outputs_lanes", "full_lanes")."""
        if kind not in self._sources:
            if kind.endswith("_lanes"):
                self._sources[kind] = lanes_source(self.ir, PREFIX, kind[:-6], LANES)
            else:
                self._sources[kind] = unit_source(self.ir, PREFIX, kinds=(kind,))[0]
        return self._sources[kind]

    @staticmethod
    def _flags(kind):
        return team_flags() if kind.endswith("_lanes") else CFLAGS

    def ready(self, kind):
        """Is the library of this kind of call loaded or compiled already (no compiler run)?"""
        return kind in self._libs or os.path.exists(library_path(self.source(kind),
                                                                 self._flags(kind)))

    def library(self, kind):
        """(ctypes library, batch function, threads function or None) of one kind of call
        (compiled, or loaded from the cache); the threads function is a vector unit's
        _threads entry where it was compiled with OpenMP."""
        with self._build_lock:
            if kind not in self._libs:
                lib = ctypes.CDLL(build(self.source(kind), self._flags(kind)))
                lanes = kind.endswith("_lanes")
                batch = getattr(lib, f"{PREFIX}_{kind}" if lanes else f"{PREFIX}_{kind}_batch")
                pointers = [_P] * ((6 if kind.startswith("outputs") else 7) + (3 if lanes else 0))
                batch.argtypes = [ctypes.c_long] + pointers
                batch.restype = None
                team = None
                if lanes and getattr(lib, f"{PREFIX}_{kind}_openmp")():
                    team = getattr(lib, f"{PREFIX}_{kind}_threads")
                    team.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_long] + pointers
                    team.restype = None
                self._libs[kind] = lib, batch, team
            return self._libs[kind]

    def _work(self, kind, k, n=None):
        """This thread's k work arrays of a kind of call, n doubles each at least (default:
        the kind's; kept between calls; 64-byte aligned for vectors)."""
        pools = self._local.__dict__.setdefault("pools", {})
        if n is None:
            n = self._lanes_doubles(kind) if kind.endswith("_lanes") else self.work_doubles
        if kind not in pools or len(pools[kind]) < k or pools[kind][0].size < n:
            pools[kind] = [aligned(n) for _ in range(k)]
        return pools[kind]

    def batch_kind(self, B, full=False):
        """The library run() calls for B states by default: on vectors when the batch fills one
        and the program fits (c_plan_lanes.fits), else one state at a time (callers that must
        not start a compiler ask ready() of it)."""
        return ("full" if full else "outputs") + ("_lanes" if self.vector and B >= LANES else "")

    def run(self, q, qd, y, full=False, threads=1, vector=None, copies=None):
        """FusedSolver.run; vector: on LANES states at a time or one state at a time (default:
        batch_kind). copies: (qc, qdc, yc), C-contiguous arrays of the inputs' shapes that the
        vector unit fills with copies of q, qd and y as it reads them; broken then holds codes
        (INPUT_NOT_FINITE for a state whose inputs are not all finite: the backends' protocol)."""
        q, qd, y = (np.ascontiguousarray(a, dtype=np.float64) for a in (q, qd, y))
        B, n = q.shape[0], self.sizes["n"]
        out = np.empty((B, self.sizes["n_out"]))
        x = np.empty((B, n)) if full else None
        broken = np.zeros(B, dtype=np.uint8)
        if vector and not self.vector:
            raise ValueError("vector: this program runs one state at a time (c_plan_lanes.fits)")
        kind = (self.batch_kind(B, full) if vector is None
                else ("full" if full else "outputs") + ("_lanes" if vector else ""))
        if copies is not None and not kind.endswith("_lanes"):
            raise ValueError("copies: only the vector unit copies its inputs (B >= LANES)")
        team = self.library(kind)[2] if kind.endswith("_lanes") else None
        if team is not None and B:
            self._team_call(team, kind, B, threads, q, qd, y, out, x, broken, copies)
        else:
            split_run(B, threads, lambda k: self._work(kind, k),
                      lambda lo, hi, work: self._call(kind, lo, hi, q, qd, y, out, x, broken,
                                                      work, copies))
        return out, x, (broken if copies is not None else broken.astype(bool))

    def _lanes_doubles(self, kind):
        """Doubles of one work array of a vector unit's kind of call (lanes_work, once)."""
        if kind not in self._doubles:
            self._doubles[kind] = lanes_work(self.ir, kind[:-6], LANES)
        return self._doubles[kind]

    def copies_inputs(self, B, full=False):
        """Does run(..., copies=...) copy the inputs of B states (the vector unit's batches)?"""
        return self.batch_kind(B, full).endswith("_lanes")

    def _team_call(self, team, kind, B, threads, q, qd, y, out, x, broken, copies):
        """One call of the unit's OpenMP entry (team_run)."""
        def args(work):
            a = [q.ctypes.data, qd.ctypes.data, y.ctypes.data, out.ctypes.data]
            a += [] if x is None else [x.ctypes.data]
            a += [broken.ctypes.data, work]
            return a + ([None] * 3 if copies is None else [c.ctypes.data for c in copies])
        team_run(team, B, threads, self._lanes_doubles(kind),
                 lambda n: self._work(kind + "_team", 1, n)[0].ctypes.data, args)

    def _call(self, kind, lo, hi, q, qd, y, out, x, broken, work, copies=None):
        if hi <= lo:
            return
        s = self.sizes
        lo, hi = int(lo), int(hi)
        ptr = (lambda a, width: a.ctypes.data + 8 * lo * width)
        args = [hi - lo, ptr(q, s["nq"]), ptr(qd, s["nv"]), ptr(y, s["n_y"]), ptr(out, s["n_out"])]
        if x is not None:
            args.append(ptr(x, s["n"]))
        args += [broken.ctypes.data + lo, work.ctypes.data]
        if kind.endswith("_lanes"):
            args += ([None] * 3 if copies is None else
                     [ptr(c, w) for c, w in zip(copies, (s["nq"], s["nv"], s["n_y"]))])
        self.library(kind)[1](*args)


#: fewest states per thread of a C call split over threads (split_run's default, for units of a
#: few microseconds per state): a range handed to another thread costs tens of microseconds (a
#: pool's hand-off), which a few such states do not repay
C_MIN_STATES_PER_THREAD = 128


def split_run(B, threads, work_arrays, call, min_states=C_MIN_STATES_PER_THREAD):
    """call(lo, hi, work) over at most `threads` ranges of B states, min_states each at least,
    their edges on multiples of LANES where the ranges are long (a vector unit's groups stay
    whole): the first range on the calling thread, the others on the package's pool (ctypes
    releases the GIL: threads.run_ranges), each on its own work array of work_arrays(k) (the calling thread's pool
    of k arrays)."""
    groups = max(1, min(int(threads), B // min_states))
    work = work_arrays(groups)
    if groups == 1:
        call(0, B, work[0])
        return
    edges = np.linspace(0, B, groups + 1).astype(int)
    if B >= 2 * LANES * groups:                     # whole vector groups where that is cheap
        edges = np.round(edges / LANES).astype(int) * LANES
        edges[-1] = B
    run_ranges(edges, lambda lo, hi, k: call(lo, hi, work[k]))


def team_run(team, B, threads, work_doubles, work_address, args,
             min_states=C_MIN_STATES_PER_THREAD):
    """team(B, teams, stride, *args(work)): a unit's OpenMP entry (c_team) on split_run's ranges
    (whole lane groups, min_states states each at least), thread t on the stretch t of one
    work array (work_address(n): the address of n doubles, 64-byte aligned, of the calling
    thread's), `stride` = work_doubles rounded up to 64-byte boundaries."""
    teams = max(1, min(int(threads), B // min_states))
    stride = -(-work_doubles // 8) * 8
    arguments = args(work_address(teams * stride))
    with ParallelRegion() if teams > 1 else contextlib.nullcontext():
        team(B, teams, stride, *arguments)


def prepare(ir):
    return CKernel(ir)


def run(kernel, q, qd, y, full=False, threads=1, copies=None):
    return kernel.run(q, qd, y, full=full, threads=threads, copies=copies)


def single_state(kernel, kind="outputs"):
    """The C function solving one state (`kind` "outputs" or "full"), for callers that bind
    their buffers once: f(q, qd, y, out[, x], work) -> 0 ok, 1 re-solve, +2 bad quaternion."""
    fn = getattr(kernel.library(kind)[0], f"{PREFIX}_{kind}")
    fn.argtypes = [_P] * (5 if kind == "outputs" else 6)
    fn.restype = ctypes.c_int
    return fn


def header_text(prefix, sizes, work, what, given):
    """The documented header of an exported unit."""
    P = prefix.upper()
    return f"""/* {prefix}.h -- {what}, generated by sparsedyn (C99, no dependencies but libm).

   One call solves one state; nothing is allocated and no global is written, so calls on
   different work arrays may run concurrently (one work array per thread).

   Inputs (double arrays, sparsedyn's = Pinocchio's conventions):
     q   [{sizes['nq']}]  joint configuration: free-flyer [p(3), quaternion x y z w],
                     spherical [quaternion x y z w], one coordinate per revolute/prismatic joint
     qd  [{sizes['nv']}]  joint velocities (free-flyer: [linear, angular] in the base frame)
     y   [{sizes['n_y']}]  the plan's given joint-space vector ({given}), then 6 per
                     external wrench of the plan (angular-first, body frame)
   Outputs:
     out [{sizes['n_out']}]  the plan's joint-space unknowns
     x   [{sizes['n']}]  (full only) every unknown of the sparse system, in its column order
   Work: {P}_WORK_DOUBLES doubles, caller-owned, contents need no initialisation.
   Returns 0 when the result is good; bit 1 when the state must be re-solved (a static pivot
   failed its check, q, a body velocity or the solution is not finite: use a pivoting solver,
   or sparsedyn's plan.solve, which does so or names the bad input); bit 2 when a quaternion
   of q is not unit-norm.

   Build: cc {EXPORT_FLAGS} [-march=native] -c {prefix}.c

   Example (a controller loop):
     static double work[{P}_WORK_DOUBLES];
     double tau[{sizes['n_out']}];
     if ({prefix}_outputs(q, qd, qdd, tau, work) != 0) {{ ... hold the last command ... }}
*/
#ifndef {P}_H
#define {P}_H
#define {P}_WORK_DOUBLES {work}
int {prefix}_work_doubles(void);
int {prefix}_outputs(const double *q, const double *qd, const double *y, double *out,
                     double *work);
int {prefix}_full(const double *q, const double *qd, const double *y, double *out, double *x,
                  double *work);
void {prefix}_outputs_batch(long B, const double *q, const double *qd, const double *y,
                            double *out, unsigned char *broken, double *work);
void {prefix}_full_batch(long B, const double *q, const double *qd, const double *y, double *out,
                         double *x, unsigned char *broken, double *work);
#endif
"""


def export_c(ir, directory, name, what="a sparsedyn plan", given="qdd or tau", overwrite=False):
    """Write `name`.c and `name`.h (a C identifier) into `directory`: the IR as dependency-free
    C99 with its documented header. Refuses to replace existing files unless overwrite.
    Returns the two paths."""
    if not name.isidentifier() or not name.isascii():
        raise ValueError(f"name: {name!r} is not a C identifier")
    paths = [os.path.join(os.fspath(directory), f"{name}{ext}") for ext in (".c", ".h")]
    if not overwrite:
        for path in paths:
            if os.path.exists(path):
                raise FileExistsError(f"{path}: exists (pass overwrite=True to replace it)")
    source, work, sizes = unit_source(ir, name)
    with atomic_write(paths[1], "w") as fh:
        fh.write(header_text(name, sizes, work, what, given))
    with atomic_write(paths[0], "w") as fh:
        fh.write(f'/* {name}.c -- {what}, generated by sparsedyn: see {name}.h */\n'
                 f'#include "{name}.h"\n' + source.replace(
                     f"#define {name.upper()}_WORK_DOUBLES {work}\n", ""))
    return paths
