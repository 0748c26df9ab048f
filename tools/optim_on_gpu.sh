#!/usr/bin/env bash
# Issue 13's recorded GPU run (docs/gpu-runs.md, "to be measured"): compiled optimizer steps on CUDA.
#   OUT=$OUT bash tools/optim_on_gpu.sh   (STEPS="env tests conformance-fuser conformance-inductor bench" picks)
#   env          versions;
#   tests        the optimizer, in-place and horizontal tests on CUDA (horizontal fusion on: they set it);
#   conformance-fuser, conformance-inductor: the optimizer-step programs on CUDA under the fuser and the default backend;
#   bench        benchmarks/optimizer_step.py: issue 13's table (AdamW, then SGD with momentum, 200
#                parameters of 1,000-600,000 elements), details under $OUT/bench.
# Everything lands in $OUT (one archive at the end).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/optim-on-gpu}
source tools/gpu_lib.sh
gpu_setup
step env 30 0 bash -c versions
step tests 150 300 env FUSER_TEST_DEVICE=cuda FUSER_STRICT=1 "$PYTHON" -m pytest -q -n 8 -p no:cacheprovider \
    tests/fuser/test_optimizers.py tests/fuser/test_inplace.py tests/fuser/test_horizontal.py
for backend in fuser inductor; do
    step "conformance-$backend" 60 240 env FUSER_STRICT=1 "$PYTHON" -m pytest conformance/test_optimizers.py \
        --tier models --device cuda --backend "$backend" -q -p no:cacheprovider -p no:benchmark
done
step bench 300 5 "$PYTHON" benchmarks/optimizer_step.py --device cuda --out "$OUT/bench"
printf '\n=== summary ===\n'
cat "$OUT/steps.txt"
bundle optim-on-gpu
