"""Validate ops before fusion is enabled for them: `python -m conformance.validate <op> [<op> ...]`.

For each op, runs its full conformance on this machine's architecture — every supported dtype, every
fusion context, forward and backward, the full tier's samples — through the real pytest plugin (one
pytest process per op, the op's lowering forced on with FUSER_UNVALIDATED=fuse), prints a verdict
table, and writes the op's manifest entry only if every case passed or is a ledgered expected
failure. A dtype with an expected failure is left out of the entry (not validated); any other
failure writes nothing, prints each failing case with its rerun command, and makes the exit status 1.

Then the fuzz stage (conformance/validate/fuzz.py): `--fuzz-examples N` random programs
(conformance/fuzz/), each calling the op among other ops, with the same backend, device and forced
lowering; a failure fails the op as a failing case does (its repro and rerun command printed), a pass
records `fuzz = <programs passed>` in the entry. Ops the fuzzer cannot require (views, prims,
backward ops) skip it, saying why.

`--all-unvalidated` validates every op the fuser lowers that has no fresh entry (none, or stale).
Progress is recorded (`--progress`), so a rerun after an interruption continues where it stopped
and does not retry an op that failed at the same lowering (`--retry-failed` does).
`--backend B` validates another torch.compile backend: its manifest goes to `--manifest-dir`
(reports/validate/<backend> unless told), in the same format.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import fcntl
import json
import os
import subprocess
import tempfile
import time
import tomllib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch

from conformance.harness import cores, report
from conformance.plugin import cases, full_tier_command, rerun_command
from conformance.specs.caseid import DTYPES
from conformance.specs.catalog import SPECS
from conformance.validate.fuzz import (
    DEFAULT_FUZZ_EXAMPLES,
    DEFAULT_FUZZ_PASSES,
    FuzzStage,
    fuzz_arguments,
    fuzz_failure,
    run_fuzz,
)
from fuser.lower import lowerings
from fuser.validate import validation

ROOT = Path(__file__).resolve().parents[2]
# Ops the fuser lowers that no user calls directly: the conformance ops whose graphs reach them
# (checked: var's forward and backward graphs hold all three).
PROXIES = {
    "prims.var.default": ("aten.var.correction",),
    "prims.sum.default": ("aten.var.correction",),
    "prims.broadcast_in_dim.default": ("aten.var.correction",),
}


def specs_for(op: str) -> tuple[str, ...]:
    """The conformance ops whose cases validate `op`."""
    if op in PROXIES:
        return PROXIES[op]
    if op in SPECS:
        return (op,)
    raise SystemExit(
        f"validate: unknown op {op!r}: no conformance spec (see conformance.specs.catalog.SPECS)"
    )


def expected_cases(op: str, backend: str, device: str) -> int:
    """How many cases validating `op` runs here: the full tier of each of its specs."""
    return sum(len(cases(s, "full", backend, device)) for s in specs_for(op))


def arch_for(device: str) -> str:
    return validation.arch_of(torch.device(device))


@dataclass
class Verdict:
    op: str
    cases: int
    passed_dtypes: tuple[str, ...]  # every case passed
    expected_dtypes: tuple[str, ...]  # a ledgered expected failure: not validated
    failures: list[tuple[str, str, str]]  # (case id, outcome, rerun command)
    seconds: float
    eager_dtypes: tuple[str, ...] = ()  # passed, but the fuser ran the op eagerly: not validated
    outcome: str = ""  # validated | failed | nothing validated (no dtype to write)
    fuzz: FuzzStage | None = None

    @property
    def ok(self) -> bool:
        return not self.failures and self.cases > 0


def run_op(op: str, backend: str, device: str, log_dir: Path, workers: int = 1) -> Verdict:
    """The op's full conformance through the pytest plugin, in a fresh process (with `workers` > 1,
    pytest-xdist spreads its cases: a reduction's full tier takes most of ten minutes on one process)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="validate-") as report_dir:
        command = full_tier_command(backend, device, specs_for(op))
        command += ["-n", str(workers)] if workers > 1 else ["-p", "no:xdist"]
        command += ["--conformance-report", report_dir]
        env = os.environ | {"FUSER_STRICT": "1", "FUSER_UNVALIDATED": "fuse"}
        log_path = log_dir / f"{op}.log"
        with log_path.open("w") as log:
            subprocess.run(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
        reports = list(Path(report_dir).glob("*.json"))
        results = json.loads(reports[0].read_text())["cases"] if reports else []
    results = [report.case_from_json(case) for case in results]
    return verdict_from(op, results, time.monotonic() - started, log_path)


def verdict_from(op: str, results: list[report.CaseResult], seconds: float, log_path: Path) -> Verdict:
    """The op's verdict from its cases' results: a dtype is validated where every case passed, left out
    where the ledger expects a failure; any other outcome is a failing case, printed with its rerun."""
    by_dtype: dict[str, set[str]] = defaultdict(set)
    failures = []
    for result in results:
        by_dtype[result.key.dtype].add(result.outcome)
        if result.outcome not in ("passed", "xfailed"):
            failures.append((result.key.test_id, result.outcome, rerun_command(result.key, "full")))
    if not results:
        failures.append((op, "no result", f"see {log_path}"))
    return Verdict(
        op=op,
        cases=len(results),
        passed_dtypes=tuple(d for d in DTYPES if by_dtype.get(d) == {"passed"}),
        expected_dtypes=tuple(d for d in DTYPES if "xfailed" in by_dtype.get(d, ())),
        failures=failures,
        seconds=seconds,
    )


def ran_eagerly(op: str, dtypes: tuple[str, ...], device: str) -> list[str]:
    """The dtypes in which the fuser left `op` itself eager (a case that passes so passes vacuously):
    one eager-accepted sample per dtype, compiled with `fuser.explain` (the fuser's public report)."""
    import fuser
    from conformance.harness.runner import Program, expect, fresh_inputs, on_device
    from conformance.specs.samples import iter_samples

    if op in PROXIES:
        return []  # reached through its proxies' decompositions; not called directly
    # A view of a graph input stays an eager alias by design (it copies nothing): a view's lowering is
    # used where its input is computed in a kernel, as in the `producer` context.
    context = "producer" if lowerings.lowerings()[op].kind == "view" else "alone"
    spec, eager = SPECS[op], []
    for dtype in dtypes:
        for sample in iter_samples(spec, dtype, "quick"):
            sample = on_device(sample, device)
            try:
                expect(spec, context, sample, False, 0)
            except Exception:
                continue
            program = Program(spec, context, [sample])
            torch._dynamo.reset()
            report = fuser.explain(
                program.function(), *fresh_inputs(program.inputs), fuser_options={"unvalidated": "fuse"}
            )
            if op in report.eager_calls or report.num_kernels == 0:
                eager.append(dtype)
            break
    torch._dynamo.reset()
    return eager


def fuzz_stage(verdict: Verdict, args: argparse.Namespace) -> FuzzStage:
    """The fuzz stage of a verdict, run only after its conformance cases passed; a failure joins the
    verdict's failing cases (nothing is then written)."""
    if not verdict.ok:
        return FuzzStage("not run", note="conformance failed")
    stage = run_fuzz(
        verdict.op,
        args.backend,
        args.device,
        args.fuzz_examples,
        args.fuzz_out,
        args.logs,
        PROXIES.get(verdict.op, ()),
    )
    if stage.status == "FAILED":
        rerun = fuzz_arguments(verdict.op, args.backend, args.device, args.fuzz_examples, args.fuzz_out)
        verdict.failures.append(fuzz_failure(verdict.op, stage, args.backend, rerun))
    return stage


# --- the manifest file --------------------------------------------------------------------------------

HEADER = """\
# The ops the {backend} backend may fuse on {arch}, each for the dtypes validated here. Written by
# `nox -s validate -- <op>` (python -m conformance.validate): review it as a diff, never edit it by hand
# (CI checks every entry's fingerprint and case count). docs/validation.md explains the fields.
"""


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def commit_id() -> str:
    """HEAD's short hash; '+dirty' when the fuser's sources (not its manifests) differ from it.
    VALIDATE_COMMIT names it instead, for a copied tree whose git metadata is not its sources' (the
    lent GPU's copy of a checkout)."""
    if os.environ.get("VALIDATE_COMMIT"):
        return os.environ["VALIDATE_COMMIT"]
    head = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    return head + ("+dirty" if _git("status", "--porcelain", "--", "fuser/", ":!fuser/manifest") else "")


def render(entries: dict[str, dict], backend: str, arch: str) -> str:
    lines = [HEADER.format(backend=backend, arch=arch)]
    for op in sorted(entries):
        lines.append("[[op]]")
        for field, value in entries[op].items():
            lines.append(f"{field} = {json.dumps(value)}")
        lines.append("")
    return "\n".join(lines)


def read_entries(path: Path, arch: str) -> dict[str, dict]:
    """The file's entries by op, as written. Read leniently: a long run keeps its process's op table,
    and another run may meanwhile have validated an op this process does not know; its entry is kept
    as it is (the fuser's loader and CI check every entry)."""
    if not path.exists():
        return {}
    return {entry["op"]: entry for entry in tomllib.loads(path.read_text()).get("op", [])}


def write_entry(path: Path, verdict: Verdict, backend: str, device: str, arch: str) -> dict | None:
    """Add or replace the op's entry; None (nothing written) when no dtype the backend lowers passed."""
    dtypes = list(verdict.passed_dtypes)
    if backend == "fuser":
        lowered = lowerings.lowerings()[verdict.op].dtypes
        dtypes = [d for d in dtypes if d in lowered]
        verdict.eager_dtypes = tuple(ran_eagerly(verdict.op, tuple(dtypes), device))
        dtypes = [d for d in dtypes if d not in verdict.eager_dtypes]
    if not dtypes:
        return None
    entry = {
        "op": verdict.op,
        "arch": arch,
        "dtypes": dtypes,
        "torch": torch.__version__.split("+")[0],
        "triton": _triton_version(),
        "date": datetime.date.today().isoformat(),
        "cases": verdict.cases,
        **({"fuzz": verdict.fuzz.passed} if verdict.fuzz and verdict.fuzz.status == "passed" else {}),
        "commit": commit_id(),
        "fingerprint": lowerings.fingerprint(verdict.op, arch) if backend == "fuser" else "-",
    }
    if device == "cuda":
        entry["device"] = torch.cuda.get_device_name()
    path.parent.mkdir(parents=True, exist_ok=True)
    # Two validation runs (shards) may finish an op at once: each rewrites the file under a lock.
    with path.with_suffix(".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = read_entries(path, arch) | {verdict.op: entry}
        temporary = path.with_suffix(".toml.tmp")
        temporary.write_text(render(entries, backend, arch))
        temporary.replace(path)
    return entry


def _triton_version() -> str:
    import triton

    return triton.__version__


# --- progress -----------------------------------------------------------------------------------------


def load_progress(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def save_progress(path: Path, progress: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(progress, indent=1, sort_keys=True) + "\n")


# --- the command --------------------------------------------------------------------------------------


def unvalidated(manifest: Path, arch: str) -> list[str]:
    entries = read_entries(manifest, arch)
    return [
        op
        for op in lowerings.lowerings()
        if op not in entries or entries[op]["fingerprint"] != lowerings.fingerprint(op, arch)
    ]


def table(verdicts: list[Verdict]) -> str:
    rows = [
        "| op | cases | verdict | dtypes passed | expected failures (not validated) | ran eagerly | fuzz "
        "| time |"
    ]
    rows.append("| --- | ---: | --- | --- | --- | --- | --- | ---: |")
    for v in verdicts:
        rows.append(
            f"| {v.op} | {v.cases} | {v.outcome.replace('failed', 'FAILED')} | {', '.join(v.passed_dtypes) or '-'} | "
            f"{', '.join(v.expected_dtypes) or '-'} | {', '.join(v.eager_dtypes) or '-'} | "
            f"{v.fuzz.cell() if v.fuzz else '-'} | {v.seconds:.0f} s |"
        )
    return "\n".join(rows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m conformance.validate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("ops", nargs="*", help="aten overloads, e.g. aten.add.Tensor")
    parser.add_argument("--all-unvalidated", action="store_true", help="every lowered op with no fresh entry")
    parser.add_argument("--backend", default="fuser")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--manifest-dir", type=Path, default=None)
    parser.add_argument("--progress", type=Path, default=None, help="resume file (default under reports/)")
    parser.add_argument("--retry-failed", action="store_true", help="retry ops that failed before")
    parser.add_argument("--shard", default=None, help="K/N: only the K-th of N equal shares of the ops")
    parser.add_argument("--logs", type=Path, default=ROOT / "reports" / "validate" / "logs")
    parser.add_argument(
        "--batch",
        action="store_true",
        help="all the ops' cases in one pytest run over the cores, then fuzz groups of ops (resumable)",
    )
    parser.add_argument(
        "--workers",
        default=None,
        help="pytest-xdist workers (a number, or auto: one per core): for each op's cases (default 1), "
        "or for the whole batch and its fuzz groups (default auto)",
    )
    parser.add_argument(
        "--fuzz-examples",
        type=int,
        default=None,
        help=f"random programs calling the op, after its cases pass (default {DEFAULT_FUZZ_EXAMPLES}; 0: off)",
    )
    parser.add_argument(
        "--fuzz-passes",
        type=int,
        default=None,
        help=f"--batch: programs calling the op that must pass (default {DEFAULT_FUZZ_PASSES}; 0: off)",
    )
    parser.add_argument(
        "--fuzz-out", type=Path, default=ROOT / "reports" / "validate" / "fuzz", help="where repros go"
    )
    args = parser.parse_args(argv)
    if args.batch and args.fuzz_examples is not None:
        parser.error("--batch fuzzes groups of ops until each has --fuzz-passes N passing programs")
    if not args.batch and args.fuzz_passes is not None:
        parser.error("--fuzz-passes is the batch's (--batch); one op at a time takes --fuzz-examples N")
    args.fuzz_examples = DEFAULT_FUZZ_EXAMPLES if args.fuzz_examples is None else args.fuzz_examples
    args.fuzz_passes = DEFAULT_FUZZ_PASSES if args.fuzz_passes is None else args.fuzz_passes
    if min(args.fuzz_examples, args.fuzz_passes) < 0:
        parser.error("--fuzz-examples and --fuzz-passes: 0 (off) or more")
    args.workers = args.workers or ("auto" if args.batch else "1")
    if not (args.workers == "auto" or (args.workers.isdigit() and int(args.workers) >= 1)):
        parser.error(f"--workers {args.workers!r}: a number (1 or more) or auto")
    args.fuzz_out = args.fuzz_out.resolve()  # the fuzz run's directory is the repository's
    if bool(args.ops) == args.all_unvalidated:
        parser.error("name the ops to validate, or give --all-unvalidated (not both)")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: this machine has no CUDA device")
    if args.all_unvalidated and args.backend != "fuser":
        parser.error("--all-unvalidated lists the fuser's lowered ops; name the ops for another backend")
    for op in args.ops:
        specs_for(op)
    if args.shard is not None:
        k, _, n = args.shard.partition("/")
        if not (k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
            parser.error(f"--shard {args.shard!r}: expected K/N with 1 <= K <= N, e.g. 2/3")
        args.shard = (int(k), int(n))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    arch = arch_for(args.device)
    directory = args.manifest_dir or (
        validation.MANIFEST_DIR if args.backend == "fuser" else ROOT / "reports" / "validate" / args.backend
    )
    manifest = validation.manifest_path(arch, directory)
    shard = f"-shard{args.shard[0]}of{args.shard[1]}" if args.shard else ""
    progress_path = (
        args.progress or ROOT / "reports" / "validate" / f"progress-{args.backend}-{arch}{shard}.json"
    )
    progress = load_progress(progress_path)
    ops = unvalidated(manifest, arch) if args.all_unvalidated else list(args.ops)
    if args.shard:  # sessions or machines share the work; each resumes from its own progress
        k, n = args.shard
        ops = ops[k - 1 :: n]
    args.logs.mkdir(parents=True, exist_ok=True)
    fingerprints = {op: lowerings.fingerprint(op, arch) if args.backend == "fuser" else "-" for op in ops}
    skipped = [
        op  # failed (or validated nothing) at this lowering already
        for op in ops
        if args.all_unvalidated
        and not args.retry_failed
        and progress.get(op, {}).get("fingerprint") == fingerprints[op]
    ]
    ops = [op for op in ops if op not in skipped]

    def finish(verdict: Verdict) -> None:
        """Write the op's entry if nothing unexpected failed, and record its outcome in the progress."""
        entry = write_entry(manifest, verdict, args.backend, args.device, arch) if verdict.ok else None
        verdict.outcome = "validated" if entry else "failed" if verdict.failures else "nothing validated"
        print(
            f"    {verdict.op}: {verdict.outcome}: {verdict.cases} cases in {verdict.seconds:.0f} s; "
            f"fuzz: {verdict.fuzz.cell()}",
            flush=True,
        )
        progress[verdict.op] = {
            "outcome": verdict.outcome,
            "fingerprint": fingerprints[verdict.op],
            "cases": verdict.cases,
            "fuzz": verdict.fuzz.cell(),
            "seconds": round(verdict.seconds, 1),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        save_progress(progress_path, progress)

    if args.batch:
        from conformance.validate import batch as validate_batch  # it builds on this module

        state = progress_path.with_suffix(".batch.jsonl")  # the batch's cases and fuzz groups, as logged
        verdicts = validate_batch.validate_all(ops, fingerprints, args, state, finish)
    else:
        verdicts = validate_each(ops, args, finish)
    if skipped:
        print(
            f"skipped {len(skipped)} op(s) that failed before at the same lowering (--retry-failed): "
            + ", ".join(skipped)
        )
    print()
    print(table(verdicts))
    failed = [v for v in verdicts if v.failures]
    for v in failed:
        log = args.logs / ("batch.log" if args.batch else f"{v.op}.log")
        print(f"\n{v.op}: nothing written; failing cases (log: {log}):")
        for case, outcome, command in v.failures:
            print(f"  {case}: {outcome}\n    rerun: {command}")
    written = [v for v in verdicts if v.outcome == "validated"]
    if written:
        print(f"\nwrote {len(written)} entr{'y' if len(written) == 1 else 'ies'} to {manifest}")
    return 1 if failed else 0


def worker_count(workers: str) -> int:
    return cores.available() if workers == "auto" else int(workers)


def validate_each(ops: list[str], args: argparse.Namespace, finish) -> list[Verdict]:
    """One op at a time: its own pytest process, then its own fuzz stage."""
    verdicts = []
    runs: dict[tuple[str, ...], Verdict] = {}
    for number, op in enumerate(ops, 1):
        print(f"[{number}/{len(ops)}] {op} ...", flush=True)
        # Proxies share their conformance ops (the prims all run aten.var.correction): run those once;
        # each op gets its own copy of the run's verdict (writing the entry fills in its outcome).
        specs = specs_for(op)
        if specs not in runs:
            runs[specs] = run_op(op, args.backend, args.device, args.logs, worker_count(args.workers))
        verdict = dataclasses.replace(runs[specs], op=op, failures=list(runs[specs].failures))
        verdicts.append(verdict)
        verdict.fuzz = fuzz_stage(verdict, args)
        finish(verdict)
    return verdicts
