"""`python -m perfgate gate | update | compare`: the command line.

    python -m perfgate gate                      # measure this machine's tier, judge, exit 1 on regression
    python -m perfgate gate --workload softmax --strict --markdown pr.md --json bench.json
    python -m perfgate update                    # rewrite this architecture's baseline (review the diff)
    python -m perfgate compare --plot compare.png  # fuser, inductor and eager side by side

The tier is `gpu` where CUDA is available, else `cpu` (the deterministic metrics only); `--tier` picks.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from perfgate.backends import BACKENDS
from perfgate.baselines import BASELINE_DIR
from perfgate.compare import run_compare
from perfgate.gate import run_gate, run_update
from perfgate.machine import default_tier
from perfgate.report import benchmark_json, markdown, text
from perfgate.tiers import make_tier
from perfgate.workloads import WORKLOADS, Workload


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m perfgate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    gate = commands.add_parser("gate", help="measure, compare with the baseline, exit 1 on a regression")
    update = commands.add_parser("update", help="measure and rewrite this architecture's baseline file")
    compare = commands.add_parser("compare", help="fuser, inductor and eager side by side, with a plot")
    for command in (gate, update, compare):
        command.add_argument(
            "--tier", choices=("cpu", "gpu"), default=None, help="default: gpu if CUDA is available"
        )
        command.add_argument(
            "--workload", action="append", choices=sorted(WORKLOADS), help="only this workload (repeatable)"
        )
    for command in (gate, update):
        command.add_argument("--backend", choices=sorted(BACKENDS), default="fuser")
        command.add_argument(
            "--baseline-dir", type=Path, default=BASELINE_DIR, help="where <architecture>.json lives"
        )
    gate.add_argument("--strict", action="store_true", help="improvements beyond threshold fail too")
    gate.add_argument(
        "--counts-only",
        action="store_true",
        help="CPU tier: kernel launches and bytes only, no callgrind (seconds instead of minutes)",
    )
    update.set_defaults(counts_only=False)  # a baseline always records every metric of its tier
    gate.add_argument("--json", type=Path, help="write a pytest-benchmark compatible JSON report here")
    gate.add_argument("--markdown", type=Path, help="write a Markdown report (for a pull request) here")
    compare.add_argument(
        "--backends", nargs="+", choices=sorted(BACKENDS), default=["fuser", "inductor", "eager"]
    )
    compare.add_argument("--plot", type=Path, default=Path("perfgate-compare.png"), help="PNG bar plot")
    return parser


def _workloads(names: list[str] | None) -> list[Workload]:
    return [WORKLOADS[name] for name in names] if names else list(WORKLOADS.values())


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    tier = args.tier or default_tier()
    workloads = _workloads(args.workload)
    if args.command == "compare":
        print(run_compare(tier, workloads, args.backends, args.plot))
        print(f"\nplot: {args.plot}")
        return 0
    measuring = make_tier(tier, BACKENDS[args.backend], instructions=not args.counts_only)
    if args.command == "update":
        path = run_update(measuring, workloads, args.baseline_dir)
        print(f"wrote {path}: review the diff (git diff {path}) and commit it with the change it measures")
        return 0
    result = run_gate(measuring, workloads, args.baseline_dir, strict=args.strict)
    print(text(result))
    if args.markdown:
        args.markdown.write_text(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(benchmark_json(result), indent=2) + "\n")
    return 1 if result.failed else 0


if __name__ == "__main__":
    sys.exit(main())
