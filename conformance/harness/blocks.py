"""The model-block tier: small, realistic blocks written in the suite, checked like the zoo's models.

Each block is the way model code is really written (pre-norm residuals, heads split by views, rotary
embeddings computed inside the program, a channels-last layer norm, a loss at the end), small enough for
Triton's interpreter. `conformance/test_blocks.py` runs each through a backend in fp32, bf16 parameters
and bf16 autocast, and compares the loss and every parameter's gradient with float64 eager under the
zoo's eager-relative verdict (`conformance.zoo.check`); a block that fails is bisected to the first node
of its graph that disagrees (`conformance.harness.bisect`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from conformance.zoo.models import ZooModel

VOCAB, SEQ, BATCH, WIDTH, HEADS = 48, 12, 2, 32, 4


class GptBlock(nn.Module):
    """GPT-2 style: token and position embeddings, pre-norm causal attention and GELU MLP, tied LM head."""

    def __init__(self):
        super().__init__()
        self.tokens, self.positions = nn.Embedding(VOCAB, WIDTH), nn.Embedding(SEQ, WIDTH)
        self.norm1, self.norm2, self.norm_out = nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH), nn.LayerNorm(WIDTH)
        self.qkv, self.proj = nn.Linear(WIDTH, 3 * WIDTH), nn.Linear(WIDTH, WIDTH)
        self.up, self.down = nn.Linear(WIDTH, 4 * WIDTH), nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, t = ids.shape
        x = self.tokens(ids) + self.positions(torch.arange(t, device=ids.device))
        q, k, v = self.qkv(self.norm1(x)).split(WIDTH, dim=-1)
        q, k, v = (z.view(b, t, HEADS, -1).transpose(1, 2) for z in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(b, t, WIDTH))
        x = x + self.down(F.gelu(self.up(self.norm2(x)), approximate="tanh"))
        return self.norm_out(x) @ self.tokens.weight.t()


class RmsNorm(nn.Module):
    def __init__(self, width: int, eps: float = 1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(width) + 0.1 * torch.randn(width)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # As LLaMA does: normalise in float32 whatever the activations' dtype, scale in theirs.
        x32 = x.float()
        return self.weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class LlamaBlock(nn.Module):
    """LLaMA style: RMSNorm, rotary embeddings built from positions inside the program, grouped-query
    attention (4 query heads over 2 key/value heads), SwiGLU MLP, residuals; a mean-squared loss."""

    KV_HEADS = 2

    def __init__(self):
        super().__init__()
        head = WIDTH // HEADS
        self.norm1, self.norm2 = RmsNorm(WIDTH), RmsNorm(WIDTH)
        self.q = nn.Linear(WIDTH, WIDTH, bias=False)
        self.kv = nn.Linear(WIDTH, 2 * self.KV_HEADS * head, bias=False)
        self.o = nn.Linear(WIDTH, WIDTH, bias=False)
        self.gate, self.up = nn.Linear(WIDTH, 3 * WIDTH, bias=False), nn.Linear(WIDTH, 3 * WIDTH, bias=False)
        self.down = nn.Linear(3 * WIDTH, WIDTH, bias=False)

    def rotary(self, t: int, head: int, device) -> tuple[torch.Tensor, torch.Tensor]:
        inverse = 1.0 / (10000.0 ** (torch.arange(0, head, 2, device=device, dtype=torch.float32) / head))
        angles = torch.outer(torch.arange(t, device=device, dtype=torch.float32), inverse)
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos(), angles.sin()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        head = WIDTH // HEADS
        h = self.norm1(x)
        q = self.q(h).view(b, t, HEADS, head).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.KV_HEADS, head).permute(2, 0, 3, 1, 4)
        cos, sin = self.rotary(t, head, x.device)
        q, k = _rotate(q, cos.to(q.dtype), sin.to(q.dtype)), _rotate(k, cos.to(k.dtype), sin.to(k.dtype))
        repeat = HEADS // self.KV_HEADS
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(attended.transpose(1, 2).reshape(b, t, WIDTH))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class ConvNextBlock(nn.Module):
    """ConvNeXt style on a channels-last image: depthwise 7x7 conv, layer norm over channels in NHWC,
    pointwise MLP with GELU, layer scale, residual."""

    CHANNELS = 16

    def __init__(self):
        super().__init__()
        c = self.CHANNELS
        self.depthwise = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.LayerNorm(c, eps=1e-6)
        self.up, self.down = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.scale = nn.Parameter(0.5 + 0.1 * torch.randn(c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.depthwise(x).permute(0, 2, 3, 1)
        h = self.scale * self.down(F.gelu(self.up(self.norm(h))))
        return x + h.permute(0, 3, 1, 2)


class ClassifierHead(nn.Module):
    """An image classifier's head: global average pool, layer norm, linear, cross-entropy with label
    smoothing (the loss is part of the program)."""

    def __init__(self, channels: int = 24, classes: int = 7):
        super().__init__()
        self.norm, self.fc = nn.LayerNorm(channels), nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.norm(x.mean(dim=(2, 3))))


def _lm_loss(model, batch):
    logits = model(batch["ids"])
    return F.cross_entropy(logits.flatten(0, 1).float(), batch["ids"].roll(-1, dims=1).flatten())


def _mse_loss(model, batch):
    return F.mse_loss(model(batch["x"]).float(), batch["target"].float())


def _smoothed_loss(model, batch):
    return F.cross_entropy(model(batch["x"]).float(), batch["labels"], label_smoothing=0.1)


def _tokens() -> dict:
    return {"ids": torch.randint(0, VOCAB, (BATCH, SEQ))}


def _sequence() -> dict:
    return {"x": torch.randn(BATCH, SEQ, WIDTH), "target": torch.randn(BATCH, SEQ, WIDTH)}


def _channels_last_image() -> dict:
    c = ConvNextBlock.CHANNELS
    x = torch.randn(BATCH, c, 9, 11).contiguous(memory_format=torch.channels_last)
    return {"x": x, "target": torch.randn(BATCH, c, 9, 11)}


def _features() -> dict:
    # Odd spatial sizes and a non-contiguous input (a channel slice of a wider map).
    return {"x": torch.randn(BATCH, 30, 5, 7)[:, 3:27], "labels": torch.randint(0, 7, (BATCH,))}


BLOCKS = [
    ZooModel("gpt_block", "GPT-2 style: embeddings, pre-norm causal SDPA, GELU MLP, tied head, LM loss",
             GptBlock, _tokens, _lm_loss),
    ZooModel("llama_block", "LLaMA style: RMSNorm, rotary from positions, GQA SDPA, SwiGLU, MSE loss",
             LlamaBlock, _sequence, _mse_loss),
    ZooModel("convnext_block", "ConvNeXt style: depthwise conv, channels-last layer norm, GELU MLP, layer scale",
             ConvNextBlock, _channels_last_image, _mse_loss),
    ZooModel("classifier_head", "pool, layer norm, linear, label-smoothed cross-entropy on a strided input",
             ClassifierHead, _features, _smoothed_loss),
]  # fmt: skip

BLOCKS_BY_NAME = {block.name: block for block in BLOCKS}
# fp32; bf16 under autocast (the zoo's "bf16"); the parameters and inputs themselves in bfloat16.
PRECISIONS = ("fp32", "bf16", "bf16-params")
