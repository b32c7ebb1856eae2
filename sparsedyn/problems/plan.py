"""compile(problem) -> Plan: the offline/online split of Nori's Sec. IV-D, V-D and Remark 4.

Offline (once per model and problem): the worst-case pattern of D, a fill-reducing (or Nori's
structural) permutation and the symbolic factorization, by sparsedyn.planner, bound to the
assembly program into the plan's IR (sparsedyn.ir.fused.FusedProgram). Online (per batch of
states): assemble D(q), b(q, qd) on the fixed pattern, numeric LU, substitutions, in one pass per
state by a backend (sparsedyn.backends): "c" (the IR written as C and compiled by the system
compiler on first use, cached on disk; one state costs its arithmetic; batches of LANES
(8 on AVX-512, else 4) or more states on vectors of LANES: backends/c_plan_lanes.py,
c_vector.py), "numba" (groups of states on SIMD lanes), "auto" (C once the library the batch
needs is built, e.g. by plan.solver() for up to AUTO_C_MAX_BATCH states or an earlier
backend="c" call on a batch, else numba); "numpy" assembles with NumPy
(NewtonEulerSystem.assemble) and runs the LU program in NumPy: the reference route.

    plan = compile(inverse_dynamics(model, f_ext=True))
    res = plan.solve(q, v, qdd=qdd, f_ext={"l_sole": w})
    res["tau"], res["a", "l_sole"], res.variable("f", "torso")

Public values are Pinocchio's: tau/qdd (B, nv) in its joint order; spatial variables linear-first
in the named link's frame ("a" includes the fictitious gravity acceleration -a_g, i.e.
Pinocchio's data.a_gf; "f" is the wrench transmitted from the parent, data.f).
Plans are saved as versioned .npz files with the model fingerprint and the problem description.
"""
from __future__ import annotations

import json
import threading
import warnings
from collections.abc import Mapping

import numpy as np

from .. import backends, opcount
from ..backends import BAD_QUATERNION, INPUT_NOT_FINITE
from ..batch import state, unbatch
from ..errors import (IllPosedError, PlanMismatchError, SingularModelError, check_assembled,
                      nonfinite_error)
from ..files import atomic_write, read_npz
from ..serialization import from_plain, to_plain
from ..ir.fused import FusedProgram
from ..planner import Factorization, plan_factorization
from ..opcount import count_operations
from ..recursive._common import external_forces
from ..recursive.aba import structural_singularity_error
from ..spatial import Transform, to_linear_first
from ..ir.assembly import AssemblyProgram
from .base import ONLINE_BACKENDS, PlanBase
from .dynamics import Problem, inverse_dynamics
from .input_copies import CopyBlocks, copy_state, copy_views, raise_for_inputs
from .mass_matrix import mass_matrix
from .derivative_layout import joint_columns
from .plan_derivatives import (c_unit, check_derivatives_out, derivative_backend,
                               plan_solve_derivatives)

PLAN_FORMAT = "sparsedyn-plan"
PLAN_VERSION = 1
#: online backends a plan takes ("auto" picks per call, see Plan._fused_backend)
#: "auto" runs batches up to this size on the C backend (once built), bigger ones on numba's
#: SIMD lanes (experiments/kernel_design.md: where the two cross on the humanoid)
AUTO_C_MAX_BATCH = 32


def _short(indices, limit=20):
    head = ", ".join(str(i) for i in indices[:limit])
    return f"[{head}{', ...' if len(indices) > limit else ''}] ({len(indices)} states)"


def compile(problem, ordering="auto", backend="auto", progress=None):
    """Plan the sparse LU of the problem's D once (offline); returns a reusable Plan.

    progress: optional callable(name, index, total), called before each ordering is tried.
    Problems of other kinds plan themselves through the same protocol,
    problem.compile(ordering, backend, progress): an EstimationProblem into an EstimationPlan
    (sparsedyn.estimation.compile_estimation has its further options), a LoopProblem
    (loop_forward_dynamics(cluster_model)) into a LoopPlan (problems/loops.py), a
    MassMatrixProblem (mass_matrix(model)) into a MassMatrixPlan (problems/mass_matrix.py)."""
    if not isinstance(problem, Problem):
        if callable(getattr(problem, "compile", None)):
            return problem.compile(ordering=ordering, backend=backend, progress=progress)
        raise TypeError(f"compile: expected a Problem (inverse_dynamics(model) / "
                        f"forward_dynamics(model) / loop_forward_dynamics(cluster_model) / "
                        f"mass_matrix(model)) or an EstimationProblem, got "
                        f"{type(problem).__name__}")
    if backend not in ONLINE_BACKENDS:
        raise ValueError(f"backend: expected one of {ONLINE_BACKENDS}, got {backend!r}")
    system = problem.system()
    try:
        factorization = plan_system(system, system.always_nonzero, ordering,
                                    "numpy" if backend == "numpy" else "auto", progress)
    except IllPosedError as exc:
        if problem.name != "forward_dynamics" or not getattr(exc, "cols", ()):
            raise
        # D of forward dynamics is singular exactly when the mass matrix is: for every state
        raise structural_singularity_error(
            problem.model, system.bodies_of_columns(exc.cols)) from exc
    return Plan(problem, factorization, backend=backend)


def plan_system(system, pivot_candidates, ordering="auto", backend="auto", progress=None):
    """The planner on a block system (pattern, constants, Nori's structural orders), with the
    entries allowed as static pivots."""
    return plan_factorization(system.pattern, pivot_candidates,
                              constant_values=system.constant_values, ordering=ordering,
                              structural_orders=system.structural_orders, backend=backend,
                              progress=progress)


class Plan(PlanBase):
    """A compiled dynamics problem: `solve` (online, batched), `stats`, `table`, `save`."""

    def __init__(self, problem, factorization, backend="auto"):
        super().__init__(problem)
        self.system = problem.system()
        self.factorization = factorization
        self.default_backend = backend
        self._assembly_ops = None
        self._ir = None
        self._kernels = {}
        self._lock = threading.Lock()        # kernels are built once, by one thread
        self._local = threading.local()      # each thread's single-state solver (_one_state)
        self._copy_blocks = CopyBlocks()     # memory of solve's private input copies
        self._single_c = False               # "auto" runs single states on C (its library is built)
        self._derivative_plans = None        # derivative_plans(), planned on first use

    # ------------------------------------------------------------------ offline facts

    @property
    def stats(self):
        """nnz_D, nnz_LU, fill, flops (online LU + substitutions per state, exact), ordering,
        backend (from the planner), plus the problem, the size of D and the counted cost of
        assembling D and b per state (assembly_mul / assembly_add / assembly_flops)."""
        out = dict(self.factorization.stats)
        out.update(problem=self.problem.name, n_rows=self.system.shape[0],
                   n_cols=self.system.shape[1], nnz_D=self.system.nnz,
                   structural_orders=sorted(self.system.structural_orders))
        ops = self.assembly_operations()
        out.update(assembly_mul=ops.mul, assembly_add=ops.add, assembly_flops=ops.flops)
        return out

    @property
    def table(self):
        return self.factorization.table

    def assembly_operations(self):
        """Counted operations of assembling D(q) and b(q, qd) for one state (state-independent)."""
        if self._assembly_ops is None:
            q = self.model.neutral_configuration()[None]
            qd = np.zeros((1, self.model.nv))
            measured = {key: np.zeros((1, self.system.rows[("y_" + key[0], key[1])].size))
                        for key in self.system.measured}
            with count_operations() as ops:
                self.system.assemble(q, qd, measured)
            self._assembly_ops = ops
        return self._assembly_ops

    def derivative_plans(self):
        """(the inverse-dynamics plan whose substitutions give the compiled derivatives' dtau/dq
        and dtau/dv: this plan, or for forward dynamics the inverse dynamics of its model with
        the same external-wrench links; the model's mass-matrix plan), planned on first use
        (problems/plan_derivatives.py)."""
        with self._lock:            # (this plan itself is not stored: no reference cycle)
            if self._derivative_plans is None:
                problem = self.problem
                twin = None if problem.given == "qdd" else compile(
                    inverse_dynamics(self.model, f_ext=list(problem.fx_links) or False))
                self._derivative_plans = (twin, compile(mass_matrix(self.model)))
            twin, mass = self._derivative_plans
        return (self if twin is None else twin), mass

    # ------------------------------------------------------------------ online

    def solve(self, q, v, qdd=None, tau=None, f_ext=None, outputs=None, backend=None, threads=None,
              derivatives=False, derivatives_out=None):
        """Solve the problem for one state (q (nq,), v (nv,), ...) or a batch ((B, nq), ...).

        Inverse dynamics takes qdd, forward dynamics tau; f_ext = {link: linear-first wrench in
        the link frame, (6,) or (B, 6)} on the links the problem was compiled with.

        outputs: None computes the problem's joint-space output (tau or qdd) now and every other
        variable (result["a", link], result.vector, ...) on first access, with one more pass over
        the same inputs; "all" computes the whole solution in this pass.
        backend: "auto" (the plan's default unless compiled with another: "c" once the library
        the batch runs on is built (one state at a time: up to AUTO_C_MAX_BATCH states; vectors
        of 8: any batch of 8 or more), else "numba" once its kernel is
        compiled or cached, else "numpy" while numba compiles in the background: no answer waits
        for a JIT; sparsedyn.wait_for_kernels()), "c", "numba" or "numpy" (NumPy assembly, then
        the LU program in NumPy: the reference route); all give the same results up to
        round-off. Counting operations (opcount) always uses the NumPy route, whose primitives
        charge their cost. threads: how many threads split the batch (default: numba's,
        i.e. NUMBA_NUM_THREADS or numba.set_num_threads, but no more than the cores idle at the
        call and MIN_STATES_PER_THREAD states each: kernels.parallel.default_threads); a
        given count is used as given, capped so that each thread gets MIN_STATES_PER_THREAD
        states; 1 runs single-threaded.
        derivatives: True also computes the analytical derivatives of the joint-space output
        with respect to q (Pinocchio's tangent space, as pinocchio.integrate moves q), v and the
        given qdd or tau (plan_derivatives.py): result.derivatives = (dtau/dq, dtau/dv,
        dtau/dqdd) or (dqdd/dq, dqdd/dv, dqdd/dtau), each (B, nv, nv). Backend "c" (and "auto"
        once its library is built) runs Carpentier and Mansard's recursion and, for forward
        dynamics, M^-1 through L^T L on C vectors (backends/c_derivatives.py); "numba" the
        multi-right-hand-side substitutions
        through this plan's factorization (the whole solution is computed: outputs "all");
        "numpy" the same in NumPy, the reference. `threads` splits the batch on every route.
        derivatives_out: a (3, B, nv, nv) C-contiguous float64 array (B = 1 for one state) the
        derivatives are written into, result.derivatives its views: a caller that keeps it
        between calls saves the allocation (a fresh array's first touch costs the kernel's
        zeroing of its pages, 3-5 us per humanoid state: experiments/kernel_design.md)."""
        problem, model = self.problem, self.model
        if (derivatives is False and derivatives_out is None) or derivatives is True:
            fast = self._one_state(q, v, qdd, tau, f_ext, outputs, backend, threads,
                                   derivatives, derivatives_out)
            if fast is not None:
                return fast
        given = {"qdd": qdd, "tau": tau}
        for key, val in given.items():
            if key != problem.given and val is not None:
                raise ValueError(f"{key}: {problem.name} takes {problem.given}, not {key}")
        if given[problem.given] is None:
            raise ValueError(f"{problem.given}: {problem.name} needs {problem.given} (nv,) or (B, nv)")
        if v is None:
            raise ValueError("v: the joint velocities are needed (zeros for a static state)")
        backend = self._check_backend(backend)
        if not isinstance(derivatives, (bool, np.bool_)):
            raise ValueError(f"derivatives: expected True or False, got {derivatives!r}")
        if derivatives_out is not None and not derivatives:
            raise ValueError("derivatives_out: an array for the derivatives, so only with "
                             "derivatives=True")
        # auto: C's unit once built, the tangent kernels only once they run without a JIT
        # compile (else NumPy, their compile started in the background); C's unit reads the
        # joint-space qdd alone, the other routes the whole solution
        d_backend = derivative_backend(self, backend) if derivatives else None
        full = self._check_outputs(outputs) or d_backend not in (None, "c")
        threads_given = threads
        self.check_threads(threads)                 # a bad value is named on every route
        requested = backend
        # private copies of the inputs, checked: the on-demand pass below must see the inputs of
        # this call even if the caller reuses its arrays in the meantime. A compiled kernel that
        # can copies and checks them as it reads them (one pass over their memory:
        # _kernel_copies); else one pass copies and checks them before the solve
        batch = state(model, q, checked=False, v=v, **{problem.given: given[problem.given]})
        copying = self._kernel_copies(batch, f_ext, backend, full)
        if copying is not None:
            arrays, backend, B, single = copying
            threads = self.threads_for(threads_given, B)
            q, v, y = copies = copy_views(self._copy_blocks, arrays)
            fx = None
            joint, x = self._solve_compiled(*arrays, fx, full, threads, backend,
                                            copies=(copies, {"v": v, problem.given: y}))
        else:
            q, vecs, B, single = copy_state(
                model, *batch, self._copy_blocks,
                threads=(lambda B: self.threads_for(threads_given, B))
                if backend != "numpy" else 1)
            v, y = vecs["v"], vecs[problem.given]
            fx = None
            if problem.fx_bodies:
                fx = external_forces(model, self._check_f_ext(f_ext), B)[:, list(problem.fx_bodies)]
            elif f_ext:
                raise ValueError(f"f_ext: this plan of {problem.name} was compiled without "
                                 f"external wrenches; compile {problem.name}(model, "
                                 f"f_ext=[links]) instead")
            if B == 0 or self.system.shape[0] == 0:
                # no states, or no movable joints (only fixed ones): empty results of the usual
                # shapes
                zero = (check_derivatives_out(derivatives_out, B, model.nv, zero=True)
                        if derivatives else None)
                return Result(self, np.zeros((B, self.system.shape[1])), single, derivatives=zero)
            backend = self._fused_backend(backend, B, full)
        if backend == "numpy":
            x = self._solve_numpy(q, v, y, fx)
            # (auto picks NumPy for d* on few states; the derivatives' kernels still pay there)
            dx = (plan_solve_derivatives(self, q, v, x[:, joint_columns(self, "qdd")], x,
                                         d_backend, 1, None, derivatives_out, fx)
                  if derivatives else None)
            return Result(self, x, single, derivatives=dx)
        if copying is None:
            threads = self.threads_for(threads_given, B)
            joint, x = self._solve_compiled(q, v, y, fx, full, threads, backend)

        def vector():   # the other variables, on demand: the same compiled pass, full output
            # "auto" picks again for the full output: never a compiler run the caller did not ask for
            full_backend = self._fused_backend(requested, B, True)
            return self._solve_compiled(q, v, y, fx, True, threads, full_backend, quiet=True)[1]
        dx = None
        if derivatives:
            qdd = y if problem.given == "qdd" else joint
            dx = plan_solve_derivatives(self, q, v, qdd, x, d_backend, threads, vector,
                                        derivatives_out, fx)
        return Result(self, x, single, joint_space={problem.outputs[0]: joint},
                      vector=None if x is not None else vector, derivatives=dx)

    def _kernel_copies(self, batch, f_ext, backend, full):
        """(inputs as C-contiguous float64 arrays [q, v, given], backend, B, single) where the
        compiled kernel copies and checks the inputs as it reads them (the backends' protocol:
        kernel.copies_inputs): a batch (batch.state's, unchecked) of a plan without external
        wrenches, on C (its vector unit: LANES states or more) or on numba (inputs of the one
        array type its kernel is compiled for: C-contiguous, aligned, writeable); else None."""
        problem = self.problem
        if backend == "numpy" or problem.fx_bodies or f_ext or not self.system.shape[0]:
            return None
        q, vecs, B, single = batch
        if B == 0:
            return None
        route = self._fused_backend(backend, B, full)
        arrays = [np.ascontiguousarray(a) for a in (q, vecs["v"], vecs[problem.given])]
        if route == "numba":
            if not all(a.flags.writeable and a.flags.aligned for a in arrays):
                return None
        elif route != "c" or not self.kernel("c").copies_inputs(B, full):
            return None
        return arrays, route, B, single

    def _one_state(self, q, v, qdd, tau, f_ext, outputs, backend, threads, derivatives=False,
                   derivatives_out=None):
        """The Result of one state on the C backend's single-state function (StateSolver, one
        per thread), or None where the general path runs: not exactly float64 arrays of the
        model's sizes, 1-D or all (1, size) C-contiguous (a batch of one: results keep their
        batch axis), wrenches other than (6,), outputs, an invalid `threads`, another
        backend, "auto" before its C library is built, counting operations. The checks are
        the kernel's: a state it flags (a non-unit quaternion, a result that is not finite, a
        failed pivot or accuracy check) returns None, and the general path raises the typed
        error naming the argument or re-solves it. derivatives: by the C derivatives' unit
        (plan_derivatives.c_unit; "auto": once its library is built; a state it flags takes the
        general path), into derivatives_out when given (check_derivatives_out)."""
        problem, model = self.problem, self.model
        given = qdd if problem.given == "qdd" else tau
        other = tau if problem.given == "qdd" else qdd
        if outputs is not None or other is not None:
            return None
        if threads is not None:
            try:
                self.check_threads(threads)       # one state runs on one thread whatever the count
            except ValueError:
                return None                       # the general path names it
        single = type(q) is np.ndarray and q.ndim == 1
        for arr, size in ((q, model.nq), (v, model.nv), (given, model.nv)):
            if (type(arr) is not np.ndarray or arr.shape != ((size,) if single else (1, size))
                    or arr.dtype != np.float64 or not arr.flags.c_contiguous):
                return None
        if not single:
            q, v, given = q[0], v[0], given[0]
        if f_ext is not None and (type(f_ext) is not dict or not problem.fx_bodies or any(
                np.shape(w) != (6,) for w in f_ext.values())):
            return None
        requested = self.backend if backend is None else backend
        if requested == "auto":
            if not self._single_c:
                if self.system.shape[0] == 0 or self._fused_backend("auto", 1) != "c":
                    return None
                self._single_c = True
        elif requested != "c":
            return None
        if opcount.counting() or self.system.shape[0] == 0:
            return None
        if derivatives:
            unit = c_unit(self)
            if unit is None or problem.fx_bodies or (requested == "auto" and not unit.ready()):
                return None
        solver = getattr(self._local, "state_solver", None)
        if solver is None:
            solver = self._local.state_solver = StateSolver(self, "c")
        joint = solver.unchecked(q, v, given, f_ext)
        if joint is None:
            return None
        q1, v1, y1 = q[None].copy(), v[None].copy(), given[None].copy()
        wrenches = None if f_ext is None else {k: np.array(w, dtype=float) for k, w in f_ext.items()}
        dx = None
        if derivatives:
            dx = check_derivatives_out(derivatives_out, 1, model.nv)
            if unit.run(q1, v1, y1 if problem.given == "qdd" else joint[None], dx).any():
                return None              # (the general path: the checked route decides)

        def vector():   # the other variables, on demand: the general path's full pass
            fx = None
            if problem.fx_bodies:
                fx = external_forces(model, self._check_f_ext(wrenches), 1)[:, list(problem.fx_bodies)]
            full_backend = self._fused_backend(requested, 1, True)
            return self._solve_compiled(q1, v1, y1, fx, True, 1, full_backend, quiet=True)[1]
        return Result(self, None, single, joint_space={problem.outputs[0]: joint[None]},
                      vector=vector, derivatives=dx)

    @property
    def backend(self):
        """The default online backend (compile's `backend`)."""
        return self.default_backend

    def _check_backend(self, backend):
        backend = self.check_backend(backend, self.backend)
        if opcount.counting():
            return "numpy"            # the compiled kernels do not charge the operation counter
        return backend

    def _fused_backend(self, backend, B, full=False):
        """The backend that runs a batch of B states: "auto" -> "c" when the C library this batch
        and kind of call runs on (CKernel.batch_kind) is built already (a compile takes
        seconds: it is paid where the user asks for C) and is the faster there (one state at a
        time up to AUTO_C_MAX_BATCH states; C's vectors against numba's lanes at any size:
        experiments/kernel_design.md), else "numba" once its kernel runs without a JIT compile,
        else "numpy" while numba compiles it in the background (sparsedyn/jit.py)."""
        if backend != "auto":
            return backend
        if backends.module("c").unavailable() is None:
            kernel = self.kernel("c")
            kind = kernel.batch_kind(B, full or self.ir.checks_residual)
            # one state at a time up to AUTO_C_MAX_BATCH; on vectors, C's lanes beat numba's
            if (B <= AUTO_C_MAX_BATCH or kind.endswith("_lanes")) and kernel.ready(kind):
                return "c"
        return "numba" if self.kernel("numba").ready() else "numpy"

    def _check_outputs(self, outputs):
        """True if the whole solution vector is wanted in this pass."""
        if outputs is None:
            return False
        names = (outputs,) if isinstance(outputs, str) else outputs
        try:
            names = tuple(names)
        except TypeError:
            names = (outputs,)
        known = self.problem.outputs + ("all",)
        bad = [n for n in names if n not in known]
        if bad or not names:
            raise ValueError(f"outputs: expected None, 'all' or names among {known}, got {outputs!r}")
        return "all" in names

    def _measured(self, y, fx):
        """{(kind, body): (B, size)} of the measurement rows (NumPy path)."""
        model, problem = self.model, self.problem
        measured = {(problem.given, i): y[:, model.v_slice(i)] for i in range(model.nbodies)}
        for k, i in enumerate(problem.fx_bodies):
            measured[("fx", i)] = fx[:, k]
        return measured

    def _solve_numpy(self, q, v, y, fx):
        inputs = self._inputs(q, v, y, fx)
        with np.errstate(over="ignore", invalid="ignore"):
            values, rhs = self.system.assemble(q, v, self._measured(y, fx))
        check_assembled(self.problem.name, "D(q) or b(q, v)", inputs, values, rhs)
        x, status = self.factorization.solve_status(values, rhs)
        self._raise_for_status(status, np.arange(q.shape[0]), inputs)
        return np.asarray(x)

    def _inputs(self, q, v, y, fx):
        """The call's batched inputs by name, for NonFiniteError."""
        return {"q": q, "v": v, self.problem.given: y, "f_ext": fx}

    def _raise_for_status(self, status, indices, inputs):
        """SingularModelError or NonFiniteError for the states (batch `indices`) whose
        Factorization status is not OK."""
        from ..planner.factorization import OVERFLOW, SINGULAR
        singular = indices[status == SINGULAR].tolist()
        if singular:
            raise self._singular(singular)
        overflow = indices[status == OVERFLOW].tolist()
        if overflow:
            raise nonfinite_error(self.problem.name, self.problem.outputs[0], overflow, inputs)

    def test_system(self, seed=0):
        """(values (2, nnz), rhs (2, n)) of D and b at two seeded random states (inputs of unit
        size): what load_plan checks a stored program against."""
        model, problem = self.model, self.problem
        rng = np.random.default_rng(seed)
        q = model.random_configuration(rng, batch=2)
        v, y = rng.normal(size=(2, 2, model.nv))
        fx = rng.normal(size=(2, len(problem.fx_bodies), 6)) if problem.fx_bodies else None
        return self.system.assemble(q, v, self._measured(y, fx))

    def _singular(self, indices):
        """The SingularModelError for these batch indices: D of a dynamics problem is singular
        exactly when the mass matrix is (Nori Sec. V: D's Schur complement onto qdd is M)."""
        what = ("the mass matrix is singular (forward dynamics: D is singular)"
                if self.problem.name == "forward_dynamics" else "D is singular")
        return SingularModelError(f"model {self.model.name!r}: {what} for batch indices "
                                  f"{_short(indices)}", batch_indices=indices)

    @property
    def ir(self):
        """The plan's IR (built once, on first use): the assembly program bound to the LU
        program, with the row-wise backward-error check where the factorization asks for it
        (checks_accuracy); y's columns: the given qdd or tau (nv), then the external wrenches
        (6 per f_ext link, angular-first); outputs: the joint-space unknowns (nv)."""
        with self._lock:
            if self._ir is None:
                from ..planner.factorization import ROW_BACKWARD_TOL
                problem, system, N = self.problem, self.system, self.model.nbodies
                order = ([(problem.given, i) for i in range(N)]
                         + [("fx", i) for i in problem.fx_bodies])
                out = np.concatenate([system.columns[(problem.outputs[0], i)].indices
                                      for i in range(N)])
                residual = None
                if self.factorization.checks_accuracy:
                    residual = (*self.factorization.entries, ROW_BACKWARD_TOL, "rows")
                self._ir = FusedProgram(AssemblyProgram(system), self.factorization.program,
                                        order, out, residual=residual)
            return self._ir

    def kernel(self, backend):
        """The IR prepared by `backend` ("c" or "numba"), built once per plan."""
        ir = self.ir
        with self._lock:
            if backend not in self._kernels:
                self._kernels[backend] = backends.backend(backend).prepare(ir)
            return self._kernels[backend]

    def _fused_solver(self):
        """The numba backend's kernel (tests and experiments reach the IR through it)."""
        return self.kernel("numba")

    def solver(self, backend="c"):
        """A callable for one state at a time (a control loop): f(q (nq,), v (nv,), y (nv,),
        f_ext=None, out=None) -> the joint-space output (nv,) (tau or qdd), with its buffers
        allocated and its kernel bound once; see StateSolver."""
        if backend not in ("c", "numba"):
            raise ValueError(f"backend: expected 'c' or 'numba', got {backend!r}")
        return StateSolver(self, backend)

    def export_c(self, directory, name="sparsedyn_plan", overwrite=False):
        """Write the plan as dependency-free C99, `name`.c and `name`.h in `directory`, for a
        robot's controller (see the header for the interface and an example). Returns the
        paths."""
        from ..backends.generated_c import export_c
        what = f"{self.problem.name} of model {self.model.name!r}"
        return export_c(self.ir, directory, name, what=what, overwrite=overwrite,
                        given=f"{self.problem.given}, {self.model.nv} in sparsedyn's joint order")

    def _solve_compiled(self, q, v, y, fx, full, threads, backend="numba", quiet=False,
                        copies=None):
        """(joint-space output (B, nv), whole solution (B, n) or None). States whose static pivot
        fails, whose solution fails the accuracy check (Factorization.checks_accuracy) or is not
        finite are re-solved with partial pivoting (Factorization.pivoted_solve):
        PivotBreakdownWarning; SingularModelError, NonFiniteError naming the batch indices.
        copies: ([qc, vc, yc], {name: vector copy}) where C's vector unit copies unchecked
        inputs as it reads them: a non-finite input or a non-unit quaternion then raises what
        state() raises (input_copies.raise_for_inputs), and the rest reads the copies."""
        B = q.shape[0]
        if backend == "numpy":          # "auto" while numba compiles (_fused_backend)
            x = self._solve_numpy(q, v, y, fx)
            return x[:, self.ir.out_columns], x
        ys = y if fx is None else np.concatenate((y, fx.reshape(B, -1)), axis=1)
        kw = {} if copies is None else {"copies": copies[0]}
        joint, x, broken = backends.backend(backend).run(self.kernel(backend), q, v, ys,
                                                         full=full, threads=threads, **kw)
        if copies is not None:
            # C checks q's quaternions in the kernel, numba leaves them to this check
            flagged = broken.any()
            raise_for_inputs(self.model, copies[0][0], copies[1],
                             finite=not (flagged and (broken & INPUT_NOT_FINITE).any()),
                             quaternions=backend != "c"
                             or bool(flagged and (broken & BAD_QUATERNION).any()))
            broken = broken != 0        # a quaternion within state()'s tolerance: re-solved
            q, v, y = copies[0]
        if broken.any():
            from ..errors import PivotBreakdownWarning
            from ..planner.factorization import ROW_BACKWARD_TOL
            bad = np.flatnonzero(broken)
            inputs = self._inputs(q, v, y, fx)
            fx_b = None if fx is None else fx[bad]
            with np.errstate(over="ignore", invalid="ignore"):
                values, rhs = self.system.assemble(q[bad], v[bad], self._measured(y[bad], fx_b))
            check_assembled(self.problem.name, "D(q) or b(q, v)", inputs, values, rhs,
                            indices=bad)
            xb = np.empty_like(rhs)
            status = self.factorization.pivoted_solve(values, rhs, xb, np.arange(bad.size))
            self._raise_for_status(status, bad, inputs)
            if not quiet:
                why = ("static pivot broke down or lost accuracy (row-wise backward error above "
                       f"{ROW_BACKWARD_TOL:g})" if self.factorization.checks_accuracy
                       else "static pivot broke down")
                warnings.warn(PivotBreakdownWarning(
                    f"values: {why} for batch indices {_short(bad.tolist())}; re-solved with "
                    f"partial pivoting (splu)"), stacklevel=3)
            joint[bad] = xb[:, self.ir.out_columns]
            if x is not None:
                x[bad] = xb
        return joint, x

    def _check_f_ext(self, f_ext):
        if not f_ext:
            return None
        if not isinstance(f_ext, dict):
            raise ValueError("f_ext: expected a dict {link name: wrench (6,) or (B, 6)}")
        model = self.model
        for name in f_ext:
            if name not in model.frames:
                raise KeyError(f"f_ext: model {model.name!r} has no link named {name!r}")
            if model.frames[name].body not in self.problem.fx_bodies:
                raise ValueError(f"f_ext: link {name!r} has no external-wrench variable in this "
                                 f"plan (compiled with f_ext on {list(self.problem.fx_links)})")
        return f_ext

    # ------------------------------------------------------------------ storage

    def save(self, path):
        """Write the plan to a versioned .npz file (no pickles), atomically (sparsedyn.files)."""
        save_plan_file(self, path)

    def __repr__(self):
        s = self.factorization.stats
        return (f"Plan({self.problem!r}: D {self.system.shape[0]}x{self.system.shape[1]}, "
                f"nnz {self.system.nnz}, ordering {s.get('ordering')!r}, flops {s.get('flops')})")


def save_plan_file(plan, path, extra=None):
    """Write `plan` (a Plan or a LoopPlan) as a versioned .npz file (no pickles), atomically;
    `extra`: further JSON header entries (a LoopPlan's cluster summary)."""
    arrays = {}
    manifest = to_plain(plan.factorization.to_dict(), arrays, "fact")
    P = plan.system.pattern
    header = {"format": PLAN_FORMAT, "version": PLAN_VERSION,
              "model": model_summary(plan.model), "problem": plan.problem.describe(),
              "pattern_shape": list(P.shape), "factorization": manifest, **(extra or {})}
    arrays.update(pattern_indptr=P.indptr, pattern_indices=P.indices)
    with atomic_write(path, "wb") as fh:
        np.savez_compressed(fh, header=np.array(json.dumps(header)), **arrays)


#: (model type, loader(path, model)) for models other than a Model (problems/loops.py adds the
#: ClusterModel's): load_plan dispatches on the model it is given
LOADERS = []


def read_checked_plan(path, model):
    """(header, arrays) of a plan file whose spanning model matches `model` (PlanMismatchError
    naming what differs; ValueError for a file that is not a sparsedyn plan)."""
    header, arrays = read_plan_file(path, PLAN_FORMAT, PLAN_VERSION, "sparsedyn plan file")
    try:
        stored_model, problem_desc = header["model"], header["problem"]
        manifest = header["factorization"]
        _ = arrays["pattern_indptr"], arrays["pattern_indices"], tuple(header["pattern_shape"])
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: corrupt sparsedyn plan file (missing {exc})") from None
    if not (isinstance(stored_model, dict) and isinstance(problem_desc, dict)
            and isinstance(manifest, dict)):
        raise ValueError(f"{path}: corrupt sparsedyn plan file (header entries of the wrong type)")
    differences = model_differences(stored_model, model_summary(model))
    if differences:
        raise PlanMismatchError(f"{path}: plan was compiled for another model: "
                                + "; ".join(differences))
    return header, arrays


def bind_factorization(path, problem, header, arrays):
    """The stored Factorization, after checking that its pattern, constant entries and static
    pivot candidates (a LoopSystem's pivot_candidates, else the always-nonzero entries) are the
    ones `problem`'s system has (PlanMismatchError) and that it is well formed (ValueError)."""
    system = problem.system()
    P = system.pattern
    if (P.shape != tuple(header["pattern_shape"]) or not np.array_equal(P.indptr, arrays["pattern_indptr"])
            or not np.array_equal(P.indices, arrays["pattern_indices"])):
        raise PlanMismatchError(f"{path}: the stored sparsity pattern of {problem!r} differs from "
                                "the one this sparsedyn builds for the model (re-compile the plan)")
    try:
        fact = Factorization.from_dict(from_plain(header["factorization"], arrays))
    except (KeyError, ValueError, TypeError, RecursionError) as exc:
        raise ValueError(f"{path}: corrupt factorization in plan file ({exc})") from None
    fact.verify_pattern(P)
    if not (np.array_equal(fact.constant_values, system.constant_values, equal_nan=True)
            and np.array_equal(fact.always_nonzero,
                               getattr(system, "pivot_candidates", system.always_nonzero))):
        raise PlanMismatchError(f"{path}: the stored constant entries of D for {problem!r} differ "
                                "from the ones this sparsedyn builds for the model (re-compile "
                                "the plan)")
    return fact


def load_plan(path, model):
    """Read a plan saved by Plan.save and bind it to `model` (a Model; a ClusterModel for the
    plans of loop_forward_dynamics / loop_inverse_dynamics).

    Raises PlanMismatchError (naming what differs) if the plan was compiled for another model,
    ValueError if the file is not a sparsedyn plan (or is corrupt, or from a newer version):
    every stored array is checked (CRC, dtype, ranges) before a kernel can index with it."""
    for kind, loader in LOADERS:
        if isinstance(model, kind):
            return loader(path, model)
    header, arrays = read_checked_plan(path, model)
    if "clusters" in header:
        raise PlanMismatchError(f"{path}: a plan of a cluster model's {header['problem'].get('name')!r}: "
                                "load it with that ClusterModel, not its spanning tree")
    return bind_plan(path, Plan, lambda: Problem.from_description(model, header["problem"]),
                     header, arrays)


def bind_plan(path, plan_class, make_problem, header, arrays):
    """plan_class(problem, stored factorization) for the problem make_problem() rebuilds from the
    header, after bind_factorization's checks and a run of the stored program on the plan's
    test_system (ValueError naming the file if the description or the program is corrupt)."""
    try:
        problem = make_problem()
    except (KeyError, ValueError, TypeError) as exc:
        raise ValueError(f"{path}: corrupt problem description in plan file ({exc})") from None
    plan = plan_class(problem, bind_factorization(path, problem, header, arrays))
    try:
        plan.factorization.verify_program(*plan.test_system())
    except ValueError as exc:
        raise ValueError(f"{path}: corrupt factorization in plan file ({exc})") from None
    return plan


# ---------------------------------------------------------------------- results


class Result(Mapping):
    """Solved variables: result["tau"], result["qdd"] (B, nv); result["a", link],
    result["f", link], result["fx", link] (B, 6) linear-first in the link frame;
    result["tau", link] / ["qdd", link] the block of the link's joint. Single states lose B.

    x: the whole solution (B, n) (internal: angular-first, body frames, natural column order), or
    None with `vector` a function that computes it on first access; joint_space: already
    extracted public joint-space outputs {"tau" or "qdd": (B, nv)}; derivatives: the three
    (B, nv, nv) derivatives of Plan.solve(..., derivatives=True), or None."""

    def __init__(self, plan, x, single, joint_space=None, vector=None, derivatives=None):
        if x is None and vector is None:
            raise ValueError("x: give the solution or a function that computes it")
        self._plan = plan
        self._vector = x
        self._vector_fn = vector
        self._joint = dict(joint_space or {})
        self._single = single
        self._derivatives = derivatives

    @property
    def derivatives(self):
        """(d out/dq, d out/dv, d out/dy) (B, nv, nv) each (single states lose B): out is tau
        (inverse dynamics, y = qdd) or qdd (forward dynamics, y = tau); q in Pinocchio's
        tangent space. Only after Plan.solve(..., derivatives=True)."""
        if self._derivatives is None:
            raise ValueError("derivatives: solve with plan.solve(..., derivatives=True)")
        return tuple(unbatch(d, self._single) for d in self._derivatives)

    @property
    def vector(self):
        if self._vector is None:
            self._vector = self._vector_fn()
        return self._vector

    def _joint_space(self, kind):
        if kind in self._joint:
            return self._joint[kind]
        return self.vector[:, self._plan.system.joint_columns(kind)]

    def variable(self, kind, link):
        model = self._plan.model
        if link not in model.frames:
            raise KeyError(f"model {model.name!r} has no link named {link!r}")
        frame = model.frames[link]
        if frame.body < 0:
            raise KeyError(f"link {link!r} is welded to the fixed world: it has no variables")
        if (kind, frame.body) not in self._plan.system.columns:
            known = sorted({k for k, _ in self._plan.system.columns.index})
            raise KeyError(f"no variable {kind!r} for link {link!r} (variables: {known})")
        x = self.vector[:, self._plan.system.columns[(kind, frame.body)].slice]
        if kind in ("a", "f", "fx"):
            T = frame.placement
            if not np.array_equal(T, np.eye(4)):
                B = x.shape[0]
                lXb = Transform.from_placement(np.broadcast_to(T[:3, :3], (B, 3, 3)),
                                               np.broadcast_to(T[:3, 3], (B, 3)))
                x = lXb.apply_motion(x) if kind == "a" else lXb.apply_force(x)
            x = to_linear_first(x)
        return unbatch(np.array(x), self._single)

    def __getitem__(self, key):
        if isinstance(key, str):
            if key in ("tau", "qdd"):
                return unbatch(self._joint_space(key), self._single)
            raise KeyError(f"{key!r}: use 'tau', 'qdd' or (kind, link)")
        if isinstance(key, tuple) and len(key) == 2:
            return self.variable(*key)
        raise KeyError(key)

    def __iter__(self):
        names = self._plan.model.link_names
        yield "tau"
        yield "qdd"
        for kind, body in self._plan.system.columns.index:
            yield (kind, names[body])

    def __len__(self):
        return 2 + len(self._plan.system.columns.index)


# ---------------------------------------------------------------------- file helpers


def read_plan_file(path, fmt, version, what):
    """(header dict, {name: array}) of a plan file: ValueError "<path>: not a ... <what>" for a
    file that is not one (read_npz's checks, a JSON header of format `fmt`), or whose version is
    newer than `version`."""
    arrays = read_npz(path, what)
    try:
        header = json.loads(str(arrays.pop("header")))
    except (ValueError, KeyError, RecursionError) as exc:
        raise ValueError(f"{path}: not a readable {what} (header: "
                         f"{type(exc).__name__}: {exc})") from None
    if not isinstance(header, dict) or header.get("format") != fmt:
        raise ValueError(f"{path}: not a {what} (no {fmt!r} header)")
    if not isinstance(header.get("version"), int) or header["version"] > version:
        raise ValueError(f"{path}: {what} version {header.get('version')!r} is not supported "
                         f"(this sparsedyn reads versions <= {version})")
    return header, arrays


def model_summary(model):
    return {"name": model.name, "fingerprint": model.fingerprint(), "nq": model.nq, "nv": model.nv,
            "links": list(model.link_names),
            "joints": [f"{j.name}:{j.kind}" for j in model.joints],
            "gravity": [float(g) for g in model.gravity]}


def model_differences(stored, actual):
    if stored.get("fingerprint") == actual["fingerprint"]:
        return []
    out = []
    for key in ("name", "nq", "nv", "gravity"):      # (plan files before gravity: no entry)
        if (key != "gravity" or key in stored) and stored.get(key) != actual[key]:
            out.append(f"{key} {stored.get(key)!r} in the plan, {actual[key]!r} in the model")
    for key, what in (("links", "link"), ("joints", "joint")):
        s, a = stored.get(key), actual[key]
        s = s if isinstance(s, list) else []       # a corrupt header: every entry differs
        if s != a:
            if len(s) != len(a):
                out.append(f"{len(s)} {what}s in the plan, {len(a)} in the model")
            diff = [(k, x, y) for k, (x, y) in enumerate(zip(s, a)) if x != y]
            if diff:
                k, x, y = diff[0]
                out.append(f"{what} {k} is {x!r} in the plan, {y!r} in the model")
    if not out:
        out.append("same topology and joints but different placements, axes or inertias "
                   f"(model fingerprint {stored.get('fingerprint')} in the plan, "
                   f"{actual['fingerprint']} in the model)")
    return out


class StateSolver:
    """Plan.solver(): one state per call, for a control loop. The inputs are copied into buffers
    allocated once and the kernel runs on them without the per-call checks of Plan.solve; a
    state the kernel flags (a non-unit quaternion, a failed pivot check, a non-finite result)
    is handed to Plan.solve, which raises the typed error naming the argument or re-solves it
    with partial pivoting (PivotBreakdownWarning), so a flagged call is slower, never wrong."""

    def __init__(self, plan, backend):
        self.plan, self.backend = plan, backend
        model, problem = plan.model, plan.problem
        self._given = problem.given
        self._q, self._v = np.zeros(model.nq), np.zeros(model.nv)
        self._y = np.zeros(model.nv + 6 * len(problem.fx_bodies))
        self._out = np.zeros(model.nv)
        kernel = plan.kernel(backend)
        if backend == "c":
            from ..backends.generated_c import single_state
            self._work = np.zeros(kernel.work_doubles)
            fn = single_state(kernel)
            ptrs = [a.ctypes.data for a in (self._q, self._v, self._y, self._out, self._work)]
            self._run = lambda: fn(*ptrs)
        else:
            q2, v2, y2 = (a[None] for a in (self._q, self._v, self._y))

            def run():
                out, _, broken = kernel.run(q2, v2, y2, threads=1)
                self._out[:] = out[0]
                return int(broken[0])
            self._run = run

    def __call__(self, q, v, y, f_ext=None, out=None):
        """The joint-space output (nv,) for one state: y is the plan's given vector (qdd for
        inverse dynamics, tau for forward dynamics); f_ext as Plan.solve's; out: an (nv,)
        array to write it into (returned). Arrays of exactly (nq,), (nv,), (nv,) take the fast
        path; anything else goes through Plan.solve's checks."""
        nv = self._v.shape
        if (getattr(q, "shape", None) != self._q.shape or getattr(v, "shape", None) != nv
                or getattr(y, "shape", None) != nv):
            return self._checked(q, v, y, f_ext, out)  # Plan.solve names a bad argument
        value = self.unchecked(q, v, y, f_ext)
        if value is None:
            return self._checked(q, v, y, f_ext, out)
        if out is None:
            return value
        out[:] = value
        return out

    def unchecked(self, q, v, y, f_ext=None):
        """The kernel's output (a new (nv,) array) for arrays of exactly (nq,), (nv,), (nv,),
        or None if the kernel flags the state (Plan.solve then raises or re-solves it)."""
        self._q[:], self._v[:], self._y[:self._v.size] = q, v, y
        if f_ext:
            fx = external_forces(self.plan.model, self.plan._check_f_ext(f_ext), 1)
            self._y[self._v.size:] = fx[0, list(self.plan.problem.fx_bodies)].ravel()
        elif self._y.size > self._v.size:
            self._y[self._v.size:] = 0.0
        if self._run() != 0:
            return None
        return self._out.copy()

    def _checked(self, q, v, y, f_ext, out):
        result = self.plan.solve(np.asarray(q)[None], np.asarray(v)[None], f_ext=f_ext,
                                 backend="numba", threads=1,
                                 **{self._given: np.asarray(y)[None]})
        value = result[self.plan.problem.outputs[0]][0]
        if out is None:
            return value
        out[:] = value
        return out
