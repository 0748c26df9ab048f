"""How many instructions a perf-gate workload's fused kernels issue, from their PTX compiled for a GPU on
this CPU (issue 29: whether a kernel is bound by bytes or by instructions). Deterministic for one Triton.

    python tools/probes/ptx_per_element.py cross_entropy --rows 64 --cols 32000 [--capability 90] [--sass]

The workload runs once on the CPU (kernels in Triton's interpreter) with FUSER_CHECK_CUDA_COMPILE set, so
each kernel is also compiled for the GPU with the launch settings a GPU would use. For each kernel: its PTX
instructions, those of its first loop's body (a looped row kernel's column loop), and the loop's commonest
opcodes. Divide the loop's count by the elements a thread handles an iteration (block / threads) for a
per-element figure. `--sass`: also each kernel's SASS instructions (the machine code ptxas made, listed by
the cuobjdump Triton ships), which count what PTX hides (an integer division, libdevice's calls).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import tempfile
from collections import Counter


def instructions(ptx: str) -> list[str]:
    """The opcode of every PTX instruction in `ptx` (no directives, labels, comments or braces)."""
    opcodes = []
    for line in ptx.splitlines():
        line = line.strip()
        if not line or line.startswith(("//", ".", "{", "}", "$", ")")) or line.endswith(":"):
            continue
        opcode = line.split()[0]
        if opcode.startswith("@"):  # a predicated instruction: its opcode follows the guard
            opcode = line.split()[1]
        opcodes.append(opcode.split(".")[0].rstrip(";"))
    return opcodes


def first_loop(ptx: str) -> str:
    """The body of the first backward branch's loop: from the label a `bra` jumps back to, to that `bra`."""
    lines = ptx.splitlines()
    for end, line in enumerate(lines):
        target = re.search(r"\bbra(?:\.uni)?\s+(\$\w+);", line)
        if not target:
            continue
        label = f"{target.group(1)}:"  # a label line may carry a comment after it
        starts = [i for i, text in enumerate(lines[:end]) if text.strip().startswith(label)]
        if starts:
            return "\n".join(lines[starts[-1] + 1 : end + 1])
    return ""


def sass_opcodes(cubin: bytes) -> list[str]:
    """The opcode of every SASS instruction in `cubin` (predicates dropped), through Triton's cuobjdump."""
    import triton

    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        listing = subprocess.run(
            [tool, "-sass", file.name], capture_output=True, text=True, check=True
        ).stdout
    opcodes = []
    for line in listing.splitlines():
        code = re.match(r"\s+/\*[0-9a-f]{4}\*/\s+(.*?);", line)
        if code:
            words = code.group(1).split()
            opcodes.append((words[1] if words[0].startswith("@") else words[0]).split(".")[0])
    return opcodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload")
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--capability", default="90")
    parser.add_argument("--sass", action="store_true", help="also count each kernel's SASS instructions")
    args = parser.parse_args()
    os.environ["FUSER_CHECK_CUDA_COMPILE"] = args.capability

    import fuser
    from fuser.runtime import gpu_compile_check
    from perfgate.workloads import WORKLOADS, Step

    workload = WORKLOADS[args.workload]
    inputs = workload.make_inputs(rows=args.rows, cols=args.cols, device="cpu")
    compiled = fuser.compile(workload.program, dynamic=False, unvalidated="fuse")
    Step(workload, compiled, inputs)()
    for kernel in gpu_compile_check._compiled.values():
        ptx = kernel.asm["ptx"]
        loop = first_loop(ptx)
        common = ", ".join(f"{op} {n}" for op, n in Counter(instructions(loop)).most_common(10))
        print(f"{kernel.name}: {len(instructions(ptx))} instructions, loop body {len(instructions(loop))}")
        if loop:
            print(f"  loop: {common}")
        if args.sass:
            sass = sass_opcodes(kernel.asm["cubin"])
            print(f"  SASS: {len(sass)}: {', '.join(f'{op} {n}' for op, n in Counter(sass).most_common(10))}")


if __name__ == "__main__":
    main()
