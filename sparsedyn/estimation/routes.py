"""What the compiled estimation routes share: a generated-C twin built on first use."""
from __future__ import annotations


class CompiledRoute:
    """A compiled online route (numba) whose program also runs as generated C: on_backend("c")
    builds the twin once (`_c_twin`, the subclass's), on_backend("numba") is the route itself."""

    _c = None

    def on_backend(self, name):
        if name == "numba":
            return self
        if self._c is None:
            self._c = self._c_twin()
        return self._c

    def _c_twin(self):
        raise NotImplementedError(f"backend 'c': {type(self).__name__} has no C form")
