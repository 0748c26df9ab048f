#!/usr/bin/env bash
# The recorded GPU run of the conformance suite: the fuser, on CUDA, full tier (or what "$@" selects).
#   OUT=/tmp/conformance-gpu bash tools/conformance_on_gpu.sh --shard 1/3
# The report (JSON + Markdown), the pytest log and the versions land in $OUT.
set -u
OUT=${OUT:-/tmp/conformance-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FUSER_STRICT=1
if ls .whl/*.whl >/dev/null 2>&1; then  # carried wheels (jsonschema and its needs) where pip has no index
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || cat "$OUT/install.log"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
    echo "cpus $(nproc)"
} 2>&1 | tee "$OUT/env.txt"
# SIGINT at the time limit: pytest stops, and the plugin still writes the report of the cases that ran.
timeout -s INT "${SUITE_TIMEOUT:-540}" python3 -m pytest conformance/test_ops.py --backend fuser --device cuda \
    --tier full -n "${WORKERS:-14}" -p no:cacheprovider -p no:benchmark -q --tb=line -rf \
    --conformance-report "$OUT" "$@" >"$OUT/pytest.log" 2>&1
echo "pytest exit $?"
grep -A10 "= conformance =" "$OUT/pytest.log"
grep -E "^FAILED" "$OUT/pytest.log" | head -80
