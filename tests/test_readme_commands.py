"""The README's commands work as written (issue 30, item 6).

Every command in the README's bash blocks, and every inline `nox -s …` or `python -m …`, is taken
apart and checked the quickest way that still runs it for real:

- an install line must pin the CPU build of torch (an unpinned torch pulls GB of CUDA packages);
- `nox -s S … -- ARGS`: every session S exists, and what the session runs accepts ARGS — the conformance
  session's pytest collects at least one case with them (narrowed to one op where they name none; or, asking for CUDA on a machine without it,
  stops with the one line that says so), the tests session's pytest selects at least one test, and the
  modules behind fuzz, zoo and validate know every option given;
- `python -m fuser demo` runs (under a minute);
- `pytest -p conformance.plugin …` collects from another directory with the README's example backend;
- any other `python -m MODULE ARGS` knows every option given (`--help`).

A command that fits none of these fails the test, so a new README command gets checked or is seen.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
SESSION_MODULES = {"fuzz": "conformance.fuzz", "zoo": "conformance.zoo", "validate": "conformance.validate"}
EXAMPLE_BACKEND = "def my_backend(gm, example_inputs):\n    return gm.forward\n"  # mypkg.backends:my_backend


def readme_commands() -> list[str]:
    """Each command of the README: the lines of its bash blocks (comments dropped, `&&` split) and its
    inline `nox -s …` and `python -m …` spans."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README, flags=re.S):
        for line in block.splitlines():
            line = line.split("  #")[0].strip()
            commands += [part.strip() for part in line.split("&&") if part.strip()]
    for span in re.findall(r"`([^`\n]+)`", README):
        if re.match(r"(\w+=\S+ )*(nox -s |python -m )", span) and "…" not in span and "<" not in span:
            commands.append(span)
    return list(dict.fromkeys(commands))


def run(command: list[str], cwd: Path = REPO, env: dict | None = None, timeout: int = 120):
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    } | (env or {})
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@cache
def nox_sessions() -> set[str]:
    listed = run([sys.executable, "-m", "nox", "--list"]).stdout  # --json lists only the default ones
    return set(re.findall(r"^[*-] ([\w-]+) ->", listed, flags=re.M))


@cache
def help_text(module: str) -> str:
    result = run([sys.executable, "-m", module, "--help"])
    assert result.returncode == 0, f"python -m {module} --help failed:\n{result.stderr[-2000:]}"
    return result.stdout


def options_known(module: str, args: list[str]) -> None:
    unknown = [
        a.split("=")[0] for a in args if a.startswith("--") and a.split("=")[0] not in help_text(module)
    ]
    assert not unknown, f"python -m {module} does not know {unknown}"


def example_backend(tmp_path: Path) -> dict:
    (tmp_path / "mypkg").mkdir(exist_ok=True)
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "backends.py").write_text(EXAMPLE_BACKEND)
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}


def collect(args: list[str], tmp_path: Path, cwd: Path = REPO) -> None:
    """pytest's collection with `args`: at least one case, or the documented stop for CUDA on a CPU."""
    result = run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=cwd,
        env=example_backend(tmp_path),
    )
    output = result.stdout + result.stderr
    if "--conformance-device" in args and "cuda" in args and "this machine has no CUDA device" in output:
        return
    assert result.returncode == 0, f"pytest {shlex.join(args)} failed to collect:\n{output[-3000:]}"
    assert re.search(r"^\d+ tests? collected|^\d+/\d+ tests? collected", output, flags=re.M), output[-2000:]


def narrowed(args: list[str]) -> list[str]:
    """One op, where the command names none: its options are what is checked, and collecting every op's
    cases costs many seconds a command."""
    if "--conformance-op" in args or "models" in args:
        return []
    return ["--conformance-op", "aten.add.Tensor"]


def check(command: str, tmp_path: Path) -> None:
    words = shlex.split(command)
    while words and re.fullmatch(r"\w+=\S*", words[0]):  # VAR=value prefixes
        words.pop(0)
    if words[:2] == ["pip", "install"] or words[:4] == ["python", "-m", "pip", "install"]:
        pinned = [w for w in words if w.startswith("torch")]
        assert not any(w in ("torch", "torchvision") for w in pinned), f"{command}: torch must be pinned"
        assert "torch==2.13.0" in words or words[-1] == "nox", f"{command}: pin the CPU build, torch==2.13.0"
        return
    if words[:2] == ["nox", "-s"]:
        sessions, args = (
            (words[2:], [])
            if "--" not in words
            else (words[2 : words.index("--")], words[words.index("--") + 1 :])
        )
        assert set(sessions) <= nox_sessions(), f"{command}: no nox session {set(sessions) - nox_sessions()}"
        if "conformance" in sessions:
            collect(["conformance/", *args, *narrowed(args)], tmp_path)
        elif "tests" in sessions and args:
            collect(args, tmp_path)
        for session in sessions:
            if session in SESSION_MODULES:
                options_known(SESSION_MODULES[session], args)
        return
    if words == ["python", "-m", "fuser", "demo"]:
        result = run([sys.executable, "-m", "fuser", "demo"], timeout=60)
        assert result.returncode == 0, result.stderr[-3000:]
        return
    if words[:2] == ["pytest", "-p"]:
        collect([*words[1:], *narrowed(words)], tmp_path, cwd=tmp_path)
        return
    if words[:2] == ["python", "-m"]:
        options_known(words[2], words[3:])
        return
    pytest.fail(f"the README's command {command!r} is not one this test knows how to check")


COMMANDS = readme_commands()


def test_the_readme_has_its_commands():
    assert len(COMMANDS) >= 15 and any(c.startswith("nox -s conformance") for c in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_readme_command_works_as_written(command, tmp_path):
    check(command, tmp_path)
