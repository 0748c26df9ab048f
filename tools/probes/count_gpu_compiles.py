"""Count, on a CPU, the distinct Triton compiles a GPU run would make: where the CUDA quick tier's and
validation's cubins come from (issue 27: compile time bounds both).

A pytest plugin. With FUSER_CHECK_CUDA_COMPILE=90 set, every interpreted launch is bound through Triton's
own argument binder for sm_90, as `fuser.runtime.gpu_compile_check` does, but nothing is compiled: each launch's
key (the kernel's source hash, its integer and pointer specialization, its block sizes and warps) goes to
a file per process. Then `python tools/probes/count_gpu_compiles.py DIR` tallies them:

    FUSER_CHECK_CUDA_COMPILE=90 COUNT_GPU_COMPILES=/tmp/keys pytest conformance/ -n 2 \
        -p tools.probes.count_gpu_compiles --conformance-tier quick -q
    python tools/probes/count_gpu_compiles.py /tmp/keys
    python tools/probes/count_gpu_compiles.py /tmp/keys 200 1    # time 200 of them, one worker
"""

from __future__ import annotations

import collections
import inspect
import json
import os
import sys
from pathlib import Path

OUT_ENV = "COUNT_GPU_COMPILES"


def pytest_configure(config) -> None:
    folder = os.environ.get(OUT_ENV)
    if not folder:
        return
    from fuser.runtime import compile_pool, gpu_compile_check

    Path(folder).mkdir(parents=True, exist_ok=True)
    sink = open(Path(folder) / f"keys-{os.getpid()}.jsonl", "a")  # noqa: SIM115 - open for the session

    def record(jit_fn, args, options, capability) -> None:
        _, _, binder = gpu_compile_check._binder(jit_fn, capability)
        _, specialization, run_options = binder(*args, **options)
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        line = {
            "source": jit_fn.cache_key,
            "name": jit_fn.__name__,
            "specialization": str(specialization),
            "options": str(sorted(run_options.items())),
            "blocks": {k: v for k, v in options.items() if k.isupper()},
            "test": test,
        }
        described = [a.dtype if hasattr(a, "data_ptr") else a for a in args]
        path = Path(inspect.getfile(jit_fn.fn))
        line["job"] = compile_pool.job(path, jit_fn.__name__, described, options, capability)
        sink.write(json.dumps(line) + "\n")
        sink.flush()

    gpu_compile_check.compile_for_cuda = record


def tally(folder: Path) -> None:
    keys = [
        json.loads(line) for path in folder.glob("keys-*.jsonl") for line in path.read_text().splitlines()
    ]
    tests = {k["test"] for k in keys}
    sources = {k["source"] for k in keys}
    with_blocks = {(k["source"], k["options"]) for k in keys}
    compiles = {(k["source"], k["options"], k["specialization"]) for k in keys}
    print(f"launches {len(keys)} in {len(tests)} cases")
    print(f"distinct sources {len(sources)}")
    print(f"distinct sources x block sizes and warps {len(with_blocks)}")
    print(f"distinct compiles (x argument specialization) {len(compiles)}")
    per_source = collections.Counter(s for s, _, _ in compiles)
    spread = collections.Counter(per_source.values())
    print("compiles per source:", dict(sorted(spread.items())))
    per_source_blocks = collections.Counter(s for s, _ in with_blocks)
    print("block settings per source:", dict(sorted(collections.Counter(per_source_blocks.values()).items())))
    # Which specialization differences split a source: same source and blocks, different specialization.
    by_blocks = collections.defaultdict(set)
    for s, o, spec in compiles:
        by_blocks[(s, o)].add(spec)
    print(
        "specializations per (source, blocks):",
        dict(sorted(collections.Counter(len(v) for v in by_blocks.values()).items())),
    )


def time_sample(folder: Path, count: int, workers: int) -> None:
    """Compile `count` distinct compiles drawn at random (seed 0) for sm_90, in `workers` worker processes
    with an empty Triton cache, and print the seconds each took (the CPU cost of the GPU's compiles)."""
    import random
    import statistics
    import tempfile

    from fuser.runtime import compile_pool

    keys = [
        json.loads(line) for path in folder.glob("keys-*.jsonl") for line in path.read_text().splitlines()
    ]
    distinct = list({(k["source"], k["options"], k["specialization"]): k["job"] for k in keys}.values())
    sample = random.Random(0).sample(distinct, min(count, len(distinct)))
    os.environ["TRITON_CACHE_DIR"] = tempfile.mkdtemp(prefix="count-gpu-compiles-")
    pool = compile_pool.Pool(workers)
    answers = [f.result() for f in [pool.submit(job) for job in sample]]
    pool.close()
    seconds = sorted(a["seconds"] for a in answers if "seconds" in a)
    failed = [a["error"][:200] for a in answers if "error" in a]
    print(f"compiled {len(seconds)} of {len(sample)} sampled ({len(failed)} failed: {failed[:3]})")
    print(
        f"seconds each: median {statistics.median(seconds):.3f}, mean {statistics.fmean(seconds):.3f}, "
        f"p90 {seconds[int(0.9 * len(seconds))]:.3f}, max {seconds[-1]:.3f}"
    )
    print(
        f"all {len(distinct)} distinct compiles at the mean: {len(distinct) * statistics.fmean(seconds):.0f} CPU s"
    )


if __name__ == "__main__":
    if len(sys.argv) > 2:
        time_sample(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    else:
        tally(Path(sys.argv[1]))
