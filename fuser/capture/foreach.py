"""`_foreach_*` ops as one aten call per tensor, so the fuser sees an optimizer step's per-tensor work.

A compiled `optimizer.step()` with `foreach=True` reaches AOTAutograd as `_foreach_*` calls over lists
of tensors, which no kernel can hold. Each one is decomposed into its per-element op — the aten overload
of the same name whose schema is the foreach schema with every list replaced by its element type
(`_foreach_addcmul.Scalar(Tensor[], Tensor[], Tensor[], Scalar)` → `addcmul(Tensor, Tensor, Tensor,
*, Scalar)`) — applied to each position of the lists. The table is derived from the schemas, not
written by hand. An overload with no such partner (`_foreach_norm`, `_foreach_addcmul.Tensor`, whose
`scalars` tensor holds one value per list position) stays a foreach call and runs eagerly.

The per-tensor chains then fuse vertically (one kernel per tensor) and `fuser.plan.horizontal` batches those
kernels across tensors.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

aten = torch.ops.aten


def _element_type(type_name: str) -> str:
    """The type a foreach argument has per list position: `Tensor[]` is `Tensor`, `Scalar[]` `Scalar`."""
    for list_type, element in (("List[Tensor]", "Tensor"), ("List[number]", "number")):
        if type_name == list_type:
            return element
    return type_name


def _types(schema) -> list[str]:
    return [str(arg.type) for arg in schema.arguments]


def _partner(foreach: torch._ops.OpOverload) -> torch._ops.OpOverload | None:
    """The per-element overload of `foreach`, or None where no overload's schema matches."""
    packet = getattr(aten, foreach._schema.name.split("::")[1].removeprefix("_foreach_"), None)
    if packet is None:
        return None
    wanted = [_element_type(t) for t in _types(foreach._schema)]
    for name in packet.overloads():
        overload = getattr(packet, name)
        schema = overload._schema
        if schema.is_mutable or len(schema.returns) != 1 or str(schema.returns[0].type) != "Tensor":
            continue
        types = _types(schema)
        extra = schema.arguments[len(wanted) :]
        if types[: len(wanted)] == wanted and all(arg.has_default_value() for arg in extra):
            return overload  # extra arguments keep their defaults (`add.Scalar`'s alpha)
    return None


def _is_list(type_name: str) -> bool:
    return type_name.startswith("List[")


def _decomposition(foreach: torch._ops.OpOverload, partner: torch._ops.OpOverload) -> Callable:
    arguments = foreach._schema.arguments
    listed = [_is_list(str(arg.type)) for arg in arguments]
    used = partner._schema.arguments[: len(arguments)]
    keyword = [arg.kwarg_only for arg in used]
    names = [arg.name for arg in used]

    def per_tensor(*args, **kwargs):
        bound = list(args) + [kwargs.get(arg.name, arg.default_value) for arg in arguments[len(args) :]]
        length = len(next(value for value, is_list in zip(bound, listed, strict=True) if is_list))
        results = []
        for position in range(length):
            values = [v[position] if is_list else v for v, is_list in zip(bound, listed, strict=True)]
            positional = [v for v, k in zip(values, keyword, strict=True) if not k]
            named = {n: v for n, v, k in zip(names, values, keyword, strict=True) if k}
            results.append(partner(*positional, **named))
        return results

    per_tensor.__name__ = f"{foreach._schema.name.split('::')[1]}_per_tensor"
    return per_tensor


@functools.cache
def foreach_decompositions() -> dict[torch._ops.OpOverload, Callable]:
    """Every functional `_foreach_*` overload that has a per-element partner, with its decomposition."""
    table = {}
    for schema in torch._C._jit_get_all_schemas():
        name = schema.name
        if (
            not name.startswith("aten::_foreach_")
            or name.endswith("_")
            or schema.overload_name.endswith("out")
        ):
            continue
        packet = getattr(aten, name.split("::")[1])
        foreach = getattr(packet, schema.overload_name or "default")
        partner = _partner(foreach)
        if partner is not None:
            table[foreach] = _decomposition(foreach, partner)
    return table
