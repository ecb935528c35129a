"""Two small flax nnx models for the accelerator check (``scripts/accelerator_check.sh``), each with the
specification a person writes for it, verified with ``export_and_verify`` on the device JAX finds:

- ``gpt``: token and learned position embeddings (512 positions, sliced to the sequence), one causal
  attention block, the output head; ``int32[b, t]`` with ``t <= 512``;
- ``vit``: 8x8 patches by reshape, a learned 8x8 grid of position embeddings sliced to the patch grid,
  one attention block, a mean-pooled classifier; ``float32[b, 8*p, 8*q, 3]`` with ``p <= 8, q <= 8``.

    pip install flax                           # flax is not a dependency of smtdims (the test extra has it)
    python examples/accelerator_models.py      # verifies both here (CPU, or the TPU/GPU JAX finds)
"""

from __future__ import annotations

import functools

import jax
from flax import nnx

WIDTH, HEADS = 64, 4


class Block(nnx.Module):
    """Pre-norm attention and MLP: the matmuls a TPU runs at reduced precision by default."""

    def __init__(self, rngs: nnx.Rngs):
        self.norm1 = nnx.LayerNorm(WIDTH, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(HEADS, WIDTH, decode=False, rngs=rngs)
        self.norm2 = nnx.LayerNorm(WIDTH, rngs=rngs)
        self.up = nnx.Linear(WIDTH, 4 * WIDTH, rngs=rngs)
        self.down = nnx.Linear(4 * WIDTH, WIDTH, rngs=rngs)

    def __call__(self, x: jax.Array, mask: jax.Array | None = None) -> jax.Array:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, mask=mask)
        return x + self.down(jax.nn.gelu(self.up(self.norm2(x))))


class GPT(nnx.Module):
    def __init__(self, vocab: int, max_len: int, rngs: nnx.Rngs):
        self.tok = nnx.Embed(vocab, WIDTH, rngs=rngs)
        self.pos = nnx.Embed(max_len, WIDTH, rngs=rngs)
        self.block = Block(rngs)
        self.head = nnx.Linear(WIDTH, vocab, rngs=rngs)

    def __call__(self, ids: jax.Array) -> jax.Array:
        t = ids.shape[1]
        x = self.tok(ids) + self.pos.embedding[...][:t]
        mask = nnx.make_causal_mask(ids)
        return self.head(self.block(x, mask))


class ViT(nnx.Module):
    def __init__(self, patch: int, grid: int, classes: int, rngs: nnx.Rngs):
        self.patch = patch
        self.embed = nnx.Linear(patch * patch * 3, WIDTH, rngs=rngs)
        self.pos = nnx.Param(jax.random.normal(rngs.params(), (grid, grid, WIDTH)) * 0.02)
        self.block = Block(rngs)
        self.head = nnx.Linear(WIDTH, classes, rngs=rngs)

    def __call__(self, images: jax.Array) -> jax.Array:
        b, h, w, c = images.shape
        k = self.patch
        p, q = h // k, w // k
        x = images.reshape(b, p, k, q, k, c).transpose(0, 1, 3, 2, 4, 5).reshape(b, p * q, k * k * c)
        x = self.embed(x) + self.pos[...][:p, :q].reshape(p * q, WIDTH)
        return self.head(self.block(x).mean(axis=1))


@functools.cache
def _build() -> tuple[GPT, ViT]:
    return GPT(vocab=1000, max_len=512, rngs=nnx.Rngs(0)), ViT(patch=8, grid=8, classes=10, rngs=nnx.Rngs(1))


def _built() -> tuple[GPT, ViT]:
    """Built on first use, not at import (a program that imports this module before it decides where JAX
    runs, ``keep_off_accelerator``, has started no backend yet), and eagerly even when the first use is
    inside a trace: the parameters are arrays, not tracers."""
    with jax.ensure_compile_time_eval():
        return _build()


def gpt(ids: jax.Array) -> jax.Array:
    return _built()[0](ids)


def vit(images: jax.Array) -> jax.Array:
    return _built()[1](images)


# (function, arg specs, constraints): what a person exports each model with
MODELS = {
    "gpt": (gpt, ("int32[b, t]",), ("t <= 512",)),
    "vit": (vit, ("float32[b, 8*p, 8*q, 3]",), ("p <= 8", "q <= 8")),
}


if __name__ == "__main__":
    from smtdims_jax.pipeline import export_and_verify, keep_off_accelerator

    keep_off_accelerator()
    for fn, specs, constraints in MODELS.values():
        report = export_and_verify(fn, *specs, constraints=constraints, samples=4, progress=False)
        print(report.table())
        print()
