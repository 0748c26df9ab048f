"""Fuzz repro b90f1657c352: a program on which backend 'fuser' (cpu) and eager differ.

Found by `python -m conformance.fuzz` (profile ci, seed 2929937905, --op aten.xlogy.Scalar_Other,aten.xlogy.Tensor,aten.abs.default,aten.addcmul.default); shrunk by hypothesis to 2 op(s).

What the fuzzer saw:
    outputs: result[0]: 1 of 3 elements beyond rtol=1.3e-06, atol=1e-05 (no float64 reference); at [2]: compiled -0.08964284509420395, eager 0.38468706607818604
    inputs after the call: result[2]: 1 of 3 elements beyond rtol=1.3e-06, atol=1e-05 (no float64 reference); at [2]: compiled -0.08964284509420395, eager 0.38468706607818604

Run: python repro_b90f1657c352.py    (needs torch and the backend; exits 1 while the two differ)
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
K = 2.0  # conformance.harness.policy.K: as far from float64 as eager, times K
BACKWARD = False  # also compare the gradients of every floating input
SEED = 10  # of the gradients flowing into the outputs


def program(v0, v1, v2, v3):
    v4 = torch.ops.aten.xlogy_.Tensor(v2, v2[1::2])
    return (v4,)


# The inputs, exactly as the fuzzer made them:
#   v0: float32[3] (contiguous)
#   v1: float32[3] (contiguous)
#   v2: float32[3] strides (2,) (noncontiguous)
#   v3: float32[3] (contiguous)
INPUTS = (
    "eNqllk1oE0EUxyebj6Zrm3740Q+1tnqJWNPNpt1klX6wyILswZgiBFHDNlm7i9uks5lWtGilJdB61aN4ES8FPfSg4KEWPBQUD0UU"
    "hOLFk6cevOhJZ7JpurshTY0Dy4Mwv/f/78x7bxOX3B4A/H5QsVpBO5CNtKrNKgMZGcmh6Vu6KATAVdt6QF2HIJhGObwzlJpBmp6n"
    "U4YyMaPpmRRSsvmckZplaegKBpMNOGse75QnFUiZCC3qORmNmz/S0J104T0M9CTdOKanZ6BXciPouywByV2ADZKrAP3L6XRO15U0"
    "0nLZPH3JyCiGkrmgpRENG08nII3ggQRsUrGiSqlmxjBsVouZAqVMLSRT67JKgDYE2xPwoA1g4SEM+BA8XAKOSFQBdphAJ4JdCdht"
    "AyLwqKlwrAQcJwo9JnACwd4E7FNCcanB/3Jh42cII+SJVz39DtBcPv3QzZwxJaPUrGLk8TuLQuPuJYRJytfbW4vEBHmqp+wG0d2U"
    "pXtIybo2mZ1SskgUIo6r3dfiBomB0dvwB4UlqD0NtIHRsoGJO0jJkasThfP16O4sXUNIV4iHwvD3Lh9W8e3pIQBGbFU9wIjCuf8w"
    "0OdS1r8tzY2dXAiNERfjG9urTVinqYaLmN1FWBQG63LxxlDXH51h3n6Yf7ZG9N+t/Hlchz5br/6pJW4MgPV5cO/5KIkrL1bXSCRe"
    "3n9eeNWJ1TpreOm3e4mIQnDfXlaf8MO/v46svV7yFM+/9+ONi7Xfv8XSCuWuqqv+IzRR3Xw6eaV2/fcAdrcBi6+aVwwNd+Bdmcyy"
    "lJYRhdA/mggz0WiMY6MsH+X52NBgmGOHGI7lOY5n+HB0iI3GmCjH8MRl8uEnPoh9BIsuXcRs2ad1KrVWOHd+B5y0dQB12Mj7LlBt"
    "jjmTWIdIty3JpjVJxeRy5rEOgjZbngQFKgeQE7d2cMCGf6GAY3Y4WWv32dlrbgcbdrLWbrGzW06WdbLWqrezqsfBRpystXZb7LoW"
    "tsqdWUuqx37WXlCj2OOSz9e/0xrus2WSdsRFyoy/vGbEHPknAeZKHsyvntdnMnRxv7n3L5zO+Xs="
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


PROGRAM_SOURCE = (
    "def program(v0, v1, v2, v3):\n    v4 = torch.ops.aten.xlogy_.Tensor(v2, v2[1::2])\n    return (v4,)\n"
)
REFERENCE_SOURCE = (
    "def program(v0, v1, v2, v3):\n    v4 = torch.ops.aten.xlogy_.Tensor(v2, v2[1::2])\n    return (v4,)\n"
)

if __name__ == "__main__":
    main()
