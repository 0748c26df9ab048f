"""A parallel run's processes share the CPU cores: each takes its share for eager's CPU kernels.

Left alone, every process starts one OpenMP thread per core, and a thread that finishes its part of a
kernel spins waiting for the next on a core another process needs. On this 2-core machine the zoo's
tests took 30 % more CPU time and 35 % more wall time with two test workers of two threads each than of
one thread each (records/ci-time-2026-12-06-s37.md); 15 workers on 16 cores once ran 240 spinning threads.
"""

from __future__ import annotations

import os

import torch


def available() -> int:
    """The cores this process may run on (its affinity, where the OS has one: a container or a `taskset`
    may allow fewer than the machine has). The noxfile counts them the same way for its workers."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def share(workers: int) -> int:
    """The threads each of `workers` processes takes."""
    return max(1, available() // max(1, workers))


def take_share(workers: int, *, for_children: bool = False) -> None:
    """This process takes its share; with `for_children`, so do the processes it starts (through
    OMP_NUM_THREADS), unless the user set OMP_NUM_THREADS, which then stands for both."""
    if for_children:
        if "OMP_NUM_THREADS" in os.environ:
            return
        os.environ["OMP_NUM_THREADS"] = str(share(workers))
    torch.set_num_threads(share(workers))
