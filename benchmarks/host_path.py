"""Where a compiled call's host time goes, with the kernels themselves taken out.

Each backend's kernels are replaced by nothing (the fuser's: a launch that returns at once; eager and the
default backend keep theirs, so compare the fuser against itself across changes, or run this on a GPU
where their kernels are asynchronous). Prints microseconds per call and, with --profile, the top of a
cProfile of the fuser's calls.

    python benchmarks/host_path.py [--device cuda] [--profile] [--calls 2000]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import torch
import torch.nn.functional as F

import fuser  # noqa: F401  (registers the "fuser" backend)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def add_layer_norm(x, y, w, b):
    return F.layer_norm(x + y, (x.shape[-1],), w, b, 1e-5)


def fwd_bwd(program, inputs, grad):
    def call():
        out = program(*inputs)
        return torch.autograd.grad(out, inputs, grad)

    return call


def per_call_us(call, calls: int, sync) -> float:
    for _ in range(20):
        call()
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        call()
    sync()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--no-kernels", action="store_true", help="fuser launches return at once (CPU)")
    args = parser.parse_args()
    device = args.device
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if args.no_kernels:
        from fuser.runtime import kernel_cache

        kernel_cache.load_kernel = lambda source, interpreted: _NoKernel()
    dtype = torch.bfloat16
    x = torch.randn(4, 16, device=device, dtype=dtype, requires_grad=True)
    y = torch.randn(4, 16, device=device, dtype=dtype)
    w = torch.randn(16, device=device, dtype=dtype, requires_grad=True)
    b = torch.randn(16, device=device, dtype=dtype, requires_grad=True)
    grad = torch.randn(4, 16, device=device, dtype=dtype)
    cases = {
        "add_layer_norm fwd": (add_layer_norm, [x.detach(), y, w.detach(), b.detach()], None),
        "layer_norm fwd+bwd": (layer_norm, [x, w, b], grad),
    }
    # aot_eager: Dynamo and AOTAutograd with no code generation, the framework's share of a compiled call.
    backends = {"fuser": "fuser", "aot_eager": "aot_eager", "inductor": "inductor", "eager": None}
    for name, (fn, inputs, g) in cases.items():
        for backend, spec in backends.items():
            if backend == "inductor" and (args.no_kernels or device == "cpu"):
                continue
            torch._dynamo.reset()
            program = fn if spec is None else torch.compile(fn, backend=spec)
            call = (lambda p=program, i=inputs: p(*i)) if g is None else fwd_bwd(program, inputs, g)
            us = per_call_us(call, args.calls, sync)
            print(f"{name:22s} {backend:9s} {us:8.1f} us/call")
            if args.profile and backend == "fuser":
                profiler = cProfile.Profile()
                profiler.runcall(lambda c=call: [c() for _ in range(args.calls)])
                stats = pstats.Stats(profiler)
                stats.sort_stats("tottime").print_stats(30)
                stats.sort_stats("cumulative").print_stats(30)


class _NoKernel:
    def __getitem__(self, grid):
        return lambda *a, **k: None


if __name__ == "__main__":
    main()
