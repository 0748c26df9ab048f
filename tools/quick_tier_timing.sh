#!/usr/bin/env bash
# The conformance quick tier under the fuser on one GPU, timed from empty kernel caches (Triton's and the
# fuser's) and then again with the caches that run filled, as a CI cache or a developer's machine keeps
# them between runs (issue 14, item 7). Each run's report and log land in $OUT/<run>/.
#   OUT=$OUT bash tools/quick_tier_timing.sh               # RUNS="cold warm", WORKERS=15
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/quick-tier-timing}
source tools/gpu_lib.sh
gpu_setup
export FUSER_STRICT=1
versions 2>&1 | tee "$OUT/env.txt"
export TRITON_CACHE_DIR=/tmp/quick-tier-triton-cache FUSER_KERNEL_DIR=/tmp/quick-tier-fuser-kernels
rm -rf "$TRITON_CACHE_DIR" "$FUSER_KERNEL_DIR"
for run in ${RUNS:-cold warm}; do
    mkdir -p "$OUT/$run"
    started=$SECONDS
    # SIGINT at the limit: pytest stops, and the plugin still writes the report of the cases that ran.
    timeout -s INT "$((DEADLINE - SECONDS - 10))" "$PYTHON" -m pytest conformance/test_ops.py --backend fuser \
        --device cuda --tier quick -n "${WORKERS:-15}" -p no:cacheprovider -p no:benchmark -q --tb=line -rf \
        --durations=10 --conformance-report "$OUT/$run" >"$OUT/$run/pytest.log" 2>&1
    status=$?
    echo "$run: pytest exit $status after $((SECONDS - started)) s; Triton cache: $(find "$TRITON_CACHE_DIR" -name '*.cubin' | wc -l) cubins" | tee -a "$OUT/steps.txt"
    tail -3 "$OUT/$run/pytest.log"
done
grep -h -A12 "slowest" "$OUT"/*/pytest.log | head -30
