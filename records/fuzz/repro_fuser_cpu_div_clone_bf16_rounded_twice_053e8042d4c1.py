"""Fuzz repro 053e8042d4c1: a program on which backend 'fuser' (cpu) and eager differ.

Found by `python -m conformance.fuzz` (profile ci, seed 2692439279, --op aten.clone.default,aten.div.Scalar); shrunk by hypothesis to 3 op(s).

What the fuzzer saw:
    outputs: result[0]: 1 of 1 elements beyond rtol=0.016, atol=1e-05, and further from float64 than eager is: max error 0.00261 > 2 x eager's 0 + atol, and than rounding in the working dtype can move it; at []: compiled -0.0026092529296875, eager 0.0, float64 reference 0.0

Run: python repro_053e8042d4c1.py    (needs torch and the backend; exits 1 while the two differ)
"""

import base64
import io
import sys
import zlib
from math import inf, nan

import torch

BACKEND = "fuser"
DEVICE = "cpu"
RTOL, ATOL = (0.016, 1e-05)
K = 2.0  # conformance.policy.K: as far from float64 as eager, times K
BACKWARD = False  # also compare the gradients of every floating input
SEED = 0  # of the gradients flowing into the outputs


def program(v0):
    v1 = torch.ops.aten.div.Scalar(v0, 3)
    v2 = torch.ops.aten.clone.default(v1)
    v3 = torch.ops.aten.sub.Tensor(v2, v1)
    return (v3,)


# The inputs, exactly as the fuzzer made them:
#   v0: bfloat16[] (contiguous)
INPUTS = (
    "eNqlVL9v00AUPtuNEzwkbZeKCjp0QI4Ern/ETgIqBQt58UAaBIoiIcu1j2Dhxj37EgQTEmJgY4CVf4M/gRHBChtiYGJl5C6mru3Q"
    "BOiTrNPZ73vf987fu57NrQBQq4G5WAXrwI29h8EU7vgudqWjR6Fl1sGwEM/Y+wh4OCKJkjPBQZgITgwPJkHoOxiOkyh2pqqAGFEc"
    "VEnRhGS6I4jYFCKYVhi5WDHupO8FxA0YkiajlQFHVu9ogio2gxG/b4Nm86XnRWEIPRxE40S4Hfswhv6twMMCqjb7qIbRuT4SXKln"
    "V2vNht55Q0rQp3dqkxvgUtak9CCKD13sTGGcEALL3C71+qdQKNe7H1+eU9nMQq5N0D7h+n0QjhsGo/EhHGPL1P6Cbi6MFhWw9xh9"
    "ZwkFu1DAGtjLBBw8wTCiB2iZ1/6H9zjCAOMQUg0vdr+e5wkLv1BDHVwvuGpHtsyrZxDw+gblRhfE7eX9N8DNjDv7ybtn6X441ATK"
    "//Ht6O5y/i2gnhhg1nwC44A44KlLHe0EvmVK/yhH0dtqR+l2dUXp6C2jpcmqIWtd2VB1va10ZFVrk62qUZWfX7EXRaJDnKlkqNhM"
    "Z35cVueUl++BMjo/ABsF5LccujRg5SJ5E28WiuwzYMHklOvkjbhWqPMpVycbgDI876V6AX6PBSXvlrF5HzSK1DnsKf3nf89WAdzn"
    "wBLj9Gyev3xsM+5KhqyW1g9Muv7k0pXgZp/eV9J9eoNV+BRTneWnub8AgJpV0Q=="
)


def inputs(widen=False):
    made = torch.load(io.BytesIO(zlib.decompress(base64.b64decode("".join(INPUTS)))))
    made = [t.to(DEVICE) for t in made]
    if widen:
        made = [t.double() if t.is_floating_point() else t for t in made]
    if BACKWARD:
        made = [t.detach().requires_grad_() if t.is_floating_point() else t for t in made]
    return made


def run(function, widen=False):
    if widen:  # the float64 reference: the program's casts to a floating dtype go on in float64
        namespace = {"torch": torch, "inf": inf, "nan": nan}
        exec(REFERENCE_SOURCE, namespace)
        function = namespace["program"]
    args = inputs(widen)
    outputs = list(function(*args))
    results = outputs + args
    if BACKWARD:
        floating = [o for o in outputs if o.is_floating_point() and o.requires_grad]
        generator = torch.Generator().manual_seed(SEED)
        seeds = [torch.randn(o.shape, generator=generator, dtype=torch.float64).to(o.dtype) for o in floating]
        leaves = [a for a in args if a.requires_grad]
        grads = torch.autograd.grad(
            floating, leaves, [s.to(o) for s, o in zip(seeds, floating, strict=True)], allow_unused=True
        )
        results += list(grads)
    return results


def classes(x):
    return torch.where(x.isnan(), 1, torch.where(x == inf, 2, torch.where(x == -inf, 3, 0)))


def differ(a, e, r):
    """The oracle's rules (conformance/oracle.py), compactly: '' where `a` is eager's answer."""
    if a is None or e is None:
        return "" if a is None and e is None else "one side has no value"
    if a.shape != e.shape or a.dtype != e.dtype:
        return f"shape/dtype {list(a.shape)} {a.dtype}, eager's {list(e.shape)} {e.dtype}"
    a, e = a.detach().cpu(), e.detach().cpu()
    if not e.is_floating_point():
        wrong = a != e
        return f"{int(wrong.sum())} of {a.numel()} differ" if wrong.any() else ""
    a64, e64 = a.double(), e.double()
    r64 = r.detach().cpu().double() if r is not None and r.shape == a.shape else None
    odd = classes(a64) != classes(e64)
    if odd.any() and (r64 is None or (odd & (classes(a64) != classes(r64.to(a.dtype).double()))).any()):
        return f"nan/inf at {int(odd.sum())} of {a.numel()} elements differ from eager's"
    finite = (classes(a64) == 0) & (classes(e64) == 0)
    far = finite & ((a64 - e64).abs() > ATOL + RTOL * e64.abs())
    if not far.any():
        return ""
    if r64 is not None:
        both = finite & r64.isfinite()
        if both.any() and (a64 - r64).abs()[both].max() <= K * (e64 - r64).abs()[both].max() + ATOL:
            return ""
    worst = int(torch.where(far, (a64 - e64).abs(), -1.0).reshape(-1).argmax())
    return (
        f"{int(far.sum())} of {a.numel()} elements beyond tolerance; at flat index {worst}: "
        f"{BACKEND} {a.reshape(-1)[worst].item()!r}, eager {e.reshape(-1)[worst].item()!r}"
    )


def main():
    print(PROGRAM_SOURCE)
    expected = run(program)
    try:
        reference = run(program, widen=True)
    except Exception:
        reference = [None] * len(expected)
    try:
        actual = run(torch.compile(program, backend=BACKEND, dynamic=False))
    except Exception as error:  # the fuzzer's "the compiled program raised ..."
        print(f"the compiled program raised {type(error).__name__}: {str(error)[:2000]}")
        sys.exit(1)
    problems = [
        f"result {i}: {message}"
        for i, (a, e, r) in enumerate(zip(actual, expected, reference, strict=True))
        if (message := differ(a, e, r))
    ]
    print("\n".join(problems) or "no difference: eager and the backend agree (fixed?)")
    sys.exit(1 if problems else 0)


PROGRAM_SOURCE = "def program(v0):\n    v1 = torch.ops.aten.div.Scalar(v0, 3)\n    v2 = torch.ops.aten.clone.default(v1)\n    v3 = torch.ops.aten.sub.Tensor(v2, v1)\n    return (v3,)\n"
REFERENCE_SOURCE = "def program(v0):\n    v1 = torch.ops.aten.div.Scalar(v0, 3)\n    v2 = torch.ops.aten.clone.default(v1)\n    v3 = torch.ops.aten.sub.Tensor(v2, v1)\n    return (v3,)\n"

if __name__ == "__main__":
    main()
