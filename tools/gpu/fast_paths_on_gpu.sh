#!/usr/bin/env bash
# Issue 29's fast paths on the lent GPU: where each workload's device time goes, kernel by kernel, for the
# fuser, the default backend and eager side by side (benchmarks/compare.py), and leads for launch settings.
#   STEPS="env tests leads recompute graphs" bash tools/gpu/fast_paths_on_gpu.sh        one process: leads, not claims
#   STEPS="env bench" PROCESSES=3 bash tools/gpu/fast_paths_on_gpu.sh      claims: fresh processes
# leads: compare.py over WORKLOADS, each fuser call also timed under the SWEEP settings (one at a time);
# recompute: the training workloads with FUSER_RECOMPUTE=0 (every value the backward reads saved: the
#   default before session 17), beside the default (the min-cut partitioner);
# graphs: the training workloads with FUSER_CUDA_GRAPHS=1 (forward and backward replayed as CUDA graphs);
# baseline: `perfgate update` on the GPU for the workloads in CHANGED;
# bench: PROCESSES fresh processes of compare.py over WORKLOADS: $OUT/bench-<k>.json.
# shellcheck disable=SC2086  # word lists
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/fast-paths}
source tools/gpu/lib.sh
gpu_setup
step env 30 0 bash -c versions
# tests: the fuser's tests of what the fast paths changed, on CUDA.
step tests 200 60 env FUSER_TEST_DEVICE=cuda "$PYTHON" -m pytest -q -p no:cacheprovider ${TESTS:-tests/fuser/test_column_sums.py}
workloads=${WORKLOADS:-"layer_norm_backward add_layer_norm_backward bias_gelu pointwise_chain cross_entropy cross_entropy_backward"}
as_options() { printf -- '--workload %s ' "$@"; }
sweep=${SWEEP:-"GPU_ROW_GROUPS=128,GPU_ROW_GROUPS=512,GPU_ROW_GROUPS=1024,GPU_ROW_ELEMENTS=8192,GPU_ROW_ELEMENTS=16384,GPU_ELEMENTS_PER_WARP=256,GPU_ELEMENTS_PER_WARP=1024,GPU_ELEMENTS_PER_WARP=2048"}
step leads 360 60 "$PYTHON" benchmarks/compare.py $(as_options $workloads) --repeats "${REPEATS:-3}" \
    --json "$OUT/leads.json" --sweep "$sweep"
training=${TRAINING:-"layer_norm_backward add_layer_norm_backward cross_entropy_backward"}
step recompute 200 0 env FUSER_RECOMPUTE=0 "$PYTHON" benchmarks/compare.py $(as_options $training) \
    --repeats "${REPEATS:-3}" --json "$OUT/recompute.json"
step graphs 200 0 env FUSER_CUDA_GRAPHS=1 "$PYTHON" benchmarks/compare.py $(as_options $training) \
    --repeats "${REPEATS:-3}" --json "$OUT/graphs.json"
for k in $(seq 1 "${PROCESSES:-3}"); do
    step "bench-$k" 300 0 "$PYTHON" benchmarks/compare.py $(as_options $workloads) --repeats "${REPEATS:-3}" \
        --json "$OUT/bench-$k.json"
done
# baseline: the gate's deterministic figures (launches, bytes) and this device's timings for the workloads
# the fast paths changed, into perfgate/baselines/sm_90.json ($OUT/sm_90.json: apply it here).
changed=${CHANGED:-"layer_norm_backward add_layer_norm_backward cross_entropy cross_entropy_backward"}
step baseline 240 0 "$PYTHON" -m perfgate update --tier gpu --backend fuser $(as_options $changed)
cp perfgate/baselines/sm_90.json "$OUT/" 2>/dev/null
bundle fast-paths
