"""Shared fixtures: every test starts with a fresh Dynamo cache and zeroed fuser counters.

Tests run the fuser strict (FUSER_STRICT=1): a kernel that fails to generate or launch raises instead
of quietly running eager. They run on CPU through Triton's interpreter unless FUSER_TEST_DEVICE=cuda.
"""

from __future__ import annotations

import os

import pytest
import torch

import fuser

os.environ.setdefault("FUSER_STRICT", "1")
# These tests check what the fuser's kernels compute and how many there are, so they fuse every lowered
# op whether or not the cpu manifest (fuser/manifest/cpu.toml) validates it yet: an explicit opt-in,
# until the manifest covers every lowered op (docs/validation.md). tests/fuser/test_validation_gate.py
# tests the gate itself with the opt-in off.
os.environ.setdefault("FUSER_UNVALIDATED", "fuse")

DEVICE = os.environ.get("FUSER_TEST_DEVICE", "cpu")


@pytest.fixture(autouse=True)
def fresh_compiler_state():
    # Dynamo caches compiled frames per code object and stops compiling after a recompile limit:
    # without a reset, a later test could silently run eager.
    torch._dynamo.reset()
    fuser.clear_kernel_cache()
    fuser.reset_counters()
    yield


@pytest.fixture
def device() -> str:
    return DEVICE
