"""Side-by-side benchmarks: stock JAX vs smtdims (see benchmarks/README.md)."""
