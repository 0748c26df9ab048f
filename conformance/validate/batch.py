"""Validating many ops in one run (`python -m conformance.validate --batch ...`, docs/validation.md).

The conformance stage is one pytest invocation over the union of the ops' full-tier cases (a few, of at
most CASES_PER_RUN cases each, when there are many: `chunks`), spread by pytest-xdist over the cores (on CUDA, worker k takes GPU k mod the GPU count: conformance/plugin.py),
with the lowerings forced on; each case's result is grouped back to its op, whose verdict is decided
exactly as for one op's run (`validate.verdict_from`). The fuzz stage then runs the ops that passed in
groups of a few, each group one process drawing programs that call several of its ops
(conformance/fuzz/batch.py), several groups at a time.

The batch's state is one JSON-lines file that only grows: a line naming the ops a pytest run launches
and their fingerprints, then a line per case as it finishes (conformance/harness/case_log.py), a line per
finished fuzz group, and a line per op whose outcome is final (entry written or failure reported). A
run stopped midway resumes from it: cases and fuzz groups logged at today's fingerprints are read back,
not run again.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from conformance.fuzz.strategies import eager_dtypes
from conformance.harness import cores
from conformance.harness.report import CaseResult, case_from_json
from conformance.plugin import cases, full_tier_command
from conformance.validate import PROXIES, Verdict, specs_for, verdict_from, worker_count
from conformance.validate.fuzz import (
    FuzzStage,
    fuzz_failure,
    fuzz_skip_reason,
    group_arguments,
    run_fuzz_group,
)

ROOT = Path(__file__).resolve().parents[2]
FUZZ_GROUP = 4  # ops per fuzz group: each program holds a node of each, and a few drawn ones
PROGRESS_EVERY_S = 60


@dataclass
class BatchState:
    """What the state file says: each op's logged cases and fuzz stage, at the fingerprint they were
    made at (an op launched again starts over)."""

    path: Path
    fingerprints: dict[str, str] = field(default_factory=dict)
    cases: dict[str, dict[str, dict]] = field(default_factory=dict)  # op -> case id -> case
    fuzz: dict[str, tuple[str, dict]] = field(default_factory=dict)  # op -> (fingerprint, stage)

    @classmethod
    def load(cls, path: Path, specs_of: Callable[[str], tuple[str, ...]]) -> BatchState:
        state = cls(path)
        launched: dict[str, list[str]] = {}  # conformance op -> the ops whose cases it runs
        for line in _lines(path):
            if "launch" in line:
                launched = {}
                for op, fingerprint in line["launch"].items():
                    if state.fingerprints.get(op) != fingerprint:  # else it goes on with the cases it lacked
                        state.fingerprints[op], state.cases[op] = fingerprint, {}
                    for spec in specs_of(op):
                        launched.setdefault(spec, []).append(op)
            elif "fuzz" in line:
                state.fuzz.update((op, (line["fingerprints"][op], s)) for op, s in line["fuzz"].items())
            elif "finalized" in line:
                for op in line["finalized"]:
                    state.cases.pop(op, None), state.fuzz.pop(op, None), state.fingerprints.pop(op, None)
            else:
                for op in launched.get(line["op"], ()):
                    state.cases[op][line["id"]] = line
        return state

    def done(self, op: str, fingerprint: str) -> set[str]:
        """The ids of the op's cases logged at this fingerprint."""
        return set(self.cases.get(op, {})) if self.fingerprints.get(op) == fingerprint else set()

    def results(self, op: str, fingerprint: str, expected: set[str]) -> list[CaseResult] | None:
        """The op's logged results, if every expected case is there at this fingerprint."""
        logged = self.cases.get(op, {})
        if self.fingerprints.get(op) != fingerprint or not expected <= logged.keys():
            return None
        return [case_from_json(logged[case]) for case in sorted(expected)]

    def fuzz_stage(self, op: str, fingerprint: str) -> FuzzStage | None:
        found = self.fuzz.get(op)
        return FuzzStage(**found[1]) if found and found[0] == fingerprint else None

    def append(self, line: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as state:
            state.write(json.dumps(line) + "\n")


def _lines(path: Path) -> Iterator[dict]:
    if not path.exists():
        return
    for text in path.read_text().splitlines():
        try:
            yield json.loads(text)
        except json.JSONDecodeError:
            continue  # a line cut short when the run was killed


# The most cases one pytest run holds (see `chunks`).
CASES_PER_RUN = 2500


def run_cases(
    specs: list[str],
    done: set[str],
    backend: str,
    device: str,
    workers: str,
    state_path: Path,
    log_path: Path,
) -> int:
    """One pytest run over the full tier of these conformance ops but the `done` cases, each case logged
    as it finishes."""
    command = full_tier_command(backend, device, specs)
    # worksteal: a worker that runs out takes queued cases from the others (the large cases are uneven)
    command += ["-p", "no:xdist"] if workers == "1" else ["-n", workers, "--dist", "worksteal"]
    skip = state_path.with_suffix(".done")
    skip.write_text("".join(f"{case}\n" for case in sorted(done)))
    command += [
        "-p",
        "conformance.harness.case_log",
        "--case-log",
        str(state_path),
        "--case-log-skip",
        str(skip),
    ]
    env = os.environ | {"FUSER_STRICT": "1", "FUSER_UNVALIDATED": "fuse"}
    before = _count_lines(state_path)
    with log_path.open("w") as log:
        run = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        while True:
            try:
                return run.wait(timeout=PROGRESS_EVERY_S)
            except subprocess.TimeoutExpired:  # a long run says how far it is
                print(f"    {_count_lines(state_path) - before} cases done", flush=True)


def chunks(ops: list[str], case_counts: dict[str, int], limit: int | None = None) -> list[list[str]]:
    """The ops in order, cut into pytest runs of at most `limit` cases (an op bigger than that alone).
    A worker's memory grows with the cases it compiles (Dynamo's and the backend's caches): one run of
    all 170 ops' 9,830 cases on 2 workers grew one worker to 15 GB and the machine's 24 GB killed it
    four times (records/validate-cpu-all-2026-11-27.md); a fresh run every few thousand cases costs a
    few seconds of start-up."""
    limit = limit or CASES_PER_RUN
    runs: list[list[str]] = []
    size = 0
    for op in ops:
        if not runs or size + case_counts[op] > limit:
            runs.append([])
            size = 0
        runs[-1].append(op)
        size += case_counts[op]
    return runs


def _count_lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def fuzz_groups(ops: list[str], size: int = FUZZ_GROUP) -> list[tuple[str, ...]]:
    """Ops that take the same dtypes go together, so that a program resolves a node of each (a bitwise
    op among float ops would find an integer operand in a quarter of the programs)."""
    ordered = sorted(ops, key=lambda op: (eager_dtypes(op), op))
    return [tuple(ordered[i : i + size]) for i in range(0, len(ordered), size)]


def run_fuzz_groups(
    groups: list[tuple[str, ...]], workers: int, run: Callable[[tuple[str, ...]], dict[str, FuzzStage]]
) -> Iterator[tuple[tuple[str, ...], dict[str, FuzzStage]]]:
    """Each group with its stages as it finishes, `workers` groups at a time (each its own process)."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        running = {pool.submit(run, group): group for group in groups}
        for done in as_completed(running):
            yield running[done], done.result()


def fuzz_line(stages: dict[str, FuzzStage], fingerprints: dict[str, str]) -> dict:
    return {"fuzz": {op: asdict(s) for op, s in stages.items()}, "fingerprints": fingerprints}


def fuzz_group_runner(
    groups: list[tuple[str, ...]], workers: int, args: argparse.Namespace
) -> Callable[[tuple[str, ...]], dict[str, FuzzStage]]:
    """Runs a group in its own process, with its share of the cores for eager's kernels and, on CUDA,
    the next GPU (group k on GPU k mod the GPU count, as the conformance plugin spreads its workers)."""
    gpus = torch.cuda.device_count() if args.device == "cuda" else 0

    def run(group: tuple[str, ...]) -> dict[str, FuzzStage]:
        env = {"OMP_NUM_THREADS": str(cores.share(workers))}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = str(groups.index(group) % gpus)
        log = args.logs / f"fuzz-{group[0]}-and-{len(group) - 1}.log"
        return run_fuzz_group(group, args.backend, args.device, args.fuzz_passes, args.fuzz_out, log, env)

    return run


def validate_all(
    ops: list[str], fingerprints: dict[str, str], args: argparse.Namespace, state_path: Path, finish: Callable
) -> list[Verdict]:
    """Validate `ops` as one batch, resuming from `state_path`; `finish(verdict)` writes each op's
    entry (or records its failure) as soon as its verdict is whole."""
    expected = {
        op: {key.test_id for spec in specs_for(op) for key in cases(spec, "full", args.backend, args.device)}
        for op in ops
    }
    state = BatchState.load(state_path, specs_for)
    log = args.logs / "batch.log"
    to_run = [op for op in ops if state.results(op, fingerprints[op], expected[op]) is None]
    if to_run:
        done = {case for op in to_run for case in state.done(op, fingerprints[op]) & expected[op]}
        left = {op: expected[op] - done for op in to_run}
        runs = chunks([op for op in to_run if left[op]], {op: len(left[op]) for op in to_run})
        print(
            f"conformance: {sum(map(len, left.values()))} cases of {len(to_run)} ops ({len(done)} logged by an "
            f"earlier run), {len(runs)} pytest run(s) of at most {CASES_PER_RUN} cases ({args.workers} workers; "
            f"log: {log})"
        )
        started = time.monotonic()
        for number, chunk in enumerate(runs):
            specs = sorted({spec for op in chunk for spec in specs_for(op)})
            state.append({"launch": {op: fingerprints[op] for op in chunk}})
            run_log = log if len(runs) == 1 else log.with_name(f"{log.stem}-{number + 1}{log.suffix}")
            run_cases(specs, done, args.backend, args.device, args.workers, state_path, run_log)
        print(f"    {time.monotonic() - started:.0f} s", flush=True)
        state = BatchState.load(state_path, specs_for)
    verdicts = {op: op_verdict(op, state, fingerprints[op], expected[op], log) for op in ops}

    def done(op: str) -> None:
        finish(verdicts[op])
        state.append({"finalized": [op]})

    to_fuzz = []
    for op, verdict in verdicts.items():
        verdict.fuzz = _fuzz_without_running(op, verdict, args, state.fuzz_stage(op, fingerprints[op]))
        if verdict.fuzz is None:
            to_fuzz.append(op)
        else:
            done(op)  # its entry is written now, not after the fuzz stage
    groups = fuzz_groups(to_fuzz)
    if groups:
        print(
            f"fuzz: {len(groups)} groups of up to {FUZZ_GROUP} ops, {args.fuzz_passes} passing programs an op"
        )
    workers = worker_count(args.workers)
    for group, stages in run_fuzz_groups(groups, workers, fuzz_group_runner(groups, workers, args)):
        state.append(fuzz_line(stages, {op: fingerprints[op] for op in stages}))
        for op, stage in stages.items():
            verdicts[op].fuzz = stage
            if stage.status == "FAILED":
                rerun = group_arguments(group, args.backend, args.device, args.fuzz_passes, args.fuzz_out)
                verdicts[op].failures.append(fuzz_failure(op, stage, args.backend, rerun))
            done(op)
    return list(verdicts.values())


def op_verdict(op: str, state: BatchState, fingerprint: str, expected: set[str], log: Path) -> Verdict:
    """The op's verdict from its logged cases; a case the run did not log fails it (see the log)."""
    results = state.results(op, fingerprint, expected)
    if results is not None:
        return verdict_from(op, results, sum(r.duration_s for r in results), log)
    logged = [case_from_json(c) for case_id, c in state.cases.get(op, {}).items() if case_id in expected]
    verdict = verdict_from(op, logged, sum(r.duration_s for r in logged), log)
    missing = len(expected) - len(logged)
    verdict.failures.append((op, f"{missing} of its {len(expected)} cases have no result", f"see {log}"))
    return verdict


def _fuzz_without_running(
    op: str, verdict: Verdict, args: argparse.Namespace, logged: FuzzStage | None
) -> FuzzStage | None:
    """The op's fuzz stage where it needs no group: not run, off, skipped, or passed already."""
    if not verdict.ok:
        return FuzzStage("not run", note="conformance failed")
    if args.fuzz_passes == 0:
        return FuzzStage("off", note="--fuzz-passes 0")
    reason = fuzz_skip_reason(op, PROXIES.get(op, ()))
    if reason:
        return FuzzStage("skipped", note=reason)
    # A group that passed is not fuzzed again; one that failed is (so that its failure is shown).
    return logged if logged is not None and logged.status == "passed" else None
