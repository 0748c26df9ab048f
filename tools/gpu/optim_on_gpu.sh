#!/usr/bin/env bash
# Issue 13's recorded GPU run (docs/gpu-runs.md, "to be measured"): compiled optimizer steps on CUDA.
#   OUT=$OUT bash tools/gpu/optim_on_gpu.sh   (STEPS="env tests conformance-fuser conformance-inductor bench" picks)
#   env          versions;
#   warm         tools/gpu/warm_times.sh with horizontal fusion on: each perf-gate workload's cold compile
#                (caches emptied), adam_step's and sgd_momentum_step's included (WARM_LIMIT_S caps it);
#   tests        the optimizer, in-place and horizontal tests on CUDA (horizontal fusion on: they set it);
#   conformance-fuser, conformance-inductor: the optimizer-step programs on CUDA under the fuser and the default backend;
#   hostpath     benchmarks/optimizer_host_path.py --device cuda in 3 fresh processes: the host's time per
#                compiled AdamW step over 200 tensors, kernels no-op'd;
#   bench        benchmarks/optimizer_step.py: issue 13's table (AdamW, then SGD with momentum, 200
#                parameters of 1,000-600,000 elements; BENCH_VARIANTS picks variants, e.g. with
#                fuser_graph,inductor_graph), details under $OUT/bench.
#   bench3       the same in 3 fresh processes (BENCH3_VARIANTS, default eager,fused,fuser), then
#                tools/optim_medians.py: median and range per variant, details under $OUT/bench3/run*.
# Everything lands in $OUT (one archive at the end).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/optim-on-gpu}
source tools/gpu/lib.sh
gpu_setup
step env 30 0 bash -c versions
step warm "${WARM_LIMIT_S:-130}" 300 env FUSER_HORIZONTAL=1 LIMIT_S="${WARM_LIMIT_S:-130}" bash tools/gpu/warm_times.sh
step tests 120 300 env FUSER_TEST_DEVICE=cuda FUSER_STRICT=1 "$PYTHON" -m pytest -q -n 8 -p no:cacheprovider \
    tests/fuser/test_optimizers.py tests/fuser/test_inplace.py tests/fuser/test_horizontal.py tests/fuser/test_cuda_graphs.py
for backend in fuser inductor; do
    step "conformance-$backend" 60 240 env FUSER_STRICT=1 "$PYTHON" -m pytest conformance/test_optimizers.py \
        --conformance-tier models --conformance-device cuda --conformance-backend "$backend" -q -p no:cacheprovider -p no:benchmark
done
step hostpath 60 300 bash -c "for i in 1 2 3; do $PYTHON benchmarks/optimizer_host_path.py --device cuda | tail -1; done"
step bench 400 5 "$PYTHON" benchmarks/optimizer_step.py --device cuda --out "$OUT/bench" \
    --variants "${BENCH_VARIANTS:-eager,fused,inductor,fuser}"
bench3() {
    for i in 1 2 3; do
        "$PYTHON" benchmarks/optimizer_step.py --device cuda --out "$OUT/bench3/run$i" \
            --variants "${BENCH3_VARIANTS:-eager,fused,fuser}" || return
    done
    "$PYTHON" tools/optim_medians.py "$OUT"/bench3/run*
}
export -f bench3
step bench3 400 5 bash -c bench3
printf '\n=== summary ===\n'
cat "$OUT/steps.txt"
bundle optim-on-gpu
