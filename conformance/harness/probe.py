"""What a backend did with the graphs Dynamo handed it, read the same way for every backend: the one
module of the suite that knows a backend's own counters (issue 30). Over a block of code, a probe says

- `kernels`: the kernels the backend launched (None where it cannot say);
- `fallbacks`: the times it ran work eagerly instead (None where it cannot say);
- `left_eager`: the ops of the graphs it compiled in the block that it ran eagerly, each with its reason;
- `replays`: the calls it answered by replaying a captured CUDA graph (None where it cannot say).

A case or a program whose ops all ran eagerly compared eager with eager, so the suite counts it as testing
nothing: through `left_eager` for one op, `kernels == 0` for a whole program.

The fuser answers all three through its public API (`fuser.collecting`, `fuser.counters`). Inductor,
torch.compile's default backend, answers `kernels` with the kernels it generated in the block (its own
metric: a block that compiled nothing, or compiled from Inductor's cache, says None, not 0) and leaves
no per-op eager record. Any other backend answers None and nothing: the suite then relies on what every
backend gives, the ops Dynamo handed it (runner.recording).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Watch:
    kernels: int | None = None
    fallbacks: int | None = None
    left_eager: list[tuple[str, str]] = field(default_factory=list)  # (op, reason)
    replays: int | None = None


@contextmanager
def watching(backend: str) -> Iterator[Watch]:
    """Watches what `backend` (a name as the suite's options give it) does in the block; the Watch is
    filled in when the block ends (left_eager as graphs compile)."""
    watch = Watch()
    if backend == "fuser":
        with _fuser(watch):
            yield watch
    elif backend == "inductor":
        with _inductor(watch):
            yield watch
    else:
        yield watch


@contextmanager
def _fuser(watch: Watch) -> Iterator[None]:
    import fuser

    before = fuser.counters()
    with fuser.collecting() as graphs:
        try:
            yield
        finally:
            after = fuser.counters()
            watch.kernels = after["kernels_launched"] - before["kernels_launched"]
            watch.fallbacks = after["fallbacks"] - before["fallbacks"]
            watch.replays = after["graph_replays"] - before["graph_replays"]
            watch.left_eager = [fallback for graph in graphs for fallback in graph.fallbacks]


@contextmanager
def _inductor(watch: Watch) -> Iterator[None]:
    from torch._inductor import metrics

    before = metrics.generated_kernel_count
    try:
        yield
    finally:
        generated = metrics.generated_kernel_count - before
        watch.kernels = generated or None
