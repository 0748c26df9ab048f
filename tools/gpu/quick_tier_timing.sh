#!/usr/bin/env bash
# The conformance quick tier under the fuser on one GPU, timed from empty kernel caches (Triton's and the
# fuser's) and then again with the caches that run filled, as a CI cache or a developer's machine keeps
# them between runs (issue 14, item 7). Each run's report and log land in $OUT/<run>/.
#   OUT=$OUT bash tools/gpu/quick_tier_timing.sh [pytest options, e.g. --shard 1/4]   # RUNS="cold warm", WORKERS=15
# Each process's start-up, collection and tests are written to $OUT/<run>/timeline (tools/pytest_timeline.py).
# A case fails after CASE_TIME_LIMIT_S (default 60 s; the slowest case from empty caches took 28 s on an
# H100): torch 2.11 never finishes compiling cumprod's backward (ledgered), and it must not hold the run.
# The cold run alone fills most of a 10-minute device call; the warm run can then be the next call on
# the same machine (RUNS=warm keeps the caches, which live under /tmp while the machine is held).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/quick-tier-timing}
source tools/gpu/lib.sh
gpu_setup
export FUSER_STRICT=1
versions 2>&1 | tee "$OUT/env.txt"
export TRITON_CACHE_DIR=/tmp/quick-tier-triton-cache FUSER_KERNEL_DIR=/tmp/quick-tier-fuser-kernels
[[ " ${RUNS:-cold warm} " == *" cold "* ]] && rm -rf "$TRITON_CACHE_DIR" "$FUSER_KERNEL_DIR"
echo "Triton cache before: $(find "$TRITON_CACHE_DIR" -name '*.cubin' 2>/dev/null | wc -l) cubins" | tee -a "$OUT/steps.txt"
for run in ${RUNS:-cold warm}; do
    mkdir -p "$OUT/$run"
    started=$SECONDS
    # SIGINT at the limit: pytest stops, and the plugin still writes the report of the cases that ran.
    limit=$((DEADLINE - SECONDS - 10))
    ((limit < 30)) && { echo "$run: skipped, no time left" | tee -a "$OUT/steps.txt"; continue; }
    PYTHONPATH=tools${PYTHONPATH:+:$PYTHONPATH} TIMELINE_DIR="$OUT/$run/timeline" \
        timeout -s INT "$limit" "$PYTHON" -m pytest conformance/test_ops.py -p pytest_timeline --conformance-backend fuser \
        --conformance-device cuda --conformance-tier quick -n "${WORKERS:-15}" -p no:cacheprovider -p no:benchmark -q --tb=line -rf \
        --durations=10 --conformance-case-time-limit "${CASE_TIME_LIMIT_S:-60}" --conformance-report "$OUT/$run" "$@" >"$OUT/$run/pytest.log" 2>&1
    status=$?
    echo "$run: pytest exit $status after $((SECONDS - started)) s; Triton cache: $(find "$TRITON_CACHE_DIR" -name '*.cubin' | wc -l) cubins" | tee -a "$OUT/steps.txt"
    tail -3 "$OUT/$run/pytest.log"
    "$PYTHON" tools/pytest_timeline.py "$OUT/$run/timeline" | tee "$OUT/$run/timeline.txt"
done
grep -h -A12 "slowest" "$OUT"/*/pytest.log | head -30
bundle quick-tier-timing  # the device tool brings back at most 8 files
