"""Two CUDA-only mismatches of the fuser against eager (ledger, 2026-11-28), reduced to one element each:
- float16 `mul_` by a bfloat16 tensor: inf * 2**-126 gives nan where eager gives inf;
- float16 `hardtanh_backward`: x = fp16(0.1) = 0.0999755859375 against max_val 0.1 gives 0 where eager
  passes the (nan) gradient.
Prints eager's and the fuser's answers and, from Triton's cache (TRITON_CACHE_DIR), each kernel's
half-precision PTX and LLVM lines: whether the compiler narrowed the float32 arithmetic."""

import glob
import os
import sys

import torch

import fuser  # noqa: F401  (registers the backend)

os.environ.setdefault("FUSER_UNVALIDATED", "fuse")
dev = "cuda"


def mul_(x, y):
    x = x.clone()
    x.mul_(y)
    return x


def hardtanh_backward(g, x):
    return torch.ops.aten.hardtanh_backward(g, x, -2.0, 0.1)


def mul_wide(x, y):  # the same arithmetic written out, for comparison
    return (x.float() * y.float()).half()


CASES = [
    (
        "mul_ f16*bf16",
        mul_,
        (
            torch.tensor([float("inf"), 2.0, -3.0], dtype=torch.float16),
            torch.tensor([2.0**-126, 2.0**-126, 2.0**-130], dtype=torch.bfloat16),
        ),
    ),
    (
        "written out",
        mul_wide,
        (torch.tensor([float("inf")], dtype=torch.float16), torch.tensor([2.0**-126], dtype=torch.bfloat16)),
    ),
    (
        "hardtanh_backward",
        hardtanh_backward,
        (
            torch.full((3,), float("nan"), dtype=torch.float16),
            torch.tensor([0.1, 0.1001, -2.0], dtype=torch.float16),
        ),
    ),
]
for name, fn, args in CASES:
    args = [a.to(dev) for a in args]
    torch._dynamo.reset()
    print(f"{name:18} eager {fn(*args).tolist()}  fuser {torch.compile(fn, backend='fuser')(*args).tolist()}")
    sys.stdout.flush()

WORDS = ("f16", "half", "bfloat", "fcmp", "setp", "fmul", "mul.", "cvt")
cache = os.environ.get("TRITON_CACHE_DIR", "")
for path in sorted(
    glob.glob(f"{cache}/**/*.ptx", recursive=True) + glob.glob(f"{cache}/**/*.llir", recursive=True)
):
    with open(path) as file:
        lines = [line.strip() for line in file if any(k in line for k in WORDS)]
    print(f"--- {os.path.basename(path)} ({len(lines)} lines)")
    print("\n".join(lines[:40]))

# Raw Triton kernels: the pattern alone, and candidate rewrites that hide the widening from LLVM.
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def _mul(a_ptr, b_ptr, out_ptr, HOW: tl.constexpr):
    i = tl.arange(0, 4)
    a = tl.load(a_ptr + i).to(tl.float32)
    b16 = tl.load(b_ptr + i)
    if HOW == 0:
        b = b16.to(tl.float32)
    else:  # bf16 widened by its bits: exact, and not an fpext LLVM could narrow
        b = (b16.to(tl.int16, bitcast=True).to(tl.int32) << 16).to(tl.float32, bitcast=True)
    tl.store(out_ptr + i, (a * b).to(tl.float16))


@triton.jit
def _ge(x_ptr, out_ptr, HOW: tl.constexpr):
    i = tl.arange(0, 4)
    x = tl.load(x_ptr + i).to(tl.float32)
    c = x >= 0.1 if HOW == 0 else (x - 0.1) >= 0.0  # the second: no comparison of a widened half
    tl.store(out_ptr + i, c.to(tl.int8))


a = torch.tensor([float("inf"), 2.0, -3.0, 1.0], dtype=torch.float16, device=dev)
b = torch.tensor([2.0**-126, 2.0**-126, 2.0**-130, 3.0e38], dtype=torch.bfloat16, device=dev)
x = torch.tensor([0.1, 0.1001, -2.0, 0.0999], dtype=torch.float16, device=dev)
print("eager mul", (a.float() * b.float()).half().tolist(), "eager ge", (x.float() >= 0.1).tolist())
for how in (0, 1):
    out = torch.empty(4, dtype=torch.float16, device=dev)
    _mul[(1,)](a, b, out, HOW=how)
    flags = torch.empty(4, dtype=torch.int8, device=dev)
    _ge[(1,)](x, flags, HOW=how)
    print(f"raw HOW={how}: mul {out.tolist()}  ge {flags.tolist()}")
print("triton", triton.__version__, "torch", torch.__version__, torch.cuda.get_device_name())
