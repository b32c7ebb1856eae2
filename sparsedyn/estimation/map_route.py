"""The compiled MAP route of an estimation plan: the normal form (compiled_map.CompiledMAP,
N = A^T W A + P) or the augmented quasi-definite form (compiled_augmented.AugmentedMAP), chosen by
counted flops per state among those that match the reference offline."""
from __future__ import annotations

from .compiled_augmented import AugmentedMAP, AugmentedUnavailable
from .compiled_map import CompiledMAP

MAP_FORMS = ("auto", "normal", "augmented")


def compiled_map(problem, reference, ordering="amd", form="auto", per_sample=False):
    """The compiled MAP route of `form`: "normal" (CompiledMAP, N = A^T W A + P), "augmented"
    (compiled_augmented.AugmentedMAP, the quasi-definite K), or "auto": the one with fewer counted
    flops per state among those that match the reference offline. The choice and both costs are
    in the route's stats (map_form, map_cost_normal, map_cost_augmented)."""
    if form not in MAP_FORMS:
        raise ValueError(f"map_form: expected one of {MAP_FORMS}, got {form!r}")
    routes, costs = {}, {}
    if form in ("auto", "normal"):
        routes["normal"] = CompiledMAP(problem, reference, ordering=ordering,
                                       per_sample=per_sample)
    if form in ("auto", "augmented") and not per_sample:
        try:
            routes["augmented"] = AugmentedMAP(problem, reference, ordering=ordering,
                                               assembly=getattr(routes.get("normal"), "assembly",
                                                                None))
        except AugmentedUnavailable:
            if form == "augmented":
                raise
    for name, route in routes.items():
        costs[name] = route.cost
    chosen = min(costs, key=costs.get)
    route = routes[chosen]
    route.form = chosen
    route.costs = {"map_cost_" + k: costs.get(k, -1) for k in MAP_FORMS[1:]}
    return route
