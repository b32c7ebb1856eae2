"""The numba backend (protocol: sparsedyn.backends): the fused kernel of
sparsedyn.kernels.assemble_numba, groups of lanes of states per work array, one range of groups
per thread."""
from __future__ import annotations

from ..kernels.assemble_numba import FusedSolver

NAME = "numba"


def unavailable():
    return None          # numba is a hard dependency


def prepare(ir, lanes=None):
    """The FusedSolver of a FusedProgram (lanes per work array: None picks by its size)."""
    return FusedSolver(ir, lanes=lanes)


def run(kernel, q, qd, y, full=False, threads=1, copies=None):
    return kernel.run(q, qd, y, full=full, threads=threads, copies=copies)
