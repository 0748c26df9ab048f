"""Does Triton's `enable_reflect_ftz=False` launch option keep float32 subnormals in libdevice, and at
what cost? (The fuser's per-op subnormal helpers in fuser/kernel_lib.py exist because of this option.)

    python3 tools/probes/reflect_ftz.py          # on a CUDA machine; prints a table

For each libdevice function: how many of a set of subnormal-heavy inputs give a result other than eager's
CUDA kernel (bitwise, nan = nan), with the option at Triton's default (True) and off. Then the time of a
libdevice-heavy pointwise kernel over 2^26 float32 values, both ways.
"""

import dataclasses

import torch
import triton
import triton.language as tl
from triton.backends.nvidia.compiler import CUDAOptions
from triton.language.extra import libdevice


@triton.jit
def _binary(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    if OP == "div_rn":
        r = libdevice.div_rn(x, y)
    elif OP == "fmod":
        r = libdevice.fmod(x, y)
    elif OP == "atan2":
        r = libdevice.atan2(x, y)
    elif OP == "hypot":
        r = libdevice.hypot(x, y)
    elif OP == "log":
        r = libdevice.log(x)
    elif OP == "rsqrt":
        r = libdevice.rsqrt(x)
    elif OP == "exp":
        r = libdevice.exp(x)
    elif OP == "sqrt":
        r = libdevice.sqrt(x)
    elif OP == "floor":
        r = libdevice.floor(x)
    elif OP == "add_alpha2_tl_fma":
        r = tl.fma(y, 2.0, x)
    elif OP == "add_alpha2_libdevice_fma":
        r = libdevice.fma(y, 2.0, x)
    else:  # heavy: a chain of libdevice calls, for timing
        r = libdevice.log(libdevice.exp(x) + 1.0) + libdevice.div_rn(x, y + 2.0) + libdevice.tanh(y)
    tl.store(out_ptr + offsets, r, mask=mask)


EAGER = {
    "div_rn": torch.div,
    "fmod": torch.fmod,
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "log": lambda x, y: torch.log(x),
    "rsqrt": lambda x, y: torch.rsqrt(x),
    "exp": lambda x, y: torch.exp(x),
    "sqrt": lambda x, y: torch.sqrt(x),
    "floor": lambda x, y: torch.floor(x),
    "add_alpha2_tl_fma": lambda x, y: torch.add(x, y, alpha=2),
    "add_alpha2_libdevice_fma": lambda x, y: torch.add(x, y, alpha=2),
}


def run(op: str, x, y, **options):
    out = torch.empty_like(x)
    n = x.numel()
    _binary[(triton.cdiv(n, 1024),)](x, y, out, n, OP=op, BLOCK=1024, **options)
    return out


def mismatches(got: torch.Tensor, want: torch.Tensor) -> int:
    same = (got.view(torch.int32) == want.view(torch.int32)) | (got.isnan() & want.isnan())
    return int((~same).sum())


def main() -> None:
    fields = {f.name for f in dataclasses.fields(CUDAOptions)}
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}")
    print(f"CUDAOptions has enable_reflect_ftz: {'enable_reflect_ftz' in fields}")
    if "enable_reflect_ftz" not in fields:
        return
    tiny = torch.tensor([1e-45, -1e-45, 1e-40, -3e-39, 1.1e-38, 0.0, -0.0, 1.0, -2.5, 3e-39, 3e38, -3e38])
    tiny = torch.cat([tiny, torch.tensor([float("inf"), float("-inf")])])
    x, y = torch.meshgrid(tiny, tiny, indexing="ij")
    x, y = x.reshape(-1).contiguous().cuda(), y.reshape(-1).contiguous().cuda()
    print(f"{'libdevice op':<10}{'default: wrong':>16}{'ftz off: wrong':>16}  of {x.numel()}")
    for op, eager in EAGER.items():
        want = eager(x, y)
        on = mismatches(run(op, x, y), want)
        off = mismatches(run(op, x, y, enable_reflect_ftz=False), want)
        print(f"{op:<10}{on:>16}{off:>16}")
    big = torch.randn(2**26, device="cuda")
    other = torch.randn(2**26, device="cuda")
    for label, options in [("default", {}), ("ftz off", {"enable_reflect_ftz": False})]:
        ms = triton.testing.do_bench(lambda o=options: run("heavy", big, other, **o), rep=300)
        print(f"heavy chain over 2^26 floats, {label}: {ms:.4f} ms")


if __name__ == "__main__":
    main()
