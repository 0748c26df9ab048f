"""`python -m perfgate gate | update | compare`: the command line.

    python -m perfgate gate --against main       # a pull request: head and main side by side (A/B)
    python -m perfgate gate --against main --out reports/perfgate   # Markdown, PNG, JSON per tree
    python -m perfgate gate                      # counts against the committed file, timings as history
    python -m perfgate gate --absolute           # timings against the file too (after an A/A check)
    python -m perfgate update                    # rewrite this architecture's file (review the diff)
    python -m perfgate forget --architecture sm_90 --workload adam_step   # its program changed
    python -m perfgate compare --plot compare.png  # fuser, inductor and eager side by side

The tier is `gpu` where CUDA is available, else `cpu` (the deterministic metrics only); `--tier` picks.
`gate` exits 0 on a pass, 1 on a regression, 2 on bad input, 3 when verdicts are still inconclusive
at the end of the time budget and nothing regressed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path

from perfgate import baselines
from perfgate.backends import BACKENDS
from perfgate.baselines import BASELINE_DIR
from perfgate.compare import run_compare
from perfgate.gate import BAD_INPUT, GateRequest, run_gate, run_update
from perfgate.machine import default_tier
from perfgate.report import benchmark_json, markdown, plot, text
from perfgate.tiers import make_tier
from perfgate.trees import GateError
from perfgate.workloads import WORKLOADS

# Warm-up processes of a GPU gate: half the CPUs, the other half left to the system and the gate.
DEFAULT_WARM_PROCESSES = max(1, (os.cpu_count() or 2) // 2)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m perfgate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    gate = commands.add_parser(
        "gate", help="measure, judge against base and the committed file, exit 1 on a regression"
    )
    update = commands.add_parser("update", help="measure and rewrite this architecture's baseline file")
    compare = commands.add_parser("compare", help="fuser, inductor and eager side by side, with a plot")
    forget = commands.add_parser(
        "forget", help="drop workloads' entries from a baseline file (their program changed; no device here)"
    )
    forget.add_argument("--architecture", required=True, help="the file's architecture: cpu, sm_90, ...")
    forget.add_argument("--workload", action="append", required=True, help="repeatable")
    forget.add_argument(
        "--baseline-dir", type=Path, default=BASELINE_DIR, help="where <architecture>.json lives"
    )
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
    gate.add_argument(
        "--against", metavar="REV", help="measure REV's tree beside head's and judge head / base"
    )
    gate.add_argument(
        "--aa",
        action="store_true",
        help="where REV is head's own tree, measure it twice anyway: an A/A check of this machine's noise",
    )
    gate.add_argument(
        "--absolute",
        action="store_true",
        help="judge timings and instruction counts against the committed file",
    )
    gate.add_argument("--strict", action="store_true", help="improvements beyond threshold fail too")
    gate.add_argument(
        "--counts-only",
        action="store_true",
        help="CPU tier: kernel launches and bytes only, no callgrind (seconds instead of minutes)",
    )
    gate.add_argument("--rounds", type=int, help="rounds of one process per tree, at least (gpu 3, cpu 1)")
    gate.add_argument(
        "--budget-s",
        type=float,
        default=420,
        help="no extra round for inconclusive verdicts starts after this",
    )
    gate.add_argument(
        "--warm-processes",
        type=int,
        default=DEFAULT_WARM_PROCESSES,
        help="GPU tier: compile every workload in each tree beforehand in this many parallel processes "
        "(default: half the CPUs; 0: no warm-up)",
    )
    gate.add_argument("--seed", type=int, help="the order of the processes (default: drawn, and printed)")
    gate.add_argument("--out", type=Path, help="write report.md, ratios.png and <tree>.json here")
    compare.add_argument(
        "--backends", nargs="+", choices=sorted(BACKENDS), default=["fuser", "inductor", "eager"]
    )
    compare.add_argument("--plot", type=Path, default=Path("perfgate-compare.png"), help="PNG bar plot")
    return parser


def _gate(args: argparse.Namespace, tier: str, workloads: list[str]) -> int:
    request = GateRequest(
        tier,
        workloads,
        backend=args.backend,
        against=args.against,
        aa=args.aa,
        absolute=args.absolute,
        strict=args.strict,
        instructions=not args.counts_only,
        rounds=args.rounds,
        budget_s=args.budget_s,
        warm_processes=args.warm_processes,
        seed=args.seed,
        baseline_dir=args.baseline_dir,
    )
    result = run_gate(request)
    print(text(result))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "report.md").write_text(markdown(result))
        plot(result, args.out / "ratios.png")
        for tree in result.trees:
            (args.out / f"{tree.role}.json").write_text(
                json.dumps(benchmark_json(result, tree.role), indent=2) + "\n"
            )
        print(
            f"\nreports: {args.out}/report.md, ratios.png, {', '.join(t.role + '.json' for t in result.trees)}"
        )
    return result.exit_status


def _forget(args: argparse.Namespace) -> int:
    path = baselines.baseline_path(args.architecture, args.baseline_dir)
    data = baselines.load(path)
    if data is None:
        print(f"perfgate: no baseline file {path}", file=sys.stderr)
        return BAD_INPUT
    baselines.write(path, baselines.forgotten(data, args.workload))
    print(f"wrote {path} without {', '.join(args.workload)}: review the diff and commit it")
    return 0


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # unwinds like Ctrl-C: measuring processes killed, the base worktree removed


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "forget":
        return _forget(args)
    tier = args.tier or default_tier()
    names = args.workload or list(WORKLOADS)
    if args.command == "compare":
        print(run_compare(tier, [WORKLOADS[n] for n in names], args.backends, args.plot))
        print(f"\nplot: {args.plot}")
        return 0
    if args.command == "update":
        measuring = make_tier(tier, BACKENDS[args.backend])
        path = run_update(measuring, [WORKLOADS[n] for n in names], args.baseline_dir)
        print(f"wrote {path}: review the diff (git diff {path}) and commit it with the change it measures")
        return 0
    signal.signal(signal.SIGTERM, _stop)
    try:
        return _gate(args, tier, names)
    except GateError as error:
        print(f"perfgate: {error}", file=sys.stderr)
        return BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
