"""Benchmark the fuser against torch.compile's default backend and eager, side by side, in one run.

Workloads (bf16 16384×4096 unless sized otherwise):
  chain          a 10-op pointwise chain: 2 inputs, 1 output
  add_layer_norm layer_norm(x + r) with weight and bias
  rms_norm       rms_norm(x) with weight
  softmax        softmax over the last dim
  sum_all        the sum of every element (a full reduction, in fp32)
  layer_norm_fwd_bwd  layer_norm forward and backward (input, weight and bias gradients)

For each: correctness on fresh inputs at awkward sizes first (against a float64 run), then the median
time of a call (triton.testing.do_bench: CUDA events, L2 flushed between reps), the device time of the
kernels one call launches (profiler), and the fraction of the device's measured copy bandwidth that
the workload's fewest bytes (each input read once, each output written once) represent.

    python benchmarks/compare.py --json results.json [--workload softmax ...] [--sweep ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import triton
import triton.testing

import fuser
import fuser.options
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


def add_layer_norm(x, r, w, b):
    return F.layer_norm(x + r, x.shape[-1:], w, b)


def rms_norm(x, w):
    return F.rms_norm(x, x.shape[-1:], w)


def softmax(x):
    return torch.softmax(x, -1)


def layer_norm(x, w, b):
    return F.layer_norm(x, x.shape[-1:], w, b)


@dataclass(frozen=True)
class Workload:
    program: Callable
    inputs: Callable[[int, int], list[torch.Tensor]]  # rows, cols -> inputs (bf16, on the GPU)
    bytes_moved: Callable[[int, int], int]  # the fewest bytes one call must move
    backward: bool = False


def _bf16(*shapes, grad=False):
    return lambda rows, cols: [
        torch.randn(
            *[{"R": rows, "C": cols}[s] for s in shape], device="cuda", dtype=torch.bfloat16
        ).requires_grad_(grad)
        for shape in shapes
    ]


WORKLOADS = {
    "chain": Workload(chain, _bf16("RC", "RC"), lambda r, c: 3 * r * c * 2),
    "add_layer_norm": Workload(
        add_layer_norm, _bf16("RC", "RC", "C", "C"), lambda r, c: 3 * r * c * 2 + 4 * c
    ),
    "rms_norm": Workload(rms_norm, _bf16("RC", "C"), lambda r, c: 2 * r * c * 2 + 2 * c),
    "softmax": Workload(softmax, _bf16("RC"), lambda r, c: 2 * r * c * 2),
    # Forward reads x, w, b and writes y; backward reads dy, x (and saved row stats), writes dx, dw, db.
    "sum_all": Workload(lambda x: x.float().sum(), _bf16("RC"), lambda r, c: r * c * 2),
    "layer_norm_fwd_bwd": Workload(
        layer_norm, _bf16("RC", "C", "C", grad=True), lambda r, c: 5 * r * c * 2, True
    ),
}


def as_call(program: Callable, workload: Workload, inputs: list[torch.Tensor]) -> Callable[[], object]:
    if not workload.backward:
        return lambda: program(*inputs)
    # Drawn in float32 and cast, so a float64 reference run gets the same gradient (up to rounding).
    grad = torch.randn(inputs[0].shape, device=inputs[0].device).to(inputs[0].dtype)

    def forward_backward():
        out = program(*inputs)
        return torch.autograd.grad(out, inputs, grad)

    return forward_backward


def copy_bandwidth() -> float:
    """Bytes per second of a large device-to-device copy, counting bytes read and written."""
    src = torch.randn(2**28, device="cuda")  # 1 GiB
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=50, rep=500, return_mode="median")
    return 2 * src.numel() * src.element_size() / (ms * 1e-3)


def kernel_ms(call: Callable, calls: int = 20) -> float:
    """Device time of the kernels one call launches (profiler), averaged over `calls` calls."""
    call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    total_us = sum(e.self_device_time_total for e in profile.key_averages() if e.self_device_time_total > 0)
    return total_us / calls / 1e3


def _flat(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for item in value for t in _flat(item)]


def check(program: Callable, workload: Workload, rows: int, cols: int) -> float:
    """Largest relative error (2-norm) against a float64 run on fresh inputs."""
    inputs = workload.inputs(rows, cols)
    torch.manual_seed(1)  # the same output gradient for both runs
    got = _flat(as_call(program, workload, inputs)())
    exact_inputs = [t.detach().double().requires_grad_(t.requires_grad) for t in inputs]
    torch.manual_seed(1)
    exact = _flat(as_call(workload.program, workload, exact_inputs)())
    worst = 0.0
    for g, e in zip(got, exact, strict=True):
        assert not g.isnan().any(), "nan in the output"
        worst = max(worst, ((g.double() - e).norm() / e.norm().clamp_min(1e-30)).item())
    assert worst < 2e-2, f"relative error {worst} at {rows}x{cols}"
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--workload", action="append", choices=sorted(WORKLOADS), help="default: all")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved timing rounds per variant")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument(
        "--sweep", default="", help="fuser runtime settings to try, e.g. GPU_ROW_ELEMENTS=8192,GPU_BLOCK=2048"
    )
    args = parser.parse_args()
    # Each variant compiles the workload for three sizes; past Dynamo's recompile limit (8) a later
    # variant would run eagerly and be timed under its own name.
    torch._dynamo.config.recompile_limit = 64
    torch.manual_seed(0)
    peak = copy_bandwidth()
    results = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "copy_peak_tb_s": peak / 1e12,
        "shape": [args.rows, args.cols],
        "workloads": {},
    }
    print(
        f"{results['device']}, torch {torch.__version__}, triton {triton.__version__}; copy peak {peak / 1e12:.2f} TB/s"
    )
    print("fuser: unvalidated ops fused on purpose (unvalidated='fuse'): these numbers are its kernels'")
    print(
        f"{'workload':<20}{'variant':<10}{'ms':>9}{'kernel ms':>11}{'of peak':>9}{'vs inductor':>13}{'launches':>10}"
    )
    for name in args.workload or list(WORKLOADS):
        workload = WORKLOADS[name]
        variants = {
            "fuser": fuser.compile(workload.program, dynamic=False, strict=True, unvalidated="fuse"),
            "inductor": torch.compile(workload.program, dynamic=False),
            "eager": workload.program,
        }
        errors = {}
        for v, fn in variants.items():
            errors[v] = max(
                check(fn, workload, r, c) for r, c in [(1823, 781), (3, 7), (args.rows, args.cols)]
            )
        inputs = workload.inputs(args.rows, args.cols)
        calls = {v: as_call(fn, workload, inputs) for v, fn in variants.items()}
        rounds: dict[str, list[float]] = {v: [] for v in variants}
        for _ in range(args.repeats):
            for v, call in calls.items():
                rounds[v].append(triton.testing.do_bench(call, warmup=50, rep=300, return_mode="median"))
        fuser.reset_counters()
        calls["fuser"]()
        launches = fuser.counters()["kernels_launched"]
        if not launches:
            raise RuntimeError(f"{name}: the fuser launched no kernel (it ran eagerly)")
        moved = workload.bytes_moved(args.rows, args.cols)
        entry = {"bytes_moved": moved, "fuser_launches_per_call": launches, "variants": {}}
        base = statistics.median(rounds["inductor"])
        for v in variants:
            ms = statistics.median(rounds[v])
            entry["variants"][v] = {
                "ms_median": ms,
                "ms_rounds": rounds[v],
                "kernel_ms": kernel_ms(calls[v]),
                "fraction_of_copy_peak": moved / (ms * 1e-3) / peak,
                "max_relative_error": errors[v],
            }
            r = entry["variants"][v]
            print(
                f"{name:<20}{v:<10}{ms:>9.4f}{r['kernel_ms']:>11.4f}{r['fraction_of_copy_peak']:>9.1%}"
                f"{ms / base:>12.2f}x{launches if v == 'fuser' else '':>10}"
            )
        entry["sweep"] = sweep(args.sweep, calls["fuser"], base, name)
        results["workloads"][name] = entry
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


def sweep(settings: str, call: Callable, base: float, name: str) -> dict[str, float]:
    """Time the fuser again under other launch settings of fuser.runtime, one at a time (then restore)."""
    timings = {}
    for setting in filter(None, settings.split(",")):
        restore = apply_settings(setting)
        ms = triton.testing.do_bench(call, warmup=50, rep=300, return_mode="median")
        apply_settings(restore)
        timings[setting] = ms
        print(f"  {name} fuser with {setting}: {ms:.4f} ms ({ms / base:.2f}x inductor)")
    return timings


def apply_settings(settings: str) -> str:
    """Set fuser.runtime constants from 'NAME=VALUE,NAME=VALUE' and forget every kernel step's launch
    configurations (chosen under the old values); returns the settings that restore the old values."""
    import gc

    restore = []
    for item in filter(None, settings.split(",")):
        key, value = item.split("=")
        restore.append(f"{key}={getattr(fuser.runtime, key)}")
        setattr(fuser.runtime, key, int(value))
    for obj in gc.get_objects():
        if type(obj) is fuser.runtime.KernelStep:
            obj.launches.clear()
    return ",".join(restore)


if __name__ == "__main__":
    main()
