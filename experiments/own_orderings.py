"""The planner's choice restricted to the orderings sparsedyn implements itself, so that the
experiments' operation counts depend on sparsedyn's code alone.

`compile(..., ordering="auto")` also tries SciPy's SuperLU orderings (colamd, mmd_ata,
mmd_at_plus_a) and CHOLMOD's (amd, metis, nesdis; btf uses AMD inside its blocks), whose
permutations, and so the flop counts they lead to, can change with those libraries' versions.
The experiments therefore report the cheapest of sparsedyn's own orderings (natural, rcm,
min_degree, markowitz, and the system's structural orders such as Nori's ABA order), chosen by
the planner's own rule (online flops plus the per-state backward-error check, then nnz(LU),
then untrusted before trusted), next to what "auto" picks in this installation where useful.
"""
from __future__ import annotations

from sparsedyn.ir.lu_program import TRUSTED
from sparsedyn.planner.orderings import KNOWN_ORDERINGS

#: orderings computed by sparsedyn.planner.orderings itself (every tie broken by index)
OWN = ("natural", "rcm", "min_degree", "markowitz")


def is_own(name):
    """Whether the ordering `name` is computed by sparsedyn alone (a built-in of OWN or a
    structural order of the system, e.g. "aba", "rnea")."""
    return name in OWN or name not in KNOWN_ORDERINGS


def own_best(table):
    """The table row (Factorization.table) the planner would pick among sparsedyn's own
    orderings: same key as plan_factorization's "auto"."""
    usable = [r for r in table if r["pivot_safe"] and is_own(r["name"])]
    return min(usable, key=lambda r: (r["flops"] + r["check_flops"], r["nnz_LU"],
                                      r["note"].startswith(TRUSTED)))


def third_party_versions():
    """The versions of the libraries whose orderings (SciPy's SuperLU, CHOLMOD through
    scikit-sparse) and bipartite matching (SciPy's min_weight_full_bipartite_matching, whose
    choice among equally cheap matchings decides the own orderings' counts on the loop systems)
    the version-dependent columns come from; written into the outputs so that a test compares
    those columns only in the same installation."""
    from importlib.metadata import PackageNotFoundError, version

    def v(dist):
        try:
            return version(dist)
        except PackageNotFoundError:
            return "absent"
    return f"scipy {v('scipy')}, scikit-sparse {v('scikit-sparse')}"


def versions_line():
    return f"Version-dependent columns computed with: {third_party_versions()}."
