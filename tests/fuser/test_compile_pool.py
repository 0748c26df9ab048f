"""The compile pool (`fuser.runtime.compile_pool`): worker processes compile a graph's kernels side by side
into Triton's disk cache before their first launch, and a launch then finds its kernel there."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from fuser.explain import explain
from fuser.runtime import compile_pool, gpu_compile_check, kernel_cache


def _bias_sigmoid(x, y):
    return torch.sigmoid(x) * y + 1


# Compile threads are refused on Pythons whose ast.parse is unsafe in threads (the CPU machines' 3.11.7);
# test_threads_are_refused_where_ast_parse_is_unsafe checks that, and the GPU machine's 3.12 runs these.
UNSAFE_THREADS = pytest.mark.skipif(
    not compile_pool.ast_parse_thread_safe(),
    reason="this Python's ast.parse is unsafe in threads (gh-106905)",
)
POOLS = [compile_pool.Pool, pytest.param(compile_pool.ThreadPool, marks=UNSAFE_THREADS)]


@pytest.mark.parametrize("pool_class", POOLS)
def test_a_worker_compiles_a_kernel_for_a_gpu_into_tritons_disk_cache_and_reports_what_it_cannot(
    tmp_path, monkeypatch, pool_class
):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    (source,) = explain(_bias_sigmoid, torch.randn(37, 5), torch.randn(37, 5)).kernels
    path = kernel_cache.kernel_file(source)
    args = [torch.float32, torch.float32, torch.float32, 185]
    options = {"BLOCK": 1024, "num_warps": 4}
    pool = pool_class(1)
    try:
        missing = pool.submit(compile_pool.job(path, "no_such_kernel", args, options, 90))
        done = pool.submit(compile_pool.job(path, source.name, args, options, 90))
        assert "no attribute 'no_such_kernel'" in missing.result(timeout=300)["error"]
        answer = done.result(timeout=300)
        assert answer["seconds"] > 0  # the same worker goes on after a failed job
        # Its launcher too, where Triton has a GPU driver; here, with none, the answer says why not.
        assert torch.cuda.is_available() or "launcher" in answer, answer
    finally:
        pool.close()
    cubins = list((tmp_path / "triton").rglob("*.cubin"))
    assert len(cubins) == 1 and cubins[0].stem == source.name


def test_a_compile_job_takes_tensors_as_dtypes_and_integers_and_names_anything_else():
    made = compile_pool.job(Path("k.py"), "k", [torch.bfloat16, 7], {"BLOCK": 64}, 90)
    assert json.loads(json.dumps(made))["args"] == [["tensor", "bfloat16"], ["int", 7]]
    with pytest.raises(TypeError, match="not float"):
        compile_pool.job(Path("k.py"), "k", [0.5], {}, 90)


@pytest.mark.parametrize("name", [compile_pool.WORKERS_ENV, compile_pool.THREADS_ENV])
@pytest.mark.parametrize("value", ["-1", "many"])
def test_a_bad_worker_count_is_named(name, value, monkeypatch):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=f"{name}={value!r}"):
        compile_pool.wanted()


def test_processes_and_threads_are_not_both_asked_for(monkeypatch):
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "2")
    monkeypatch.setenv(compile_pool.THREADS_ENV, "4")
    with pytest.raises(ValueError, match="not both"):
        compile_pool.wanted()


@pytest.mark.parametrize("pool_class", POOLS)
def test_a_pool_compiles_side_by_side_what_one_compiles_alone(tmp_path, monkeypatch, pool_class):
    """Four workers (processes, the default, or threads) compiling at once write the binaries one writes
    alone, byte for byte. Six specializations of one kernel: its size odd, a multiple of 16, or 1 (a
    constant), under two block sizes."""
    (source,) = explain(_bias_sigmoid, torch.randn(37, 5), torch.randn(37, 5)).kernels
    path = kernel_cache.kernel_file(source)
    jobs = [
        compile_pool.job(path, source.name, [torch.float32] * 3 + [n], {"BLOCK": block, "num_warps": 4}, 90)
        for n in (185, 192, 1)
        for block in (128, 1024)
    ]
    binaries = {}
    for workers in (1, 4):
        monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / f"triton-{workers}"))
        monkeypatch.setattr(gpu_compile_check, "_compiled", {})  # a thread's memo of this process's compiles
        pool = pool_class(workers)
        try:
            answers = [pending.result(timeout=300) for pending in [pool.submit(job) for job in jobs]]
        finally:
            pool.close()
        assert not [answer for answer in answers if "error" in answer]
        found = (tmp_path / f"triton-{workers}").rglob("*.cubin")
        binaries[workers] = sorted(c.read_bytes() for c in found)
    assert len(binaries[1]) == len(jobs) and binaries[4] == binaries[1]


class _Step:
    """A launching step as `ahead` sees one."""

    interpreted = False
    device = torch.device("cuda", 0)

    def __init__(self, name: str, loaded: bool):
        self.name, self._loaded, self.asked = name, loaded, []

    def loaded(self) -> bool:
        return self._loaded

    def compile_ahead(self, key, capability, pool) -> None:
        self.asked.append((key, capability, pool))


def test_only_a_graph_with_enough_kernels_new_to_the_process_hands_them_to_the_pool(monkeypatch):
    started = []
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "2")
    monkeypatch.setattr(compile_pool, "pool", lambda: started.append("pool") or "the pool")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device: (9, 0))
    few = [_Step(f"k{i}", loaded=False) for i in range(compile_pool.MIN_NEW_KERNELS - 1)]
    compile_pool.ahead([*few, _Step("old", loaded=True)], ())
    assert started == [] and not any(s.asked for s in few)
    enough = [*few, _Step("new", loaded=False)]
    old = _Step("old", loaded=True)
    compile_pool.ahead([*enough, old], (3,))
    assert started == ["pool"]
    assert all(s.asked == [((3,), 90, "the pool")] for s in enough) and old.asked == []


@pytest.mark.parametrize("pool_class", POOLS)
def test_on_a_gpu_each_first_launch_finds_its_kernel_compiled_by_a_worker(
    device, tmp_path, monkeypatch, pool_class
):
    """Every kernel the first call launches was compiled by the pool: Triton's cache holds one cubin per
    job and no more (a launch whose key differed from its job's would have compiled another)."""
    if device != "cuda":
        pytest.skip("needs FUSER_TEST_DEVICE=cuda")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    jobs, answers = [], []
    pool = pool_class(2)
    submit = pool.submit

    def recorded(job):
        jobs.append(job)
        answers.append(submit(job))
        return answers[-1]

    monkeypatch.setattr(pool, "submit", recorded)
    monkeypatch.setattr(compile_pool, "_pool", pool)

    def program(a, b, c, d):  # four kernels: reductions over different dims, and a pointwise one
        return a.sum(0), (d * 2).amax(1), torch.exp(b).sum(), torch.sigmoid(c) * 3

    # (A pointwise op on b joined b's reduction in one kernel, and since session 17 a's column sum joins a
    # row reduction of a: each left three kernels, below the pool's minimum, so no job at all; the GPU runs
    # of sessions 15 and 19 caught them. The rows and columns now reduce different inputs.)
    shapes = [(67, 129), (300,), (5, 7), (33, 65)]
    a, b, c, d = (torch.randn(*shape, device="cuda") for shape in shapes)
    try:
        got = torch.compile(program, backend="fuser")(a, b, c, d)
    finally:
        pool.close()
    for value, expected in zip(got, program(a, b, c, d), strict=True):
        torch.testing.assert_close(value, expected)
    assert len(jobs) >= compile_pool.MIN_NEW_KERNELS
    cubins = list((tmp_path / "triton").rglob("*.cubin"))
    distinct = {json.dumps(job, sort_keys=True) for job in jobs}
    assert len(cubins) == len(distinct), sorted(c.stem for c in cubins)
    # each worker built its kernel's launcher into the cache too (no `gcc` left for the first launch)
    assert not [a.result() for a in answers if "launcher" in a.result()]


def test_by_default_workers_compile_and_either_count_switches_them(monkeypatch):
    """Worker processes by default (measured on the H200: the module's docstring); FUSER_COMPILE_WORKERS=0
    compiles each kernel at its launch; FUSER_COMPILE_THREADS=N asks for threads instead."""
    monkeypatch.setattr(compile_pool, "ast_parse_thread_safe", lambda: True)
    monkeypatch.delenv(compile_pool.WORKERS_ENV, raising=False)
    monkeypatch.delenv(compile_pool.THREADS_ENV, raising=False)
    assert compile_pool.wanted() == ("processes", compile_pool.default_workers())
    monkeypatch.setenv(compile_pool.THREADS_ENV, "3")
    assert compile_pool.wanted() == ("threads", 3)
    monkeypatch.setenv(compile_pool.THREADS_ENV, "0")
    assert compile_pool.wanted() == ("processes", compile_pool.default_workers())
    monkeypatch.delenv(compile_pool.THREADS_ENV)
    monkeypatch.setenv(compile_pool.WORKERS_ENV, "0")
    monkeypatch.setattr(compile_pool, "_pool", None)
    assert compile_pool.wanted() == ("processes", 0) and compile_pool.pool() is None
    steps = [_Step(f"k{i}", loaded=False) for i in range(compile_pool.MIN_NEW_KERNELS)]
    compile_pool.ahead(steps, ())
    assert not any(s.asked for s in steps)


@pytest.mark.parametrize("version", [(3, 11, 7), (3, 11, 2), (3, 11, 8), (3, 12, 1), (3, 13, 0)])
def test_threads_are_refused_where_ast_parse_is_unsafe(monkeypatch, version):
    """Python 3.11 before 3.11.8 races in `ast.parse` from threads (tools/probes/ast_parse_in_threads.py
    shows it on 3.11.7): threads asked for there are refused by name; elsewhere they are given."""
    monkeypatch.setattr(compile_pool.sys, "version_info", (*version, "final", 0))
    monkeypatch.delenv(compile_pool.WORKERS_ENV, raising=False)
    monkeypatch.setenv(compile_pool.THREADS_ENV, "4")
    if version >= (3, 11, 8):
        assert compile_pool.wanted() == ("threads", 4)
        return
    with pytest.raises(ValueError, match=r"Python 3\.11\.\d: its ast.parse is unsafe in threads .*gh-106905"):
        compile_pool.wanted()
    with pytest.raises(ValueError, match="gh-106905"):
        compile_pool.ThreadPool(2)


def test_the_backend_starts_workers_asked_for_only_for_graphs_over_cuda_tensors(monkeypatch):
    # Started as the backend gets its first CUDA graph, so the workers import torch and Triton while
    # AOTAutograd traces, not while the first launch waits.
    from torch._subclasses.fake_tensor import FakeTensorMode

    started = []
    monkeypatch.setattr(compile_pool, "Pool", lambda workers: started.append(workers) or object())
    monkeypatch.setattr(compile_pool, "_pool", None)
    with FakeTensorMode():
        on_gpu, on_cpu = [torch.empty(2, device="cuda")], [torch.empty(2)]
    monkeypatch.setattr(compile_pool, "ast_parse_thread_safe", lambda: True)
    monkeypatch.setattr(compile_pool, "default_workers", lambda: 3)
    monkeypatch.delenv(compile_pool.WORKERS_ENV, raising=False)
    monkeypatch.setenv(compile_pool.THREADS_ENV, "4")
    compile_pool.start_for(on_gpu)  # threads need no start
    monkeypatch.delenv(compile_pool.THREADS_ENV)
    compile_pool.start_for(on_cpu)
    assert not started
    compile_pool.start_for(on_gpu)  # the default: workers
    compile_pool.start_for(on_gpu)  # one pool a process
    assert started == [3]


def test_a_launch_made_for_the_compiles_ahead_holds_real_tensors(monkeypatch, hand_steps_over_to):
    """The backend compiles a graph under AOTAutograd's fake mode, and the launches made there for the
    pool are kept for the graph's calls: a horizontal kernel's tables were fake tensors, and its first
    call failed (the optimizer tests on the H200, session 21)."""
    monkeypatch.setenv("FUSER_HORIZONTAL", "1")
    handed = []

    class Recording:
        def submit(self, compile_job):
            handed.append(compile_job["name"])

    hand_steps_over_to(Recording())

    def negate_both(a, b):  # one horizontal kernel: one source over two sizes
        return torch.neg(a), torch.neg(b)

    a, b = torch.randn(7), torch.randn(300)
    got = torch.compile(negate_both, backend="fuser")(a, b)
    assert handed == ["fused_neg_horizontal"]
    torch.testing.assert_close(got, negate_both(a, b))


@pytest.mark.parametrize("sharing", ["PYTEST_XDIST_WORKER_COUNT", "LOCAL_WORLD_SIZE"])
@pytest.mark.parametrize(
    ("siblings", "expected"), [(None, 15), ("1", 15), ("4", 3), ("8", 1), ("14", 0), ("x", 15)]
)
def test_the_default_workers_share_the_cores_with_sibling_processes(monkeypatch, sharing, siblings, expected):
    """16 cores: 15 workers alone; under `pytest -n 14` (or 14 torchrun ranks) each process compiles at
    its launches rather than start 15 workers beside 13 others doing the same."""
    monkeypatch.setattr(compile_pool.os, "sched_getaffinity", lambda pid: set(range(16)), raising=False)
    for name in ("PYTEST_XDIST_WORKER_COUNT", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    if siblings is not None:
        monkeypatch.setenv(sharing, siblings)
    assert compile_pool.default_workers() == expected


def test_a_worker_starts_and_stops_without_a_word_on_the_users_terminal():
    """A worker's stderr is the user's terminal: started as `-m fuser.runtime.compile_pool`, each of 15
    workers printed runpy's RuntimeWarning there (the package had imported the module already)."""
    import subprocess

    done = subprocess.run(compile_pool.WORKER_COMMAND, input="", capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stderr == "" and done.stdout == ""


def test_a_worker_imports_the_fuser_from_where_this_process_found_it(tmp_path, monkeypatch):
    """A script that put a checkout of the fuser on `sys.path` itself: its workers, started elsewhere with
    no installed fuser to find, import the same package (a worker that cannot import it exits, and its
    traceback lands on the user's terminal)."""
    import subprocess
    import sys

    import fuser

    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    env = compile_pool.worker_environment()
    # -S: no site-packages, so no installed (or editable) fuser; only PYTHONPATH can lead to it.
    found = subprocess.run(
        [sys.executable, "-S", "-c", "import importlib.util as u; print(u.find_spec('fuser').origin)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert found.stdout.strip() == fuser.__file__
    assert env["PYTHONPATH"].split(os.pathsep)[1:] == ["/elsewhere"]
