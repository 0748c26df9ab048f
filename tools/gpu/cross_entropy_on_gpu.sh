#!/usr/bin/env bash
# Issue 29 item 1 on the lent GPU: gather and scatter of a value fused, online softmax (recorded in
# docs/gpu-runs.md):
#   STEPS="env validate tests" bash tools/gpu/cross_entropy_on_gpu.sh   then apply $OUT/sm_90.toml here
#   STEPS="env bench" PROCESSES=3 bash tools/gpu/cross_entropy_on_gpu.sh
# validate: every op without a fresh sm_90 entry (gather.default and scatter.value), into $OUT/sm_90.toml
#   (VALIDATE_ARGS: more options, e.g. "--fuzz-examples 0");
# tests: the fuser's tests of the indexed ops and of online softmax, on CUDA;
# bench: benchmarks/compare.py on the cross-entropy and softmax workloads (fuser, default backend, eager side
#   by side), once per process, PROCESSES fresh processes: $OUT/bench-<k>.json; and recompute-<k>: the
#   backward workload with FUSER_RECOMPUTE=1 (the fuser's min-cut partitioner option);
# sweep: the forward's looped kernel under other launch settings (STEPS="env sweep"; not run yet).
# shellcheck disable=SC2086  # VALIDATE_ARGS is a list of options
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/cross-entropy}
source tools/gpu/lib.sh
gpu_setup
step env 30 0 bash -c versions
step validate "${VALIDATE_S:-300}" 60 "$PYTHON" -m conformance.validate --batch --all-unvalidated --device cuda \
    --workers "${WORKERS:-12}" --logs reports/validate/logs ${VALIDATE_ARGS:-}
cp fuser/manifest/sm_90.toml "$OUT/" 2>/dev/null
step tests 200 0 env FUSER_TEST_DEVICE=cuda "$PYTHON" -m pytest tests/fuser/test_indexed.py \
    tests/fuser/test_online_softmax.py -q -p no:cacheprovider
workloads=${WORKLOADS:-"cross_entropy cross_entropy_backward softmax"}
for k in $(seq 1 "${PROCESSES:-3}"); do
    # shellcheck disable=SC2086  # a list of workloads
    step "bench-$k" 300 0 "$PYTHON" benchmarks/compare.py $(printf -- '--workload %s ' $workloads) \
        --repeats "${REPEATS:-3}" --json "$OUT/bench-$k.json"
    # The same backward with the min-cut partitioner (options={"recompute": True}) for the fuser.
    step "recompute-$k" 300 0 env FUSER_RECOMPUTE=1 "$PYTHON" benchmarks/compare.py \
        --workload cross_entropy_backward --repeats "${REPEATS:-3}" --json "$OUT/recompute-$k.json"
done
# sweep: the looped forward kernel's launch settings (one row a program, RBLOCK 2048, 4 warps by default),
# against the 85% of copy peak issue 29 asks for.
step sweep 200 0 "$PYTHON" benchmarks/compare.py --workload cross_entropy --repeats 1 --json "$OUT/sweep.json" \
    --sweep "${SWEEP:-GPU_LOOP_RBLOCK=1024,GPU_LOOP_RBLOCK=4096,GPU_LOOP_RBLOCK=8192,GPU_ELEMENTS_PER_WARP=256,GPU_ELEMENTS_PER_WARP=128}"
bundle cross-entropy
