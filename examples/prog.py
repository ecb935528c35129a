import sys  # the `smtdims run` example of docs/cli.md: tests/docs/test_readme.py runs its transcript

from jax import ShapeDtypeStruct, export, jit, lax


def slice16(x): return lax.slice_in_dim(x, 0, 16)  # line 6: 'b' >= '16' is inconclusive


print("argv:", sys.argv)
b, = export.symbolic_shape("b")
mod3 = jit(lambda x: lax.slice_in_dim(x, 0, x.shape[0] % 3))
print(export.export(mod3)(ShapeDtypeStruct((b,), "int32")).out_avals)  # provable with smtdims
try:
    export.export(jit(slice16))(ShapeDtypeStruct((b,), "int32"))
except Exception as e:
    print("inconclusive:", type(e).__name__)
sys.exit(int(sys.argv[1]))
