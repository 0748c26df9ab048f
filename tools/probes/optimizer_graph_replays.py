"""Whether a compiled SGD-momentum / AdamW step over 200 CUDA tensors replays the fuser's CUDA graph,
and its ms per step (host-bound for SGD): `python tools/probes/optimizer_graph_replays.py [sgd|adamw]`."""

import os
import sys
import time

import torch

os.environ.setdefault("FUSER_UNVALIDATED", "fuse")
import fuser

torch.manual_seed(0)
params = [torch.randn(1000 + 3000 * i, device="cuda", requires_grad=True) for i in range(200)]
for p in params:
    p.grad = torch.randn_like(p)
CHOSEN = sys.argv[1:] or ["sgd", "adamw"]
for name, make in [
    ("sgd", lambda: torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=True)),
    (
        "adamw",
        lambda: torch.optim.AdamW(
            params, lr=torch.tensor(1e-3, device="cuda"), weight_decay=0.01, foreach=True, capturable=True
        ),
    ),
]:
    if name not in CHOSEN:
        continue
    opt = make()
    opt.step()
    torch._dynamo.reset()
    fuser.reset_counters()
    step = torch.compile(opt.step, backend="fuser", options={"horizontal": True})
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    print(name, "counters after 5 steps", {k: v for k, v in fuser.counters().items() if v})
    t = time.perf_counter()
    for _ in range(200):
        step()
    torch.cuda.synchronize()
    print(
        name,
        "ms/step",
        (time.perf_counter() - t) / 200 * 1e3,
        {k: v for k, v in fuser.counters().items() if v},
    )
