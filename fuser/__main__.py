"""`python -m fuser demo`: compile a few programs with the fuser, check them against eager, show a kernel.

It runs on the CPU (Triton's interpreter) unless `--device cuda` is given.
"""

from __future__ import annotations

import argparse

import torch

import fuser


def gelu_bias(x, bias):
    return torch.nn.functional.gelu(x + bias, approximate="tanh")


def masked_scale(x, mask, scale):
    return torch.where(mask, x * scale, 0.0).to(torch.bfloat16)


def mlp_tail(x, w):
    return torch.relu(torch.sigmoid(x) * 2.0 - 1.0) @ w + 1.0


def demo(device: str) -> int:
    programs = {
        "gelu(x + bias)": (gelu_bias, (torch.randn(1823, 781), torch.randn(781))),
        "where(mask, x * s, 0).bf16": (
            masked_scale,
            (torch.randn(97, 33).t(), torch.rand(33, 97) > 0.5, torch.tensor(3.0)),
        ),
        "relu(sigmoid(x)*2-1) @ w + 1": (mlp_tail, (torch.randn(64, 48), torch.randn(48, 16))),
    }
    # The demo shows the fuser's kernels, so it fuses ops whether or not this arch's validation manifest
    # enables them yet (docs/validation.md), on purpose.
    options = {"unvalidated": "fuse"}
    print("(unvalidated ops are fused on purpose here: options={'unvalidated': 'fuse'})")
    failures = 0
    for title, (program, args) in programs.items():
        args = [a.to(device) for a in args]
        report = fuser.explain(program, *args, fuser_options=options)
        expected = program(*args)
        ok = torch.allclose(report.result.float(), expected.float(), atol=1e-2, rtol=1e-2)
        failures += not ok
        print(
            f"{title:<32} {report.num_kernels} kernel(s), {len(report.eager_calls)} eager call(s): {'ok' if ok else 'MISMATCH'}"
        )
    print("\nThe kernel for gelu(x + bias):\n")
    args = [a.to(device) for a in programs["gelu(x + bias)"][1]]
    print(fuser.explain(gelu_bias, *args, fuser_options=options).sources[0])
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m fuser", description=__doc__)
    parser.add_argument("command", choices=["demo"])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    raise SystemExit(1 if demo(args.device) else 0)


if __name__ == "__main__":
    main()
