"""Benchmark: a 10-op pointwise chain on bf16 16384×4096 — fuser vs torch.compile's default vs eager.

The chain reads two tensors and writes one, so it must move 3 × 128 MiB; the floor is that traffic
at the device's measured copy bandwidth (a device-to-device copy, bytes read plus bytes written).
Order of work, as in Triton's tutorials: check correctness on awkward sizes, then time.

    python benchmarks/pointwise_chain.py --json results.json       # needs a CUDA GPU
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics

import torch
import triton
import triton.testing

import fuser
import fuser.runtime


def chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    a = x * y  # 1
    a = a + 1.0  # 2
    a = torch.relu(a)  # 3
    a = a * 0.5  # 4
    a = a - y  # 5
    a = torch.sigmoid(a)  # 6
    a = a * x  # 7
    a = torch.tanh(a)  # 8
    a = a + y  # 9
    return a * 2.0  # 10


def copy_bandwidth(device: str) -> float:
    """Bytes per second of a large device-to-device copy, counting bytes read and written."""
    src = torch.randn(2**28, device=device)  # 1 GiB
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=50, rep=500, return_mode="median")
    return 2 * src.numel() * src.element_size() / (ms * 1e-3)


def kernel_ms(fn, calls: int = 20) -> float:
    """Device time of the kernels one call launches (profiler), averaged over `calls` calls."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    total_us = sum(e.device_time_total for e in profile.key_averages() if e.device_time_total > 0)
    return total_us / calls / 1e3


def check(fn, rows: int, cols: int, device: str) -> float:
    """Largest relative error against a float64 run on fresh inputs; the fused chain must be close."""
    x = torch.randn(rows, cols, device=device, dtype=torch.bfloat16)
    y = torch.randn(rows, cols, device=device, dtype=torch.bfloat16)
    out = torch.full_like(x, float("nan"))  # poison: every element must be written
    out.copy_(fn(x, y))
    reference = chain(x.double(), y.double())
    assert not out.isnan().any(), "unwritten or nan outputs"
    error = ((out.double() - reference).norm() / reference.norm()).item()
    assert error < 1e-2, f"relative error {error} at {rows}x{cols}"
    return error


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved timing rounds per variant")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument(
        "--sweep",
        default="",
        help="also time the fuser at these BLOCKxWARPS launch configs, e.g. 2048x8,4096x8",
    )
    args = parser.parse_args()
    device = "cuda"
    torch.manual_seed(0)

    variants = {
        "fuser": fuser.compile(chain, dynamic=False, strict=True),
        "inductor": torch.compile(chain, dynamic=False),
        "eager": chain,
    }
    errors = {
        name: [check(fn, r, c, device) for r, c in [(1823, 781), (1, 7), (args.rows, args.cols)]]
        for name, fn in variants.items()
    }

    x = torch.randn(args.rows, args.cols, device=device, dtype=torch.bfloat16)
    y = torch.randn(args.rows, args.cols, device=device, dtype=torch.bfloat16)
    moved = 3 * x.numel() * x.element_size()
    peak = copy_bandwidth(device)
    rounds: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, fn in variants.items():
            rounds[name].append(
                triton.testing.do_bench(lambda fn=fn: fn(x, y), warmup=50, rep=300, return_mode="median")
            )
    kernels = {name: kernel_ms(lambda fn=fn: fn(x, y)) for name, fn in variants.items()}
    sweep = {}
    default = (fuser.runtime.GPU_BLOCK, fuser.runtime.GPU_WARPS)
    for config in filter(None, args.sweep.split(",")):
        fuser.runtime.GPU_BLOCK, fuser.runtime.GPU_WARPS = map(int, config.split("x"))
        check(variants["fuser"], 1823, 781, device)
        timings = [
            triton.testing.do_bench(lambda: variants["fuser"](x, y), warmup=50, rep=300, return_mode="median")
            for _ in range(args.repeats)
        ]
        sweep[config] = statistics.median(timings)
    fuser.runtime.GPU_BLOCK, fuser.runtime.GPU_WARPS = default
    fuser.reset_counters()
    variants["fuser"](x, y)
    launches = fuser.counters()["kernels_launched"]

    results = {
        "workload": f"10-op pointwise chain, bf16 {args.rows}x{args.cols}, 2 inputs 1 output",
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "gpu_block": fuser.runtime.GPU_BLOCK,
        "gpu_warps": fuser.runtime.GPU_WARPS,
        "copy_peak_tb_s": peak / 1e12,
        "bytes_moved": moved,
        "fuser_launches_per_call": launches,
        "variants": {},
        "fuser_launch_config_sweep_ms": sweep,
    }
    for name in variants:
        ms = statistics.median(rounds[name])
        results["variants"][name] = {
            "ms_median": ms,
            "ms_rounds": rounds[name],
            "kernel_ms": kernels[name],
            "tb_s": moved / (ms * 1e-3) / 1e12,
            "fraction_of_copy_peak": moved / (ms * 1e-3) / peak,
            "max_relative_error": max(errors[name]),
        }
    base = results["variants"]["inductor"]["ms_median"]
    print(
        f"{results['workload']} on {results['device']} (torch {torch.__version__}, triton {triton.__version__})"
    )
    print(f"copy peak {peak / 1e12:.2f} TB/s; fuser launches {launches} kernel(s) per call")
    print(f"{'variant':<10}{'ms':>9}{'kernel ms':>11}{'TB/s':>8}{'of peak':>9}{'vs inductor':>13}")
    for name, r in results["variants"].items():
        print(
            f"{name:<10}{r['ms_median']:>9.4f}{r['kernel_ms']:>11.4f}{r['tb_s']:>8.2f}"
            f"{r['fraction_of_copy_peak']:>9.1%}{r['ms_median'] / base:>12.2f}x"
        )
    for config, ms in sweep.items():
        print(f"fuser at BLOCKxWARPS {config}: {ms:.4f} ms ({ms / base:.2f}x inductor)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
