# What the GPU-run scripts share (sourced, from the repository root, with OUT set; PYTHON defaults to
# python3, and DEADLINE, which `step` honours, to TOTAL_S seconds from now, default 580):
#   gpu_setup          carried wheels (.whl/, where the GPU machine has no package index) and the
#                      project installed editable (so torch.compile finds backend="fuser")
#   versions           GPU, driver, Python, torch, CUDA, triton, cores and commit
#   step NAME CAP RESERVE COMMAND...
#                      runs COMMAND for at most CAP seconds and never into the last RESERVE seconds
#                      before DEADLINE (kept for later steps); output to the terminal and $OUT/NAME.log,
#                      exit status to $OUT/steps.txt. Where STEPS is set, only the steps it names run.
#   bundle NAME        packs $OUT into $OUT/NAME.tar.gz (the device tool brings back at most 8 files)

PYTHON=${PYTHON:-python3}
DEADLINE=$((SECONDS + ${TOTAL_S:-580}))

gpu_setup() {
    mkdir -p "$OUT"
    : >"$OUT/steps.txt"
    export PYTHONUNBUFFERED=1 PYTHON
    # The configuration users get: an op this GPU's manifest does not validate runs eagerly (the conformance
    # suite reports its cases "not validated"). A script that means to check every lowering sets OPT_IN=1
    # before sourcing this file.
    if [[ -n "${OPT_IN:-}" ]]; then
        export FUSER_UNVALIDATED=${FUSER_UNVALIDATED:-fuse}
        echo "fuser: FUSER_UNVALIDATED=$FUSER_UNVALIDATED (unvalidated ops are fused on purpose)" | tee "$OUT/unvalidated.txt"
    else
        echo "fuser: FUSER_UNVALIDATED=${FUSER_UNVALIDATED:-(unset: the defaults)}" | tee "$OUT/unvalidated.txt"
    fi
    if ! "$PYTHON" -c "import jsonschema" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
        "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl \
            && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    fi
    "$PYTHON" -m pip install -q --no-deps --no-build-isolation -e . >"$OUT/install.log" 2>&1 || cat "$OUT/install.log"
}

versions() {
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
    "$PYTHON" -c "
import importlib.metadata, platform, torch, triton
print('python', platform.python_version(), '| torch', torch.__version__, '| cuda', torch.version.cuda,
      '| triton', triton.__version__, '| jsonschema', importlib.metadata.version('jsonschema'))
print('device', torch.cuda.get_device_name(), '| capability', torch.cuda.get_device_capability(),
      '| gpus', torch.cuda.device_count())"
    echo "cpus $(nproc) | commit $(git rev-parse HEAD 2>/dev/null || echo 'unknown (no git checkout)')"
}
export -f versions

step() {
    local name=$1 cap=$2 reserve=$3
    shift 3
    [[ -n "${STEPS:-}" && " $STEPS " != *" $name "* ]] && return
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

bundle() {
    tar -czf "/tmp/$1.tar.gz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "/tmp/$1.tar.gz" "$OUT/"
    echo "bundled: $OUT/$1.tar.gz"
}
