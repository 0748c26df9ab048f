"""The trees a gate measures: head (this checkout) and, for `--against REV`, base in a temporary git
worktree that is removed on the way out, after an error or Ctrl-C too.

Base is REV's tree with head's `perfgate/` copied over its own: both trees run the workloads and the
measuring as head defines them, so the only difference measured is the compiler. Head must be
committed (the report names both trees by commit), and REV must have a perf gate of its own: a tree
from before the gate need not offer the fuser hooks the gate reads (`fuser.counters`).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from perfgate.machine import REPOSITORY


class GateError(Exception):
    """Input the gate cannot work with; its message is one line that names the problem."""


@dataclass(frozen=True)
class Tree:
    role: str  # "head" or "base"
    path: Path
    commit: str  # the full hash, or "unknown" outside a git checkout


def git(*arguments: str, cwd: Path = REPOSITORY) -> str:
    return subprocess.run(
        ["git", *arguments], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.strip()


def head_tree(committed: bool) -> Tree:
    """This checkout; with `committed`, it must be a git checkout without changes to tracked files."""
    try:
        commit = git("rev-parse", "HEAD")
    except (OSError, subprocess.CalledProcessError):
        if committed:
            raise GateError(
                f"{REPOSITORY} is not a git checkout: --against needs the repository's history"
            ) from None
        return Tree("head", REPOSITORY, "unknown")
    if committed and git("status", "--porcelain", "--untracked-files=no"):
        raise GateError(
            "the working tree has uncommitted changes: commit or stash them, then run the A/B gate"
        )
    return Tree("head", REPOSITORY, commit)


def resolve(rev: str) -> str:
    """REV's commit hash; where REV is not a local name, `origin/REV` (a CI checkout may have no `main`)."""
    for candidate in (rev, f"origin/{rev}"):
        try:
            return git("rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}")
        except subprocess.CalledProcessError:
            continue
    raise GateError(f"no revision {rev!r} in this repository (nor origin/{rev}): fetch it or name a commit")


def is_head_tree(rev: str) -> bool:
    """Whether REV's tree is head's own (a clean clone of main gated against main): an A/B of a tree
    against itself can find no regression, only noise."""
    return git("rev-parse", f"{resolve(rev)}^{{tree}}") == git("rev-parse", "HEAD^{tree}")


@contextmanager
def base_tree(rev: str) -> Iterator[Tree]:
    """REV's tree, with head's perf gate, in a worktree that exists only inside the `with`."""
    commit = resolve(rev)
    scratch = Path(tempfile.mkdtemp(prefix="perfgate-base-"))
    path = scratch / "tree"
    try:
        git("worktree", "add", "--detach", str(path), commit)
        if not (path / "perfgate").is_dir():
            raise GateError(
                f"{rev} ({commit[:10]}) has no perf gate (no perfgate/ in its tree): pick a later base"
            )
        shutil.rmtree(path / "perfgate")
        shutil.copytree(
            REPOSITORY / "perfgate", path / "perfgate", ignore=shutil.ignore_patterns("__pycache__")
        )
        yield Tree("base", path, commit)
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(path)], cwd=REPOSITORY, capture_output=True
        )
        shutil.rmtree(scratch, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=REPOSITORY, capture_output=True)
