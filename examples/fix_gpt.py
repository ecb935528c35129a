"""A GPT written with flax nnx whose learned position table is sliced to the sequence length: the
export fails on stock JAX; ``export_and_verify(..., fix=True)`` finds the fix a person writes
(``t <= 512``), re-exports with it and verifies it end to end.

    pip install flax        # flax is not a dependency of smtdims (the test extra has it)
    python examples/fix_gpt.py
"""

import time

import jax
import jax.numpy as jnp
from flax import nnx
from jax import export
from smtdims_jax.pipeline import export_and_verify


class GPTEmbedding(nnx.Module):
    """nanoGPT's first lines: tok_emb(idx) + pos_emb(arange(t)), then the output head."""

    def __init__(self, vocab: int, width: int, max_len: int, rngs: nnx.Rngs):
        self.tok = nnx.Embed(vocab, width, rngs=rngs)
        self.pos = nnx.Embed(max_len, width, rngs=rngs)  # at most max_len positions
        self.head = nnx.Linear(width, vocab, rngs=rngs)

    def __call__(self, tokens):
        t = tokens.shape[1]
        return self.head(self.tok(tokens) + self.pos.embedding[...][:t])


model = GPTEmbedding(vocab=1000, width=32, max_len=512, rngs=nnx.Rngs(0))


def gpt(tokens):
    return model(tokens)


if __name__ == "__main__":
    try:
        export.export(jax.jit(gpt))(jax.ShapeDtypeStruct(export.symbolic_shape("b, t"), jnp.int32))
    except Exception as err:  # noqa: BLE001 - stock JAX refuses it; show why
        print(f"stock: {type(err).__name__}: {str(err).splitlines()[0]}")
    t0 = time.perf_counter()
    report = export_and_verify(gpt, "int32[b, t]", fix=True, samples=4)
    seconds = time.perf_counter() - t0
    fix = report.fix
    print(report.table().splitlines()[1])  # FIXED: ... (verified end to end)
    print(f"  {fix.command()}")
    for env, runs, admitted in fix.extremes:
        print(f"  t = {env['t']}: {'admitted' if admitted else 'refused'}, {'runs' if runs else 'fails'} natively")
    print(f"  {fix.box.sentence('gpt')}")
    print(f"  found, verified and measured in {seconds:.1f}s ({fix.box.traces} native traces of gpt)")
