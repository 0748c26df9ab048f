"""Where a zoo model's first call goes under the fuser (issue 29 item 4): one fresh process, empty
Triton, Inductor and fuser caches, the first forward and backward under cProfile.

    python tools/probes/first_call_profile_cuda.py --model gpt2 --out DIR

DIR/profile.txt: the functions with the most cumulative time; DIR/shares.txt: the first call's seconds
in Dynamo's frame conversion, AOTAutograd, the fuser's compile step and Triton's compiles.
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
from pathlib import Path

SHARES = {  # (file suffix, function name): what it is
    ("torch/_dynamo/convert_frame.py", "_compile"): "Dynamo: converting frames (includes what it calls)",
    ("torch/_functorch/aot_autograd.py", "aot_module_simplified"): "AOTAutograd (includes the backend)",
    ("fuser/compiler.py", "compile_graph"): "the fuser's compile step",
    ("triton/compiler/compiler.py", "compile"): "Triton compiling kernels",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt2")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.inner:
        with tempfile.TemporaryDirectory(prefix="first-call-") as caches:
            env = os.environ | {
                "TRITON_CACHE_DIR": f"{caches}/triton",
                "TORCHINDUCTOR_CACHE_DIR": f"{caches}/inductor",
                "FUSER_KERNEL_DIR": f"{caches}/fuser",
            }
            command = [sys.executable, __file__, "--model", args.model, "--out", str(args.out), "--inner"]
            command += ["--device", args.device]
            subprocess.run(command, env=env, check=True)
        print((args.out / "shares.txt").read_text())
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import first_call

    profiler = cProfile.Profile()
    profiler.enable()
    result = first_call.one(args.model, "fuser", args.device)
    profiler.disable()
    stats = pstats.Stats(profiler)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(60)
    (args.out / "profile.txt").write_text(text.getvalue())
    lines = [
        f"first call {result['first_call_s']} s (under cProfile), compile step {result['compile_graph_s']} s"
    ]
    for (suffix, name), what in SHARES.items():
        rows = [
            row
            for (path, _, function), row in stats.stats.items()
            if path.endswith(suffix) and function == name
        ]
        # torch 2.11 under Python 3.12 left Dynamo's and the backend's frames out of the profile on the H200
        # (session 19): say so rather than print a zero.
        share = f"{sum(row[3] for row in rows):8.2f} s" if rows else "  not seen by the profiler:"
        lines.append(f"{share}  {what}")
    (args.out / "shares.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
