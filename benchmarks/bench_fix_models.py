"""Benchmark: the whole fix where users are -- real-library models, one call each, timed as a user waits.

Each model is timed as a user's call runs (issue 67): a FRESH PROCESS per model that imports the model's
module, builds the model and makes one call with the defaults -- ``export_and_verify(fn, *specs, fix=True)``
(spec mode) or ``export_and_verify(fn, *examples, dims="auto")`` (``--auto``, from one example batch) --
with no ``samples=`` and no verification process started before the clock. The parent times the child
process from its start to its exit (``wall``); the child times the call (``call``) and prints one JSON
line: the status, the fix as written, and the fix's own split (``FixResult.timing``: native traces,
exports, verification). ``start`` = wall - call: the interpreter, the imports (JAX, the model's library),
building the model, and the exit; ``build`` is the model's module and constructor within it. Where a call
needs no fix (nothing to split), the verification is timed by wrapping the pipeline's sample planning and
device run (marked ``*``).

The models: the 32 "small" ones (a nanoGPT of six blocks in flax nnx, the flax nnx/linen and equinox
models of tests/pipeline/test_library_models.py, the Keras 3 models of tests/pipeline/test_keras_models.py,
JAX's Pallas TPU flash attention exported for ``tpu``, the plain JAX patterns of
tests/pipeline/test_real_models.py and tests/fixtures_pipeline/loop_models.py) and 11 Hugging Face Flax
models from small configs (random weights, no download; skipped without ``transformers`` < 5). Targets
(issue 67, a 2-core machine beside two CPU-bound processes): Hugging Face median <= 10 s, max <= 30 s,
spec mode and auto; small models median <= 5 s, max <= 20 s; verification at most half of a fix's time
(median); a trivial ``smtdims export`` <= 3 s wall idle (timed first, ``--no-trivial`` skips it).

``--warm`` keeps the earlier measure: every model in this one process, ``samples=4``, the verification
process started before the first timing ("warm, in process": not what a user waits). ``--grid`` (warm
only): the earlier design's grid of ~400 traced shapes.

Run: ``python benchmarks/bench_fix_models.py [--auto | --both] [--hf | --small] [--quick] [--only NAME]
[--warm [--grid]] [--json FILE]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ROOT = Path(__file__).resolve().parents[1]
# (median, max) goals in seconds of wall per model, by group (issue 67)
GOALS = {"small": (5.0, 20.0), "hf": (10.0, 30.0)}
TRIVIAL_GOAL_S = 3.0
TRIVIAL = ["export", "examples/fix_two.py:two", "--spec", "float32[2*k]", "-c", "k >= 8"]
CHILD_TIMEOUT_S = 600


def _load(rel: str, name: str):
    path = ROOT / rel
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses (equinox's modules) look their module up there
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def nano_gpt():
    """A nanoGPT in flax nnx at a size whose trace costs what a real model's does (6 blocks of attention and
    MLP, ~0.1 s a trace here): the learned position table (512) sliced to the sequence."""
    import jax
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, d: int, rngs: nnx.Rngs):
            self.ln1, self.ln2 = nnx.LayerNorm(d, rngs=rngs), nnx.LayerNorm(d, rngs=rngs)
            self.attn = nnx.MultiHeadAttention(num_heads=4, in_features=d, decode=False, rngs=rngs)
            self.fc, self.proj = nnx.Linear(d, 4 * d, rngs=rngs), nnx.Linear(4 * d, d, rngs=rngs)

        def __call__(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.proj(jax.nn.gelu(self.fc(self.ln2(x))))

    class GPT(nnx.Module):
        def __init__(self, rngs: nnx.Rngs, d: int = 64, layers: int = 6):
            self.tok, self.pos = nnx.Embed(1000, d, rngs=rngs), nnx.Embed(512, d, rngs=rngs)
            self.blocks = nnx.List([Block(d, rngs) for _ in range(layers)]) if hasattr(nnx, "List") else \
                [Block(d, rngs) for _ in range(layers)]
            self.head = nnx.Linear(d, 1000, rngs=rngs)

        def __call__(self, ids):
            x = self.tok(ids) + self.pos.embedding[...][: ids.shape[1]]
            for blk in self.blocks:
                x = blk(x)
            return self.head(x)

    model = GPT(nnx.Rngs(0))

    def nano_gpt(ids):
        return model(ids)
    return nano_gpt


# -- Hugging Face Flax models from small configs (hidden 32, 2 layers, 2 heads, vocabulary 100, 64 positions) --
def _hf():
    """transformers, where its Flax classes exist (< 5); ImportError otherwise."""
    import transformers

    if int(transformers.__version__.split(".")[0]) >= 5 or not hasattr(transformers, "FlaxBertModel"):
        raise ImportError(f"transformers {transformers.__version__} has no Flax classes (needs < 5)")
    return transformers


def _hf_encoder(model_cls: str, config_cls: str, **cfg):
    """``fn(ids) -> last_hidden_state`` of a Flax text model built from ``cfg`` (random weights, seed 0)."""
    t = _hf()
    model = getattr(t, model_cls)(getattr(t, config_cls)(**cfg), seed=0)

    def fn(x):
        return model(x, params=model.params).last_hidden_state
    fn.__name__ = fn.__qualname__ = model_cls.removeprefix("Flax").lower()
    return fn


_TEXT = {"vocab_size": 100, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
_VISION = {"image_size": 32, "patch_size": 8, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
           "intermediate_size": 64}


def hf_bert():
    return _hf_encoder("FlaxBertModel", "BertConfig", max_position_embeddings=64, **_TEXT)


def hf_roberta():  # RoBERTa's positions start at padding_idx + 1 = 2: 66 rows hold 64 tokens
    return _hf_encoder("FlaxRobertaModel", "RobertaConfig", max_position_embeddings=66, **_TEXT)


def hf_distilbert():
    return _hf_encoder("FlaxDistilBertModel", "DistilBertConfig", vocab_size=100, dim=32, n_layers=2, n_heads=2,
                       hidden_dim=64, max_position_embeddings=64)


def hf_gpt_neo():
    return _hf_encoder("FlaxGPTNeoModel", "GPTNeoConfig", vocab_size=100, hidden_size=32, num_layers=2, num_heads=2,
                       max_position_embeddings=64, attention_types=[[["global", "local"], 1]], window_size=16)


def hf_opt():
    return _hf_encoder("FlaxOPTModel", "OPTConfig", vocab_size=100, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, ffn_dim=64, max_position_embeddings=64, word_embed_proj_dim=32)


def hf_beit():
    return _hf_encoder("FlaxBeitModel", "BeitConfig", **_VISION)


def hf_clip_vision():
    return _hf_encoder("FlaxCLIPVisionModel", "CLIPVisionConfig", **_VISION)


def hf_wav2vec2():  # raw audio: two strided convolutions (5, 2) in front of the encoder
    return _hf_encoder("FlaxWav2Vec2Model", "Wav2Vec2Config", vocab_size=32, hidden_size=32, num_hidden_layers=2,
                       num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                       conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
                       do_stable_layer_norm=True, feat_extract_norm="layer")


def hf_bart():
    """BART, an encoder-decoder: two inputs, the source and the target tokens."""
    t = _hf()
    cfg = t.BartConfig(vocab_size=100, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                       decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
    model = t.FlaxBartModel(cfg, seed=0)

    def bart(src, tgt):
        return model(src, decoder_input_ids=tgt, params=model.params).last_hidden_state
    return bart


def _hf_tests():
    """tests/pipeline/test_hf_models.py (its GPT-2 and ViT builders), or ImportError without transformers < 5."""
    _hf()
    return _load("tests/pipeline/test_hf_models.py", "_bench_hf_models")


# T5/mT5 are left out: their Flax classes call jnp.clip(a_max=...), which JAX 0.10 removed.
HF_MODELS: list[tuple[str, object, list[str], dict[str, int]]] = [
    ("HF Flax GPT-2", lambda: _hf_tests().gpt2(), ["int32[b, t]"], {"b": 2, "t": 7}),
    ("HF Flax GPT-Neo", hf_gpt_neo, ["int32[b, t]"], {"b": 2, "t": 7}),
    ("HF Flax OPT", hf_opt, ["int32[b, t]"], {"b": 2, "t": 7}),
    ("HF Flax BERT", hf_bert, ["int32[b, t]"], {"b": 2, "t": 7}),
    ("HF Flax RoBERTa", hf_roberta, ["int32[b, t]"], {"b": 2, "t": 7}),
    ("HF Flax DistilBERT", hf_distilbert, ["int32[b, t]"], {"b": 2, "t": 7}),
    ("HF Flax BART (encoder-decoder)", hf_bart, ["int32[b, s]", "int32[b, t]"], {"b": 2, "s": 7, "t": 5}),
    ("HF Flax ViT", lambda: _hf_tests().vit(), ["float32[b, 3, h, w]"], {"b": 2, "h": 32, "w": 32}),
    ("HF Flax BEiT", hf_beit, ["float32[b, 3, h, w]"], {"b": 2, "h": 32, "w": 32}),
    ("HF Flax CLIP vision", hf_clip_vision, ["float32[b, 3, h, w]"], {"b": 2, "h": 32, "w": 32}),
    ("HF Flax Wav2Vec2 (speech)", hf_wav2vec2, ["float32[b, n]"], {"b": 2, "n": 400}),
]


class Case:
    """A model the benchmark fixes: ``build()`` returns the function; ``specs``; an example's sizes (None: spec
    mode only); the platforms exported for where not this host's; ``source``: where it comes from (a fresh
    process loads that source alone)."""

    def __init__(self, name: str, source: str, build, specs: list[str], sizes: dict[str, int] | None,
                 platforms: tuple[str, ...] | None = None):
        self.name, self.source, self.build, self.specs, self.sizes, self.platforms = \
            name, source, build, specs, sizes, platforms

    @property
    def group(self) -> str:
        return "hf" if self.source == "hf" else "small"


def _nano() -> list[Case]:
    return [Case("nanoGPT, 6 blocks (flax nnx)", "nano", nano_gpt, ["int32[b, t]"], {"b": 2, "t": 37})]


def _library() -> list[Case]:
    lib = _load("tests/pipeline/test_library_models.py", "_bench_library_models")
    return [Case(name, "library", build, list(specs), sizes[1])
            for name, (build, specs, _person, _grid, sizes, *_rest) in lib.CASES.items()]


KERAS_NAMES = {"gpt": "Keras GPT, position table", "masked": "Keras attention + separate mask",
               "cnn": "Keras strided 'same' CNN into Dense", "audio": "Keras Conv1D raw-audio front end"}


def keras_model(k, key: str):
    """One of tests/pipeline/test_keras_models.py's four models, built alone (its ``build_models()`` builds all
    four: a fresh process builds only the model it times), seed 0, called once as there."""
    import numpy as np

    keras, layers = k.keras, k.layers
    keras.utils.set_random_seed(0)
    if key == "gpt":
        gpt = k.GPT()
        gpt(np.zeros((2, 7), np.int32))
        return lambda ids: gpt(ids)
    if key == "masked":
        masked = k.Masked()
        masked(np.zeros((2, 5, 4), np.float32), np.ones((2, 5), np.int32))
        return lambda x, m: masked(x, m)
    if key == "cnn":
        cnn = keras.Sequential([keras.Input((28, 28, 1)),
                                layers.Conv2D(8, 3, strides=2, padding="same", activation="relu"),
                                layers.Conv2D(16, 3, strides=2, padding="same"), layers.Flatten(), layers.Dense(10)])
        return lambda x: cnn(x)
    audio = keras.Sequential([keras.Input((None, 1)), layers.Conv1D(8, 400, strides=160, activation="relu"),
                              layers.Conv1D(8, 3, strides=2), layers.GlobalAveragePooling1D(), layers.Dense(4)])
    return lambda x: audio(x)


def _keras() -> list[Case]:
    k = _load("tests/pipeline/test_keras_models.py", "_bench_keras_models")
    return [Case(KERAS_NAMES[key], "keras", lambda key=key: keras_model(k, key), list(specs), sizes)
            for key, (specs, sizes) in k.SPECS.items()]


def pallas_flash_attention_fn():
    """JAX's own Pallas TPU kernel, exported for the TPU from this host: no symbolic family exists (raises
    where this JAX cannot lower it for the TPU here)."""
    import jax
    from jax.experimental.pallas.ops.tpu import flash_attention as fa

    def pallas_flash_attention(q, k, v):
        return fa.flash_attention(q, k, v)

    concrete = jax.ShapeDtypeStruct((1, 2, 128, 128), jax.numpy.float32)
    jax.export.export(jax.jit(pallas_flash_attention), platforms=("tpu",))(concrete, concrete, concrete)
    return pallas_flash_attention


def _pallas() -> list[Case]:
    return [Case("Pallas flash attention (for tpu)", "pallas", pallas_flash_attention_fn,
                 ["float32[b, 2, t, 128]"] * 3, None, ("tpu",))]


def _real() -> list[Case]:
    real = _load("tests/pipeline/test_real_models.py", "_bench_real_models")
    return [Case(name, "real", lambda fn=fn: fn, list(specs), sizes[1])
            for name, (fn, specs, _person, sizes, *_rest) in real.CASES.items()]


def _loop() -> list[Case]:
    m = _load("tests/fixtures_pipeline/loop_models.py", "_bench_loop_models")
    rows = [
        ("Swin window partition", lambda: m.window_partition, ["float32[b, h, w, 3]"], {"b": 2, "h": 14, "w": 21}),
        ("ViT grid sliced to the table", lambda: m.vit_grid, ["float32[b, h, w, 3]"], {"b": 2, "h": 32, "w": 48}),
        ("patch pool", lambda: m.patch_pool, ["float32[b, h, w]"], {"b": 2, "h": 24, "w": 40}),
        ("CLIP-style position table", lambda: m.clip_embed, ["float32[b, h, w, 3]"], {"b": 1, "h": 224, "w": 224}),
        ("grid tokens (sqrt)", lambda: m.grid_tokens, ["float32[b, n, 4]"], {"b": 2, "n": 16}),
        ("encoder-decoder, two tables", lambda: m.encoder_decoder, ["float32[t, 4]", "float32[u, 4]"], {"t": 10, "u": 7}),
        ("Swin patch merging (assert)", lambda: m.patch_merging, ["float32[b, h, w, 3]"], {"b": 2, "h": 8, "w": 12}),
        ("token mixer (linen Dense)", m.make_token_mixer, ["float32[b, p, q, 4]"], {"b": 2, "p": 8, "q": 8}),
        ("overlap-add residual (64/16)", lambda: m.make_overlap_add(64, 16), ["float32[b, n]"], {"b": 2, "n": 1024}),
        ("pad to blocks of 16", lambda: m.pad_to_blocks, ["float32[b, n]"], {"b": 2, "n": 96}),
        ("table looked up past its end (NaN)", lambda: m.learned_positions, ["float32[b, t, 8]"], {"b": 2, "t": 7}),
    ]
    return [Case(name, "loop", build, specs, sizes) for name, build, specs, sizes in rows]


def _hf_cases() -> list[Case]:
    _hf()  # ImportError without transformers < 5: the group is skipped, said once
    return [Case(name, "hf", build, specs, sizes) for name, build, specs, sizes in HF_MODELS]


# where the models come from, in the order they run; a fresh process loads its model's source alone
SOURCES = {"nano": _nano, "library": _library, "keras": _keras, "pallas": _pallas, "real": _real, "loop": _loop,
           "hf": _hf_cases}
SOURCE_NAMES = {"nano": "nanoGPT", "library": "library models", "keras": "Keras models", "pallas": "Pallas kernel",
                "real": "real-model patterns", "loop": "loop models", "hf": "Hugging Face models"}


def _first_line(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"


def cases(groups: tuple[str, ...] = ("small", "hf"), say=print) -> list[Case]:
    """Every model of ``groups`` whose library is installed (a source that cannot load is skipped, said once)."""
    out: list[Case] = []
    for source, load in SOURCES.items():
        if ("hf" if source == "hf" else "small") not in groups:
            continue
        try:
            out += load()
        except BaseException as err:  # noqa: BLE001 - not installed (pytest's Skipped too): the rest still run
            if isinstance(err, (KeyboardInterrupt, SystemExit)):
                raise
            say(f"({SOURCE_NAMES[source]} skipped: {_first_line(err)})")
    return out


def models() -> list[tuple[str, object, list[str], dict[str, int] | None]]:
    """(name, function, specs, an example's sizes or None) for every model, built in this process."""
    out = []
    for c in cases():
        try:
            out.append((c.name, c.build(), c.specs, c.sizes))
        except Exception as err:  # noqa: BLE001 - does not build here (the Pallas kernel off a TPU-lowering JAX)
            print(f"({c.name} skipped: {_first_line(err)})")
    return out


def _example(specs: list[str], env: dict[str, int]) -> list:
    """Zero arrays of the specs' shapes at ``env`` (an example batch)."""
    import numpy as np

    from smtdims.lang.parser import parse_expr

    out = []
    for spec in specs:
        body = spec.split("[", 1)[1].rstrip("]")
        shape = tuple(parse_expr(d).evaluate(env) for d in body.split(",")) if body.strip() else ()
        out.append(np.zeros(shape, np.int32 if spec.startswith("int32") else np.float32))
    return out


def _fix_text(in_avals, constraints) -> str:
    return ", ".join(in_avals) + (f" | {', '.join(constraints)}" if constraints else "")


# -- the fresh process: one model, one call with the defaults ---------------------------------------------------
def _hook_verification() -> list[float]:
    """Time the verification where no fix splits it: the pipeline's sample planning and device run, wrapped
    (used only for a call whose result carries no ``FixResult.timing``)."""
    from smtdims_jax.pipeline import verify as v

    spent = [0.0]

    def timed(real):
        def wrapper(*a, **k):
            t0 = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                spent[0] += time.perf_counter() - t0
        return wrapper

    for name in ("plan_samples", "_check_artifact"):
        if hasattr(v, name):
            setattr(v, name, timed(getattr(v, name)))
    return spent


def child(source: str, name: str, mode: str) -> dict:
    """Build one model and make one call, as a user's script does; the result as a JSON-ready dict."""
    t0 = time.perf_counter()
    from smtdims_jax.pipeline import export_and_verify

    t_imports = time.perf_counter() - t0
    row: dict = {"name": name, "mode": mode, "imports_s": round(t_imports, 3)}
    t1 = time.perf_counter()
    try:
        case = next(c for c in SOURCES[source]() if c.name == name)
        fn = case.build()
    except BaseException as err:  # noqa: BLE001 - its library is missing or it does not build here
        if isinstance(err, KeyboardInterrupt):
            raise
        return {**row, "status": "skipped", "fix": _first_line(err)[:200]}
    row["build_s"] = round(time.perf_counter() - t1, 3)
    hooked = _hook_verification()
    t2 = time.perf_counter()
    if mode == "auto":
        got = export_and_verify(fn, *_example(case.specs, case.sizes), dims="auto")
        fix, status = got.fix, got.status if got.ok else f"NOT verified ({got.status})"
        what = _fix_text(got.specs, got.constraints)
    else:
        report = export_and_verify(fn, *case.specs, fix=True, platforms=case.platforms)
        fix = report.fix
        status = fix.status if fix is not None else ("verified, no fix needed" if report.ok else "failed")
        what = _fix_text(fix.in_avals, fix.constraints) if fix is not None and fix.parts else "-"
    call = time.perf_counter() - t2
    split = {what_: {"count": n, "seconds": round(s, 3)} for what_, n, s in (fix.timing if fix is not None else ())}
    if "verification" not in split and hooked[0]:
        split["verification"] = {"count": 0, "seconds": round(hooked[0], 3), "wrapped": True}
    return {**row, "status": status, "fix": what, "call_s": round(call, 3), "split": split}


def _child_main(source: str, name: str, mode: str) -> None:
    try:
        row = child(source, name, mode)
    except BaseException as err:  # noqa: BLE001 - the call itself raised: a result too
        if isinstance(err, KeyboardInterrupt):
            raise
        row = {"name": name, "mode": mode, "status": "raised", "fix": _first_line(err)[:300]}
    sys.stdout.flush()
    print("BENCH_JSON " + json.dumps(row), flush=True)


def fresh(case: Case, mode: str) -> dict:
    """One model in a fresh process: the parent times it from start to exit."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", case.source, case.name, "--mode", mode]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"name": case.name, "mode": mode, "group": case.group, "status": f"timeout ({CHILD_TIMEOUT_S} s)",
                "fix": "-", "wall_s": CHILD_TIMEOUT_S}
    wall = time.perf_counter() - t0
    line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("BENCH_JSON ")), None)
    if line is None:
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [f"exit {p.returncode}"]
        return {"name": case.name, "mode": mode, "group": case.group, "status": "crashed", "fix": tail[0][:200],
                "wall_s": round(wall, 3)}
    row = json.loads(line[len("BENCH_JSON "):])
    row.update(group=case.group, wall_s=round(wall, 3))
    if "call_s" in row:
        row["start_s"] = round(wall - row["call_s"], 3)
    return row


def _secs(row: dict, what: str) -> float:
    return row.get("split", {}).get(what, {}).get("seconds", 0.0)


def _row_line(row: dict) -> str:
    if "call_s" not in row:
        return f"{row['name']:36} {row['status']:28} {row.get('wall_s', 0):6.1f}s  {row.get('fix', '')}"
    sp = row.get("split", {})
    tr, ex = sp.get("native traces", {}), sp.get("exports", {})
    ver = sp.get("verification", {})
    split = (f"traces {tr.get('count', 0):3d}/{tr.get('seconds', 0):5.1f}s  exports {ex.get('count', 0):2d}/"
             f"{ex.get('seconds', 0):5.1f}s  verify {ver.get('seconds', 0):5.1f}s{'*' if ver.get('wrapped') else ' '} "
             f"other {row['call_s'] - sum(v.get('seconds', 0) for v in sp.values()):5.1f}s")
    return (f"{row['name']:36} {row['status']:28} wall {row['wall_s']:6.1f}s  call {row['call_s']:5.1f}s  "
            f"start {row['start_s']:4.1f}s (imports {row.get('imports_s', 0):3.1f}s, build {row.get('build_s', 0):4.1f}s)  "
            f"{split}  {row['fix']}")


def verification_share(row: dict) -> float | None:
    """The verification's share of the call (None where nothing timed it)."""
    v = _secs(row, "verification")
    return v / row["call_s"] if "call_s" in row and row["call_s"] > 0 and "verification" in row.get("split", {}) else None


def summarise(rows: list[dict], mode: str, group: str, label: str = "fresh process") -> dict | None:
    timed = [r for r in rows if r["mode"] == mode and r["group"] == group and "call_s" in r]
    if not timed:
        return None
    walls = [r["wall_s"] for r in timed]
    calls = [r["call_s"] for r in timed]
    shares = [s for s in map(verification_share, timed) if s is not None]
    goal_med, goal_max = GOALS[group]
    slow = max(timed, key=lambda r: r["wall_s"])
    s = {"mode": mode, "group": group, "label": label, "models": len(timed),
         "wall_median_s": round(statistics.median(walls), 2), "wall_max_s": round(max(walls), 2), "slowest": slow["name"],
         "call_median_s": round(statistics.median(calls), 2), "call_max_s": round(max(calls), 2),
         "start_median_s": round(statistics.median(r["start_s"] for r in timed), 2),
         # what smtdims costs beside the user's own model: the wall less the model's module and constructor
         "wall_less_build_median_s": round(statistics.median(r["wall_s"] - r.get("build_s", 0) for r in timed), 2),
         "wall_less_build_max_s": round(max(r["wall_s"] - r.get("build_s", 0) for r in timed), 2),
         "verification_share_median": round(statistics.median(shares), 3) if shares else None,
         "ok": sum(r["status"] in ("fixed", "verified", "verified, no fix needed") for r in timed),
         "goal_median_s": goal_med, "goal_max_s": goal_max}
    s["met"] = {"median": s["wall_median_s"] <= goal_med, "max": s["wall_max_s"] <= goal_max,
                "call median": s["call_median_s"] <= goal_med, "call max": s["call_max_s"] <= goal_max,
                "verification share <= 0.5": s["verification_share_median"] is not None
                and s["verification_share_median"] <= 0.5}
    share = f"{100 * s['verification_share_median']:.0f} %" if shares else "-"
    print(f"{mode:4} {group:5} ({label}): {len(timed)} models, wall median {s['wall_median_s']:.1f}s (goal <= {goal_med:g}s "
          f"{'met' if s['met']['median'] else 'NOT met'}), max {s['wall_max_s']:.1f}s (goal <= {goal_max:g}s "
          f"{'met' if s['met']['max'] else 'NOT met'}; {slow['name']}); the call alone: median {s['call_median_s']:.1f}s "
          f"({'met' if s['met']['call median'] else 'NOT met'}), max {s['call_max_s']:.1f}s "
          f"({'met' if s['met']['call max'] else 'NOT met'}); wall less the model's build: median "
          f"{s['wall_less_build_median_s']:.1f}s, max {s['wall_less_build_max_s']:.1f}s; process start median "
          f"{s['start_median_s']:.1f}s; "
          f"verification share (median) "
          f"{share} (goal <= 50 %); {s['ok']} fixed/verified", flush=True)
    return s


def trivial_export(times: int = 3) -> dict:
    """``smtdims export examples/fix_two.py:two --spec "float32[2*k]" -c "k >= 8"`` (nothing to fix), each
    run a fresh process: its wall time."""
    exe = Path(sys.executable).parent / "smtdims"
    cmd = [str(exe), *TRIVIAL] if exe.exists() else [sys.executable, "-m", "smtdims", *TRIVIAL]
    walls, rc = [], 0
    for _ in range(times):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
        walls.append(round(time.perf_counter() - t0, 3))
        rc = rc or p.returncode
    med = statistics.median(walls)
    print(f"trivial export (smtdims {' '.join(TRIVIAL[:2])} --spec \"{TRIVIAL[3]}\" -c \"{TRIVIAL[5]}\"), fresh "
          f"process: {', '.join(f'{w:.1f}s' for w in walls)}; median {med:.1f}s (goal <= {TRIVIAL_GOAL_S:g}s idle: "
          f"{'met' if med <= TRIVIAL_GOAL_S else 'NOT met'}){'' if rc == 0 else f'; exit {rc}'}", flush=True)
    return {"walls_s": walls, "median_s": med, "rc": rc, "met": med <= TRIVIAL_GOAL_S}


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def run_fresh(modes: tuple[str, ...], groups: tuple[str, ...], quick: bool = False, only: str | None = None,
              trivial: bool = True) -> dict:
    out: dict = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(),
                 "load_before": load_average(), "rows": [], "summary": []}
    if trivial:
        out["trivial"] = trivial_export()
    # the cases' modules may make arrays at import (a test module's table): on the CPU here, so that this
    # process never holds a TPU the children's verification processes need
    from smtdims_jax.pipeline import keep_off_accelerator

    keep_off_accelerator()
    todo = [c for c in cases(groups) if only is None or only.lower() in c.name.lower()]
    if quick:
        todo = [c for g in groups for c in [c for c in todo if c.group == g][:3]]
    for mode in modes:
        call = 'export_and_verify(fn, *examples, dims="auto")' if mode == "auto" else \
            "export_and_verify(fn, *specs, fix=True)"
        print(f"\n== {mode} mode, fresh process per model, defaults ({call}) ==", flush=True)
        for case in todo:
            if mode == "auto" and case.sizes is None:
                continue
            row = fresh(case, mode)
            out["rows"].append(row)
            print(_row_line(row), flush=True)
    print("\n(wall: process start to exit; call: the export_and_verify call; start = wall - call (interpreter, "
          "imports, the model's build, exit); other: the call less its split; "
          "verify*: timed around the pipeline, no fix split it)")
    for mode in modes:
        for group in groups:
            s = summarise(out["rows"], mode, group)
            if s is not None:
                out["summary"].append(s)
    out["load_after"] = load_average()
    print(f"load average (1 min): {out['load_before']} before, {out['load_after']} after; {out['cpus']} CPUs")
    return out


# -- warm, in process: the earlier measure (every model in one process, samples=4, verification prestarted) ---
def _count_exports():
    """Wrap ``jax.export.export`` to count the exports a call runs (the fix's, the verification's, the
    references')."""
    from jax import export

    real = export.export
    calls = [0]

    def counting(*a, **k):
        calls[0] += 1
        return real(*a, **k)

    export.export = counting
    return calls, lambda: setattr(export, "export", real)


def run(quick: bool = False, grid: bool = False, only: str | None = None, auto: bool = False,
        groups: tuple[str, ...] = ("small", "hf")) -> dict:
    """Warm, in process: each model's call timed in this one process, ``samples=4``, the verification process
    started before the first timing (the figure before issue 67; not what a user waits)."""
    from smtdims_jax.pipeline import export_and_verify, keep_off_accelerator

    # as `smtdims export` does: this process stays on the CPU, and the verification process keeps the
    # device between the calls (a TPU opened once, not once per model: several seconds each)
    keep_off_accelerator()

    todo = [c for c in cases(groups) if (only is None or only.lower() in c.name.lower()) and (not auto or c.sizes is not None)]
    if quick:
        todo = todo[:6]
    export_and_verify(lambda x: x * 2, "float32[b]", samples=1)  # the verification process, started once
    calls, restore = _count_exports()
    rows = []
    print("== warm, in process (samples=4, verification process started before the clock) ==", flush=True)
    try:
        for case in todo:
            try:
                fn = case.build()
            except Exception as err:  # noqa: BLE001 - does not build here
                print(f"({case.name} skipped: {_first_line(err)})")
                continue
            name, specs, example = case.name, case.specs, case.sizes
            calls[0] = 0
            t0 = time.perf_counter()
            if auto:  # from the example alone: every dimension a variable, the family inferred and verified
                got = export_and_verify(fn, *_example(specs, example), dims="auto", samples=4)
                report = got.report
                report = replace(report, fix=got.fix) if got.fix is not None else report
            else:
                report = export_and_verify(fn, *specs, fix=True, samples=4, box=box_side(specs) if grid else None,
                                           platforms=case.platforms)
            dt = time.perf_counter() - t0
            fix = report.fix
            status = fix.status if fix is not None else ("fixed" if report.ok else "failed")
            what = _fix_text(fix.in_avals, fix.constraints) if fix is not None and fix.parts else "-"
            traces = fix.box.traces if fix is not None and fix.box is not None else 0
            rows.append((name, status, what, dt, traces, calls[0]))
            print(f"{name:36} {status:28} {dt:6.1f}s {traces:4d} traces {calls[0]:3d} exports  {what}", flush=True)
    finally:
        restore()
    times = [r[3] for r in rows]
    med, top = statistics.median(times), max(times)
    print(f"\nwarm, in process: {len(rows)} models: median {med:.1f}s, max {top:.1f}s; "
          f"native traces median {statistics.median(r[4] for r in rows):g}, max {max(r[4] for r in rows)}; "
          f"fixed {sum(r[1] == 'fixed' for r in rows)}, narrower {sum(r[1].endswith('narrower than needed') for r in rows)}, "
          f"other {sum(r[1] not in ('fixed', 'found, narrower than needed') for r in rows)}")
    return {"label": "warm, in process", "rows": rows, "median_s": med, "max_s": top}


def box_side(specs: list[str]) -> int:
    from smtdims_jax.pipeline.box import box_side as side

    names = set()
    for s in specs:
        for d in s.split("[", 1)[1].rstrip("]").split(","):
            names |= {w for w in d.replace("*", " ").split() if w.isidentifier()}
    return side(len(names))


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "--child":  # one model in this fresh process (run by fresh())
        _child_main(sys.argv[2], sys.argv[3], sys.argv[5] if sys.argv[4:5] == ["--mode"] else "spec")
        sys.exit(0)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the first three models of each group (warm: the first six)")
    ap.add_argument("--auto", action="store_true", help='from one example each (dims="auto"), not the specs')
    ap.add_argument("--both", action="store_true", help="spec mode, then auto")
    ap.add_argument("--hf", action="store_true", help="the Hugging Face models only")
    ap.add_argument("--small", action="store_true", help="the small models only (no Hugging Face)")
    ap.add_argument("--only", help="models whose name contains this")
    ap.add_argument("--no-trivial", action="store_true", help="skip the trivial `smtdims export` timing")
    ap.add_argument("--warm", action="store_true", help="warm, in process (samples=4, verification prestarted)")
    ap.add_argument("--grid", action="store_true", help="with --warm: trace the old grid of ~400 shapes (slow)")
    ap.add_argument("--json", help="write the results here (fresh mode)")
    a = ap.parse_args()
    sel = ("hf",) if a.hf else ("small",) if a.small else ("small", "hf")
    if a.warm:
        run(quick=a.quick, grid=a.grid, only=a.only, auto=a.auto, groups=sel)
    else:
        res = run_fresh(("spec", "auto") if a.both else ("auto",) if a.auto else ("spec",), sel, quick=a.quick,
                        only=a.only, trivial=not a.no_trivial)
        if a.json:
            Path(a.json).write_text(json.dumps(res, indent=1))
