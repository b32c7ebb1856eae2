"""What the compiled estimation routes share: a generated-C twin built on first use."""
from __future__ import annotations


class CompiledRoute:
    """A compiled online route (numba) whose program also runs as generated C: on_backend("c")
    builds the twin once (`_c_twin`, the subclass's), on_backend("numba") is the route itself."""

    _c = None
    #: the kernels' family (sparsedyn/jit.py FAMILIES)
    JIT_KEY = None

    def on_backend(self, name):
        if name == "numba":
            return self
        if self._c is None:
            self._c = self._c_twin()
        return self._c

    def ready(self):
        """True if the numba route runs without a JIT compile now; else False, its compile
        started in the background (sparsedyn/jit.py): backend="auto" answers on NumPy meanwhile."""
        from .. import jit
        return jit.ready(self.JIT_KEY, self.jit_entry_points())

    def _c_twin(self):
        raise NotImplementedError(f"backend 'c': {type(self).__name__} has no C form")
