"""The joint-space inertia matrix M(q) and its L^T L factor as a compiled, batched plan.

    plan = compile(mass_matrix(model))    # offline: the model's CRBA program (ir/mass_matrix.py)
    M = plan.solve(q)                      # (B, nv, nv) or (nv, nv), Pinocchio's v layout
    L = plan.factor(q)                     # M = L^T L (Featherstone Sec. 6.5), L lower
    plan.solve(q, packed=True)             # (B, plan.n_pairs): only the nonzeros of M's lower
                                           # triangle, at plan.pairs (rows, cols)
    f = plan.solver(); f(q1)               # one state (nq,) per call -> M (nv, nv), C
    crba(model, q, backend="numba")        # the same, planned once per model

The compiled routes are kernels/crba_numba.py (numba, lanes of states; threads split the batch)
and, for M itself, backend="c": the program as generated C on vectors of states
(backends/c_mass_matrix.py), "auto" once its library is built (a compile takes seconds: it is
paid where C is asked for, e.g. by plan.solver(), a state per call for a control loop; then
solve(q) of one state (nq,) takes the one-state library as well, through a per-thread solver);
backend="numpy" runs the reference recursive.crba / recursive.ltl. All give the same matrices up
to round-off. Invalid input (wrong shape, NaN, a non-unit quaternion) raises ValueError naming q;
a result that is not finite raises NonFiniteError, a non-positive pivot of the factor
SingularModelError naming the DoF, joint and batch indices, as the reference does.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from .. import opcount
from ..batch import check_configuration, unbatch
from ..errors import nonfinite_error
from ..ir.mass_matrix import MassMatrixProgram
from .. import jit
from ..kernels import crba_numba
from ..recursive.aba import SINGULAR_TOLERANCE
from ..recursive.crba import crba as crba_numpy
from ..recursive.ltl import _check_pivot, ltl, pattern
from .. import backends
from ..backends.c_mass_matrix_kernel import CMassMatrix
from ..backends.c_vector import LANES
from .base import PlanBase
from .mass_matrix_solver import MassMatrixSolver

BACKENDS = ("auto", "numba", "numpy", "c")


class MassMatrixProblem:
    """M(q) of a model (planned by compile(problem), like the other problem kinds)."""

    name = "mass_matrix"

    def __init__(self, model):
        self.model = model

    def compile(self, ordering="auto", backend="auto", progress=None):
        """The MassMatrixPlan (no ordering to choose: the tree's own pattern has no fill-in)."""
        if ordering != "auto":
            raise ValueError(f"ordering: the mass matrix plan has no ordering to choose (its "
                             f"L^T L follows the tree without fill-in); expected 'auto', got "
                             f"{ordering!r}")
        return MassMatrixPlan(self, backend)

    def __repr__(self):
        return f"mass_matrix({self.model.name!r})"


def mass_matrix(model):
    """The problem M(q) = CRBA (Featherstone Table 6.2); compile(mass_matrix(model)) plans it."""
    return MassMatrixProblem(model)


class MassMatrixPlan(PlanBase):
    """A compiled mass matrix: `solve(q)` -> M, `factor(q)` -> L with M = L^T L."""

    backends = BACKENDS

    def __init__(self, problem, backend="auto"):
        super().__init__(problem)
        self.default_backend = self.check_backend(backend)
        self.program = MassMatrixProgram(self.model)
        self.n_pairs = self.program.n_pairs
        self._c = None
        self._local = threading.local()          # each thread's one-state solver

    @property
    def c_kernel(self):
        """The C backend's kernel (backends/c_mass_matrix_kernel.py), its libraries built on
        first use."""
        if self._c is None:
            backends.backend("c")             # BackendUnavailableError without a compiler
            self._c = CMassMatrix(self.program)
        return self._c

    @property
    def stats(self):
        """The problem, nv, the nonzeros of M's lower triangle (n_pairs: M's and L's sparsity,
        Featherstone Sec. 6.5) and the default backend."""
        return dict(problem=self.problem.name, nv=self.model.nv, n_pairs=self.n_pairs,
                    backend=self.default_backend)

    @property
    def pairs(self):
        """(rows, cols) of the packed layout: the nonzeros of M's (and L's) lower triangle."""
        return self.program.dof_pairs

    def solve(self, q, threads=None, backend=None, packed=False, out=None):
        """M(q): (nv, nv) for q (nq,), (B, nv, nv) for (B, nq); packed: (B, n_pairs) at `pairs`.
        out: an array of the result's batched shape to write into (saves the allocation of a
        big result, e.g. B * nv^2 * 8 bytes). threads as Plan.solve (default: numba's count on
        the idle cores). backend: "auto" (C once its library is built, else numba), "c", "numba"
        or "numpy"."""
        return self._run(q, False, threads, backend, packed, out)

    def factor(self, q, threads=None, backend=None, packed=False, out=None):
        """L(q), lower triangular with M = L^T L (Table 6.3; recursive.ltl's layout); options as
        solve (backend "c" computes M alone: not here)."""
        if backend == "c":
            raise ValueError("backend: the factor runs on 'numba' or 'numpy' (the C backend "
                             "computes M alone), got 'c'")
        return self._run(q, True, threads, backend, packed, out)

    def solver(self, backend="c"):
        """A callable for one state at a time (a control loop): f(q (nq,), out=None) -> M
        (nv, nv), its buffers allocated and its C library bound once; see MassMatrixSolver."""
        if backend != "c":
            raise ValueError(f"backend: the mass matrix solver runs on 'c', got {backend!r}")
        return MassMatrixSolver(self)

    # ------------------------------------------------------------------ checks and routes

    def _run(self, q, factor, threads, backend, packed, out):
        model = self.model
        backend = self.check_backend(backend, self.default_backend)
        threads_given = threads
        self.check_threads(threads)                 # a bad value is named on every route
        if not factor and backend in ("auto", "c") and not packed and out is None:
            M = self._one_state(q)
            if M is not None:
                return M
        q, single = check_configuration(model, q)
        B = q.shape[0]
        if backend == "auto" and not factor and backends.module("c").unavailable() is None \
                and (self.c_kernel.ready() or (B < LANES and self.c_kernel.ready("one"))):
            backend = "c"
        if backend == "auto" and not jit.ready("the mass matrix kernel",
                                               (crba_numba._serial, crba_numba._parallel)):
            backend = "numpy"            # while numba compiles it in the background
        if backend == "numpy" or opcount.counting():      # the compiled kernel charges nothing
            res = crba_numpy(model, q)
            res = ltl(model, res) if factor else res
            if packed:
                res = res[:, self.pairs[0], self.pairs[1]]
            if out is not None:
                out = self._out(out, B, packed)
                out[...] = res
                res = out
            return unbatch(res, single)
        threads = self.threads_for(threads_given, B)
        if backend == "c":
            return unbatch(self._run_c(q, threads, packed, out), single)
        res, status = crba_numba.run(self.program, q, factor=factor, tol=SINGULAR_TOLERANCE,
                                     threads=threads, packed=packed,
                                     out=None if out is None else self._out(out, B, packed))
        if (status != -1).any():
            self._raise(q, status, "L" if factor else "M")
        return unbatch(res, single)

    def _one_state(self, q):
        """A copy of M (nv, nv) of q (nq,) from this thread's MassMatrixSolver where the C
        one-state library is built (plan.solver() builds it) and q passes its screens, else
        None (the batched path then checks q and names what is wrong). One state's M costs
        less than the batched path's checks and dispatch."""
        if type(q) is not np.ndarray or q.ndim != 1 or q.dtype != np.float64 or \
                opcount.counting():
            return None
        solver = getattr(self._local, "solver", None)
        if solver is None:
            if self._c is None or not self._c.ready("one") or \
                    backends.module("c").unavailable() is not None:
                return None
            solver = self._local.solver = MassMatrixSolver(self)
        M = solver.unchecked(q)
        return None if M is None else M.copy()

    def _run_c(self, q, threads, packed, out):
        """M of checked q on the C backend: packed, into a fresh zeroed array (its nonzeros
        written) or into `out` (every entry written)."""
        B, nv = q.shape[0], self.model.nv
        shape = (B, self.n_pairs) if packed else (B, nv, nv)
        kind = "packed" if packed else ("nonzero" if out is None else "every")
        res = np.zeros(shape) if out is None else self._out(out, B, packed)
        width = self.n_pairs if packed else nv * nv
        kernel = self.c_kernel
        # fewer states than a vector's lanes: the one-state library, if built (plan.solver())
        lib = "one" if B < LANES and kernel.ready("one") else "lanes"
        _, status = kernel.run(q, self.program.gathers[("M", kind)], width, threads,
                               res.reshape(B, width), lib)
        if status.any():
            self._raise(q, np.where(status != 0, crba_numba.NONFINITE, -1), "M")
        return res

    def _out(self, out, B, packed):
        shape = (B, self.n_pairs) if packed else (B, self.model.nv, self.model.nv)
        if not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != np.float64 \
                or not out.flags.c_contiguous:
            raise ValueError(f"out: expected a C-contiguous float64 array of shape {shape}, got "
                             f"{type(out).__name__} {getattr(out, 'dtype', '')} "
                             f"{getattr(out, 'shape', '')}")
        return out

    def _raise(self, q, status, output):
        """The reference's typed error: states whose result is not finite (as crba's check, which
        runs before the factorisation), else the first failed pivot in the factorisation's order
        (the largest DoF index: tips first) with every state failing there."""
        bad = np.flatnonzero(status == crba_numba.NONFINITE).tolist()
        if bad:
            raise nonfinite_error(self.problem.name, output, bad, {"q": q})
        k = int(status.max())
        piv = np.where(status == k, 0.0, 1.0)
        _check_pivot(self.model, pattern(self.model), piv, k, np.ones_like(piv))
        raise AssertionError("unreachable: a failed pivot check raises")    # pragma: no cover


_PLANS = weakref.WeakKeyDictionary()


def crba(model, q, backend="numpy", threads=None):
    """Joint-space inertia matrix M(q), (nv, nv) or (B, nv, nv). backend "numpy": the reference
    (recursive.crba); "numba" / "c" / "auto": the compiled plan of mass_matrix(model), planned
    once per model."""
    if backend == "numpy":
        return crba_numpy(model, q)
    MassMatrixPlan.check_backend(backend)   # before planning: a bad name costs nothing
    plan = _PLANS.get(model)
    if plan is None:
        plan = _PLANS[model] = MassMatrixPlan(mass_matrix(model))
    return plan.solve(q, threads=threads, backend=backend)
