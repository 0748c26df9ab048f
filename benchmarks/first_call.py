"""Seconds of a zoo model's first compiled call (forward and backward, fp32), per backend, from empty
caches: the fuser's kernel folder, Triton's cache and Inductor's, each fresh, in a fresh process.

    python benchmarks/first_call.py --device cuda --models gpt2 t5 --backends inductor fuser fuser-threads \
        --repeats 3 --json first_call.json

runs one process per (repeat, model, backend), the backends in a new random order each repeat, and
prints the median and the spread of each. Every process reads the imported packages' bytecode from one
cache compiled first (`bytecode_cache`), as from a user's installation. Backends: `eager` (Dynamo alone),
`aot_eager` (+ AOTAutograd), `inductor` (the default backend), `fuser` (as configured by default: a graph's kernels compiled ahead,
side by side, in worker processes, one per core but one, at most 16), `fuser-threads` (in as many threads
of the process instead: `FUSER_COMPILE_THREADS`), `fuser-at-launch` (each kernel compiled at its first
launch, one after another: `FUSER_COMPILE_WORKERS=0`), `fuser-triton-launcher` (each launched through
Triton's C launcher, built per kernel signature, rather than torch's static one: `FUSER_STATIC_LAUNCH=0`).
For the fuser, `compile_graph_s` is the time inside its own compile step (`fuser.observing_compile`),
Triton's compiles excluded. `--one MODEL BACKEND` is one such process.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fresh_process import measure

BACKENDS = {  # name -> (torch.compile backend, environment)
    "eager": ("eager", {}),
    "aot_eager": ("aot_eager", {}),
    "inductor": ("inductor", {}),
    "fuser": ("fuser", {}),  # as configured by default (since session 22: compiled ahead in worker processes)
    # as many threads as the default has workers (compile_pool.default_workers, not imported here: this
    # module is each measured process's too, and the fuser's import belongs to its timed first call)
    "fuser-threads": ("fuser", {"FUSER_COMPILE_THREADS": str(min(16, max(1, (os.cpu_count() or 2) - 1)))}),
    "fuser-at-launch": ("fuser", {"FUSER_COMPILE_WORKERS": "0"}),  # each kernel compiled at its first launch
    # each kernel launched through Triton's C launcher, built with gcc per signature at its first launch
    "fuser-triton-launcher": ("fuser", {"FUSER_STATIC_LAUNCH": "0"}),
}


def one(model_name: str, backend_name: str, device: str) -> dict:
    """The first call of `model_name` under `backend_name` in this process (its caches set by the caller)."""
    import torch

    from conformance.zoo.check import _loss_and_grads, _on
    from conformance.zoo.models import ZOO

    (zoo,) = [z for z in ZOO if z.name == model_name]
    backend, _ = BACKENDS[backend_name]
    torch.manual_seed(0)
    model = zoo.build().to(device).train()
    batch = _on(zoo.batch(), device)
    inside = [0.0]
    observing = contextlib.nullcontext()
    if backend == "fuser":
        import fuser

        entered = []
        observing = fuser.observing_compile(
            lambda: entered.append(time.perf_counter()),
            lambda: inside.__setitem__(0, inside[0] + time.perf_counter() - entered.pop()),
        )
    compiled = torch.compile(model, backend=backend)
    with observing:
        started = time.perf_counter()
        _loss_and_grads(compiled, batch, zoo, "fp32")
        if device == "cuda":
            torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    return {
        "model": model_name,
        "backend": backend_name,
        "first_call_s": round(seconds, 3),
        "compile_graph_s": round(inside[0], 3) if backend == "fuser" else None,
    }


def bytecode_cache(folder: str) -> dict[str, str]:
    """Compile the packages a first call imports (torch, Triton, the model libraries, this project) into
    `folder` once, and return the environment that has every measured process read them there. A user's
    installation holds them (pip compiles at install); the lent GPU machine's does not and writes none
    (PYTHONDONTWRITEBYTECODE), so each process compiled the source of every module it imported: about
    10 s of a llama process, 1.15 s of it inside the fuser's timed first call and 0.55 s inside
    Inductor's (records/first-call-h200-2026-11-28-s21.md)."""
    packages = ["torch", "triton", "transformers", "timm", "fuser", "conformance"]
    folders = [
        location
        for name in packages
        if (spec := importlib.util.find_spec(name)) is not None
        for location in spec.submodule_search_locations or []
    ]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = folder
    # A file that does not compile (a template among a package's sources) is left to fail at import, if
    # it is imported at all: compileall's exit status says nothing here.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "-j", "0", *folders], env=env, capture_output=True
    )
    return env


def _fresh_process(model: str, backend: str, device: str, base: dict[str, str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="first-call-") as caches:
        inherited = {
            k: v
            for k, v in base.items()
            if k not in ("FUSER_COMPILE_WORKERS", "FUSER_COMPILE_THREADS", "FUSER_STATIC_LAUNCH")
        }
        env = inherited | BACKENDS[backend][1]
        env |= {
            "TRITON_CACHE_DIR": f"{caches}/triton",
            "TORCHINDUCTOR_CACHE_DIR": f"{caches}/inductor",
            "FUSER_KERNEL_DIR": f"{caches}/fuser",
        }
        return measure(
            __file__, ["--device", device, "--one", model, backend], f"{model} under {backend}", env
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument(
        "--models", nargs="+", default=["gpt2", "llama", "t5", "bert", "vit", "timm_convnext"]
    )
    parser.add_argument("--backends", nargs="+", default=["inductor", "fuser", "fuser-threads"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="the order of the backends in each repeat")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--one", nargs=2, metavar=("MODEL", "BACKEND"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(*args.one, args.device)))
        return
    unknown = sorted(set(args.backends) - set(BACKENDS))
    if unknown:
        parser.error(f"unknown backend(s) {', '.join(unknown)}; known: {', '.join(BACKENDS)}")
    order = random.Random(args.seed)
    runs = []
    with tempfile.TemporaryDirectory(prefix="first-call-bytecode-") as folder:
        base = bytecode_cache(folder)
        for repeat in range(args.repeats):
            for model in args.models:
                for backend in order.sample(args.backends, len(args.backends)):
                    run = _fresh_process(model, backend, args.device, base) | {"repeat": repeat}
                    print(json.dumps(run), flush=True)
                    runs.append(run)
    print("\n| model | " + " | ".join(args.backends) + " |")
    print("|---|" + "---|" * len(args.backends))
    for model in args.models:
        cells = []
        for backend in args.backends:
            seconds = [r["first_call_s"] for r in runs if r["model"] == model and r["backend"] == backend]
            cells.append(f"{statistics.median(seconds):.1f} s ({min(seconds):.1f}–{max(seconds):.1f})")
        print(f"| {model} | " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
