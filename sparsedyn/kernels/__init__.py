"""Online kernels: batched static-pivot sparse LU programs (NumPy and numba backends) and a
CHOLMOD wrapper for SPD systems with a stored symbolic analysis."""
from .cholesky import SparseCholesky
from .lu_numba import solve_numba
from .lu_numpy import schedule, solve_numpy

__all__ = ["SparseCholesky", "solve_numba", "solve_numpy", "schedule"]
