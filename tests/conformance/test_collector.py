"""The suite's processes tune Python's collector for compiling (`conformance/harness/collector.py`)."""

from __future__ import annotations

import gc
import subprocess
import sys
import weakref

import torch
from torch._subclasses.fake_tensor import FakeTensor

from conformance.harness import collector
from conformance.harness.runner import run_case
from conformance.specs.catalog import SPECS


def test_the_suite_s_pytest_process_runs_with_the_tuned_collector():
    # tests/conftest.py tunes it at configure time: the measured 15-25 % of the suite's time.
    assert gc.get_threshold() == collector.THRESHOLDS
    assert gc.get_freeze_count() > 10_000  # torch's import-time heap, out of every pass


def test_a_tuned_process_exits_without_nanobind_reporting_leaks():
    # Frozen objects skip the collection at exit; Triton's bindings then reported each as leaked.
    script = (
        "import triton, torch\n"
        "from conformance.harness.collector import tune_for_compiling\n"
        "tune_for_compiling()\n"
        "print('ran')\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "ran"
    assert "leaked" not in run.stderr, run.stderr[-2000:]


def test_a_full_pass_runs_once_memory_has_grown(monkeypatch):
    # The tuned thresholds make full passes rare; garbage cycles holding large buffers (Triton's
    # interpreter leaves one per launch) must still be freed before the process runs out of memory.
    monkeypatch.setattr(gc, "collect", counting(gc.collect, calls := []))
    collector.collect_if_grown(growth_bytes=0)  # a pass now, and the starting point
    assert calls == [1]
    cycle = [torch.ones(16 << 20)]  # 64 MB, its pages touched
    cycle.append(cycle)
    alive = weakref.ref(cycle[0])
    del cycle
    gc.disable()  # no pass but the one under test
    try:
        assert not collector.collect_if_grown(growth_bytes=1 << 40)
        assert alive() is not None
        assert collector.collect_if_grown(growth_bytes=32 << 20)
        assert alive() is None
    finally:
        gc.enable()
    assert calls == [1, 1]


def counting(function, calls: list):
    def counted(*args):
        calls.append(1)
        return function(*args)

    return counted


def test_a_case_leaves_no_tensor_in_a_garbage_cycle():
    # A cycle that holds a case's tensors lives until a full pass: with the tuned collector, a
    # full-tier run kept every case's samples (hundreds of MB a case) and was killed at 13-14 GB.
    spec = SPECS["aten.margin_ranking_loss.default"]
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run_case(spec, "float32", "producer", "bwd", "eager", "cpu", "quick")
        gc.collect()
        garbage = [o for o in gc.garbage if not isinstance(o, weakref.ProxyTypes)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    held = [o for o in garbage if isinstance(o, torch.Tensor) and not isinstance(o, FakeTensor)]
    held = [t for t in held if t.device.type != "meta"]
    assert not held, f"{len(held)} tensors in garbage cycles, e.g. {tuple(held[0].shape)} {held[0].dtype}"
