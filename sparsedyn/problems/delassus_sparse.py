"""The Delassus matrix through Nori's block system (issue #5): Lambda^-1 = J M^-1 J^T = C D^-1 B.

Forward dynamics (seed 001, Sec. V) with measured tau and an external wrench fx_b on every body
that carries a contact, with v = 0, gravity and tau off (the Delassus matrix depends on none of
them): unit contact forces enter as fx (B), the solved body accelerations are read in the
contact frames (C):

    B (n x m)  column j of contact k on body b: K_k^T e_j in the measurement rows fx_b = y (the
               wrench on b of a unit force / moment in the contact frame, LOCAL, linear-first)
    C (m x n)  rows of contact k: K_k on the acceleration columns a_b (its LOCAL contact-frame
               acceleration, linear-first; K_k = rows of cX_b, contacts.py)
    Lambda^-1 = C D(q)^-1 B      (v = 0, no gravity: a_b = bJ qdd with M qdd = J^T lambda)

B and C are constant (K_k includes the contact placement), so the online work is assembling D(q)
(its state-dependent transform entries), ONE numeric factorization per state and its m
substitutions (Factorization.solve with rhs (B, n, m)), and C x (sum |K_k| m multiply-adds).

Offline: compile_delassus(model, contacts) builds the system and plans its static-pivot LU once
(cached per model, contact bodies and ordering; B and C per contact set). Online:
DelassusPlan.__call__(q, backend=None), or delassus(model, q, contacts, method="sparse").
Backends: "numpy" assembles D with NewtonEulerSystem.values and runs the NumPy LU program (the
reference), "numba" assembles with the compiled assembly program (kernels.assemble_numba) and
runs the numba LU program. Both charge the same per-state counts (assembly + factorization + m
substitutions + C x).

Preconditions: contacts resolved against `model` (sparsedyn.contacts); contacts on links welded to
the fixed world have zero rows and columns.
"""
from __future__ import annotations

import weakref

import numpy as np

from ..batch import check_configuration, unbatch
from ..contacts import Contact, resolve_contacts
from ..errors import SingularModelError, check_assembled, nonfinite_error
from ..kinematics import joint_transforms
from ..model.model import WORLD
from ..opcount import charge, count_operations, counting, suspended
from ..planner.factorization import OVERFLOW, SINGULAR
from .base import PlanBase
from .dynamics import forward_dynamics

BACKENDS = ("numba", "numpy")
CHUNK = 256      # states per factorization call: bounds the (chunk, n, m) solution array
_WHAT = "delassus (method 'sparse')"

_PLANS = weakref.WeakKeyDictionary()     # model -> {(contact bodies, ordering): Plan}
_DELASSUS = weakref.WeakKeyDictionary()  # model -> {(ordering, contact key): DelassusPlan}


def _short(indices, limit=20):
    head = ", ".join(str(i) for i in indices[:limit])
    return f"[{head}{', ...' if len(indices) > limit else ''}] ({len(indices)} states)"


def _fd_plan(model, bodies, ordering):
    """The compiled forward-dynamics problem with fx on `bodies` (shared by contact sets on the
    same bodies). A mass matrix singular for every state (a massless leaf) raises
    SingularModelError naming the bodies (compile)."""
    from .plan import compile
    cache = _PLANS.setdefault(model, {})
    key = (bodies, ordering)
    if key not in cache:
        problem = forward_dynamics(model, f_ext=[model.link_names[b] for b in bodies])
        cache[key] = compile(problem, ordering=ordering)
    return cache[key]


class DelassusPlan(PlanBase):
    """Lambda^-1(q) = C D(q)^-1 B for one model and contact set (see the module doc):
    solve(q) (or plan(q))."""

    backends = BACKENDS

    def __init__(self, model, rc, ordering="auto"):
        super().__init__(rc, model)          # the problem: the resolved contact set
        self.rc = rc
        self.moving = [k for k, b in enumerate(rc.bodies) if b != WORLD]
        bodies = tuple(sorted({rc.bodies[k] for k in self.moving}))
        self.plan = self._fd_plan(bodies, ordering) if bodies and model.nv else None
        if self.plan is None:
            return
        system = self.plan.system
        n = system.shape[0]
        self.B = np.zeros((n, rc.m))
        # C x per contact: K_k times the a_b rows of the solution; stored as (rows of Lambda,
        # a_b columns of x, K_k) triples
        self.reads = []
        for k in self.moving:
            b, K, rows = rc.bodies[k], rc.K[k], rc.rows(k)
            self.B[system.rows[("y_fx", b)].indices, rows] = K.T
            self.reads.append((rows, system.columns[("a", b)].indices, K))
        self.B.setflags(write=False)
        nnz_K = sum(int(np.count_nonzero(K)) for _, _, K in self.reads)
        m = rc.m
        self.read_cost = (nnz_K * m, (nnz_K - sum(K.shape[0] for _, _, K in self.reads)) * m)
        self._assembly = None

    def _fd_plan(self, bodies, ordering):
        """The compiled forward-dynamics plan with fx on `bodies` whose D this evaluates."""
        return _fd_plan(self.model, bodies, ordering)

    def _values(self, q, Xup):
        """D's entries (B, nnz) by NumPy (Xup: the joint transforms of q, or None)."""
        return self.plan.system.values(joint_transforms(self.model, q) if Xup is None else Xup)

    @property
    def stats(self):
        """Per-state cost: the factorization's stats (flops: LU + one substitution; solve_flops:
        each further substitution), m, and total_flops = assembly + flops + (m - 1) solve_flops
        + C x, as charged to the operation counter."""
        if self.plan is None:
            return {"m": self.rc.m, "total_flops": 0}
        s = dict(self.plan.factorization.stats)
        m = self.rc.m
        assembly = self._assembly_flops()
        s.update(m=m, assembly_flops=assembly, read_flops=sum(self.read_cost),
                 total_flops=assembly + s["flops"] + (m - 1) * s["solve_flops"] + sum(self.read_cost))
        return s

    def _assembly_flops(self):
        q = self.model.neutral_configuration()[None]
        Xup = joint_transforms(self.model, q)
        with count_operations() as ops:
            self._values(q, Xup)
        return ops.flops

    def solve(self, q, backend=None):
        """Lambda^-1 (B, m, m) (or (m, m) for one configuration q)."""
        q, single = check_configuration(self.model, q)
        backend = self.check_backend(backend, "numba")
        return unbatch(self.evaluate(q, backend=backend), single)

    __call__ = solve

    def __repr__(self):
        return (f"{type(self).__name__}({self.model.name!r}, m {self.rc.m}, "
                f"flops {self.stats.get('total_flops')})")

    def evaluate(self, q, Xup=None, backend="numpy"):
        """(B, m, m) for checked, batched q; Xup (joint transforms of q) when already at hand.
        Counting operations charges one state's cost (like the recursive methods), whatever B."""
        if counting():
            self._evaluate(q[:1], None if Xup is None else [X[:1] for X in Xup], "numpy")
            with suspended():
                return self._evaluate(q, Xup, backend)
        return self._evaluate(q, Xup, backend)

    def _evaluate(self, q, Xup, backend):
        B, m = q.shape[0], self.rc.m
        out = np.zeros((B, m, m))
        if self.plan is None:
            return out
        with np.errstate(over="ignore", invalid="ignore"):
            values = self._compiled_values(q) if backend == "numba" else self._values(q, Xup)
        check_assembled(_WHAT, "D(q)", {"q": q}, values)
        status = np.zeros(B, dtype=np.int8)
        # in chunks of states: the whole solution (chunk, n, m) is needed only until C x
        for lo in range(0, B, CHUNK):
            hi = min(B, lo + CHUNK)
            # broken static pivots are re-solved with partial pivoting (PivotBreakdownWarning)
            x, status[lo:hi] = self.plan.factorization.solve_status(values[lo:hi], self.B[None],
                                                                    backend=backend)
            for rows, cols, K in self.reads:
                out[lo:hi, rows, :] = np.einsum("ij,bjk->bik", K, x[:, cols, :])
        bad = np.flatnonzero(status == SINGULAR).tolist()
        if bad:
            raise SingularModelError(f"model {self.model.name!r}: the mass matrix is singular "
                                     f"(forward dynamics: D is singular) for batch indices "
                                     f"{_short(bad)}", batch_indices=bad)
        overflow = np.flatnonzero(status == OVERFLOW).tolist()
        if overflow:
            raise nonfinite_error(_WHAT, "Lambda^-1", overflow, {"q": q})
        charge(*self.read_cost, kind="C x")
        return out

    def _compiled_values(self, q):
        from ..kernels.assemble_numba import assemble_batch
        from ..ir.assembly import AssemblyProgram
        if self._assembly is None:
            system = self.plan.system
            self._assembly = (AssemblyProgram(system), list(system.measured),
                              sum(system.rows[("y_" + k, b)].size for k, b in system.measured))
        program, order, width = self._assembly
        B = q.shape[0]
        values, _ = assemble_batch(program, q, np.zeros((B, self.model.nv)), np.zeros((B, width)),
                                   order)
        return values


def _contact_key(rc):
    return tuple((b, K.shape[0], K.tobytes()) for b, K in zip(rc.bodies, rc.K))


def compile_delassus(model, contacts, ordering="auto"):
    """The DelassusPlan of `contacts` (Contact list, or already resolved) on `model`, planned once
    and cached per (model, contact set, ordering)."""
    rc = contacts if hasattr(contacts, "K") else resolve_contacts(model, contacts)
    return _delassus_plan(model, rc, ordering)


def _delassus_plan(model, rc, ordering="auto"):
    return cached_plan(_DELASSUS, model, rc, ordering, DelassusPlan)


def cached_plan(table, owner, rc, ordering, make):
    """make(owner, rc, ordering), built once per (owner, contact set, ordering) in `table` (a
    WeakKeyDictionary by owner; at most 64 contact sets each) outside the operation count."""
    cache = table.setdefault(owner, {})
    key = (ordering, _contact_key(rc))
    if key not in cache:
        if len(cache) >= 64:
            cache.clear()
        with suspended():                     # offline work: not part of the online count
            cache[key] = make(owner, rc, ordering)
    return cache[key]


def sparse_sweeps(model, q, Xup, rc):
    """METHODS["sparse"] (sparsedyn.delassus): the reference (NumPy) evaluation."""
    return _delassus_plan(model, rc).evaluate(q, Xup=Xup, backend="numpy")


def sparse_compiled(model, q, rc, reference):
    """COMPILED["sparse"]: compiled assembly and LU kernels (charges like the reference)."""
    return _delassus_plan(model, rc).evaluate(q, backend="numba")


__all__ = ["compile_delassus", "DelassusPlan", "Contact"]
