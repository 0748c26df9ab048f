"""Every pointwise op in the fuser's op table, every overload, against eager PyTorch on CPU.

The cases are data: for each overload in `fuser.lower.ops.POINTWISE_OPS` and each dtype, the schema says
which arguments are tensors and which are Python scalars, and a sample generator per operand family
fills them in:

- tensor operands get a 37x5 tensor whose first elements walk every pair of awkward values
  (±0, ±inf, nan, ±1, 0.5, 0.1, -2.5, 3, the dtype's largest and smallest magnitudes) followed by
  random values, plus 0-d variants and a promoting partner dtype;
- Python scalar operands (the `.Scalar` overloads, clamp bounds, threshold values, lerp weights) get
  ints, floats, a bool, 0.1, -0.0, inf and nan;
- attributes (alpha, rounding_mode, approximate, beta, eps, a cast's dtype) get a few variants.

A call enters the table only where eager accepts it: combinations eager rejects are never generated.
Each case compiles one program making all its calls, checks each result against eager, and checks
from `fuser.explain` that each call ran in a kernel, or, where the op's `accepts` excludes the dtype
it computes in, that it fell back with a reason.

Half-precision results are compared with eager's half-precision results, and for the ops in
FP32_REFERENCE_FOR_HALF also with eager computed in float32 and then rounded to the half dtype.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch

import fuser
from fuser.lower.ops import POINTWISE_BY_OVERLOAD, POINTWISE_OPS, Accepts, PointwiseOp

# Every lowering in every dtype it accepts, against eager at awkward values: the dtypes the cpu manifest
# leaves out included (integer inputs of float ops, which the conformance suite does not take; fmod's
# floats, which eager's vectorized fmod keeps out: ledgered), so these tests opt in.
pytestmark = pytest.mark.opt_in_unvalidated("every lowering in every dtype it accepts, validated or not")

SHAPE = (37, 5)
NUMEL = SHAPE[0] * SHAPE[1]
FLOATING = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
DTYPES = (*FLOATING, torch.int32, torch.int64, torch.bool)
inf, nan = math.inf, math.nan


@pytest.fixture(autouse=True)
def fresh_dynamo_and_strict_fuser(monkeypatch):
    # Dynamo's recompile limit would otherwise make later cases run eagerly; strict makes a kernel
    # that fails to generate or launch raise instead of quietly running eager.
    monkeypatch.setenv("FUSER_STRICT", "1")
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


# --- sample values -------------------------------------------------------------------------------


def awkward_values(dtype: torch.dtype) -> list:
    if dtype == torch.bool:
        return [False, True]
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        return [0.0, -0.0, inf, -inf, nan, 1.0, -1.0, 0.5, -2.5, 3.0, 0.1, info.max, info.tiny]
    info = torch.iinfo(dtype)
    return [0, 1, -1, 2, -2, 3, -3, 7, -8, 100, -100, info.max, info.min]


def random_values(dtype: torch.dtype, count: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(count, generator=generator) < 0.5
    if dtype.is_floating_point:
        return (torch.randn(count, generator=generator, dtype=torch.float64) * 3).to(dtype)
    return torch.randint(-50, 50, (count,), generator=generator, dtype=dtype)


def full_operand(dtype: torch.dtype, position: int, *, divisor: bool = False) -> torch.Tensor:
    """A 37x5 operand: operands 0 and 1 together walk every pair of awkward values, then random ones."""
    specials = awkward_values(dtype)
    n = len(specials)
    pairs = min(NUMEL, n * n)
    walk = torch.tensor([specials[(i // n**position) % n] for i in range(pairs)], dtype=dtype)
    values = torch.cat([walk, random_values(dtype, NUMEL - pairs, seed=position)])
    if divisor:
        values = divisor_safe(values)
    return values.reshape(SHAPE)


ZERO_D = {
    # Three values per family, one per operand position: a negative, a signed zero, a fraction.
    "float": (-2.5, -0.0, 0.5),
    "int": (-7, 3, 2),
    "bool": (True, False, True),
}


def zero_d_operand(dtype: torch.dtype, position: int, *, divisor: bool = False) -> torch.Tensor:
    family = "bool" if dtype == torch.bool else "float" if dtype.is_floating_point else "int"
    value = torch.tensor(ZERO_D[family][position % 3], dtype=dtype)
    return divisor_safe(value) if divisor else value


def divisor_safe(values: torch.Tensor) -> torch.Tensor:
    """Integer division by zero raises in eager, and INT_MIN / -1 traps the CPU: keep divisors clear."""
    if values.dtype.is_floating_point:
        return values
    if values.dtype == torch.bool:
        return torch.ones_like(values)
    values = torch.where(values == 0, torch.ones_like(values), values)
    return torch.where(values == -1, torch.full_like(values, -5), values)


# A tensor operand's promoting partners: a full tensor and a 0-d tensor of another dtype.
FULL_PARTNER = {
    torch.float16: torch.bfloat16,
    torch.bfloat16: torch.float32,
    torch.float32: torch.float64,
    torch.float64: torch.float32,
    torch.int32: torch.int64,
    torch.int64: torch.float32,
    torch.bool: torch.int32,
}
ZERO_D_PARTNER = {
    torch.float16: torch.float64,  # a 0-d tensor of the same category does not widen: float16 stays
    torch.bfloat16: torch.float64,
    torch.float32: torch.float64,
    torch.float64: torch.int64,
    torch.int32: torch.int64,
    torch.int64: torch.float64,  # a 0-d float tensor makes an int tensor the default float dtype
    torch.bool: torch.int64,
}

# Python scalars for `Scalar` operands: ints, floats (0.1 is exact in no float dtype), a bool, a
# signed zero, inf and nan.
SCALARS = (3, -2, 0.5, -2.5, 0.1, -0.0, inf, nan, True)

# Casts take one tensor and a target dtype (see cast_source); lift_fresh_copy copies a constant.
CAST_OPS = {"_to_copy", "convert_element_type", "lift_fresh_copy"}

# Ops with a divisor: integer operands keep clear of zero and of INT_MIN / -1 (see divisor_safe).
DIVISION_OPS = {"div_mode", "floor_divide", "remainder", "fmod"}

# Operands that must be bool masks whatever the dtype under test.
MASK_OPERANDS = {"condition", "mask"}

# Attributes and other non-operand arguments, by op: each dict is one variant (one call per variant).
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "add": [{}, {"alpha": 2}, {"alpha": -0.5}],
    "sub": [{}, {"alpha": 2}, {"alpha": -0.5}],
    "rsub": [{}, {"alpha": 2}, {"alpha": -0.5}],
    "div_mode": [{"rounding_mode": None}, {"rounding_mode": "trunc"}, {"rounding_mode": "floor"}],
    "gelu": [{}, {"approximate": "tanh"}],
    "softplus": [{}, {"beta": 2.0, "threshold": 5.0}, {"beta": 0.5, "threshold": 1.0}],
    "elu": [{}, {"alpha": 0.5, "scale": 2.0, "input_scale": 1.5}],
    "leaky_relu": [{}, {"negative_slope": 0.2}],
    "hardtanh": [{}, {"min_val": -2.0, "max_val": 0.5}],
    "logit": [{}, {"eps": 1e-6}, {"eps": 0.25}],
    "addcmul": [{}, {"value": 2}, {"value": -0.5}],
    "addcdiv": [{}, {"value": 2}, {"value": -0.5}],
    "nan_to_num": [{}, {"nan": 1.5, "posinf": 100.0, "neginf": -100.0}],
    "_to_copy": [{"dtype": dtype} for dtype in DTYPES],
    "convert_element_type": [{"dtype": dtype} for dtype in DTYPES],
}

# The fuser computes half dtypes in float32 and rounds once at the store. Eager on CPU reads the
# Scalar operand of these ops as the half dtype first (float16 0.1 is 0.0999755859375), rounds logit's
# bounds 1 - eps to it (so logit(1, eps=1e-6) is inf in float16) and takes float16 pow(x, 0.5) as C's
# pow rather than sqrt; eager on CUDA does none of these, and neither does the fuser. For these ops
# eager computed in float32 and rounded to the half dtype is also eager's answer.
FP32_REFERENCE_FOR_HALF = {"add", "sub", "rsub", "pow", "logit"}

# Eager's CPU kernels have a vectorized loop and a scalar loop (for the tail and for single elements),
# and the two disagree on some awkward values: the vectorized fmod is nan where the quotient overflows,
# the vectorized erf-gelu of +inf is nan, bfloat16 trunc division and half-precision rsub round an
# intermediate in one loop only. Where the fuser differs from eager, the call is run again in eager with
# every element on the vectorized loop (inputs padded to a multiple of 64 elements) and with every
# element on the scalar loop (one element at a time): where those disagree, either answer is eager's.
VECTORIZED_NUMEL = 192


# --- cases ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """An argument read from the program's inputs."""

    index: int


@dataclass(frozen=True)
class Constant:
    """A tensor built inside the program (torch.tensor of a list): it reaches the graph as lift_fresh_copy."""

    values: Any  # a list, or a Python scalar for a 0-d tensor
    dtype: torch.dtype


@dataclass
class Call:
    args: tuple
    kwargs: dict[str, Any]
    lowered: bool = True  # whether the op's `accepts` covers the dtype this call computes in
    expected: torch.Tensor | None = None


@dataclass
class Case:
    overload: torch._ops.OpOverload
    op: PointwiseOp
    dtype: torch.dtype
    inputs: list[torch.Tensor] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.overload}-{str(self.dtype).removeprefix('torch.')}"

    def input(self, tensor: torch.Tensor) -> Slot:
        self.inputs.append(tensor)
        return Slot(len(self.inputs) - 1)


def bind(args: tuple, inputs) -> list:
    bound = []
    for arg in args:
        if isinstance(arg, Slot):
            bound.append(inputs[arg.index])
        elif isinstance(arg, Constant):
            bound.append(torch.tensor(arg.values, dtype=arg.dtype))
        else:
            bound.append(arg)
    return bound


def run_call(overload, call: Call, inputs) -> torch.Tensor:
    args = bind(call.args, inputs)
    if any(isinstance(a, Constant) for a in call.args):
        return args[0]  # torch.tensor(...) itself is the lift_fresh_copy
    return overload(*args, **call.kwargs)


def is_lowered(op: PointwiseOp, out_dtype: torch.dtype) -> bool:
    """Ops compute in their output dtype (bools as ints): `accepts` is checked against it."""
    if op.accepts is Accepts.FLOATING:
        return out_dtype.is_floating_point
    if op.accepts is Accepts.INTEGRAL:
        return not out_dtype.is_floating_point
    return True


def schema_operands(overload, op: PointwiseOp) -> list[tuple[str, str, bool]]:
    """(name, "tensor" or "scalar", optional) for each operand, and each tensor argument the op reads
    nothing of (full_like's self), in schema order."""
    operand_names = {name for name, _ in op.operands}
    found = []
    for argument in overload._schema.arguments:
        is_tensor = "Tensor" in str(argument.type)
        if argument.name in operand_names or (is_tensor and not argument.kwarg_only):
            found.append((argument.name, "tensor" if is_tensor else "scalar", argument.name in op.optional))
    return found


def tensor_samples(case: Case, name: str, position: int, dtype: torch.dtype) -> dict[str, Slot]:
    """The operand at `position` as a full tensor, a 0-d tensor and, when promoting, both partners."""
    if name in MASK_OPERANDS:
        dtype = torch.bool
    divisor = case.op.name in DIVISION_OPS and position > 0
    samples = {
        "full": case.input(full_operand(dtype, position, divisor=divisor)),
        "0d": case.input(zero_d_operand(dtype, position, divisor=divisor)),
    }
    if name not in MASK_OPERANDS and position > 0:
        samples["partner"] = case.input(full_operand(FULL_PARTNER[dtype], position, divisor=divisor))
        samples["0d partner"] = case.input(zero_d_operand(ZERO_D_PARTNER[dtype], position, divisor=divisor))
    return samples


def cast_source(dtype: torch.dtype, target: torch.dtype, position: int) -> torch.Tensor:
    # Float to integer casts of nan, inf or out-of-range values are undefined behaviour in C++ (eager's
    # answer depends on the CPU): casts to an integral dtype read finite, in-range values only.
    values = full_operand(dtype, position)
    if dtype.is_floating_point and not target.is_floating_point and target != torch.bool:
        limit = min(torch.finfo(dtype).max, 2.0**31)
        values = torch.where(values.isfinite() & (values.abs() < limit), values, 0.0).to(dtype)
    return values


def argument_lists(case: Case, operands, dtype: torch.dtype) -> list[tuple]:
    """Positional argument tuples: all full, all 0-d, one 0-d at a time, promoting partners, scalars."""
    tensors = [(i, name, optional) for i, (name, kind, optional) in enumerate(operands) if kind == "tensor"]
    scalars = [(i, optional) for i, (_, kind, optional) in enumerate(operands) if kind == "scalar"]
    samples = {i: tensor_samples(case, name, i, dtype) for i, name, _ in tensors}

    def build(tensor_choice: dict[int, str], scalar_choice: dict[int, Any]) -> tuple:
        args = [None] * len(operands)
        for i, _, _ in tensors:
            variant = tensor_choice.get(i, "full")
            args[i] = None if variant is None else samples[i][variant]
        for i, _ in scalars:
            args[i] = scalar_choice[i]
        return tuple(args)

    tensor_choices: list[dict[int, str | None]] = [{}, {i: "0d" for i, _, _ in tensors}]
    if len(tensors) > 1:
        tensor_choices += [{i: "0d"} for i, _, _ in tensors]
    tensor_choices += [{i: v} for i, _, _ in tensors for v in ("partner", "0d partner") if v in samples[i]]
    tensor_choices += [{i: None} for i, _, optional in tensors if optional]

    if not scalars:
        return [build(choice, {}) for choice in tensor_choices]
    # Each scalar value meets the full tensors and the 0-d tensors; a second scalar operand is
    # offset so that (min, max) pairs vary, and optional scalars are also left out one at a time.
    scalar_choices = [
        {i: SCALARS[(k + 3 * j) % len(SCALARS)] for j, (i, _) in enumerate(scalars)}
        for k in range(len(SCALARS))
    ]
    for i, optional in scalars:
        if optional:
            scalar_choices += [{**choice, i: None} for choice in scalar_choices[:4]]
    return [build(t, s) for t in tensor_choices[:2] for s in scalar_choices]


def make_case(overload, op: PointwiseOp, dtype: torch.dtype) -> Case:
    case = Case(overload, op, dtype)
    operands = schema_operands(overload, op)
    candidates: list[Call] = []
    if op.name == "lift_fresh_copy":
        # lift_fresh_copy only appears in a graph as the copy of a torch.tensor(...) constant.
        for position in range(2):
            candidates.append(Call((Constant(full_operand(dtype, position).flatten().tolist(), dtype),), {}))
        candidates.append(Call((Constant(zero_d_operand(dtype, 0).item(), dtype),), {}))
    elif op.name in CAST_OPS:
        for variant in VARIANTS[op.name]:
            full = case.input(cast_source(dtype, variant["dtype"], 0))
            zero_d = case.input(cast_source(dtype, variant["dtype"], 0)[0, 0])
            candidates += [Call((full,), variant), Call((zero_d,), variant)]
    else:
        for args, variant in itertools.product(
            argument_lists(case, operands, dtype), VARIANTS.get(op.name, [{}])
        ):
            candidates.append(Call(args, variant))
    for call in candidates:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = run_call(overload, call, case.inputs)
        except (RuntimeError, TypeError, ValueError, ZeroDivisionError, NotImplementedError):
            continue  # eager rejects this combination: it is not generated
        if not meta_agrees(overload, call, case.inputs, expected):
            # PyTorch's own meta function, which compiled graphs follow, rejects the call (prims do not
            # broadcast) or disagrees with eager about the result dtype (pow(bool tensor, True) is bool
            # in eager, int64 in meta): there is no one answer to compare with.
            continue
        call.expected = expected
        call.lowered = is_lowered(op, expected.dtype)
        case.calls.append(call)
    return case


def meta_agrees(overload, call: Call, inputs, expected: torch.Tensor) -> bool:
    if any(isinstance(a, Constant) for a in call.args):
        return True
    try:
        meta = run_call(overload, call, [t.to("meta") for t in inputs])
    except Exception:
        return False
    return meta.dtype == expected.dtype and meta.shape == expected.shape


def other_eager_answers(case: Case, call: Call, expected: torch.Tensor) -> list[torch.Tensor]:
    """Eager's answers from its float32 arithmetic (FP32_REFERENCE_FOR_HALF), from its vectorized loop
    alone and from its scalar loop alone."""
    if any(isinstance(a, Constant) for a in call.args):
        return []
    answers = []
    if expected.dtype in (torch.float16, torch.bfloat16) and case.op.name in FP32_REFERENCE_FOR_HALF:
        widened = [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t for t in case.inputs]
        answers.append(run_call(case.overload, call, widened).to(expected.dtype))
    if expected.numel() == NUMEL:
        answers += eager_loops(case.overload, call, case.inputs, expected)
    return answers


def eager_loops(overload, call: Call, inputs, expected: torch.Tensor) -> list[torch.Tensor]:
    """Eager's answers with every element on its vectorized loop, and with every element on its scalar loop."""
    flat = [t.reshape(-1) if t.numel() == NUMEL else t for t in inputs]
    padded = [torch.cat([t, t[: VECTORIZED_NUMEL - NUMEL]]) if t.numel() == NUMEL else t for t in flat]
    vectorized = run_call(overload, call, padded)[:NUMEL]
    one_at_a_time = [
        run_call(overload, call, [t[i : i + 1] if t.numel() == NUMEL else t for t in flat])
        for i in range(NUMEL)
    ]
    scalar = torch.cat(one_at_a_time)
    return [vectorized.reshape(expected.shape), scalar.reshape(expected.shape)]


TOLERANCES = {  # torch.testing.assert_close's defaults
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}


def close(actual: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """Elementwise assert_close: default tolerances, nan equal to nan."""
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return torch.zeros(expected.shape, dtype=torch.bool)
    if expected.dtype not in TOLERANCES:
        return actual == expected
    rtol, atol = TOLERANCES[expected.dtype]
    return torch.isclose(actual, expected, rtol=rtol, atol=atol, equal_nan=True)


def all_cases() -> list[Case]:
    cases = []
    for overload, op in POINTWISE_BY_OVERLOAD.items():
        for dtype in DTYPES:
            case = make_case(overload, op, dtype)
            if case.calls:
                cases.append(case)
    return cases


CASES = all_cases()


def case_params() -> list:
    return [pytest.param(case, id=str(case)) for case in CASES]


def program_source(case: Case) -> str:
    """The compiled program as straight-line source (Dynamo traces it far faster than a loop over helpers)."""

    def literal(arg) -> str:
        if isinstance(arg, Slot):
            return f"in{arg.index}"
        if isinstance(arg, Constant):
            return f"torch.tensor({arg.values!r}, dtype={arg.dtype})"
        return repr(arg)  # numbers (inf and nan are names in the program's globals), dtypes, strings, None

    lines = [f"def program({', '.join(f'in{i}' for i in range(len(case.inputs)))}):", "    return ["]
    for call in case.calls:
        if any(isinstance(a, Constant) for a in call.args):
            lines.append(f"        {literal(call.args[0])},")
            continue
        arguments = [literal(a) for a in call.args] + [f"{k}={literal(v)}" for k, v in call.kwargs.items()]
        lines.append(f"        op({', '.join(arguments)}),")
    lines.append("    ]")
    return "\n".join(lines)


def program_for(case: Case):
    namespace = {"op": case.overload, "torch": torch, "inf": inf, "nan": nan}
    exec(program_source(case), namespace)
    return namespace["program"]


# --- tests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", case_params())
def test_each_pointwise_op_matches_eager(case: Case):
    report = fuser.explain(program_for(case), *case.inputs)

    source = program_source(case).splitlines()[2:]
    for number, (call, actual) in enumerate(zip(case.calls, report.result, strict=True)):
        expected = call.expected
        if not close(actual, expected).all():  # where eager has more than one answer, any is eager's
            for alternative in other_eager_answers(case, call, expected):
                expected = torch.where(close(actual, alternative), alternative, expected)
        torch.testing.assert_close(
            actual,
            expected,
            equal_nan=True,
            msg=failure_message(case, source[number].strip()),
        )

    if is_composite(case.overload):
        # Decomposed before any backend sees it (square becomes pow): what it became must all be kernels.
        assert report.num_kernels >= 1 and not report.eager_calls, f"{case}: ran eagerly\n{report}"
        assert not report.fallbacks, f"{case}: unexpected fallbacks {report.fallbacks}"
        return
    name = str(case.overload)
    in_kernels = sum(
        line.split(" = ", 1)[1].startswith(f"{name}(") for k in report.kernels for line in k.covers
    )
    fallbacks = [reason for op, reason in report.fallbacks if op == name]
    lowered = sum(call.lowered for call in case.calls)
    assert in_kernels == lowered, f"{case}: {in_kernels} of {lowered} lowered calls ran in a kernel\n{report}"
    assert len(fallbacks) == len(case.calls) - lowered, f"{case}: unexpected fallbacks {report.fallbacks}"
    assert all(fallbacks), f"{case}: a fallback without a reason"
    if lowered:
        assert report.num_kernels >= 1


def failure_message(case: Case, line: str):
    return lambda message: f"{case}: {line} (in0... are case.inputs): {message}"


def is_composite(overload) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(overload.name(), "CompositeImplicitAutograd")


# Ops with no tensor argument have nothing to derive samples from: tested in test_created_tensors.py.
CREATION_OPS = {torch.ops.aten.full.default, torch.ops.aten.scalar_tensor.default}


def test_every_overload_in_the_table_has_cases():
    covered = {case.overload for case in CASES} | CREATION_OPS
    assert not [str(overload) for overload in POINTWISE_BY_OVERLOAD if overload not in covered]


def test_the_op_table_lowers_at_least_80_aten_ops_and_every_overload_is_real():
    assert len({op.name for op in POINTWISE_OPS}) >= 80
    for op in POINTWISE_OPS:
        for qualified in op.overloads:
            namespace, _, rest = qualified.rpartition("::") if "::" in qualified else ("aten", "", qualified)
            packet, _, overload_name = rest.partition(".")
            packet_op = getattr(getattr(torch.ops, namespace), packet)
            assert overload_name in packet_op.overloads(), qualified
            assert isinstance(getattr(packet_op, overload_name), torch._ops.OpOverload)
