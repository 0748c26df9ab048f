"""Capture wiring: the `fuser` torch.compile backend.

Dynamo hands over an FX graph of torch calls; AOTAutograd traces it to aten (forward and, when inputs
need gradients, backward), decomposing to core aten except for ops the op table lowers directly. Each
resulting graph goes to `fuser.compiler.compile_graph`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch._decomp import core_aten_decompositions
from torch._functorch.aot_autograd import aot_module_simplified

from fuser.compiler import compile_graph
from fuser.ops import lowered_overloads
from fuser.options import Options


@functools.cache
def decomposition_table() -> dict:
    """Core aten decompositions, minus those of ops the fuser lowers whole (silu stays one node)."""
    lowered = lowered_overloads()
    return {op: fn for op, fn in core_aten_decompositions().items() if op not in lowered}


def fuser_backend(
    graph_module: torch.fx.GraphModule,
    example_inputs: list[Any],
    options: dict[str, Any] | None = None,
    mode: str | None = None,
) -> Callable:
    """The `fuser` backend: `torch.compile(fn, backend="fuser", options={"strict": True})`."""
    if mode is not None:
        raise ValueError(f"fuser: torch.compile mode {mode!r} is not supported; the fuser has no modes")
    chosen = Options.from_dict(options)
    compiler = functools.partial(compile_graph, options=chosen)
    return aot_module_simplified(
        graph_module,
        example_inputs,
        fw_compiler=compiler,
        bw_compiler=compiler,
        decompositions=decomposition_table(),
    )
