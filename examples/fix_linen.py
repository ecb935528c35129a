"""A flax linen model before and after ``--fix``: an MLP-Mixer's token mixing, whose ``Dense`` over the
patch axis is made for an 8x8 grid of patches (64 tokens). Exported for any grid ``b, p, q, c``, flax
raises ``ScopeParamShapeError`` (the parameter is ``(64, 64)``, the grid asks for ``(p*q, p*q)``); the
fix loop reads the equation flax evaluated, ``p*q == 64``, exports with it and verifies it end to end.

    pip install flax        # flax is not a dependency of smtdims (the test extra has it)
    python examples/fix_linen.py
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax import export
from smtdims_jax.pipeline import export_and_verify


class TokenMixer(nn.Module):
    @nn.compact
    def __call__(self, x):  # (b, p, q, c): a p x q grid of patches, c channels each
        b, p, q, c = x.shape
        tokens = x.reshape(b, p * q, c).transpose(0, 2, 1)
        return nn.Dense(p * q)(tokens).transpose(0, 2, 1)


model = TokenMixer()
params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 8, 8, 4)))  # made for an 8x8 grid


def mixer(x):
    return model.apply(params, x)


if __name__ == "__main__":
    spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, p, q, 4"), jnp.float32)
    try:
        export.export(jax.jit(mixer))(spec)
    except Exception as err:  # noqa: BLE001 - stock JAX refuses it; show why
        print(f"before: {type(err).__name__}: {str(err).splitlines()[0]}")
    report = export_and_verify(mixer, "float32[b, p, q, 4]", fix=True, samples=4)
    print("after:", report.fix.status, "|", report.fix.cli())
    print(report.fix.report.verdict())  # the fixed specification, verified end to end
