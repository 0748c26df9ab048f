"""Which operand eager picks on a tie of +0 and -0 in maximum/minimum (and fmax/fmin, amax/amin), on this
machine's devices, and what the fuser gives: the fuzzer found eager's CPU choice depends on the loop
(vectorized body: the second operand; scalar path, 0-d, tails: the first; docs/fuzz.md).

    FUSER_UNVALIDATED=fuse python tools/probes/signed_zero_minmax.py      # CPU, and CUDA where present

Prints, per op, layout and device, how many result elements are -0.0 when the first operand is -0.0 and
the second +0.0 (all -0: eager took the first), under eager and under the fuser, and whether the signs agree.
"""

from __future__ import annotations

import torch

import fuser  # noqa: F401  (registers backend="fuser")

OPS = {"maximum": torch.maximum, "minimum": torch.minimum, "fmax": torch.fmax, "fmin": torch.fmin}


def layouts(device: str) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """(first operand all -0.0, second all +0.0) in each layout."""
    shapes = {
        "contiguous 4099": ((4099,), (4099,)),
        "0-d": ((), ()),
        "broadcast (7,1)x(1,5)": ((7, 1), (1, 5)),
    }
    pairs = {
        label: (torch.full(a, -0.0, device=device), torch.zeros(b, device=device))
        for label, (a, b) in shapes.items()
    }
    pairs["transposed 33x65"] = (
        torch.full((65, 33), -0.0, device=device).t(),
        torch.zeros(33, 65, device=device),
    )
    return pairs


def picks(result: torch.Tensor) -> str:
    negative, total = int(torch.signbit(result).sum()), result.numel()
    return {total: "all -0", 0: "all +0"}.get(negative, f"{negative}/{total} -0")


def row(device: str, name: str, label: str, eager: torch.Tensor, fused: torch.Tensor) -> str:
    same = bool(torch.equal(torch.signbit(eager), torch.signbit(fused)))
    return (
        f"{device:5} {name:8} {label:24} eager {picks(eager):14} fuser {picks(fused):14} same signs: {same}"
    )


def compiled(fn):
    torch._dynamo.reset()  # one compile per probe: no recompile limit, no cache across layouts
    return torch.compile(fn, backend="fuser", dynamic=False)


def main() -> None:
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        for name, op in OPS.items():
            for label, (a, b) in layouts(device).items():
                fused = compiled(lambda a, b, op=op: op(a, b) * 1.0)(a, b)
                print(row(device, name, label, op(a, b), fused))
        for name in ("amax", "amin"):
            x = torch.tensor([-0.0, 0.0, -0.0, 0.0] * 257, device=device).reshape(4, 257)
            fused = compiled(lambda t, n=name: getattr(torch, n)(t, dim=0) * 1.0)(x)
            print(row(device, name, "columns of mixed ±0", getattr(torch, name)(x, dim=0), fused))


if __name__ == "__main__":
    main()
