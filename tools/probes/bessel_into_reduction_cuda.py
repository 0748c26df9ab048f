"""Why i0 and special_i1 fail their `into_reduction` backward on CUDA (sm_90 validation, 2026-11-27:
compiled -inf or 0.0 where eager and the float64 reference give nan) while the CPU validates them.
Each row of x is reduced by amax after the op, as the conformance context does; prints, for every element
whose gradient's nan/inf differs between eager and the fuser, the input and each intermediate.
  python tools/probes/bessel_into_reduction_cuda.py [cuda|cpu]
"""

import math
import sys

import torch

from fuser.capture.backend import fuser_backend

DEVICE = sys.argv[1] if len(sys.argv) > 1 else "cuda"
MAGNITUDES = [
    0.0,
    1e-3,
    0.5,
    1,
    3,
    8,
    11.5,
    12,
    12.5,
    13,
    20,
    50,
    85,
    88,
    89,
    90,
    100,
    700,
    713,
    714,
    1e4,
    math.inf,
]
ROWS = [[s * m for m in MAGNITUDES] for s in (1, -1)] + [MAGNITUDES[:11] * 2, [math.nan, *MAGNITUDES[1:]]]
OPS = {"i0": torch.i0, "special_i1": torch.special.i1}


def gradient(fn, x):
    x = x.detach().clone().requires_grad_()
    y = fn(x)
    (g,) = torch.autograd.grad(y.sum(), x)
    return y.detach(), g


def differs(a, b):
    return (a.isnan() != b.isnan()) | (a.isinf() != b.isinf()) | (a.isinf() & b.isinf() & (a != b))


for name, op in OPS.items():
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        x = torch.tensor(ROWS, dtype=torch.float64).to(dtype).to(DEVICE)
        fn = lambda t, op=op: torch.amax(op(t), -1)  # noqa: E731
        try:
            ye, ge = gradient(fn, x)
        except (NotImplementedError, RuntimeError) as error:
            print(f"\n{name} {dtype}: eager raises {str(error).splitlines()[0]}")
            continue
        torch._dynamo.reset()
        yc, gc = gradient(torch.compile(fn, backend=fuser_backend, dynamic=False), x)
        fwd = op(x)
        fwd_c = torch.compile(op, backend=fuser_backend, dynamic=False)(x)
        i1 = torch.special.i1(x)
        bad = differs(ge.float(), gc.float()).nonzero().tolist()
        bad_fwd = differs(fwd.float(), fwd_c.float()).nonzero().tolist()
        print(
            f"\n{name} {dtype}: {len(bad)} gradient elements differ in nan/inf; forward alone {len(bad_fwd)}; "
            f"amax eager {ye.tolist()} compiled {yc.tolist()}"
        )
        for r, c in bad[:12] + [b for b in bad_fwd[:6] if b not in bad[:12]]:
            print(
                f"  [{r},{c}] x={x[r, c].item():g} op eager={fwd[r, c].item():g} op compiled={fwd_c[r, c].item():g}"
                f" i1 eager={i1[r, c].item():g} grad eager={ge[r, c].item():g} grad compiled={gc[r, c].item():g}"
            )
        torch._dynamo.reset()
