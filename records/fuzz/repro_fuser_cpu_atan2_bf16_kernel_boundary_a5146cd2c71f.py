"""Fuzz repro a5146cd2c71f: a program on which backend 'fuser' (cpu) and eager differ.

Found by `python -m conformance.fuzz` (profile dev, seed 2611265); shrunk by hypothesis to 2 op(s).

What the fuzzer saw:
    gradients: result[0]: 1 of 1 elements beyond rtol=0.016, atol=1e-05, and further from float64 than eager is: max error 0.00037 > 2 x eager's 0 + atol; at [0]: compiled -0.000370025634765625, eager 0.0, float64 reference 0.0

Run: python repro_a5146cd2c71f.py    (needs torch and the backend; exits 1 while the two differ)
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
BACKWARD = True  # also compare the gradients of every floating input
SEED = 0  # of the gradients flowing into the outputs


def program(v0):
    v1 = torch.ops.aten.atan2.default(v0[::2], v0)
    return (v1,)


# The inputs, exactly as the fuzzer made them:
#   v0: bfloat16[1] (contiguous)
INPUTS = (
    "eNqlVL9v00AUPseNEwxKW5aqEcrAgpFo6h+xm4BKwaq8eCANAkWRkOU6R7Bw4559SQUTEurAiljh3+BPYGBAMLMxMSAmJEbuYuqe"
    "XcUR9En2yfb73ve98/eua/NLAFSr4EysgMvAjbwn/hRuDl3sNg+fBpZZA4NMvCg9QsDDIUlsOhPsB7HoRHB/4gdDB8NxHEbOVBUR"
    "J0n9Cikak0x3BFEpgYimFYQuVoz7yXsR8X2OpMloqc+T1TucoLLNYSTs2cDmjlGF3qqvPC8MAuhhPxzH4r1oCCM43PU9LKIL13tI"
    "xOhiD11ym127UoWvN3bfklL06s5tdg000mabj8PowMXOFEYxIbDMeq5nNhTK8f7n15dUNlfIUQdbpxx/N8JxA380PoBjbJlaAc3c"
    "MFpUwM4R+l4iFKVCAatgJxWw/wzDkG6cZd76H96TCHyMA0g1HG9/WxcIi1CooQZuZ1y1KVvmzXMIeHOHcqMr0tXF/S+Duyl3+nO3"
    "z9P9YKCJlP/zu9GDxfwNoJ4aYNZ8DCOfOOC5S53s+EPLbP6jHEXfUttKp6MrSltvGS1NVg25paiarsuqYhiK2u4YmmpQlb+ufeQl"
    "okOaqeSo2FQnOyYrZ5Tnz4E8mh2AtQzyB4PODVa+CGvieqbIHgcKJidfhzXiaqbOF6ZOOgB5OOulWgb+sARy3s1jWR8sZ6kZ7Jz+"
    "2d/TyIB7PFhgnK4tCDdObMZvpMhKbv3EJetvPlkJbvbpQzl5Tk6wspBgKrP8JPcP5P1XpQ=="
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


PROGRAM_SOURCE = "def program(v0):\n    v1 = torch.ops.aten.atan2.default(v0[::2], v0)\n    return (v1,)\n"
REFERENCE_SOURCE = "def program(v0):\n    v1 = torch.ops.aten.atan2.default(v0[::2], v0)\n    return (v1,)\n"

if __name__ == "__main__":
    main()
