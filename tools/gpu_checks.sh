#!/usr/bin/env bash
# One device call's worth of GPU checks for the fuser (docs/gpu-runs.md records what they printed):
#   1. versions;  2. benchmarks/compare.py (default, inductor, eager, and the fuser with eviction hints);
#   3. tools/probe_reflect_ftz.py;  4. the fuser's tests on CUDA;  5. the conformance suite's speed on
#   this box: full tier, shard 1/32, for CONFORMANCE_S seconds, then one case under cProfile with an
#   empty Triton cache (where a case's time goes).
#   OUT=/tmp/gpu-checks bash tools/gpu_checks.sh        (run from the repository root)
# Each step is capped by `timeout`; its output goes to $OUT/<step>.log. STEPS="env bench" runs only those.
set -u
OUT=${OUT:-/tmp/gpu-checks}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then  # carried wheels (jsonschema and its needs) where pip has no index
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || cat "$OUT/install.log"

step() {  # step NAME SECONDS COMMAND...   (only the steps named in $STEPS, where it is set)
    local name=$1 limit=$2 started=$SECONDS
    shift 2
    [[ -n "${STEPS:-}" && " $STEPS " != *" $name "* ]] && return
    printf '\n=== %s (at most %d s) ===\n' "$name" "$limit"
    timeout -k 10 "$limit" "$@" >"$OUT/$name.log" 2>&1
    echo "exit $? after $((SECONDS - started)) s"
}

step env 30 bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; python3 -c "import torch, triton; print(torch.__version__, triton.__version__, torch.cuda.get_device_name())"; nproc; git log -1 --format=%H 2>/dev/null'
cat "$OUT/env.log" 2>/dev/null
step bench "${BENCH_S:-240}" python3 benchmarks/compare.py --repeats 3 --eviction-hints --json "$OUT/bench.json" \
    --workload chain --workload add_layer_norm --workload rms_norm --workload softmax --workload layer_norm_fwd_bwd
grep -v Warning "$OUT/bench.log" | tail -25
step ftz 60 python3 tools/probe_reflect_ftz.py
cat "$OUT/ftz.log" 2>/dev/null
step tests "${TESTS_S:-180}" env FUSER_TEST_DEVICE=cuda python3 -m pytest tests/fuser -q -n 14 -p no:cacheprovider
tail -3 "$OUT/tests.log"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -20
step conformance "${CONFORMANCE_S:-150}" python3 -m pytest conformance/test_ops.py --backend fuser --device cuda \
    --tier full --shard 1/32 -n 15 -p no:cacheprovider -p no:benchmark -q --tb=no --conformance-report "$OUT"
grep -A3 "= conformance =" "$OUT/conformance.log"
step profile 90 env TRITON_CACHE_DIR=/tmp/empty-triton-cache python3 -m cProfile -o "$OUT/case.prof" -m pytest \
    conformance/test_ops.py --backend fuser --device cuda --tier full --op aten.cosh.default --dtype bfloat16 \
    --context into_reduction --direction bwd -p no:cacheprovider -p no:benchmark -q
python3 -c "import pstats; pstats.Stats('$OUT/case.prof').sort_stats('cumulative').print_stats(30)" 2>&1 \
    | grep -E "cumtime|^ +[0-9]" | head -40
# The device tool brings back at most 8 files: one archive of them all.
(cd "$OUT" && tar czf ../gpu-checks.tgz . && rm -rf ./* && mv ../gpu-checks.tgz .)
