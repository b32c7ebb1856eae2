"""Online backends of a plan's fused program (sparsedyn.ir.fused.FusedProgram: the assembly of
D(q), b(q, qd) and the LU program, laid out offline). A backend is one module behind this small
protocol, found by name in BACKENDS:

    NAME                      "numba", "c", ...
    unavailable()             None when the backend can run here, else why not (a sentence)
    prepare(ir)  -> kernel    everything derived from the IR once (compiled code, work sizes)
    run(kernel, q, qd, y, full, threads) -> (out (B, n_out), x (B, n) or None, broken (B,))

run takes checked, C-contiguous float64 q (B, nq), qd (B, nv) and the measured values y (B, m)
in the IR's measured order; out holds the IR's out_columns, x the whole solution when `full`,
and broken flags the states a caller must re-solve (a failed pivot check, a non-finite solution
or a failed backward-error check), with the same meaning in every backend. A kernel is safe to
run from several threads at once (its work memory is per call or per thread).

A kernel may also copy its inputs as it reads them (one pass over their memory instead of a copy
before the solve): where kernel.copies_inputs(B, full) is True, run(..., copies=(qc, qdc, yc))
takes q, qd and y unchecked, writes them into the C-contiguous arrays copies (of their shapes),
and returns broken as uint8 codes: RESOLVE, INPUT_NOT_FINITE (q, qd or y holds NaN or inf) and,
where the kernel checks quaternions (C's), BAD_QUATERNION (a quaternion of q off unit norm).
"""
from __future__ import annotations

import importlib

from ..errors import SparsedynError
from ..ir.fused import BAD_QUATERNION, INPUT_NOT_FINITE, RESOLVE  # noqa: F401  (broken's codes)

#: backend name -> module implementing the protocol
BACKENDS = {"numba": "sparsedyn.backends.numba_fused", "c": "sparsedyn.backends.generated_c"}


class BackendUnavailableError(SparsedynError, RuntimeError):
    """The requested backend cannot run here (e.g. no C compiler for backend="c")."""


def module(name):
    """The module of backend `name` (BACKENDS), whether or not it can run here."""
    if name not in BACKENDS:
        raise ValueError(f"backend: expected one of {sorted(BACKENDS)}, got {name!r}")
    return importlib.import_module(BACKENDS[name])


def backend(name):
    """The module of backend `name` (BACKENDS); BackendUnavailableError if it cannot run here."""
    module_ = module(name)
    why = module_.unavailable()
    if why:
        raise BackendUnavailableError(f"backend {name!r} cannot run here: {why}")
    return module_
