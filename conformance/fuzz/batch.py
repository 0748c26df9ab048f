"""Fuzzing several ops at once (validation's batched fuzz stage): programs that each call several of
them, drawn in rounds until every op has `passes` passing programs that call it.

Each round is one `fuzz` run whose programs each hold a node of every op still short of its target (a
program that resolves only some of them counts for those). A failure is shrunk as in any run and blamed
on the required ops the shrunk program still calls — or, where the shrinking left them all out, on those
the first failing program called — and only those ops fail; the others go on in the next round. An op
that a round gave no passing program stops there, short of its target (its count says how short).
Every round draws from the seed plus its number: the same command draws the same programs.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from conformance.fuzz.run import FuzzReport, fuzz
from conformance.fuzz.strategies import calls

MAX_ROUNDS = 5
# Draws per passing program still wanted: some draws repeat a program, fail to resolve the op or are
# rejected (about 140 of an op's 200 draws passed in the one-op stage, docs/validation.md).
DRAWS_PER_PASS = 1.5


@dataclass
class BatchReport:
    passed: Counter = field(default_factory=Counter)  # op -> passing programs that called it
    failed: dict[str, FuzzReport] = field(
        default_factory=dict
    )  # op -> the run whose failure it is blamed for
    vacuous: dict[str, FuzzReport] = field(default_factory=dict)  # op -> a round that proved too little
    rounds: list[FuzzReport] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.rounds)

    def counts(self) -> Counter:
        return sum((r.counts for r in self.rounds), Counter())


def blamed(report: FuzzReport, required: tuple[str, ...]) -> list[str]:
    """The required ops a failing run is blamed on: those its shrunk program calls, else those of the
    first program that failed."""
    for program in (report.failure, report.first_found):
        found = [op for op in required if calls(program, op)]
        if found:
            return found
    return list(required)


def fuzz_batch(
    ops: tuple[str, ...],
    passes: int,
    *,
    seed: int,
    backend: str = "fuser",
    device: str = "cpu",
    profile: str = "ci",
    out: Path = Path("reports/fuzz"),
) -> BatchReport:
    batch = BatchReport()
    wanted = list(ops)
    for number in range(MAX_ROUNDS):
        wanted = [op for op in wanted if batch.passed[op] < passes]
        if not wanted:
            break
        short = max(passes - batch.passed[op] for op in wanted)
        report = fuzz(
            backend,
            device,
            profile,
            examples=math.ceil(short * DRAWS_PER_PASS),
            seed=seed + number,
            out=out,
            require_op=tuple(wanted),
        )
        batch.rounds.append(report)
        batch.passed.update(report.passed_by_op)
        if report.failure is not None:
            for op in blamed(report, tuple(wanted)):
                batch.failed[op] = report
        elif report.mostly_vacuous:
            batch.vacuous.update(dict.fromkeys(wanted, report))
        # An op a whole round gave nothing to is not drawn again: it would give nothing again (a round
        # that failed stopped early: its other ops go on).
        wanted = [
            op
            for op in wanted
            if op not in batch.failed
            and op not in batch.vacuous
            and (report.failure is not None or report.passed_by_op[op] > 0)
        ]
    return batch
