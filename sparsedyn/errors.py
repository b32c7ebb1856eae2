"""Typed errors. Every message names the offending element (link, joint, sensor, argument)."""


class SparsedynError(Exception):
    """Base class of every error sparsedyn raises on purpose."""


class ModelError(SparsedynError, ValueError):
    """A robot description is malformed or physically inconsistent (names the element)."""


class SingularModelError(SparsedynError, ArithmeticError):
    """The joint-space inertia matrix is singular for this model/state (names the bodies)."""

    def __init__(self, message, bodies=(), batch_indices=()):
        super().__init__(message)
        self.bodies = tuple(bodies)
        self.batch_indices = tuple(batch_indices)


class IllPosedError(SparsedynError, ValueError):
    """A measurement set does not determine the requested variables (names them)."""

    def __init__(self, message, variables=()):
        super().__init__(message)
        self.variables = tuple(variables)


class PlanMismatchError(SparsedynError, ValueError):
    """A stored plan was loaded against a model (or problem) it was not compiled for."""
