"""The gate's workloads, as data: named programs that matter, each with the sizes it runs at.

A workload is a pure function of tensors (or lists of tensors), a builder of its inputs, and four
sizes: on a GPU, `gpu` (kernel time, launches, bytes) and `gpu_tiny` (host time per call: launch
overhead); on the CPU tier, `cpu` (small and awkward: kernel launches and bytes) and `cpu_tiny`
(instruction counts of one call, which run under callgrind and must stay cheap).
A training workload (`backward=True`) runs its forward and then the gradients of every output with
respect to the inputs that require them. Any backend can run any workload (see `perfgate.backends`).

The fewest bytes a workload must move is the same for every workload: each distinct input tensor read
once and each output written once (`fewest_bytes`); achieved bandwidth is measured against it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

BF16 = torch.bfloat16


def pointwise_chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * y
    a = a + 1.0
    a = torch.relu(a)
    a = a * 0.5
    a = a - y
    a = torch.sigmoid(a)
    a = a * x
    a = torch.tanh(a)
    a = a + y
    return a * 2.0


def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(x + bias)


def bias_gelu_tanh(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.gelu(x + bias, approximate="tanh")


def add_layer_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    # A pre-norm transformer's residual step: the sum continues down the residual stream.
    hidden = x + residual
    return hidden, F.layer_norm(hidden, hidden.shape[-1:], weight, bias, eps=1e-5)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps=1e-5)


def softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1)


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    # LLaMA's form: statistics in fp32, the result cast back before the weight.
    variance = x.float().pow(2).mean(-1, keepdim=True)
    return (x.float() * torch.rsqrt(variance + 1e-6)).to(x.dtype) * weight


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    # The gated MLP's activation (LLaMA): silu of the gate times the up projection.
    return F.silu(a) * b


def cross_entropy(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    # A language model's loss: bf16 logits, the math in fp32 as training code writes it; forward only.
    return F.cross_entropy(logits.float(), targets)


def optimizer_step(params: list[torch.Tensor], optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """A real `torch.optim` step: the parameters and the optimizer's state are updated in place."""
    optimizer.step()
    return params


def mlp_block(
    x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor
) -> torch.Tensor:
    # The matmuls stay extern calls for every backend but Inductor; bias, gelu and residual fuse.
    return x + F.linear(F.gelu(F.linear(x, w1, b1), approximate="tanh"), w2, b2)


def _randn(*shape: int, device: str, dtype: torch.dtype = BF16, grad: bool = False) -> torch.Tensor:
    return torch.randn(shape, device=device, dtype=dtype).requires_grad_(grad)


def two_matrices(rows: int, cols: int, device: str) -> list[torch.Tensor]:
    return [_randn(rows, cols, device=device), _randn(rows, cols, device=device)]


def matrix_and_row(rows: int, cols: int, device: str) -> list[torch.Tensor]:
    return [_randn(rows, cols, device=device), _randn(cols, device=device)]


def one_matrix(rows: int, cols: int, device: str) -> list[torch.Tensor]:
    return [_randn(rows, cols, device=device)]


def logits_and_targets(rows: int, cols: int, device: str) -> list[torch.Tensor]:
    """Logits over `cols` classes (bf16) and one int64 class index per row."""
    return [_randn(rows, cols, device=device), torch.randint(0, cols, (rows,), device=device)]


def logits_with_grad_and_targets(rows: int, cols: int, device: str) -> list[torch.Tensor]:
    logits, targets = logits_and_targets(rows, cols, device)
    return [logits.requires_grad_(), targets]


def residual_and_norm(rows: int, cols: int, device: str, grad: bool = False) -> list[torch.Tensor]:
    return [
        _randn(rows, cols, device=device, grad=grad),
        _randn(rows, cols, device=device, grad=grad),
        _randn(cols, device=device, grad=grad),
        _randn(cols, device=device, grad=grad),
    ]


def norm_with_grads(rows: int, cols: int, device: str) -> list[torch.Tensor]:
    return [
        _randn(rows, cols, device=device, grad=True),
        *residual_and_norm(rows, cols, device, grad=True)[2:],
    ]


def residual_and_norm_with_grads(rows: int, cols: int, device: str) -> list[torch.Tensor]:
    return residual_and_norm(rows, cols, device, grad=True)


def _parameters(tensors: int, rows: int, cols: int, device: str) -> list[torch.Tensor]:
    """Parameters shaped like a transformer's: matrices and vectors, alternately (fp32, as AdamW keeps),
    each with a gradient."""
    shapes = [(rows, cols) if i % 2 == 0 else (cols,) for i in range(tensors)]
    params = [_randn(*s, device=device, dtype=torch.float32, grad=True) for s in shapes]
    for p in params:
        p.grad = torch.randn_like(p)
    return params


def _ready(params: list[torch.Tensor], optimizer: torch.optim.Optimizer) -> list[Any]:
    # One eager step makes the state, so the compiled step is the steady state's one graph.
    optimizer.step()
    return [params, optimizer]


def adamw(tensors: int, rows: int, cols: int, device: str) -> list[Any]:
    """AdamW as issue 13 measured it: foreach, capturable with a tensor lr — on the GPU; eager takes
    capturable only on accelerators, so the CPU tier's is foreach with a float lr."""
    params = _parameters(tensors, rows, cols, device)
    capturable = device != "cpu"
    lr = torch.tensor(1e-3, device=device) if capturable else 1e-3
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.01, foreach=True, capturable=capturable)
    return _ready(params, optimizer)


def sgd_momentum(tensors: int, rows: int, cols: int, device: str) -> list[Any]:
    params = _parameters(tensors, rows, cols, device)
    return _ready(params, torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=True))


def optimizer_bytes(inputs: list[Any]) -> int:
    """Bytes a perfect step moves: every parameter and state tensor read and written, every gradient
    read (AdamW: 28 bytes per fp32 parameter, plus its step count; SGD with momentum: 20)."""
    params, optimizer = inputs
    total = 0
    for p in params:
        state = [v for v in optimizer.state[p].values() if isinstance(v, torch.Tensor)]
        total += sum(2 * t.numel() * t.element_size() for t in (p, *state))
        total += p.grad.numel() * p.grad.element_size()
    return total


def mlp_weights(tokens: int, hidden: int, ffn: int, device: str) -> list[torch.Tensor]:
    scale = hidden**-0.5  # keeps activations of order one, as a trained layer's are
    return [
        _randn(tokens, hidden, device=device),
        _randn(ffn, hidden, device=device) * scale,
        _randn(ffn, device=device),
        _randn(hidden, ffn, device=device) * ffn**-0.5,
        _randn(hidden, device=device),
    ]


SIZES = ("gpu", "gpu_tiny", "cpu", "cpu_tiny")


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    program: Callable[..., Any]
    make_inputs: Callable[..., list[Any]]
    sizes: dict[str, dict[str, int]]  # for each of SIZES: keyword arguments of make_inputs
    backward: bool = False
    # The fewest bytes one call moves, from its inputs, where `fewest_bytes` cannot see them: a step
    # that updates tensors in place (an optimizer's state is not among its arguments).
    moved: Callable[[list[Any]], int] | None = None

    def __post_init__(self):
        if set(self.sizes) != set(SIZES):
            raise ValueError(f"workload {self.name}: sizes must be exactly {SIZES}, got {sorted(self.sizes)}")

    def inputs(self, size: str, device: str) -> list[Any]:
        torch.manual_seed(0)
        return self.make_inputs(**self.sizes[size], device=device)


# GPU sizes move hundreds of MB, far past any L2; CPU sizes are odd, so masks and tails are exercised,
# and small, since the CPU runs kernels in Triton's interpreter.
ROWS_COLS = {
    "gpu": {"rows": 16384, "cols": 4096},
    "gpu_tiny": {"rows": 2, "cols": 16},
    "cpu": {"rows": 5, "cols": 129},
    "cpu_tiny": {"rows": 2, "cols": 16},
}

OPTIMIZER_SIZES = {
    "gpu": {"tensors": 200, "rows": 1024, "cols": 1024},
    "gpu_tiny": {"tensors": 200, "rows": 2, "cols": 4},
    # 200 tensors take minutes to compile under callgrind; the CPU tier steps six.
    "cpu": {"tensors": 6, "rows": 33, "cols": 17},
    "cpu_tiny": {"tensors": 6, "rows": 2, "cols": 4},
}

CROSS_ENTROPY_SIZES = {
    "gpu": {"rows": 8192, "cols": 32000},  # 8192 tokens over a 32,000-word vocabulary
    "gpu_tiny": {"rows": 2, "cols": 16},
    "cpu": {"rows": 5, "cols": 129},
    "cpu_tiny": {"rows": 2, "cols": 16},
}

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "pointwise_chain",
            "10-op pointwise chain, bf16, 2 inputs 1 output",
            pointwise_chain,
            two_matrices,
            ROWS_COLS,
        ),
        Workload("bias_gelu", "gelu(x + bias), bf16", bias_gelu, matrix_and_row, ROWS_COLS),
        Workload(
            "bias_gelu_tanh",
            "gelu(x + bias, approximate='tanh'), bf16: issue 29's pointwise row (GPT-2's gelu)",
            bias_gelu_tanh,
            matrix_and_row,
            ROWS_COLS,
        ),
        Workload(
            "add_layer_norm",
            "x + residual, then layer_norm; both returned, bf16",
            add_layer_norm,
            residual_and_norm,
            ROWS_COLS,
        ),
        Workload(
            "add_layer_norm_backward",
            "add_layer_norm forward and backward (grads of x, residual, weight, bias), bf16",
            add_layer_norm,
            residual_and_norm_with_grads,
            ROWS_COLS,
            backward=True,
        ),
        Workload(
            "layer_norm_backward",
            "layer_norm forward and backward (grads of x, weight, bias), bf16: issue 29's normalization row",
            layer_norm,
            norm_with_grads,
            ROWS_COLS,
            backward=True,
        ),
        Workload("softmax", "softmax over the last dim, bf16", softmax, one_matrix, ROWS_COLS),
        Workload("rms_norm", "RMSNorm with fp32 statistics, bf16", rms_norm, matrix_and_row, ROWS_COLS),
        Workload("swiglu", "silu(a) * b, bf16", swiglu, two_matrices, ROWS_COLS),
        Workload(
            "cross_entropy",
            "cross_entropy(logits.float(), targets), mean over rows: bf16 logits, int64 targets, forward",
            cross_entropy,
            logits_and_targets,
            CROSS_ENTROPY_SIZES,
        ),
        Workload(
            "cross_entropy_backward",
            "cross_entropy forward and backward (the logits' gradient): bf16 logits, int64 targets",
            cross_entropy,
            logits_with_grad_and_targets,
            CROSS_ENTROPY_SIZES,
            backward=True,
        ),
        Workload(
            "adam_step",
            "torch.optim.AdamW(...).step() over 200 parameters (matrices and vectors), fp32, foreach "
            "(capturable, tensor lr on the GPU), compiled; parameters and state updated in place",
            optimizer_step,
            adamw,
            OPTIMIZER_SIZES,
            moved=optimizer_bytes,
        ),
        Workload(
            "sgd_momentum_step",
            "torch.optim.SGD(..., momentum=0.9, foreach=True).step() over the same parameters, compiled",
            optimizer_step,
            sgd_momentum,
            OPTIMIZER_SIZES,
            moved=optimizer_bytes,
        ),
        Workload(
            "mlp_block",
            "transformer MLP: x + linear(gelu(linear(x))), 4x hidden, bf16; matmuls stay extern",
            mlp_block,
            mlp_weights,
            {
                "gpu": {"tokens": 8192, "hidden": 4096, "ffn": 16384},
                "gpu_tiny": {"tokens": 2, "hidden": 8, "ffn": 32},
                "cpu": {"tokens": 19, "hidden": 32, "ffn": 128},
                "cpu_tiny": {"tokens": 2, "hidden": 8, "ffn": 32},
            },
        ),
    )
}


def tensors_in(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a nest of tuples and lists, in order."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from tensors_in(item)


def fewest_bytes(inputs: Any, outputs: Any) -> int:
    """Bytes a perfect implementation moves: every distinct input read once, every output written once."""
    total, seen = 0, set()
    for tensor in (*tensors_in(inputs), *tensors_in(outputs)):
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tensor.shape)
        if key not in seen:
            seen.add(key)
            total += tensor.numel() * tensor.element_size()
    return total


class Step:
    """One call of a workload through a compiled program; it returns every tensor it produced.

    For a training workload the call is the forward and `torch.autograd.grad` of its outputs (fixed
    random output gradients, made on the first call); gradients are returned, never accumulated.
    """

    def __init__(self, workload: Workload, compiled: Callable[..., Any], inputs: list[Any]):
        self.workload = workload
        self.compiled = compiled
        self.inputs = inputs
        self.needs_grad = [t for t in tensors_in(inputs) if t.requires_grad]
        self.output_grads: list[torch.Tensor] | None = None

    def __call__(self) -> list[torch.Tensor]:
        outputs = list(tensors_in(self.compiled(*self.inputs)))
        if not self.workload.backward:
            return outputs
        if self.output_grads is None:
            self.output_grads = [torch.randn_like(out) for out in outputs]
        grads = torch.autograd.grad(outputs, self.needs_grad, self.output_grads)
        return [*(out.detach() for out in outputs), *grads]

    def fewest_bytes(self, outputs: list[torch.Tensor]) -> int:
        if self.workload.moved is not None:
            return self.workload.moved(self.inputs)
        return fewest_bytes([self.inputs, self.output_grads or []], outputs)
