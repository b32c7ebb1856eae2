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


class SensorError(SparsedynError, ValueError):
    """A sensor is declared on a link/joint the model does not have, or inconsistently, or its
    readings do not fit it (names the sensor)."""


class PivotBreakdownWarning(RuntimeWarning):
    """A static pivot was (numerically) zero for some states, or their backward error was poor:
    they were re-solved with partial pivoting (names the batch indices)."""


class SingularStateWarning(RuntimeWarning):
    """Some states of an estimation batch are not determined by the measurements (names them)."""


class ModelWarning(UserWarning):
    """A robot description loads but has a defect worth knowing (names the element), e.g. a link
    inertia that is not physically valid; `load_urdf(..., strict=True)` raises ModelError instead."""


class NonFiniteError(SparsedynError, ValueError, ArithmeticError):
    """A result (or an intermediate such as D(q) and b(q, v)) is not finite for finite inputs:
    they are too large for double precision (e.g. velocities of 1e155 square to inf).

    Every public dynamics path raises it instead of returning inf/NaN: the recursive algorithms
    (rnea, aba, crba, ...), delassus, compiled plans (both backends) and loop plans. Attributes:
    `arguments`, the inputs' names ordered by their largest magnitude over the offending states
    (the first is the likeliest culprit), and `batch_indices`, the offending batch elements. A
    ValueError (the inputs are out of range) and an ArithmeticError (an overflow), so that
    either kind of handler catches it."""

    def __init__(self, message, arguments=(), batch_indices=()):
        super().__init__(message)
        self.arguments = tuple(arguments)
        self.batch_indices = tuple(batch_indices)


def check_finite(result, function, inputs, output="the result"):
    """`result` (B, ...) unchanged if finite, else NonFiniteError naming `function`, the batch
    elements whose `output` is not finite and `inputs` ({name: (B, ...) array or None}, the
    call's batched inputs) by their largest magnitude over those elements."""
    import numpy as np
    result = np.asarray(result)
    finite = np.isfinite(result)
    if finite.all():
        return result
    bad = np.flatnonzero(~finite.reshape(result.shape[0], -1).all(axis=1)).tolist()
    raise nonfinite_error(function, output, bad, inputs)


def check_assembled(function, what, inputs, *arrays, indices=None):
    """NonFiniteError of `function` naming `what` (e.g. "D(q) or b(q, v)") if a row of any of
    the assembled (B, ...) arrays is not finite; indices: the batch index of each row (default
    0..B-1); inputs as check_finite's."""
    import numpy as np
    finite = np.logical_and.reduce([np.isfinite(a).reshape(a.shape[0], -1).all(axis=1)
                                    for a in arrays])
    if not finite.all():
        rows = np.flatnonzero(~finite)
        bad = (rows if indices is None else np.asarray(indices)[rows]).tolist()
        raise nonfinite_error(function, what, bad, inputs)


def nonfinite_error(function, output, batch_indices, inputs):
    """The NonFiniteError of `function` whose `output` overflows at `batch_indices` (see
    check_finite for `inputs`)."""
    import numpy as np
    sizes = {}
    for name, arr in inputs.items():
        if arr is not None:
            a = np.abs(np.asarray(arr, dtype=float)[batch_indices])
            sizes[name] = float(a.max()) if a.size else 0.0
    names = sorted(sizes, key=lambda k: -sizes[k])
    listed = ", ".join(f"{k} {sizes[k]:.3g}" for k in names)
    head = ", ".join(str(i) for i in batch_indices[:20])
    more = ", ..." if len(batch_indices) > 20 else ""
    return NonFiniteError(
        f"{function}: {output} is not finite (overflow) at batch indices [{head}{more}] "
        f"({len(batch_indices)} states): the inputs there are too large for double precision "
        f"(largest magnitudes: {listed})", arguments=names, batch_indices=batch_indices)
