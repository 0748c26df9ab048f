"""Sessions: `nox -s tests` (the product's tests on CPU) and `nox -s lint` (ruff)."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_existing_virtualenvs = True

PYPROJECT = tomllib.loads(Path("pyproject.toml").read_text())
# A CPU machine must never pull CUDA wheels: pin the CPU build of torch unless told otherwise
# (for example FUSER_TORCH="torch" on a machine whose index serves the CUDA build you want).
TORCH = os.environ.get("FUSER_TORCH", "torch==2.13.0")


@nox.session
def tests(session: nox.Session) -> None:
    """Run the fuser's tests (CPU tensors run the generated kernels in Triton's interpreter)."""
    session.install(TORCH)
    session.install("-e", ".[test]")
    session.run(
        "pytest", "-n", os.environ.get("FUSER_TEST_WORKERS", "2"), *session.posargs, env={"FUSER_STRICT": "1"}
    )


@nox.session
def lint(session: nox.Session) -> None:
    """Check style and common bugs with ruff."""
    session.install(*PYPROJECT["project"]["optional-dependencies"]["lint"])
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
