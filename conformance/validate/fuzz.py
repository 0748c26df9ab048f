"""Validation's fuzz stage: random whole programs that each call the op being validated
(`python -m conformance.fuzz --op`), run in a fresh process after the op's conformance cases passed
(docs/validation.md, "The fuzz stage"). `conformance.validate` runs it and joins a failure to the op's
failing cases."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from conformance.fuzz.vocab import BY_NAME as FUZZ_VOCABULARY
from conformance.specs.catalog import SPECS

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class FuzzStage:
    status: str  # passed | FAILED | skipped | off | not run
    passed: int = 0  # programs checked that passed (the manifest's `fuzz`)
    note: str = ""  # why it was skipped or off, or what failed
    seconds: float = 0.0
    repro: str | None = None  # the failing program's standalone script

    def cell(self) -> str:
        if self.status == "passed":
            return f"{self.passed} passed in {self.seconds:.0f} s"
        if self.repro:
            return f"FAILED after {self.passed} passed: {Path(self.repro).name}"
        return f"{self.status}: {self.note}"


DEFAULT_FUZZ_EXAMPLES = 200  # about 20 s an op on a 2-core CPU (docs/validation.md, "The fuzz stage")
# A batch's target of passing programs per op: above the 130-151 that an op's own 200 draws gave
# (docs/validation.md), so a batch checks every op in at least as many programs.
DEFAULT_FUZZ_PASSES = 160


def fuzz_skip_reason(op: str, reached_inside: tuple[str, ...] = ()) -> str | None:
    """Why the fuzz stage cannot require `op` in its programs; None where it can. `reached_inside`: the
    conformance ops whose graphs reach an op no user calls (validate.PROXIES)."""
    if op in FUZZ_VOCABULARY:
        return None
    if reached_inside:
        return f"not in the fuzzer's vocabulary: reached only inside {', '.join(reached_inside)}"
    spec = SPECS.get(op)
    if spec is not None and "fwd" in (spec.unspecified_at or {}):
        return "not in the fuzzer's vocabulary: eager has no one answer at some inputs (its spec's unspecified_at)"
    category = spec.category if spec is not None else ""
    if category == "view":
        return "not in the fuzzer's vocabulary: views are steps on its operands, not ops it can require"
    if category == "backward":
        return "not in the fuzzer's vocabulary: a backward op, reached only through autograd"
    return "not in the fuzzer's vocabulary (conformance/fuzz/vocab.py)"


def fuzz_arguments(op: str, backend: str, device: str, examples: int, out: Path) -> list[str]:
    """The arguments of `python` for `op`'s fuzz run. Its seed derives from the op's name: a rerun
    draws the same programs, and each op its own."""
    seed = int.from_bytes(hashlib.sha256(op.encode()).digest()[:4], "big")
    return [
        *("-m", "conformance.fuzz", "--profile", "ci", "--op", op),
        *("--examples", str(examples), "--seed", str(seed)),
        *("--backend", backend, "--device", device, "--out", str(out)),
    ]


def group_arguments(ops: tuple[str, ...], backend: str, device: str, passes: int, out: Path) -> list[str]:
    """The arguments of `python` for a batch's fuzz group: programs that call several of its ops, until
    each has `passes` passing ones (conformance/fuzz/batch.py). Its seed derives from the ops' names."""
    seed = int.from_bytes(hashlib.sha256(",".join(ops).encode()).digest()[:4], "big")
    return [
        *("-m", "conformance.fuzz", "--profile", "ci", "--op", ",".join(ops)),
        *("--passes", str(passes), "--seed", str(seed)),
        *("--backend", backend, "--device", device, "--out", str(out)),
    ]


def run_fuzz_group(
    ops: tuple[str, ...],
    backend: str,
    device: str,
    passes: int,
    out: Path,
    log_path: Path,
    env: dict[str, str] | None = None,
) -> dict[str, FuzzStage]:
    """A batch's fuzz group in a fresh process (`env`: added to its environment): each op's stage,
    failed only where the group's failure is blamed on it (or where no program calling it passed)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="validate-fuzz-") as scratch:
        result_path = Path(scratch) / "result.json"
        command = [
            sys.executable,
            *group_arguments(ops, backend, device, passes, out),
            "--json",
            str(result_path),
        ]
        env = os.environ | (env or {}) | {"FUSER_STRICT": "1", "FUSER_UNVALIDATED": "fuse"}
        with log_path.open("w") as log:
            subprocess.run(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
        result = json.loads(result_path.read_text()) if result_path.exists() else None
    seconds = time.monotonic() - started
    if result is None:
        note = f"the fuzzer wrote no result (see {log_path})"
        return {op: FuzzStage("FAILED", note=note, seconds=seconds) for op in ops}
    stages = {}
    for op in ops:
        passed = result["passed_by_op"].get(op, 0)
        failed = result["failed"].get(op)
        if failed:
            note = _first_words(failed["message"])
            stages[op] = FuzzStage("FAILED", passed, note, seconds, repro=failed["repro"])
        elif op in result["vacuous"] or passed == 0:
            counts = ", ".join(f"{n} {what}" for what, n in sorted(result["counts"].items()))
            note = f"it checked too little ({passed} programs calling it passed; {counts}; see {log_path})"
            stages[op] = FuzzStage("FAILED", passed, note, seconds)
        else:
            stages[op] = FuzzStage("passed", passed, seconds=seconds)
    return stages


def fuzz_failure(op: str, stage: FuzzStage, backend: str, rerun: list[str]) -> tuple[str, str, str]:
    """The fuzz stage's failure as a failing case: (what, outcome, how to rerun it)."""
    opt_in = "FUSER_UNVALIDATED=fuse " if backend == "fuser" else ""  # else the gate runs it eagerly
    command = f"{opt_in}python {shlex.join(rerun)}"
    if stage.repro:
        command = f"{opt_in}python {stage.repro}\n    the fuzz run: {command}"
    return (f"{op} fuzz stage ({stage.passed} programs passed, then one failed)", stage.note, command)


def run_fuzz(
    op: str,
    backend: str,
    device: str,
    examples: int,
    out: Path,
    log_dir: Path,
    reached_inside: tuple[str, ...] = (),
) -> FuzzStage:
    """`examples` random programs that each call `op`, in a fresh process (the command a reviewer
    reruns, isolated from this one's compiled state), with the op's lowering forced on as in the
    conformance stage."""
    if examples == 0:
        return FuzzStage("off", note="--fuzz-examples 0")
    reason = fuzz_skip_reason(op, reached_inside)
    if reason:
        return FuzzStage("skipped", note=reason)
    started = time.monotonic()
    log_path = log_dir / f"{op}.fuzz.log"
    with tempfile.TemporaryDirectory(prefix="validate-fuzz-") as scratch:
        result_path = Path(scratch) / "result.json"
        arguments = fuzz_arguments(op, backend, device, examples, out)
        command = [sys.executable, *arguments, "--json", str(result_path)]
        env = os.environ | {"FUSER_STRICT": "1", "FUSER_UNVALIDATED": "fuse"}
        with log_path.open("w") as log:
            subprocess.run(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
        result = json.loads(result_path.read_text()) if result_path.exists() else None
    seconds = time.monotonic() - started
    if result is None:
        return FuzzStage("FAILED", note=f"the fuzzer wrote no result (see {log_path})", seconds=seconds)
    passed = result["counts"].get("pass", 0)
    if result["failed"]:
        return FuzzStage("FAILED", passed, _first_words(result["message"]), seconds, repro=result["repro"])
    if result["mostly_vacuous"] or passed == 0:
        counts = ", ".join(f"{n} {what}" for what, n in sorted(result["counts"].items()))
        return FuzzStage("FAILED", passed, f"it checked too little ({counts}; see {log_path})", seconds)
    return FuzzStage("passed", passed, seconds=seconds)


def _first_words(message: str) -> str:
    """The oracle's complaint in one line: its first, and the next where the first only introduces it
    ("the compiled program raised X: backend=... raised:")."""
    lines = [line.strip() for line in message.splitlines() if line.strip()] or ["(no message)"]
    first = " ".join(lines[:2]) if len(lines) > 1 and lines[0].endswith(":") else lines[0]
    return first[:400]
