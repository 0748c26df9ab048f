"""Which tier of the conformance suite catches each planted miscompile (the catching table).

For each kind in `fuser.testing.miscompiles` that the table covers, the quick tier runs over the ops the kind
can touch with that kind planted, stopping at the first failure; a kind the quick tier misses there is
then run on the full tier over the same ops. Each tier first runs the same selection clean (the full
tier only for a kind that needs it): it must pass, or a failure would be credited to the plant. Prints a Markdown table (and writes it with `--out`);
docs/conformance.md records the result.

    python tools/catching_table.py                          # every kind, fuser, CPU
    python tools/catching_table.py --kind zero_sign_flipped --workers 2
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# kind -> the ops whose full-tier cases can show it (the full tier is too long to run whole per kind).
KINDS = {
    "partial_block_mask": ["aten.exp.default", "aten.add.Tensor"],
    "broadcast_misread": ["aten.add.Tensor", "aten.mul.Tensor", "aten.where.self"],
    "reduction_identity": ["aten.amax.default", "aten.amin.default", "aten._softmax.default"],
    "nan_not_propagated": ["aten.maximum.default", "aten.minimum.default", "aten.clamp.default"],
    "view_step_ignored": ["aten.slice.Tensor"],
    "rounding_mode_swapped": ["aten.div.Tensor_mode"],
    "zero_sign_flipped": ["aten.neg.default"],
    "constant_rounded": ["aten.gelu.default"],
}


def run_tier(kind: str | None, tier: str, ops: list[str], workers: int) -> tuple[str | None, float]:
    """The first failing case id with `kind` planted (None: nothing planted), or None; and the seconds."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSER_TESTING_")}
    # The table measures the lowerings, so they are fused whether or not the manifest validates them yet.
    env |= {"FUSER_STRICT": "1", "FUSER_UNVALIDATED": "fuse"}
    env |= {"FUSER_TESTING_MISCOMPILE": kind} if kind else {}
    command = [sys.executable, "-m", "pytest", "conformance/test_ops.py", "-p", "no:cacheprovider", "-q"]
    command += [
        "--conformance-tier",
        tier,
        "--maxfail=1",
        *(["-n", str(workers)] if workers > 1 else ["-p", "no:xdist"]),
    ]
    for op in ops:
        command += ["--conformance-op", op]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    failed = re.search(r"FAILED \S+\[(\S+)\]", done.stdout)
    # 2: xdist's interruption after --maxfail, with the failure already reported
    if done.returncode not in (0, 1) and not (done.returncode == 2 and failed):
        raise RuntimeError(f"{kind} {tier}: pytest exited {done.returncode}\n{done.stdout[-2000:]}")
    return (failed.group(1) if failed else None), seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", action="append", choices=list(KINDS), help="default: every kind")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    kinds = args.kind or list(KINDS)
    every = sorted({op for kind in kinds for op in KINDS[kind]})
    failed, _ = run_tier(None, "quick", every, args.workers)
    if failed:
        print(f"the quick tier fails with nothing planted ({failed}): fix that first", file=sys.stderr)
        return 1
    rows = ["| kind | quick tier (its ops) | full tier (its ops) | seconds |", "| --- | --- | --- | --- |"]
    for kind in kinds:
        quick, quick_s = run_tier(kind, "quick", KINDS[kind], args.workers)
        full, full_s = None, 0.0
        if not quick:  # only then the full tier: first clean, so that a failure is the plant's
            clean, _ = run_tier(None, "full", KINDS[kind], args.workers)
            if clean:
                print(f"the full tier fails with nothing planted ({clean}): fix that first", file=sys.stderr)
                return 1
            full, full_s = run_tier(kind, "full", KINDS[kind], args.workers)
        caught_full = "—" if quick else (f"caught: `{full}`" if full else "**missed**")
        rows.append(
            f"| `{kind}` | {f'caught: `{quick}`' if quick else '**missed**'} | {caught_full} "
            f"| {quick_s + full_s:.0f} |"
        )
        print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    if args.out:
        args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
