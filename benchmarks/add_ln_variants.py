"""An experiment behind a codegen decision: the fuser's add + layer_norm kernel, edited by hand in a few
ways, each timed like compare.py (do_bench, L2 flushed) interleaved with the default backend's call.

Variants: the generated kernel; its weight and bias loads hoisted to the top (they sit after the row
reductions, an L2 round trip each row waits for); the row length as a constexpr (no column mask); each
at 8 and 16 warps. And a looped kernel written here, the default backend's schedule: one pass of
Welford over the row in column blocks, then a second pass that reads the row again (from L2) to
normalize it, with and without L2 eviction hints (keep the row on the first read, drop it on the second).
Cache and eviction hints on the generated kernel's loads of rows, of weight and bias, and on its store. A
grid-stride kernel: a fixed grid of 2-8 programs an SM, each loading weight and bias once and walking rows.

    python benchmarks/add_ln_variants.py [--rows 16384 --cols 4096 --repeats 7 --only REGEX]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import itertools
import os
import re
import statistics
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
import triton.testing

import fuser
from fuser.runtime import kernel_cache
from fuser.runtime.launch_config import gpu_compile_options


def add_layer_norm(x, r, w, b):
    """layer_norm(x + r): the program these kernel variants compute (the gate's also returns x + r)."""
    return F.layer_norm(x + r, x.shape[-1:], w, b)


@triton.jit
def _welford_combine(mean_a, m2_a, n_a, mean_b, m2_b, n_b):
    n = n_a + n_b
    delta = mean_b - mean_a
    share = tl.where(n == 0, 0.0, n_b / n)
    return mean_a + delta * share, m2_a + m2_b + delta * delta * n_a * share, n


@triton.jit
def looped_welford(
    x_ptr,
    r_ptr,
    w_ptr,
    b_ptr,
    out_ptr,
    num_cols,
    RBLOCK: tl.constexpr,
    KEEP: tl.constexpr,
    DROP: tl.constexpr,
):
    row_start = tl.program_id(0).to(tl.int64) * num_cols
    block = tl.arange(0, RBLOCK)
    mean = tl.zeros([RBLOCK], tl.float32)
    m2 = tl.zeros([RBLOCK], tl.float32)
    count = tl.zeros([RBLOCK], tl.float32)
    for start in range(0, num_cols, RBLOCK):
        cols = start + block
        mask = cols < num_cols
        x = tl.load(x_ptr + row_start + cols, mask=mask, eviction_policy=KEEP).to(tl.float32)
        v = x + tl.load(r_ptr + row_start + cols, mask=mask, eviction_policy=KEEP).to(tl.float32)
        grown = count + 1.0
        delta = v - mean
        new_mean = mean + delta / grown
        m2 = tl.where(mask, m2 + delta * (v - new_mean), m2)
        mean = tl.where(mask, new_mean, mean)
        count = tl.where(mask, grown, count)
    row_mean, row_m2, _ = tl.reduce((mean, m2, count), 0, _welford_combine)
    rstd = tl.rsqrt(row_m2 / num_cols + 1e-5)
    for start in range(0, num_cols, RBLOCK):
        cols = start + block
        mask = cols < num_cols
        x = tl.load(x_ptr + row_start + cols, mask=mask, eviction_policy=DROP).to(tl.float32)
        v = x + tl.load(r_ptr + row_start + cols, mask=mask, eviction_policy=DROP).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, eviction_policy=KEEP).to(tl.float32)
        b = tl.load(b_ptr + cols, mask=mask, eviction_policy=KEEP).to(tl.float32)
        tl.store(out_ptr + row_start + cols, ((v - row_mean) * rstd * w + b).to(tl.bfloat16), mask=mask)


@triton.jit
def grid_stride_rows(
    x_ptr, r_ptr, w_ptr, b_ptr, out_ptr, num_rows, num_cols, RBLOCK: tl.constexpr, STREAM: tl.constexpr
):
    # A fixed grid of programs, each walking rows: weight and bias are loaded once a program.
    cols = tl.arange(0, RBLOCK)
    mask = cols < num_cols
    w = tl.load(w_ptr + cols, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    for row in range(tl.program_id(0), num_rows, tl.num_programs(0)):
        start = row * num_cols  # int32: the benchmark's sizes stay below 2**31
        x = tl.load(x_ptr + start + cols, mask=mask, eviction_policy=STREAM).to(tl.float32)
        v = x + tl.load(r_ptr + start + cols, mask=mask, eviction_policy=STREAM).to(tl.float32)
        mean = tl.sum(tl.where(mask, v, 0.0), 0) / num_cols
        deviation = tl.where(mask, v - mean, 0.0)
        rstd = tl.rsqrt(tl.sum(deviation * deviation, 0) / num_cols + 1e-5)
        tl.store(out_ptr + start + cols, (deviation * rstd * w + b).to(tl.bfloat16), mask=mask)


@triton.jit
def add_only(x_ptr, r_ptr, out_ptr, BLOCK: tl.constexpr):
    # The same bytes as add + layer_norm (two reads, one write), no reduction: the traffic's bound.
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(r_ptr + offsets))


def grid_stride_call(x, r, w, b, out, programs: int, warps: int, hints: bool):
    rows, cols = x.shape
    stream = "evict_first" if hints else ""
    return lambda: grid_stride_rows[(programs,)](
        x,
        r,
        w,
        b,
        out,
        rows,
        cols,
        RBLOCK=triton.next_power_of_2(cols),
        STREAM=stream,
        num_warps=warps,
        **gpu_compile_options(),
    )


def welford_call(x, r, w, b, out, rblock: int, warps: int, hints: bool):
    keep, drop = ("evict_last", "evict_first") if hints else ("", "")
    rows, cols = x.shape
    return lambda: looped_welford[(rows,)](
        x, r, w, b, out, cols, RBLOCK=rblock, KEEP=keep, DROP=drop, num_warps=warps, **gpu_compile_options()
    )


def generated_source(x, r, w, b) -> Path:
    folder = Path(tempfile.mkdtemp())
    os.environ["FUSER_KERNEL_DIR"] = str(folder)
    kernel_cache.kernel_dir.cache_clear()
    fuser.compile(add_layer_norm, dynamic=False, strict=True, unvalidated="fuse")(x, r, w, b)
    (path,) = folder.glob("*.py")
    return path


def hoist_row_constants(source: str) -> str:
    """Move the loads of inputs indexed by column only (weight, bias) up to just after the first load."""
    lines = source.splitlines()
    column_loads = [line for line in lines if re.search(r"tl\.load\(in\d+_ptr \+ c1 \* ", line)]
    rest = [line for line in lines if line not in column_loads]
    first_load = next(i for i, line in enumerate(rest) if "tl.load(" in line)
    return "\n".join(rest[: first_load + 1] + column_loads + rest[first_load + 1 :]) + "\n"


def access_hints(source: str, rows: str = "", columns: str = "", store: str = "") -> str:
    """Keyword arguments (cache and L2 eviction hints) added to the loads of whole rows, to the loads
    of columns only (weight, bias) and to the output's store."""
    lines = []
    for line in source.splitlines():
        if "tl.load(" in line:
            extra = columns if re.search(r"tl\.load\(in\d+_ptr \+ c1 \* ", line) else rows
            line = line.replace("mask=mask)", f"mask=mask, {extra})") if extra else line
        if "tl.store(" in line and store:
            line = line.replace("mask=mask)", f"mask=mask, {store})")
        lines.append(line)
    return "\n".join(lines) + "\n"


def constexpr_cols(source: str) -> str:
    return source.replace(" num_cols, XBLOCK", " num_cols: tl.constexpr, XBLOCK")


def load(source: str, name: str, folder: Path):
    path = folder / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return next(v for v in vars(module).values() if isinstance(v, triton.runtime.JITFunction))


def launcher(kernel, tensors: dict, out, warps: int, cols: int):
    names = kernel.arg_names
    args = {}
    for name in names:
        match = re.fullmatch(r"(in\d+|out0)_(ptr|stride(\d))", name)
        if match:
            tensor = out if match[1] == "out0" else tensors[match[1]]
            args[name] = tensor if match[2] == "ptr" else tensor.stride(int(match[3]))
    rows = out.shape[0]
    args |= {"num_rows": rows, "num_cols": cols, "XBLOCK": 1, "RBLOCK": triton.next_power_of_2(cols)}
    options = {"num_warps": warps, **gpu_compile_options()}
    grid = (rows,)
    return lambda: kernel[grid](**args, **options)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=16384)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--warps", type=int, nargs="+", default=[8, 16], help="the generated kernel's warps")
    parser.add_argument("--only", default="", help="a regular expression: time only the variants it finds")
    args = parser.parse_args()
    torch.manual_seed(0)
    shape, bf16 = (args.rows, args.cols), torch.bfloat16
    x, r = torch.randn(shape, device="cuda", dtype=bf16), torch.randn(shape, device="cuda", dtype=bf16)
    w, b = (
        torch.randn(args.cols, device="cuda", dtype=bf16),
        torch.randn(args.cols, device="cuda", dtype=bf16),
    )
    expected = add_layer_norm(x, r, w, b)
    generated = generated_source(x, r, w, b).read_text()
    folder = Path(tempfile.mkdtemp())
    first, last = "eviction_policy='evict_first'", "eviction_policy='evict_last'"
    sources = {
        "generated": generated,
        "hoisted": hoist_row_constants(generated),
        "constexpr_cols": constexpr_cols(generated),
        "hoisted_constexpr_cols": constexpr_cols(hoist_row_constants(generated)),
        "rows_first_columns_last": access_hints(generated, first, last),
        "rows_last": access_hints(generated, last),
        "rows_last_columns_last": access_hints(generated, last, last),
        "rows_last_store_first": access_hints(generated, last, store=first),
        "rows_last_store_last": access_hints(generated, last, store=last),
        "rows_cg": access_hints(generated, "cache_modifier='.cg'"),
        "rows_last_hoisted": access_hints(hoist_row_constants(generated), last),
        "rows_last_constexpr_cols": constexpr_cols(access_hints(generated, last)),
        "store_first": access_hints(generated, store=first),
    }
    out = torch.empty_like(expected)
    tensors = {"in0": x, "in1": r, "in2": w, "in3": b}
    calls = {"inductor": (lambda f: lambda: f(x, r, w, b))(torch.compile(add_layer_norm, dynamic=False))}

    def register(name: str, call) -> None:
        if not re.search(args.only, name):
            return
        out.zero_()
        call()
        error = (out.float() - expected.float()).abs().max().item()
        print(f"{name}: max |error| against eager {error:.4f}")
        calls[name] = call

    if re.search(args.only, "bound/add_only"):
        block = 4096
        assert x.numel() % block == 0, "add_only wants rows * cols a multiple of 4096"
        calls["bound/add_only"] = lambda: add_only[(x.numel() // block,)](x, r, out, BLOCK=block, num_warps=8)

    for name, source in sources.items():
        kernel = load(source, name, folder)
        for warps in args.warps:
            register(f"{name}/{warps}w", launcher(kernel, tensors, out, warps, args.cols))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    hand_written = {
        f"grid_stride/{per_sm}x{sms}": functools.partial(grid_stride_call, x, r, w, b, out, per_sm * sms)
        for per_sm in (2, 4, 8)
    } | {
        f"welford/{rblock}": functools.partial(welford_call, x, r, w, b, out, rblock)
        for rblock in (1024, 2048, 4096)
    }
    for (stem, make), warps, hints in itertools.product(hand_written.items(), (8, 16), (False, True)):
        register(f"{stem}/{warps}w{'/hints' if hints else ''}", make(warps, hints))
    rounds: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(args.repeats):
        for name, call in calls.items():
            rounds[name].append(triton.testing.do_bench(call, warmup=50, rep=300, return_mode="median"))
    base = statistics.median(rounds["inductor"])
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    for name, times in rounds.items():
        ms = statistics.median(times)
        print(
            f"{name:<32}{ms:.4f} ms  {ms / base:.3f}x default backend  (rounds {min(times):.4f}-{max(times):.4f})"
        )


if __name__ == "__main__":
    main()
