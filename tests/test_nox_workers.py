"""The nox sessions' pytest workers: the machine's cores unless memory is short, or what the user says."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

NOXFILE = Path(__file__).resolve().parents[1] / "noxfile.py"


@pytest.fixture(scope="module")
def noxfile():
    spec = importlib.util.spec_from_file_location("noxfile_under_test", NOXFILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("cores", "memory_gib", "expected"),
    [(2, 24, "2"), (64, 24, "8"), (16, 2, "1"), (16, 128, "16")],  # CI, a big box, a small VM, a workstation
)
def test_workers_are_the_cores_at_most_one_per_3_gib(noxfile, monkeypatch, cores, memory_gib, expected):
    monkeypatch.delenv("SOME_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": memory_gib * 2**30 // 4096}
    monkeypatch.setattr(os, "sysconf", pages.__getitem__)
    assert noxfile.workers("SOME_WORKERS") == expected


def test_the_user_s_variable_wins(noxfile, monkeypatch):
    monkeypatch.setenv("SOME_WORKERS", "3")
    assert noxfile.workers("SOME_WORKERS") == "3"
