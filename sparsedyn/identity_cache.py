"""Values computed once per tuple of immutable objects (a model, its resolved contacts, a
program), found again by the objects' identity: cheaper than hashing their contents."""
from __future__ import annotations


class IdentityCache:
    """At most `size` entries (all dropped when full). An entry holds its objects, so their ids
    stay unique while it lives: a hit is exact."""

    def __init__(self, size=256):
        self.size = size
        self._entries = {}

    def get(self, objects):
        """The value stored for these objects, or None."""
        hit = self._entries.get(tuple(map(id, objects)))
        return None if hit is None else hit[1]

    def put(self, objects, value):
        """Store value for these objects; returns it."""
        if len(self._entries) >= self.size:
            self._entries.clear()
        self._entries[tuple(map(id, objects))] = (tuple(objects), value)
        return value
