"""Sessions: `tests` (the product's tests on CPU), `lint` (ruff), `conformance` (every op against eager,
quick tier and model blocks, with a report), `validate` (an op's full conformance, then its manifest entry), `perfgate` (the perf gate, this tree against main: on a CPU machine its CPU tier) and `perf`
(fuser / Inductor / eager side by side, with a plot); `fuzz` (random programs against eager), `zoo` and
`tests_oldest_triton` (the fuser's tests under Triton 3.6) on demand."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import nox

nox.options.sessions = ["lint", "tests", "conformance", "perfgate"]
nox.options.reuse_existing_virtualenvs = True

PYPROJECT = tomllib.loads(Path("pyproject.toml").read_text())
# A CPU machine must never pull CUDA wheels: pin the CPU build of torch unless told otherwise
# (for example FUSER_TORCH="torch" on a machine whose index serves the CUDA build you want).
TORCH = os.environ.get("FUSER_TORCH", "torch==2.13.0")
# timm needs torchvision; an unpinned one would pull a newer torch (and CUDA). 0.28 is torch 2.13's pair.
TORCHVISION = os.environ.get("FUSER_TORCHVISION", "torchvision==0.28.*")


def workers(variable: str) -> str:
    """pytest-xdist workers: `variable`'s value if set, else one per core this process may run on, and no
    more than one per 3 GiB of memory (a worker running the zoo's models peaks at 1.2 GiB, and some tests
    start processes of their own). Two on CI's 2-core machine; a workstation's cores all work."""
    if variable in os.environ:
        return os.environ[variable]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    memory_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return str(max(1, min(cores, int(memory_gib // 3))))


@nox.session
def tests(session: nox.Session) -> None:
    """Run the fuser's tests (CPU tensors run the generated kernels in Triton's interpreter)."""
    session.install(TORCH, TORCHVISION)
    session.install("-e", ".[test,perf,zoo]")
    # --durations: CI's log lists the slowest tests, where its minutes go (it runs close to its budget).
    spread = ["-n", workers("FUSER_TEST_WORKERS")]
    session.run("pytest", *spread, "--durations=15", *session.posargs, env={"FUSER_STRICT": "1"})


@nox.session
def tests_oldest_triton(session: nox.Session) -> None:
    """The fuser's tests under the oldest Triton the project supports (3.6), whose interpreter differs:
    under NumPy 2.4 its int arguments broke every looped row kernel until the fuser worked around it
    (docs/validation.md, session 11). On demand, not in CI: one more Triton wheel to fetch."""
    session.install(TORCH, "triton==3.6.0")
    session.install("-e", ".[test]")
    spread = ["-n", workers("FUSER_TEST_WORKERS")]
    session.run("pytest", *spread, "tests/fuser", *session.posargs, env={"FUSER_STRICT": "1"})


@nox.session
def conformance(session: nox.Session) -> None:
    """Run the op-conformance suite against a backend (`-- --conformance-backend inductor
    --conformance-tier full --conformance-op ...`). With no `--conformance-tier`, the quick tier and then
    the model blocks (`--conformance-tier models`), as CI runs them."""
    session.install(TORCH)
    session.install("-e", ".[test]")
    options = list(session.posargs)
    # One op runs in seconds on one process; the whole suite spreads over the machine's workers.
    given = {option.partition("=")[0] for option in options}
    spread = [] if "--conformance-op" in given else ["-n", workers("CONFORMANCE_WORKERS")]
    tiers = (
        [[]] if "--conformance-tier" in given else [["--conformance-tier", t] for t in ("quick", "models")]
    )
    for tier in tiers:
        session.run(
            "pytest",
            "conformance/",
            "-p",
            "no:benchmark",
            *spread,
            "--conformance-report",
            os.environ.get("CONFORMANCE_REPORT_DIR", "reports/conformance"),
            *tier,
            *options,
            # The configuration users get: a case whose op is not validated here reports "not
            # validated" (FUSER_UNVALIDATED=fuse, set by the caller, checks every lowering instead).
            env={"FUSER_STRICT": "1"},
        )


@nox.session(default=False)
def fuzz(session: nox.Session) -> None:
    """Fuzz whole programs against eager (`-- --examples N --seed S --backend B --device D --profile dev`)."""
    session.install(TORCH)
    session.install("-e", ".[test]")
    # The configuration users get, as the conformance session (FUSER_UNVALIDATED=fuse from the caller
    # fuzzes every lowering instead).
    session.run("python", "-m", "conformance.fuzz", *session.posargs, env={"FUSER_STRICT": "1"})


@nox.session(default=False)
def zoo(session: nox.Session) -> None:
    """Run real transformers and timm models under a backend against float64 (`-- --backend inductor`)."""
    session.install(TORCH, TORCHVISION)
    session.install("-e", ".[zoo]")
    session.run("python", "-m", "conformance.zoo", *session.posargs, env={"FUSER_STRICT": "1"})


@nox.session
def lint(session: nox.Session) -> None:
    """Check style and common bugs with ruff."""
    session.install(*PYPROJECT["project"]["optional-dependencies"]["lint"])
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(default=False)
def perf(session: nox.Session) -> None:
    """Compare the fuser with Inductor and eager on every perf workload: ratio tables and a bar plot."""
    session.install(TORCH)
    session.install("-e", ".[perf]")
    session.run("python", "-m", "perfgate", "compare", *session.posargs)


@nox.session
def perfgate(session: nox.Session) -> None:
    """Fail on perf regressions of this tree against main, measured side by side (`-- --against REV`)."""
    session.install(TORCH)
    session.install("-e", ".[perf]")
    options = list(session.posargs)
    if not options or options[0].startswith("-"):  # options of `gate`: A/B against main unless told
        options = ["gate", *([] if "--against" in options else ["--against", "main"]), *options]
    session.run("python", "-m", "perfgate", *options)


@nox.session(default=False)
def validate(session: nox.Session) -> None:
    """Validate ops for fusion on this machine's arch, writing their manifest entries (`-- aten.i0.default`);
    its options pass through (`-- --fuzz-examples 50 aten.i0.default`: the fuzz stage's budget, 0 turns it off)."""
    session.install(TORCH)
    session.install("-e", ".[test]")
    session.run("python", "-m", "conformance.validate", *session.posargs, env={"FUSER_STRICT": "1"})
