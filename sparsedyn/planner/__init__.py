"""Offline planner: orderings, symbolic static-pivot LU, and the stored Factorization plan."""
from .factorization import TRUSTED, Factorization, PivotBreakdownWarning, plan_factorization
from .orderings import KNOWN_ORDERINGS

__all__ = ["plan_factorization", "Factorization", "PivotBreakdownWarning", "KNOWN_ORDERINGS", "TRUSTED"]
