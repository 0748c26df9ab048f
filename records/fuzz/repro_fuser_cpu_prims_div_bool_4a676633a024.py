"""Fuzz repro 4a676633a024: a program on which backend 'fuser' (cpu) and eager differ.

Found by `python -m conformance.fuzz` (profile ci, seed 4228590379, --op prims.div.default); shrunk by hypothesis to 2 op(s).

What the fuzzer saw:
    outputs: result[0]: nan/inf at 1 of 1 elements differ from eager's and the float64 reference's; at []: compiled 4.622988224029541, eager nan, float64 reference nan

Run: python repro_4a676633a024.py    (needs torch and the backend; exits 1 while the two differ)
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
K = 2.0  # conformance.policy.K: as far from float64 as eager, times K
BACKWARD = False  # also compare the gradients of every floating input
SEED = 0  # of the gradients flowing into the outputs


def program(v0, v1, v2):
    v3 = torch.ops.prims.div.default(v2, v1)
    v4 = torch.ops.aten.add.Tensor(v0, v3)
    return (v4,)


# The inputs, exactly as the fuzzer made them:
#   v0: float32[] (contiguous)
#   v1: bool[] (contiguous)
#   v2: bool[] (contiguous)
INPUTS = (
    "eNqtVbtv00AYvzhvA3kUUEWHzokEqeM4Lx5NZZBBykAaQIqQkOU618TCjXvOJTymSqgDAxMSIzP/ARIL4g9gSAcmNiamjDByF1PX"
    "vtCEEE6yTrG+38N3v+9Lox4MARCLgamVAitAs/WuMYQbbQ1ruf3HpiInwEPfOuAeIZDRsUUqc+oAG2afV224MzDMtophr2/Z6lDk"
    "USCTaUUJa59Uah2IOAfCK6al4XvOSx4FWwFSI6BQK0h2fX+AwvUARpHtOshmX+q6ZZpQx4bV6/N37Ta0YfuWoWMeRbNNFMMo3kR8"
    "lyh1j9llyzJd8jMT8jw6252QnnNIuxSbwCjZRCkH23UKRZR2Clc8hecxutBEF2GuUY/GuIPc7k9SSZ/Gqee4Cm6655jbtew9DatD"
    "aPfJVyhyjTnOhVeeGnk//vqCWg7MNLIGyidGft+DqplGp7cHe1iRC//ipSRRA7Un6DtHJLiZBtKg5hrYeYahRa9Qka8tcwamgbEJ"
    "qYfDG98uRYhKZKaHBNj0pXpDUOSrSxg4HL/eouqf3nweEEkQmqO+5VfPK/L1pSIAqPirMXc0//4TniBOxMX/kL8F9JNAdvXdBthc"
    "0kCBpwZGbzsP5udvHYgnDTA5gT60DdIBzzU6U1Sjrci5Bf0IFakqVSoVqVwtFQWpUi4UBaFYqpakAnkpSPmKVMqXiyJ1+YP78C5D"
    "fGQmLgPUrOvTO0tSU87ZOcyivQNg1Ye8EwCnTR+WxNvEaz6SkZdkanKwPN5GTPt4mhyYHgAs3NtJCR/8CweY3mWx3iD6sfeDDDb/"
    "99gRixVZrDd/SR92OwTY0LNgbyzWfeAjD/jPgW3UI5HLx/EOXnGRcWa/zTn707CzExz9NwYfo85vp3PDEQcTn9Q7tb8AOYjQYA=="
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


PROGRAM_SOURCE = "def program(v0, v1, v2):\n    v3 = torch.ops.prims.div.default(v2, v1)\n    v4 = torch.ops.aten.add.Tensor(v0, v3)\n    return (v4,)\n"
REFERENCE_SOURCE = "def program(v0, v1, v2):\n    v3 = torch.ops.prims.div.default(v2, v1)\n    v4 = torch.ops.aten.add.Tensor(v0, v3)\n    return (v4,)\n"

if __name__ == "__main__":
    main()
