"""The gate and the update.

`run_gate` measures head — and, given `against`, the base revision's tree beside it, unless that is
head's own tree (a clean clone of main against main) — in rounds of fresh processes
(`perfgate.rounds`), then judges every workload and metric (`perfgate.verdict`):

- against base (A/B): counts exactly, timings and instruction counts by the confidence interval of
  head / base;
- against this architecture's committed file: counts always; timings and instruction counts only
  with `absolute` (on a machine that has just passed an A/A check), otherwise shown as history.

A GPU gate runs at least three rounds, a CPU gate one (its counts do not drift between processes the
way GPU timings do). While a verdict is inconclusive and the time budget allows, another round
measures just those workloads. `run_update` measures in this process and rewrites this device's
section of the file.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from perfgate import baselines
from perfgate.machine import Machine
from perfgate.metrics import METRICS, Metric, Rule, Sample
from perfgate.rounds import Rounds, Samples
from perfgate.tiers import Tier
from perfgate.trees import Tree, base_tree, head_tree, is_head_tree
from perfgate.verdict import Status, Verdict, failed, judge, pooled
from perfgate.workloads import Workload

DEFAULT_ROUNDS = {"gpu": 3, "cpu": 1}
# Exit statuses: 0 pass, 1 a regression (or an improvement under --strict), 2 bad input, 3 no regression
# but verdicts still inconclusive when the time budget ran out.
PASS, FAIL, BAD_INPUT, INCONCLUSIVE = 0, 1, 2, 3


@dataclass(frozen=True)
class GateRequest:
    tier: str
    workloads: list[str]
    backend: str = "fuser"
    against: str | None = None
    aa: bool = False  # measure `against` beside head even where it is head's own tree
    absolute: bool = False
    strict: bool = False
    instructions: bool = True
    rounds: int | None = None  # None: DEFAULT_ROUNDS of the tier
    budget_s: float = 420.0  # no extra round for inconclusive verdicts starts after this
    warm_processes: int = 0  # GPU tier: compile every workload beforehand in this many processes
    seed: int | None = None  # None: drawn, and recorded in the result
    baseline_dir: Path = baselines.BASELINE_DIR


@dataclass
class GateResult:
    request: GateRequest
    machine: Machine
    trees: list[Tree]
    baseline_path: Path
    device_has_baseline: bool
    verdicts: list[Verdict]
    seed: int
    processes: dict[str, int]  # tree role -> measuring processes run
    samples: dict[str, Samples]  # tree role -> every process's samples
    planted: dict[str, list[float]]  # workload -> testing-only kernel slowdowns achieved in head
    seconds: float

    @property
    def failed(self) -> bool:
        return failed(self.verdicts, self.request.strict)

    @property
    def exit_status(self) -> int:
        if self.failed:
            return FAIL
        return INCONCLUSIVE if any(v.status is Status.INCONCLUSIVE for v in self.verdicts) else PASS


def _pooled(samples: list[Sample | None] | None) -> Sample | None:
    return None if not samples or None in samples else pooled(samples)


def _against_file(
    workload: str,
    metric: Metric,
    recorded: Sample | None,
    now: Sample | None,
    file: str,
    absolute: bool,
    seed: int,
) -> Verdict:
    if metric.rule is Rule.INTERVAL and not absolute:
        return Verdict(
            workload, metric, recorded, now, Status.HISTORY if recorded else Status.NO_BASELINE, file
        )
    return judge(workload, metric, recorded, now, file, seed)


def judge_samples(
    samples: dict[str, Samples], machine: Machine, request: GateRequest, seed: int
) -> tuple[list[Verdict], Path, bool]:
    """Every verdict on what was measured, the committed file's path, and whether it knows this device."""
    path = baselines.baseline_path(machine.architecture, request.baseline_dir)
    expected, device_known = baselines.expected(baselines.load(path), request.backend, machine.device)
    verdicts = []
    for workload in request.workloads:
        measured = samples["head"].get(workload, {})
        for name, metric in METRICS.items():
            if name not in measured:
                continue
            now = _pooled(measured[name])
            if "base" in samples:
                verdicts.append(
                    # A base tree whose backend predates a metric (a new hook) has nothing to judge by.
                    judge(workload, metric, _pooled(samples["base"][workload].get(name)), now, "base", seed)
                )
                if metric.rule is Rule.INFO or (metric.rule is Rule.INTERVAL and not request.absolute):
                    continue  # an A/B table shows the file only where it judges
            recorded = expected.get(workload, {}).get(name)
            verdict = _against_file(workload, metric, recorded, now, path.name, request.absolute, seed)
            if verdict.status is Status.NO_BASELINE and metric.per_device and not device_known:
                verdict = Verdict(workload, metric, None, now, Status.NO_DEVICE_BASELINE, path.name)
            verdicts.append(verdict)
    return verdicts, path, device_known


def run_gate(request: GateRequest, log: Callable[[str], None] | None = None) -> GateResult:
    log = log or partial(print, flush=True)
    started = time.monotonic()
    seed = random.SystemRandom().randrange(2**31) if request.seed is None else request.seed
    minimum = request.rounds or DEFAULT_ROUNDS[request.tier]
    with ExitStack() as stack:
        trees = [head_tree(committed=request.against is not None)]
        if request.against and not request.aa and is_head_tree(request.against):
            log(
                f"{request.against} is head's own tree: no A/B (it could find only noise; --aa measures "
                "it twice anyway); head alone, its counts judged against the committed file"
            )
        elif request.against:
            trees.append(stack.enter_context(base_tree(request.against)))
        instructions = request.instructions
        if instructions and request.tier == "cpu" and len(trees) == 1 and not request.absolute:
            # Without a base tree, instruction counts are judged only against the file, and only with
            # --absolute: callgrind's minutes would measure what nothing judges.
            log("instruction counts: with no base tree they are judged only with --absolute; not counted")
            instructions = False
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="perfgate-")))
        spec = {"tier": request.tier, "backend": request.backend, "instructions": instructions}
        log(f"measuring {' and '.join(f'{t.role} {t.commit[:10]}' for t in trees)}; order seed {seed}")
        rounds = Rounds(trees, spec, seed, scratch, log)
        if request.tier == "gpu" and request.warm_processes:
            rounds.warm(list(request.workloads), request.warm_processes)
        pending, done = list(request.workloads), 0
        while pending:
            rounds.run(pending)
            done += 1
            verdicts, path, device_known = judge_samples(rounds.samples, rounds.machine, request, seed)
            if done >= minimum:
                pending = sorted({v.workload for v in verdicts if v.status is Status.INCONCLUSIVE})
                if time.monotonic() - started > request.budget_s:
                    break
    return GateResult(
        request,
        rounds.machine,
        trees,
        path,
        device_known,
        verdicts,
        seed,
        rounds.processes,
        rounds.samples,
        rounds.planted,
        time.monotonic() - started,
    )


def run_update(tier: Tier, workloads: list[Workload], baseline_dir: Path = baselines.BASELINE_DIR) -> Path:
    machine = tier.machine
    path = baselines.baseline_path(machine.architecture, baseline_dir)
    measured = tier.measure(workloads)
    baselines.write(path, baselines.updated(baselines.load(path), machine, tier.backend.name, measured))
    return path
