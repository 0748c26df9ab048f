"""`fuser.explain`: what the fuser makes of a program — its kernels, their source, and what ran eager."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from fuser.compiler import GraphReport, reports
from fuser.emit.codegen import KernelSource


@dataclass
class ExplainReport:
    graphs: list[GraphReport]
    result: Any  # what the compiled function returned

    @property
    def kernels(self) -> list[KernelSource]:
        return [k for g in self.graphs for k in g.kernels]

    @property
    def num_kernels(self) -> int:
        return len(self.kernels)

    @property
    def sources(self) -> list[str]:
        return [k.source for k in self.kernels]

    @property
    def eager_calls(self) -> list[str]:
        return [c for g in self.graphs for c in g.eager_calls]

    @property
    def fallbacks(self) -> list[tuple[str, str]]:
        return [f for g in self.graphs for f in g.fallbacks]

    def __str__(self) -> str:
        lines = [
            f"{len(self.graphs)} graph(s), {self.num_kernels} kernel(s), {len(self.eager_calls)} eager call(s)"
        ]
        for op, reason in self.fallbacks:
            lines.append(f"  eager: {op}: {reason}")
        for number, kernel in enumerate(self.kernels):
            lines.append(f"\n--- kernel {number}: {kernel.name} ---")
            lines.append(kernel.source)
        return "\n".join(lines)


@contextmanager
def collecting() -> Iterator[list[GraphReport]]:
    """A report of every graph the fuser compiles in this block, however it was called (graphs compiled
    in another thread, such as CUDA autograd's, are not seen). Blocks nest: an enclosing block also gets
    the graphs of the blocks inside it (a test watching a whole call still sees an `explain` inside it)."""
    collected: list[GraphReport] = []
    enclosing = reports.get()
    token = reports.set(collected)
    try:
        yield collected
    finally:
        reports.reset(token)
        if enclosing is not None:
            enclosing.extend(collected)


def explain(
    fn: Callable, *args: Any, fuser_options: dict[str, Any] | None = None, **kwargs: Any
) -> ExplainReport:
    """Compile `fn` with the fuser (and `fuser_options`), call it once, and report every graph it compiled."""
    from fuser.capture.backend import fuser_backend

    with collecting() as collected:
        # A fresh backend object: Dynamo compiles anew rather than reusing another backend's graphs.
        def backend(graph_module, example_inputs):
            return fuser_backend(graph_module, example_inputs, options=fuser_options)

        result = torch.compile(fn, backend=backend)(*args, **kwargs)
    return ExplainReport(collected, result)
