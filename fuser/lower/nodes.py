"""Reading FX nodes: their fake-tensor metadata, their schema-bound arguments, and operand typing."""

from __future__ import annotations

import numbers
from typing import Any

import torch
from torch import fx

from fuser.lower.dtypes import arithmetic_dtype, value_dtype
from fuser.lower.ops import HOST_READ, POINTWISE_BY_OVERLOAD, PointwiseOp, Typing, may_overflow


def meta(node: fx.Node) -> Any:
    """The fake value AOTAutograd recorded for a node (a FakeTensor for tensor-valued nodes)."""
    return node.meta.get("val")


def downstream(graph: fx.Graph, is_seed) -> frozenset[fx.Node]:
    """The nodes for which `is_seed(node)` holds, and every node computed from one of them."""
    found: set[fx.Node] = set()
    for node in graph.nodes:  # in topological order
        if is_seed(node) or any(source in found for source in node.all_input_nodes):
            found.add(node)
    return frozenset(found)


def tensor_meta(arg: Any) -> torch.Tensor | None:
    return meta(arg) if isinstance(arg, fx.Node) and isinstance(meta(arg), torch.Tensor) else None


def bind_arguments(node: fx.Node) -> dict[str, Any]:
    """Every schema argument of an aten call by name, with schema defaults filled in."""
    bound = {}
    for position, argument in enumerate(node.target._schema.arguments):
        if not argument.kwarg_only and position < len(node.args):
            bound[argument.name] = node.args[position]
        elif argument.name in node.kwargs:
            bound[argument.name] = node.kwargs[argument.name]
        else:
            bound[argument.name] = argument.default_value if argument.has_default_value() else None
    return bound


def _dtype_of(value: Any) -> torch.dtype | Any:
    """A tensor operand by its fake value; a Python scalar as itself (it promotes as a scalar)."""
    fake = tensor_meta(value)
    return fake if fake is not None else value


def common_dtype(op: PointwiseOp, bound: dict[str, Any]) -> torch.dtype | None:
    """The dtype the COMMON-typed operands promote to together (eager's torch.result_type), if any."""
    common_operands = [_dtype_of(bound[name]) for name, typing in op.operands if typing is Typing.COMMON]
    if len(common_operands) > 2:
        raise ValueError(f"{op.name}: at most two operands may promote together")
    return torch.result_type(*common_operands) if len(common_operands) == 2 else None


def operand_dtypes(
    op: PointwiseOp, bound: dict[str, Any], out_dtype: torch.dtype
) -> list[torch.dtype | None]:
    """The dtype each operand is cast to before rendering (None for an omitted optional operand)."""
    common = common_dtype(op, bound)
    dtypes = []
    for name, typing in op.operands:
        value = bound[name]
        if value is None:
            dtypes.append(None)
        elif typing is Typing.OUT:
            dtypes.append(arithmetic_dtype(out_dtype))
        elif typing is Typing.COMMON:
            dtypes.append(arithmetic_dtype(common))
        elif typing is Typing.BOOL:
            dtypes.append(torch.bool)
        else:
            dtypes.append(value_dtype(_own_dtype(value)))
    return dtypes


def eager_check_arguments(bound: dict[str, Any]) -> dict[str, Any]:
    """The bound arguments as `fuser.lower.ops.EAGER_CHECKS` read them: a tensor as its dtype, a Python
    number as itself."""
    found = {name: _dtype_of(value) for name, value in bound.items()}
    return {name: v.dtype if isinstance(v, torch.Tensor) else v for name, v in found.items()}


def host_read_values(node: fx.Node) -> list[tuple[fx.Node, torch.dtype]]:
    """The 0-d tensors `node` reads as eager does on the host (`fuser.lower.ops.HOST_READ`) whose values
    may not fit its result, each with the result's dtype: the step checks them before each launch."""
    op = POINTWISE_BY_OVERLOAD.get(node.target) if node.op == "call_function" else None
    if op is None or op.name not in HOST_READ:
        return []
    bound, out = bind_arguments(node), meta(node)
    found = []
    for name in HOST_READ[op.name]:
        value = tensor_meta(bound.get(name))
        if value is not None and value.dim() == 0 and may_overflow(value.dtype, out.dtype):
            found.append((bound[name], out.dtype))
    return found


def _own_dtype(value: Any) -> torch.dtype:
    fake = tensor_meta(value)
    if fake is not None:
        return fake.dtype
    if isinstance(value, bool):
        return torch.bool
    if isinstance(value, numbers.Integral):
        return torch.int64
    return torch.float64
