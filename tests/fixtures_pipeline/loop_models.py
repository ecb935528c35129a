"""Models whose whole fix needs the loop over export *and* verification, or whose refusals
repeat one wrapper message for different equations. Each is the small core of a real architecture."""

from __future__ import annotations

import jax.numpy as jnp


def window_partition(x):
    """Swin's window partition, 7x7 windows: exports on stock JAX and fails natively unless 7 divides
    ``h`` and ``w`` (the fix a person writes: ``b, 7*h, 7*w, c``)."""
    b, h, w, c = x.shape
    x = x.reshape(b, h // 7, 7, w // 7, 7, c)
    return x.transpose(0, 1, 3, 2, 4, 5).reshape(-1, 7 * 7, c).mean(axis=1)


POS_GRID = jnp.arange(16 * 16 * 4, dtype=jnp.float32).reshape(16, 16, 4) / 100.0


def vit_grid(x):
    """A ViT's 8x8 patches by reshape, a learned 16x16 grid of positions sliced to the patch grid: the
    export needs the grid bounded, the native run needs 8 to divide ``h`` and ``w``."""
    b, h, w, c = x.shape
    p, q = h // 8, w // 8
    x = x.reshape(b, p, 8, q, 8, c).transpose(0, 1, 3, 2, 4, 5).reshape(b, p, q, 64 * c)[..., :4]
    return x + POS_GRID[:p, :q]


TABLE_T = jnp.ones((64, 4))
TABLE_U = jnp.ones((32, 4))


def encoder_decoder(x, y):
    """Two position tables (an encoder's ``t``, a decoder's ``u``) behind a wrapper that says the same
    thing for every shape error, as frameworks do."""
    try:
        a = x + TABLE_T[: x.shape[0]]
        b = y + TABLE_U[: y.shape[0]]
    except Exception as err:
        raise ValueError("the model could not be built for these shapes") from err
    return a.sum() + b.sum()


POS_64 = jnp.ones((64, 4))


def patch_tokens(x):
    """Tokens of 8x8 patches with a table of 64 positions: the bound is on the product of the grid,
    ``floordiv(h, 8)*floordiv(w, 8) <= 64``, which stock JAX cannot use."""
    b, h, w = x.shape
    tokens = x[:, : (h // 8) * 8, : (w // 8) * 8].reshape(b, (h // 8) * (w // 8), 64)[..., :4]
    return tokens + POS_64[: (h // 8) * (w // 8)]


def patch_pool(x):
    """``patch_tokens`` then the mean over the patches (a ViT's pooled head): below 8x8 no patch is left
    and the output, of the right shape, is NaN. ``h <= 7`` settles the export and computes on nothing."""
    return patch_tokens(x).mean(axis=1)


PATCH_KERNEL = jnp.ones((16, 16, 3, 8)) / 100.0  # HWIO
POS_197 = jnp.ones((197, 8)) / 10.0  # a class token and a 14x14 grid of positions, learned for 224x224 images
CLS = jnp.zeros((1, 1, 8))


def clip_embed(x):
    """CLIP's (and DINOv2's, ViT's) patch embedding: a strided 16x16 conv, a class token, and a learned
    table of 197 positions added whole. The grid must be 14x14: ``h, w`` in 224..239, which no constraint
    JAX accepts says; the person fixes the image size (``b, 224, 224, 3``)."""
    import jax

    y = jax.lax.conv_general_dilated(x, PATCH_KERNEL, (16, 16), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    b, p, q, c = y.shape
    t = jnp.concatenate([jnp.broadcast_to(CLS, (b, 1, c)), y.reshape(b, p * q, c)], axis=1)
    return (t + POS_197).mean(axis=1)


def grid_tokens(x):
    """A token grid's side from its length, ``int(math.sqrt(n))`` (a Python number from a dimension: no
    constraint or rewrite makes a symbolic dimension one). The fix: ``n`` fixed where it runs natively."""
    import math

    b, n, c = x.shape
    s = int(math.sqrt(n))
    return x.reshape(b, s, s, c).mean(axis=(1, 2))


def patch_merging(x):
    """Swin's patch merging: the user's own ``assert H % 2 == 0`` on a symbolic shape (the fix: ``2*h``)."""
    b, h, w, c = x.shape
    assert h % 2 == 0 and w % 2 == 0, f"input size ({h}*{w}) is not even"
    x = x.reshape(b, h // 2, 2, w // 2, 2, c)
    return x.transpose(0, 1, 3, 2, 4, 5).reshape(b, h // 2, w // 2, 4 * c)


def make_token_mixer():
    """An MLP-Mixer's token mixing with flax linen: a ``Dense`` over the patch axis, whose width is fixed
    when the parameters are made (64 patches): flax raises ``ScopeParamShapeError`` for any other grid."""
    import flax.linen as nn
    import jax

    class TokenMixer(nn.Module):
        @nn.compact
        def __call__(self, x):  # (b, p, q, c): p*q patches of c channels
            b, p, q, c = x.shape
            y = x.reshape(b, p * q, c).transpose(0, 2, 1)
            return nn.Dense(p * q)(y).transpose(0, 2, 1)

    model = TokenMixer()
    params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 8, 8, 4)))

    def token_mixer(x):
        return model.apply(params, x)

    return token_mixer


def inner_pair(x, y):
    """A user's ``assert`` that two input dimensions are equal (the person reuses one name in both specs)."""
    assert x.shape[1] == y.shape[0], "inner dimensions differ"
    return jnp.concatenate([x, y.T], axis=0).sum()


def make_overlap_add(win: int, hop: int):
    """A denoiser's skeleton: frame the signal with a window and a hop, overlap-add the frames back, add
    to the input (a residual). The overlap-add's length, ``hop*max(0, floordiv(n - win, hop) + 1) + win -
    hop``, must equal the input's ``n``: an equation with ``n`` on both sides (the fix a person writes:
    ``b, hop*k + win - hop``, ``k`` frames)."""

    def frame(x):
        nf = (x.shape[-1] - win) // hop + 1
        idx = jnp.arange(nf)[:, None] * hop + jnp.arange(win)[None, :]
        return x[..., idx]

    def overlap_add(fr):
        b, nf, w = fr.shape
        idx = (jnp.arange(nf)[:, None] * hop + jnp.arange(w)[None, :]).reshape(-1)
        return jnp.zeros((b, (nf - 1) * hop + w), fr.dtype).at[:, idx].add(fr.reshape(b, -1))

    def denoise(x):
        return x + 0.5 * overlap_add(frame(x) * jnp.hanning(win).astype(x.dtype))

    denoise.__name__ = f"overlap_add_{win}_{hop}"
    return denoise


def pad_to_blocks(x):
    """Pad to a multiple of 16, normalise per block, add back to the input: the padded length meets the
    input's (``n == 16*floordiv(n + 15, 16)`` in JAX's words; the fix: ``b, 16*k``)."""
    b, n = x.shape
    y = jnp.pad(x, ((0, 0), (0, (-n) % 16))).reshape(b, -1, 16)
    return x + (y - y.mean(-1, keepdims=True)).reshape(b, -1)


POS_16 = jnp.arange(16 * 8, dtype=jnp.float32).reshape(16, 8) / 100.0


def branchy_positions(x):
    """A DINOv2-style position table: used as learned for 4x4 patches of a square image, "interpolated"
    (here: averaged) for any other grid. The ``if`` on the patch count is False for every symbolic size,
    so only a family with the image size fixed at the example reproduces the program there."""
    b, h, w = x.shape
    p = (h // 4) * (w // 4)
    tokens = x.reshape(b, h // 4, 4, w // 4, 4).mean((2, 4)).reshape(b, p, 1)
    if p == 16 and h == w:
        pos = POS_16
    else:
        pos = jnp.broadcast_to(POS_16.mean(0), (p, 8))
    return tokens + pos


POS_TABLE_64 = jnp.linspace(0.0, 1.0, 64 * 8, dtype=jnp.float32).reshape(64, 8)


def learned_positions(x):
    """A BERT-style encoder's learned table of 64 positions, looked up with ``jnp.take`` (out-of-range rows
    are filled with NaN, not refused), then attention, which spreads a NaN row over every output: past
    64 the program runs and computes NaN everywhere (the person's fix: ``t <= 64``)."""
    t = x.shape[1]
    h = x + jnp.take(POS_TABLE_64, jnp.arange(t), axis=0)
    att = jnp.exp(h @ h.transpose(0, 2, 1) / 8.0)
    return (att / att.sum(-1, keepdims=True)) @ h
