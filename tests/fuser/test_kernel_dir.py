"""Generated kernels go to one folder shared by every process and run (issue 14: a folder per process
left 26 folders and 10,962 files on one machine after a day), one file per distinct kernel body."""

from __future__ import annotations

import subprocess
import sys

import torch

import fuser
from fuser.runtime import kernel_cache


def test_processes_share_one_kernel_folder_and_a_kernel_is_written_once(tmp_path, monkeypatch):
    # Read afresh: a test run before this one in the worker may have cached a folder it set by
    # FUSER_KERNEL_DIR (benchmarks/compare.py's tests do; the order is xdist's).
    kernel_cache.kernel_dir.cache_clear()
    here = kernel_cache.kernel_dir()
    other = subprocess.run(
        [sys.executable, "-c", "from fuser.runtime import kernel_cache; print(kernel_cache.kernel_dir())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert str(here) == other
    monkeypatch.setenv("FUSER_KERNEL_DIR", str(tmp_path))
    kernel_cache.kernel_dir.cache_clear()
    try:
        for _ in range(2):  # the second compile (kernel cache cleared) finds the file and keeps it
            fuser.clear_kernel_cache()
            torch._dynamo.reset()
            torch.compile(lambda x: x * 2 + 1, backend="fuser")(torch.randn(5))
        assert len(list(tmp_path.glob("*.py"))) == 1
        assert not list(tmp_path.glob("*.tmp"))
    finally:
        kernel_cache.kernel_dir.cache_clear()
