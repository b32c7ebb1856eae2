"""Recursive baselines, one algorithm per file (Featherstone's spatial_v2 layout)."""
from .aba import aba
from .crba import crba
from .rnea import rnea

__all__ = ["rnea", "aba", "crba"]
