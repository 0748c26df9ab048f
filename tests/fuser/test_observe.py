"""fuser.observing_compile: callbacks around the fuser's own compile step (what the perf gate's CPU tier
counts), once per graph it compiles, and none outside the block."""

from __future__ import annotations

import pytest
import torch

import fuser
from fuser import observe


def test_enter_and_leave_bracket_each_graph_a_training_step_compiles():
    events = []
    x = torch.randn(6, 5, requires_grad=True)
    with fuser.observing_compile(lambda: events.append("enter"), lambda: events.append("leave")):
        compiled = fuser.compile(lambda t: (t.sin() * 2).sum(), unvalidated="fuse")
        compiled(x).backward()
    assert events == ["enter", "leave", "enter", "leave"]  # the forward graph, then the backward
    torch._dynamo.reset()
    fuser.compile(lambda t: t.cos() + 1, unvalidated="fuse")(torch.randn(3))
    assert events == ["enter", "leave", "enter", "leave"]  # outside the block: not observed


def test_leave_runs_when_the_step_raises_and_observers_nest_in_order():
    events = []
    with (
        fuser.observing_compile(lambda: events.append("outer in"), lambda: events.append("outer out")),
        fuser.observing_compile(lambda: events.append("inner in"), lambda: events.append("inner out")),
        pytest.raises(RuntimeError, match="planted"),
        observe.compile_step(),
    ):
        raise RuntimeError("planted")
    assert events == ["outer in", "inner in", "inner out", "outer out"]
    assert observe._observers == []
