"""Write a failing program as `repro_<id>.py`: a script that needs only torch and the backend's name.

It holds the program's source, its inputs (saved by torch with their exact layouts: strides, storage
offsets and the nan-filled gaps), and a compact copy of the oracle's rules (its numbers from conformance.harness.policy), so it prints the program,
runs it under eager, the float64 reference and the backend, and exits 1 with the same complaint while
the bug is there. The id is a hash of the shrunk program: one file per distinct failure.
"""

from __future__ import annotations

import base64
import io
import os
import textwrap
import zlib
from pathlib import Path

import torch

from conformance.fuzz.program import Program
from conformance.harness import policy

TEMPLATE = '''\
"""Fuzz repro {id}: a program on which backend {backend!r} ({device}) and eager differ.

Found by `python -m conformance.fuzz` ({found}); shrunk by hypothesis to {ops} op(s).
{planted}
What the fuzzer saw:
{message}

Run: python {name}    (needs torch and the backend; exits 1 while the two differ)
"""

import base64
import io
import sys
import zlib
from math import inf, nan

import torch

BACKEND = {backend!r}
DEVICE = {device!r}
RTOL, ATOL = {tolerance!r}
K = {k!r}  # conformance.harness.policy.K: as far from float64 as eager, times K
BACKWARD = {backward!r}  # also compare the gradients of every floating input
SEED = {seed!r}  # of the gradients flowing into the outputs

{source}

# The inputs, exactly as the fuzzer made them:
{inputs_comment}
INPUTS = (
{blob}
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
        namespace = {{"torch": torch, "inf": inf, "nan": nan}}
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
        grads = torch.autograd.grad(floating, leaves, [s.to(o) for s, o in zip(seeds, floating, strict=True)], allow_unused=True)
        results += list(grads)
    return results


def classes(x):
    return torch.where(x.isnan(), 1, torch.where(x == inf, 2, torch.where(x == -inf, 3, 0)))


def differ(a, e, r):
    """The oracle's rules (conformance/harness/oracle.py), compactly: '' where `a` is eager's answer."""
    if a is None or e is None:
        return "" if a is None and e is None else "one side has no value"
    if a.shape != e.shape or a.dtype != e.dtype:
        return f"shape/dtype {{list(a.shape)}} {{a.dtype}}, eager's {{list(e.shape)}} {{e.dtype}}"
    a, e = a.detach().cpu(), e.detach().cpu()
    if not e.is_floating_point():
        wrong = a != e
        return f"{{int(wrong.sum())}} of {{a.numel()}} differ" if wrong.any() else ""
    a64, e64 = a.double(), e.double()
    r64 = r.detach().cpu().double() if r is not None and r.shape == a.shape else None
    odd = classes(a64) != classes(e64)
    if odd.any() and (r64 is None or (odd & (classes(a64) != classes(r64.to(a.dtype).double()))).any()):
        return f"nan/inf at {{int(odd.sum())}} of {{a.numel()}} elements differ from eager's"
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
        f"{{int(far.sum())}} of {{a.numel()}} elements beyond tolerance; at flat index {{worst}}: "
        f"{{BACKEND}} {{a.reshape(-1)[worst].item()!r}}, eager {{e.reshape(-1)[worst].item()!r}}"
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
        print(f"{{which}}the compiled program raised {{type(error).__name__}}: {{str(error)[:2000]}}")
        sys.exit(1)
    problems = [
        f"{{'the second call: ' if call else ''}}result {{i}}: {{message}}"
        for call, actual in enumerate(calls)
        for i, (a, e, r) in enumerate(zip(actual, expected, reference, strict=True))
        if (message := differ(a, e, r))
    ]
    print("\\n".join(problems) or "no difference: eager and the backend agree (fixed?)")
    sys.exit(1 if problems else 0)


PROGRAM_SOURCE = {source_literal!r}
REFERENCE_SOURCE = {reference_literal!r}

if __name__ == "__main__":
    main()
'''


def _blob(tensors: list[torch.Tensor]) -> str:
    buffer = io.BytesIO()
    torch.save([t.detach().cpu() for t in tensors], buffer)
    text = base64.b64encode(zlib.compress(buffer.getvalue(), 9)).decode()
    return "\n".join(f'    "{text[i : i + 100]}"' for i in range(0, len(text), 100))


def write_repro(
    program: Program,
    message: str,
    out: Path,
    *,
    backend: str,
    device: str,
    backward: bool,
    tolerance: tuple[float, float] | None,
    found: str,
) -> tuple[Path, bool]:
    """Write the repro unless one for the same shrunk program exists; (its path, whether it is new)."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"repro_{program.key()}.py"
    if path.exists():
        return path, False
    planted = os.environ.get("FUSER_TESTING_MISCOMPILE") or os.environ.get("FUSER_TESTING_WRONG_LOWERING")
    text = TEMPLATE.format(
        id=program.key(),
        name=path.name,
        backend=backend,
        device=device,
        found=found,
        ops=program.op_count,
        planted=(
            f"Found with a planted miscompile: set FUSER_TESTING_MISCOMPILE={planted} to see it fail.\n"
            if planted
            else ""
        ),
        message=textwrap.indent(message.strip(), "    "),
        tolerance=tolerance or (0.0, 0.0),
        k=policy.K,
        backward=backward and program.differentiable,
        seed=program.seed,
        source=program.source().rstrip(),
        source_literal=program.source(),
        reference_literal=program.source(widened=True),
        inputs_comment="\n".join(f"#   {line}" for line in program.describe_inputs()),
        blob=_blob(program.make_inputs()),
    )
    path.write_text(text)
    return path, True
