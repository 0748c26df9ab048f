"""Which step of the fuser's hardsigmoid lowering loses float64 precision on CUDA (sm_90 validation,
2026-11-27: float64 forward 2^27 ulps off; the CPU interpreter is exact). Each variant is one Triton
kernel over the same float64 input, compared bit for bit with torch's float64 result on the GPU.
  python tools/probes/fp64_hardsigmoid_cuda.py
"""

from pathlib import Path

import torch
import triton
import triton.language as tl


@triton.jit
def add3(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o, mask=o < n)
    tl.store(y_ptr + o, x + 3.0, mask=o < n)


@triton.jit
def max0(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o, mask=o < n)
    tl.store(y_ptr + o, tl.maximum(x, 0.0, propagate_nan=tl.PropagateNan.ALL), mask=o < n)


@triton.jit
def min6(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o, mask=o < n)
    tl.store(y_ptr + o, tl.minimum(x, 6.0, propagate_nan=tl.PropagateNan.ALL), mask=o < n)


@triton.jit
def div6(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o, mask=o < n)
    tl.store(y_ptr + o, x / 6.0, mask=o < n)


@triton.jit
def div6_f64(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o, mask=o < n)
    tl.store(y_ptr + o, x / tl.full([BLOCK], 6.0, tl.float64), mask=o < n)


@triton.jit
def whole(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o, mask=o < n)
    clamped = tl.minimum(
        tl.maximum(x + 3.0, 0.0, propagate_nan=tl.PropagateNan.ALL), 6.0, propagate_nan=tl.PropagateNan.ALL
    )
    tl.store(y_ptr + o, clamped / 6.0, mask=o < n)


@triton.jit
def whole_no_nan(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o, mask=o < n)
    tl.store(y_ptr + o, tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0) / 6.0, mask=o < n)


@triton.jit
def whole_f64_constants(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o, mask=o < n)
    three = tl.full([], 3.0, tl.float64)
    clamped = tl.minimum(
        tl.maximum(x + three, tl.full([], 0.0, tl.float64), propagate_nan=tl.PropagateNan.ALL),
        tl.full([], 6.0, tl.float64),
        propagate_nan=tl.PropagateNan.ALL,
    )
    tl.store(y_ptr + o, clamped / tl.full([], 6.0, tl.float64), mask=o < n)


def main():
    x = torch.randn(1 << 16, dtype=torch.float64, device="cuda") * 4
    want = {
        "add3": x + 3.0,
        "max0": torch.clamp_min(x, 0.0),
        "min6": torch.clamp_max(x, 6.0),
        "div6": x / 6.0,
        "div6_f64": x / 6.0,
        "whole": torch.nn.functional.hardsigmoid(x),
        "whole_no_nan": torch.nn.functional.hardsigmoid(x),
        "whole_f64_constants": torch.nn.functional.hardsigmoid(x),
    }
    kernels = dict(
        add3=add3, max0=max0, min6=min6, div6=div6, div6_f64=div6_f64, whole=whole, whole_no_nan=whole_no_nan
    )
    kernels["whole_f64_constants"] = whole_f64_constants
    for name, kernel in kernels.items():
        y = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        ref = want[name]
        differ = (y != ref).sum().item()
        rel = ((y - ref).abs() / ref.abs().clamp_min(1e-300)).max().item()
        print(f"{name:20s} differ {differ:6d} of {x.numel()}  max relative error {rel:.3e}")


def fuser_kernel():
    """The fuser's own hardsigmoid kernel on float64, its error, and its source."""
    import glob
    import os
    import tempfile

    from fuser.capture.backend import fuser_backend

    folder = tempfile.mkdtemp()
    os.environ.update(FUSER_KERNEL_DIR=folder, FUSER_UNVALIDATED="fuse")
    x = torch.randn(1 << 16, dtype=torch.float64, device="cuda") * 4
    for op in (torch.nn.functional.hardsigmoid, torch.nn.functional.hardswish):
        torch._dynamo.reset()
        y = torch.compile(op, backend=fuser_backend)(x)
        error = (y - op(x)).abs().max().item()
        print(
            f"fuser {op.__name__}: differ {(y != op(x)).sum().item()} of {x.numel()}, max error {error:.3e}"
        )
    for path in sorted(glob.glob(f"{folder}/**/*.py", recursive=True)):
        print(f"--- {path}\n{Path(path).read_text()}")


if __name__ == "__main__":
    main()
    fuser_kernel()
