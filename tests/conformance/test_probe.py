"""The backend probe (conformance/harness/probe.py): what each backend says it did, read one way."""

from __future__ import annotations

import torch

from conformance.harness.probe import watching
from fuser.capture.backend import fuser_backend


def test_the_fusers_probe_counts_its_kernels_and_names_what_it_left_eager():
    x = torch.randn(8, 8)
    with watching("fuser") as fused:
        torch.compile(lambda t: torch.sin(t) + 1, backend=fuser_backend, dynamic=False)(x)
    assert fused.kernels == 1 and fused.fallbacks == 0 and fused.left_eager == []
    assert (
        fused.replays == 0
    )  # no CUDA graph on the CPU (tests/fuser/test_cuda_graphs.py counts them on a GPU)
    torch._dynamo.reset()
    with watching("fuser") as eager:  # a matmul alone: nothing to fuse, so nothing was tested
        torch.compile(lambda t: t @ t, backend=fuser_backend, dynamic=False)(x)
    assert eager.kernels == 0
    assert [op for op, _ in eager.left_eager] == ["aten.mm.default"]
    torch._dynamo.reset()


def test_inductors_probe_counts_the_kernels_it_generated_and_other_backends_say_nothing(monkeypatch):
    monkeypatch.setattr(torch._inductor.config, "fx_graph_cache", False)  # a cache hit generates nothing
    x = torch.randn(8, 8)
    with watching("inductor") as inductor:
        torch.compile(lambda t: torch.sin(t) + 1, dynamic=False)(x)
    assert inductor.kernels is not None and inductor.kernels >= 1
    torch._dynamo.reset()
    with watching("aot_eager") as other:
        torch.compile(lambda t: torch.sin(t) + 1, backend="aot_eager", dynamic=False)(x)
    assert (
        other.kernels is None and other.fallbacks is None and other.left_eager == [] and other.replays is None
    )
    torch._dynamo.reset()
