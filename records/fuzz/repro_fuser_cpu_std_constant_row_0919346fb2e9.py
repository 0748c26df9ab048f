"""Fuzz repro 0919346fb2e9: a program on which backend 'fuser' (cpu) and eager differ.

Found by `python -m conformance.fuzz` (profile ci); shrunk by hypothesis to 3 op(s).

What the fuzzer saw:
    gradients: result[0]: 1 of 3 elements beyond rtol=1.3e-06, atol=1e-05, and further from float64 than eager is: max error 2.67 > 2 x eager's 0 + atol; at [0, 2]: compiled 2.6684610843658447, eager 0.0, float64 reference 0.0

Run: python repro_0919346fb2e9.py    (needs torch and the backend; exits 1 while the two differ)
"""

import base64
import io
import sys
import zlib
from math import inf, nan

import torch

BACKEND = "fuser"
DEVICE = "cpu"
RTOL, ATOL = (1.3e-06, 1e-05)
BACKWARD = True  # also compare the gradients of every floating input
SEED = 0  # of the gradients flowing into the outputs


def program(v0):
    v1 = torch.ops.aten.std.correction(v0.permute(1, 0).expand(3, 3), dim=[-1], keepdim=False)
    return (v1,)


# The inputs, exactly as the fuzzer made them:
#   v0: float32[1, 3] (contiguous)
INPUTS = (
    "eNqlVL9v00AUPtuNE0yUtixVK9GxSiVw7fxw0iIosiovHkiDQFElZLnOkVq4cc++hMICEmolZlZU8V8wMMDWgQG1czcmlnZl5C6m"
    "7tlVXFGeZJ1sv+9937v73rVMYQKAQgFciilwC9iBs+UO4VLXxra888Iz9BLYSMRb/hkCDvZJomwNsOuFkhXAzYHrdS0M+6EfWMOK"
    "hLhyuZMnRUOSafcg4iOIZHi+jR9HHyUkdDiSo6CJjkBWZ2eAcqaAkbhuApMzhX2UNwWT20eF947jex50sOv3Q+lR0IUB7K65DpbQ"
    "jcU2kjC62UZFW26Z+cLx2qfvB6QcfVpju50Bt+Nu5ed+sG1jawiDkBAY+myqaSZUSvH57OQdVc5lUsyBxgXF342wbM/t9bdhHxt6"
    "dTzL+NBqVMDqS/SLJxR8poBpsBoL2HyFoU/3zdDvXYf3PDwXYw9SDXv3f86KhEXM1FACDxKuWlIMfeU/BOydfXi4u2F/PV08+kZV"
    "vPmysFUkPMVMFZPMUcSnfK39r0qU9eig9+Tq/Z8HlQsDjJoPYeASB7y2qZEtt2vo8j+KUOuNSlNdXq6rarNe02pVpaIpWr2iNqtq"
    "QyNfG021plQVqvKQ+7hQJjrKI5UcFRvrZKdk6pLy9D2QRrMDMJNAnjLo1Fyli7AmnksUWedAxuSk67BGnE7UOWbqxAOQhrMOKiXg"
    "T3mQ8m4ay/pgMoE9YbBj+mePZz4BbgvgCuO0TFG8c24z4W6MzKfWH1y0/haileBGvw5z0Xt0g+XECJMf5Ue5fwBHgF09"
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
        if both.any() and (a64 - r64).abs()[both].max() <= 2 * (e64 - r64).abs()[both].max() + ATOL:
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


PROGRAM_SOURCE = "def program(v0):\n    v1 = torch.ops.aten.std.correction(v0.permute(1, 0).expand(3, 3), dim=[-1], keepdim=False)\n    return (v1,)\n"
REFERENCE_SOURCE = "def program(v0):\n    v1 = torch.ops.aten.std.correction(v0.permute(1, 0).expand(3, 3), dim=[-1], keepdim=False)\n    return (v1,)\n"

if __name__ == "__main__":
    main()
