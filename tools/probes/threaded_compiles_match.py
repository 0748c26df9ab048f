"""Do kernels compiled side by side in threads come out as compiled one after another (issue 29 item 4:
the compile pool's threads, the default on CUDA since session 21)? Measured on a machine with no GPU.

    python tools/probes/threaded_compiles_match.py --models gpt2 llama --threads 4

Runs each model's first forward and backward on the CPU with FUSER_CHECK_CUDA_COMPILE=90, so every kernel
a GPU would launch is compiled for sm_90 one after another at its launch, into one Triton cache; then
compiles the same kernels again, with the same arguments and options, in a pool of threads into a second
cache. Prints, per model, how many binaries each cache holds and whether they are the same bytes.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def binaries(cache: Path) -> list[bytes]:
    return sorted(path.read_bytes() for path in cache.rglob("*.cubin"))


def one(model_name: str, threads: int) -> str:
    import torch

    from conformance.zoo.check import _loss_and_grads
    from conformance.zoo.models import ZOO
    from fuser.runtime import gpu_compile_check

    compiles: list[tuple] = []
    compile_for_cuda = gpu_compile_check.compile_for_cuda

    def recorded(jit_fn, args, options, capability):
        compiles.append((jit_fn, list(args), dict(options), capability))
        return compile_for_cuda(jit_fn, args, options, capability)

    with tempfile.TemporaryDirectory(prefix="threaded-") as caches:
        os.environ["TRITON_CACHE_DIR"] = f"{caches}/serial"
        gpu_compile_check._compiled.clear()  # this process's memo of what it compiled (another model's)
        gpu_compile_check.compile_for_cuda = recorded
        (zoo,) = [z for z in ZOO if z.name == model_name]
        torch.manual_seed(0)
        _loss_and_grads(torch.compile(zoo.build().train(), backend="fuser"), zoo.batch(), zoo, "fp32")
        gpu_compile_check.compile_for_cuda = compile_for_cuda
        serial = binaries(Path(caches) / "serial")
        os.environ["TRITON_CACHE_DIR"] = f"{caches}/threads"
        gpu_compile_check._compiled.clear()
        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            for future in [pool.submit(compile_for_cuda, *c) for c in compiles]:
                future.result()
        seconds = time.perf_counter() - started
        threaded = binaries(Path(caches) / "threads")
    verdict = "the same bytes" if threaded == serial else "DIFFERENT"
    return (
        f"| {model_name} | {len(compiles)} | {len(serial)} | {len(threaded)} | {verdict} | {seconds:.1f} s |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["gpt2", "llama"])
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    from fuser.runtime import compile_pool

    compile_pool.refuse_unsafe_threads()  # on 3.11 before 3.11.8 a parse fails at random, by name here
    os.environ["FUSER_CHECK_CUDA_COMPILE"] = "90"
    os.environ["FUSER_KERNEL_DIR"] = tempfile.mkdtemp(prefix="threaded-kernels-")
    print(
        f"| model | compiles | binaries, one after another | binaries, {args.threads} threads | | threads' wall |"
    )
    print("|---|---|---|---|---|---|")
    for model in args.models:
        print(one(model, args.threads), flush=True)


if __name__ == "__main__":
    main()
