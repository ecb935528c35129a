"""A key whose hash always collides, for tests of how lookups compare symbolic dimensions."""

from __future__ import annotations


class CollidingKey:
    """Every lookup of this key compares it with ``==`` against each stored key, as JAX's C++
    caches do whenever part of two hashes agrees (which depends on the per-process hash seed)."""

    def __init__(self, shape):
        self.shape = shape

    def __hash__(self):
        return 0

    def __eq__(self, other):
        return self.shape == other.shape
