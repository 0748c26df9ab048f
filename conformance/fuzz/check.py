"""Run one program under eager, the float64 reference and a backend, and judge it with the suite's oracle.

The verdict is `conformance.harness.oracle.compare` on the outputs, on the inputs after the call (an in-place
node updates one) and, for a differentiable program, on the gradients of every floating input, exactly
as a conformance case is judged. Five outcomes are not a verdict:

- `eager_rejects`: eager raises (an integer division by zero, say): the program has no answer;
- `tracing_rejects`: torch's own tracing raised before any backend saw a graph (a meta function
  stricter than eager's kernel: `linalg_vector_norm(ord=inf)` over a non-empty dim of an empty tensor):
  every `torch.compile` backend fails it alike, so it says nothing about this one;
- `meta_disagrees`: the compiled program differs from eager where torch's meta functions, which every
  tracing backend builds its graph from, give a result another dtype or shape than eager's kernel
  (`prims.div` of two bools: eager float32, the meta bool; the fuser and Inductor both return bool):
  checked only once a difference is found, and reported, not blamed on the backend;
- `vacuous`: the backend compiled nothing — Dynamo handed it no graph, or broke the program into
  several graphs, or (for the fuser, through its public counters) no kernel ran. A pass there would
  say nothing about the backend, so it is counted and rejected, never counted as a pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch._dynamo
from torch.utils._pytree import tree_leaves

from conformance.fuzz.program import Program
from conformance.harness import perturbation
from conformance.harness.oracle import compare
from conformance.harness.policy import loosest_tolerance
from conformance.harness.probe import watching
from conformance.harness.runner import (
    CALLS,
    float64_reference,
    floating_outputs,
    fresh_inputs,
    grad_outputs_for,
    gradients,
    quietly,
    resolve_backend,
)
from conformance.specs.values import DTYPES


@dataclass
class Outcome:
    status: str  # "pass", "fail", "eager_rejects", "tracing_rejects", "meta_disagrees" or "vacuous"
    message: str = ""


class CountingBackend:
    """Wraps a backend and counts the graphs Dynamo hands it (0: nothing was compiled)."""

    def __init__(self, backend: str | Callable):
        self.backend = torch._dynamo.lookup_backend(backend) if isinstance(backend, str) else backend
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return self.backend(graph_module, example_inputs)


def tolerance_for(program: Program) -> tuple[float, float] | None:
    """The loosest default among the floating dtypes any value of the program has."""
    return loosest_tolerance(DTYPES[d] for d in program.dtypes if d in DTYPES)


def meta_mismatch(function: Callable, made: list, expected) -> str | None:
    """Where torch's meta functions give a result another dtype or shape than eager's kernels did."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    try:
        with FakeTensorMode() as mode:
            fakes = [mode.from_tensor(v) if isinstance(v, torch.Tensor) else v for v in made]
            traced = quietly(function, *fakes)
    except Exception:
        return None  # no meta answer to compare (data-dependent shapes, say)
    pairs = zip(tree_leaves(traced), tree_leaves(expected), strict=False)
    for index, (meta, real) in enumerate(pairs):
        if isinstance(real, torch.Tensor) and (meta.dtype, meta.shape) != (real.dtype, real.shape):
            return (
                f"result {index}: torch's meta functions give {meta.dtype}{list(meta.shape)} where eager's "
                f"kernels give {real.dtype}{list(real.shape)}; every backend that traces with them differs alike"
            )
    return None


def _reference(program: Program, made: list, expected, backward: bool) -> tuple:
    """The float64 reference, computed afresh: (its inputs after the call, its outputs, and its
    gradients, None where there are none)."""
    wide_inputs = fresh_inputs(made, widen=True, grad=backward)
    grad_outputs = grad_outputs_for(floating_outputs(expected), program.seed) if backward else None
    reference, grads = float64_reference(program.function(widened=True), wide_inputs, grad_outputs)
    return wide_inputs, reference, grads


def check(program: Program, backend: str, device: str = "cpu", backward: bool = True) -> Outcome:
    backward = backward and program.differentiable
    function = program.function()
    made = program.make_inputs(device)
    try:
        eager_inputs = fresh_inputs(made, grad=backward)
        expected = quietly(function, *eager_inputs)
    except Exception as error:
        return Outcome("eager_rejects", f"{type(error).__name__}: {str(error)[:200]}")
    if backward and not floating_outputs(expected):
        return check(program, backend, device, backward=False)  # no output depends on a float input
    if backward:
        expected_outputs = floating_outputs(expected)
        try:
            expected_grads = gradients(
                expected_outputs, eager_inputs, grad_outputs_for(expected_outputs, program.seed)
            )
        except Exception:  # eager has no backward for this program: judge the forward alone
            return check(program, backend, device, backward=False)
    try:
        wide_inputs, reference, reference_grads = _reference(program, made, expected, backward)
    except Exception:
        wide_inputs, reference, reference_grads = None, None, None  # no float64 kernel: no second opinion
    # The reference again under perturbations by the working dtype's rounding, run only if needed. The
    # outputs count as the runner's do: a program of integer inputs still computes in its float results'.
    perturbed = perturbation.perturbed(
        lambda: _reference(program, made, expected, backward), perturbation.working_dtype([made, expected])
    )

    counting = CountingBackend(resolve_backend(backend))
    torch._dynamo.utils.counters.clear()
    # A fresh Dynamo per program: each program's function is a new code object, and a torch that
    # wraps it in one shared frame (2.11) stops compiling after its recompile limit (8 programs).
    torch._dynamo.reset()
    calls: list[tuple[list, Any, Any]] = []  # (inputs, outputs, gradients) of each call
    try:
        with watching(backend) as watch:
            compiled = torch.compile(function, backend=counting, dynamic=False)
            # Twice, on fresh copies of the inputs: a program's later calls are the ones users make most,
            # and a backend may take another path for them (a call written out, a CUDA graph replayed).
            for _ in CALLS:
                calls.append(_call(compiled, made, backward, program.seed))
    except Exception as error:
        message = f"{type(error).__name__}: {str(error)[:2000]}"
        if counting.graphs == 0:  # torch's tracing raised before any backend code ran
            return Outcome("tracing_rejects", message)
        return Outcome("fail", f"{CALLS[len(calls)]}the compiled program raised {message}")
    breaks = sum(torch._dynamo.utils.counters["graph_break"].values())
    if counting.graphs != 1 or breaks:
        what = "no graph" if counting.graphs == 0 else f"{counting.graphs} graphs ({breaks} graph breaks)"
        return Outcome("vacuous", f"Dynamo handed the backend {what}")
    if watch.kernels == 0:
        return Outcome("vacuous", f"{backend} launched no kernel: every op ran eagerly")

    tolerance = tolerance_for(program)
    problems = []
    wanted_grads = expected_grads if backward else None
    wide = (wide_inputs, reference, reference_grads)
    for which, (inputs, actual, grads) in zip(CALLS, calls, strict=True):
        found = _problems(
            inputs, actual, grads, eager_inputs, expected, wanted_grads, wide, tolerance, perturbed
        )
        problems += [f"{which}{problem}" for problem in found]
    if not problems:
        return Outcome("pass")
    disagreement = meta_mismatch(function, made, expected)
    if disagreement is not None:
        return Outcome("meta_disagrees", f"{disagreement}\n" + "\n".join(problems))
    return Outcome("fail", "\n".join(problems))


def _call(compiled: Any, made: list, backward: bool, seed: int) -> tuple[list, Any, Any]:
    inputs = fresh_inputs(made, grad=backward)
    actual = quietly(compiled, *inputs)
    grads = None
    if backward:
        outputs = floating_outputs(actual)
        grads = gradients(outputs, inputs, grad_outputs_for(outputs, seed))
    return inputs, actual, grads


def _problems(
    inputs, actual, grads, eager_inputs, expected, expected_grads, wide, tolerance, perturbed
) -> list[str]:
    """What one call of the compiled program got wrong: its outputs, its inputs after it (a program that
    writes into them) and, where `expected_grads` is given, its gradients."""
    wide_inputs, reference, reference_grads = wide
    problems = []
    verdict = compare(
        actual, expected, reference, tolerance, perturbed=lambda: [run[1] for run in perturbed()]
    )
    if not verdict.ok:
        problems.append(f"outputs: {verdict.message}")
    after = compare(
        inputs, eager_inputs, wide_inputs, tolerance, perturbed=lambda: [run[0] for run in perturbed()]
    )
    if not after.ok:
        problems.append(f"inputs after the call: {after.message}")
    if expected_grads is not None:
        verdict = compare(
            grads,
            expected_grads,
            reference_grads,
            tolerance,
            forward=False,
            perturbed=lambda: [run[2] for run in perturbed()],
        )
        if not verdict.ok:
            problems.append(f"gradients: {verdict.message}")
    return problems
