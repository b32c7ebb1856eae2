"""Nori's Newton-Euler block system D(q) d + b(q, qd) = 0 (seed 001, Sec. III) through a fixed
worst-case sparsity pattern: named blocks (blocks.py), the structural pattern (pattern.py) and
batched assembly (assemble.py); parts combined on one pattern (combine.py), e.g. the loop-closure
rows of loop_rows.py; the residual's derivatives along q and v (tangent.py), for the derivatives
of the dynamics."""
from .assemble import NewtonEulerSystem
from .blocks import CONSTRAINT_KINDS, VARIABLE_KINDS, Block, BlockLayout, aba_order, rnea_order
from .combine import CombinedPattern, combine_parts
from .loop_rows import LoopSystem
from .pattern import STRUCTURAL_TOLERANCE, SystemPattern, transform_coefficients, transform_structure

__all__ = ["NewtonEulerSystem", "Block", "BlockLayout", "VARIABLE_KINDS", "CONSTRAINT_KINDS",
           "rnea_order", "aba_order", "SystemPattern", "transform_structure",
           "transform_coefficients", "STRUCTURAL_TOLERANCE", "combine_parts", "CombinedPattern",
           "LoopSystem"]
