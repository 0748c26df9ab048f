"""Which binary ops' CPU kernels take a 0-dim float32 second operand of a half tensor at its own value (a
"CPU scalar", `iter.original_scalar_value`) rather than rounded to the half dtype first, as every other
path does: the fuser mirrors the answer in `fuser.lower.ops.CPU_SCALAR_OTHER` (docs/fuzz.md, sessions 36-37).

    python tools/probes/cpu_scalar_other.py

For each op and both half dtypes, 3,000 random half values against 65 0-dim float32 values (random, and
1e5, 1e-6 and 3.4e38, which the half dtypes cannot hold, and 0.1 and 1/3): prints "own value" where eager's
answer differs from the one with the operand rounded first, "rounds it" where it never does.
"""

from __future__ import annotations

import torch

A = torch.ops.aten
OPS = {
    "add": A.add.Tensor,
    "sub": A.sub.Tensor,
    "rsub": A.rsub.Tensor,
    "mul": A.mul.Tensor,
    "div": A.div.Tensor,
    "div trunc": lambda x, y: A.div.Tensor_mode(x, y, rounding_mode="trunc"),
    "div floor": lambda x, y: A.div.Tensor_mode(x, y, rounding_mode="floor"),
    "floor_divide": A.floor_divide.default,
    "atan2": A.atan2.default,
    "pow": A.pow.Tensor_Tensor,
    "fmod": A.fmod.Tensor,
    "remainder": A.remainder.Tensor,
    "maximum": A.maximum.default,
    "minimum": A.minimum.default,
    "fmax": A.fmax.default,
    "fmin": A.fmin.default,
    "copysign": A.copysign.Tensor,
    "hypot": A.hypot.default,
    "nextafter": A.nextafter.default,
    "xlogy": A.xlogy.Tensor,
    "logaddexp": A.logaddexp.default,
    "logaddexp2": A.logaddexp2.default,
    "eq": A.eq.Tensor,
    "lt": A.lt.Tensor,
    "where (other)": lambda x, y: A.where.self(x > 0, x, y),
    "lerp (weight)": lambda x, y: A.lerp.Tensor(x, x * 2, y),
    "clamp (min)": lambda x, y: A.clamp.Tensor(x, y, None),
    "addcmul (tensor2)": lambda x, y: A.addcmul.default(x, x, y),
    "addcdiv (tensor2)": lambda x, y: A.addcdiv.default(x, x, y),
    "sigmoid_backward": A.sigmoid_backward.default,
    "tanh_backward": A.tanh_backward.default,
    "mul (first operand)": lambda x, y: A.mul.Tensor(y, x),
    "div (first operand)": lambda x, y: A.div.Tensor(y, x),
}


def verdict(op, generator: torch.Generator) -> str:
    found = set()
    for dtype in (torch.bfloat16, torch.float16):
        x = (torch.randn(3000, generator=generator) * 4).to(dtype)
        values = [*(torch.randn(60, generator=generator) * 3).tolist(), 1e5, 1e-6, 3.4e38, 0.1, 1 / 3]
        for value in values:
            y = torch.tensor(value, dtype=torch.float32)
            own, rounded = op(x, y), op(x, y.to(dtype))
            if not torch.equal(own.nan_to_num(7), rounded.nan_to_num(7)):
                found.add(str(dtype).removeprefix("torch."))
    return f"own value ({', '.join(sorted(found))})" if found else "rounds it"


def main() -> None:
    generator = torch.Generator().manual_seed(0)
    print(f"torch {torch.__version__}, CPU")
    for name, op in OPS.items():
        print(f"{name:20s} {verdict(op, generator)}")


if __name__ == "__main__":
    main()
