"""What tanh-gelu's forms cost and how exact they are on a GPU (issue 29 item 5: pointwise kernels at 90% of
copy peak, bias + tanh-gelu at 86% on the H100). gelu(x + bias, approximate="tanh"), bf16 16384x4096, as one
Triton kernel per form, side by side in one process with the fuser's kernel, Inductor's, eager's and a
plain `x + bias` (the bytes alone). Forms:
  tanh          0.5 v (1 + tanh(u)), u = sqrt(2/pi) (v + 0.044715 v^3): eager's form, the fuser's today
  sigmoid       v / (1 + exp(-2u)): the same function, 1 + tanh(u) = 2 / (1 + exp(-2u)), with no
                cancellation where tanh(u) nears -1 (where eager's is 0); libdevice's accurate exp
  sigmoid-fast  the same with the GPU's fast exp (ex2.approx): the fuser's form since session 24
  folded        v / (1 + exp2(v (c0 + c1 v^2))): the constants -2 sqrt(2/pi) log2(e) (and times 0.044715)
                folded into one polynomial, exp2 for exp (session 27: 22.5 SASS instructions an element
                for sm_90 against sigmoid-fast's 27.4, compiled on the CPU with Triton 3.9)
  folded-rcp    the same as v * rcp.approx.ftz(1 + ...): no division's range fix-up (19.5 an element);
                flushes the result to 0 where 1 + exp2(...) passes 2^126 (v below about -44.6)
  folded-rcp-rounded  the same after rounding v = x + bias to bf16 and back, as eager's bf16 add does and
                the fuser's kernel must (a conversion instruction, which shares the MUFU's quarter-rate
                pipe: 3.5 such instructions an element where folded-rcp has 2.5)
  folded-rcp-bits     the same rounding in integer instructions (round to nearest even on the bits)
  fuser-order   folded-rcp-rounded as the fuser's kernel writes it: int32 offsets, the bias's column
                `offset % cols` first, then both loads (ptxas issues them after the integer division);
                compiled for sm_90 it is the fuser's kernel's 156 SASS instructions (8 elements a thread)
  int64-index   the same over int64 offsets, as the other forms (whose division branches to a 32-bit
                fast path); folded-rcp-rounded differs from it in loading x before the bias's column
  fastdiv       fuser-order with the column made by a multiplier the host computes for the divisor
                (`magic`: the quotient is umulhi(offset, m) >> s, exact for offsets below 2^31), three
                short instructions where the division is about 35 with a reciprocal and a conversion;
                but Triton no longer sees the column as contiguous, so the bias is read as 8 scalar
                loads a thread, not one vector (SASS for sm_90, checked on the CPU)
  program-column  the column as the program's first column plus `tl.arange` (one division a program, on
                the uniform datapath): right only where a program's elements lie in one row (the last
                size a multiple of BLOCK, which a launch can check and pick a variant for); compiled for
                sm_90, ptxas still issues both loads after that division, as in fuser-order: ptxas
                orders by the critical path (the division feeds the bias's load), so only a branch
                between them (int64-index's division has one, below x's load in bias_gelu) moves x first
  fuser-order-2048, -4096   fuser-order with 2048 or 4096 elements a program (16 or 32 a thread): one
                division a thread for more loads; a launch setting, which no validation fingerprint holds
Accuracy: each form's float32 result against float64 over v in [-12, 12], in float32 ulps of the exact
value (the largest, and the largest where |result| > 1e-3, the range eager's own form holds digits in).
Forms alternate within a process; run it in several fresh processes, median of medians:
  for i in 1 2 3; do python tools/probes/gelu_tanh_forms_cuda.py >> gelu_tanh.jsonl; done
"""

import json

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.testing import do_bench

from fuser import kernel_lib as lib
from fuser.capture.backend import fuser_backend

FORMS = {"tanh": 0, "sigmoid": 1, "sigmoid-fast": 2, "add": 3, "folded": 4, "folded-rcp": 5}
FORMS |= {"folded-rcp-rounded": 6, "folded-rcp-bits": 7, "fuser-order": 8, "int64-index": 9}
FORMS |= {"fastdiv": 10, "fuser-order-2048": 11, "fuser-order-4096": 12, "program-column": 13}
C0 = tl.constexpr(-2.0 * 0.7978845608028654 * 1.4426950408889634)  # -2 sqrt(2/pi) log2(e)
C1 = tl.constexpr(C0.value * 0.044715)


@triton.jit
def bias_gelu_ordered(
    x_ptr, b_ptr, y_ptr, n, cols, m, s, INT64: tl.constexpr, FAST: tl.constexpr, BLOCK: tl.constexpr
):
    pid = tl.program_id(0)
    if INT64:
        pid = pid.to(tl.int64)
    offset = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offset < n
    if FAST == 1:
        i1 = offset - (tl.umulhi(offset.to(tl.uint32), m.to(tl.uint32)) >> s).to(tl.int32) * cols
    elif FAST == 2:
        i1 = (pid * BLOCK) % cols + tl.arange(0, BLOCK)
    else:
        i1 = offset % cols
    x = tl.load(x_ptr + offset, mask=mask).to(tl.float32)
    v = libdevice.fma(tl.load(b_ptr + i1, mask=mask).to(tl.float32), 1.0, x).to(tl.bfloat16).to(tl.float32)
    y = v * lib.rcp_ftz(1.0 + tl.exp2(v * (C0 + C1 * (v * v))))
    tl.store(y_ptr + offset, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def bias_gelu(x_ptr, b_ptr, y_ptr, n, cols, FORM: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    v = tl.load(x_ptr + o, mask=m).to(tl.float32) + tl.load(b_ptr + o % cols, mask=m).to(tl.float32)
    if FORM == 6:  # as the fuser's kernel writes it (a plain `.to` pair is folded away by Triton)
        v = libdevice.fma(v, 1.0, 0.0).to(tl.bfloat16).to(tl.float32)
    elif FORM == 7:
        bits = v.to(tl.int32, bitcast=True)
        rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & -65536).to(tl.float32, bitcast=True)
        v = tl.where(v != v, v, rounded)
    u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
    if FORM == 0:
        y = 0.5 * v * (1.0 + libdevice.tanh(u))
    elif FORM == 1:
        y = v / (1.0 + libdevice.exp(-2.0 * u))
    elif FORM == 2:
        y = v / (1.0 + tl.exp(-2.0 * u))
    elif FORM == 4:
        y = v / (1.0 + tl.exp2(v * (C0 + C1 * (v * v))))
    elif FORM >= 5:
        y = v * lib.rcp_ftz(1.0 + tl.exp2(v * (C0 + C1 * (v * v))))
    else:
        y = v
    tl.store(y_ptr + o, y.to(y_ptr.dtype.element_ty), mask=m)


def launch(x, b, y, form):
    grid = (triton.cdiv(x.numel(), 1024),)
    if FORMS[form] >= 8:
        return lambda: bias_gelu_ordered[grid](
            x, b, y, x.numel(), b.numel(), FORMS[form] == 9, 1024, num_warps=4
        )
    return lambda: bias_gelu[grid](x, b, y, x.numel(), b.numel(), FORMS[form], 1024, num_warps=4)


def magic(divisor: int) -> tuple[int, int]:
    """m and s with n // divisor == umulhi(n, m) >> s for 0 <= n < 2^31 (divisor >= 2; CUTLASS's FastDivmod)."""
    shift = 31 + (divisor - 1).bit_length()
    return ((1 << shift) + divisor - 1) // divisor, shift - 32


def ulps(value: torch.Tensor, exact: torch.Tensor) -> torch.Tensor:
    spacing = torch.finfo(torch.float32).eps * exact.abs().clamp_min(torch.finfo(torch.float32).tiny)
    return (value.double() - exact).abs() / spacing


def accuracy() -> dict[str, list[float]]:
    v = torch.linspace(-12, 12, 1 << 20, device="cuda", dtype=torch.float32)
    zero = torch.zeros(1, device="cuda", dtype=torch.float32)
    exact = F.gelu(v.double(), approximate="tanh")
    held = exact.abs() > 1e-3
    found = {}
    for form in ("tanh", "sigmoid", "sigmoid-fast", "folded", "folded-rcp"):
        y = torch.empty_like(v)
        launch(v, zero, y, form)()
        found[form] = [ulps(y, exact).max().item(), ulps(y, exact)[held].max().item()]
    found["eager"] = [ulps(F.gelu(v, approximate="tanh"), exact)[i].max().item() for i in (Ellipsis, held)]
    return found


def main():
    rows, cols = 16384, 4096
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)
    fn = lambda x, b: F.gelu(x + b, approximate="tanh")  # noqa: E731
    fuser = torch.compile(fn, backend=fuser_backend, dynamic=False)
    inductor = torch.compile(fn, dynamic=False)
    variants = {form: launch(x, b, y, form) for form in FORMS}
    variants |= {"fuser": lambda: fuser(x, b), "inductor": lambda: inductor(x, b), "eager": lambda: fn(x, b)}
    for call in variants.values():
        call()
    times = {name: [] for name in variants}
    for _ in range(5):
        for name, call in variants.items():
            times[name].append(do_bench(call, warmup=25, rep=100, return_mode="median"))
    print(json.dumps({"ms": {n: sorted(t)[len(t) // 2] for n, t in times.items()}, "ulps": accuracy()}))


if __name__ == "__main__":
    main()
