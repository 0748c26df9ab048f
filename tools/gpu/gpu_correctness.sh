#!/usr/bin/env bash
# Correctness work for the lent GPU, run side by side in one device call (none of it is timed against
# anything, so the jobs share the machine's 16 CPUs and its GPU):
#   zoo        the zoo tier for $ZOO_BACKEND (default fuser), fp32 and bf16, 20 training steps, the models
#              split into processes by $ZOO_GROUPS (issue 18); compile seconds are inflated by the sharing
#   validate   `python -m conformance.validate --device cuda` of the ops the perf gate's workloads use
#              (tools/workload_ops.py), in $VALIDATE_SHARDS processes writing one manifest under its
#              lock (issue 14); the manifest and each op's log come back
#   optim      the optimizer, in-place and horizontal tests on CUDA (issue 13)
#   models     the `models` tier (model blocks and optimizer-step programs) under the fuser and the
#              default backend (issues 13, 16)
#   families   the quick tier of the families models lean on (losses, created tensors, indexing, random
#              ops, extern fallbacks) under the fuser and the default backend, $FAMILY_WORKERS each (issue 16)
#   fuzz       the fuzzer's `ci` profile against the fuser and the default backend on CUDA (issue 15)
#   tests      the fuser's own tests on CUDA (tests/fuser, $TEST_WORKERS workers, default 8)
#   profile    where llama's first call goes (tools/probes/first_call_profile_cuda.py); it is timed, so it
#              runs alone, before the other jobs start
#   probes     open CUDA questions: tools/probes/index_fill_cuda.py, and the ops named in $PROBE_OPS
#              (default: i0, i0_, index_fill.int_Tensor) through the conformance suite under the fuser
# JOBS picks jobs (default: zoo validate optim). Everything lands in $OUT, packed into one archive.
#   OUT=$OUT bash tools/gpu/gpu_correctness.sh
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gpu-correctness}
TOTAL_S=${TOTAL_S:-530}  # jobs stop by then: the bundling and the manifest copy must fit in the call (600 s)
source tools/gpu/lib.sh
gpu_setup
versions 2>&1 | tee "$OUT/versions.txt"
JOBS=${JOBS:-"zoo validate optim"}
if [[ " $JOBS " == *" profile "* ]]; then  # before the settings below, which are for sharing the machine
    step profile 150 300 "$PYTHON" tools/probes/first_call_profile_cuda.py --model "${PROFILE_MODEL:-llama}" \
        --out "$OUT/profile"
fi
export OMP_NUM_THREADS=2
export TORCHINDUCTOR_COMPILE_THREADS=1  # the jobs already fill the CPUs
export FUSER_COMPILE_WORKERS=${POOL_WORKERS:-2}  # likewise: the fuser's compile workers, 15 by default
pids=()

left=$((TOTAL_S - SECONDS - 15))

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
    mapfile -t ops < <("$PYTHON" tools/workload_ops.py --device cuda --size gpu_tiny --unvalidated 2>>"$OUT/workload-ops.log")
    echo "validate: ${#ops[@]} ops used by the gate workloads have no fresh sm_90 entry: ${ops[*]}"
    # The prims are validated through one conformance op (aten.var.correction): one process runs it once.
    prims=() others=()
    for op in "${ops[@]}"; do [[ $op == prims.* ]] && prims+=("$op") || others+=("$op"); done
    ((${#prims[@]})) && job validate-prims "$PYTHON" -m conformance.validate --device cuda --workers "${PRIMS_WORKERS:-4}" \
        --progress "$OUT/validate-progress-prims.json" --logs "$OUT/validate-logs" "${prims[@]}"
    shards=${VALIDATE_SHARDS:-8}
    ((shards > ${#others[@]})) && shards=${#others[@]}
    for k in $(seq 1 "$shards"); do
        job "validate-$k" "$PYTHON" -m conformance.validate --device cuda --shard "$k/$shards" \
            --progress "$OUT/validate-progress-$k.json" --logs "$OUT/validate-logs" "${others[@]}"
    done
fi

if [[ " $JOBS " == *" optim "* ]]; then
    job optim env FUSER_TEST_DEVICE=cuda FUSER_STRICT=1 "$PYTHON" -m pytest -q -n 2 -p no:cacheprovider \
        tests/fuser/test_optimizers.py tests/fuser/test_inplace.py tests/fuser/test_horizontal.py
fi

if [[ " $JOBS " == *" tests "* ]]; then
    job tests env FUSER_TEST_DEVICE=cuda "$PYTHON" -m pytest tests/fuser -q -p no:cacheprovider -n "${TEST_WORKERS:-8}"
fi

if [[ " $JOBS " == *" probes "* ]]; then
    job probe-index-fill "$PYTHON" tools/probes/index_fill_cuda.py
    read -ra probe_ops <<<"${PROBE_OPS:-aten.i0.default aten.i0_.default aten.index_fill.int_Tensor}"
    job probe-ops env FUSER_STRICT=1 "$PYTHON" -m pytest conformance/test_ops.py --conformance-device cuda --conformance-backend fuser \
        --conformance-tier full -n 2 -q -rf -p no:cacheprovider -p no:benchmark "${probe_ops[@]/#/--conformance-op=}"
fi

for backend in fuser inductor; do
    if [[ " $JOBS " == *" models "* ]]; then
        job "models-$backend" env FUSER_STRICT=1 "$PYTHON" -m pytest conformance/test_blocks.py \
            conformance/test_optimizers.py --conformance-tier models --conformance-device cuda --conformance-backend "$backend" -q -rf \
            -p no:cacheprovider -p no:benchmark --conformance-report "$OUT/models-$backend"
    fi
    if [[ " $JOBS " == *" families "* ]]; then
        mapfile -t family_ops < <("$PYTHON" -c "
from conformance.specs.catalog import SPECS
skip = set('${FAMILY_SKIP:-aten.log_sigmoid_forward.default}'.split())  # eager CUDA rejects its every sample
print('\n'.join(op for op, s in SPECS.items() if s.category in ('loss', 'created', 'indexing', 'random', 'fallback') and op not in skip))")
        job "families-$backend" env FUSER_STRICT=1 "$PYTHON" -m pytest conformance/test_ops.py --conformance-device cuda \
            --conformance-backend "$backend" -n "${FAMILY_WORKERS:-5}" -q -rf -p no:cacheprovider -p no:benchmark \
            --conformance-report "$OUT/families-$backend" "${family_ops[@]/#/--conformance-op=}"
    fi
    if [[ " $JOBS " == *" fuzz "* ]]; then
        job "fuzz-$backend" "$PYTHON" -m conformance.fuzz --profile ci --examples "${FUZZ_EXAMPLES:-150}" \
            --device cuda --backend "$backend" \
            --out "$OUT/fuzz-$backend"
    fi
done

wait "${pids[@]}"
printf '\n=== jobs ===\n'
cat "$OUT/steps.txt"
for f in "$OUT"/zoo-*/zoo-*.md; do [[ -f $f ]] && { echo "--- $f"; cat "$f"; }; done
grep -h -E "validated|failed|nothing validated|^\| aten|^\| prims" "$OUT"/validate-*.log 2>/dev/null | head -80
for f in "$OUT"/tests.log "$OUT"/probe-*.log "$OUT"/optim.log "$OUT"/models-*.log "$OUT"/families-*.log "$OUT"/fuzz-*.log; do
    [[ -f $f ]] && { echo "--- $f"; grep -E "^FAILED|passed|failed|found|repro|gradient" "$f" | tail -12; }
done
cp -r fuser/manifest "$OUT/manifest" 2>/dev/null
cp -r reports/validate "$OUT/validate-reports" 2>/dev/null
bundle gpu-correctness
