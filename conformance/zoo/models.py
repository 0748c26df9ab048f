"""The zoo: real model code from `transformers` and `timm`, in tiny random-initialised configurations.

Nobody on this project wrote these models, which is the point: they use attention, norms, rotary
embeddings, mixtures of experts and losses the way their authors do. Each entry builds its model from
a config (no downloads, no network) and makes a seeded batch; `loss` runs one forward to a scalar.
Dropout is off everywhere, so eager and a compiled model see the same program.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from conformance.zoo import deps

VOCAB, SEQ, BATCH, IMAGE = 64, 8, 2, 32


@dataclass(frozen=True)
class ZooModel:
    """`build()` returns the model (seeded by the caller); `batch()` its inputs; `loss(model, batch)`.
    `for_float64(model)` adapts the float64 reference copy where a kernel has no float64 form."""

    name: str
    covers: str
    build: Callable[[], torch.nn.Module]
    batch: Callable[[], dict]
    loss: Callable[[torch.nn.Module, dict], torch.Tensor]
    for_float64: Callable[[torch.nn.Module], None] | None = None


def _hf_loss(model, batch):
    return model(**batch).loss


def _timm_loss(model, batch):
    return F.cross_entropy(model(batch["pixels"]), batch["labels"])


def _tokens() -> dict:
    ids = torch.randint(0, VOCAB, (BATCH, SEQ))
    return {"input_ids": ids, "labels": ids}


def _classified_tokens() -> dict:
    return {"input_ids": torch.randint(0, VOCAB, (BATCH, SEQ)), "labels": torch.randint(0, 3, (BATCH,))}


def _seq2seq() -> dict:
    return {"input_ids": torch.randint(0, VOCAB, (BATCH, SEQ)), "labels": torch.randint(0, VOCAB, (BATCH, 5))}


def _images(key: str = "pixels") -> Callable[[], dict]:
    return lambda: {key: torch.randn(BATCH, 3, IMAGE, IMAGE), "labels": torch.randint(0, 10, (BATCH,))}


_DECODER = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=64, attention_dropout=0.0)  # fmt: skip


def _hf(config: str, model: str, **settings) -> Callable[[], torch.nn.Module]:
    def build():
        transformers = deps.transformers()
        return getattr(transformers, model)(getattr(transformers, config)(**settings))

    return build


def _timm(module: str, cls: str, **settings) -> Callable[[], torch.nn.Module]:
    def build():
        deps.timm()
        import importlib

        return getattr(importlib.import_module(f"timm.models.{module}"), cls)(num_classes=10, **settings)

    return build


def _experts_as_loops(model: torch.nn.Module) -> None:
    # transformers runs experts through torch._grouped_mm, which has no float64 kernel; its per-expert
    # loop computes the same function.
    model.config._experts_implementation = "eager"


def _timm_resnet() -> torch.nn.Module:
    deps.timm()
    from timm.models.resnet import BasicBlock, ResNet

    return ResNet(block=BasicBlock, layers=(1, 1, 1, 1), num_classes=10)


ZOO = [
    ZooModel("llama", "decoder LM: RMSNorm, rotary embeddings, grouped-query SDPA, SwiGLU",
             _hf("LlamaConfig", "LlamaForCausalLM", num_key_value_heads=2, **_DECODER), _tokens, _hf_loss),
    ZooModel("mistral", "decoder LM: sliding-window attention (window 4 of 8 tokens)",
             _hf("MistralConfig", "MistralForCausalLM", num_key_value_heads=2, sliding_window=4, **_DECODER),
             _tokens, _hf_loss),
    ZooModel("qwen2", "decoder LM: biased q/k/v projections, GQA, rotary",
             _hf("Qwen2Config", "Qwen2ForCausalLM", num_key_value_heads=1, **_DECODER), _tokens, _hf_loss),
    ZooModel("gemma", "decoder LM: GeGLU, scaled embeddings, (1 + w) RMSNorm, multi-query attention",
             _hf("GemmaConfig", "GemmaForCausalLM", num_key_value_heads=1, head_dim=8, **_DECODER),
             _tokens, _hf_loss),
    ZooModel("mixtral", "mixture-of-experts decoder: top-2 routing over 4 experts",
             _hf("MixtralConfig", "MixtralForCausalLM", num_key_value_heads=2, num_local_experts=4,
                 num_experts_per_tok=2, **_DECODER), _tokens, _hf_loss, for_float64=_experts_as_loops),
    ZooModel("gpt2", "decoder LM: learned positions, GELU MLP, Conv1D projections",
             _hf("GPT2Config", "GPT2LMHeadModel", vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0), _tokens, _hf_loss),
    ZooModel("bert", "encoder: post-norm, GELU, padding-aware attention, sequence classification",
             _hf("BertConfig", "BertForSequenceClassification", vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                 num_attention_heads=4, intermediate_size=64, max_position_embeddings=64, num_labels=3,
                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0), _classified_tokens, _hf_loss),
    ZooModel("t5", "encoder-decoder: relative position buckets, cross-attention, T5 layer norm",
             _hf("T5Config", "T5ForConditionalGeneration", vocab_size=VOCAB, d_model=32, d_ff=64, d_kv=8,
                 num_layers=2, num_decoder_layers=2, num_heads=4, dropout_rate=0.0, decoder_start_token_id=0),
             _seq2seq, _hf_loss),
    ZooModel("vit", "vision transformer (transformers): patch embedding, CLS token, pre-norm",
             _hf("ViTConfig", "ViTForImageClassification", image_size=IMAGE, patch_size=8, hidden_size=32,
                 num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, num_labels=10,
                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
             _images("pixel_values"), _hf_loss),
    ZooModel("timm_vit", "vision transformer (timm): fused-attention path, layer scale off",
             _timm("vision_transformer", "VisionTransformer", img_size=IMAGE, patch_size=8, embed_dim=32, depth=2,
                   num_heads=4), _images(), _timm_loss),
    ZooModel("timm_resnet", "convnet with batch norm (training statistics), ReLU, max pooling",
             _timm_resnet, _images(), _timm_loss),
    ZooModel("timm_convnext", "convnet with channels-last layer norm, depthwise convs, GELU, layer scale",
             _timm("convnext", "ConvNeXt", depths=(1, 1, 1, 1), dims=(16, 32, 48, 64)), _images(), _timm_loss),
]  # fmt: skip

BY_NAME = {model.name: model for model in ZOO}
