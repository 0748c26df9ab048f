"""Callbacks around the fuser's own compile step, for tools that measure it alone.

The step is `fuser.compiler.compile_graph`: one graph from AOTAutograd (a forward or a backward) to the
callable that runs it, kernels generated and written; Dynamo's tracing and AOTAutograd's are outside it,
and so is loading each kernel, which happens at its first launch. The perf gate's CPU tier counts the
instructions inside it under callgrind (`perfgate.instructions`). With no observer registered the step
pays one check of an empty list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

_observers: list[tuple[Callable[[], None], Callable[[], None]]] = []


@contextmanager
def observing_compile(enter: Callable[[], None], leave: Callable[[], None]) -> Iterator[None]:
    """Call `enter` as each compile step begins and `leave` as it ends (raising or not), within the block."""
    pair = (enter, leave)
    _observers.append(pair)
    try:
        yield
    finally:
        _observers.remove(pair)


@contextmanager
def compile_step() -> Iterator[None]:
    """The compile step, as observers see it (the compiler wraps its work in this)."""
    observers = list(_observers)
    for enter, _ in observers:
        enter()
    try:
        yield
    finally:
        for _, leave in reversed(observers):
            leave()
