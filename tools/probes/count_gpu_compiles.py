"""Count, on a CPU, the distinct Triton compiles a GPU run would make: where the CUDA quick tier's and
validation's cubins come from (issue 27: compile time bounds both).

A pytest plugin. With FUSER_CHECK_CUDA_COMPILE=90 set, every interpreted launch is bound through Triton's
own argument binder for sm_90, as `fuser.gpu_compile_check` does, but nothing is compiled: each launch's
key (the kernel's source hash, its integer and pointer specialization, its block sizes and warps) goes to
a file per process. Then `python tools/probes/count_gpu_compiles.py DIR` tallies them:

    FUSER_CHECK_CUDA_COMPILE=90 COUNT_GPU_COMPILES=/tmp/keys pytest conformance/ -n 2 \
        -p tools.probes.count_gpu_compiles --conformance-tier quick -q
    python tools/probes/count_gpu_compiles.py /tmp/keys
"""

from __future__ import annotations

import collections
import json
import os
import sys
from pathlib import Path

OUT_ENV = "COUNT_GPU_COMPILES"


def pytest_configure(config) -> None:
    folder = os.environ.get(OUT_ENV)
    if not folder:
        return
    from fuser import gpu_compile_check

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
        text = Path(folder) / f"{jit_fn.cache_key}.py"
        if not text.exists():
            text.write_text(jit_fn.src)
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


if __name__ == "__main__":
    tally(Path(sys.argv[1]))
