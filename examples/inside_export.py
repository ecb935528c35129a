"""The "Inside jax.export" message of docs/api.md: an inconclusive comparison, with smtdims installed."""

import jax
from jax import errors, export, lax

import smtdims

smtdims.install()
b, = export.symbolic_shape("b")
try:
    export.export(jax.jit(lambda x: lax.slice_in_dim(x, 0, 16)))(jax.ShapeDtypeStruct((b,), "int32"))
except errors.InconclusiveDimensionOperation as e:  # the class existing handlers catch
    first, second = str(e).splitlines()[:2]
    print(first)
    print(second, "...")
