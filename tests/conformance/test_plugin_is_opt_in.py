"""The suite's manners in a team's repository: installing this package changes nothing in another
project's pytest runs, and the suite, asked for, runs beside a project whose conftest has its own
`--device`. Each runs pytest in a fresh process from a temporary project, as a team would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conformance.harness import runner

PROJECT_CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--device", default="cpu")
    parser.addoption("--backend", default="theirs")
"""
PROJECT_TEST = """
import sys


def test_nothing_of_the_suite_was_loaded(request):
    assert request.config.getoption("--device") == "their-gpu"
    assert "torch" not in sys.modules and "conformance" not in sys.modules
    assert not request.config.pluginmanager.has_plugin("conformance.plugin")
"""


def team_project(tmp_path: Path) -> Path:
    (tmp_path / "conftest.py").write_text(PROJECT_CONFTEST)
    (tmp_path / "test_theirs.py").write_text(PROJECT_TEST)
    return tmp_path


def pytest_in(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FUSER_TESTING_", "PYTEST_"))}
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
    return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=600)


def test_another_projects_run_loads_nothing_of_the_suite(tmp_path):
    result = pytest_in(team_project(tmp_path), "--device", "their-gpu")
    assert result.returncode == 0, result.stdout + result.stderr
    help_text = pytest_in(tmp_path, "--help").stdout
    assert "--conformance-" not in help_text


def test_asked_for_the_suite_runs_beside_a_projects_own_device_option(tmp_path):
    project = team_project(tmp_path)
    case = ["--conformance-op", "aten.neg.default", "--conformance-dtype", "float32"]
    case += ["--conformance-context", "alone", "--conformance-direction", "fwd"]
    result = pytest_in(project, "-p", "conformance.plugin", "--pyargs", "conformance.test_ops", *case)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "1 passed" in result.stdout


def test_a_backend_torch_compile_does_not_know_stops_the_run_once(tmp_path, monkeypatch):
    monkeypatch.setattr(torch._dynamo, "list_backends", lambda exclude_tags=(): ["inductor", "eager"])
    with pytest.raises(ValueError, match=r"'fuser': torch.compile does not know it here"):
        runner.resolve_backend("fuser")
    result = pytest_in(
        team_project(tmp_path), "-p", "conformance.plugin", "--pyargs", "conformance.test_ops",
        "--conformance-backend", "no_such_module:backend",
    )  # fmt: skip
    assert result.returncode == 4  # a usage error: nothing collected, nothing run
    assert "--conformance-backend: backend 'no_such_module:backend': cannot load it" in result.stderr
    assert result.stderr.count("cannot load it") == 1
