#!/usr/bin/env bash
# Correctness work for the lent GPU, run side by side in one device call (none of it is timed against
# anything, so the jobs share the machine's 16 CPUs and its GPU):
#   zoo        the zoo tier for $ZOO_BACKEND (default fuser), fp32 and bf16, 20 training steps, the models
#              split into $ZOO_SHARDS processes (issue 18); compile seconds are inflated by the sharing
#   validate   `python -m conformance.validate --device cuda` of the ops the perf gate's workloads use
#              (tools/workload_ops.py), in $VALIDATE_SHARDS processes writing one manifest under its
#              lock (issue 14); the manifest and each op's log come back
#   optim      the optimizer, in-place and horizontal tests on CUDA, and the optimizer-step conformance
#              programs under the fuser and the default backend (issue 13)
# JOBS picks jobs (default: all three). Everything lands in $OUT, packed into one archive at the end.
#   OUT=$OUT bash tools/gpu_correctness.sh
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/gpu-correctness}
TOTAL_S=${TOTAL_S:-560}
source tools/gpu_lib.sh
gpu_setup
export OMP_NUM_THREADS=2
versions 2>&1 | tee "$OUT/versions.txt"
JOBS=${JOBS:-"zoo validate optim"}
left=$((TOTAL_S - SECONDS - 15))
pids=()

job() {  # job NAME COMMAND...: in the background, at most $left seconds, output to $OUT/NAME.log
    local name=$1
    shift
    (
        started=$SECONDS
        timeout -s INT -k 20 "$left" "$@" >"$OUT/$name.log" 2>&1
        echo "$name: exit $? after $((SECONDS - started)) s" >>"$OUT/steps.txt"
    ) &
    pids+=($!)
}

if [[ " $JOBS " == *" zoo "* ]]; then
    # Balanced by the fuser's compile seconds on an H100 (docs/zoo.md).
    IFS=';' read -ra groups <<<"${ZOO_GROUPS:-t5,qwen2;vit,mistral;mixtral,gemma;bert,timm_resnet;llama,timm_vit;timm_convnext,gpt2}"
    for i in "${!groups[@]}"; do
        job "zoo-$i" "$PYTHON" -m conformance.zoo --device cuda --backend "${ZOO_BACKEND:-fuser}" \
            --model "${groups[$i]}" --steps 20 --out "$OUT/zoo-$i"
    done
fi

if [[ " $JOBS " == *" validate "* ]]; then
    "$PYTHON" tools/workload_ops.py --device cuda --size gpu_tiny --json >"$OUT/workload-ops.json" 2>"$OUT/workload-ops.log"
    mapfile -t ops < <("$PYTHON" -c "import json,sys; print('\n'.join(json.load(open(sys.argv[1]))))" "$OUT/workload-ops.json")
    echo "validate: ${#ops[@]} ops used by the gate workloads: ${ops[*]}"
    shards=${VALIDATE_SHARDS:-8}
    for k in $(seq 1 "$shards"); do
        job "validate-$k" "$PYTHON" -m conformance.validate --device cuda --shard "$k/$shards" \
            --logs "$OUT/validate-logs" "${ops[@]}"
    done
fi

if [[ " $JOBS " == *" optim "* ]]; then
    job optim bash -c "
        FUSER_TEST_DEVICE=cuda FUSER_STRICT=1 $PYTHON -m pytest -q -n 2 -p no:cacheprovider \
            tests/fuser/test_optimizers.py tests/fuser/test_inplace.py tests/fuser/test_horizontal.py
        for backend in fuser inductor; do
            echo \"=== conformance optimizers, \$backend\"
            FUSER_STRICT=1 $PYTHON -m pytest conformance/test_optimizers.py --device cuda --backend \$backend \
                -q -p no:cacheprovider -p no:benchmark --conformance-report $OUT/optim-conformance-\$backend
        done"
fi

wait "${pids[@]}"
printf '\n=== jobs ===\n'
cat "$OUT/steps.txt"
for f in "$OUT"/zoo-*/zoo-*.md; do [[ -f $f ]] && { echo "--- $f"; cat "$f"; }; done
grep -h -E "validated|failed|nothing validated|^\| aten|^\| prims" "$OUT"/validate-*.log 2>/dev/null | head -80
tail -3 "$OUT/optim.log" 2>/dev/null
cp -r fuser/manifest "$OUT/manifest" 2>/dev/null
cp -r reports/validate "$OUT/validate-reports" 2>/dev/null
bundle gpu-correctness
