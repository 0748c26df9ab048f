"""How many CUDA kernels a zoo model's first call compiles under the fuser, and how long compiling them for
a GPU takes one after another (issue 29 item 4), measured on a machine with no GPU.

    python tools/probes/kernel_compiles_for_gpu.py --models gpt2 llama --capability 90

Runs each model's first forward and backward on the CPU in a fresh process with every cache empty and
FUSER_CHECK_CUDA_COMPILE set (`fuser.runtime.gpu_compile_check`): each interpreted launch is also compiled
by Triton and ptxas for that architecture, with the block sizes, warps and argument specialization a GPU
would get. The count of compiles is deterministic; their seconds are this CPU's, which a GPU machine's
first call pays serially (at first launches) unless a pool compiles them side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from fresh_process import measure


def one(model_name: str) -> dict:
    import torch

    from conformance.zoo.check import _loss_and_grads
    from conformance.zoo.models import ZOO
    from fuser.runtime import gpu_compile_check

    seconds: list[float] = []
    names: list[str] = []
    compile_for_cuda = gpu_compile_check.compile_for_cuda

    def timed(jit_fn, *args, **kwargs):
        started = time.perf_counter()
        try:
            return compile_for_cuda(jit_fn, *args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - started)
            names.append(jit_fn.__name__)

    gpu_compile_check.compile_for_cuda = timed
    (zoo,) = [z for z in ZOO if z.name == model_name]
    torch.manual_seed(0)
    model = zoo.build().train()
    _loss_and_grads(torch.compile(model, backend="fuser"), zoo.batch(), zoo, "fp32")
    # A compile that found its specialization already compiled in this process returns at once.
    real = [s for s in seconds if s > 0.01]
    slowest = sorted(zip(seconds, names, strict=True), reverse=True)[:3]
    return {
        "slowest": ", ".join(f"{name} {s:.2f}" for s, name in slowest),
        "model": model_name,
        "compiles": len(real),
        "serial_s": round(sum(real), 2),
        "median_s": round(statistics.median(real), 3) if real else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["gpt2", "llama"])
    parser.add_argument("--capability", default="90")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one)))
        return
    print(
        "| model | CUDA kernels compiled | serial seconds on this CPU | median per kernel (s) | slowest (s) |\n"
        "|---|---|---|---|---|"
    )
    for model in args.models:
        with tempfile.TemporaryDirectory(prefix="compiles-") as caches:
            env = os.environ | {
                "FUSER_CHECK_CUDA_COMPILE": args.capability,
                "TRITON_CACHE_DIR": f"{caches}/triton",
                "FUSER_KERNEL_DIR": f"{caches}/fuser",
            }
            found = measure(__file__, ["--one", model], f"{model}'s compiles", env)
        print(
            f"| {model} | {found['compiles']} | {found['serial_s']} | {found['median_s']} | {found['slowest']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
