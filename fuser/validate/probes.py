"""Probe programs: the kernels the fuser emits for one op, in each way the op sits in a kernel.

A validation manifest entry must go stale whenever what its op's kernels compute could have changed:
the op's own lowering, and the shared code generation around it (loads, stores, masks, indexing, casts,
the row kernels' loops and split stages). So a fingerprint (`fuser.lower.lowerings.fingerprint`) hashes the
kernels themselves, generated here from small FX graphs built directly (no Dynamo, no tracing) and run
through the real partition and code generation:

- for every operand dtype the op is lowered for: the op alone, over contiguous operands;
- for one dtype of each class (half, float, double, integer, bool): the op over a broadcast operand,
  producing into a pointwise consumer, consuming a pointwise producer, reduced over its rows, and reading
  a row reduction's result. A backward graph's kernels are these same kinds (pointwise and row kernels).

The neighbours in those probes are `fuser_probe` ops that exist only here: a pointwise identity and a
row max, rendered as opaque names. So a probe holds no other op's lowering, and editing one op's
renderer stales that op's entries alone, while a change to a kernel template stales every op it reaches.
Sources are normalized (parsed and printed again) so comments and formatting do not count.
"""

from __future__ import annotations

import ast
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode

from fuser.emit.codegen import KernelSource
from fuser.lower.ops import (
    INDEXED_BY_OVERLOAD,
    POINTWISE_BY_OVERLOAD,
    SCATTER_BY_OVERLOAD,
    VIEW_BY_OVERLOAD,
    PointwiseOp,
    Typing,
)
from fuser.lower.reductions import REDUCTION_BY_OVERLOAD, ReductionOp
from fuser.testing import miscompiles

ROWS, COLS = 5, 7  # odd sizes: neither is a power of two, so masks and loops are in every probe

# Tensor operands that must have no dims.
ZERO_DIM_OPERANDS = {"aten.masked_fill.Tensor": ("value",)}
# The values a string attribute is probed with (a renderer branches on them).
STRING_CHOICES = {"rounding_mode": (None, "trunc", "floor"), "approximate": ("none", "tanh")}

# One operand dtype of each class the code generator tells apart.
CLASS_DTYPES = (torch.bfloat16, torch.float32, torch.float64, torch.int64, torch.bool)

_lock = threading.Lock()
_library: torch.library.Library | None = None


def _probe_ops() -> tuple[torch._ops.OpOverload, torch._ops.OpOverload]:
    """The neighbours: `fuser_probe::same` (pointwise identity) and `fuser_probe::rowmax` (a row max)."""
    global _library
    if _library is None:
        _library = torch.library.Library("fuser_probe", "DEF")
        _library.define("same(Tensor x) -> Tensor")
        _library.define("rowmax(Tensor self, int[1] dim, bool keepdim=False) -> Tensor")
        for kind in ("Meta", "CPU"):
            _library.impl("same", lambda x: x.clone(), kind)
            _library.impl("rowmax", lambda x, dim, keepdim=False: torch.amax(x, dim, keepdim), kind)
    return torch.ops.fuser_probe.same.default, torch.ops.fuser_probe.rowmax.default


@contextmanager
def _neighbours() -> Iterator[tuple[Callable, Callable]]:
    """The probe ops, entered in the op tables while probes are generated (and only then)."""
    same, rowmax = _probe_ops()
    POINTWISE_BY_OVERLOAD[same] = PointwiseOp(
        "probe_same", ("fuser_probe::same.default",), (("x", Typing.OWN),), lambda x: f"probe_same({x})"
    )
    REDUCTION_BY_OVERLOAD[rowmax] = ReductionOp("probe_rowmax", ("fuser_probe::rowmax.default",), "max",
                                                "self", "dim", "keepdim")  # fmt: skip
    try:
        yield same, rowmax
    finally:
        del POINTWISE_BY_OVERLOAD[same], REDUCTION_BY_OVERLOAD[rowmax]


@contextmanager
def _quiet_fake_tensors() -> Iterator[None]:
    """Fake tensors log an op that rejects its operands (neg of a bool) as an error; for a probe that
    is an answer, not an error."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


class _Graph:
    """An FX graph under construction whose nodes carry fake values, as AOTAutograd's do."""

    def __init__(self, device: str):
        self.graph = fx.Graph()
        self.mode = FakeTensorMode()
        self.device = device

    def input(self, shape: tuple[int, ...], dtype: torch.dtype, stride: tuple[int, ...] | None = None):
        node = self.graph.placeholder(f"arg{len(self.graph.nodes)}_1")
        with self.mode:
            node.meta["val"] = torch.empty_strided(
                shape, stride or torch.empty(shape).stride(), dtype=dtype, device=self.device
            )
        return node

    def call(self, target, *args, **kwargs):
        node = self.graph.call_function(target, args, kwargs)
        value = lambda a: a.meta["val"] if isinstance(a, fx.Node) else a  # noqa: E731
        with self.mode:
            node.meta["val"] = target(
                *fx.node.map_aggregate(args, value), **fx.node.map_aggregate(kwargs, value)
            )
        return node

    def output(self, *nodes) -> fx.Graph:
        self.graph.output(tuple(nodes))
        return self.graph


def _kind(argument) -> str:
    """The schema argument's type without Optional: "Tensor", "Scalar", "List[int]", "ScalarType", ..."""
    kind = argument.type
    if isinstance(kind, torch.OptionalType):
        kind = kind.getElementType()
    return str(kind)


def _scalar(kind: str, dtype: torch.dtype):
    if kind == "bool" or dtype == torch.bool:
        return True
    if kind == "int" or not dtype.is_floating_point:
        return 2
    return 0.5


def _cast_source(dtype: torch.dtype) -> torch.dtype:
    """The input dtype of a cast probe to `dtype`: another class, so the cast does something."""
    return torch.int64 if dtype.is_floating_point else torch.float32


def _attribute_variants(overload, op: PointwiseOp) -> list[dict]:
    """Attribute values to probe: the schema's defaults first, then each other value a renderer may
    branch on (every string choice; a number other than its default)."""
    attributes = [a for a in overload._schema.arguments if a.name in op.attrs]
    choices = {}
    for a in attributes:
        default = a.default_value if a.has_default_value() else None
        if a.name in STRING_CHOICES:
            choices[a.name] = sorted(STRING_CHOICES[a.name], key=lambda c: c != default)
        elif _kind(a) in ("Scalar", "float", "int", "number"):
            choices[a.name] = [default if default is not None else 1, 3] if default != 3 else [3, 2]
    count = max((len(c) for c in choices.values()), default=1)
    return [{name: c[min(i, len(c) - 1)] for name, c in choices.items()} for i in range(count)]


def _pointwise_args(overload, op: PointwiseOp, make: Callable[..., object], dtype, attributes: dict):
    """The schema's (args, kwargs): tensors for tensor arguments, scalars for scalar ones, `dtype` for a
    dtype, `attributes`, and defaults for the rest of the keyword arguments."""
    typing = dict(op.operands)
    arguments = overload._schema.arguments
    casts = any(_kind(a) == "ScalarType" for a in arguments)
    args, kwargs = [], {}
    for argument in arguments:
        kind = _kind(argument)
        if argument.name in attributes:
            value = attributes[argument.name]
        elif kind == "Tensor" and argument.name in ZERO_DIM_OPERANDS.get(str(overload), ()):
            value = make(argument.name, dtype, ())
        elif kind == "Tensor":
            boolean = typing.get(argument.name) is Typing.BOOL
            value = make(argument.name, torch.bool if boolean else _cast_source(dtype) if casts else dtype)
        elif kind == "ScalarType":
            value = dtype
        elif kind == "List[int]":
            value = [ROWS, COLS]
        elif argument.name in typing or not argument.has_default_value():
            if kind not in ("Scalar", "float", "int", "bool", "number"):
                raise TypeError(f"no probe argument for {overload}'s {argument.name}: {argument.type}")
            value = _scalar(kind, dtype)
        elif argument.kwarg_only:
            continue
        else:
            value = argument.default_value
        if argument.kwarg_only:
            kwargs[argument.name] = value
        else:
            args.append(value)
    return args, kwargs


def _pointwise_graphs(overload, dtypes, device) -> Iterator[tuple[str, Callable[[], fx.Graph]]]:
    op = POINTWISE_BY_OVERLOAD[overload]
    variants = _attribute_variants(overload, op)
    broadcasts = overload.namespace != "prims"  # prims take operands of one shape
    for dtype in dtypes:
        contexts = ["alone"] + (["broadcast"] * broadcasts + ["producing", "consuming", "reduced", "from_reduction"]
                                if dtype in CLASS_DTYPES or dtype == dtypes[0] else [])  # fmt: skip
        for context in contexts:
            yield (
                f"{dtype} {context}",
                partial(_pointwise_graph, overload, op, dtype, context, device, variants[0]),
            )
        for attributes in variants[1:]:
            yield f"{dtype} alone {attributes}", partial(_pointwise_graph, overload, op, dtype, "alone", device,
                                                         attributes)  # fmt: skip


def _pointwise_graph(
    overload, op: PointwiseOp, dtype, context: str, device: str, attributes: dict
) -> fx.Graph:
    same, rowmax = _probe_ops()
    g = _Graph(device)

    def make(name, d, shape=(ROWS, COLS)):
        if shape != (ROWS, COLS):
            return g.input(shape, d)
        if context == "broadcast" and name == op.operands[-1][0]:
            return g.input((COLS,), d)
        if context == "broadcast":  # the other operands transposed in memory
            return g.input((ROWS, COLS), d, (1, ROWS))
        x = g.input((ROWS, COLS), d)
        if context == "consuming":
            return g.call(same, x)
        if context == "from_reduction":
            return g.call(rowmax, x, [-1], True)
        return x

    args, kwargs = _pointwise_args(overload, op, make, dtype, attributes)
    out = g.call(overload, *args, **kwargs)
    if context == "producing":
        out = g.call(same, out)
    elif context == "reduced":
        out = g.call(rowmax, out, [-1])
    return g.output(out)


def _reduction_graphs(overload, dtypes, device) -> Iterator[tuple[str, Callable[[], fx.Graph]]]:
    op = REDUCTION_BY_OVERLOAD[overload]
    for dtype in dtypes:
        for context in ("alone", "producing", "consuming", "long rows"):
            if context == "alone" or dtype in CLASS_DTYPES or dtype == dtypes[0]:
                yield f"{dtype} {context}", partial(_reduction_graph, overload, op, dtype, context, device)


def _reduction_graph(overload, op: ReductionOp, dtype, context: str, device: str) -> fx.Graph:
    same, _ = _probe_ops()
    g = _Graph(device)
    x = g.input((3, 4099) if context == "long rows" else (ROWS, COLS), dtype)  # long rows: looped, split
    if context == "consuming":
        x = g.call(same, x)
    args = [x]
    for argument in overload._schema.arguments[1:]:
        if argument.kwarg_only:
            continue
        if argument.name == op.dims:
            last = x.meta["val"].dim() - 1  # prims take no negative dims
            args.append([last] if _kind(argument).startswith("List") else last)
        elif argument.has_default_value():
            args.append(argument.default_value)
        else:
            raise TypeError(f"no probe argument for {overload}'s {argument.name}")
    out = g.call(overload, *args)
    if context == "producing":
        out = g.call(same, out)
    return g.output(out)


# A view's or scatter's probe arguments after the tensor, on a (ROWS, COLS) input.
_VIEW_ARGS = {
    "aten.view.default": ([COLS, ROWS],),
    "aten._unsafe_view.default": ([ROWS * COLS],),
    "aten.reshape.default": ([COLS, 1, ROWS],),
    "aten.permute.default": ([1, 0],),
    "aten.transpose.int": (0, 1),
    "aten.t.default": (),
    "aten.expand.default": ([3, ROWS, COLS],),
    "aten.unsqueeze.default": (1,),
    "aten.squeeze.default": (),
    "aten.squeeze.dim": (0,),
    "aten.squeeze.dims": ([0],),
    "aten.slice.Tensor": (1, 1, 6, 2),
    "aten.select.int": (1, 3),
    "aten.alias.default": (),
    "prims.broadcast_in_dim.default": ([2, ROWS, COLS], [1, 2]),
}


def _view_graphs(name, overload, dtypes, device) -> Iterator[tuple[str, Callable[[], fx.Graph]]]:
    for dtype in dtypes:
        for context in ("consumed", "between"):
            yield f"{dtype} {context}", partial(_view_graph, name, overload, dtype, context, device)


def _view_graph(name: str, overload, dtype, context: str, device: str) -> fx.Graph:
    same, _ = _probe_ops()
    g = _Graph(device)
    x = g.input((1, COLS) if "squeeze" in name else (ROWS, COLS), dtype)
    if context == "between":  # a view of a value computed in the same kernel
        x = g.call(same, x)
    return g.output(g.call(same, g.call(overload, x, *_VIEW_ARGS[name])))


def _scatter_graphs(name, overload, dtypes, device) -> Iterator[tuple[str, Callable[[], fx.Graph]]]:
    for dtype in dtypes:
        for context in ("alone", "producing", "consuming"):
            yield f"{dtype} {context}", partial(_scatter_graph, name, overload, dtype, context, device)


def _scatter_graph(name: str, overload, dtype, context: str, device: str) -> fx.Graph:
    same, _ = _probe_ops()
    g = _Graph(device)

    def make(shape):
        x = g.input(shape, dtype)
        return g.call(same, x) if context == "consuming" else x

    if name == "aten.cat.default":
        out = g.call(overload, [make((ROWS, COLS)), make((ROWS, 3)), make((ROWS, COLS))], 1)
    else:
        out = g.call(overload, make((ROWS, COLS)), make((ROWS, 2)), 1, 2, 6, 2)
    if context == "producing":
        out = g.call(same, out)
    return g.output(out)


def _indexed_graphs(name, overload, dtypes, device) -> Iterator[tuple[str, Callable[[], fx.Graph]]]:
    for dtype in dtypes:
        contexts = ("alone", "producing", "consuming", "reduced", "one position", "first dim")
        for context in contexts if dtype in CLASS_DTYPES or dtype == dtypes[0] else ("alone",):
            yield f"{dtype} {context}", partial(_indexed_graph, overload, dtype, context, device)


def _indexed_graph(overload, dtype, context: str, device: str) -> fx.Graph:
    """A gather or a scatter of a value along the columns (the rows for "first dim"), at positions an
    int64 input holds: 3 a row (1 for "one position")."""
    same, rowmax = _probe_ops()
    g = _Graph(device)
    x = g.input((ROWS, COLS), dtype)
    if context == "consuming":
        x = g.call(same, x)
    dim = 0 if context == "first dim" else 1
    count = 1 if context == "one position" else 3
    index = g.input((count, COLS) if dim == 0 else (ROWS, count), torch.int64)
    if overload is torch.ops.aten.gather.default:
        out = g.call(overload, x, dim, index)
    else:
        out = g.call(overload, x, dim, index, _scalar("Scalar", dtype))
    if context == "producing":
        out = g.call(same, out)
    elif context == "reduced":
        out = g.call(rowmax, out, [-1])
    return g.output(out)


def graphs(
    name: str, overload, dtypes: tuple[torch.dtype, ...], device: str
) -> Iterator[tuple[str, Callable[[], fx.Graph]]]:
    """(label, graph builder) for every probe of the op; build inside `_neighbours()`."""
    if overload in POINTWISE_BY_OVERLOAD:
        return _pointwise_graphs(overload, dtypes, device)
    if overload in REDUCTION_BY_OVERLOAD:
        return _reduction_graphs(overload, dtypes, device)
    if overload in VIEW_BY_OVERLOAD:
        return _view_graphs(name, overload, dtypes, device)
    if overload in INDEXED_BY_OVERLOAD:
        return _indexed_graphs(name, overload, dtypes, device)
    assert overload in SCATTER_BY_OVERLOAD, name
    return _scatter_graphs(name, overload, dtypes, device)


def normalized(source: str) -> str:
    """The source with comments and formatting gone: parsed and printed again."""
    return ast.unparse(ast.parse(source))


def _describe(kernel: KernelSource) -> str:
    facts = (kernel.kind, kernel.contiguous_rows, kernel.row_inputs, [p for p, _ in kernel.params])
    return f"{facts}\n{normalized(kernel.source)}"


def plans(name: str, overload, dtypes: tuple[torch.dtype, ...], device: str) -> list[tuple[str, object]]:
    """(label, (plan, generated)) for every probe of the op, or (label, the exception) where the lowering
    refuses the probe. Generated without any planted miscompile."""
    from fuser.emit.generation import plan_and_generate  # it imports the tables this module patches
    from fuser.options import Options

    made = []
    with _lock, _neighbours(), miscompiles.off(), _quiet_fake_tensors():
        for label, build in graphs(name, overload, dtypes, device):
            try:
                made.append((label, plan_and_generate(build(), Options(unvalidated="fuse"), set())))
            except Exception as error:
                made.append((label, error))
    return made


def emitted(name: str, overload, dtypes: tuple[torch.dtype, ...], device: str) -> list[str]:
    """Every probe's kernels, normalized, each labelled with its probe; an error is part of the output."""
    out = []
    for label, made in plans(name, overload, dtypes, device):
        if isinstance(made, Exception):  # a probe the lowering refuses: the refusal is what it emits
            out.append(f"## {label}: {type(made).__name__}")
            continue
        plan, generated = made
        lines = [f"## {label}"]
        for step in plan.steps:
            if isinstance(step, fx.Node):
                lines.append(f"eager {step.target}")
            elif (error := generated.error(step)) is not None:
                lines.append(f"failed {type(error).__name__}")
            else:
                lines += [_describe(k) for k in generated.variants(step) or ()]
        out.append("\n".join(lines))
    return out
