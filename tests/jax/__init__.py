"""The JAX plugin below the pipeline: the seam and install, conversion, equality, the drop-in, the audit,
``pytest --smtdims``."""
