"""Cluster-based recursive algorithms for systems with local kinematic loops (seed 003) and the
baselines they are compared with (projected RNEA, projection method, Lagrange multipliers,
approximate reflected-inertia variants)."""
from .c_aba import c_aba
from .c_efpa import c_efpa
from .c_rnea import c_rnea

__all__ = ["c_rnea", "c_aba", "c_efpa"]
from .baselines import (approximate_aba, approximate_efpa, approximate_rnea, lagrange_fd, projected_rnea, projection_fd,
                        projection_inverse_osim, reflected_inertia_model)

__all__ += ["projected_rnea", "projection_fd", "lagrange_fd", "projection_inverse_osim",
            "reflected_inertia_model", "approximate_rnea", "approximate_aba", "approximate_efpa"]
