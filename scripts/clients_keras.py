"""keras-hub backbones (Keras 3, JAX backend) exported with symbolic shapes, stock and with smtdims.

Run by ``scripts/clients.sh`` (section ``keras``); not in CI: keras-hub pulls in TensorFlow and
tensorflow-text (its tokenizers). Each backbone is built with random weights (seed 0) and a tiny
config (vocabulary 97, one layer, hidden size 16, position tables of 64; image backbones with a
few filters), called through ``model.stateless_call`` with its variables' values closed over, and
exported with ``jax.export`` under a symbolic batch and sequence (``int32[b, t]`` for every input)
or batch and image size (``float32[b, h, w, 3]``). Each step runs in a fresh process:

1. ``stock`` and ``smtdims`` (``smtdims.install()`` first): the output shapes and the StableHLO
   text (source locations left out), or the exception. Where the export succeeds, the exported
   function runs at two concrete sizes against the native model (``allclose``), and its numbers
   are compared between the two modes (bit for bit).
2. ``fix``, where stock's export fails: ``smtdims.export_and_verify(..., fix=True)``: the whole
   fix, verified end to end (fresh process, samples); then the fixed specification exported
   again on stock JAX, without smtdims, and run at the samples' shapes against the native model.

The outcome differs when the export succeeds one way and fails the other, the exceptions differ
(smtdims' class must be stock's or a subclass of it, as ``InconclusiveWithWitnesses`` is, with
the same ``args`` as Keras re-raised it and as JAX raised it), the output shapes, the StableHLO or
the numbers differ, or an exported function disagrees with the native model. Where stock stopped
at an inconclusive comparison and smtdims' outcome differs, the table adds ``smtdims.decide``'s
answer to that comparison (a proven one means smtdims went past it to another outcome).

Beyond the first ten, the cases cover every ``keras_hub.models`` backbone that builds tiny and offline
(``--list-all`` lists each ``*Backbone`` class with its cases, or why it has none); an input whose
shape is not the case's ``b, t`` or ``b, h, w, 3`` has its own (a decoder's ``b, s``, audio features
``b, t, 8``, a fixed-size image), and an image encoder argument is built tiny too. The last lines count
the backbones tried, those that export stock and with smtdims, stock's failures, the fixes found,
verified end to end, and whose fixed specification stock re-exports in agreement with the native
model, with the names (also under ``summary`` in the JSON).

Usage: ``python scripts/clients_keras.py [--no-fix] [--timeout S] [--json FILE] [--all | NAME ...]``
(NAME from ``--list``; the default runs the first ten; ``--timeout``: seconds per child process,
900 by default). Exit status: 1 when an outcome differs between stock
and smtdims (except where stock stopped at a comparison it found inconclusive and smtdims proves
it: the difference the drop-in promise allows, shown as "allowed") or an exported function
disagrees with the native model, 0 otherwise; the fixes are reported, not judged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VOCAB = 97
TEXT: dict[str, Any] = {"vocabulary_size": VOCAB, "num_layers": 1, "hidden_dim": 16, "intermediate_dim": 32}
TEXT_SIZES: tuple[dict[str, int], ...] = ({"b": 1, "t": 5}, {"b": 3, "t": 64})
IMAGE_SIZES: tuple[dict[str, int], ...] = ({"b": 1, "h": 32, "w": 40}, {"b": 2, "h": 45, "w": 33})
SEQ2SEQ_SIZES: tuple[dict[str, int], ...] = ({"b": 1, "t": 5, "s": 3}, {"b": 3, "t": 64, "s": 7})
T5GEMMA: dict[str, Any] = {"vocabulary_size": VOCAB, **{f"{side}_{k}": v for side in ("encoder", "decoder") for k, v in (
    ("hidden_dim", 16), ("intermediate_dim", 32), ("num_layers", 1), ("num_attention_heads", 2),
    ("num_key_value_heads", 1), ("head_dim", 8), ("layer_types", ["full_attention"]))}}
MIT: dict[str, Any] = {"layerwise_depths": [1, 1], "num_layers": 2, "layerwise_num_heads": [1, 2],
                       "layerwise_sr_ratios": [2, 1], "max_drop_path_rate": 0.0, "layerwise_patch_sizes": [7, 3],
                       "layerwise_strides": [4, 2], "hidden_dims": [8, 16], "image_shape": (32, 32, 3)}
RESNET: dict[str, Any] = {"input_conv_filters": [64], "input_conv_kernel_sizes": [3], "stackwise_num_filters": [64, 8, 16],
                          "stackwise_num_blocks": [1, 1, 1], "stackwise_num_strides": [1, 2, 2],
                          "block_type": "basic_block"}


@dataclass(frozen=True)
class Sub:
    """A sub-model argument (an image encoder): ``keras_hub.models.<cls>(**kwargs)``, built in the child."""

    cls: str
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Case:
    """A backbone: its keras_hub.models class, a tiny config, the symbolic shape of each input.

    ``inputs`` gives the shape of the inputs (by name) that do not have the case's ``dims``
    (a decoder's ``b, s``, audio features ``b, t, 8``, a fixed-size image).
    """

    name: str
    cls: str
    kwargs: dict[str, Any]
    image: bool = False
    constraints: tuple[str, ...] = ()
    sizes: tuple[dict[str, int], ...] = field(default=TEXT_SIZES)
    inputs: dict[str, str] = field(default_factory=dict)

    @property
    def dims(self) -> str:
        return "b, h, w, 3" if self.image else "b, t"

    def dims_of(self, input_name: str) -> str:
        """The symbolic shape of one input."""
        return self.inputs.get(input_name, self.dims)


CASES: tuple[Case, ...] = (
    # learned position tables of 64 (sliced to the sequence length: t is unbounded)
    Case("GPT2", "GPT2Backbone", {**TEXT, "num_heads": 2, "max_sequence_length": 64}),
    Case("BERT", "BertBackbone", {**TEXT, "num_heads": 2, "max_sequence_length": 64}),
    Case("RoBERTa", "RobertaBackbone", {**TEXT, "num_heads": 2, "max_sequence_length": 64}),
    Case("DistilBERT", "DistilBertBackbone", {**TEXT, "num_heads": 2, "max_sequence_length": 64}),
    # rotary positions (Llama) and relative position buckets (T5): no table
    Case("Llama", "LlamaBackbone", {**TEXT, "num_query_heads": 2, "num_key_value_heads": 1}),
    Case("T5", "T5Backbone", {**TEXT, "num_heads": 2}),
    # image backbones: strided convolutions, padding, pooling
    Case("ResNet", "ResNetBackbone", {"input_conv_filters": [64], "input_conv_kernel_sizes": [7],
                                      "stackwise_num_filters": [64, 16], "stackwise_num_blocks": [1, 1],
                                      "stackwise_num_strides": [1, 2], "block_type": "basic_block"},
         image=True, sizes=IMAGE_SIZES),
    Case("CSPDarkNet", "CSPNetBackbone", {"stem_filters": 8, "stem_kernel_size": 3, "stem_strides": 2,
                                          "stackwise_depth": [1, 1], "stackwise_strides": [2, 2],
                                          "stackwise_num_filters": [8, 16], "block_type": "dark_block",
                                          "stage_type": "dark", "bottle_ratio": [0.5]},
         image=True, sizes=IMAGE_SIZES),
    Case("Xception", "XceptionBackbone", {"stackwise_conv_filters": [[8, 8], [16, 16]], "stackwise_pooling": [True, False]},
         image=True, sizes=IMAGE_SIZES),
    # a 32 x 32 image in 8 x 8 patches: a position table of 16 patches and a class token. Stock stops at
    # reshape's inconclusive 'patches >= 0' (true: smtdims decides it) and smtdims goes on to the add's
    # broadcasting TypeError against the 17 positions, which stock reaches too under h, w >= 8 (ViT8)
    Case("ViT", "ViTBackbone", {"image_shape": (32, 32, 3), "patch_size": 8, "num_layers": 1, "num_heads": 2,
                                "hidden_dim": 16, "mlp_dim": 32},
         image=True, sizes=({"b": 1, "h": 32, "w": 32}, {"b": 2, "h": 39, "w": 35})),
    # more, by name only; ViT8: ViT with h, w >= 8, where stock decides the comparison that stops it in ViT
    Case("ViT8", "ViTBackbone", {"image_shape": (32, 32, 3), "patch_size": 8, "num_layers": 1, "num_heads": 2,
                                 "hidden_dim": 16, "mlp_dim": 32},
         image=True, constraints=("h >= 8", "w >= 8"), sizes=({"b": 1, "h": 32, "w": 32}, {"b": 2, "h": 39, "w": 35})),
    Case("FNet", "FNetBackbone", {**TEXT, "max_sequence_length": 64}),
    Case("OPT", "OPTBackbone", {**TEXT, "num_heads": 2, "max_sequence_length": 64}),
    Case("Bloom", "BloomBackbone", {**TEXT, "num_heads": 2}),
    Case("Gemma", "GemmaBackbone", {**TEXT, "num_query_heads": 2, "num_key_value_heads": 1, "head_dim": 8}),
    Case("VGG", "VGGBackbone", {"stackwise_num_repeats": [1, 1], "stackwise_num_filters": [4, 8]},
         image=True, sizes=IMAGE_SIZES),
    Case("DenseNet", "DenseNetBackbone", {"stackwise_num_repeats": [1, 1], "growth_rate": 4}, image=True, sizes=IMAGE_SIZES),
    Case("MobileNet", "MobileNetBackbone", {
        "stackwise_expansion": [[1]], "stackwise_num_blocks": [1], "stackwise_num_filters": [[8]],
        "stackwise_kernel_size": [[3]], "stackwise_num_strides": [[2]], "stackwise_se_ratio": [[None]],
        "stackwise_activation": [["relu"]], "stackwise_padding": [[1]], "output_num_filters": 16, "depthwise_filters": 8,
        "depthwise_stride": 2, "depthwise_residual": False, "last_layer_filter": 16}, image=True, sizes=IMAGE_SIZES),
    Case("DINOv2", "DINOV2Backbone", {"patch_size": 8, "num_layers": 1, "hidden_dim": 16, "num_heads": 2,
                                      "intermediate_dim": 32, "image_shape": (32, 32, 3),
                                      "position_embedding_shape": (32, 32, 3)},
         image=True, sizes=({"b": 1, "h": 32, "w": 32}, {"b": 2, "h": 40, "w": 48})),
    # -- the rest of keras_hub.models' backbones (--all; --list-all says which are left out and why) --
    # encoder-only text models
    Case("ALBERT", "AlbertBackbone", {**TEXT, "num_heads": 2, "embedding_dim": 8, "num_groups": 1,
                                      "num_inner_repetitions": 1, "max_sequence_length": 64}),
    Case("DeBERTaV3", "DebertaV3Backbone", {**TEXT, "num_heads": 2, "max_sequence_length": 64, "bucket_size": 8}),
    Case("ELECTRA", "ElectraBackbone", {"vocab_size": VOCAB, "num_layers": 1, "num_heads": 2, "hidden_dim": 16,
                                        "embedding_dim": 8, "intermediate_dim": 32, "max_sequence_length": 64}),
    Case("ESM", "ESMBackbone", {**TEXT, "num_heads": 2}),
    Case("RoformerV2", "RoformerV2Backbone", {**TEXT, "num_heads": 2, "head_size": 8}),
    Case("XLMRoBERTa", "XLMRobertaBackbone", {**TEXT, "num_heads": 2, "max_sequence_length": 64}),
    Case("XLNet", "XLNetBackbone", {**TEXT, "num_heads": 2}),
    # decoder-only text models
    Case("Falcon", "FalconBackbone", {**TEXT, "num_attention_heads": 2}),
    Case("GPTNeoX", "GPTNeoXBackbone", {**TEXT, "num_heads": 2, "max_sequence_length": 64}),
    Case("Gemma3", "Gemma3Backbone", {**TEXT, "image_size": 16, "num_query_heads": 2, "num_key_value_heads": 1,
                                      "head_dim": 8}),
    Case("Gemma4", "Gemma4Backbone", {**TEXT, "image_size": 16, "num_query_heads": 2, "num_key_value_heads": 1,
                                      "head_dim": 8}),
    Case("Gemma3n", "Gemma3nBackbone", {
        "text_vocab_size": VOCAB, "text_hidden_size": 16, "num_hidden_layers": 1, "pad_token_id": 0,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "intermediate_size": [32],
        "hidden_activation": "gelu_approximate", "layer_types": ["full_attention"], "sliding_window": 8,
        "rope_theta": 10000.0, "max_position_embeddings": 64, "vocab_size_per_layer_input": VOCAB,
        "hidden_size_per_layer_input": 8, "altup_num_inputs": 2, "laurel_rank": 4}),
    Case("GptOss", "GptOssBackbone", {**TEXT, "num_query_heads": 2, "num_key_value_heads": 1, "num_experts": 2,
                                      "top_k": 1, "head_dim": 8}),
    Case("Llama3", "Llama3Backbone", {**TEXT, "num_query_heads": 2, "num_key_value_heads": 1}),
    Case("Mistral", "MistralBackbone", {**TEXT, "num_query_heads": 2, "num_key_value_heads": 1}),
    Case("Mixtral", "MixtralBackbone", {**TEXT, "num_query_heads": 2, "num_key_value_heads": 1, "num_experts": 2,
                                        "top_k": 1}),
    Case("Phi3", "Phi3Backbone", {**TEXT, "num_query_heads": 2, "num_key_value_heads": 1}),
    Case("Qwen", "QwenBackbone", {**TEXT, "num_query_heads": 2, "num_key_value_heads": 1}),
    Case("Qwen3", "Qwen3Backbone", {**TEXT, "num_query_heads": 2, "num_key_value_heads": 1, "head_dim": 8}),
    Case("QwenMoe", "QwenMoeBackbone", {**TEXT, "num_query_heads": 2, "num_key_value_heads": 1,
                                        "moe_intermediate_dim": 16, "shared_expert_intermediate_dim": 16,
                                        "num_experts": 2, "top_k": 1}),
    Case("Qwen3Moe", "Qwen3MoeBackbone", {**TEXT, "num_query_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
                                          "moe_intermediate_dim": 16, "num_experts": 2, "top_k": 1}),
    Case("Qwen3_5", "Qwen3_5Backbone", {**TEXT, "num_query_heads": 2, "num_key_value_heads": 1, "head_dim": 8}),
    Case("Qwen3_5Moe", "Qwen3_5MoeBackbone", {
        "vocabulary_size": VOCAB, "num_layers": 1, "hidden_dim": 16, "num_query_heads": 2, "num_key_value_heads": 1,
        "head_dim": 8, "moe_intermediate_dim": 16, "shared_expert_intermediate_size": 16, "num_experts": 2,
        "top_k": 1}),
    Case("RWKV7", "RWKV7Backbone", {"hidden_size": 16, "head_size": 8, "num_layers": 1, "vocabulary_size": VOCAB,
                                    "intermediate_dim": 32}),
    Case("SmolLM3", "SmolLM3Backbone", {
        **TEXT, "num_attention_heads": 2, "num_key_value_heads": 1, "attention_bias": False,
        "attention_dropout": 0.0, "rope_layer_enabled_list": [True], "layer_types": ["attention"], "mlp_bias": False,
        "layer_norm_epsilon": 1e-5, "max_position_embeddings": 64, "rope_theta": 10000.0,
        "partial_rotary_factor": 1.0}),
    # encoder-decoder text models: the encoder's t, the decoder's s
    Case("BART", "BartBackbone", {**TEXT, "num_heads": 2, "max_sequence_length": 64}, sizes=SEQ2SEQ_SIZES,
         inputs={"decoder_token_ids": "b, s", "decoder_padding_mask": "b, s"}),
    Case("EdRec", "EdRecBackbone", {"vocab_size": VOCAB, "num_layers_enc": 1, "num_layers_dec": 1, "hidden_dim": 16,
                                    "intermediate_dim": 32, "num_heads": 2}, sizes=SEQ2SEQ_SIZES,
         inputs={"decoder_token_ids": "b, s", "decoder_padding_mask": "b, s"}),
    Case("T5Gemma", "T5GemmaBackbone", T5GEMMA, sizes=SEQ2SEQ_SIZES,
         inputs={"decoder_token_ids": "b, s", "decoder_padding_mask": "b, s"}),
    Case("T5Gemma2", "T5Gemma2Backbone", T5GEMMA, sizes=SEQ2SEQ_SIZES,
         inputs={"decoder_token_ids": "b, s", "decoder_padding_mask": "b, s"}),
    # speech: audio features (Whisper: 8 mel bins; Moonshine: raw samples) and decoder tokens
    Case("Whisper", "WhisperBackbone", {**TEXT, "num_heads": 2, "num_mels": 8, "max_encoder_sequence_length": 128,
                                        "max_decoder_sequence_length": 64},
         sizes=({"b": 1, "t": 128, "s": 5}, {"b": 2, "t": 100, "s": 9}),
         inputs={"encoder_features": "b, t, 8", "decoder_token_ids": "b, s", "decoder_padding_mask": "b, s"}),
    Case("Moonshine", "MoonshineBackbone", {"vocabulary_size": VOCAB, "filter_dim": 16, "encoder_num_layers": 1,
                                            "decoder_num_layers": 1, "hidden_dim": 16, "intermediate_dim": 32,
                                            "encoder_num_heads": 2, "decoder_num_heads": 2},
         sizes=({"b": 1, "t": 1000, "s": 5}, {"b": 2, "t": 1600, "s": 9}),
         inputs={"encoder_input_values": "b, t, 1", "decoder_token_ids": "b, s", "decoder_padding_mask": "b, s"}),
    # image + text: a fixed-size image (16 x 16 in 4 x 4 patches)
    Case("PaliGemma", "PaliGemmaBackbone", {
        **TEXT, "image_size": 16, "num_query_heads": 2, "num_key_value_heads": 1, "head_dim": 8, "vit_patch_size": 4,
        "vit_num_heads": 2, "vit_hidden_dim": 16, "vit_num_layers": 1, "vit_intermediate_dim": 32},
         inputs={"images": "b, 16, 16, 3"}),
    # image models
    Case("DeiT", "DeiTBackbone", {"image_shape": (32, 32, 3), "patch_size": 8, "num_layers": 1, "num_heads": 2,
                                  "hidden_dim": 16, "intermediate_dim": 32},
         image=True, sizes=({"b": 1, "h": 32, "w": 32}, {"b": 2, "h": 39, "w": 35})),
    Case("DINOv3", "DINOV3Backbone", {"patch_size": 8, "num_layers": 1, "hidden_dim": 16, "num_heads": 2,
                                      "intermediate_dim": 32, "image_shape": (32, 32, 3)},
         image=True, sizes=({"b": 1, "h": 32, "w": 32}, {"b": 2, "h": 40, "w": 48})),
    Case("EfficientNet", "EfficientNetBackbone", {
        "stackwise_kernel_sizes": [3, 3], "stackwise_num_repeats": [1, 1], "stackwise_input_filters": [8, 8],
        "stackwise_output_filters": [8, 16], "stackwise_expansion_ratios": [1, 2],
        "stackwise_squeeze_and_excite_ratios": [0.0, 0.25], "stackwise_strides": [1, 2],
        "stackwise_block_types": ["fused", "unfused"], "stackwise_width_coefficients": [1.0, 1.0],
        "stackwise_depth_coefficients": [1.0, 1.0]}, image=True, sizes=IMAGE_SIZES),
    Case("HGNetV2", "HGNetV2Backbone", {
        "depths": [1, 1], "embedding_size": 8, "hidden_sizes": [16, 32], "stem_channels": [3, 8, 8],
        "hidden_act": "relu", "use_learnable_affine_block": False,
        "stackwise_stage_filters": [(8, 8, 16, 1, 1, 3), (16, 8, 32, 1, 1, 3)], "apply_downsample": [False, True],
        "use_lightweight_conv_block": [False, False]}, image=True, sizes=IMAGE_SIZES),
    Case("MiT", "MiTBackbone", MIT, image=True, sizes=({"b": 1, "h": 32, "w": 32}, {"b": 2, "h": 40, "w": 48})),
    Case("Swin", "SwinTransformerBackbone", {"image_shape": (32, 32, 3), "embed_dim": 8, "depths": [1, 1],
                                             "num_heads": [1, 2], "window_size": 2, "patch_size": 4},
         image=True, sizes=({"b": 1, "h": 32, "w": 32}, {"b": 2, "h": 40, "w": 48})),
    Case("ViTDet", "ViTDetBackbone", {"hidden_size": 16, "num_layers": 1, "intermediate_dim": 32, "num_heads": 2,
                                      "global_attention_layer_indices": [0], "image_shape": (32, 32, 3),
                                      "patch_size": 4, "num_output_channels": 8, "window_size": 2},
         image=True, sizes=({"b": 1, "h": 32, "w": 32}, {"b": 2, "h": 40, "w": 48})),
    # image backbones with an image encoder as an argument
    Case("SegFormer", "SegFormerBackbone", {"image_encoder": Sub("MiTBackbone", MIT), "projection_filters": 8},
         image=True, sizes=({"b": 1, "h": 32, "w": 32}, {"b": 2, "h": 40, "w": 48})),
    Case("RetinaNet", "RetinaNetBackbone", {"image_encoder": Sub("ResNetBackbone", RESNET), "min_level": 3,
                                            "max_level": 4, "use_p5": False}, image=True, sizes=IMAGE_SIZES),
    Case("DeepLabV3", "DeepLabV3Backbone", {"image_encoder": Sub("ResNetBackbone", RESNET),
                                            "spatial_pyramid_pooling_key": "P3", "upsampling_size": 4,
                                            "dilation_rates": [1, 2], "low_level_feature_key": "P2",
                                            "projection_filters": 8}, image=True, sizes=IMAGE_SIZES),
)
DEFAULT = 10
BY_NAME = {c.name: c for c in CASES}
# keras_hub.models' backbones left out of CASES, and why (--list-all)
SKIPPED: dict[str, str] = {
    "Backbone": "base class",
    "FeaturePyramidBackbone": "base class",
    "BASNetBackbone": "not attempted: an image encoder sub-model plus prediction and refinement heads",
    "BLIP2Backbone": "not attempted: three sub-models (vision encoder, Q-Former, language model)",
    "CLIPBackbone": "not attempted: two sub-encoders (vision, text)",
    "MetaCLIP2Backbone": "not attempted: two sub-encoders (vision, text)",
    "SigLIPBackbone": "not attempted: two sub-encoders (vision, text)",
    "DFineBackbone": "not attempted: an HGNetV2 sub-backbone and 25 required detector arguments",
    "DepthAnythingBackbone": "not attempted: a DINOv2 image encoder sub-model",
    "PARSeqBackbone": "not attempted: an image encoder sub-model and a decoder",
    "SAMBackbone": "not attempted: image encoder, prompt encoder and mask decoder sub-models",
    "SAM3PromptableConceptBackbone": "not attempted: six sub-models",
    "StableDiffusion3Backbone": "not attempted: VAE and CLIP-L/CLIP-G (and T5) sub-models",
    "FluxBackbone": "not attempted: a diffusion transformer with seven inputs (image, text, their ids, y, "
                    "timesteps, guidance)",
    "MobileNetV5Backbone": "not attempted: 17 required per-stage block arguments",
    "VideoPrismBackbone": "not attempted: video input float32[b, frames, h, w, 3]",
}

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LOC = re.compile(r"\s*loc\((?:[^()]|\([^()]*\))*\)")


# -- the child: one backbone, one mode, in a fresh process ----------------------------------------
def _first(text: str) -> str:
    lines = [ln.strip() for ln in _ANSI.sub("", text).splitlines() if ln.strip()]
    return lines[0] if lines else ""


def _error(err: BaseException) -> dict[str, Any]:
    """The exception as Keras re-raised it, and JAX's own (the innermost cause) under it.

    ``args`` are compared, not ``str()``: smtdims' error appends its witnesses to ``str()`` only.
    """
    root = err
    while (root.__cause__ or root.__context__) is not None:
        root = root.__cause__ or root.__context__  # type: ignore[assignment]
    return {"mro": [c.__module__ + "." + c.__qualname__ for c in type(err).__mro__],
            "args": [str(a) for a in err.args], "root_args": [str(a) for a in root.args],
            "first_line": _first(str(err)), "jax_line": _first(str(root)),
            "root": type(root).__module__ + "." + type(root).__qualname__}


def _child(mode: str, name: str, out_dir: str) -> dict[str, Any]:
    os.environ.setdefault("KERAS_BACKEND", "jax")
    if mode == "smtdims":
        import smtdims

        smtdims.install()
    import jax
    import keras
    import keras_hub
    import numpy as np
    from jax import export

    case = BY_NAME[name]
    keras.utils.set_random_seed(0)
    kwargs = {k: getattr(keras_hub.models, v.cls)(**v.kwargs) if isinstance(v, Sub) else v
              for k, v in case.kwargs.items()}
    model = getattr(keras_hub.models, case.cls)(**kwargs)
    names = [str(i.name) for i in model.inputs]
    dtypes = [str(i.dtype) for i in model.inputs]
    tv = [v.value for v in model.trainable_variables]
    ntv = [v.value for v in model.non_trainable_variables]

    def f(*xs: Any) -> Any:
        inputs = dict(zip(names, xs, strict=True)) if len(xs) > 1 else xs[0]
        return model.stateless_call(tv, ntv, inputs, training=False)[0]

    def native(xs: list[Any]) -> list[Any]:
        out = model(dict(zip(names, xs, strict=True)) if len(xs) > 1 else xs[0], training=False)
        return [np.asarray(x) for x in jax.tree.leaves(out)]

    def inputs_at(shapes: list[tuple[int, ...]], seed: int) -> list[Any]:
        rng = np.random.default_rng(seed)
        xs = []
        for n, dt, shape in zip(names, dtypes, shapes, strict=True):
            if np.issubdtype(np.dtype(dt), np.floating):
                xs.append(rng.standard_normal(shape).astype(dt))
            elif "mask" in n or dt == "bool":
                xs.append(np.ones(shape, dt))
            elif "segment" in n:
                xs.append(rng.integers(0, 2, shape).astype(dt))
            else:
                xs.append(rng.integers(0, VOCAB, shape).astype(dt))
        return xs

    def concrete(sizes: dict[str, int]) -> list[tuple[int, ...]]:
        """Each input's shape at these sizes: "b, t" -> (1, 5)."""
        return [tuple(eval(d, {}, dict(sizes)) for d in case.dims_of(n).split(",")) for n in names]

    def run(exp: Any, shapes: list[list[tuple[int, ...]]], tag: str) -> list[dict[str, Any]]:
        runs = []
        for i, shape in enumerate(shapes):  # shape: one per input
            xs = inputs_at(shape, i)
            got = [np.asarray(x) for x in jax.tree.leaves(exp.call(*xs))]
            if tag:
                np.savez(Path(out_dir) / f"{name}.{tag}.{i}.npz", *got)
            one = list(shape[0]) if len(set(shape)) == 1 else [list(x) for x in shape]
            try:
                want = native(xs)
            except Exception as err:  # the native model refuses the shape (a fixed input shape): no agreement
                runs.append({"shape": one, "allclose": False, "native_error": f"{type(err).__name__}: {_first(str(err))}"})
                continue
            ok = len(got) == len(want) and all(g.shape == w.shape and np.allclose(g, w, rtol=1e-4, atol=1e-4)
                                               for g, w in zip(got, want, strict=True))
            err = max((float(np.max(np.abs(g.astype(float) - w.astype(float)))) for g, w in zip(got, want, strict=True)
                       if g.shape == w.shape and g.size), default=0.0)
            runs.append({"shape": one, "allclose": bool(ok), "max_abs_err": err})
        return runs

    res: dict[str, Any] = {"inputs": [f"{dt}[{case.dims_of(n)}]" for n, dt in zip(names, dtypes, strict=True)]}
    if mode in ("stock", "smtdims"):
        scope = export.SymbolicScope(case.constraints)
        specs = [jax.ShapeDtypeStruct(export.symbolic_shape(case.dims_of(n), scope=scope), dt)
                 for n, dt in zip(names, dtypes, strict=True)]
        t0 = time.monotonic()
        try:
            exp = export.export(jax.jit(f))(*specs)
        except Exception as err:  # the outcome, compared stock vs smtdims
            res["error"] = _error(err)
        else:
            text = "\n".join(ln for ln in exp.mlir_module().splitlines() if not ln.startswith("#loc"))
            res["shapes"] = [str(a.shape) for a in exp.out_avals]
            res["hlo"] = hashlib.sha256(_LOC.sub("", text).encode()).hexdigest()[:16]
            res["runs"] = run(exp, [concrete(s) for s in case.sizes], mode)
        res["export_s"] = round(time.monotonic() - t0, 1)
        return res

    # mode == "fix": the whole fix, then the fixed specification on stock JAX
    import smtdims

    rep = smtdims.export_and_verify(f, *res["inputs"], constraints=case.constraints,
                                    fix=True, samples=4)
    fix = rep.fix
    res["export_ok"] = bool(rep.ok)
    if fix is None:
        res["fix"] = None
        return res
    res["fix"] = {"status": fix.status, "detail": fix.detail, "parts": [str(p) for p in fix.parts],
                  "shapes": list(fix.shapes), "constraints": list(fix.constraints), "verified": fix.verified,
                  "ok": bool(fix.ok), "seconds": round(fix.seconds, 1), "rounds": len(fix.rounds),
                  "lines": fix.lines()[:40],
                  "box": fix.box.sentence(name) if fix.box is not None else "",
                  "edges": [[env, runs, admits] for env, runs, admits in fix.extremes]}
    if fix.status != "fixed":
        return res
    samples = fix.report.samples if fix.report is not None else ()
    res["fix"]["samples"] = [[s.status, [list(x) for x in s.shapes]] for s in samples]
    smtdims.uninstall()  # the fixed specification, exported by stock JAX alone
    scope = export.SymbolicScope(tuple(fix.constraints))
    specs = [jax.ShapeDtypeStruct(export.symbolic_shape(s, scope=scope), dt) for s, dt in zip(fix.shapes, dtypes, strict=True)]
    try:
        exp = export.export(jax.jit(f))(*specs)
    except Exception as err:
        res["stock_fixed"] = {"error": _error(err)}
    else:
        shapes = [[tuple(x) for x in s.shapes] for s in samples if s.shapes and all(all(x) for x in s.shapes)][:2]
        res["stock_fixed"] = {"shapes": [str(a.shape) for a in exp.out_avals], "runs": run(exp, shapes, "")}
    return res


# -- the parent: the table -------------------------------------------------------------------------
def _spawn(mode: str, name: str, out_dir: str, timeout: float = 900) -> dict[str, Any]:
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    result = Path(out_dir) / f"{name}.{mode}.json"
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, name, out_dir]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"crash": f"timed out after {timeout:.0f} s"}
    if p.returncode != 0 or not result.exists():
        return {"crash": f"exit {p.returncode}: " + (p.stderr or p.stdout)[-800:]}
    return json.loads(result.read_text())


def _short(res: dict[str, Any]) -> str:
    if "crash" in res:
        return "CRASH " + res["crash"].strip().splitlines()[-1][:100]
    if "error" in res:
        e = res["error"]
        return f"{e['mro'][0].rsplit('.', 1)[1]}: {e['jax_line'][:110]}"
    return " ".join(res["shapes"])


def _compare(stock: dict[str, Any], ours: dict[str, Any], name: str, out_dir: str) -> list[str]:
    """How smtdims' outcome differs from stock's ([] when it does not)."""
    if "crash" in stock or "crash" in ours:
        return ["a child crashed"]
    if ("error" in stock) != ("error" in ours):
        if "error" in ours:
            return ["smtdims fails, stock exports"]
        return [d for d in ("stock fails, smtdims exports", _decided(stock["error"]["jax_line"], BY_NAME[name].constraints)) if d]
    if "error" in stock:
        s, o = stock["error"], ours["error"]
        diff = []
        if s["mro"][0] not in o["mro"]:
            diff.append(f"exception {o['mro'][0]} is not a {s['mro'][0]}")
        if s["args"] != o["args"] or s["root_args"] != o["root_args"]:
            diff.append("another message")
        if diff:
            diff.append(_decided(s["jax_line"], BY_NAME[name].constraints))
        return [d for d in diff if d]
    diff = []
    if stock["shapes"] != ours["shapes"]:
        diff.append("other output shapes")
    if stock["hlo"] != ours["hlo"]:
        diff.append("other StableHLO")
    import numpy as np

    for i in range(len(stock["runs"])):
        a, b = (np.load(Path(out_dir) / f"{name}.{m}.{i}.npz") for m in ("stock", "smtdims"))
        if list(a.keys()) != list(b.keys()) or not all(np.array_equal(a[k], b[k]) for k in a.keys()):
            diff.append(f"other numbers at {stock['runs'][i]['shape']}")
    return diff


_INCONCLUSIVE = re.compile(r"Symbolic dimension comparison '(.+)' (>=|<=|>|<|==|!=) '(.+)' is inconclusive\.")


def _decided(jax_line: str, constraints: tuple[str, ...]) -> str:
    """smtdims' answer to the comparison stock found inconclusive ('' when stock's error is another).

    Where the outcomes differ after such an error, this says whether smtdims decided the comparison
    (and so went on to another outcome) rather than answering it wrongly.
    """
    m = _INCONCLUSIVE.fullmatch(jax_line)
    if m is None:
        return ""
    import smtdims

    try:
        d = smtdims.decide(m[1], m[2], m[3], constraints=constraints)
    except Exception as err:  # reported, never fatal: the table is what matters
        return f"stock's inconclusive '{m[1]} {m[2]} {m[3]}': smtdims.decide raised {type(err).__name__}"
    return f"stock's inconclusive '{m[1]} {m[2]} {m[3]}' is {d.status} by smtdims.decide"


def _allowed(stock: dict[str, Any], name: str) -> bool:
    """The one difference the drop-in promise allows: stock stopped at a comparison it found
    inconclusive and smtdims proves it (true or false), so the export goes on to another outcome
    (ViT: past its reshape, to the genuine broadcasting error stock meets too once it gets there)."""
    if "error" not in stock:
        return False
    text = _decided(stock["error"]["jax_line"], BY_NAME[name].constraints)
    return text.endswith((" is true by smtdims.decide", " is false by smtdims.decide"))


def _runs(res: dict[str, Any]) -> tuple[int, int]:
    runs = res.get("runs", [])
    return sum(r["allclose"] for r in runs), len(runs)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="backbones to run (default: the first ten of --list)")
    ap.add_argument("--all", action="store_true", help="run every backbone of --list")
    ap.add_argument("--list", action="store_true", help="list the backbones and exit")
    ap.add_argument("--list-all", action="store_true",
                    help="every keras_hub.models *Backbone class: covered by which case, or why not")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per child process (default 900)")
    ap.add_argument("--no-fix", action="store_true", help="skip the whole fix of stock's failures")
    ap.add_argument("--json", help="write every result to this file")
    ap.add_argument("--child", nargs=3, metavar=("MODE", "NAME", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        mode, name, out_dir = args.child
        res = _child(mode, name, out_dir)
        Path(out_dir, f"{name}.{mode}.json").write_text(json.dumps(res))
        return 0
    if args.list:
        for i, c in enumerate(CASES):
            dims = ", ".join(f"{n}[{d}]" for n, d in c.inputs.items())
            print(f"{c.name:12} {c.cls:24} {c.dims}{'; ' + dims if dims else ''}"
                  f"{'' if i < DEFAULT else '   (by name or --all)'}")
        return 0
    if args.list_all:
        return _list_all()
    unknown = [n for n in args.names if n not in BY_NAME]
    if unknown:
        ap.error(f"unknown backbone(s) {', '.join(unknown)}; --list names them")
    cases = list(CASES) if args.all else [BY_NAME[n] for n in args.names] or list(CASES[:DEFAULT])
    from importlib.metadata import version

    print("keras: python " + sys.version.split()[0] + ", "
          + ", ".join(f"{p} {version(p)}" for p in ("jax", "keras", "keras-hub", "tensorflow")), flush=True)
    bad, results, t_all = 0, {}, time.monotonic()
    rows = []
    with tempfile.TemporaryDirectory(prefix="clients_keras.") as out_dir:
        for case in cases:
            t0 = time.monotonic()
            stock = _spawn("stock", case.name, out_dir, args.timeout)
            ours = _spawn("smtdims", case.name, out_dir, args.timeout)
            diff = _compare(stock, ours, case.name, out_dir)
            ok_s, n_s = _runs(stock)
            ok_o, n_o = _runs(ours)
            bad_runs = (n_s - ok_s) + (n_o - ok_o)
            fixed: dict[str, Any] = {}
            if "error" in stock and not args.no_fix:
                fixed = _spawn("fix", case.name, out_dir, args.timeout)
            allowed = bool(diff) and _allowed(stock, case.name)
            results[case.name] = {"stock": stock, "smtdims": ours, "differences": diff, "allowed": allowed,
                                  "fix": fixed}
            bad += (bool(diff) and not allowed) + bool(bad_runs)
            rows.append((case, stock, ours, diff, (ok_s, n_s, ok_o, n_o), fixed, time.monotonic() - t0))
            _print_row(*rows[-1])
        print()
        print("| backbone | inputs | stock | smtdims | same | exported vs native | whole fix (smtdims) | s |")
        print("|---|---|---|---|---|---|---|---|")
        for case, stock, ours, diff, (ok_s, n_s, ok_o, n_o), fixed, secs in rows:
            same = "yes" if not diff else ("allowed" if results[case.name]["allowed"] else "**NO**") + ": " + "; ".join(diff)
            if "error" not in ours and "crash" not in ours and "error" not in stock and "crash" not in stock:
                same += ", HLO identical, numbers identical" if not diff else ""
            runs = f"stock {ok_s}/{n_s}, smtdims {ok_o}/{n_o}" if n_s or n_o else "-"
            inputs = "; ".join(sorted(set(stock.get("inputs", [])))) if case.inputs else case.dims
            print(f"| {case.name} | {inputs} | {_short(stock)} | {_short(ours)} | {same} | {runs} | "
                  f"{_fix_cell(fixed)} | {secs:.0f} |")
    total = time.monotonic() - t_all
    summary = _summary(results)
    print()
    for key, label in SUMMARY:
        print(f"keras: {label}: {len(summary[key])}" + (f" ({', '.join(summary[key])})" if summary[key] else ""))
    print(f"keras: {len(cases)} backbones tried, {len(summary['stock_exports'])} export on stock, "
          f"{len(summary['smtdims_exports'])} with smtdims, {len(summary['stock_fails'])} stock failures, "
          f"{len(summary['fixes_found'])} fixes found, {len(summary['fixes_verified'])} verified end to end, "
          f"{len(summary['fixes_stock_native'])} fixed specs re-export on stock and agree with the native model; "
          f"{bad} with a difference the drop-in promise does not allow or a wrong result ({total:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": {k: {"count": len(v), "names": v} for k, v in summary.items()},
                                               "seconds": round(total), "results": results}, indent=1, default=str))
    return 1 if bad else 0


SUMMARY: tuple[tuple[str, str], ...] = (
    ("tried", "backbones tried"),
    ("stock_exports", "export on stock"),
    ("smtdims_exports", "export with smtdims"),
    ("stock_fails", "stock failures (the export raised)"),
    ("crashes", "a child crashed or timed out"),
    ("not_allowed", "outcome differs in a way the drop-in promise does not allow"),
    ("allowed", "outcome differs as allowed (stock inconclusive, smtdims decides)"),
    ("wrong_results", "an exported function disagrees with the native model"),
    ("fixes_found", "fixes found"),
    ("fixes_verified", "fixes verified end to end"),
    ("fixes_stock_native", "fixed specs that re-export on stock and agree with the native model"),
    ("fixes_not_confirmed", "fixes reported verified whose stock re-export or native comparison failed"),
)


def _summary(results: dict[str, dict[str, Any]]) -> dict[str, list[str]]:
    """The names in each category of ``SUMMARY``."""
    out: dict[str, list[str]] = {key: [] for key, _ in SUMMARY}
    for name, r in results.items():
        stock, ours, fixed = r["stock"], r["smtdims"], r["fix"] or {}
        fix = fixed.get("fix") or {}
        sf = fixed.get("stock_fixed", {})
        ok_sf, n_sf = _runs(sf)
        stock_native = bool(sf) and "error" not in sf and n_sf > 0 and ok_sf == n_sf
        checks = {
            "tried": True,
            "stock_exports": "shapes" in stock,
            "smtdims_exports": "shapes" in ours,
            "stock_fails": "error" in stock,
            "crashes": any("crash" in x for x in (stock, ours, fixed)),
            "not_allowed": bool(r["differences"]) and not r["allowed"],
            "allowed": bool(r["differences"]) and r["allowed"],
            "wrong_results": any(_runs(x)[0] < _runs(x)[1] for x in (stock, ours)),
            "fixes_found": fix.get("status") == "fixed",
            "fixes_verified": fix.get("status") == "fixed" and bool(fix.get("verified")),
            "fixes_stock_native": fix.get("status") == "fixed" and stock_native,
            "fixes_not_confirmed": fix.get("status") == "fixed" and bool(fix.get("verified")) and not stock_native,
        }
        for key, hit in checks.items():
            if hit:
                out[key].append(name)
    return out


def _list_all() -> int:
    """Every ``keras_hub.models`` class whose name ends in ``Backbone``: its cases, or why it has none."""
    os.environ.setdefault("KERAS_BACKEND", "jax")
    import keras_hub

    classes = sorted(n for n in dir(keras_hub.models) if n.endswith("Backbone"))
    covered = unknown = 0
    for n in classes:
        cls = getattr(keras_hub.models, n)
        cases = [c.name for c in CASES if getattr(keras_hub.models, c.cls) is cls]
        alias = "" if any(c.cls == n for c in CASES) else " (the same class)"
        if cases:
            covered += 1
            print(f"{n:32} covered: {', '.join(cases)}{alias if alias and cases else ''}")
        else:
            unknown += n not in SKIPPED
            print(f"{n:32} skipped: {SKIPPED.get(n, 'NOT COVERED, no reason recorded')}")
    print(f"keras_hub {keras_hub.__version__}: {len(classes)} *Backbone classes, {covered} covered, "
          f"{len(classes) - covered} skipped ({unknown} without a reason)")
    return 0


def _fix_cell(fixed: dict[str, Any]) -> str:
    if not fixed:
        return "-"
    if "crash" in fixed:
        return "CRASH " + fixed["crash"].strip().splitlines()[-1][:100]
    fix = fixed.get("fix")
    if fix is None:
        return "exports with smtdims: no fix needed" if fixed.get("export_ok") else "no fix reported"
    cell = f"{fix['status']}: " + ("; ".join(fix["parts"]) or fix["detail"] or "-")
    if fix["status"] == "fixed":
        cell += f" (verified end to end: {'yes' if fix['verified'] else 'NO'}"
        samples = fix.get("samples", [])
        cell += f", {sum(s[0] == 'pass' for s in samples)}/{len(samples)} samples pass"
        sf = fixed.get("stock_fixed", {})
        if "error" in sf:
            cell += f"; stock JAX refuses the fixed spec: {sf['error']['jax_line'][:80]}"
        elif sf:
            ok, n = _runs(sf)
            cell += f"; stock JAX exports the fixed spec, {ok}/{n} runs match native"
            refused = [r for r in sf.get("runs", []) if "native_error" in r]
            if refused:
                cell += f"; the native model refuses {refused[0]['shape']}: {refused[0]['native_error'][:120]}"
        cell += f"; {fix['seconds']:.0f} s)"
    return cell


def _print_row(case: Case, stock: dict[str, Any], ours: dict[str, Any], diff: list[str], runs: tuple[int, int, int, int],
               fixed: dict[str, Any], secs: float) -> None:
    print(f"{case.name}: stock {_short(stock)}", flush=True)
    print(f"  smtdims: {'the same' if not diff else 'DIFFERENT (' + '; '.join(diff) + '): ' + _short(ours)}", flush=True)
    if runs[1] or runs[3]:
        print(f"  exported vs native at {[list(r['shape']) for r in stock.get('runs', ours.get('runs', []))]}: "
              f"stock {runs[0]}/{runs[1]}, smtdims {runs[2]}/{runs[3]} allclose", flush=True)
    if fixed:
        print(f"  whole fix: {_fix_cell(fixed)}", flush=True)
        for ln in (fixed.get("fix") or {}).get("lines", [])[:12]:
            print(f"    {ln}", flush=True)
    print(f"  [{secs:.0f} s]", flush=True)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
