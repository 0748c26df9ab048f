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
PYTHON=${PYTHON:-python3}
DEADLINE=$((SECONDS + ${TOTAL_S:-520}))
mkdir -p "$OUT"
: >"$OUT/steps.txt"
export PYTHONUNBUFFERED=1

# step NAME CAP RESERVE COMMAND...: runs COMMAND for at most CAP seconds, and never into the last RESERVE
# seconds before the deadline (kept for the steps after it); its output goes to the terminal and
# $OUT/NAME.log.
step() {
    local name=$1 cap=$2 reserve=$3
    shift 3
    local limit=$((DEADLINE - SECONDS - reserve))
    ((limit > cap)) && limit=$cap
    printf '\n=== %s (at most %d s) ===\n+ %s\n' "$name" "$limit" "$*"
    if ((limit < 10)); then
        echo "$name: skipped, no time left" | tee -a "$OUT/steps.txt"
        return
    fi
    local started=$SECONDS
    timeout -k 10 "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
    local status=${PIPESTATUS[0]}
    local note=""
    ((status == 124 || status == 137)) && note=" (timed out)"
    echo "$name: exit $status after $((SECONDS - started)) s$note" | tee -a "$OUT/steps.txt"
}

if ! "$PYTHON" -c "import jsonschema" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

versions() {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    "$PYTHON" -c "
import importlib.metadata, platform, torch, triton
print('python', platform.python_version(), '| torch', torch.__version__, '| cuda', torch.version.cuda,
      '| triton', triton.__version__, '| jsonschema', importlib.metadata.version('jsonschema'))
print('device', torch.cuda.get_device_name(), '| capability', torch.cuda.get_device_capability())"
    echo "cpus $(nproc) | commit $(git rev-parse HEAD 2>/dev/null || echo 'unknown (no git checkout)')"
}
export -f versions
export PYTHON
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
if [[ -n ${BUNDLE:-} ]]; then
    tar -czf /tmp/perfgate-run.tar.gz -C "$OUT" . && rm -rf "${OUT:?}"/* && mv /tmp/perfgate-run.tar.gz "$OUT/"
    echo "bundled: $OUT/perfgate-run.tar.gz"
fi
