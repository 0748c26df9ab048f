"""One zoo model under one backend: loss and every gradient against float64, and a short training run.

The verdict is eager-relative, as the op suite's oracle is: float32 eager is itself some distance from
the float64 answer, and a compiled model may be as far, times a stated factor. For each parameter the
error is `max|g - g64| / max|g64|` (relative to the gradient's scale, so a 1e-3 gradient and a 1e2 one
are judged alike), and the backend passes when

    error(backend) <= FACTOR * error(eager) + FLOOR

per precision (`BUDGETS`). FLOOR covers gradients eager computes exactly (error 0) where a backend's
different but legitimate summation order is not.
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from conformance.harness.policy import BUDGETS, SMALL_GRADIENT, TRAINING, Budget
from conformance.harness.probe import watching
from conformance.zoo.models import ZooModel


@dataclass
class ParamError:
    name: str
    backend: float
    eager: float

    def ratio(self, budget: Budget) -> float:
        """Above 1: outside the budget. As far off as an infinitely wrong eager is 1, not nan."""
        if math.isinf(self.backend):
            return 1.0 if math.isinf(self.eager) else math.inf
        return self.backend / (budget.factor * self.eager + budget.floor)


@dataclass
class ZooResult:
    model: str
    precision: str
    backend: str
    ok: bool = False
    problem: str = ""
    worst: ParamError | None = None
    loss_error: tuple[float, float] = (math.nan, math.nan)
    parameters: int = 0
    kernels: int | None = None
    fallbacks: int | None = None
    graph_breaks: int = 0
    break_reasons: tuple[str, ...] = ()  # the first line of each distinct reason Dynamo gave
    compile_seconds: float = math.nan
    step_ms: tuple[float, float] = (math.nan, math.nan)  # eager, backend: forward and backward
    curve: dict[str, list[float]] = field(default_factory=dict)
    replays: int | None = None  # of the backend's training steps, calls it replayed as CUDA graphs


def _on(batch: dict, device: str, dtype: torch.dtype | None = None) -> dict:
    def move(t):
        t = t.to(device)
        return t.to(dtype) if dtype is not None and t.is_floating_point() else t

    return {k: move(v) for k, v in batch.items()}


def _loss_and_grads(model, batch, zoo: ZooModel, precision: str) -> tuple[torch.Tensor, dict]:
    model.zero_grad(set_to_none=True)
    with torch.autocast(next(model.parameters()).device.type, torch.bfloat16, enabled=precision == "bf16"):
        loss = zoo.loss(model, batch)
    loss.backward()
    # A compiled module names its parameters through `_orig_mod.`; the names here are the model's own.
    grads = {
        n.removeprefix("_orig_mod."): p.grad.detach().clone()
        for n, p in model.named_parameters()
        if p.grad is not None
    }
    return loss.detach(), grads


def _relative(x: torch.Tensor, reference: torch.Tensor, floor: float = 0.0) -> float:
    # A nan or inf where float64 is finite is an infinite error, never a small one. The scale is the
    # reference's largest magnitude, but never below `floor`: a gradient that is zero in exact
    # arithmetic (a key projection's bias under softmax) is judged against the model's gradients.
    if not x.numel():
        return 0.0
    error = torch.nan_to_num((x.double() - reference).abs(), nan=math.inf).max().item()
    scale = max(reference.abs().max().item(), floor)
    return error / scale if scale else error


def _timed(fn: Callable[[], object], device: str, repeats: int = 3) -> float:
    # Wall time of a warm forward and backward, median of `repeats` (a CUDA queue drained around each).
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def check_model(
    zoo: ZooModel,
    backend: str | Callable,
    precision: str = "fp32",
    device: str = "cpu",
    seed: int = 0,
    train_steps: int = 0,
) -> ZooResult:
    """Loss and every gradient of `zoo` compiled with `backend` against float64 eager; then, when
    `train_steps`, that many AdamW steps of both with the losses compared step by step."""
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", "custom")
    result = ZooResult(zoo.name, precision, name)
    budget = BUDGETS[precision]
    torch.manual_seed(seed)
    original = zoo.build().to(device).train()
    batch = _on(zoo.batch(), device)
    result.parameters = sum(p.numel() for p in original.parameters())
    eager_model, compiled_model = copy.deepcopy(original), copy.deepcopy(original)
    if precision == "bf16-params":
        eager_model, compiled_model = eager_model.bfloat16(), compiled_model.bfloat16()
    reference_model = copy.deepcopy(original).double()
    if zoo.for_float64 is not None:
        zoo.for_float64(reference_model)

    reference_loss, reference_grads = _loss_and_grads(
        reference_model, _on(batch, device, torch.float64), zoo, "fp32"
    )
    if precision == "bf16-params":
        batch = _on(batch, device, torch.bfloat16)
    eager_loss, eager_grads = _loss_and_grads(eager_model, batch, zoo, precision)

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    compiled = torch.compile(compiled_model, backend=backend)
    try:
        start = time.perf_counter()
        loss, grads = _loss_and_grads(compiled, batch, zoo, precision)
        result.compile_seconds = time.perf_counter() - start
        with watching(name) as watch:  # the warm step: kernels and fallbacks per step
            loss, grads = _loss_and_grads(compiled, batch, zoo, precision)
        result.kernels, result.fallbacks = watch.kernels, watch.fallbacks
    except Exception as error:  # a model the backend cannot compile is one failed row, not the end
        result.problem = _first_line(error)
        return result
    result.graph_breaks, result.break_reasons = _graph_breaks()

    result.loss_error = (_relative(loss, reference_loss), _relative(eager_loss, reference_loss))
    floor = SMALL_GRADIENT * max(
        (g.abs().max().item() for g in reference_grads.values() if g.numel()), default=0.0
    )
    errors = [
        ParamError(
            n,
            _relative(grads[n], reference_grads[n], floor),
            _relative(eager_grads[n], reference_grads[n], floor),
        )
        for n in reference_grads
        if n in grads
    ]
    missing = sorted(set(reference_grads) - set(grads))
    result.worst = max(errors, key=lambda e: e.ratio(budget)) if errors else None
    loss_ok = result.loss_error[0] <= budget.factor * result.loss_error[1] + budget.floor
    if missing:
        result.problem = f"no gradient for {missing[0]} (and {len(missing) - 1} more)"
    elif not loss_ok:
        result.problem = f"loss error {result.loss_error[0]:.2e} vs eager's {result.loss_error[1]:.2e}"
    elif result.worst is not None and result.worst.ratio(budget) > 1:
        w = result.worst
        result.problem = f"gradient of {w.name}: error {w.backend:.2e} vs eager's {w.eager:.2e}"

    result.step_ms = (
        _timed(lambda: _loss_and_grads(eager_model, batch, zoo, precision), device),
        _timed(lambda: _loss_and_grads(compiled, batch, zoo, precision), device),
    )
    if train_steps and not result.problem:
        result.curve, result.replays = _train(
            original, batch, zoo, precision, train_steps, backend, zoo.for_float64, name
        )
        reference = result.curve["float64"]
        drift = {label: _drift(result.curve[label], reference) for label in ("eager", "backend")}
        allowed = TRAINING.factor * drift["eager"] + TRAINING.floor
        if drift["backend"] > allowed:
            result.problem = (
                f"training loss drifts {drift['backend']:.2e} from float64's, eager {drift['eager']:.2e} "
                f"(allowed {allowed:.2e})"
            )
    result.ok = not result.problem
    return result


# Dynamo's type for a graph the backend raised on and that it then ran eagerly, "adding a graph break" it
# counts among the unimplemented, not in counters["graph_break"] (torch 2.11-2.13).
BACKEND_FAILED = "Backend compiler exception"


def _graph_breaks() -> tuple[int, tuple[str, ...]]:
    """Dynamo's graph breaks since its counters were cleared, with the graphs the backend failed on (each
    ran eagerly: a model that passes with them passed partly without the backend): their number and the
    first line of each distinct reason."""
    counters = torch._dynamo.utils.counters
    reasons = {str(reason).strip().split("\n")[0]: n for reason, n in counters["graph_break"].items()}
    for reason, n in counters["unimplemented"].items():
        if str(reason).startswith(BACKEND_FAILED):
            explanation = next((line for line in str(reason).splitlines() if "Explanation:" in line), reason)
            reasons[explanation.strip()] = reasons.get(explanation.strip(), 0) + n
    return sum(reasons.values()), tuple(sorted(reasons))


def _drift(curve: list[float], reference: list[float]) -> float:
    return max(abs(a - r) / max(1.0, abs(r)) for a, r in zip(curve, reference, strict=True))


def _train(original, batch, zoo, precision, steps, backend, for_float64, name) -> tuple[dict, int | None]:
    # The same weights, batch and AdamW steps three ways: eager, the backend, and float64 eager, whose
    # curve says how far rounding alone moves a loss over these steps (a tiny batch under batch norm is
    # chaotic: eager's own float32 curve leaves float64's within a few steps).
    curves, replays = {}, None
    for label in ("eager", "backend", "float64"):
        model = copy.deepcopy(original)
        data = batch
        if label == "float64":
            model, data = (
                model.double(),
                {k: v.double() if v.is_floating_point() else v for k, v in batch.items()},
            )
            if for_float64 is not None:
                for_float64(model)
        step_model = torch.compile(model, backend=backend) if label == "backend" else model
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses = []
        with watching(name if label == "backend" else "eager") as watch:
            for _ in range(steps):
                loss, _ = _loss_and_grads(step_model, data, zoo, "fp32" if label == "float64" else precision)
                optimizer.step()
                losses.append(loss.double().item())
        curves[label] = losses
        if label == "backend":
            replays = watch.replays
    return curves, replays


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]
