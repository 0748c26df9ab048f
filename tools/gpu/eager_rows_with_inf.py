"""Eager CUDA against eager CPU on rows holding inf or nan: whether a ledger entry's "eager gives nan" is
eager CUDA's own answer or the fuser's bug. Prints one line per op and dtype."""

import torch

torch.manual_seed(0)
x = torch.randn(4, 5, 6, dtype=torch.float64)
x[1, 2, 3] = float("inf")
x[2, 0, 0] = float("nan")
w = torch.rand(6, dtype=torch.float64) + 0.5

CASES = {
    "rms_norm": lambda t, w: torch.rms_norm(t, (6,), w.to(t.dtype), 1e-6),
    "_fused_rms_norm": lambda t, w: torch.ops.aten._fused_rms_norm(t, [6], w.to(t.dtype), 1e-6)[0],
    "var_mean dim 0": lambda t, w: torch.var_mean(t, dim=0)[0],
    "var_mean dim -1": lambda t, w: torch.var_mean(t, dim=-1)[0],
}
for name, fn in CASES.items():
    for dtype in (torch.float32, torch.float64):
        cpu = fn(x.to(dtype), w)
        cuda = fn(x.to(dtype).cuda(), w.cuda()).cpu()
        same = (cpu == cuda) | (cpu.isnan() & cuda.isnan()) | (cpu - cuda).abs().le(1e-5 * cpu.abs() + 1e-6)
        where = (~same).nonzero().tolist()[:3]
        print(
            f"{name:18} {dtype!s:14} cpu vs cuda differ at {(~same).sum().item():3} elements; e.g.",
            [(tuple(i), cpu[tuple(i)].item(), cuda[tuple(i)].item()) for i in where],
        )
