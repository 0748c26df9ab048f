#!/usr/bin/env bash
# The recorded GPU run of the conformance suite: the fuser, on CUDA, full tier (or what "$@" selects),
# over every GPU of the machine (xdist worker k on GPU k mod the count).
#   OUT=/tmp/conformance-gpu WORKERS=62 bash tools/gpu/conformance_on_gpu.sh --shard 1/3
# The report (JSON + Markdown), the pytest log and the versions land in $OUT; tools/merge_reports.py
# merges the shards' reports.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/conformance-gpu}
source tools/gpu/lib.sh
gpu_setup
export FUSER_STRICT=1
versions 2>&1 | tee "$OUT/env.txt"
# SIGINT at the time limit: pytest stops, and the plugin still writes the report of the cases that ran.
timeout -s INT "${SUITE_TIMEOUT:-540}" "$PYTHON" -m pytest conformance/test_ops.py --conformance-backend fuser --conformance-device cuda \
    --conformance-tier full -n "${WORKERS:-14}" -p no:cacheprovider -p no:benchmark -q --tb=line -rf \
    --conformance-case-time-limit "${CASE_TIME_LIMIT_S:-180}" --conformance-report "$OUT" "$@" >"$OUT/pytest.log" 2>&1
echo "pytest exit $?"
grep -A10 "= conformance =" "$OUT/pytest.log"
grep -E "^FAILED" "$OUT/pytest.log" | head -80
