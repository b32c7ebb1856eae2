"""The package's import graph has no cycle, between modules or between subpackages (imports
inside functions count: a lazy import only hides a cycle). Data flows one way: model -> system
-> ir -> planner / kernels -> backends -> problems -> estimation -> command line."""
import ast
import pathlib

import networkx as nx

import sparsedyn

ROOT = pathlib.Path(sparsedyn.__file__).parent


def _modules():
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = ("sparsedyn",) + path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def import_graph():
    """Module -> imported module of sparsedyn (an import of an ancestor package, which Python
    initialises first anyway, is not an edge)."""
    mods = _modules()
    G = nx.DiGraph()
    G.add_nodes_from(mods)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                targets = subs if len(subs) == len(node.names) else [target] + subs
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                if t in mods and t != name and not name.startswith(t + "."):
                    G.add_edge(name, t)
    return G


def _cycles(G):
    return [sorted(c) for c in nx.strongly_connected_components(G) if len(c) > 1]


def test_no_import_cycle_between_modules():
    G = import_graph()
    assert G.number_of_edges() > 100                    # the graph was read
    cycles = _cycles(G)
    assert not cycles, [nx.find_cycle(G.subgraph(c)) for c in cycles]


def test_no_import_cycle_between_subpackages():
    G = import_graph()
    top = (lambda m: ".".join(m.split(".")[:2]))
    H = nx.DiGraph((top(a), top(b)) for a, b in G.edges if top(a) != top(b))
    assert not _cycles(H), _cycles(H)
    # the layers the brief asks for: nothing below imports what is above it
    below = {"sparsedyn.ir": {"sparsedyn.problems", "sparsedyn.backends", "sparsedyn.kernels",
                              "sparsedyn.planner", "sparsedyn.estimation"},
             "sparsedyn.kernels": {"sparsedyn.problems", "sparsedyn.backends",
                                   "sparsedyn.estimation", "sparsedyn.system"},
             "sparsedyn.model": {"sparsedyn.system", "sparsedyn.ir", "sparsedyn.problems"}}
    for low, above in below.items():
        reached = nx.descendants(H, low) if low in H else set()
        assert not reached & above, (low, reached & above)


def test_a_cycle_is_detected():
    G = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])
    assert _cycles(G) == [["a", "b", "c"]]


def test_every_plan_kind_is_a_plan_base():
    """One plan protocol (sparsedyn.problems.base.PlanBase): every kind of compiled plan derives
    from it and answers problem, model, stats, solve and repr; the online arguments are checked
    by it, one way, naming the argument."""
    import numpy as np
    import pytest

    import sparsedyn as sd
    from sparsedyn.loops import four_bar
    from sparsedyn.models import HUMANOID_URDF, serial_chain
    from sparsedyn.problems.base import PlanBase
    from sparsedyn.problems.delassus_sparse import compile_delassus
    model = serial_chain(4)
    floating = sd.load_urdf(HUMANOID_URDF, floating_base=True)
    plans = [sd.compile(sd.forward_dynamics(model)), sd.compile(sd.mass_matrix(model)),
             sd.compile(sd.loop_forward_dynamics(four_bar())),
             sd.constrained_forward_dynamics(floating, [sd.Contact("l_sole")]),
             compile_delassus(model, [sd.Contact("link4", "3d")]),
             sd.compile_estimation(sd.EstimationProblem(model, [sd.sensors.JointTorques()]))]
    for plan in plans:
        assert isinstance(plan, PlanBase), type(plan)
        assert plan.model is not None and isinstance(plan.stats, dict) and repr(plan)
        with pytest.raises(ValueError, match="backend: expected one of"):
            plan.check_backend("cuda")
        with pytest.raises(ValueError, match="threads: expected an integer"):
            plan.threads_for(0, 10)
    assert plans[0].threads_for(None, 1) == 1
    assert np.array_equal(plans[4].solve(np.zeros(4)), plans[4](np.zeros(4)))
