"""How long torch.compile takes to trace cumprod's backward as its dim grows, per device, under
`aot_eager` (no fusion compiler involved): on torch 2.11 with CUDA the conformance case with a
(3, 20000) sample never finished compiling (docs/conformance.md, 2026-11-26 session 5).

    python tools/probes/cumprod_backward_trace.py [--limit-s 60]

Prints seconds to compile and run forward + backward once, per device and length, and the number of
nodes in the backward graph; stops growing a device's length once one takes longer than the limit.
"""

from __future__ import annotations

import argparse
import time

import torch


def backward_nodes_counter():
    counts = []

    def backend(gm, example_inputs):
        from functorch.compile import make_boxed_func
        from torch._dynamo.backends.common import aot_autograd

        def count(graph_module, inputs):
            counts.append(len(graph_module.graph.nodes))
            return make_boxed_func(graph_module.forward)

        return aot_autograd(fw_compiler=count, bw_compiler=count)(gm, example_inputs)

    return backend, counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit-s", type=float, default=60.0)
    args = parser.parse_args()
    print(f"torch {torch.__version__}")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        for length in (100, 1000, 4000, 20000):
            torch._dynamo.reset()
            backend, counts = backward_nodes_counter()
            fn = torch.compile(lambda x: torch.cumprod(x, 1), backend=backend, dynamic=False)
            x = torch.rand(3, length, device=device, requires_grad=True)
            started = time.perf_counter()
            fn(x).sum().backward()
            seconds = time.perf_counter() - started
            print(
                f"{device:5} length {length:6d}: {seconds:7.2f} s, graph nodes (forward, backward) {counts}"
            )
            if seconds > args.limit_s:
                break


if __name__ == "__main__":
    main()
