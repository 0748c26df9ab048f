"""The model-block tier: small, realistic blocks written in the suite, checked whole against eager.

Four blocks — a GPT-style attention block, a LLaMA-style block (RMSNorm, rotary embeddings built in
the program, SwiGLU), a ConvNeXt-style block (depthwise convolution, channels-last layer norm, layer
scale) and a classifier head with a cross-entropy loss — each returning a scalar loss. A case runs a
block's forward and backward compiled and in eager, in one precision mode (float32, bfloat16 weights,
or float32 weights under bfloat16 autocast), and compares the loss and every parameter's gradient
under the suite's oracle, with the block in float64 as the reference. When a block fails, the Dynamo
graph of its forward is bisected: the first node whose value, compiled as a graph that ends there,
disagrees with eager's is named, with the tensor it made.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from conformance.oracle import compare
from conformance.runner import recording

MODES = ("float32", "bfloat16", "bf16_autocast")


class GPTBlock(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=-1)
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(b, t, d))
        x = x + self.down(F.gelu(self.up(self.norm2(x)), approximate="tanh"))
        return x.pow(2).mean()


def rotary(x: torch.Tensor) -> torch.Tensor:
    """Rotary position embedding, its angles made in the program from arange (created tensors)."""
    t, half = x.shape[-2], x.shape[-1] // 2
    inverse = 1.0 / (10000 ** (torch.arange(0, half, device=x.device, dtype=torch.float32) / half))
    angles = torch.outer(torch.arange(t, device=x.device, dtype=torch.float32), inverse)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, first * sin + second * cos], dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4, hidden: int = 48):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.RMSNorm(dim, eps=1e-6), nn.RMSNorm(dim, eps=1e-6)
        self.q, self.k, self.v, self.o = (nn.Linear(dim, dim, bias=False) for _ in range(4))
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        h = self.norm1(x)
        q, k, v = (
            p(h).view(b, t, self.heads, d // self.heads).transpose(1, 2) for p in (self.q, self.k, self.v)
        )
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        attended = F.scaled_dot_product_attention(rotary(q), rotary(k), v, attn_mask=mask)
        x = x + self.o(attended.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        return x.pow(2).mean()


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int = 16):
        super().__init__()
        self.depthwise = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.scale = nn.Parameter(torch.full((dim,), 0.5))

    def forward(self, x):
        y = self.depthwise(x).permute(0, 2, 3, 1)  # channels last: the norm runs over channels
        y = self.down(F.gelu(self.up(self.norm(y)))) * self.scale
        return (x + y.permute(0, 3, 1, 2)).pow(2).mean()


class ClassifierHead(nn.Module):
    def __init__(self, dim: int = 32, classes: int = 10):
        super().__init__()
        self.norm, self.fc = nn.LayerNorm(dim), nn.Linear(dim, classes)
        self.register_buffer("target", torch.tensor([3, 0, 9, 3]))

    def forward(self, x):
        logits = self.fc(self.norm(x.mean(dim=1)))
        return F.cross_entropy(logits, self.target, label_smoothing=0.1)


@dataclass(frozen=True)
class Block:
    name: str
    make: Callable[[], nn.Module]
    input_shape: tuple[int, ...]


BLOCKS = {
    b.name: b
    for b in (
        Block("gpt_attention", GPTBlock, (2, 8, 32)),
        Block("llama", LlamaBlock, (2, 8, 32)),
        Block("convnext", ConvNeXtBlock, (2, 16, 9, 9)),
        Block("classifier_head", ClassifierHead, (4, 6, 32)),
    )
}


def made(block: Block, mode: str, dtype: torch.dtype | None, device: str):
    """The block and its input, seeded; in `dtype` (None: the mode's)."""
    torch.manual_seed(0)
    module = block.make().to(device)
    x = torch.randn(block.input_shape, device=device)
    wanted = dtype or (torch.bfloat16 if mode == "bfloat16" else torch.float32)
    return module.to(wanted), x.to(wanted)


def run(module: nn.Module, x: torch.Tensor, mode: str, compiled: Callable | None = None):
    """The loss and every parameter's gradient, in parameter order."""
    module.zero_grad(set_to_none=True)
    autocast = (
        torch.autocast(x.device.type, dtype=torch.bfloat16)
        if mode == "bf16_autocast" and x.dtype != torch.float64
        else nullcontext()
    )
    with autocast:
        loss = (module if compiled is None else compiled)(x)
    loss.backward()
    return loss.detach(), [p.grad for p in module.parameters()]


def check_block(block: Block, mode: str, backend: str, device: str) -> list[str]:
    """'' lines: what differs, the first disagreeing node last (empty when the block passes)."""
    eager_module, x = made(block, mode, None, device)
    expected = run(eager_module, x, mode)
    reference_module, x64 = made(block, mode, torch.float64, device)
    reference = run(reference_module, x64, mode)
    compiled_module, xc = made(block, mode, None, device)
    torch._dynamo.reset()
    graphs: list = []
    compiled = torch.compile(compiled_module, backend=recording(backend, set(), graphs), dynamic=False)
    actual = run(compiled_module, xc, mode, compiled)
    names = ["loss"] + [f"grad {name}" for name, _ in compiled_module.named_parameters()]
    problems = []
    for name, a, e, r in zip(
        names,
        [actual[0], *actual[1]],
        [expected[0], *expected[1]],
        [reference[0], *reference[1]],
        strict=True,
    ):
        verdict = compare(a, e, r)
        if not verdict.ok:
            problems.append(f"{name}: {verdict.message}")
    if problems and graphs:
        problems.append(first_disagreement(graphs, backend, mode))
    torch._dynamo.reset()
    return problems


class Recorder(torch.fx.Interpreter):
    """Runs a graph eagerly, keeping every node's value."""

    def run_node(self, node):
        value = super().run_node(node)
        self.values[node.name] = value
        return value


def ending_at(graph_module: torch.fx.GraphModule, node_name: str) -> torch.fx.GraphModule:
    """A copy of the graph that returns the value of one node (later nodes are dropped)."""
    graph = torch.fx.Graph()
    mapping: dict = {}
    for node in graph_module.graph.nodes:
        if node.op == "output":
            break
        mapping[node] = graph.node_copy(node, lambda n: mapping[n])
        if node.name == node_name:
            graph.output((mapping[node],))
            break
    graph.eliminate_dead_code()
    return torch.fx.GraphModule(graph_module, graph)


def first_disagreement(graphs: list, backend: str, mode: str) -> str:
    """The first node (in graph order) of the forward graph whose value, compiled as a graph ending
    there, is not eager's under the oracle: bisected, so about log2(nodes) compiles."""
    from conformance.runner import backend_function

    graph_module, inputs = graphs[0]
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if mode == "bf16_autocast" else nullcontext()
    recorder = Recorder(graph_module)
    recorder.values = {}
    try:
        with torch.no_grad(), autocast:
            recorder.run(*inputs)
        candidates = [
            n.name
            for n in graph_module.graph.nodes
            if n.op in ("call_function", "call_method", "call_module")
            and isinstance(recorder.values.get(n.name), torch.Tensor)
        ]

        def disagrees(index: int) -> str:
            name = candidates[index]
            torch._dynamo.reset()
            compiled = backend_function(backend)(ending_at(graph_module, name), inputs)
            with torch.no_grad(), autocast:
                value = compiled(*inputs)
            value = value[0] if isinstance(value, list | tuple) else value
            verdict = compare(value, recorder.values[name])
            return "" if verdict.ok else verdict.message

        low, high = 0, len(candidates) - 1
        if not candidates or not disagrees(high):
            return "bisect: the forward graph's nodes agree with eager (the difference is in the backward)"
        while low < high:
            middle = (low + high) // 2
            if disagrees(middle):
                high = middle
            else:
                low = middle + 1
        node = next(n for n in graph_module.graph.nodes if n.name == candidates[low])
        return f"first disagreeing node: {node.format_node()} — {disagrees(low)}"
    except Exception as error:  # the bisect is a diagnosis: its own failure must not hide the verdict
        return f"bisect could not run: {type(error).__name__}: {str(error).splitlines()[0][:200]}"
