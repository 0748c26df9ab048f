"""Runtime counters the perf gate and the tests read: what ran, what compiled, what fell back."""

from __future__ import annotations

from collections import Counter

NAMES = (
    "kernels_launched",
    "kernels_compiled",
    "extern_calls",
    "fallbacks",
    "graphs_compiled",
    "cuda_compile_checks",
    "graph_replays",
)

_counts: Counter[str] = Counter()


_KNOWN = frozenset(NAMES)  # bump runs on every launch


def bump(name: str, amount: int = 1) -> None:
    if name not in _KNOWN:
        raise KeyError(f"unknown fuser counter {name!r}; known: {', '.join(NAMES)}")
    _counts[name] += amount


def counters() -> dict[str, int]:
    """A snapshot of every counter since the last reset.

    kernels_launched: Triton kernel launches. kernels_compiled: distinct kernels loaded (a cache miss).
    extern_calls: aten calls run eagerly between kernels (views and tuple lookups are not counted).
    fallbacks: nodes left eager for a reason, plus kernels that failed and ran eagerly.
    graphs_compiled: FX graphs (forward or backward) the backend compiled.
    cuda_compile_checks: interpreted kernels also compiled for a GPU (FUSER_CHECK_CUDA_COMPILE).
    graph_replays: calls that replayed a CUDA graph of their launches (`fuser.runtime.cuda_graphs`); their
    launches are counted in kernels_launched and extern_calls as if they had run one by one.
    """
    return {name: _counts[name] for name in NAMES}


def reset_counters() -> None:
    _counts.clear()
