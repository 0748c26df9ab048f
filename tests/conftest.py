"""Shared fixtures: every test starts with a fresh Dynamo cache and zeroed fuser counters.

Tests run the fuser strict (FUSER_STRICT=1): a kernel that fails to generate or launch raises instead
of quietly running eager. They run on CPU through Triton's interpreter unless FUSER_TEST_DEVICE=cuda.
"""

from __future__ import annotations

import os

import pytest
import torch

import fuser
from conformance.harness.collector import collect_if_grown

os.environ.setdefault("FUSER_STRICT", "1")
# No opt-in (FUSER_UNVALIDATED): the tests run the configuration users get, in which an op the cpu
# manifest does not validate runs eagerly; tests/fuser/conftest.py fails a fuser test made vacuous by
# that, and a test that checks a lowering the manifest leaves out opts in by name (`opt_in_unvalidated`).

DEVICE = os.environ.get("FUSER_TEST_DEVICE", "cpu")


def pytest_configure(config: pytest.Config) -> None:
    from conformance.harness import cores
    from conformance.harness.collector import tune_for_compiling

    tune_for_compiling()
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:  # an xdist worker, and the processes its tests start, take their share
        cores.take_share(int(workerinput["workercount"]), for_children=True)


@pytest.fixture(autouse=True)
def fresh_compiler_state():
    # Dynamo caches compiled frames per code object and stops compiling after a recompile limit:
    # without a reset, a later test could silently run eager.
    torch._dynamo.reset()
    fuser.clear_kernel_cache()
    fuser.reset_counters()
    yield
    collect_if_grown()  # the tuned collector's full passes are rare; large garbage must not pile up


@pytest.fixture(autouse=True)
def opt_in_where_marked(request, monkeypatch):
    """`@pytest.mark.opt_in_unvalidated("why")`: the test checks a lowering the manifest does not enable
    (an op that failed validation, or the gate's own tests), so it fuses unvalidated ops on purpose."""
    marker = request.node.get_closest_marker("opt_in_unvalidated")
    if marker is not None:
        if not (marker.args and marker.args[0]):
            raise pytest.UsageError(f"{request.node.nodeid}: opt_in_unvalidated needs a reason")
        monkeypatch.setenv("FUSER_UNVALIDATED", "fuse")
    yield


@pytest.fixture
def device() -> str:
    return DEVICE
