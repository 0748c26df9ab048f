"""Runs one case — an op spec, a dtype, a fusion context and a direction — under a backend.

All the case's samples go into one program (one compile per case, not per sample), written out as
straight-line source so that Dynamo traces it quickly and a failure can show the exact call:

    def program(in0, in1, in2):
        return [
            wrap_out(op(wrap_in(in0), wrap_in(in1), alpha=2)),
            ...
        ]

Eager runs the same program one sample at a time; a sample eager rejects (or whose result PyTorch's
own meta function disagrees with) is dropped, so only calls with one right answer are compared. The
float64 reference is eager on the same samples with floating tensors widened to float64 (for backward,
with the op's result rounded to eager's dtype before the context's output wrapper: see `Program`). Inputs are
compared after the call as well, so an in-place op that fails to write back (or a kernel that writes
into an input it should not) fails too. Backward compares the gradients of every floating input.
Where the spec says eager has no one answer (`unspecified_at`), those positions are not compared.
"""

from __future__ import annotations

import copy
import importlib
import itertools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from conformance.harness import perturbation
from conformance.harness.oracle import UNSPECIFIED_VALUES, compare
from conformance.harness.policy import SIGNLESS_CONTEXTS, ULP_BUDGET, loosest_tolerance
from conformance.harness.probe import watching
from conformance.specs import OpSpec
from conformance.specs.contexts import WRAPPERS
from conformance.specs.samples import Sample, generate, iter_samples
from conformance.specs.values import inf, nan, replicate

STANDARD_BACKENDS = ("fuser", "inductor", "aot_eager", "eager")


def resolve_backend(name: str) -> str | Callable:
    """A backend name torch.compile knows, or 'module:callable' for any other backend. A name torch.compile
    does not know here (a typo, or the package that registers it not installed) is one ValueError, raised
    before any case runs: otherwise every case would fail with the same message."""
    if name in STANDARD_BACKENDS:
        if name not in torch._dynamo.list_backends(exclude_tags=()):
            raise ValueError(
                f"backend {name!r}: torch.compile does not know it here (for the fuser, install this "
                "project: `pip install -e .` registers it)"
            )
        return name
    module, colon, attribute = name.partition(":")
    if not colon or not module or not attribute:
        raise ValueError(
            f"backend {name!r}: expected one of {', '.join(STANDARD_BACKENDS)} or 'module:callable'"
        )
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"backend {name!r}: cannot load it: {error}") from None


def backend_function(backend: str) -> Callable:
    """The backend as a function of (FX graph, example inputs)."""
    chosen = resolve_backend(backend)
    return torch._dynamo.lookup_backend(chosen) if isinstance(chosen, str) else chosen


# A fallback reason saying the op is not enabled for this architecture and dtype (the fuser's validation
# gate, fuser/validate/validation.py): the backend ran it eagerly by policy, so the case tested nothing.
NOT_VALIDATED_REASONS = ("not validated", "validation is stale", "no validation manifest")


class NotValidated(Exception):
    """The backend ran the op under test eagerly because it is not validated here. Not an AssertionError:
    a ledger's expected failure (raises=AssertionError) must not absorb a case that tested nothing."""


def recording(backend: str, received: set, graphs: list | None = None) -> Callable:
    """The backend, noting every op of the graphs Dynamo hands it that it compiled (public hooks only: a
    backend is a function of an FX graph), and keeping each graph with its example inputs where asked.
    A graph the backend raised on is not noted: Dynamo then runs it eagerly (a graph break), so its ops
    were not tested."""
    compiler = backend_function(backend)

    def record(graph_module: torch.fx.GraphModule, example_inputs, **kwargs):
        ops = {n.target for n in graph_module.graph.nodes if n.op == "call_function"}
        if graphs is not None:  # a copy: a backend may rewrite the graph it is given
            graphs.append((copy.deepcopy(graph_module), list(example_inputs)))
        compiled = compiler(graph_module, example_inputs, **kwargs)
        received.update(ops)
        return compiled

    return record


@dataclass
class CaseRun:
    """What one case did: how many samples ran, what failed, and notes (dropped samples, strides)."""

    samples: int = 0
    failures: list[str] = field(default_factory=list)
    ulps: tuple[float, float] | None = None  # the largest (backend, eager) ulps of scale (oracle rule 6)
    notes: list[str] = field(default_factory=list)
    source: str = ""
    # Why the backend ran the op under test eagerly inside its compiled graph (a backend that reports it:
    # conformance.harness.probe): the case then checked eager against eager. Counted in the report.
    left_eager: str = ""

    @property
    def not_validated(self) -> bool:
        """The op ran eagerly because the backend does not have it validated here (reported apart)."""
        return any(words in self.left_eager for words in NOT_VALIDATED_REASONS)


# --- the program ----------------------------------------------------------------------------------


# Op categories whose floating `dtype` arguments set the dtype they compute in.
COMPUTE_DTYPE_CATEGORIES = ("reduction", "normalization")


class Program:
    """Straight-line source calling the op once per sample, with the context's wrappers."""

    def __init__(
        self,
        spec: OpSpec,
        context: str,
        samples: Sequence[Sample],
        *,
        reference: bool = False,
        rounded_like=None,
    ):
        """`reference`: the float64 reference's program for a spec with `combine` — the op runs on the
        inputs as they are (its result's rounding to its dtype is the op's meaning) and the combination
        runs in float64. `rounded_like`: eager's result of the one sample; the reference then rounds each
        floating result to its dtype before the context's output wrapper, as the program does, keeping
        the gradient exact. A gradient through the wrapper can depend on that rounding: max splits its
        gradient among ties, and in float16 196512.0 rounds to inf and ties with inf (issue 27)."""
        self.spec, self.samples = spec, list(samples)
        self.slots: list[list[int]] = []  # per sample: indices into the flat input list
        self.inputs: list[torch.Tensor] = []
        self.frozen: set[int] = set()  # inputs passed as a `not_differentiated` argument
        names = [argument.name for argument in spec.overload._schema.arguments]
        # A reduction's or normalization's floating `dtype` argument is the dtype it computes in (mean's,
        # log_softmax's): the reference computes in float64 (the oracle rounds its result to eager's
        # dtype). Kept, log_softmax(x, dtype=float32)'s reference computed in float32, so eager's error
        # read 0 and a correct compiled gradient failed. A cast's or a created tensor's dtype is its meaning.
        widens_dtypes = reference and spec.combine is None and spec.category in COMPUTE_DTYPE_CATEGORIES
        lines = []
        for sample in self.samples:
            seen: dict[int, int] = {}
            slots = []
            partner = sample.partner if spec.combine is not None else None

            def literal(value, seen=seen, slots=slots, partner=partner) -> str:
                if isinstance(value, torch.Tensor):
                    if id(value) not in seen:
                        seen[id(value)] = len(self.inputs)
                        slots.append(len(self.inputs))
                        self.inputs.append(value)
                    return f"wrap_in(in{seen[id(value)]})"
                if isinstance(value, list | tuple):
                    inner = ", ".join(literal(v) for v in value)
                    return (
                        f"[{inner}]"
                        if isinstance(value, list)
                        else f"({inner}{',' if len(value) == 1 else ''})"
                    )
                if isinstance(value, torch.dtype):
                    return "torch.float64" if widens_dtypes and value.is_floating_point else str(value)
                if isinstance(value, torch.device):
                    # The partner's device, read when the program runs (eager's meta check runs it on
                    # meta tensors).
                    if partner is None:
                        return f"torch.device({str(value)!r})"
                    return f"in{seen[id(partner)]}.device"
                return repr(value)  # numbers (inf and nan are names in the globals), strings, None

            partner_name = literal(partner) if partner is not None else None
            arguments = [literal(a) for a in sample.args] + [
                f"{k}={literal(v)}" for k, v in sample.kwargs.items()
            ]
            given = [*zip(names, sample.args, strict=False), *sample.kwargs.items()]
            self.frozen |= {
                seen[id(value)]
                for name, value in given
                if name in spec.not_differentiated and isinstance(value, torch.Tensor)
            }
            call = f"op({', '.join(arguments)})"
            if spec.results is not None:
                call = f"checked({call}, {tuple(spec.results(sample.args, sample.kwargs))!r})"
            if partner_name is not None:
                call = f"combine({call}, {partner_name})"
            lines.append(f"        wrap_out({call}),")
            self.slots.append(slots)
        header = f"def program({', '.join(f'in{i}' for i in range(len(self.inputs)))}):"
        self.lines = lines
        self.source = "\n".join([header, "    return [", *lines, "    ]"])
        wrap_in, wrap_out = WRAPPERS[context]
        self.namespace = {
            "op": spec.reference if reference and spec.reference is not None else spec.overload,
            "torch": torch,
            "inf": inf,
            "nan": nan,
            "wrap_in": wrap_in or (lambda x: x),
            "wrap_out": _mapped(wrap_out) if wrap_out else (lambda y: y),
            "combine": _widened(spec.combine) if reference and spec.combine else spec.combine,
            "checked": lambda result, kept: tuple(result[i] for i in kept),
        }
        if rounded_like is not None:
            unrounded = self.namespace["wrap_out"]
            self.namespace["wrap_out"] = lambda y: unrounded(_rounded_like(y, rounded_like))
            if reference and spec.combine is not None:
                self.namespace["op"] = _rounded_to_eager(spec.overload, self.samples[0])

    def function(self) -> Callable:
        namespace = dict(self.namespace)
        exec(compile(self.source, f"<conformance {self.spec.op}>", "exec"), namespace)
        return namespace["program"]


def _widened(combine: Callable) -> Callable:
    def wide(value):
        if isinstance(value, torch.Tensor) and value.dtype.is_floating_point:
            return value.to(torch.float64)
        if isinstance(value, tuple | list):
            return type(value)(wide(v) for v in value)
        return value

    return lambda result, x: combine(wide(result), wide(x))


class _Rounded(torch.autograd.Function):
    """x's value rounded to `dtype` (held in x's dtype); its gradient passes through exactly."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        return x.to(dtype).to(x.dtype)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return grad, None


def _rounded_to_eager(overload, sample: Sample) -> Callable:
    """The op on the reference's float64 inputs, its result rounded to the dtype eager's op gives for
    `sample` (a fill of 0.1 means bfloat16's 0.1), the gradient passing through exactly: a spec with
    `combine`, backward, so that its gradients are float64's rather than accumulated in the op's dtype."""
    like = overload(*_copies(sample.args), **{k: _copies([v])[0] for k, v in sample.kwargs.items()})

    def op(*args, **kwargs):
        return _rounded_like(overload(*args, **kwargs), like)

    return op


def _copies(values) -> list:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def _rounded_like(value, like):
    """`value` (the reference's result) with each floating tensor rounded to the dtype of its
    counterpart in `like` (eager's result: the context's wrappers keep dtypes)."""
    if isinstance(value, torch.Tensor):
        if value.dtype.is_floating_point and isinstance(like, torch.Tensor) and like.dtype != value.dtype:
            return _Rounded.apply(value, like.dtype)
        return value
    if isinstance(value, tuple | list) and isinstance(like, tuple | list) and len(value) == len(like):
        return type(value)(_rounded_like(v, w) for v, w in zip(value, like, strict=True))
    return value


def _mapped(wrapper: Callable) -> Callable:
    def wrap(value):
        if isinstance(value, torch.Tensor):
            return wrapper(value)
        if isinstance(value, tuple | list):
            return tuple(wrap(v) for v in value)
        return value

    return wrap


def fresh_inputs(
    tensors: Sequence[torch.Tensor],
    *,
    widen: bool = False,
    grad: bool = False,
    frozen: set[int] = frozenset(),
) -> list:
    """Independent copies (same layout); widened to float64 for the reference; leaves for backward
    (except the `frozen` positions: targets and weights)."""
    copies = []
    for index, tensor in enumerate(tensors):
        copy = replicate(tensor)
        if widen and copy.dtype.is_floating_point:
            copy = copy.to(torch.float64)
        if grad and copy.dtype.is_floating_point and index not in frozen:
            copy = copy.detach().requires_grad_()
        copies.append(copy)
    return copies


def quietly(fn: Callable, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args)


def float64_reference(function: Callable, widened: list, grad_outputs: list | None) -> tuple:
    """The float64 reference program `function` run on `widened` inputs, with float64 as the default
    dtype (an integer input an op promotes to a float, as cosh of an int64 tensor, is computed in float64,
    not in float32 exactly as eager does): (its result, its gradients for `grad_outputs`, or None where
    there are none)."""
    saved = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        result = quietly(function, *widened)
        grads = None
        outputs = floating_outputs(result) if grad_outputs is not None else []
        if grad_outputs is not None and len(outputs) == len(grad_outputs):
            try:
                grads = gradients(outputs, widened, [g.to(torch.float64) for g in grad_outputs])
            except Exception:
                grads = None
    finally:
        torch.set_default_dtype(saved)
    return result, grads


# --- eager, meta and the reference, one sample at a time ------------------------------------------


@dataclass
class Expected:
    sample: Sample
    program: Program  # the one-sample program
    output: object
    inputs_after: list[torch.Tensor]
    reference: object | None
    reference_inputs_after: list[torch.Tensor] | None = None
    grads: list | None = None
    reference_grads: list | None = None
    grad_outputs: list | None = None
    # The reference's (output, inputs after, gradients) again under perturbations by the working dtype's
    # rounding (`conformance.harness.perturbation`), computed when the oracle first asks.
    perturbed: Callable[[], list] | None = None


def floating_outputs(output) -> list[torch.Tensor]:
    flat = output if isinstance(output, tuple | list) else [output]
    found = []
    for value in flat:
        if isinstance(value, tuple | list):
            found += floating_outputs(value)
        elif isinstance(value, torch.Tensor) and value.dtype.is_floating_point and value.requires_grad:
            found.append(value)
    return found


def grad_outputs_for(outputs: Sequence[torch.Tensor], seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(o.shape, generator=generator, dtype=torch.float64).to(o.dtype).to(o.device)
        for o in outputs
    ]


def gradients(outputs: list[torch.Tensor], leaves: list, grad_outputs: list) -> list:
    wanted = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor) and leaf.requires_grad]
    if not outputs or not wanted:
        raise ValueError("nothing to differentiate: no floating output or input")
    found = iter(torch.autograd.grad(outputs, wanted, grad_outputs, allow_unused=True))
    return [next(found) if isinstance(leaf, torch.Tensor) and leaf.requires_grad else None for leaf in leaves]


def expect_eager(spec: OpSpec, context: str, sample: Sample, backward: bool) -> tuple:
    """Eager's run of one sample: (program, its function, inputs, output); EagerRejected when eager raises."""
    if spec.category == "inplace" and overlaps_itself(sample.args[0]):
        # Eager writes such a tensor in some order and PyTorch's fake tensors reject it: no one answer.
        raise ValueError("an in-place write into a tensor whose elements share memory (stride 0)")
    program = Program(spec, context, [sample])
    run = program.function()
    inputs = fresh_inputs(program.inputs, grad=backward, frozen=program.frozen)
    try:
        return program, run, inputs, quietly(run, *inputs)[0]
    except Exception as error:
        raise EagerRejected(error) from error


def expect(spec: OpSpec, context: str, sample: Sample, backward: bool, seed: int) -> Expected:
    """Eager's answer for one sample, or an exception when eager (or its meta function) rejects it."""
    program, run, inputs, output = expect_eager(spec, context, sample, backward)
    try:
        meta = quietly(run, *[replicate(t, "meta") for t in program.inputs])[0]
    except NotImplementedError:
        meta = output  # no meta kernel: a data-dependent shape (boolean-mask indexing, nonzero)
    if not same_structure(meta, output):
        raise ValueError("eager and PyTorch's meta function disagree on the result's dtype or shape")
    expected = Expected(sample, program, output, inputs, None)
    grad_outputs = None
    if backward:
        outputs = floating_outputs(output)
        expected.grad_outputs = grad_outputs = grad_outputs_for(outputs, seed)
        expected.grads = gradients(outputs, inputs, grad_outputs)

    # run_reference must not refer to `expected`: `expected.perturbed` keeps it, and the cycle would hold
    # every sample's tensors until a full collection, which the tuned collector (collector.py) makes rare.
    def run_reference() -> tuple:
        """Forward, the reference is float64's exact answer (the oracle rounds it where it needs to);
        backward, the gradients of the program as it rounds (see `Program`)."""
        reference = Program(
            spec, context, [sample], reference=True, rounded_like=output if backward else None
        ).function()
        widened = fresh_inputs(
            program.inputs, widen=spec.combine is None or backward, grad=backward, frozen=program.frozen
        )
        result, grads = float64_reference(lambda *xs: reference(*xs)[0], widened, grad_outputs)
        return result, widened, grads

    try:
        expected.reference, expected.reference_inputs_after, expected.reference_grads = run_reference()
    except Exception as error:
        if spec.reference is not None:  # the spec's own reference is the suite's code: its error is a bug
            raise RuntimeError(f"{spec.name}'s exact reference (spec.reference) failed: {error!r}") from error
        return expected  # no float64 kernel, or mixed dtypes float64 cannot take: no second opinion
    expected.perturbed = perturbation.perturbed(
        run_reference, perturbation.working_dtype([program.inputs, output])
    )
    return expected


def overlaps_itself(value) -> bool:
    return isinstance(value, torch.Tensor) and any(
        stride == 0 and size > 1 for stride, size in zip(value.stride(), value.shape, strict=True)
    )


def same_structure(meta, real) -> bool:
    if isinstance(real, torch.Tensor):
        return isinstance(meta, torch.Tensor) and meta.dtype == real.dtype and meta.shape == real.shape
    if isinstance(real, tuple | list):
        return (
            isinstance(meta, tuple | list) and len(meta) == len(real) and all(map(same_structure, meta, real))
        )
    return True


# --- one case ---------------------------------------------------------------------------------------


def run_case(
    spec: OpSpec,
    dtype: str,
    context: str,
    direction: str,
    backend: str,
    device: str,
    tier: str,
    compile_options: dict | None = None,
) -> CaseRun:
    backward = direction == "bwd"
    result = CaseRun()
    kept: list[Expected] = []
    rejected: dict[str, int] = {}
    eager_raised: dict[str, Sample] = {}  # eager's error -> the first sample it rejected
    for number, sample in enumerate(generate(spec, dtype, tier)):
        sample = on_device(sample, device)
        try:
            kept.append(expect(spec, context, sample, backward, seed=number))
        except Exception as error:
            reason = rejection_reason(error)
            rejected[reason] = rejected.get(reason, 0) + 1
            if isinstance(error, EagerRejected):
                eager_raised.setdefault(reason, sample)
    if tier == "full":
        result.failures += answers_where_eager_raised(spec, context, backend, eager_raised, backward)
    if rejected:
        result.notes.append(
            "samples eager rejects (dropped): "
            + "; ".join(f"{count} x {reason}" for reason, count in sorted(rejected.items()))
        )
    if not kept:
        result.failures.append(
            f"no sample ran: eager rejected all of them ({result.notes[-1] if result.notes else 'none made'})"
        )
        return result
    result.samples = len(kept)

    batch = Program(spec, context, [e.sample for e in kept])
    result.source = batch.source
    torch._dynamo.reset()
    received: set = set()
    compiled = torch.compile(batch.function(), backend=recording(backend, received), dynamic=False)
    calls = []  # (inputs, outputs, grads) of each call
    with watching(backend) as watch:
        try:
            # Called twice: a backend may run its second call another way (the fuser's is written out
            # for the sizes its first call saw: fuser.runtime.call_function), and users call it again.
            for _ in CALLS:
                calls.append(_call(compiled, batch, kept, backward))
        except Exception as error:
            raise CompiledProgramError(
                f"{CALLS[len(calls)]}the compiled program raised {type(error).__name__}: "
                f"{error}\n(eager ran all {len(kept)} samples; program:\n{batch.source})"
            ) from error
        finally:
            torch._dynamo.reset()
    left = [reason for op, reason in watch.left_eager if op == spec.op]
    if left and spec.category != "fallback":  # a fallback op is meant to run eagerly
        result.left_eager = left[0]

    if spec.overload not in received and not spec.graph_break_reason:
        result.failures.append(
            f"the backend never compiled {spec.op}: Dynamo ran it eagerly (a graph break, or the backend "
            "raised on its graph), so the case would pass without testing the backend"
        )
    if spec.check is not None:
        inputs, outputs, grads = calls[0]
        result.failures += random_failures(
            spec, context, backward, kept, batch, outputs, grads, inputs, compiled
        )
        return result
    failed: dict[int, str] = {}  # sample -> its failure; a second call's only where the first passed
    for prefix, call in zip(CALLS, calls, strict=True):
        for index, failure in _judge(spec, dtype, context, direction, kept, batch, call, result).items():
            failed.setdefault(index, prefix + failure)
    result.failures += [failed[index] for index in sorted(failed)]
    return result


# What a failure of each call of the compiled program starts with: the first call's nothing (the fuzzer
# calls its programs the same way).
CALLS = ("", "the second call: ")


def _call(compiled: Callable, batch: Program, kept: list[Expected], backward: bool) -> tuple:
    """One call of the compiled program on fresh copies of its inputs: (inputs, outputs, gradients)."""
    inputs = fresh_inputs(batch.inputs, grad=backward, frozen=batch.frozen)
    outputs = quietly(compiled, *inputs)
    grads = None
    if backward:
        flat_outputs, flat_grad_outputs = [], []
        for expected, output in zip(kept, outputs, strict=True):
            found = floating_outputs(output)
            flat_outputs += found
            flat_grad_outputs += [g.to(o.dtype) for g, o in zip(expected.grad_outputs, found, strict=True)]
        grads = gradients(flat_outputs, inputs, flat_grad_outputs)
    return inputs, outputs, grads


def _judge(spec, dtype, context, direction, kept, batch, call, result: CaseRun) -> dict[int, str]:
    """What one call got wrong, by sample; its ulps and notes go into `result`."""
    inputs, outputs, grads = call
    backward = direction == "bwd"
    failed = {}
    for index, (expected, output) in enumerate(zip(kept, outputs, strict=True)):
        line = batch.lines[index].strip().removesuffix(",")
        where = f"sample {index} [{expected.sample.label}]: {line}"
        slots = batch.slots[index]
        tolerance = tolerance_for(spec, dtype, [inputs[i] for i in slots], expected.output)
        mask = unspecified_mask(spec, expected.sample, direction)
        if backward:
            actual_grads = [grads[i] for i in slots]
            masks = gradient_masks(mask, context, expected.grads)
            verdict = compare(
                actual_grads,
                expected.grads,
                expected.reference_grads,
                tolerance,
                masks,
                forward=False,
                perturbed=_part(expected.perturbed, 2),
            )
            if not verdict.ok:
                failed[index] = f"{where}\n  gradients: {verdict.message}"
            continue
        problems = []  # one failure per sample, whatever of it differs
        signs_defined = spec.zero_sign_defined and context not in SIGNLESS_CONTEXTS
        masks = output_masks(mask, context, expected.output)
        verdict = compare(
            output,
            expected.output,
            expected.reference,
            tolerance,
            masks,
            ulp_budget=ulp_budget_for(spec),
            signed_zeros=signs_defined,
            perturbed=_part(expected.perturbed, 0),
        )
        if verdict.ulps != (0.0, 0.0):
            seen = result.ulps or (0.0, 0.0)
            result.ulps = (max(seen[0], verdict.ulps[0]), max(seen[1], verdict.ulps[1]))
        if not verdict.ok:
            problems.append(f"  output: {verdict.message}")
        elif verdict.notes and f"{where}: {verdict.notes}" not in result.notes:  # once, not once a call
            result.notes.append(f"{where}: {verdict.notes}")
        after = [inputs[i] for i in slots]
        verdict = compare(
            after,
            expected.inputs_after,
            expected.reference_inputs_after,
            tolerance,
            None if mask is None else [fit(mask, value) for value in expected.inputs_after],
            signed_zeros=signs_defined,
            perturbed=_part(expected.perturbed, 1),
        )
        if not verdict.ok:
            problems.append(f"  inputs after the call: {verdict.message}")
        if problems:
            failed[index] = "\n".join([where, *problems])
    return failed


def _part(perturbed: Callable[[], list] | None, index: int) -> Callable[[], list] | None:
    """One part (output, inputs after or gradients) of each perturbed reference, still lazily."""
    if perturbed is None:
        return None
    return lambda: [run[index] for run in perturbed()]


def random_failures(spec, context, backward, kept, batch, outputs, grads, inputs, compiled) -> list[str]:
    """A random op's case: eager's shapes and dtypes, the spec's check of each sample (not where the
    context reduces the output: the check reads raw values), and the same values again under the same
    seed."""
    failures = []
    for index, (expected, output) in enumerate(zip(kept, outputs, strict=True)):
        where = f"sample {index} [{expected.sample.label}]: {batch.lines[index].strip().removesuffix(',')}"
        if not same_structure(output, expected.output):
            failures.append(f"{where}\n  output: shape or dtype differs from eager's")
            continue
        if context == "into_reduction":
            continue
        slots = batch.slots[index]
        sample_grads = [grads[i] for i in slots] if backward else None
        problem = quietly(spec.check, expected.sample, output, sample_grads, expected.grad_outputs)
        if problem:
            failures.append(f"{where}\n  {problem}")
    if not backward:
        again = []
        for _ in range(2):
            torch.manual_seed(1234)
            again.append(quietly(compiled, *inputs))
        verdict = compare(again[1], again[0], None, (0.0, 0.0))
        if not verdict.ok:
            failures.append(f"not the same values under the same torch.manual_seed: {verdict.message}")
    return failures


def ulp_budget_for(spec: OpSpec) -> float | None:
    """The oracle's rule 6 budget for an op case: the spec's, else the default for elementwise ops. Ops
    that accumulate (reductions, and the normalizations, losses and extern ops built on them) may
    legitimately sum in another order than eager: their error then grows with the row (27 ulps for a
    float64 softmax over 1823 rows), not with a lost digit, so their ulps are recorded for the precision
    table but not judged."""
    if spec.ulp_budget is not None:
        return spec.ulp_budget
    return ULP_BUDGET if spec.family == "elementwise" else None


def unspecified_mask(spec: OpSpec, sample: Sample, direction: str) -> torch.Tensor | None:
    """Where eager has no one answer for this sample (the spec's `unspecified_at`): True, in the inputs'
    broadcast shape, where a named argument holds one of its named values (a Python number everywhere)."""
    wanted = (spec.unspecified_at or {}).get(direction)
    if not wanted:
        return None
    names = [argument.name for argument in spec.overload._schema.arguments]
    arguments = dict(zip(names, sample.args, strict=False)) | sample.kwargs
    shape = torch.broadcast_shapes(*(t.shape for t in sample.tensors()))
    mask = torch.zeros(shape, dtype=torch.bool)
    for name, values in wanted.items():
        held = arguments.get(name)
        if isinstance(held, torch.Tensor | int | float):
            held = torch.as_tensor(held).detach().cpu().to(torch.float64)
            for value in values:
                mask |= UNSPECIFIED_VALUES[value](held)
    return mask


def fit(mask: torch.Tensor, value) -> torch.Tensor | None:
    """The mask for one compared tensor: as is, or, for the gradient of a broadcast input, true where
    any position that input feeds is."""
    if not isinstance(value, torch.Tensor):
        return None
    if mask.shape == value.shape:
        return mask
    return mask.to(torch.int64).sum_to_size(value.shape) > 0


def gradient_masks(mask: torch.Tensor | None, context: str, grads: list) -> list | None:
    """The mask of each gradient. Where the context reduces the op's output by rows, an element's gradient
    depends on its whole row (the row's max, and its ties), so a row is unspecified where any of its
    elements is: eager's CUDA i0(inf) is nan where the fuser's is inf, and that row's max, then every
    gradient in it, differ."""
    if mask is None:
        return None
    wrap_out = WRAPPERS[context][1]
    if wrap_out is not None and mask.dim():
        reduced = wrap_out(mask.to(torch.float32)) > 0
        if reduced.shape != mask.shape:  # the wrapper reduced each row (a pointwise one keeps the mask)
            mask = reduced.unsqueeze(-1).expand(mask.shape)
    return [fit(mask, g) for g in grads]


def output_masks(mask: torch.Tensor | None, context: str, output):
    """The mask of each output tensor, through the context's output wrapper (a row reduced by max is
    unspecified where any of its elements is)."""
    if mask is None:
        return None
    wrap_out = WRAPPERS[context][1]
    if wrap_out is not None:
        mask = wrap_out(mask.to(torch.float32)) > 0
    if isinstance(output, tuple | list):
        return [fit(mask, value) for value in output]
    return fit(mask, output)


def tolerance_for(spec: OpSpec, dtype: str, inputs: list, output) -> tuple[float, float] | None:
    """The spec's override, else the loosest default among the floating dtypes the call involves: a
    float64 result computed from float32 inputs is only as exact as float32 arithmetic."""
    if spec.tolerance and dtype in spec.tolerance:
        return spec.tolerance[dtype]
    return loosest_tolerance(t.dtype for t in [*inputs, *_tensors(output)])


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, tuple | list):
        return [t for v in value for t in _tensors(v)]
    return []


class CompiledProgramError(AssertionError):
    """The backend raised where eager did not."""


class EagerRejected(Exception):
    """Eager raised on a sample (an empty tensor for a reduction with no identity, say): dropped from the
    comparison, but the compiled program must raise on it too. Eager's error is its `__cause__`."""


def rejection_reason(error: Exception) -> str:
    """Why a sample was dropped, as the report words it: the error's type and first line (eager's own error
    where eager raised)."""
    cause = error.__cause__ if isinstance(error, EagerRejected) else error
    text = str(cause)
    return f"{type(cause).__name__}: {text.splitlines()[0][:120] if text else ''}"


def answers_where_eager_raised(
    spec: OpSpec, context: str, backend: str, samples: dict[str, Sample], backward: bool
) -> list[str]:
    """Failures where the compiled program answered a sample eager raised on: a value where eager gives an
    error is a silent wrong answer (a fused max over an empty tensor returned -inf). One sample for each
    of eager's errors, each compiled alone and called as eager was (inputs that require grad in a
    backward case: autograd rejects an integer result of sum(dtype=...) there); the full tier only, since
    each costs a compile."""
    failures = []
    for reason, sample in samples.items():
        program = Program(spec, context, [sample])
        torch._dynamo.reset()
        compiled = torch.compile(program.function(), backend=backend_function(backend), dynamic=False)
        try:
            quietly(compiled, *fresh_inputs(program.inputs, grad=backward, frozen=program.frozen))
        except Exception:
            continue  # rejected, as eager does (the error may differ: Dynamo's trace, a device assert)
        finally:
            torch._dynamo.reset()
        failures.append(
            f"sample [{sample.label}]: eager raised ({reason}), but the compiled program returned a value"
        )
    return failures


def on_device(sample: Sample, device: str) -> Sample:
    if device == "cpu":
        return sample
    moved: dict[int, torch.Tensor] = {}

    def move(value):
        if isinstance(value, torch.Tensor):
            if id(value) not in moved:
                moved[id(value)] = replicate(value, device)
            return moved[id(value)]
        if isinstance(value, torch.device):  # a created tensor's device= (rand([2, 3], device=...))
            return torch.device(device)
        if isinstance(value, list | tuple):
            return type(value)(move(v) for v in value)
        return value

    kwargs = {k: move(v) for k, v in sample.kwargs.items()}
    return Sample(move(sample.args), kwargs, sample.label, move(sample.partner))


def has_backward(spec: OpSpec, dtype: str, device: str, probes: int = 3) -> bool:
    """Whether eager differentiates the op in `dtype` on `device` for one of the first samples."""
    for sample in itertools.islice(iter_samples(spec, dtype, "quick"), probes):
        try:
            expect(spec, "alone", on_device(sample, device), True, 0)
        except Exception:
            continue
        return True
    return False


def supported_dtypes(spec: OpSpec, device: str, tier: str = "quick", probes: int = 3) -> list[str]:
    """The spec's dtypes that eager accepts on `device` for at least one of the first samples."""
    found = []
    for dtype in spec.dtypes:
        for sample in itertools.islice(iter_samples(spec, dtype, tier), probes):
            try:
                expect(spec, "alone", on_device(sample, device), False, 0)
            except Exception:
                continue
            found.append(dtype)
            break
    return found
