"""Where a zoo model's first call goes (issue 29 item 4): one fresh process, empty Triton, Inductor and
fuser caches, the first forward and backward (benchmarks/first_call.py's timed region alone) under
cProfile, for one backend.

    python tools/probes/first_call_profile_cuda.py --model llama --backend fuser --out DIR

DIR/<backend>.txt: the functions with the most cumulative time, and the seconds of the shares below;
DIR/<backend>.pstats: the raw profile (`python -m pstats`), to read callers and callees afterwards;
DIR/<backend>-modules.txt: the modules first imported during the call, and whether Python could write
their bytecode caches (where it cannot, every fresh process compiles their source again).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHARES = {  # (file suffix, function name): what it is
    ("torch/_dynamo/convert_frame.py", "_compile"): "Dynamo: converting frames (includes what it calls)",
    ("torch/_functorch/aot_autograd.py", "aot_module_simplified"): "AOTAutograd (includes the backend)",
    ("fuser/compiler.py", "compile_graph"): "the fuser's compile step",
    ("triton/compiler/compiler.py", "compile"): "Triton compiling kernels",
    ("<frozen importlib._bootstrap>", "_find_and_load"): "importing modules (includes their code)",
    ("~", "<built-in method builtins.compile>"): "compiling Python source (no bytecode cache)",
    ("subprocess.py", "run"): "subprocesses (ptxas, the C compiler)",
}


def _inner(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import first_call

    from conformance.zoo import check

    profiler = cProfile.Profile()
    seen_before: set[str] = set()
    timed = check._loss_and_grads

    def profiled(*a, **k):  # first_call.one's timed region, imported from this module at its call
        seen_before.update(sys.modules)
        profiler.enable()
        try:
            return timed(*a, **k)
        finally:
            profiler.disable()

    check._loss_and_grads = profiled
    started = time.perf_counter()
    result = first_call.one(args.model, args.backend, args.device)
    whole = time.perf_counter() - started
    imported = sorted(set(sys.modules) - seen_before)
    stats = pstats.Stats(profiler)
    stats.dump_stats(args.out / f"{args.backend}.pstats")
    lines = [
        f"{args.model} under {args.backend}: first call {result['first_call_s']} s under cProfile "
        f"(fuser's compile step {result['compile_graph_s']} s; the process's model build and call {whole:.1f} s)"
    ]
    for (suffix, name), what in SHARES.items():
        rows = [
            row
            for (path, _, function), row in stats.stats.items()
            if path.endswith(suffix) and function == name
        ]
        share = (
            f"{max((row[3] for row in rows), default=0.0):8.2f} s" if rows else "  not seen by the profiler:"
        )
        lines.append(f"{share}  {what}")
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(80)
    (args.out / f"{args.backend}.txt").write_text("\n".join(lines) + "\n\n" + text.getvalue())
    unwritable = [
        name
        for name in imported
        if (spec := getattr(sys.modules.get(name), "__spec__", None)) is not None
        and spec.cached
        and not os.path.exists(spec.cached)
    ]
    (args.out / f"{args.backend}-modules.txt").write_text(
        f"{len(imported)} modules first imported during the call; {len(unwritable)} without a bytecode "
        f"cache on disk afterwards (sys.dont_write_bytecode={sys.dont_write_bytecode})\n"
        + "\n".join(f"{name}{'  (no .pyc)' if name in unwritable else ''}" for name in imported)
        + "\n"
    )
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2")
    parser.add_argument("--backend", default="fuser", help="a benchmarks/first_call.py backend name")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.inner:
        _inner(args)
        return
    with tempfile.TemporaryDirectory(prefix="first-call-") as caches:
        env = os.environ | {
            "TRITON_CACHE_DIR": f"{caches}/triton",
            "TORCHINDUCTOR_CACHE_DIR": f"{caches}/inductor",
            "FUSER_KERNEL_DIR": f"{caches}/fuser",
        }
        command = [sys.executable, __file__, "--inner", "--model", args.model, "--backend", args.backend]
        subprocess.run([*command, "--out", str(args.out), "--device", args.device], env=env, check=True)


if __name__ == "__main__":
    main()
