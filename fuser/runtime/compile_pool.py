"""Compiling a graph's kernels for the GPU side by side, before their first launch.

Triton compiles a kernel at its first launch, one after another: llama's first call (forward and
backward, about 34 kernels) spent 14 s of 25 s there under cProfile on the H200 box (session 21): ptxas
5.4 s, Triton's code generator 4.8 s, LLVM 4 s. So when a graph with several kernels new to this process
is compiled for CUDA, each kernel's launches are handed at once to a pool, with arguments that specialize
as the launch's will (`fuser.runtime.gpu_compile_check` binds them through Triton's own binder, with the
options `JITFunction.run` adds); the pool writes each compile into Triton's disk cache. A launch waits for
its own kernel's compile only, then finds it in the cache. Nothing here changes what runs: a compile the
pool could not do, or whose key a launch does not match, is compiled at the launch as before.

By default the pool is worker processes (FUSER_COMPILE_WORKERS, one per core but one, at most 16, a
share of that under pytest-xdist or torchrun; 0: none, each kernel compiled at its launch): Python
processes fed over pipes (`WORKER_COMMAND`), not multiprocessing's, whose spawn re-runs a user's script
that has no main guard. They start when the backend is first handed a graph over CUDA tensors
(`start_for`), importing torch and Triton while AOTAutograd traces. Each runs Triton's Python code
generator apart from the others and from the main process, so nothing waits on one GIL: on the H200, with
a user's bytecode caches, t5's first call took 17.4 s in processes, 20.6 s in threads and Inductor's
20.7 s; gpt2's 8.8, 10.0 and 10.2 s (records/first-call-h200-2026-11-28-s22.md).
A worker builds a job's C launcher (`build_launcher`) only where a launch would use Triton's rather than
torch's static one (`fuser.runtime.direct_launch`).

FUSER_COMPILE_THREADS=N uses threads of this process instead: ptxas (a subprocess per kernel) and LLVM's
passes (Triton releases the GIL around them) run side by side, Triton's code generator and the fuser's own
compile step take turns with Dynamo for the GIL. Not on CPython 3.11 before 3.11.8, whose `ast.parse` is
unsafe in threads (`ast_parse_thread_safe`): threads asked for there are refused by name. docs/design.md,
"Compiling ahead".
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import queue
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import unset_fake_temporarily

from fuser.options import on_cuda

log = logging.getLogger("fuser")

WORKERS_ENV = "FUSER_COMPILE_WORKERS"
THREADS_ENV = "FUSER_COMPILE_THREADS"
# A graph with fewer new kernels than this compiles them at their launches: a job's round trip, and for a
# first graph the workers' start (each imports torch and Triton), cost more than a few compiles.
MIN_NEW_KERNELS = 4


def default_workers() -> int:
    """A worker per core but one, at most 16; in one of several processes that share the machine's cores
    (pytest-xdist's workers, a test suite run with `-n`; torchrun's local ranks), per its share, so that
    14 of them do not start 15 workers each."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2
    siblings = os.environ.get("PYTEST_XDIST_WORKER_COUNT") or os.environ.get("LOCAL_WORLD_SIZE") or ""
    return min(16, max(0, cores // max(1, int(siblings) if siblings.isdigit() else 1) - 1))


# CPython 3.11 before 3.11.8 keeps one depth counter for every thread's `ast.parse`: a garbage collection
# inside a parse runs Python code, another thread parses meanwhile, and a parse raises SystemError (CPython
# gh-106905; tools/probes/ast_parse_in_threads.py reproduces it in a second). Triton parses each kernel's
# source as it compiles, so compile threads there could break any thread's parse, the user's included.
# (3.12 collects only between bytecodes, not inside a parse.)
def ast_parse_thread_safe() -> bool:
    return not ((3, 11) <= tuple(sys.version_info[:3]) < (3, 11, 8))


# Not `-m fuser.runtime.compile_pool`: the package imports this module first, so runpy would run it twice
# and warn so, once for each worker, on the user's terminal.
WORKER_COMMAND = [sys.executable, "-c", "from fuser.runtime.compile_pool import main; main()"]
WAIT_S = 300  # a launch waits this long for a worker, then compiles its kernel itself


def _count(name: str, what: str, default: int = 0) -> int:
    value = os.environ.get(name, "") or str(default)
    if not value.isdigit():
        raise ValueError(f"fuser: {name}={value!r}; expected a number of {what} (0: none)")
    return int(value)


def wanted() -> tuple[str, int]:
    """How a graph's kernels compile side by side: ("threads", FUSER_COMPILE_THREADS) where that asks for
    some, else ("processes", FUSER_COMPILE_WORKERS), by default a worker per core but one, at most 16. A
    count of 0: none, each kernel compiled at its launch."""
    threads = _count(THREADS_ENV, "threads")
    processes = _count(WORKERS_ENV, "worker processes", default=0 if threads else default_workers())
    if processes and threads:
        raise ValueError(f"fuser: set {WORKERS_ENV} or {THREADS_ENV}, not both")
    if threads:
        refuse_unsafe_threads()
        return ("threads", threads)
    return ("processes", processes)


def refuse_unsafe_threads() -> None:
    if not ast_parse_thread_safe():
        version = ".".join(map(str, sys.version_info[:3]))
        raise ValueError(
            f"fuser: no compile threads on Python {version}: its ast.parse is unsafe in threads (CPython "
            f"gh-106905, fixed in 3.11.8), and Triton parses each kernel; worker processes ({WORKERS_ENV}, "
            f"the default) are safe"
        )


Job = dict[str, Any]  # path, name, args, options, capability: JSON, what a worker reads


def job(path: Path, name: str, args: list, options: dict[str, Any], capability: int) -> Job:
    """A compile of kernel `name` in file `path` for launches with `args`: a tensor is given as its dtype
    (a worker stands a small aligned CPU tensor in: a fresh CUDA allocation is aligned too), an integer
    as itself."""
    described = []
    for arg in args:
        if isinstance(arg, torch.dtype):  # a tensor of this dtype
            described.append(["tensor", str(arg).removeprefix("torch.")])
        elif isinstance(arg, bool) or not isinstance(arg, int):
            raise TypeError(f"fuser: a compile job takes tensors and ints, not {type(arg).__name__}")
        else:
            described.append(["int", arg])
    return {"path": str(path), "name": name, "args": described, "options": options, "capability": capability}


def worker_environment() -> dict[str, str]:
    """This process's environment, with the folder holding the `fuser` package first on PYTHONPATH: a
    script that put it on `sys.path` itself (a checkout, not an installation) has workers that import
    it too, rather than fail, each with a traceback on the user's terminal."""
    root = str(Path(__file__).resolve().parents[2])
    paths = [root, *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


class Pool:
    """Worker processes, each compiling one job at a time; a thread per worker feeds it from one queue."""

    def __init__(self, workers: int):
        self.jobs: queue.Queue = queue.Queue()
        env = worker_environment()
        self.processes = [
            subprocess.Popen(
                WORKER_COMMAND,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            for _ in range(workers)
        ]
        for process in self.processes:
            threading.Thread(target=self._feed, args=(process,), daemon=True).start()
        atexit.register(self.close)

    def submit(self, compile_job: Job) -> Future:
        future: Future = Future()
        self.jobs.put((compile_job, future))
        return future

    def _feed(self, process: subprocess.Popen) -> None:
        while True:
            compile_job, future = self.jobs.get()
            if compile_job is None:
                return
            try:
                process.stdin.write(json.dumps(compile_job) + "\n")
                process.stdin.flush()
                answer = process.stdout.readline()
                if not answer:
                    raise RuntimeError(f"compile worker {process.pid} exited ({process.poll()})")
                future.set_result(json.loads(answer))
            except Exception as error:  # the launch compiles it itself
                future.set_result({"error": f"{type(error).__name__}: {error}"})

    def close(self) -> None:
        for _ in self.processes:
            self.jobs.put((None, None))
        for process in self.processes:
            if process.poll() is None:
                process.stdin.close()  # the worker's loop ends at end of input
                try:
                    process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    process.kill()


class ThreadPool:
    """Threads of this process, each compiling one job at a time, as a worker process would."""

    def __init__(self, threads: int):
        refuse_unsafe_threads()
        self.executor = ThreadPoolExecutor(threads, thread_name_prefix="fuser-compile")
        self.made: dict = {}  # stand-in tensors, by dtype

    def submit(self, compile_job: Job) -> Future:
        return self.executor.submit(_answer, compile_job, self.made)

    def close(self) -> None:
        self.executor.shutdown(wait=True)


_pool: Pool | ThreadPool | None = None
_lock = threading.Lock()


def start_for(example_inputs: list) -> None:
    """Start the pool, where workers are asked for and the graph's inputs are on a CUDA device."""
    if wanted()[0] == "processes" and torch.version.hip is None and on_cuda(example_inputs):
        pool()


def pool() -> Pool | ThreadPool | None:
    """The process's pool, started at the first call; None where no compile runs side by side."""
    global _pool
    with _lock:
        if _pool is None:
            kind, workers = wanted()
            if workers == 0:
                return None
            _pool = ThreadPool(workers) if kind == "threads" else Pool(workers)
        return _pool


def ahead(steps: list, key: tuple[int, ...]) -> None:
    """Hand the compiles of `steps`' CUDA kernels to the pool, for the launches of this binding of the
    sizes, where enough of them are new to this process. A step offers `compile_ahead(key, capability,
    pool)` and `loaded()`."""
    if _pool is None and wanted()[1] == 0:
        return  # every kernel compiles at its launch
    launching = [s for s in steps if hasattr(s, "compile_ahead") and not s.interpreted]
    new = [s for s in launching if not s.loaded()]
    if len(new) < MIN_NEW_KERNELS:
        return
    if torch.version.hip is not None:
        return  # the jobs are compiled for CUDA targets
    shared = pool()
    if shared is None:
        return
    major, minor = torch.cuda.get_device_capability(new[0].device)
    hand_over(new, key, 10 * major + minor, shared)


def hand_over(steps: list, key: tuple[int, ...], capability: int, shared: Pool | ThreadPool) -> None:
    """Each step's compiles for this binding, to the pool. The backend compiles a graph under
    AOTAutograd's fake mode, and the launch a step makes here is kept for its calls: its tensors (a
    horizontal kernel's tables) must be real ones (fake ones failed the first call on the H200, session 21)."""
    with unset_fake_temporarily():
        for step in steps:
            try:
                step.compile_ahead(key, capability, shared)
            except Exception as error:  # it compiles at its launch, as without the pool
                log.debug("fuser: %s not compiled ahead (%s: %s)", step.name, type(error).__name__, error)


def wait(pending: Future | None) -> None:
    """Until a submitted compile is done; a worker's failure is logged, and the launch compiles."""
    if pending is None:
        return
    try:
        answer = pending.result(timeout=WAIT_S)
    except TimeoutError:
        answer = {"error": f"no answer within {WAIT_S} s"}
    if "error" in answer:
        log.debug(
            "fuser: a compile worker could not compile a kernel (%s); it compiles at its launch", answer
        )


# --- the worker process ---


def _standin(dtype_name: str, made: dict) -> Any:
    if dtype_name not in made:
        made[dtype_name] = torch.empty(16, dtype=getattr(torch, dtype_name))
    return made[dtype_name]


def _compile(compile_job: Job, made: dict) -> dict[str, Any]:
    from fuser.runtime import gpu_compile_check, kernel_cache
    from fuser.runtime.direct_launch import static_launcher_class

    started = time.perf_counter()
    jit_fn = kernel_cache.load_file(Path(compile_job["path"]), compile_job["name"])
    args = [_standin(value, made) if kind == "tensor" else value for kind, value in compile_job["args"]]
    compiled = gpu_compile_check.compile_for_cuda(
        jit_fn, args, compile_job["options"], compile_job["capability"]
    )
    answer = {"seconds": time.perf_counter() - started}
    if static_launcher_class() is not None:
        return answer  # the launch needs no C launcher of Triton's
    try:
        build_launcher(compiled)
    except Exception as error:  # the launch builds it, as without the pool
        answer["launcher"] = f"{type(error).__name__}: {str(error)[:500]}"
    return answer


def build_launcher(compiled: Any) -> None:
    """Build the compiled kernel's C launcher into Triton's cache: a `gcc` run per kernel signature (0.35 s
    on the H200 box), which a launch otherwise makes itself, one after another in the main process
    (records/call-path-parts-h200-2026-11-28-s19.md). The launch's kernel, loaded from the cache, has the
    same source and metadata, so its launcher's source hashes to the same cache entry."""
    from triton.runtime import driver

    driver.active.launcher_cls(compiled.src, compiled.metadata)


def _answer(compile_job: Job, made: dict) -> dict[str, Any]:
    try:
        return _compile(compile_job, made)
    except Exception as error:  # the launch compiles it itself
        return {"error": f"{type(error).__name__}: {str(error)[:2000]}"}


def main() -> None:
    # Answers go through a copy of stdout; anything else printed (by Triton, by a tool) goes to stderr.
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    made: dict = {}
    for line in sys.stdin:
        answers.write(json.dumps(_answer(json.loads(line), made)) + "\n")
        answers.flush()


if __name__ == "__main__":
    main()
