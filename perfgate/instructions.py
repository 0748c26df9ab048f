"""The host-path cost of one call as a CPU instruction count, measured with callgrind.

Instruction counts are near-deterministic, so the CPU tier can gate launch overhead without a quiet
machine. The counting is PyTorch's own (the mechanism behind `torch.utils.benchmark.Timer
.collect_callgrind`): valgrind's callgrind tool, with collection switched on and off around the measured
calls by `torch._C._valgrind_toggle` and `_valgrind_toggle_and_dump_stats`.

We run valgrind ourselves rather than through `collect_callgrind`: it starts one valgrind process per
statement and instruments its setup too, so importing torch and compiling one tiny program took
140 s under it — minutes per workload and backend. Here one process per CPU core measures all its
jobs in turn, with instrumentation off (about 10× slower than native, not 50×) until the measured
loop, where `callgrind_control -i on` turns it on.

    python -m perfgate.instructions JOBS.json     # the measuring process; run by count_instructions
"""

from __future__ import annotations

import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from perfgate.backends import Backend
from perfgate.metrics import Sample
from perfgate.workloads import WORKLOADS, Step

# Python 3.11 specializes bytecode after a few executions: warm calls run before counting starts.
WARMUP_CALLS = 10
CALLS_PER_REPEAT = 3
REPEATS = 3


@dataclass(frozen=True)
class Job:
    workload: str
    backend: Backend


def _require_valgrind() -> None:
    missing = [tool for tool in ("valgrind", "callgrind_control") if shutil.which(tool) is None]
    if missing:
        raise RuntimeError(
            f"the CPU tier counts instructions with valgrind, but {', '.join(missing)} is not on PATH "
            "(apt-get install valgrind)"
        )


def count_instructions(jobs: list[Job], processes: int | None = None) -> list[dict[str, Sample]]:
    """Each job's counts on `cpu_tiny` inputs: `host_instructions`, per warm call (median and MAD over
    REPEATS); and `compile_instructions`, those inside the backend's own compile step during the first
    call, where the backend offers a hook around it (`Backend.compile_step`)."""
    if not jobs:
        return []
    _require_valgrind()
    processes = max(1, min(len(jobs), processes or os.cpu_count() or 1))
    shares = [list(range(i, len(jobs), processes)) for i in range(processes)]
    with tempfile.TemporaryDirectory(prefix="perfgate-callgrind-") as scratch:
        # Decided here once, written into each job: whether its first call counts a compile step (a base
        # tree's backend from before the hook offers none).
        specs = [
            {
                "workload": job.workload,
                "backend": job.backend.to_json(),
                "count_compile": job.backend.compile_observer() is not None,
            }
            for job in jobs
        ]
        running = [
            _start(Path(scratch) / f"p{i}", [specs[j] for j in share]) for i, share in enumerate(shares)
        ]
        counts: list[dict[str, Sample]] = [{} for _ in jobs]
        for (process, folder), share in zip(running, shares, strict=True):
            output, _ = process.communicate()
            if process.returncode != 0:
                raise RuntimeError(f"callgrind process failed ({process.returncode}):\n{output[-4000:]}")
            layout = [specs[j]["count_compile"] for j in share]
            for j, measured in zip(share, _read_dumps(folder, layout), strict=True):
                counts[j] = measured
    return counts


def _start(folder: Path, specs: list[dict]) -> tuple[subprocess.Popen, Path]:
    folder.mkdir()
    (folder / "jobs.json").write_text(json.dumps(specs))
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={folder / 'callgrind.out'}",
        "--instr-atstart=no",
        "--collect-atstart=no",
        sys.executable,
        "-m",
        "perfgate.instructions",
        str(folder / "jobs.json"),
    ]
    # A fixed hash seed, so set and dict orders (and the code paths they steer) repeat; and empty
    # compile caches, so a run never takes a path that depends on what earlier runs left on disk.
    env = os.environ | {
        "PYTHONHASHSEED": "0",
        "OMP_NUM_THREADS": "1",
        "TORCHINDUCTOR_CACHE_DIR": str(folder / "torch-cache"),
        "TRITON_CACHE_DIR": str(folder / "triton-cache"),
    }
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return process, folder


def _read_dumps(folder: Path, observed: list[bool]) -> list[dict[str, Sample]]:
    """callgrind.out.N holds the Nth dump. In job order, each job's dumps are: its compile step's (one,
    where `observed`), then REPEATS of CALLS_PER_REPEAT warm calls."""
    numbers = iter(range(1, sum(observed) + len(observed) * REPEATS + 1))

    def total(number: int) -> int:
        text = (folder / f"callgrind.out.{number}").read_text()
        match = re.search(r"^totals:\s+(\d+)", text, re.MULTILINE)
        if match is None:
            raise RuntimeError(f"no totals line in callgrind dump {number} under {folder}")
        return int(match.group(1))

    results = []
    for compiles in observed:
        measured = {"compile_instructions": Sample.of([total(next(numbers))])} if compiles else {}
        calls = [total(next(numbers)) / CALLS_PER_REPEAT for _ in range(REPEATS)]
        results.append({**measured, "host_instructions": Sample.of(calls)})
    return results


def _callgrind_control(*arguments: str) -> None:
    subprocess.run(["callgrind_control", *arguments, str(os.getpid())], check=True, stdout=subprocess.DEVNULL)


def _count_on() -> None:
    _callgrind_control("--instr=on")
    torch._C._valgrind_toggle()


def _count_off() -> None:
    torch._C._valgrind_toggle()
    _callgrind_control("--instr=off")


def _compiled(job: dict) -> tuple[Step, Backend]:
    """The job's program compiled afresh (not yet called: the first call compiles) and its backend."""
    workload = WORKLOADS[job["workload"]]
    backend = Backend.from_json(job["backend"])
    torch._dynamo.reset()
    return Step(workload, backend.compile(workload.program), workload.inputs("cpu_tiny", "cpu")), backend


def _measure(job: dict) -> None:
    """In the valgrind process: compile and warm the job, then count REPEATS dumps of its calls."""
    step, backend = _compiled(job)
    if not job["count_compile"]:
        step()
    else:
        # The first call, counting only inside the backend's own compile step (each graph it compiles: a
        # forward and a backward for a training step): one dump. The process compiled its first job once
        # before (`main`), so one-time costs (imports, a manifest's first read) are nobody's; each process
        # measures its jobs in the same order in both trees, so caches earlier jobs filled are the same.
        # The collector stays off through the compiling call: where a collection falls depends on every
        # allocation before it, so one that lands inside the step moved its count by up to 12% between
        # runs of the same tree (sgd_momentum_step: 34.7 M or 39.0 M), more than the threshold.
        gc.collect()
        gc.disable()
        try:
            with backend.compile_observer()(_count_on, _count_off):
                step()
        finally:
            gc.enable()
        _count_on()
        torch._C._valgrind_toggle_and_dump_stats()  # collection off again, and the step's counts dumped
        _callgrind_control("--instr=off")
    for _ in range(WARMUP_CALLS - 1):
        step()
    _callgrind_control("--instr=on")
    for _ in range(REPEATS):
        gc.collect()  # every repeat starts with the collector in the same state
        torch._C._valgrind_toggle()
        for _ in range(CALLS_PER_REPEAT):
            step()
        torch._C._valgrind_toggle_and_dump_stats()
    _callgrind_control("--instr=off")


def main(jobs_path: str) -> None:
    torch.set_num_threads(1)
    jobs = json.loads(Path(jobs_path).read_text())
    if jobs:  # the first job compiled and called once, uncounted: the process's one-time costs paid
        _compiled(jobs[0])[0]()
    for job in jobs:
        _measure(job)
    sys.stdout.flush()
    os._exit(0)  # tearing down torch under valgrind takes longer than the measuring


if __name__ == "__main__":
    main(sys.argv[1])
