"""Issue 13's table: a compiled optimizer step against eager foreach, `fused=True` and the default
backend, side by side in one run.

    python benchmarks/optimizer_step.py --out $OUT                       # AdamW, then SGD with momentum
    python benchmarks/optimizer_step.py --optimizer adamw --params 4 --min-numel 10 --max-numel 300 \
        --device cpu --variants eager,fused,fuser --out /tmp/optim     # the CPU check of the script itself

The parameters are issue 13's: `--params` fp32 tensors of seeded sizes in [min, max] elements (200 of
1,000-600,000 by default, about 60 M), each with a gradient. AdamW is `foreach=True, weight_decay=0.01,
capturable=True` with a tensor lr (on the GPU; eager takes capturable only on accelerators, so on the
CPU it is foreach with a float lr); SGD is `momentum=0.9, foreach=True`. Variants, each on its own copy
of the same parameters, state and gradients:

  eager     the optimizer as configured (foreach), eager
  fused     the same with fused=True (PyTorch's hand-written kernel) instead of foreach
  inductor  torch.compile(optimizer.step), the default backend
  fuser     torch.compile(optimizer.step, backend="fuser"): horizontal fusion, and on CUDA the
            fuser's own CUDA graph replayed from the third step (fuser.runtime.cuda_graphs), both defaults
  inductor_graph, fuser_graph (CUDA only; not in the default --variants)
            the compiled step (the fuser's without its own graphs), after one warm step, captured in a
            CUDA graph by the benchmark (torch.cuda.graph) and replayed: what is left when no host code
            runs per step (guards, wrappers, launches)

For each: the first call's seconds (compile time, for the compiled ones), whether its parameters and
state after 3 steps match eager's (torch.testing.assert_close), the median ms per step
(triton.testing.do_bench on CUDA; the wall clock on the CPU), the kernels one step launches (the
profiler's CUDA kernels, memcpy and memset left out; on the CPU the fuser's counters, others unknown),
and the fraction of the copy rate measured in the same run (a 1 GiB device-to-device copy, bytes read
plus written) that the step's fewest bytes (each parameter and state tensor read and written, each
gradient read: 28 bytes a parameter for AdamW) over its time represent. Then a second optimizer over the
same shapes of parameters is compiled by the fuser: kernels it compiled anew (0: the first's were
reused) and its first call's seconds. The table goes to stdout; details (versions, sizes, every number,
the fuser's kernel sources and explain report) go under --out.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import torch
import triton

import fuser
from perfgate.workloads import optimizer_bytes

VARIANTS = ("eager", "fused", "inductor", "fuser", "inductor_graph", "fuser_graph")
GRAPHED = {"inductor_graph": "inductor", "fuser_graph": "fuser"}  # captured in a CUDA graph after warm-up
OPTIMIZERS = ("adamw", "sgd")
CHECK_STEPS = 3


def sizes(count: int, low: int, high: int) -> list[int]:
    generator = torch.Generator().manual_seed(13)
    return torch.randint(low, high + 1, (count,), generator=generator).tolist()


def make_params(numels: list[int], device: str) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    params = []
    for n in numels:
        p = torch.randn(n, generator=generator).to(device).requires_grad_()
        p.grad = torch.randn(n, generator=generator).to(device)
        params.append(p)
    return params


def make_optimizer(kind: str, params: list[torch.Tensor], fused: bool) -> torch.optim.Optimizer:
    device = params[0].device
    form = {"fused": True} if fused else {"foreach": True}
    if kind == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **form)
    capturable = device.type != "cpu"
    lr = torch.tensor(1e-3, device=device) if capturable else 1e-3
    return torch.optim.AdamW(params, lr=lr, weight_decay=0.01, capturable=capturable, **form)


def compiled_step(variant: str, optimizer: torch.optim.Optimizer) -> Callable[[], object]:
    # The fuser's own CUDA graphs (fuser.runtime.cuda_graphs, on by default on CUDA) stay off under a graph
    # the benchmark captures itself.
    options = {"horizontal": True, "cuda_graphs": variant != "fuser_graph"}
    variant = GRAPHED.get(variant, variant)
    if variant in ("eager", "fused"):
        return optimizer.step
    if variant == "inductor":
        return torch.compile(optimizer.step)
    return torch.compile(optimizer.step, backend="fuser", options=options)


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def time_ms(step: Callable[[], object], device: str, reps: int) -> float:
    if device == "cuda":
        return triton.testing.do_bench(step, warmup=25, rep=reps * 10, return_mode="median")
    times = []
    for _ in range(reps):
        started = time.perf_counter()
        step()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def kernels_per_step(
    variant: str, step: Callable[[], object], device: str
) -> tuple[int | None, float | None]:
    """Kernels one step launches, and (on CUDA) the sum of their durations in ms: the step's device time,
    which ms per step exceeds by what the GPU waits for the host."""
    if device == "cuda":
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
            step()
            torch.cuda.synchronize()
        cuda = torch.autograd.DeviceType.CUDA
        # Kernels only: the fuser's pointer table reaches the GPU by a host-to-device copy, not a kernel.
        kernels = [
            event
            for event in profile.events()
            if event.device_type == cuda and not event.name.startswith(("Memcpy", "Memset"))
        ]
        return len(kernels), sum(event.device_time_total for event in kernels) / 1e3
    if variant != "fuser":
        return None, None
    fuser.reset_counters()
    step()
    counts = fuser.counters()
    return counts["kernels_launched"] + counts["extern_calls"], None


def captured(step: Callable[[], object]) -> Callable[[], object]:
    """The step captured in a CUDA graph (after the caller's warm steps), as its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # a warm step on a side stream, as torch.cuda.graph's documentation asks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def copy_bytes_per_s(device: str) -> float | None:
    """A 1 GiB device-to-device copy's rate, bytes read plus written; None on the CPU (not measured)."""
    if device != "cuda":
        return None
    source = torch.empty(2**30, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    ms = triton.testing.do_bench(lambda: target.copy_(source), warmup=50, rep=500, return_mode="median")
    return 2 * source.numel() / (ms * 1e-3)


def tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """Parameters, then every state tensor, in parameter order."""
    params = optimizer.param_groups[0]["params"]
    state = [v for p in params for _, v in sorted(optimizer.state[p].items()) if isinstance(v, torch.Tensor)]
    return [p.detach() for p in params] + state


def run_variant(kind: str, variant: str, numels: list[int], device: str, reps: int, copy_rate) -> tuple:
    # Every variant compiles the same optimizer code: a fresh Dynamo keeps its recompile limit (8) away,
    # past which it would run the step eagerly without a word.
    torch._dynamo.reset()
    params = make_params(numels, device)
    optimizer = make_optimizer(kind, params, fused=variant == "fused")
    step = compiled_step(variant, optimizer)
    fuser.reset_counters()
    synchronize(device)
    started = time.perf_counter()
    step()
    synchronize(device)
    first_s = time.perf_counter() - started
    compiled = fuser.counters()["kernels_compiled"]
    if variant in GRAPHED:
        step = captured(step)  # two more steps (a warm one and the replay below): three in all
        step()
    else:
        for _ in range(CHECK_STEPS - 1):
            step()
    synchronize(device)
    after = [t.clone() for t in tensors(optimizer)]
    ms = time_ms(step, device, reps)
    kernels, kernel_ms = kernels_per_step(variant, step, device)
    moved = optimizer_bytes([params, optimizer])
    row = {
        "variant": variant,
        "ms_per_step": ms,
        "kernel_ms_per_step": kernel_ms,
        "kernels_per_step": kernels,
        "first_call_s": first_s,
        "fewest_bytes": moved,
        "copy_rate_fraction": None if copy_rate is None else moved / (ms * 1e-3) / copy_rate,
        "kernels_compiled": compiled if GRAPHED.get(variant, variant) == "fuser" else None,
    }
    return row, after, optimizer


def second_optimizer(kind: str, numels: list[int], device: str) -> dict:
    """A second optimizer over parameters of the same shapes: what the fuser compiles anew for it."""
    torch._dynamo.reset()
    params = make_params(numels, device)
    step = compiled_step("fuser", make_optimizer(kind, params, fused=False))
    fuser.reset_counters()
    synchronize(device)
    started = time.perf_counter()
    step()
    synchronize(device)
    return {
        "first_call_s": time.perf_counter() - started,
        "kernels_compiled": fuser.counters()["kernels_compiled"],
    }


def compare(after: list[torch.Tensor], reference: list[torch.Tensor]) -> str:
    if len(after) != len(reference):
        return f"no: {len(after)} tensors of parameters and state, eager {len(reference)}"
    worst = 0.0
    for got, want in zip(after, reference, strict=True):
        try:
            torch.testing.assert_close(got.to(want.dtype).reshape(want.shape), want)
        except AssertionError as error:
            return "no: " + str(error).splitlines()[0]
        worst = max(worst, (got.double() - want.double()).abs().max().item() if want.numel() else 0.0)
    return f"yes (max abs diff {worst:.2g})"


def run(kind: str, variants: list[str], numels: list[int], device: str, reps: int, out: Path) -> list[dict]:
    copy_rate = copy_bytes_per_s(device)
    rows, reference = [], None
    for variant in variants:
        row, after, optimizer = run_variant(kind, variant, numels, device, reps, copy_rate)
        if reference is None and variant == "eager":
            reference = after
        row["matches_eager"] = (
            "reference" if variant == "eager" else compare(after, reference) if reference else "?"
        )
        if variant == "fuser":
            torch._dynamo.reset()
            report = fuser.explain(optimizer.step, fuser_options={"horizontal": True})
            (out / f"{kind}-fuser-explain.txt").write_text(str(report))
            row["fuser_kernels_in_graphs"] = report.num_kernels
            row["fuser_eager_calls"] = report.eager_calls
            row["second_optimizer"] = second_optimizer(kind, numels, device)
        rows.append(row)
        del optimizer, after
        if device == "cuda":
            torch.cuda.empty_cache()
    return rows


def table(kind: str, rows: list[dict], copy_rate_known: bool) -> str:
    lines = [
        f"{kind}:",
        "| variant | ms per step | kernel ms per step | kernels per step | first call s | copy rate % | matches eager |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        fraction = row["copy_rate_fraction"]
        kernels = "?" if row["kernels_per_step"] is None else str(row["kernels_per_step"])
        kernel_ms = "?" if row["kernel_ms_per_step"] is None else f"{row['kernel_ms_per_step']:.3f}"
        lines.append(
            f"| {row['variant']} | {row['ms_per_step']:.3f} | {kernel_ms} | {kernels} | {row['first_call_s']:.1f} | "
            f"{'—' if fraction is None else f'{100 * fraction:.0f}'} | {row['matches_eager']} |"
        )
    for row in rows:
        if "second_optimizer" in row:
            second = row["second_optimizer"]
            lines.append(
                f"fuser, a second optimizer of the same shapes: {second['kernels_compiled']} kernel(s) "
                f"compiled anew, first call {second['first_call_s']:.1f} s"
            )
    if not copy_rate_known:
        lines.append("(copy rate not measured on the CPU)")
    return "\n".join(lines)


def environment(device: str) -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        commit = None
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name() if device == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "commit": commit,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--optimizer", action="append", choices=OPTIMIZERS, help="default: both")
    parser.add_argument(
        "--variants",
        default="eager,fused,inductor,fuser",
        help=f"comma-separated, of {', '.join(VARIANTS)}",
    )
    parser.add_argument("--params", type=int, default=200)
    parser.add_argument("--min-numel", type=int, default=1000)
    parser.add_argument("--max-numel", type=int, default=600_000)
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cuda", "cpu")
    )
    parser.add_argument(
        "--reps", type=int, default=20, help="timed steps on the CPU; do_bench's ms/10 on CUDA"
    )
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "optimizer-step-out")))
    args = parser.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or "eager" not in variants:
        parser.error(
            f"--variants: unknown {unknown}" if unknown else "--variants: eager is the reference, keep it"
        )
    if args.device == "cpu" and set(variants) & set(GRAPHED):
        parser.error("--variants: the *_graph variants capture CUDA graphs; they need --device cuda")
    if not 0 < args.min_numel <= args.max_numel or args.params < 1:
        parser.error("need --params >= 1 and 0 < --min-numel <= --max-numel")
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("FUSER_KERNEL_DIR", str(args.out / "fuser-kernels"))
    numels = sizes(args.params, args.min_numel, args.max_numel)
    record = {"environment": environment(args.device), "numels": numels, "total": sum(numels), "results": {}}
    print(f"{args.params} fp32 parameters, {sum(numels):,} elements, on {record['environment']['device']}")
    for kind in args.optimizer or OPTIMIZERS:
        rows = run(kind, variants, numels, args.device, args.reps, args.out)
        record["results"][kind] = rows
        print(table(kind, rows, args.device == "cuda"), flush=True)
        path = args.out / f"optimizer-step-{args.device}.json"  # after each optimizer: a cut run keeps it
        path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"details: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
