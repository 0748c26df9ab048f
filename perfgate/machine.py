"""This machine as the gate sees it: tier, architecture, device name, and what a baseline records.

The tier is `gpu` where CUDA is available, else `cpu`. A GPU's architecture is its compute capability
(`sm_90` for an H100 or H200); the CPU tier's is `cpu`. Baselines are one file per architecture, and
inside it timings are kept per device name, since two devices of one architecture differ.
"""

from __future__ import annotations

import datetime
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import triton

REPOSITORY = Path(__file__).resolve().parents[1]


def default_tier() -> str:
    return "gpu" if torch.cuda.is_available() else "cpu"


def _output(command: list[str], cwd: Path | None = None) -> str | None:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=30, cwd=cwd, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def commit(rev: str = "HEAD") -> dict[str, Any]:
    """A commit of this repository, as pytest-benchmark's commit_info describes it (read-only git
    commands); `dirty` and `branch` describe the checkout where `rev` is HEAD."""

    def git(*arguments: str) -> str | None:
        return _output(["git", *arguments], cwd=REPOSITORY)

    checkout = rev == "HEAD"
    return {
        "id": git("rev-parse", rev) or "unknown",
        "time": git("show", "-s", "--pretty=format:%cI", rev),
        "author_time": git("show", "-s", "--pretty=format:%aI", rev),
        "dirty": checkout and bool(git("status", "--porcelain", "--untracked-files=no")),
        "project": "fusion-conformance",
        "branch": (git("rev-parse", "--abbrev-ref", "HEAD") if checkout else rev) or "(unknown)",
    }


@dataclass(frozen=True)
class Machine:
    tier: str
    architecture: str
    device: str
    driver: str | None

    def recorded(self) -> dict[str, Any]:
        """What a baseline section records about the run that wrote it."""
        head = commit()
        return {
            "device": self.device,
            "driver": self.driver,
            "torch": torch.__version__,
            "triton": triton.__version__,
            "python": platform.python_version(),
            "date": datetime.date.today().isoformat(),
            # The commit the measured code sits on; "-dirty" when tracked files had changes on top.
            "commit": head["id"] + ("-dirty" if head["dirty"] else ""),
        }


def this_machine(tier: str) -> Machine:
    if tier == "cpu":
        return Machine("cpu", "cpu", cpu_model(), None)
    if not torch.cuda.is_available():
        raise RuntimeError("the gpu tier needs a CUDA device; this machine has none (use --tier cpu)")
    major, minor = torch.cuda.get_device_capability()
    # One driver serves every GPU of a host: the first line is this device's.
    drivers = _output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    driver = drivers.splitlines()[0] if drivers else None
    return Machine("gpu", f"sm_{major}{minor}", torch.cuda.get_device_name(), driver)
