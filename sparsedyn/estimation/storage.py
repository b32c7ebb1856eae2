"""Estimation plans on disk (issue #17 item 5): EstimationPlan.save(path) writes, and
estimation/loading.load_estimation_plan(path, model) reads, versioned .npz files like the dynamics plans'
(problems/plan.py): no pickles, the model's fingerprint checked, every stored array checked
before a kernel indexes with it.

Stored: the problem (its sensors as the spec's {"type", constructor arguments}, estimation/
logs.py), the options (method, covariances, orderings, per_sample) and the offline results that
cost planning time: the exact route's LU plan, the MAP normal form's chain program
(planner/chain_ldlt.py) or the augmented form's LU plan of K and its refinement steps.
Rebuilt on load: the problem's pattern and constants (and compared with the stored ones through
the programs' own checks), the reference route (NormalEquations, CHOLMOD's analysis) and the
sensor assembly program. Before a loaded plan is returned, its compiled route is run on two
seeded test states and must reproduce the reference route there: a program edited within range
(an operand, a constant) behind valid checksums is refused.
"""
from __future__ import annotations

import json

import numpy as np

from ..files import atomic_write
from ..ir.chain_program import PRIOR_ROWS, ChainArrays, ChainProgram
from ..problems.plan import model_summary
from ..serialization import stored_array, to_plain
from .spec import sensor_specs

FORMAT = "sparsedyn-estimation-plan"
#: 2: the chain program's probe has a second step (probe_end, y_slot, PRIOR_ROWS' "J"); a
#: version-1 program loads without it (its poorly conditioned states take the reference route)
VERSION = 2
#: a loaded compiled route must match the reference route on its test states to this (relative)
CHECK_TOL = 1e-8

_CHAIN_INTS = ("n_slots", "one", "factor_end", "solve_end", "resid_end", "probe_end", "nnz_L")
_CHAIN_SLOTS = ("entry_slot", "row_slot", "x_slot", "d_slot", "nkk_slot", "z_slot", "y_slot")


def save_estimation_plan(plan, path):
    """Write `plan` (an EstimationPlan) to a versioned .npz file, atomically."""
    route = plan.compiled
    arrays = {}
    stored = {}
    if plan.method == "exact":
        stored["lu"] = to_plain(plan.reference.factorization.to_dict(), arrays, "lu")
    elif route is not None and route.form == "normal":
        prog = route.program
        stored["chains"] = to_plain(
            {**prog.chains._asdict(), **{k: getattr(prog, k) for k in _CHAIN_SLOTS},
             "prior_slot": prog.prior_slot, **{k: int(getattr(prog, k)) for k in _CHAIN_INTS},
             "flops": {k: int(v) for k, v in prog.flops.items()}}, arrays, "chains")
    elif route is not None:
        stored["K"] = to_plain(route.factorization.to_dict(), arrays, "K")
        stored["refine"] = int(route.refine)
    options = {"method": plan.method, "covariances": _plain_covariances(plan._covariances),
               "per_sample": bool(plan.per_sample), "compiled": route is not None,
               "map_backend": getattr(plan.reference, "backend", None),
               "ordering": getattr(route, "ordering", None),
               "form": getattr(route, "form", None), "costs": getattr(route, "costs", None)}
    problem = plan.problem
    header = {"format": FORMAT, "version": VERSION, "model": model_summary(plan.model),
              "sensors": sensor_specs(problem.sensors),
              "unknown_wrenches": list(problem.unknown_wrenches), "options": options,
              "stored": stored}
    with atomic_write(path, "wb") as fh:
        np.savez_compressed(fh, header=np.array(json.dumps(header)), **arrays)


def _plain_covariances(cov):
    """Covariances as JSON values (arrays as lists)."""
    if cov is None:
        return None
    out = {}
    for key, value in cov.items():
        if isinstance(value, dict):
            out[key] = {k: np.asarray(v, dtype=float).tolist() for k, v in value.items()}
        else:
            out[key] = np.asarray(value, dtype=float).tolist()
    return out


def chain_program(d, problem):
    """A ChainProgram from its stored dict, every index checked against the slot count and the
    problem's sizes (a corrupt index must never reach a kernel)."""
    m, n = problem.shape
    n_slots = int(d["n_slots"])
    chains = ChainArrays(**{f: stored_array(d, f, "float" if f in ("ins_c0", "pc") else "int")
                            for f in ChainArrays._fields})
    sizes = {"entry_slot": problem.pattern.nnz, "row_slot": m, "x_slot": n, "d_slot": n,
             "nkk_slot": n, "z_slot": n, "y_slot": n}
    ins = [getattr(chains, f) for f in ("ins_t", "ins_src", "ins_mid", "ins_t2", "ins_r2")]
    n_ins, n_pairs = chains.ins_t.size, chains.pa.size
    prior = stored_array(d, "prior_slot", "int", ndim=2)
    if "probe_end" not in d:            # version 1: no second step (its y_slot never read)
        d = {**d, "probe_end": n_ins, "y_slot": np.full(n, -1, dtype=np.int64)}
        prior = np.vstack((prior, np.full((1, prior.shape[1]), -1, dtype=np.int64)))
    slots = {k: stored_array(d, k, "int") for k in _CHAIN_SLOTS}
    ok = (all(a.size == n_ins for a in ins + [chains.ins_c0, chains.ins_row, chains.ins_q,
                                               chains.ins_k, chains.ins_kmid, chains.ins_mode])
          and chains.pb.size == n_pairs and chains.pc.size == n_pairs
          and all(((a >= 0) & (a < n_slots)).all() for a in ins + [chains.pa, chains.pb])
          and ((chains.ins_q >= 0) & (chains.ins_k >= 0)
               & (chains.ins_q + chains.ins_k <= n_pairs)).all()
          and ((chains.ins_mode >= 0) & (chains.ins_mode <= 4)).all()
          # a product list writes k consecutive slots from its target
          and (chains.ins_t + np.where(chains.ins_mode == 4, chains.ins_k, 1) <= n_slots).all()
          and all(slots[k].size == size for k, size in sizes.items())
          and all(((s >= -1) & (s < n_slots)).all() for s in slots.values())
          and all((slots[k] >= 0).all() for k in _CHAIN_SLOTS[1:-1])
          and ((slots["y_slot"] >= 0).all() or int(d["probe_end"]) == n_ins)
          and prior.shape == (len(PRIOR_ROWS), n) and ((prior >= -1) & (prior < n_slots)).all()
          and 0 <= int(d["one"]) < n_slots
          and 0 <= int(d["factor_end"]) <= int(d["solve_end"]) <= int(d["resid_end"])
          <= int(d["probe_end"]) <= n_ins
          and np.isfinite(chains.ins_c0).all() and np.isfinite(chains.pc).all()
          and (np.diff(slots["x_slot"]) == 1).all())
    if not ok:
        raise ValueError("the stored chain program has indices out of range")
    return ChainProgram(n_slots=n_slots, one=int(d["one"]), chains=chains,
                        factor_end=int(d["factor_end"]), solve_end=int(d["solve_end"]),
                        resid_end=int(d["resid_end"]), probe_end=int(d["probe_end"]),
                        flops=dict(d["flops"]),
                        nnz_L=int(d["nnz_L"]), prior_slot=prior, **slots)


def check_route(plan, path, B=4, rng=12345):
    """Refuse a loaded plan whose compiled route does not reproduce the reference route on the
    states it does not flag among B seeded ones (random readings), or flags them all (a flagged
    state is re-solved by the reference route online: only unflagged answers need the check)."""
    if plan.compiled is None:
        return
    problem = plan.problem
    rng = np.random.default_rng(rng)
    q = problem.model.random_configuration(rng, batch=B)
    v = rng.normal(size=(B, problem.model.nv))
    readings = {s.name: rng.normal(size=(B, s.size)) for s in problem.sensors
                if s.default_reading is None}
    y = problem.rows.readings_vector(problem.check_readings(readings, B), B)
    with np.errstate(all="ignore"):
        if plan.method == "exact":
            _, x, flag = plan.compiled.run(q, v, y, full=True)
        else:
            x, flag = plan.compiled.run(q, v, y)
    values, rhs, _, _ = problem.assemble(q, v, readings)
    x_ref = plan._solve_reference(values, rhs, "nan", np.arange(B))[0]
    good = np.asarray(flag) == 0
    err = np.abs(x[good] - x_ref[good]).max(initial=np.inf if not good.any() else 0.0) / max(
        1.0, np.abs(x_ref).max())
    if not err <= CHECK_TOL:
        raise ValueError(f"{path}: corrupt estimation plan file (the stored program does not "
                         f"reproduce the reference route on a test state: difference "
                         f"{err:.3g}, flags {np.asarray(flag).tolist()})")
