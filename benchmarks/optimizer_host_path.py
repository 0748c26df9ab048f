"""Host time of a compiled optimizer step through the fuser, its kernels left out: what Python costs
per step around the horizontal kernels (Dynamo's guards, AOTAutograd's wrappers, the fuser's runtime).

    python benchmarks/optimizer_host_path.py --tensors 200          # ms per step, one process

The kernels are compiled and run for the warm-up steps, then replaced by no-ops, so the figure is the
host's alone, on any machine (CPU or GPU). Compare two trees in alternating fresh processes, e.g.
`for t in base head head base base head; do PYTHONPATH=<tree> python benchmarks/optimizer_host_path.py; done`.
"""

from __future__ import annotations

import argparse
import gc
import os
import time

import torch

from fuser.runtime.horizontal_step import HorizontalStep


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tensors", type=int, default=200)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    os.environ.setdefault("FUSER_UNVALIDATED", "fuse")
    os.environ["FUSER_HORIZONTAL"] = "1"
    # The fuser's runtime per call, not a CUDA graph's replay (fuser.runtime.cuda_graphs), which would not call
    # the no-op'd launchers at all.
    os.environ["FUSER_CUDA_GRAPHS"] = "0"
    params = [torch.randn(2, 3, device=args.device, requires_grad=True) for _ in range(args.tensors)]
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, foreach=True)
    step = torch.compile(optimizer.step, backend="fuser")
    for _ in range(3):
        step()
    horizontal = [o for o in gc.get_objects() if type(o) is HorizontalStep]
    if not horizontal:
        raise SystemExit("optimizer_host_path: the step made no horizontal kernel (is horizontal fusion on?)")
    for kernel in horizontal:
        for launch in kernel.launches.values():
            launch.launcher = lambda *_: None
    if args.device == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(args.steps):
        step()
    if args.device == "cuda":
        torch.cuda.synchronize()
    print(
        f"{(time.perf_counter() - started) / args.steps * 1e3:.3f} ms per step (host, {args.tensors} tensors)"
    )


if __name__ == "__main__":
    main()
