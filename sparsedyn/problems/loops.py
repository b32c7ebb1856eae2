"""Forward and inverse dynamics with kinematic loops as one sparse block system (seed 001, eq. 8-17,
with the loop constraints of seed 003, Sec. II-B/II-D in Lagrange form; system/loop_rows.py).

    plan = compile(loop_forward_dynamics(cluster_model))       # offline: planner's auto order
    res = plan.solve(q, qd, tau_y)                             # online, batched, NumPy assembly
    res["ydd"], res["qdd"], res["lambda"], res["lambda", "four_bar"], res["a", link]
    plan = compile(loop_inverse_dynamics(cluster_model))
    res = plan.solve(q, qd, ydd=ydd); res["tau_y"]             # = C-RNEA = G^T RNEA(q, qd, G ydd + g)
    plan.save(path); plan = load_loop_plan(path, cluster_model)   # (also sparsedyn.load_plan)

q is the spanning configuration with the loops closed, qd the spanning velocity (K qd = 0, e.g.
cluster_model.spanning_velocity(q, yd)), tau_y the independent actuator torques (ny). The result
equals C-ABA's ydd (seed 003, Algorithm 1) and the Lagrange-multiplier solution; "tau" is the
spanning joint force S_i^T f_i = tau_s + K^T lambda. Inverse dynamics takes the independent
accelerations ydd (ny) and returns res["tau_y"], the independent torques (loop_rows.py).

Online path: NumPy assembly (LoopSystem.assemble), then the factorization's LU kernel; the fused
compiled assembly of problems/plan.py does not know the loop rows and is never used here.
"""
from __future__ import annotations

import numpy as np

from ..batch import unbatch
from ..errors import PlanMismatchError, SingularModelError, check_assembled, nonfinite_error
from ..loops.cluster_model import ClusterModel
from ..opcount import count_operations
from ..planner.factorization import OVERFLOW, SINGULAR
from ..recursive._common import external_forces
from ..system.loop_rows import LoopSystem
from .dynamics import _fx_links
from .plan import LOADERS, Result, _short, bind_plan, plan_system, read_checked_plan, save_plan_file
from .base import PlanBase


class LoopProblem:
    """Forward (given "tau") or inverse (given "ydd") dynamics of a ClusterModel in Lagrange form
    on its spanning tree."""

    def __init__(self, cluster_model, fx_links=(), given="tau"):
        self.cluster_model = cluster_model
        self.model = cluster_model.model
        self.given = given
        self.name = "loop_forward_dynamics" if given == "tau" else "loop_inverse_dynamics"
        self.outputs = ("ydd", "qdd", "lambda") if given == "tau" else ("tau_y", "lambda")
        self.fx_links = tuple(fx_links)
        self.fx_bodies = tuple(sorted({self.model.frames[n].body for n in self.fx_links}))
        self._system = None

    def system(self):
        if self._system is None:
            self._system = LoopSystem(self.cluster_model, self.fx_bodies,
                                      given="tau" if self.given == "tau" else "qdd")
        return self._system

    def describe(self):
        """Plain description (stored in plan files)."""
        return {"name": self.name, "given": self.given, "fx_links": list(self.fx_links)}

    def compile(self, ordering="auto", backend="auto", progress=None):
        """Plan the static-pivot LU of the loop system once (sparsedyn.planner)."""
        system = self.system()
        return LoopPlan(self, plan_system(system, system.pivot_candidates, ordering, backend, progress))

    def __repr__(self):
        fx = f", f_ext on {len(self.fx_links)} links" if self.fx_links else ""
        return f"{self.name}({self.cluster_model.name!r}{fx})"


def _check_cluster_model(cluster_model):
    if not isinstance(cluster_model, ClusterModel):
        raise TypeError(f"cluster_model: expected a sparsedyn.loops.ClusterModel, got "
                        f"{type(cluster_model).__name__}")


def loop_forward_dynamics(cluster_model, f_ext=False):
    """ydd, qdd, lambda from (q, qd, tau_y[, f_ext]) for a ClusterModel (f_ext as in
    forward_dynamics: False, True or a list of link names)."""
    _check_cluster_model(cluster_model)
    return LoopProblem(cluster_model, _fx_links(cluster_model.model, f_ext))


def loop_inverse_dynamics(cluster_model, f_ext=False):
    """tau_y, lambda from (q, qd, ydd[, f_ext]) for a ClusterModel (f_ext as in
    loop_forward_dynamics)."""
    _check_cluster_model(cluster_model)
    return LoopProblem(cluster_model, _fx_links(cluster_model.model, f_ext), given="ydd")


class LoopPlan(PlanBase):
    """A compiled LoopProblem: `solve` (online, batched; NumPy), `stats`, `save`."""

    backends = ("numpy",)

    def __init__(self, problem, factorization):
        super().__init__(problem)
        self.cluster_model = problem.cluster_model
        self.system = problem.system()
        self.factorization = factorization
        self._assembly_ops = None

    @property
    def stats(self):
        """The planner's nnz_D, nnz_LU, fill, flops (LU + substitutions per state), ordering, plus
        the system's size, the counted cost of assembling D and b per state and, for inverse
        dynamics, of tau_y = tau - K_y^T lambda (output_flops)."""
        out = dict(self.factorization.stats)
        ops = self.assembly_operations()
        out.update(problem=self.problem.name, n_rows=self.system.shape[0],
                   n_cols=self.system.shape[1], nnz_D=self.system.nnz, n_loop_rows=self.cluster_model.nc,
                   assembly_mul=ops.mul, assembly_add=ops.add, assembly_flops=ops.flops,
                   output_flops=self.system.output_flops,
                   total_flops=ops.flops + out["flops"] + self.system.output_flops)
        return out

    def assembly_operations(self):
        """Counted operations of assembling D and b for one state (state-independent)."""
        if self._assembly_ops is None:
            cm, model = self.cluster_model, self.model
            q, _, _ = cm.random_state(0)
            z = np.zeros((1, model.nv))
            with count_operations() as ops:
                self.system.assemble(q[None], z, z, np.zeros((1, len(self.problem.fx_bodies), 6)))
            self._assembly_ops = ops
        return self._assembly_ops

    def solve(self, q, qd, tau=None, f_ext=None, ydd=None):
        """Solve for one state (q (nq,), qd (nv,), tau (ny,)) or a batch ((B, nq), ...); inverse
        dynamics takes ydd (ny,) or (B, ny) instead of tau.

        f_ext = {link: linear-first wrench in the link frame, (6,) or (B, 6)} on the links the
        problem was compiled with."""
        cm, problem, model = self.cluster_model, self.problem, self.model
        if qd is None:
            raise ValueError("qd: the spanning joint velocities are needed (zeros for a static state)")
        given = {"tau": tau, "ydd": ydd}
        for key, val in given.items():
            if key != problem.given and val is not None:
                raise ValueError(f"{key}: {problem.name} takes {problem.given}, not {key}")
        if given[problem.given] is None:
            what = "torques" if problem.given == "tau" else "accelerations"
            raise ValueError(f"{problem.given}: {problem.name} needs the independent {what} "
                             f"({cm.ny},) or (B, {cm.ny})")
        q, qd, tau, B, single = cm._state(q, qd=qd, **{problem.given: given[problem.given]})
        fx = None
        if problem.fx_bodies:
            fx = external_forces(model, self._check_f_ext(f_ext), B)[:, list(problem.fx_bodies)]
        elif f_ext:
            raise ValueError(f"f_ext: this plan of {problem.name} was compiled without external "
                             f"wrenches; compile {problem.name}(cluster_model, f_ext=[links]) instead")
        if B == 0:                                   # no states: empty results of the usual shapes
            return LoopResult(self, np.zeros((0, self.system.shape[1])), single)
        inputs = {"q": q, "qd": qd, problem.given: tau, "f_ext": fx}
        if problem.given == "tau":
            y_s = cm.spanning_torque(tau)
        else:                                   # the spanning qdd, read at the independent rows
            y_s = np.zeros((B, model.nv))
            y_s[:, cm.independent_v] = tau
        with np.errstate(over="ignore", invalid="ignore"):
            values, rhs, loop = self.system.assemble(q, qd, y_s, fx, with_K=True)
        check_assembled(problem.name, "D(q) or b(q, qd)", inputs, values, rhs)
        x, status = self.factorization.solve_status(values, rhs)
        if (status == SINGULAR).any():
            bad = np.flatnonzero(status == SINGULAR).tolist()
            raise SingularModelError(f"cluster model {cm.name!r}: D is singular (a singular mass "
                                     f"matrix or dependent loop constraints) for batch indices "
                                     f"{_short(bad)}", batch_indices=bad)
        if (status == OVERFLOW).any():
            raise nonfinite_error(problem.name, "the solution",
                                  np.flatnonzero(status == OVERFLOW).tolist(), inputs)
        x = np.asarray(x)
        tau_y = self.system.independent_torques(x, loop) if problem.given == "ydd" else None
        return LoopResult(self, x, single, tau_y=tau_y)

    def test_system(self, seed=0):
        """(values (2, nnz), rhs (2, n)) of D and b at two seeded assembled states: what
        load_loop_plan checks a stored program against."""
        cm, rng = self.cluster_model, np.random.default_rng(seed)
        q, yd, y = cm.random_state(rng, batch=2)
        y_s = np.zeros((2, self.model.nv))
        y_s[:, cm.independent_v] = y
        fx = rng.normal(size=(2, len(self.problem.fx_bodies), 6))
        return self.system.assemble(q, cm.spanning_velocity(q, yd), y_s, fx)

    def save(self, path):
        """Write the plan to a versioned .npz file (plan.py's format, with the cluster model's
        summary), atomically."""
        save_plan_file(self, path, {"clusters": cluster_summary(self.cluster_model)})

    def _check_f_ext(self, f_ext):
        if not f_ext:
            return None
        if not isinstance(f_ext, dict):
            raise ValueError("f_ext: expected a dict {link name: wrench (6,) or (B, 6)}")
        for name in f_ext:
            if name not in self.model.frames:
                raise KeyError(f"f_ext: model {self.model.name!r} has no link named {name!r}")
            if self.model.frames[name].body not in self.problem.fx_bodies:
                raise ValueError(f"f_ext: link {name!r} has no external-wrench variable in this "
                                 f"plan (compiled with f_ext on {list(self.problem.fx_links)})")
        return f_ext

    def __repr__(self):
        s = self.factorization.stats
        return (f"LoopPlan({self.problem!r}: D {self.system.shape[0]}x{self.system.shape[1]}, "
                f"nnz {self.system.nnz}, ordering {s.get('ordering')!r}, flops {s.get('flops')})")


def cluster_summary(cm):
    """What a plan file records of a ClusterModel beyond its spanning tree: each cluster's name,
    kind, links, independent coordinates and constant K (None for a q-dependent one)."""
    return [{"name": c.name, "kind": c.kind, "links": [cm.model.link_names[i] for i in c.bodies],
             "independent": [int(v) for v in cm.v_indices[k][c.independent_local]],
             "K": None if c.constant_K is None else np.asarray(c.constant_K, float).tolist()}
            for k, c in enumerate(cm.clusters)]


def load_loop_plan(path, cluster_model):
    """Read a LoopPlan saved by LoopPlan.save and bind it to `cluster_model`; PlanMismatchError
    (naming what differs) for another spanning tree or other clusters, ValueError for a file
    that is not a sparsedyn plan (plan.load_plan's checks)."""
    _check_cluster_model(cluster_model)
    header, arrays = read_checked_plan(path, cluster_model.model)
    stored, actual = header.get("clusters"), cluster_summary(cluster_model)
    if stored is None:
        raise PlanMismatchError(f"{path}: a plan of the spanning tree {cluster_model.model.name!r}, "
                                "not of a cluster model: load it with the tree's Model")
    if stored != actual:
        names = [c.get("name") for c in stored] if isinstance(stored, list) else stored
        raise PlanMismatchError(f"{path}: plan was compiled for other clusters ({names} in the plan, "
                                f"{[c['name'] for c in actual]} in the cluster model, or other "
                                "links, coordinates or constraint Jacobians)")
    d = header["problem"]
    if d.get("name") not in ("loop_forward_dynamics", "loop_inverse_dynamics"):
        raise PlanMismatchError(f"{path}: a plan of {d.get('name')!r}, not of a cluster model's dynamics")
    make = loop_forward_dynamics if d["name"] == "loop_forward_dynamics" else loop_inverse_dynamics
    return bind_plan(path, LoopPlan, lambda: make(cluster_model, f_ext=list(d.get("fx_links", []))),
                     header, arrays)


class LoopResult(Result):
    """Result of a LoopPlan: result["ydd"] (B, ny) independent accelerations; result["qdd"]
    (B, nv) spanning; result["lambda"] (B, nc) every loop's constraint forces (cluster by cluster,
    ClusterModel.constraint_rows) or result["lambda", cluster name] (B, n_c) one cluster's;
    result["tau"] the spanning joint forces tau_s + K^T lambda; result["a", link] etc. as Result."""

    def __init__(self, plan, x, single, tau_y=None):
        super().__init__(plan, x, single)
        self._tau_y = tau_y

    def __getitem__(self, key):
        cm = self._plan.cluster_model
        if key == "tau_y":
            if self._tau_y is None:
                raise KeyError("tau_y: forward dynamics takes the independent torques; "
                               "loop_inverse_dynamics computes them")
            return unbatch(self._tau_y, self._single)
        if key == "ydd":
            return unbatch(self._joint_space("qdd")[:, cm.independent_v], self._single)
        if key == "lambda":
            return unbatch(self.vector[:, self._plan.system.n_tree_cols:], self._single)
        if isinstance(key, tuple) and len(key) == 2 and key[0] == "lambda":
            k = cm.cluster_index(key[1])            # KeyError naming an unknown cluster
            return unbatch(self.vector[:, self._plan.system.lambda_slice(k)], self._single)
        return super().__getitem__(key)

    def __iter__(self):
        if self._tau_y is not None:
            yield "tau_y"
        yield "ydd"
        yield "lambda"
        yield from super().__iter__()

    def __len__(self):
        return 2 + (self._tau_y is not None) + super().__len__()


LOADERS.append((ClusterModel, load_loop_plan))
