"""Measuring in rounds of fresh processes: each round starts one measuring process per tree
(`perfgate.worker`) and adds what each measured to its tree's samples. The seed draws the first
round's order and each round reverses the one before (base, head, head, base, …), so a drift over the
run weighs on both trees alike. Processes run one at a time, so the trees never share the device; a process is killed with
everything it started when the gate stops early (an error, Ctrl-C).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from perfgate import planted
from perfgate.machine import Machine
from perfgate.metrics import Sample
from perfgate.trees import GateError, Tree

PROCESS_TIMEOUT_S = 1800
GROUP_EXIT_S = 10  # how long `_stop` waits for a killed process group to be gone
# The gate stops on these (cli.py: SIGTERM unwinds as Ctrl-C does); held while a process starts.
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM}
# workload -> metric -> one sample per process (None where the metric could not be measured)
Samples = dict[str, dict[str, list[Sample | None]]]


UNPINNED_ENV = "PERFGATE_UNPINNED"


def measuring_cpus() -> set[int] | None:
    """The CPU every GPU-tier measuring process runs on: the last this process may use (the first ones
    take more of the system's interrupts), or None where pinning is off or impossible. One CPU, not
    two: a training step hands its backward to autograd's device thread and waits; on two CPUs that
    hand-off is a cross-core wake-up whose cost moves from process to process (add_layer_norm_backward
    at 332-755 us a call over 26 processes of one lent H100, never settling at 10%), on one it is a
    context switch (290-316 us in 5 of 6 processes; records/perfgate-settle-h100-2026-11-27.md)."""
    if os.environ.get(UNPINNED_ENV) == "1" or not hasattr(os, "sched_getaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    return set(allowed[-1:]) if len(allowed) >= 4 else None


def _environment(tree: Tree) -> dict[str, str]:
    """The tree first on PYTHONPATH; the testing-only slowdowns for head only; one hash seed."""
    env = {k: v for k, v in os.environ.items() if tree.role == "head" or k != planted.ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tree.path), os.environ.get("PYTHONPATH")]))
    env["PYTHONHASHSEED"] = "0"
    return env


def _start(command: list[str], tree: Tree, stdout: int) -> subprocess.Popen:
    """A process of `tree`: in its directory, its environment, a process group of its own (valgrind's
    children included, killed together by `_stop`)."""
    return subprocess.Popen(
        command,
        cwd=tree.path,  # `python -m` puts the working directory first on sys.path: it must be the tree
        env=_environment(tree),
        stdout=stdout,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def _stop(process: subprocess.Popen) -> None:
    """Kills the process's group and waits until every member is gone: a grandchild (valgrind's child)
    is not ours to wait for, and under load it can outlive our child for a while, still running in the
    worktree the gate is about to remove."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + GROUP_EXIT_S
    while time.monotonic() < deadline:
        try:
            os.killpg(process.pid, 0)  # raises once no process of the group is left
        except ProcessLookupError:
            return
        time.sleep(0.01)


@contextlib.contextmanager
def _stops_held():
    """The gate's stop signals wait until the block ends: a process started inside it is on the caller's
    list before a stop can unwind (a stop between a start and its `finally` left a process running).
    A signal mask would not do: it holds only the calling thread, and the gate has other threads (torch's),
    to which the kernel then delivers the signal; its handler still ran in the main thread, inside
    Popen, and the started process was never on the list (CI at 548fc82). So the handlers are swapped
    for ones that note the signal, and a noted signal is raised again once the block is done."""
    noted: list[int] = []
    previous = {number: signal.signal(number, lambda n, _frame: noted.append(n)) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if noted:
            signal.raise_signal(noted[0])


def _run(command: list[str], tree: Tree, cpus: set[int] | None = None) -> tuple[int, str]:
    started: list[subprocess.Popen] = []
    try:
        with _stops_held():
            started.append(_start(command, tree, subprocess.PIPE))
        (process,) = started
        if cpus:  # before the interpreter has started any thread: they all inherit it
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(process.pid, cpus)
        output, _ = process.communicate(timeout=PROCESS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise GateError(f"the {tree.role} tree's measuring process ran past {PROCESS_TIMEOUT_S} s") from None
    finally:
        for process in started:
            _stop(process)
    return process.returncode, output


class Rounds:
    def __init__(
        self,
        trees: list[Tree],
        spec: dict,
        seed: int,
        scratch: Path,
        log: Callable[[str], None],
    ):
        self.spec = spec  # tier, backend, instructions: what every process measures with
        self.order = random.Random(seed).sample(trees, len(trees))
        self.scratch = scratch
        self.log = log
        self.samples: dict[str, Samples] = {tree.role: {} for tree in trees}
        self.processes = dict.fromkeys(self.samples, 0)
        self.machine: Machine | None = None
        self.planted: dict[str, list[float]] = {}  # workload -> kernel slowdowns achieved in head
        self.cpus = measuring_cpus() if spec["tier"] == "gpu" else None
        if self.cpus:
            log(f"measuring processes pinned to CPUs {sorted(self.cpus)} (PERFGATE_UNPINNED=1: not pinned)")

    def warm(self, workloads: list[str], processes: int) -> None:
        """Before the first round of a GPU gate: every tree compiles every workload once, in up to
        `processes` processes at a time (one per tree and workload; none is timed), so that the
        measuring processes find their kernels in the on-disk caches. On a fresh machine the first
        measuring process otherwise compiled everything alone: 419 s of a 570 s budget on an H200
        (docs/perfgate.md, 2026-11-26). A workload that fails here fails again where it is measured."""
        started = time.monotonic()
        running: list[subprocess.Popen] = []
        try:
            for number, (tree, name) in enumerate((t, n) for t in self.order for n in workloads):
                while len(running) >= processes:
                    running[0].wait(timeout=PROCESS_TIMEOUT_S)  # then off the list: a stop still finds it
                    running.pop(0)
                spec = self.scratch / f"warm-{number}-{tree.role}-{name}.json"
                spec.write_text(json.dumps(self.spec | {"workloads": [name], "warm": True}))
                command = [sys.executable, "-m", "perfgate.worker", str(spec), f"{spec}.out"]
                with _stops_held():
                    running.append(_start(command, tree, subprocess.DEVNULL))
            for process in running:
                process.wait(timeout=PROCESS_TIMEOUT_S)
        finally:
            for process in running:
                _stop(process)
        seconds = time.monotonic() - started
        self.log(
            f"compiled {len(workloads)} workload(s) in {len(self.order)} tree(s) beforehand in {seconds:.0f} s"
        )

    def run(self, workloads: list[str]) -> None:
        """One round: a process per tree, each measuring `workloads`."""
        for tree in self.order:
            self._measure(tree, workloads)
        self.order.reverse()

    def _measure(self, tree: Tree, workloads: list[str]) -> None:
        number = sum(self.processes.values())
        spec, record = (
            self.scratch / f"{number}-{tree.role}-spec.json",
            self.scratch / f"{number}-{tree.role}.json",
        )
        spec.write_text(json.dumps(self.spec | {"workloads": workloads}))
        started = time.monotonic()
        status, output = _run(
            [sys.executable, "-m", "perfgate.worker", str(spec), str(record)], tree, self.cpus
        )
        if not record.exists():
            last = (output.strip().splitlines() or ["no output"])[-1]
            raise GateError(f"the {tree.role} tree's measuring process exited {status}: {last}")
        data = json.loads(record.read_text())
        name = f"{tree.role} ({tree.commit[:10]})"
        if "failed" in data:
            error = data["failed"]["error"].splitlines()[0]
            raise GateError(f"workload {data['failed']['workload']} failed in {name}: {error}")
        if not Path(data["fuser"]).resolve().is_relative_to(tree.path.resolve()):
            raise GateError(
                f"{name} imported fuser from {data['fuser']}, not from its tree: something shadows PYTHONPATH"
            )
        machine = Machine(**data["machine"])
        if self.machine is not None and machine != self.machine:
            raise GateError(
                f"processes ran on different devices ({self.machine.device}, {machine.device}): "
                "pin one (CUDA_VISIBLE_DEVICES) and run again"
            )
        self.machine = machine
        for workload, metrics in data["measurements"].items():
            for metric, values in metrics.items():
                sample = None if values is None else Sample.of(values)
                self.samples[tree.role].setdefault(workload, {}).setdefault(metric, []).append(sample)
        for workload, achieved in data["planted"].items():
            self.planted.setdefault(workload, []).append(achieved)
        self.processes[tree.role] += 1
        self.log(f"{name}: {', '.join(workloads)} measured in {time.monotonic() - started:.0f} s")
