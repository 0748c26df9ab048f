"""Benchmark the fuser against torch.compile's default backend and eager, side by side, in one run.

The workloads are the perf gate's (`perfgate.workloads`: the same programs, input builders and GPU
sizes, bf16 16384×4096 for most), sized by rows and columns and not updating tensors in place, plus one
the gate does not judge:
  sum_all        the sum of every element (a full reduction, in fp32), on the gate's inputs and sizes
`--help` lists them under --workload; the old names `chain` and `layer_norm_fwd_bwd` are
kept as aliases of the gate's `pointwise_chain` and `add_layer_norm_backward`.

For each: correctness on fresh inputs at awkward sizes first (against eager on float64 copies of the
inputs; a program's own casts, such as rms_norm's fp32 statistics, stay), then the median time of a call
(triton.testing.do_bench: CUDA events, L2 flushed between reps), the device time of the kernels one call
launches (profiler), the launches per call (`perfgate.measure.launches_per_call`) and the fraction of
the device's copy peak (`perfgate.measure.copy_peak_bytes_per_s`) that the workload's fewest bytes
(`perfgate.workloads.Step.fewest_bytes`: each input read once, each output written once) represent.
A call is the gate's (`perfgate.workloads.Step`): a training workload runs forward and backward.

    python benchmarks/compare.py --json results.json [--workload softmax ...] [--sweep ...]
    python benchmarks/compare.py --device cpu [--workload softmax ...]   # the correctness stage only
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.testing

import fuser
from perfgate import workloads as gate
from perfgate.backends import BACKENDS, Backend
from perfgate.machine import this_machine
from perfgate.measure import copy_peak_bytes_per_s, launches_per_call
from perfgate.workloads import ROWS_COLS, Step, Workload, one_matrix

# A correctness failure stops the run: a wrong answer's timing is no result.
TOLERANCE = 2e-2
# Checked before the timed size on a GPU: odd, so masks and tails are exercised, one larger than a block.
AWKWARD_SIZES = ({"rows": 1823, "cols": 781}, {"rows": 3, "cols": 7})
# Checked on the CPU, where kernels run in Triton's interpreter, after the gate's own CPU size (5×129).
CPU_SIZES = ({"rows": 3, "cols": 7},)


def sum_all(x: torch.Tensor) -> torch.Tensor:
    return x.float().sum()


def _benchmarked(workload: Workload) -> bool:
    """A gate workload this script runs: sized by rows and columns (the awkward sizes apply), and
    returning what it computes (an optimizer step updates its state in place: no float64 reference)."""
    return workload.moved is None and all(set(size) == {"rows", "cols"} for size in workload.sizes.values())


# The gate's definitions, by name; only what the gate does not judge is defined here, from its parts.
WORKLOADS: dict[str, Workload] = {name: w for name, w in gate.WORKLOADS.items() if _benchmarked(w)} | {
    "sum_all": Workload(
        "sum_all", "x.float().sum(): a full reduction in fp32, bf16 input", sum_all, one_matrix, ROWS_COLS
    ),
}
ALIASES = {"chain": "pointwise_chain", "layer_norm_fwd_bwd": "add_layer_norm_backward"}


def compile_fusing_everything(program: Callable) -> Callable:
    # Unvalidated ops fused on purpose: these numbers are the fuser's kernels', not its eager fallbacks'.
    return fuser.compile(program, dynamic=False, strict=True, unvalidated="fuse")


VARIANTS: dict[str, Backend] = {
    "fuser": Backend("fuser", compile_fusing_everything, counted_by_fuser=True),
    "inductor": BACKENDS["inductor"],
    "eager": BACKENDS["eager"],
}


def make_inputs(workload: Workload, size: dict[str, int], device: str) -> list[Any]:
    """The gate's inputs for `workload` at `size` (fresh: the same for every variant at one size)."""
    torch.manual_seed(0)
    return workload.make_inputs(**size, device=device)


def as_call(program: Callable, workload: Workload, inputs: list[Any]) -> Step:
    """One call of `program` as the gate makes it: it returns every tensor produced (and gradients)."""
    return Step(workload, program, inputs)


def _float64(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().double().requires_grad_(value.requires_grad)
    return value


def max_relative_error(workload: Workload, program: Callable, size: dict[str, int], device: str) -> float:
    """Largest relative error (2-norm) of any output or gradient against eager on float64 inputs."""
    inputs = make_inputs(workload, size, device)
    step = as_call(program, workload, inputs)
    got = step()
    exact_step = as_call(workload.program, workload, [_float64(t) for t in inputs])
    if step.output_grads is not None:  # the same output gradients, upcast
        exact_step.output_grads = [g.double() for g in step.output_grads]
    exact = exact_step()
    worst = 0.0
    for g, e in zip(got, exact, strict=True):
        assert not g.isnan().any(), f"{workload.name}: nan in the output at {size}"
        worst = max(worst, ((g.double() - e.double()).norm() / e.double().norm().clamp_min(1e-30)).item())
    assert worst < TOLERANCE, f"{workload.name}: relative error {worst} at {size}"
    return worst


def check(workload: Workload, programs: dict[str, Callable], sizes, device: str) -> dict[str, float]:
    """The correctness stage: each variant's largest error over `sizes` (raises on a wrong answer)."""
    return {
        v: max(max_relative_error(workload, fn, size, device) for size in sizes) for v, fn in programs.items()
    }


def fuser_kernels(call: Step) -> int:
    """The fuser's kernels one warm call launches; none means it ran eagerly, and its figures would be
    eager's under the fuser's name."""
    call()
    fuser.reset_counters()
    call()
    kernels = fuser.counters()["kernels_launched"]
    if not kernels:
        raise RuntimeError(f"{call.workload.name}: the fuser launched no kernel (it ran eagerly)")
    return kernels


def kernel_ms(call: Callable, calls: int = 20) -> tuple[float, dict[str, float]]:
    """Device time of the kernels one call launches (profiler), averaged over `calls` calls, and each
    kernel's share by name (µs per call), where a slow one shows."""
    call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        for _ in range(calls):
            call()
        torch.cuda.synchronize()
    per_kernel = {
        e.key: e.self_device_time_total / calls
        for e in profile.key_averages()
        if e.self_device_time_total > 0
    }
    return sum(per_kernel.values()) / 1e3, dict(sorted(per_kernel.items(), key=lambda kv: -kv[1]))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, help="default: the gate's GPU size for each workload")
    parser.add_argument("--cols", type=int, help="default: the gate's GPU size for each workload")
    parser.add_argument(
        "--workload", action="append", choices=sorted([*WORKLOADS, *ALIASES]), help="default: all"
    )
    parser.add_argument("--repeats", type=int, default=3, help="interleaved timing rounds per variant")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument(
        "--sweep", default="", help="fuser launch settings to try, e.g. GPU_ROW_ELEMENTS=8192,GPU_BLOCK=2048"
    )
    parser.add_argument(
        "--device",
        default="cuda",
        choices=("cuda", "cpu"),
        help="cpu: the correctness stage only, at small sizes (the kernels run in Triton's interpreter)",
    )
    args = parser.parse_args(argv)
    args.workload = [ALIASES.get(name, name) for name in args.workload or WORKLOADS]
    return args


def timed_size(workload: Workload, args: argparse.Namespace) -> dict[str, int]:
    gate = workload.sizes["gpu"]
    return {"rows": args.rows or gate["rows"], "cols": args.cols or gate["cols"]}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    # Each variant compiles the workload for three sizes; past Dynamo's recompile limit (8) a later
    # variant would run eagerly and be timed under its own name.
    torch._dynamo.config.recompile_limit = 64
    results = correctness_only(args) if args.device == "cpu" else benchmark(args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return results


def correctness_only(args: argparse.Namespace) -> dict[str, Any]:
    """On the CPU: every variant against float64 at the small sizes, no timing (that needs CUDA)."""
    results: dict[str, Any] = {**this_machine("cpu").recorded(), "workloads": {}}
    print(f"{results['device']}: the correctness stage only (timings need --device cuda)")
    print(f"{'workload':<26}" + "".join(f"{v:>12}" for v in VARIANTS) + f"{'launches':>10}")
    for name in args.workload:
        workload = WORKLOADS[name]
        sizes = [workload.sizes["cpu"], *CPU_SIZES]
        if args.rows and args.cols:
            sizes = [{"rows": args.rows, "cols": args.cols}]
        programs = {v: backend.compile(workload.program) for v, backend in VARIANTS.items()}
        errors = check(workload, programs, sizes, "cpu")
        kernels = fuser_kernels(as_call(programs["fuser"], workload, make_inputs(workload, sizes[0], "cpu")))
        results["workloads"][name] = {
            "sizes": sizes,
            "max_relative_error": errors,
            "fuser_launches_per_call": kernels,
        }
        print(f"{name:<26}" + "".join(f"{errors[v]:>12.2e}" for v in VARIANTS) + f"{kernels:>10}")
    return results


def benchmark(args: argparse.Namespace) -> dict[str, Any]:
    peak = copy_peak_bytes_per_s("cuda")
    results: dict[str, Any] = {
        **this_machine("gpu").recorded(),
        "copy_peak_tb_s": peak / 1e12,
        "workloads": {},
    }
    print(
        f"{results['device']}, torch {torch.__version__}, triton {triton.__version__}; copy peak {peak / 1e12:.2f} TB/s"
    )
    print("fuser: unvalidated ops fused on purpose (unvalidated='fuse'): these numbers are its kernels'")
    print(
        f"{'workload':<26}{'variant':<10}{'ms':>9}{'kernel ms':>11}{'of peak':>9}{'vs inductor':>13}{'launches':>10}"
    )
    for name in args.workload:
        workload = WORKLOADS[name]
        size = timed_size(workload, args)
        programs = {v: backend.compile(workload.program) for v, backend in VARIANTS.items()}
        errors = check(workload, programs, [*AWKWARD_SIZES, size], "cuda")
        inputs = make_inputs(workload, size, "cuda")
        calls = {v: as_call(fn, workload, inputs) for v, fn in programs.items()}
        rounds: dict[str, list[float]] = {v: [] for v in calls}
        for _ in range(args.repeats):
            for v, call in calls.items():
                rounds[v].append(triton.testing.do_bench(call, warmup=50, rep=300, return_mode="median"))
        kernels = fuser_kernels(calls["fuser"])
        moved = calls["eager"].fewest_bytes(calls["eager"]())
        entry = {
            "description": workload.description,
            "size": size,
            "bytes_moved": moved,
            "fuser_launches_per_call": kernels,
            "variants": {},
        }
        base = statistics.median(rounds["inductor"])
        for v, backend in VARIANTS.items():
            ms = statistics.median(rounds[v])
            launches = launches_per_call(calls[v], backend, "cuda")
            device_ms, per_kernel = kernel_ms(calls[v])
            entry["variants"][v] = {
                "ms_median": ms,
                "ms_rounds": rounds[v],
                "kernel_ms": device_ms,
                "kernel_us_by_name": per_kernel,
                "launches_per_call": None if launches is None else launches.median,
                "fraction_of_copy_peak": moved / (ms * 1e-3) / peak,
                "max_relative_error": errors[v],
            }
            r = entry["variants"][v]
            print(
                f"{name:<26}{v:<10}{ms:>9.4f}{r['kernel_ms']:>11.4f}{r['fraction_of_copy_peak']:>9.1%}"
                f"{ms / base:>12.2f}x{r['launches_per_call'] or '':>10}"
            )
            for kernel, us in list(per_kernel.items())[:6]:
                print(f"{'':<36}{us:>9.1f} us  {kernel[:70]}")
        entry["sweep"] = sweep(args.sweep, calls["fuser"], base, name)
        results["workloads"][name] = entry
    return results


def sweep(settings: str, call: Callable, base: float, name: str) -> dict[str, dict[str, Any]]:
    """Time the fuser again under other launch settings, one at a time (then restore): its call and its
    kernels' device time, kernel by kernel. Settings are separated by ','; '+' joins constants set
    together (GPU_OUTER_XBLOCK=128+GPU_OUTER_RBLOCK=16)."""
    timings = {}
    for setting in filter(None, settings.split(",")):
        restore = apply_settings(setting.replace("+", ","))
        ms = triton.testing.do_bench(call, warmup=50, rep=300, return_mode="median")
        device_ms, per_kernel = kernel_ms(call)
        apply_settings(restore)
        timings[setting] = {"ms": ms, "kernel_ms": device_ms, "kernel_us_by_name": per_kernel}
        slowest = next(iter(per_kernel.items()), ("-", 0.0))
        print(
            f"  {name} fuser with {setting}: {ms:.4f} ms ({ms / base:.2f}x inductor), kernels {device_ms:.4f} ms"
            f" (slowest {slowest[1]:.1f} us {slowest[0][:40]})"
        )
    return timings


def _fuser_modules() -> list[Any]:
    return [
        m for n, m in list(sys.modules.items()) if m is not None and (n == "fuser" or n.startswith("fuser."))
    ]


def apply_settings(settings: str) -> str:
    """Set the fuser's launch constants from 'NAME=VALUE,NAME=VALUE' and forget every kernel step's launch
    configurations (chosen under the old values); returns the settings that restore the old values.

    The fuser has no public knob for these: a constant is set in every loaded fuser module that holds it
    (where it is defined and where it was imported), whichever module that is."""
    restore = []
    for item in filter(None, settings.split(",")):
        key, value = item.split("=")
        holders = [m for m in _fuser_modules() if isinstance(vars(m).get(key), int)]
        if not holders:
            raise SystemExit(f"--sweep: no fuser module defines an integer {key}")
        restore.append(f"{key}={getattr(holders[0], key)}")
        for module in holders:
            setattr(module, key, int(value))
    for obj in gc.get_objects():
        if str(getattr(type(obj), "__module__", "")).startswith("fuser.") and hasattr(obj, "__dict__"):
            for cache in ("launches", "gpu_launches"):
                if isinstance(vars(obj).get(cache), dict):
                    vars(obj)[cache].clear()
    return ",".join(restore)


if __name__ == "__main__":
    main()
