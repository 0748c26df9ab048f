"""Seconds of a compiled optimizer step's first call, and the fuser's share of it (`compile_graph`).

    python benchmarks/optimizer_first_call.py --params 200          # one line, one fresh process
    python benchmarks/optimizer_first_call.py --backend eager       # Dynamo alone; aot_eager: + AOTAutograd

The rest of the first call is Dynamo's and AOTAutograd's tracing (and, on the CPU, the interpreted
kernels' one run). Compare two trees in alternating fresh processes, e.g.
`for t in base head head base base head; do PYTHONPATH=<tree> python benchmarks/optimizer_first_call.py; done`.
"""

from __future__ import annotations

import argparse
import os
import time

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=200)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--backend", default="fuser", help="eager (Dynamo's share), aot_eager (+ AOTAutograd's), fuser"
    )
    args = parser.parse_args()
    os.environ.setdefault("FUSER_UNVALIDATED", "fuse")
    from fuser.capture import backend  # after the environment: the fuser reads it at import

    spent = [0.0]
    compile_graph = backend.compile_graph

    def timed(*arguments, **keywords):
        started = time.perf_counter()
        try:
            return compile_graph(*arguments, **keywords)
        finally:
            spent[0] += time.perf_counter() - started

    backend.compile_graph = timed  # the backend calls it by this name, forward and backward
    params = [torch.randn(1000 + i, device=args.device, requires_grad=True) for i in range(args.params)]
    for p in params:
        p.grad = torch.randn_like(p)
    optimizer = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, foreach=True)
    optimizer.step()  # the state exists: the compiled call is the steady state's graph
    step = torch.compile(optimizer.step, backend=args.backend)
    started = time.perf_counter()
    step()
    total = time.perf_counter() - started
    print(
        f"{args.backend}: first call {total:.2f} s, of which the fuser's compile_graph {spent[0]:.2f} s "
        f"({args.params} parameters)"
    )


if __name__ == "__main__":
    main()
