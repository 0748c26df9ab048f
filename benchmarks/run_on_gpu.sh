#!/usr/bin/env bash
# The recorded GPU run: versions, the benchmark, then the whole test suite on CUDA. Logs go to $OUT.
#   OUT=/tmp/gpu bash benchmarks/run_on_gpu.sh [extra pytest args]
set -u
OUT=${OUT:-/tmp/fuser-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || cat "$OUT/install.log"
{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
} 2>&1 | tee "$OUT/env.txt"
python3 benchmarks/compare.py --json "$OUT/bench.json" $BENCH_ARGS 2>&1 | tee "$OUT/bench.log" | grep -v Warning
FUSER_TEST_DEVICE=cuda timeout "${TEST_TIMEOUT:-420}" python3 -m pytest tests -q -n 8 -p no:cacheprovider \
    --junitxml="$OUT/junit.xml" "$@" >"$OUT/pytest.log" 2>&1
echo "pytest exit $?"
grep -E "passed|failed" "$OUT/pytest.log" | tail -3
grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -40
