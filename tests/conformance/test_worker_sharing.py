"""xdist workers share the machine: each takes its share of the CPU cores (and, on CUDA, a GPU)."""

import os

import pytest
import torch

from conformance.plugin import _share_machine


@pytest.fixture
def restore_threads():
    saved = torch.get_num_threads()
    yield
    torch.set_num_threads(saved)


@pytest.mark.parametrize("workers", [1, 2, 64])
def test_each_worker_takes_its_share_of_the_cores(restore_threads, workers):
    _share_machine("cpu", {"workerid": "gw0", "workercount": workers})
    assert torch.get_num_threads() == max(1, len(os.sched_getaffinity(0)) // workers)  # the cores it may use


def test_outside_xdist_nothing_changes(restore_threads):
    torch.set_num_threads(1)
    _share_machine("cpu", None)
    assert torch.get_num_threads() == 1
