"""Quality: the gate, with its real worktrees and measuring processes, fails planted regressions and
passes unchanged code, in both modes (A/B against a base revision, and against the committed file);
bad input stops it with one line and leaves no worktree behind.

Each test works in a small repository of its own (this checkout's fuser/ and perfgate/, committed):

    gate     the fuser as it is, with a committed cpu.json of pointwise_chain's counts
    notes    gate with a README: another tree, the same code
    nogate   the fuser alone, from before the perf gate existed (an ancestor of gate)
    unfused  gate, with fusion off by default: pointwise_chain's one kernel becomes ten
    broken   gate, with a fuser that cannot compile softmax
    slower   gate, with busy work in every compiled call (more instructions per call) and lowering and
             code generation run twice in each compile (a slower compile step)
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from perfgate import baselines
from perfgate.backends import BACKENDS
from perfgate.machine import REPOSITORY, this_machine
from perfgate.measure import count_on_cpu
from perfgate.workloads import WORKLOADS

COUNTS = ["gate", "--tier", "cpu", "--counts-only", "--workload", "pointwise_chain"]
COMPILE_RETURN = "    return torch.compile(fn, backend=backend, dynamic=dynamic, fullgraph=fullgraph)\n"
PLANTS = {  # branch: its changes, each (file, old text, new text)
    "notes": [("README.md", None, "the same fuser\n")],
    "unfused": [("fuser/options.py", '"fuse": True,', '"fuse": False,')],
    "broken": [
        (
            "fuser/__init__.py",
            COMPILE_RETURN,
            '    if fn.__name__ == "softmax":\n        raise NotImplementedError("planted")\n'
            + COMPILE_RETURN,
        )
    ],
    "slower": [
        (
            "fuser/__init__.py",
            COMPILE_RETURN,
            COMPILE_RETURN.replace("return", "compiled =")
            + "\n    def slower(*args):\n        for _ in range(3000):\n            pass\n"
            + "        return compiled(*args)\n\n    return slower\n",
        ),
        (  # lowering and code generation run twice, the first plan thrown away
            "fuser/compiler.py",
            "    plan, generated = plan_and_generate(",
            "    plan_and_generate(graph, options, set(binder.symbols))\n    plan, generated = plan_and_generate(",
        ),
    ],
}


def git(repo: Path, *arguments: str) -> str:
    return subprocess.run(["git", *arguments], cwd=repo, check=True, capture_output=True, text=True).stdout


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """The repository of the module docstring, with a branch per tree."""
    repo = tmp_path_factory.mktemp("repo")
    git(repo, "init", "-q", "-b", "nogate")
    shutil.copytree(REPOSITORY / "fuser", repo / "fuser", ignore=shutil.ignore_patterns("__pycache__"))
    commit_all(repo, "the fuser alone")
    git(repo, "checkout", "-qb", "gate")
    shutil.copytree(
        REPOSITORY / "perfgate", repo / "perfgate", ignore=shutil.ignore_patterns("__pycache__", "*.json")
    )
    counted = {"pointwise_chain": count_on_cpu(WORKLOADS["pointwise_chain"], BACKENDS["fuser"])}
    recorded = baselines.updated(None, this_machine("cpu"), "fuser", counted)
    baselines.write(baselines.baseline_path("cpu", repo / "perfgate" / "baselines"), recorded)
    commit_all(repo, "the perf gate, with pointwise_chain's counts")
    for branch, changes in PLANTS.items():
        git(repo, "checkout", "-qb", branch, "gate")
        for path, old, new in changes:
            if old is None:
                (repo / path).write_text(new)
                continue
            source = (repo / path).read_text()
            assert old in source, f"the plant for {branch} no longer applies to {path}"
            (repo / path).write_text(source.replace(old, new))
        commit_all(repo, branch)
    return repo


def gate(repo: Path, branch: str, *arguments: str) -> subprocess.CompletedProcess:
    """`python -m perfgate` run in `repo` at `branch`, with that tree's perfgate and fuser."""
    git(repo, "checkout", "-q", branch)
    return subprocess.run(
        [sys.executable, "-m", "perfgate", *arguments],
        cwd=repo,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo), "HOME": str(repo)},
        capture_output=True,
        text=True,
    )


def worktrees(repo: Path) -> int:
    return len(git(repo, "worktree", "list").splitlines())


def test_unchanged_code_passes_the_ab_gate_and_its_worktree_is_gone_afterwards(repo):
    run = gate(repo, "notes", *COUNTS, "--against", "gate", "--seed", "7")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS: fuser on" in run.stdout and "order seed 7" in run.stdout
    assert "measuring head" in run.stdout and " and base " in run.stdout
    assert worktrees(repo) == 1


def test_a_tree_gated_against_itself_is_measured_once_and_its_counts_still_judged(repo):
    # CI gates a clean clone of main against main: an A/B of one tree could find only noise. Alone, its
    # instruction counts are judged only against the file and only with --absolute: without it,
    # callgrind's minutes in CI judged nothing, so they are not counted (no --counts-only here).
    same = gate(repo, "gate", "gate", "--tier", "cpu", "--workload", "pointwise_chain", "--against", "gate")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "gate is head's own tree: no A/B" in same.stdout and " and base " not in same.stdout
    assert re.search(r"pointwise_chain +kernel_launches +cpu\.json +1 +1 ", same.stdout), same.stdout
    assert "instruction counts: with no base tree they are judged only with --absolute" in same.stdout
    assert "host_instructions" not in same.stdout
    aa = gate(repo, "gate", *COUNTS, "--against", "gate", "--aa")  # an A/A check, asked for
    assert aa.returncode == 0 and "measuring head" in aa.stdout and " and base " in aa.stdout


def test_turning_fusion_off_fails_the_ab_gate_against_base_and_against_the_committed_file(repo):
    run = gate(repo, "unfused", *COUNTS, "--against", "gate")
    assert run.returncode == 1, run.stdout + run.stderr
    regressions = [line for line in run.stdout.splitlines() if line.endswith("REGRESSION")]
    assert [line.split()[:5] for line in regressions] == [
        ["pointwise_chain", "kernel_launches", "base", "1", "10"],
        ["pointwise_chain", "kernel_launches", "cpu.json", "1", "10"],
    ]
    assert worktrees(repo) == 1


def test_the_gate_against_the_committed_file_passes_unchanged_code_and_fails_fusion_turned_off(repo):
    unchanged, unfused = gate(repo, "gate", *COUNTS), gate(repo, "unfused", *COUNTS)
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr
    assert unfused.returncode == 1, unfused.stdout + unfused.stderr
    assert "1 regression(s): pointwise_chain kernel_launches 10.000× against cpu.json" in unfused.stdout


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="counts instructions with valgrind")
def test_busy_work_in_every_call_and_a_compile_step_doing_its_work_twice_fail_the_ab_gate(repo):
    run = gate(repo, "slower", "gate", "--tier", "cpu", "--workload", "pointwise_chain", "--against", "gate")
    assert run.returncode == 1, run.stdout + run.stderr
    rows = {
        line.split()[1]: line
        for line in run.stdout.splitlines()
        if line.startswith("pointwise_chain") and " base " in line
    }
    host, compile_step = rows["host_instructions"], rows["compile_instructions"]
    assert host.endswith("REGRESSION") and compile_step.endswith("REGRESSION"), run.stdout
    assert float(host.split("[")[1].split(",")[0]) > 1.02  # the whole interval clears the 1% threshold
    # The compile step is counted once a tree (a point, not an interval): its ratio alone clears 1%.
    assert float(compile_step.split()[5].rstrip("×")) > 1.02


@pytest.mark.parametrize(
    ("branch", "arguments", "message"),
    [
        ("gate", ["--against", "no-such-branch"], "no revision 'no-such-branch' in this repository"),
        ("gate", ["--against", "nogate"], "has no perf gate (no perfgate/ in its tree)"),
        ("broken", ["--against", "gate", "--workload", "softmax"], "workload softmax failed in head ("),
    ],
)
def test_bad_input_stops_the_gate_with_one_line_and_no_stray_worktree(repo, branch, arguments, message):
    run = gate(repo, branch, *COUNTS[:4], *arguments)
    assert run.returncode == 2, run.stdout + run.stderr
    (line,) = run.stderr.splitlines()
    assert message in line
    assert worktrees(repo) == 1


def test_a_dirty_tree_cannot_be_gated_against_a_base(repo):
    git(repo, "checkout", "-q", "gate")
    (repo / "fuser" / "__init__.py").write_text((repo / "fuser" / "__init__.py").read_text() + "\n")
    try:
        run = gate(repo, "gate", *COUNTS, "--against", "gate")
    finally:
        git(repo, "checkout", "-q", "--", "fuser")
    assert run.returncode == 2
    assert (
        run.stderr.strip()
        == "perfgate: the working tree has uncommitted changes: commit or stash them, then run the A/B gate"
    )


def test_stopping_the_gate_midway_kills_its_processes_and_removes_the_worktree(repo):
    git(repo, "checkout", "-q", "notes")
    command = [sys.executable, "-m", "perfgate", *COUNTS, "--against", "gate", "--rounds", "50"]
    process = subprocess.Popen(
        command,
        cwd=repo,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(repo)},
        stdout=subprocess.PIPE,
        text=True,
    )
    while "measured in" not in process.stdout.readline():
        pass  # the first measuring process has finished: the worktree exists
    assert worktrees(repo) == 2
    while not measuring_processes(repo):
        time.sleep(0.05)  # the next measuring process has started: stop the gate while it runs
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=60)
    assert worktrees(repo) == 1
    assert measuring_processes(repo) == []


def measuring_processes(repo: Path) -> list[str]:
    """The ids of live measuring processes started for `repo` (their PYTHONPATH names it)."""
    found = []
    for process in Path("/proc").glob("[0-9]*"):
        try:
            command, environment = (process / "cmdline").read_bytes(), (process / "environ").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        if b"perfgate.worker" in command and str(repo).encode() in environment:
            found.append(process.name)
    return found


def test_a_stop_signal_another_thread_receives_still_waits_for_a_process_start_to_finish():
    """The gate has other threads (torch's): a stop delivered to one of them ran the gate's handler in
    the main thread inside a held block, so a started process was never on the list and outlived the gate."""
    from perfgate.rounds import _stops_held

    def stop(number, frame):
        raise KeyboardInterrupt

    finished = []
    idle = threading.Event()
    other = threading.Thread(target=idle.wait)
    other.start()
    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(KeyboardInterrupt), _stops_held():
            signal.pthread_kill(other.ident, signal.SIGTERM)
            for _ in range(1000):
                time.sleep(0.0001)  # the main thread passes many points where a handler can run
            finished.append("the block")
        assert finished == ["the block"]
    finally:
        signal.signal(signal.SIGTERM, previous)
        idle.set()
        other.join()
