"""Fuzz repro 357bfede817b: a program on which backend 'fuser' (cpu) and eager differ.

Found by `python -m conformance.fuzz` (profile dev, seed 120640); shrunk by hypothesis to 4 op(s).

What the fuzzer saw:
    outputs: result[0]: nan/inf at 2 of 2 elements differ from eager's and the float64 reference's; at [0]: compiled nan, eager inf, float64 reference inf
    the second call: outputs: result[0]: nan/inf at 2 of 2 elements differ from eager's and the float64 reference's; at [0]: compiled nan, eager inf, float64 reference inf

Run: python repro_357bfede817b.py    (needs torch and the backend; exits 1 while the two differ)
"""

import base64
import io
import sys
import zlib
from math import inf, nan

import torch

BACKEND = "fuser"
DEVICE = "cpu"
RTOL, ATOL = (0.001, 1e-05)
K = 2.0  # conformance.harness.policy.K: as far from float64 as eager, times K
BACKWARD = False  # also compare the gradients of every floating input
SEED = 1  # of the gradients flowing into the outputs


def program(v0):
    v1 = torch.ops.aten.exp.default(v0)
    v2 = torch.ops.aten._to_copy.default(v1.expand(2), dtype=torch.float16)
    v3 = torch.ops.aten.div.Tensor(v2, v1)
    return (v3,)


# The inputs, exactly as the fuzzer made them:
#   v0: int64[] (contiguous)
INPUTS = (
    "eNoL8GZmYWDg4GDAAAIMQgyJRckZmWWp+imJJYl6Bdk5bk58DFEooIEptpAhuSQfqFAvvrQkM6eYK74oNak0MyclviQ1rzi/KL7M"
    "iKuQUUMjgh1oaDFQZWJ6aiETRAuXT35eejBEjKuQOYIRqMSgkCWCGUgnF5QWsnozlhSyBXozaGp2Jifn5+SkJpdk5ucVc/kXpaQW"
    "paa4ZCaXcBWyawYVcpQUcgYVciXqBXizc9xXcF8zEWgECAfg9KA4gxbcg3pp+UW5iSXxZalFxUAL3JzU0PyJCxiC7Nv+/k4zyOmM"
    "eO2TYjBH2AcNiPjEnMz0vNzUvBI3J2MirUQBZiYgB9iXF75kAlrBhNcBggz2cAckVZak5oMC0c3Jmhx7YSAns6QkJxXkhlbbx5Js"
    "QFvY8LqBj8EOJVXpG7g5WVHgAGGouSAXLHwpNh1kJQdeF/AzWMNdAI9uc3KdYMwFsvnivPRQwuEvx2CESABgzxenFmUCU0BVIihV"
    "x2emuDnpkegQQ1NzIwtDS0tTQ0MLUxMzE2MDIzMDM0OgsKW5uYGZsYmRoaUREIJcubgj+5kG0B0aYFcyghwLdydylhHAcDl6OYCu"
    "GzkDiKPofIikGy2ToRuCnIilUAwJZGTAk3PQzUFOiIIo5lxCMgeeAdC1I6ciPhTtYUwMaGkXXS9yOuBH0XsDSS8O/yNHjxyK5iBm"
    "BgIJJ8CbjU0HlsyYdeE62dHo84wQ+gczLNuwgaWOs0L4kBKMlQ2ihx2sHqIWAFxwWqA="
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
    """The oracle's rules (conformance/harness/oracle.py), compactly: '' where `a` is eager's answer."""
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
    compiled = torch.compile(program, backend=BACKEND, dynamic=False)
    calls = []  # twice, as the fuzzer calls it: a backend may take another path for a later call
    try:
        for _ in range(2):
            calls.append(run(compiled))
    except Exception as error:  # the fuzzer's "the compiled program raised ..."
        which = "the second call: " if calls else ""
        print(f"{which}the compiled program raised {type(error).__name__}: {str(error)[:2000]}")
        sys.exit(1)
    problems = [
        f"{'the second call: ' if call else ''}result {i}: {message}"
        for call, actual in enumerate(calls)
        for i, (a, e, r) in enumerate(zip(actual, expected, reference, strict=True))
        if (message := differ(a, e, r))
    ]
    print("\n".join(problems) or "no difference: eager and the backend agree (fixed?)")
    sys.exit(1 if problems else 0)


PROGRAM_SOURCE = "def program(v0):\n    v1 = torch.ops.aten.exp.default(v0)\n    v2 = torch.ops.aten._to_copy.default(v1.expand(2), dtype=torch.float16)\n    v3 = torch.ops.aten.div.Tensor(v2, v1)\n    return (v3,)\n"
REFERENCE_SOURCE = "def program(v0):\n    v1 = torch.ops.aten.exp.default(v0)\n    v2 = torch.ops.aten._to_copy.default(v1.expand(2), dtype=torch.float16).to(torch.float64)\n    v3 = torch.ops.aten.div.Tensor(v2, v1)\n    return (v3,)\n"

if __name__ == "__main__":
    main()
