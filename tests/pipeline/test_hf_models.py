"""Hugging Face Flax models from small configs (random weights, no download), exported from one example
with ``dims="auto"`` and with a specification and ``--fix``: the family a person writes, verified.

Skipped where ``transformers`` (< 5: its Flax classes) is not installed; it is not in the ``test``
extra (it pulls in tokenizers and the hub client): ``pip install "transformers<5"`` runs these.
"""

from __future__ import annotations

import numpy as np
import pytest
from smtdims_jax.pipeline import export_and_verify

transformers = pytest.importorskip("transformers")


def _admits(avals, constraints, shapes) -> bool:
    """Whether the family admits these concrete shapes (some valuation of its variables)."""
    from smtdims_jax.pipeline.box import valuation_of

    from smtdims.lang.constraints import ConstraintSet
    from smtdims.lang.parser import parse_expr

    dims = tuple(tuple(parse_expr(d) for d in a.split("[", 1)[1].rstrip("]").split(",")) for a in avals)
    return valuation_of(dims, ConstraintSet.of(constraints), tuple(shapes), None) is not None


def _runs(fn, shape) -> bool:
    import jax

    try:
        jax.eval_shape(fn, jax.ShapeDtypeStruct(shape, np.float32))
        return True
    except Exception:  # noqa: BLE001 - the model refuses with several classes
        return False


def _build(make):
    try:
        return make()
    except Exception as err:  # noqa: BLE001 - this transformers' Flax classes do not build on this JAX
        pytest.skip(f"the model does not build here: {type(err).__name__}: {str(err)[:200]}")


def gpt2():
    cfg = transformers.GPT2Config(vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=2)
    model = transformers.FlaxGPT2Model(cfg, seed=0)

    def gpt2(ids):
        return model(ids, params=model.params).last_hidden_state
    return gpt2


def vit():
    cfg = transformers.ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, num_channels=3)
    model = transformers.FlaxViTModel(cfg, seed=0)

    def vit(pixels):
        return model(pixels, params=model.params).last_hidden_state
    return vit


def test_a_gpt2_decoder_gets_its_position_table_as_the_bound():
    fn = _build(gpt2)
    auto = export_and_verify(fn, np.zeros((2, 7), np.int32), dims="auto", samples=3)
    assert auto.ok, str(auto)
    assert auto.specs == ("int32[a, b]",) and auto.constraints == ("b <= 64",), str(auto)
    assert auto.table[1].kinds == ("at most 64",) and auto.table[1].cause
    report = export_and_verify(fn, "int32[b, t]", fix=True, samples=3)
    assert report.fix is not None and report.fix.ok and report.fix.constraints == ("t <= 64",), report.table()
    assert report.fix.extremes and all(admits == runs for _, runs, admits in report.fix.extremes)


def test_a_vit_encoder_gets_the_image_size_its_table_was_learned_for():
    fn = _build(vit)
    auto = export_and_verify(fn, np.zeros((2, 3, 32, 32), np.float32), dims="auto", samples=3)
    assert auto.ok, str(auto)
    # the person pins 32x32; smtdims may find the wider verified family of grids with the table's 16
    # patches (floordiv(h, 8)*floordiv(w, 8) == 16): it admits the example, and whatever it admits runs
    assert auto.specs[0].startswith("float32[a, 3, "), str(auto)
    assert _admits(auto.specs, auto.constraints, [(2, 3, 32, 32)])
    admitted = [(h, w) for h in range(8, 80, 4) for w in range(8, 80, 4)
                if _admits(auto.specs, auto.constraints, [(1, 3, h, w)])]
    assert admitted and all(_runs(fn, (1, 3, h, w)) for h, w in admitted), admitted
    assert all(r.cause for r in auto.table[2:]), "each size it restricts says which refusal forced it"
