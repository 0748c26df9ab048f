"""`python -m conformance.fuzz --examples N --seed S --backend B --device D --profile P [--op OP]`;
`--op A,B,C --passes N`: programs calling several ops, until each has N passing (conformance/fuzz/batch.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from conformance.fuzz.batch import BatchReport, fuzz_batch
from conformance.fuzz.run import PROFILES, FuzzReport, fuzz
from conformance.fuzz.vocab import BY_NAME
from conformance.harness.collector import tune_for_compiling
from conformance.harness.runner import resolve_backend


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.fuzz", description=__doc__)
    parser.add_argument(
        "--backend", default="fuser", help="fuser, inductor, aot_eager, eager or module:callable"
    )
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--profile", default="ci", choices=sorted(PROFILES))
    parser.add_argument("--examples", type=int, help="how many programs (default: the profile's)")
    parser.add_argument(
        "--seed", type=int, help="draw other programs than the profile's (ci draws from a fixed seed)"
    )
    parser.add_argument("--out", type=Path, default=Path("reports/fuzz"), help="where repro_<id>.py go")
    parser.add_argument("--max-nodes", type=int, default=5, help="the most nodes a program has")
    parser.add_argument("--no-backward", action="store_true", help="compare outputs only, not gradients")
    parser.add_argument(
        "--op",
        action="append",
        default=[],
        help="every program calls this op at least once (e.g. aten.sub.Tensor); several (repeated or "
        "comma-separated): each program calls one or more of them",
    )
    parser.add_argument(
        "--passes",
        type=int,
        help="with --op: draw rounds of programs until each op has this many passing ones (a batch)",
    )
    parser.add_argument("--json", type=Path, help="also write the result here (for conformance.validate)")
    options = parser.parse_args(argv)
    tune_for_compiling()
    try:
        resolve_backend(options.backend)
    except ValueError as error:
        parser.error(str(error))
    ops = tuple(op.strip() for given in options.op for op in given.split(",") if op.strip())
    unknown = [op for op in ops if op not in BY_NAME]
    if unknown:
        parser.error(f"--op {', '.join(unknown)}: not in the fuzzer's vocabulary (conformance/fuzz/vocab.py)")
    if options.examples is not None and options.examples < 1:
        parser.error(f"--examples {options.examples}: must be at least 1")
    if options.passes is not None:
        if not ops or options.passes < 1 or options.examples is not None:
            parser.error("--passes N (N >= 1) needs --op and sets the draws itself (no --examples)")
        return _batch(options, ops)
    if len(ops) > 1:
        parser.error("several --op: give --passes N (programs drawn until each op has N passing)")
    report = fuzz(
        options.backend,
        options.device,
        options.profile,
        examples=options.examples,
        seed=options.seed,
        out=options.out,
        backward=not options.no_backward,
        max_nodes=options.max_nodes,
        require_op=ops[0] if ops else None,
    )
    print(report.summary())
    if report.mostly_vacuous:
        print(
            f"FAILED: {report.counts['vacuous']} programs compiled nothing against {report.counts['pass']} "
            "checked: the run proves little (for the fuser, FUSER_UNVALIDATED=fuse fuzzes its lowerings)"
        )
    if options.json is not None:
        options.json.write_text(json.dumps(_result(report), indent=1) + "\n")
    return 1 if report.failure is not None or report.mostly_vacuous else 0


def _batch(options: argparse.Namespace, ops: tuple[str, ...]) -> int:
    batch = fuzz_batch(
        ops,
        options.passes,
        seed=options.seed or 0,
        backend=options.backend,
        device=options.device,
        profile=options.profile,
        out=options.out,
    )
    for number, report in enumerate(batch.rounds, 1):
        print(f"round {number}: {report.summary()}")
    none = [op for op in ops if batch.passed[op] == 0]
    for op in ops:
        verdict = "FAILED" if op in batch.failed else "too little" if op in batch.vacuous else "passed"
        print(f"{op}: {batch.passed[op]} passing programs; {verdict}")
    if options.json is not None:
        options.json.write_text(json.dumps(_batch_result(batch), indent=1) + "\n")
    return 1 if batch.failed or batch.vacuous or none else 0


def _batch_result(batch: BatchReport) -> dict:
    return {
        "passed_by_op": dict(batch.passed),
        "failed": {op: _result(report) for op, report in batch.failed.items()},
        "vacuous": sorted(batch.vacuous),
        "counts": dict(batch.counts()),
        "seconds": round(batch.seconds, 1),
    }


def _result(report: FuzzReport) -> dict:
    return {
        "counts": dict(report.counts),
        "failed": report.failure is not None,
        "mostly_vacuous": report.mostly_vacuous,
        "message": report.message,
        "repro": str(report.repro) if report.repro else None,
        "seconds": round(report.seconds, 1),
    }


if __name__ == "__main__":
    sys.exit(main())
