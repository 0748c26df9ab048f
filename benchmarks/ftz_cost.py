"""What keeping float32 subnormals costs: a perf-gate workload's kernel time with the fuser's GPU kernels
compiled as they are (`enable_reflect_ftz=False`: libdevice keeps subnormals, as eager does) and with
Triton's default (libdevice flushes them to zero), measured the perf gate's way (CUDA events, L2 flushed).

Each variant compiles afresh (Dynamo reset, kernel cache cleared); the variants alternate for --rounds
rounds, so a drift of the machine shows in both.

    python benchmarks/ftz_cost.py --workload adam_step --workload softmax [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics

import torch
import triton

from fuser.runtime import launch_config
from perfgate.backends import BACKENDS
from perfgate.measure import kernel_time_ms, l2_flush_buffer, prepare_on_gpu
from perfgate.workloads import WORKLOADS

VARIANTS = {
    "subnormals kept (the fuser's setting)": {"enable_reflect_ftz": False},
    "subnormals flushed (Triton's default)": {"enable_reflect_ftz": True},
}


def time_variant(workload_name: str, options: dict, flush: torch.Tensor) -> float:
    torch._dynamo.reset()
    launch_config.gpu_compile_options = lambda: dict(options)  # read by every launch set up after this
    prepared = prepare_on_gpu(WORKLOADS[workload_name], BACKENDS["fuser"])
    return kernel_time_ms(prepared.step, flush).median


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS), required=True)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    flush = l2_flush_buffer("cuda")
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    for name in args.workload:
        times: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
        for _ in range(args.rounds):
            for variant, options in VARIANTS.items():
                times[variant].append(time_variant(name, options, flush))
        kept, flushed = (statistics.median(t) for t in times.values())
        for variant, rounds in times.items():
            print(f"{name:<16}{variant:<40}{statistics.median(rounds):.4f} ms  (rounds {rounds})")
        print(f"{name:<16}kept / flushed: {kept / flushed:.3f}x")


if __name__ == "__main__":
    main()
