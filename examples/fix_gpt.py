"""A GPT's learned position table sliced to the sequence length: the export fails on stock JAX;
``export_and_verify(..., fix=True)`` finds the fix a person writes (``t <= 512``) and verifies it.

    python examples/fix_gpt.py
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import export
from smtdims_jax.pipeline import export_and_verify

rng = np.random.default_rng(0)
tok_emb = jnp.asarray(rng.standard_normal((1000, 32)), jnp.float32)  # vocabulary 1000, width 32
pos_emb = jnp.asarray(rng.standard_normal((512, 32)), jnp.float32)  # at most 512 positions


def gpt_embed(tokens):  # nanoGPT's forward, first lines: tok_emb(idx) + pos_emb(arange(t))
    t = tokens.shape[1]
    return tok_emb[tokens] + pos_emb[:t]


if __name__ == "__main__":
    try:
        spec = jax.ShapeDtypeStruct(export.symbolic_shape("b, t"), jnp.int32)
        export.export(jax.jit(gpt_embed))(spec)
    except Exception as err:  # noqa: BLE001 - stock JAX refuses it; show why
        print(f"stock: {type(err).__name__}: {str(err).splitlines()[0]}")
    report = export_and_verify(gpt_embed, "int32[b, t]", fix=True, samples=4)
    print("\n".join(report.fix.lines()[-12:]))
