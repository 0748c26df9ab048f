"""Every op the fuser lowers, by name, with the dtypes it lowers and a fingerprint of its lowering.

The manifest (`fuser.validation`) names ops as `namespace.name.overload` ("aten.add.Tensor",
"prims.div.default"), the conformance suite's spelling. A fingerprint hashes what the op's lowering
emits on an architecture — the rendered Triton expression for a float and an integer operand, with
the schema's default attributes, and the source of every `lib.*` helper it calls (and, for the
interpreter, of the NumPy `libdevice` functions it calls) — so editing a lowering makes its manifest
entries stale. Reductions hash their combine rules and the code of a kind emitted by its own method
(var, argmax, argmin); views hash the index mapping, scatters theirs and the code choosing between
their two inputs.
"""

from __future__ import annotations

import hashlib
import inspect
import re
from dataclasses import dataclass, fields
from functools import cache

import torch

from fuser import codegen, interpreter_libdevice, kernel_lib, row_codegen, views
from fuser.dtypes import SUPPORTED_DTYPES, is_integral
from fuser.ops import POINTWISE_BY_OVERLOAD, SCATTER_BY_OVERLOAD, VIEW_BY_OVERLOAD, Accepts, PointwiseOp
from fuser.reductions import REDUCTION_BY_OVERLOAD

# The conformance suite's dtype names, in its order.
DTYPE_NAMES = {
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.uint8: "uint8",
    torch.bool: "bool",
}
assert set(DTYPE_NAMES) == set(SUPPORTED_DTYPES)


def op_name(overload: torch._ops.OpOverload) -> str:
    """'aten.add.Tensor' for torch.ops.aten.add.Tensor; 'prims.div.default' for prims::div."""
    return str(overload).replace("::", ".")


@dataclass(frozen=True)
class Lowering:
    name: str
    kind: str  # pointwise | reduction | view | scatter
    dtypes: tuple[str, ...]  # the operand dtypes it is lowered for (others run eager)


def _accepted(op: PointwiseOp) -> tuple[str, ...]:
    def ok(dtype: torch.dtype) -> bool:
        if op.accepts is Accepts.FLOATING:
            return dtype.is_floating_point
        if op.accepts is Accepts.INTEGRAL:
            return is_integral(dtype)
        return True

    return tuple(name for dtype, name in DTYPE_NAMES.items() if ok(dtype))


@cache
def lowerings() -> dict[str, Lowering]:
    """Every lowered op by name."""
    found = {}
    for overload, op in POINTWISE_BY_OVERLOAD.items():
        found[op_name(overload)] = Lowering(op_name(overload), "pointwise", _accepted(op))
    every = tuple(DTYPE_NAMES.values())
    for overload in REDUCTION_BY_OVERLOAD:
        found[op_name(overload)] = Lowering(op_name(overload), "reduction", every)
    for overload in VIEW_BY_OVERLOAD:
        found[op_name(overload)] = Lowering(op_name(overload), "view", every)
    for overload in SCATTER_BY_OVERLOAD:
        found[op_name(overload)] = Lowering(op_name(overload), "scatter", every)
    return found


def _overload(name: str) -> torch._ops.OpOverload:
    namespace, packet, overload = name.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), packet), overload)


def _helpers(text: str, arch: str) -> list[str]:
    """The source of each `lib.*` helper (and, on the interpreter, NumPy `libdevice.*`) `text` calls."""
    modules = {"lib": kernel_lib, **({"libdevice": interpreter_libdevice} if arch == "cpu" else {})}
    sources: dict[str, str] = {}
    pending = [text]
    while pending:  # helpers call helpers: follow them
        for prefix, name in re.findall(r"\b(lib|libdevice)\.(\w+)", pending.pop()):
            key = f"{prefix}.{name}"
            if prefix not in modules or key in sources:
                continue
            helper = getattr(modules[prefix], name, None)
            target = getattr(helper, "fn", helper)  # a @triton.jit function wraps its Python source
            try:
                sources[key] = inspect.getsource(target)
            except (TypeError, OSError):
                sources[key] = f"{key}: {helper!r}"
            if hasattr(helper, "stands_in_with"):  # the interpreter's wrappers share one source
                sources[key] += "\n" + _computed_with(helper.stands_in_with)
            pending.append(sources[key])
    return [sources[key] for key in sorted(sources)]


def _computed_with(fn) -> str:
    """What an interpreter stand-in computes with: its source where it is the fuser's own, else the
    library function's name (`numpy.exp`, `math.erf`), which a library upgrade does not change."""
    module = getattr(fn, "__module__", None) or type(fn).__module__
    if module == interpreter_libdevice.__name__:
        return inspect.getsource(fn)
    return f"{module.split('.')[0]}.{fn.__name__}"


def _render(op: PointwiseOp, overload, dtype: torch.dtype, arch: str) -> str:
    defaults = {a.name: a.default_value for a in overload._schema.arguments if a.has_default_value()}
    keywords = {name: defaults.get(name, f"<{name}>") for name in op.attrs}
    if op.wants_out_dtype:
        keywords["out_dtype"] = dtype
    if op.wants_device:
        keywords["device"] = "cpu" if arch == "cpu" else "cuda"
    operands = [name for name, _ in op.operands]
    try:
        return op.renderer_for([dtype])(*operands, **keywords)
    except Exception as error:  # a renderer that rejects this dtype: its refusal is part of the lowering
        return f"<{type(error).__name__}>"


def _describe(name: str, arch: str) -> str:
    if name not in lowerings():
        raise ValueError(f"fuser: {name!r} is not a lowered op (see fuser/ops.py)")
    overload = _overload(name)
    if overload in POINTWISE_BY_OVERLOAD:
        op = POINTWISE_BY_OVERLOAD[overload]
        data = {f.name: getattr(op, f.name) for f in fields(op) if f.name not in ("render", "int_render")}
        rendered = [_render(op, overload, d, arch) for d in (torch.float32, torch.int64)]
        return "\n".join(
            [repr(sorted(data.items(), key=str)), *rendered, *_helpers("\n".join(rendered), arch)]
        )
    if overload in REDUCTION_BY_OVERLOAD:
        op = REDUCTION_BY_OVERLOAD[overload]
        rule = row_codegen.KINDS.get(op.kind)
        own = row_codegen.emitter_source(op.kind)
        return "\n".join([repr(op), repr(rule), *_helpers(repr(rule), arch), *([own] if own else [])])
    if overload in SCATTER_BY_OVERLOAD:
        sources = [inspect.getsource(f) for f in (views.scatter_pieces, codegen.Builder.scatter)]
        return "\n".join([repr(SCATTER_BY_OVERLOAD[overload]), *sources])
    view = VIEW_BY_OVERLOAD[overload]
    return "\n".join([repr(view), inspect.getsource(views.source_index)])


@cache
def fingerprint(name: str, arch: str) -> str:
    """A short hash of what `name`'s lowering emits on `arch`: it changes when the lowering does."""
    return hashlib.sha256(_describe(name, arch).encode()).hexdigest()[:16]
