#!/usr/bin/env bash
# The recorded GPU run of the perf gate (docs/perfgate.md, "Recorded on a GPU"), on one lent GPU:
#   1. versions and the GPU's name;
#   2. python -m perfgate.gpu_validation: a fresh baseline, 20 gate runs of unchanged code (false
#      alarms), 20 with a 10% kernel-time slowdown injected (catches) -> $OUT/perfgate/;
#   3. a gate in a fresh process against that baseline (drift across processes);
#   4. python -m perfgate update --tier gpu on a copy of perfgate/baselines -> $OUT/baselines/sm_90.json,
#      this device's section added or rewritten, the other devices' left alone (diff: sm_90.diff);
#   5. a gate against that updated baseline.
# Run from the repository root, with the jsonschema wheels carried in .whl/ where pip has no index:
#   OUT=/tmp/perfgate-gpu bash tools/perfgate_on_gpu.sh     (BUNDLE=1: one .tar.gz, for the device tool)
# Every step runs under `timeout`, within TOTAL_S (default 520 s) for the whole script; each step's
# output lands in $OUT/<step>.log and the exit status of each in $OUT/steps.txt.
set -u
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/perfgate-gpu}
TOTAL_S=${TOTAL_S:-520}
source tools/gpu_lib.sh
gpu_setup
step env 60 0 bash -c versions

step gpu_validation 330 180 "$PYTHON" -m perfgate.gpu_validation --out "$OUT/perfgate" --budget-s 270

step gate_fresh_process 120 120 "$PYTHON" -m perfgate gate --tier gpu --baseline-dir "$OUT/perfgate" \
    --markdown "$OUT/gate_fresh_process.md" --json "$OUT/gate_fresh_process.json"

mkdir -p "$OUT/baselines"
cp perfgate/baselines/*.json "$OUT/baselines/"
step update 120 60 "$PYTHON" -m perfgate update --tier gpu --baseline-dir "$OUT/baselines"
diff -u perfgate/baselines/sm_90.json "$OUT/baselines/sm_90.json" >"$OUT/baselines/sm_90.diff"

step gate_new_baseline 120 0 "$PYTHON" -m perfgate gate --tier gpu --baseline-dir "$OUT/baselines" \
    --markdown "$OUT/gate_new_baseline.md" --json "$OUT/gate_new_baseline.json"

printf '\n=== summary ===\n'
cat "$OUT/steps.txt"
echo "new baseline: $OUT/baselines/sm_90.json (diff: $OUT/baselines/sm_90.diff)"
echo "validation: $OUT/perfgate/gpu_validation.json"

# The device tool brings back at most 8 files: BUNDLE=1 packs the run's files into one archive.
[[ -n ${BUNDLE:-} ]] && bundle perfgate-run
