"""The whole fix and ``dims="auto"`` on Keras 3 models (JAX backend), written as Keras users write them.

Four classes a Keras model meets: a learned position table sliced to the sequence (a bound), an
attention mask whose length must be the sequence's (two dimensions that agree, plus an einsum whose
feature size must stay fixed), strided 'same' convolutions flattened into a ``Dense`` (the product of
two ceiling divisions equal to the Dense's width: JAX's own arithmetic runs for minutes under that
equation as a constraint, so the fix is a fixed size), and a raw-audio front end of strided ``Conv1D``
(Keras refuses a sequence too short for a single frame: a lower bound at the exact length where it
starts to run). Each fix is verified end to end, and checked here against the native model on a grid:
every shape the fix admits runs natively; where the person's fix is a family, the fix admits all of it.

Skipped where Keras is not installed (the ``test`` extra installs it on Python < 3.12) or runs on
another backend.
"""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from smtdims_jax.pipeline import export_and_verify  # noqa: E402

from smtdims.lang.parser import parse_expr  # noqa: E402

if jax.__version_info__ < (0, 10):  # before importing Keras: its JAX backend needs a recent JAX
    pytest.skip("Keras 3 is tested here with jax >= 0.10", allow_module_level=True)
keras = pytest.importorskip("keras")
if keras.backend.backend() != "jax":
    pytest.skip("Keras runs on another backend in this process", allow_module_level=True)
layers, ops = keras.layers, keras.ops


class PositionTable(layers.Layer):
    """A learned position table sliced to the sequence (keras-hub's PositionEmbedding does the same)."""

    def __init__(self, maxlen: int, width: int, **kw):
        super().__init__(**kw)
        self.maxlen, self.width = maxlen, width

    def build(self, shape):
        self.table = self.add_weight(shape=(self.maxlen, self.width), initializer="random_normal")

    def call(self, x):
        return x + self.table[: ops.shape(x)[1]]


class GPT(keras.Model):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = layers.Embedding(50, 16), PositionTable(64, 16)
        self.attn, self.head = layers.MultiHeadAttention(2, 8), layers.Dense(50)

    def call(self, ids):
        x = self.pos(self.tok(ids))
        return self.head(self.attn(x, x))


class Masked(keras.Model):
    """Attention over a sequence with a padding mask given separately (its own length in the spec)."""

    def __init__(self):
        super().__init__()
        self.attn, self.out = layers.MultiHeadAttention(2, 8), layers.Dense(3)

    def call(self, x, mask):
        return self.out(self.attn(x, x, attention_mask=mask[:, None, :] > 0))


def build_models() -> dict:
    """The four models, built (seed 0) and called once, as functions of their inputs
    (benchmarks/bench_fix_models.py times their fixes)."""
    keras.utils.set_random_seed(0)
    gpt = GPT()
    gpt(np.zeros((2, 7), np.int32))
    masked = Masked()
    masked(np.zeros((2, 5, 4), np.float32), np.ones((2, 5), np.int32))
    cnn = keras.Sequential([keras.Input((28, 28, 1)),
                            layers.Conv2D(8, 3, strides=2, padding="same", activation="relu"),
                            layers.Conv2D(16, 3, strides=2, padding="same"), layers.Flatten(), layers.Dense(10)])
    audio = keras.Sequential([keras.Input((None, 1)), layers.Conv1D(8, 400, strides=160, activation="relu"),
                              layers.Conv1D(8, 3, strides=2), layers.GlobalAveragePooling1D(), layers.Dense(4)])
    return {"gpt": lambda ids: gpt(ids), "masked": lambda x, m: masked(x, m),
            "cnn": lambda x: cnn(x), "audio": lambda x: audio(x)}


# (specs, an example's sizes) per model, for the benchmark
SPECS = {"gpt": (["int32[b, t]"], {"b": 2, "t": 7}),
         "masked": (["float32[b, t, 4]", "int32[b, s]"], {"b": 2, "t": 5, "s": 5}),
         "cnn": (["float32[b, h, w, 1]"], {"b": 2, "h": 28, "w": 28}),
         "audio": (["float32[b, n, 1]"], {"b": 2, "n": 1600})}


@pytest.fixture(scope="module")
def models():
    return build_models()


def _runs(fn, *shapes_dtypes) -> bool:
    try:
        jax.eval_shape(fn, *(jax.ShapeDtypeStruct(s, d) for s, d in shapes_dtypes))
        return True
    except Exception:  # noqa: BLE001 - Keras and JAX refuse with several classes
        return False


def _admits(avals: tuple[str, ...], constraints: tuple[str, ...], shapes: list[tuple[int, ...]]) -> bool:
    """Whether the fixed specification admits these concrete shapes (some valuation of its variables)."""
    from smtdims_jax.pipeline.box import valuation_of

    from smtdims.lang.constraints import ConstraintSet

    dims = tuple(tuple(parse_expr(d) for d in a.split("[", 1)[1].rstrip("]").split(",")) for a in avals)
    return valuation_of(dims, ConstraintSet.of(constraints), tuple(shapes), None) is not None


def _fix(fn, *specs):
    report = export_and_verify(fn, *specs, fix=True, samples=3)
    fix = report.fix
    assert fix is not None and fix.status == "fixed", report
    return fix


def test_position_table_is_a_bound(models):
    fix = _fix(models["gpt"], "int32[b, t]")
    assert fix.in_avals == ("int32[b, t]",) and fix.constraints == ("t <= 64",)
    for t in (1, 63, 64, 65):  # the fix's edges agree with the native model
        assert _admits(fix.in_avals, fix.constraints, [(2, t)]) == _runs(models["gpt"], ((2, t), np.int32))
    auto = export_and_verify(models["gpt"], np.zeros((2, 7), np.int32), dims="auto", samples=3)
    assert auto.ok and auto.constraints and all("<= 64" in c for c in auto.constraints), auto


def test_mask_length_agrees_with_the_sequence_and_the_width_stays(models):
    fn = models["masked"]
    fix = _fix(fn, "float32[b, t, 4]", "int32[b, s]")
    (x, m) = fix.in_avals
    assert x.split("[")[1].split(",")[1].strip() == m.split("[")[1].split(",")[1].rstrip("]").strip()
    auto = export_and_verify(fn, np.zeros((2, 5, 4), np.float32), np.ones((2, 5), np.int32), dims="auto", samples=3)
    assert auto.ok, auto
    xs, ms = (split.split("[", 1)[1].rstrip("]").split(", ") for split in auto.specs)
    assert xs[2] == "4" and xs[0] == ms[0] and xs[1] == ms[1] and xs[0] != xs[1], auto.specs  # b, t free; width fixed
    for shapes in ([(3, 9, 4), (3, 9)], [(1, 1, 4), (1, 1)]):
        assert _admits(auto.specs, auto.constraints, shapes)
        assert _runs(fn, (shapes[0], np.float32), (shapes[1], np.int32))


def test_strided_same_cnn_into_dense_is_fixed_at_a_size_that_runs(models):
    fn = models["cnn"]
    fix = _fix(fn, "float32[b, h, w, 1]")  # the equation as a constraint keeps JAX busy: a fixed size instead
    assert not fix.constraints or all("floordiv" not in c for c in fix.constraints)
    admitted = [(h, w) for h in range(20, 33) for w in range(20, 33)
                if _admits(fix.in_avals, fix.constraints, [(2, h, w, 1)])]
    assert admitted and all(_runs(fn, ((2, h, w, 1), np.float32)) for h, w in admitted)
    auto = export_and_verify(fn, np.zeros((2, 28, 28, 1), np.float32), dims="auto", samples=3)
    assert auto.ok and _admits(auto.specs, auto.constraints, [(2, 28, 28, 1)]), auto  # the example's size
    admitted = [(h, w) for h in range(20, 33) for w in range(20, 33)
                if _admits(auto.specs, auto.constraints, [(5, h, w, 1)])]
    assert all(_runs(fn, ((5, h, w, 1), np.float32)) for h, w in admitted)


def test_audio_front_end_gets_the_least_length_that_runs(models):
    fn = models["audio"]
    fix = _fix(fn, "float32[b, n, 1]")
    least = next(n for n in range(1, 2000) if _runs(fn, ((1, n, 1), np.float32)))  # 720: two strided frames
    assert fix.constraints == (f"n >= {least}",), fix
    auto = export_and_verify(fn, np.zeros((2, 1600, 1), np.float32), dims="auto", samples=3)
    n = auto.specs[0].split("[", 1)[1].split(", ")[1]  # the length's variable
    assert auto.ok and auto.constraints == (f"{n} >= {least}",), auto
