"""The optimizer-step program family: a compiled `torch.optim` step against eager, with the parameters
and every tensor of the optimizer's state after the last step judged by the suite's oracle.

A program is data: an optimizer class of `torch.optim`, its keyword arguments, and the dtypes of a
small parameter list (mixed sizes, a one-element and a transposed tensor). It runs `STEPS` steps with
seeded gradients three ways: `torch.compile(optimizer.step, backend=...)` (actual), eager in the
parameters' dtypes (expected) and eager in float64 (reference). A capturable program is compiled
capturable — with a tensor lr where `tensor_lr` says so — and compared with eager not capturable (eager
takes capturable only on accelerators; the arithmetic is the same).

A program passes only if the backend really ran the update: it must have been handed a graph holding the
step's `_foreach_*` calls, and such a graph must have run at least once per step. A step Dynamo left
eager (a recompile limit hit, a graph break around the update) would otherwise pass vacuously.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from conformance.harness.oracle import compare
from conformance.harness.policy import TOLERANCES
from conformance.harness.runner import CaseRun, resolve_backend

STEPS = 5
SIZES = ((7,), (33,), (1,), (3, 4))  # the last is transposed: a non-contiguous parameter


@dataclass(frozen=True)
class OptimizerProgram:
    optimizer: str  # a class of torch.optim: "AdamW"
    options: tuple[tuple[str, object], ...] = ()  # its keyword arguments (foreach=True is added)
    dtypes: tuple[str, ...] = ("float32",)  # the parameters', in turn
    tensor_lr: bool = False  # the compiled step's lr is a tensor (needs capturable=True in eager)

    def __post_init__(self) -> None:
        cls = getattr(torch.optim, self.optimizer, None)
        if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)):
            raise ValueError(f"optimizer program: {self.optimizer!r} is not an optimizer of torch.optim")
        known = inspect.signature(cls).parameters
        unknown = [name for name, _ in self.options if name not in known]
        if unknown:
            raise ValueError(f"optimizer program {self.optimizer}: unknown option(s) {', '.join(unknown)}")
        bad = [d for d in self.dtypes if not isinstance(getattr(torch, d, None), torch.dtype)]
        if bad:
            raise ValueError(f"optimizer program {self.optimizer}: unknown dtype(s) {', '.join(bad)}")

    def make(self, params: list[torch.Tensor], compiled: bool) -> torch.optim.Optimizer:
        options = dict(self.options)
        if not compiled:
            options.pop("capturable", None)
        if self.tensor_lr and compiled:
            options["lr"] = torch.tensor(options.get("lr", 1e-3), device=params[0].device)
        return getattr(torch.optim, self.optimizer)(params, foreach=True, **options)


PROGRAMS = {
    "adam_capturable_tensor_lr": OptimizerProgram(
        "Adam", (("lr", 1e-2), ("capturable", True)), tensor_lr=True
    ),
    "adamw_amsgrad_maximize": OptimizerProgram(
        "AdamW", (("lr", 1e-2), ("amsgrad", True), ("maximize", True), ("weight_decay", 0.1))
    ),
    "adamw_bf16_and_fp32": OptimizerProgram("AdamW", (("lr", 1e-2),), dtypes=("float32", "bfloat16")),
    "sgd_nesterov_weight_decay": OptimizerProgram(
        "SGD", (("lr", 1e-2), ("momentum", 0.9), ("nesterov", True), ("weight_decay", 0.1))
    ),
    "adagrad": OptimizerProgram("Adagrad", (("lr", 1e-2), ("lr_decay", 0.01))),
    "rmsprop_centered": OptimizerProgram("RMSprop", (("lr", 1e-2), ("momentum", 0.5), ("centered", True))),
    "adamax_capturable": OptimizerProgram("Adamax", (("lr", 1e-2), ("capturable", True))),
    "nadam": OptimizerProgram("NAdam", (("lr", 1e-2), ("weight_decay", 0.1))),
    "radam_capturable": OptimizerProgram("RAdam", (("lr", 1e-2), ("capturable", True))),
}


def make_params(program: OptimizerProgram, device: str) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    params = []
    for position, size in enumerate(SIZES):
        value = torch.randn(size, generator=generator, dtype=torch.float64)
        value = value.t() if len(size) == 2 else value
        dtype = getattr(torch, program.dtypes[position % len(program.dtypes)])
        params.append(value.to(device=device, dtype=dtype))
    return params


def _fresh(params: list[torch.Tensor], widen: bool = False) -> list[torch.Tensor]:
    """Leaf copies with the same layout; float64 ones for the reference."""
    copies = []
    for p in params:
        copy = torch.empty_strided(
            p.shape, p.stride(), dtype=torch.float64 if widen else p.dtype, device=p.device
        )
        copies.append(copy.copy_(p).requires_grad_())
    return copies


def _steps(
    program: OptimizerProgram, params: list[torch.Tensor], step_of: Callable | None
) -> torch.optim.Optimizer:
    """STEPS steps with seeded gradients: compiled by `step_of(optimizer)`, or eager where it is None."""
    optimizer = program.make(params, compiled=step_of is not None)
    step = step_of(optimizer) if step_of is not None else optimizer.step
    generator = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        for p in params:
            grad = torch.randn(p.shape, generator=generator, dtype=torch.float64)
            p.grad = grad.to(device=p.device, dtype=p.dtype)
        step()
    return optimizer


def _state(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Every state tensor, by parameter and key. A 0-dim one (a step count, NAdam's mu_product) is moved
    to the CPU: under torch.compile, torch.optim keeps them on the parameters' device, where eager keeps
    a non-capturable optimizer's on the CPU; their values are compared, not where they live."""
    return [
        value.detach().cpu() if value.dim() == 0 else value.detach()
        for p in optimizer.param_groups[0]["params"]
        for _, value in sorted(optimizer.state[p].items())
        if isinstance(value, torch.Tensor)
    ]


@dataclass
class _Watch:
    """Wraps a backend: records the graphs holding `_foreach_*` calls and how often each ran."""

    backend: Callable
    update_calls: int = 0
    graphs: list[str] = field(default_factory=list)

    def __call__(self, graph_module: torch.fx.GraphModule, example_inputs: list):
        compiled = self.backend(graph_module, example_inputs)
        targets = [str(n.target) for n in graph_module.graph.nodes if n.op == "call_function"]
        if not any("_foreach_" in t for t in targets):
            return compiled
        self.graphs.append(graph_module.code)

        def run(*args):
            self.update_calls += 1
            return compiled(*args)

        run._boxed_call = getattr(compiled, "_boxed_call", False)  # Dynamo calls such a function boxed
        return run


def run_program(program: OptimizerProgram, backend: str, device: str) -> CaseRun:
    result = CaseRun()
    params = make_params(program, device)
    chosen = resolve_backend(backend)
    watch = _Watch(torch._dynamo.lookup_backend(chosen) if isinstance(chosen, str) else chosen)
    torch._dynamo.reset()
    try:
        actual_params = _fresh(params)
        actual = _steps(
            program, actual_params, lambda optimizer: torch.compile(optimizer.step, backend=watch)
        )
    finally:
        torch._dynamo.reset()
    expected_params = _fresh(params)
    expected = _steps(program, expected_params, None)
    reference_params = _fresh(params, widen=True)
    reference = _steps(program, reference_params, None)
    result.samples = 1
    if watch.update_calls < STEPS:  # a step split by a graph break may run two update graphs
        result.failures.append(
            f"a compiled update graph ran {watch.update_calls} times in {STEPS} steps "
            f"({len(watch.graphs)} graph(s) holding _foreach_ calls reached the backend): steps ran eagerly"
        )
        return result
    compared = {
        "parameters": (
            [p.detach() for p in actual_params],
            [p.detach() for p in expected_params],
            reference_params,
        ),
        "state": (_state(actual), _state(expected), _state(reference)),
    }
    for what, (got, want, wide) in compared.items():
        if len(got) != len(want):
            result.failures.append(f"{what}: {len(got)} tensors compiled, {len(want)} eager")
            continue
        for position, (g, e, r) in enumerate(zip(got, want, wide, strict=True)):
            verdict = compare(g.reshape(e.shape), e, r.detach().reshape(e.shape), TOLERANCES.get(e.dtype))
            if not verdict.ok:
                result.failures.append(f"{what}[{position}] ({e.dtype}, {list(e.shape)}): {verdict.message}")
    return result
