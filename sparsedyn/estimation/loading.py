"""load_estimation_plan(path, model): an EstimationPlan from a file written by
EstimationPlan.save (the format and the checks: estimation/storage.py)."""
from __future__ import annotations

from ..errors import PlanMismatchError
from ..planner import Factorization
from ..problems.plan import model_differences, model_summary, read_plan_file
from ..serialization import from_plain
from .compiled_augmented import AugmentedMAP
from .compiled_map import CompiledMAP
from .plan import EstimationPlan
from .problem import EstimationProblem
from .solve_exact import ExactSolver
from .solve_map import MAPSolver
from .spec import sensors_from_specs
from .storage import FORMAT, VERSION, chain_program, check_route


def load_estimation_plan(path, model):
    """Read a plan written by EstimationPlan.save and bind it to `model`.

    Raises PlanMismatchError (naming what differs) for another model, ValueError for a file that
    is not a sparsedyn estimation plan, is corrupt or is from a newer version."""
    header, arrays = read_plan_file(path, FORMAT, VERSION, "sparsedyn estimation plan file")
    try:
        stored_model, options, stored = header["model"], header["options"], header["stored"]
        sensors, links = header["sensors"], header["unknown_wrenches"]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{path}: corrupt estimation plan file (missing {exc})") from None
    if not all(isinstance(x, t) for x, t in ((stored_model, dict), (options, dict),
                                             (stored, dict), (sensors, list), (links, list))):
        raise ValueError(f"{path}: corrupt estimation plan file (header entries of the wrong "
                         f"type)")
    differences = model_differences(stored_model, model_summary(model))
    if differences:
        raise PlanMismatchError(f"{path}: plan was compiled for another model: "
                                + "; ".join(differences))
    try:
        problem = EstimationProblem(model, sensors_from_specs(sensors), unknown_wrenches=links,
                                    unactuated_base=False)
        plan = _rebuild(problem, options, stored, arrays)
    except PlanMismatchError as exc:
        raise PlanMismatchError(f"{path}: {exc}") from None
    except (KeyError, ValueError, TypeError, IndexError, AssertionError, RecursionError) as exc:
        raise ValueError(f"{path}: corrupt estimation plan file ({type(exc).__name__}: "
                         f"{exc})") from None
    check_route(plan, path)
    return plan


def _rebuild(problem, options, stored, arrays):
    """The EstimationPlan of `problem` with the stored offline results (no planning)."""
    method, cov = options["method"], options["covariances"]
    per_sample, compiled = bool(options["per_sample"]), bool(options["compiled"])
    if method == "exact":
        fact = Factorization.from_dict(from_plain(stored["lu"], arrays))
        fact.verify_pattern(problem.pattern)
        reference = ExactSolver(problem, factorization=fact)
        route = reference.compiled(problem) if compiled else None
        return EstimationPlan(problem, reference, cov, compiled=route)
    reference = MAPSolver(problem, cov, method=method, backend=options["map_backend"])
    route = None
    if "chains" in stored:
        route = CompiledMAP(problem, reference, ordering=options["ordering"],
                            per_sample=per_sample,
                            program=chain_program(from_plain(stored["chains"], arrays), problem))
    elif "K" in stored:
        fact = Factorization.from_dict(from_plain(stored["K"], arrays))
        route = AugmentedMAP(problem, reference, ordering=options["ordering"],
                             refine=int(stored["refine"]), factorization=fact)
    if route is not None:
        route.form, route.costs = options["form"], dict(options["costs"] or {})
    return EstimationPlan(problem, reference, cov, compiled=route, per_sample=per_sample)
