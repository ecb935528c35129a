"""The language: expressions (IR), the jax.export syntax, constraint sets, rendering, and the
answer values (Bounds, Decision) that rungs build and everything above reads."""
