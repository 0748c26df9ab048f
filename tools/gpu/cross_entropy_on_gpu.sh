#!/usr/bin/env bash
# Issue 29 item 1 on the lent GPU: the cross-entropy and softmax workloads (recorded in docs/gpu-runs.md):
#   STEPS="env validate tests" bash tools/gpu/cross_entropy_on_gpu.sh   then apply $OUT/sm_90.toml here
#   STEPS="env tests conformance bench-1 bench-2 bench-3 sweep" bash tools/gpu/cross_entropy_on_gpu.sh
# validate: every op without a fresh sm_90 entry, into $OUT/sm_90.toml (VALIDATE_ARGS: more options,
#   e.g. "--fuzz-examples 0");
# tests: the fuser's tests of the indexed ops and of online softmax, on CUDA ($TESTS: others);
# conformance: the full tier of the softmax, log-softmax, logsumexp, loss and layer-norm ops under the fuser
#   on CUDA ($CONFORMANCE_S seconds at most, default 300; $CONFORMANCE_TIER and $CONFORMANCE_OPS, a comma
#   list, for another tier or other ops),
#   in the configuration users get (long rows of 20,000 columns run the looped kernels);
# bench-<k>: benchmarks/compare.py on the cross-entropy and softmax workloads ($WORKLOADS; fuser, default
#   backend, eager side by side) in fresh process k: $OUT/bench-<k>.json; $BENCH_SWEEP: launch settings
#   the fuser is timed under too, in the same process (an A/B of settings in each of the processes);
# gelu-<k>: tools/probes/gelu_tanh_forms_cuda.py in fresh process k (item 5: tanh-gelu's forms, their cost
#   and float32 accuracy, beside the fuser's, Inductor's and eager's kernels and a plain add);
# sweep: the forward's looped kernel under other launch settings ($SWEEP; one row a program, RBLOCK 2048,
#   4 warps by default), or other workloads' ($SWEEP_WORKLOADS, $SWEEP_S seconds).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/cross-entropy}
source tools/gpu/lib.sh
gpu_setup
step env 30 0 bash -c versions
step validate "${VALIDATE_S:-300}" 60 "$PYTHON" -m conformance.validate --batch --all-unvalidated --device cuda \
    --workers "${WORKERS:-12}" --logs reports/validate/logs ${VALIDATE_ARGS:-}
cp fuser/manifest/sm_90.toml "$OUT/" 2>/dev/null
# shellcheck disable=SC2086  # TESTS is a list of test files
step tests 200 0 env FUSER_TEST_DEVICE=cuda "$PYTHON" -m pytest \
    ${TESTS:-tests/fuser/test_indexed.py tests/fuser/test_online_softmax.py} -q -p no:cacheprovider
workloads=${WORKLOADS:-"cross_entropy cross_entropy_backward softmax"}
for k in $(seq 1 "${PROCESSES:-3}"); do
    # shellcheck disable=SC2086  # a list of workloads
    step "bench-$k" 300 0 "$PYTHON" benchmarks/compare.py $(printf -- '--workload %s ' $workloads) \
        --repeats "${REPEATS:-3}" --json "$OUT/bench-$k.json" --sweep "${BENCH_SWEEP:-}"
done
for k in $(seq 1 "${PROCESSES:-3}"); do
    step "gelu-$k" 120 0 "$PYTHON" tools/probes/gelu_tanh_forms_cuda.py
done
# shellcheck disable=SC2046  # a list of workloads
step sweep "${SWEEP_S:-200}" 0 "$PYTHON" benchmarks/compare.py $(printf -- '--workload %s ' ${SWEEP_WORKLOADS:-cross_entropy}) \
    --repeats 1 --json "$OUT/sweep.json" \
    --sweep "${SWEEP:-GPU_LOOP_RBLOCK=1024,GPU_LOOP_RBLOCK=4096,GPU_LOOP_RBLOCK=8192,GPU_ELEMENTS_PER_WARP=256,GPU_ELEMENTS_PER_WARP=128}"
loss_ops=aten._softmax.default,aten._log_softmax.default,aten.softmax.int,aten.log_softmax.int,aten.logsumexp.default
loss_ops+=,aten.cross_entropy_loss.default,aten.nll_loss.default,aten.nll_loss2d_forward.default
loss_ops+=,aten.layer_norm.default,aten.native_layer_norm_backward.default
step conformance "${CONFORMANCE_S:-300}" 15 "$PYTHON" -m pytest conformance/ -p no:benchmark ${CONFORMANCE_PYTEST:--q -n 8} -p no:cacheprovider \
    --conformance-device cuda --conformance-tier "${CONFORMANCE_TIER:-full}" --conformance-report "$OUT/conformance" \
    --conformance-op "${CONFORMANCE_OPS:-$loss_ops}"
bundle cross-entropy
