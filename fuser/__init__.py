"""fuser: a reference fusion compiler for torch.compile that writes readable Triton.

torch.compile(fn, backend="fuser")          # registered by entry point, no import needed
fuser.compile(fn, strict=True)              # the same, with fuser options
fuser.explain(fn, *args)                    # kernels, their source, and what ran eager
with fuser.collecting() as graphs: ...      # the same report for graphs compiled in a block
fuser.counters(); fuser.reset_counters()    # what ran: kernels launched, compiled, extern calls
fuser.clear_kernel_cache()                  # the next launch of every kernel compiles again
with fuser.observing_compile(enter, leave): ...  # callbacks around the fuser's own compile step
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fuser.explain import ExplainReport, collecting, explain
from fuser.metrics import counters, reset_counters
from fuser.observe import observing_compile
from fuser.options import Options, show_log
from fuser.runtime.kernel_cache import clear_kernel_cache


def compile(
    fn: Callable, *, dynamic: bool | None = None, fullgraph: bool = False, **options: Any
) -> Callable:
    """`torch.compile(fn, backend="fuser")` with fuser `options` (see `fuser.options.Options`)."""
    import torch

    from fuser.capture.backend import fuser_backend

    Options.from_dict(options)  # reject unknown options now, not at the first call

    def backend(graph_module, example_inputs):
        return fuser_backend(graph_module, example_inputs, options=options)

    return torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=fullgraph)


__all__ = [
    "ExplainReport",
    "Options",
    "clear_kernel_cache",
    "collecting",
    "compile",
    "counters",
    "explain",
    "observing_compile",
    "reset_counters",
    "show_log",
]
