"""Numba kernels that run without compiling first, and their compilation in the background.

A numba kernel's first call in a process compiles it, tens of seconds per kernel on a fresh
machine, unless numba's on-disk cache holds it for this source file and CPU (loading that takes
milliseconds). backend="auto" never makes a first answer wait for that compiler: before choosing
numba a plan asks `ready(key, dispatchers, warm)`. While a kernel would have to compile, a
Python subprocess runs warm (a "module:function" that compiles the kernels, e.g. on a small
model) once per key, which writes them into numba's cache, and the plan answers on its NumPy
route; once the subprocess has finished, the kernels load from the cache. A subprocess rather
than a thread: a compiling thread holds the interpreter lock most of the time and would slow
the NumPy answers several times over. `wait()` blocks until the compilations are done.

Offline work that runs numba (the planner's structural counts, dependency levels, a check of a
compiled assembly at two states) does not wait either: while its kernel would have to compile,
`runnable_now` gives the kernel's interpreted twin, the same Python source run by the
interpreter (small work: the callers compile instead where the interpreter would be slower).

A subprocess left running when its parent exits finishes the cache for the next process (numba
writes its cache files by rename: a killed one leaves none half-written). In that subprocess
everything compiles in the foreground (it exists to compile; it starts no subprocess itself).
"""
from __future__ import annotations

import atexit
import functools
import importlib
import os
import subprocess
import sys
import tempfile
import threading
import types
import warnings

from numba.core.dispatcher import Dispatcher

_lock = threading.Lock()
_runnable = set()            # dispatchers known to need no compile
_compiles = {}               # key -> (Popen, stderr file) of its background compile
_reported = set()            # keys whose fruitless background compile was named in a warning
_compiling_here = False      # this process is a background compile: compile, never delegate

#: the package's kernel families: their name (the key) and the function compiling them
#: (sparsedyn/jit_warm.py)
FAMILIES = {"the planner's kernels": "sparsedyn.jit_warm:planner_kernels",
            "the fused ID/FD kernel": "sparsedyn.jit_warm:fused_kernels",
            "the assembly and LU kernels": "sparsedyn.jit_warm:assembly_lu_kernels",
            "the MAP estimation kernel": "sparsedyn.jit_warm:map_kernels",
            "the augmented MAP estimation kernel": "sparsedyn.jit_warm:augmented_kernels",
            "the mass matrix kernel": "sparsedyn.jit_warm:mass_matrix_kernels",
            "the PV-OSIMr Delassus kernel": "sparsedyn.jit_warm:pv_osimr_kernels",
            "the derivative kernels": "sparsedyn.jit_warm:derivative_kernels"}


def runnable(dispatcher):
    """True if calling the numba `dispatcher` needs no compile: compiled in this process, or a
    fresh entry of numba's on-disk cache built for this CPU."""
    if dispatcher in _runnable:
        return True
    found = bool(dispatcher.signatures)
    if not found:
        try:     # numba's cache index: {(signature, CPU magic, code hashes): data file}
            magic = dispatcher.targetctx.codegen().magic_tuple()
            found = any(key[1] == magic for key in dispatcher._cache._cache_file._load_index())
        except Exception:        # numba without on-disk caching for it, or moved internals
            found = False
    if found:
        _runnable.add(dispatcher)
    return found


def ready(key, dispatchers, warm=None):
    """True if every dispatcher runs without compiling now. Otherwise False, after starting the
    subprocess that runs `warm` ("module:function"; default: FAMILIES[key]) once per key. True
    as well where the background cannot help, so that the caller's call compiles in this process
    as numba always does: no subprocess can be started, or it ended without leaving the kernels
    in numba's cache (it failed, or the cache is not writable; named in a RuntimeWarning once)."""
    if _compiling_here or all(d in _runnable for d in dispatchers):
        return True
    with _lock:
        started = _compiles.get(key)
        if started is None:
            if all(runnable(d) for d in dispatchers):
                return True
            try:
                _compiles[key] = _start(warm or FAMILIES[key])
            except OSError:
                return True
            return False
    proc, log = started
    if proc.poll() is None:
        return False
    if all(runnable(d) for d in dispatchers):
        return True
    if key not in _reported:
        _reported.add(key)
        log.seek(0)
        tail = log.read().decode(errors="replace").strip().splitlines()[-3:]
        warnings.warn(f"the background compile of {key} left nothing in numba's cache (exit "
                      f"{proc.returncode}: {' | '.join(tail) or 'no message'}); compiling it in "
                      f"this process instead", RuntimeWarning, stacklevel=3)
    return True


def runnable_now(key, dispatcher):
    """`dispatcher` if it runs without compiling now (ready(key, (dispatcher,))), else its
    interpreted twin, with the background compile of its family started."""
    return dispatcher if ready(key, (dispatcher,)) else interpreted(dispatcher)


@functools.lru_cache(maxsize=None)
def interpreted(dispatcher):
    """The plain Python function of a numba dispatcher, calling the interpreted twins of the
    dispatchers it calls by their global names (numba's prange is range there)."""
    f = dispatcher.py_func
    names = dict(f.__globals__)
    for name in f.__code__.co_names:
        if isinstance(names.get(name), Dispatcher):
            names[name] = interpreted(names[name])
    return types.FunctionType(f.__code__, names, f.__name__, f.__defaults__, f.__closure__)


def _start(warm):
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    log = tempfile.TemporaryFile()
    code = f"from {__name__} import compile_now; compile_now({warm!r})"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    return proc, log


def compiling():
    """The keys whose kernels are being compiled in the background now."""
    with _lock:
        return [key for key, (proc, _) in _compiles.items() if proc.poll() is None]


def wait(timeout=None):
    """Block until every background compilation has finished (or `timeout` seconds passed);
    True if none is left running."""
    with _lock:
        procs = [proc for proc, _ in _compiles.values()]
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    return not compiling()


def stop():
    """Terminate the background compilations still running (their kernels are then compiled
    again by the next call that needs them)."""
    with _lock:
        for proc, log in _compiles.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
            log.close()
        _compiles.clear()


@atexit.register
def _close_logs():
    """The compiles' logs, at exit (a compile still running keeps writing to its own
    descriptor of the file; its process is left to finish)."""
    with _lock:
        for _, log in _compiles.values():
            log.close()


def compile_now(warm):
    """Run `warm` ("module:function"): what the background process does."""
    global _compiling_here
    _compiling_here = True
    module, function = warm.split(":")
    getattr(importlib.import_module(module), function)()
