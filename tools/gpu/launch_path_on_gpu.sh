#!/usr/bin/env bash
# Issue 29 items 3 and 4 on the lent GPU (recorded in docs/gpu-runs.md), best on a 2-GPU machine, whose
# second GPU runs the tests while the first is profiled (nothing timed shares the host with them later):
#   tests     the fuser's tests on CUDA (the launch path serves every kernel), on the last GPU
#   profile   where a zoo model's first call goes, under the fuser and under Inductor (cProfile of the timed
#             region, raw stats kept; PROFILE_MODEL, default llama)
#   call      benchmarks/call_path.py: the small call, the three launch routes beside Inductor, fresh processes
#   first     benchmarks/first_call.py: zoo models' first calls (MODELS, default llama gpt2) beside Inductor
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/launch-path}
source tools/gpu/lib.sh
gpu_setup
step env 30 0 bash -c versions
gpus=$(nvidia-smi -L | wc -l)
if [[ -z "${STEPS:-}" || " $STEPS " == *" tests "* ]]; then
    (CUDA_VISIBLE_DEVICES=$((gpus - 1)) FUSER_TEST_DEVICE=cuda timeout -k 10 400 "$PYTHON" -m pytest tests/fuser -q \
        -p no:cacheprovider -n "${TEST_WORKERS:-8}" >"$OUT/tests.log" 2>&1; echo "tests: exit $?" >>"$OUT/steps.txt") &
    tests=$!
    ((gpus > 1)) || wait "$tests"  # one GPU: the tests first, alone
fi
for backend in fuser inductor; do
    step "profile-$backend" 100 300 "$PYTHON" tools/probes/first_call_profile_cuda.py --model "${PROFILE_MODEL:-llama}" \
        --backend "$backend" --out "$OUT/profile"
done
[[ -n "${tests:-}" ]] && wait "$tests" && tail -3 "$OUT/tests.log"
step call 200 150 "$PYTHON" benchmarks/call_path.py --device cuda --repeats 3 \
    --variants inductor fuser fuser-static-run fuser-triton-launcher --json "$OUT/call_path.json"
# shellcheck disable=SC2086  # MODELS is a list
step first 400 5 "$PYTHON" benchmarks/first_call.py --device cuda --models ${MODELS:-llama gpt2} \
    --backends inductor fuser --repeats "${REPEATS:-3}" --json "$OUT/first_call.json"
bundle launch-path
