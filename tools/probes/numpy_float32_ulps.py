"""Where NumPy's float32 math functions (what Triton's interpreter would compute with) are further from
float64 than eager's CPU kernels: the count of such values among 400,001 of each function's domain.
Why the fuser's interpreter computes float32 transcendentals in float64 (docs/fuzz.md, session 26).

    python tools/probes/numpy_float32_ulps.py
"""

import numpy as np
import torch

N = 400_001
WIDE = torch.linspace(-20, 20, N)
POSITIVE = torch.linspace(1e-3, 50, N)
UNIT = torch.linspace(-0.999, 0.999, N)
UNARY = {
    "exp2": (np.exp2, torch.exp2, WIDE),
    "expm1": (np.expm1, torch.expm1, WIDE),
    "log": (np.log, torch.log, POSITIVE),
    "log2": (np.log2, torch.log2, POSITIVE),
    "log10": (np.log10, torch.log10, POSITIVE),
    "log1p": (np.log1p, torch.log1p, POSITIVE),
    "sin": (np.sin, torch.sin, WIDE),
    "cos": (np.cos, torch.cos, WIDE),
    "tan": (np.tan, torch.tan, WIDE),
    "sinh": (np.sinh, torch.sinh, WIDE),
    "cosh": (np.cosh, torch.cosh, WIDE),
    "tanh": (np.tanh, torch.tanh, WIDE),
    "asin": (np.arcsin, torch.asin, UNIT),
    "acos": (np.arccos, torch.acos, UNIT),
    "atanh": (np.arctanh, torch.atanh, UNIT),
    "asinh": (np.arcsinh, torch.asinh, WIDE),
    "acosh": (np.arccosh, torch.acosh, POSITIVE + 1),
    "sqrt": (np.sqrt, torch.sqrt, POSITIVE),
}
BINARY = {
    "atan2": (np.arctan2, torch.atan2),
    "hypot": (np.hypot, torch.hypot),
    "pow": (np.power, torch.pow),
    "fmod": (np.fmod, torch.fmod),
}


def further(numpy_result: np.ndarray, eager: torch.Tensor, exact: torch.Tensor) -> int:
    got = torch.from_numpy(numpy_result).double()
    return int((((got - exact).abs() > (eager.double() - exact).abs()) & exact.isfinite()).sum())


def main() -> None:
    for name, (numpy_fn, torch_fn, x) in UNARY.items():
        with np.errstate(all="ignore"):
            count = further(numpy_fn(x.numpy()), torch_fn(x), torch_fn(x.double()))
        print(f"{name:6s} {count:7d} of {N}")
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(N, generator=generator) * 10, torch.randn(N, generator=generator) * 10
    for name, (numpy_fn, torch_fn) in BINARY.items():
        x = a.abs() if name == "pow" else a
        with np.errstate(all="ignore"):
            count = further(numpy_fn(x.numpy(), b.numpy()), torch_fn(x, b), torch_fn(x.double(), b.double()))
        print(f"{name:6s} {count:7d} of {N}")


if __name__ == "__main__":
    main()
