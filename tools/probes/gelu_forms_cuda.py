"""What gelu's erfc form costs on a GPU (issue 29): the perf gate's bias_gelu (gelu(x + bias), bf16
16384x4096) as one Triton kernel per form, side by side in one process, with the fuser's own kernel and
Inductor's. The erfc form is exact in the negative tail (`1 + erf` cancels for x < -5.4, commit 55a364f).
Forms alternate within a process; run it in several fresh processes and take the median of medians:
  for i in 1 2 3; do python tools/probes/gelu_forms_cuda.py >> gelu.jsonl; done
Prints one JSON line: the median do_bench time (ms, L2 flushed) of each form.
"""

import json

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.language.extra import libdevice
from triton.testing import do_bench

from fuser.capture.backend import fuser_backend


@triton.jit
def bias_gelu(x_ptr, b_ptr, y_ptr, n, cols, FORM: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    v = tl.load(x_ptr + o, mask=m).to(tl.float32) + tl.load(b_ptr + o % cols, mask=m).to(tl.float32)
    if FORM == 0:  # 1 + erf: eager's and Inductor's form
        y = 0.5 * v * (1.0 + libdevice.erf(v * 0.7071067811865476))
    elif FORM == 1:  # erfc: the fuser's form since 55a364f
        y = 0.5 * v * libdevice.erfc(v * -0.7071067811865476)
    else:  # erfc only where 1 + erf cancels (both computed: a select)
        z = v * 0.7071067811865476
        y = 0.5 * v * tl.where(z < -1.0, libdevice.erfc(-z), 1.0 + libdevice.erf(z))
    tl.store(y_ptr + o, y.to(tl.bfloat16), mask=m)


def main():
    rows, cols = 16384, 4096
    x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
    y = torch.empty_like(x)

    def form(k):
        return lambda: bias_gelu[(triton.cdiv(x.numel(), 1024),)](
            x, b, y, x.numel(), cols, k, 1024, num_warps=4
        )

    fn = lambda x, b: F.gelu(x + b)  # noqa: E731
    fuser = torch.compile(fn, backend=fuser_backend, dynamic=False)
    inductor = torch.compile(fn, dynamic=False)
    variants = {
        "erf": form(0),
        "erfc": form(1),
        "select": form(2),
        "fuser": lambda: fuser(x, b),
        "inductor": lambda: inductor(x, b),
        "eager": lambda: fn(x, b),
    }
    expected = fn(x.double(), b.double())
    for name, call in variants.items():
        out = call()
        out = out if isinstance(out, torch.Tensor) else y
        error = ((out.double() - expected).abs() / expected.abs().clamp_min(1e-30)).max().item()
        print(f"# {name}: largest relative error {error:.3g}", flush=True)
    times = {name: [] for name in variants}
    for _ in range(5):
        for name, call in variants.items():
            times[name].append(do_bench(call, warmup=25, rep=100, return_mode="median"))
    print(json.dumps({name: sorted(t)[len(t) // 2] for name, t in times.items()}))


if __name__ == "__main__":
    main()
