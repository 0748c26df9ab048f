#!/usr/bin/env bash
# Issue 29 items 3 and 4 on the lent GPU: kernels launched through torch's static CUDA launcher
# (fuser/runtime/direct_launch.py) against Triton's own, in one run (recorded in docs/gpu-runs.md):
#   tests     the fuser's tests on CUDA (the launch path serves every kernel)
#   call      benchmarks/call_path.py: the small call, both launchers beside Inductor, fresh processes
#   first     benchmarks/first_call.py: a zoo model's first call, both launchers beside Inductor
#   profile   where llama's first call goes under the fuser (session 20 left 5-8 s of it unexplained)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/launch-path}
source tools/gpu/lib.sh
gpu_setup
step env 30 0 bash -c versions
step profile 90 400 "$PYTHON" tools/probes/first_call_profile_cuda.py --model llama --out "$OUT/profile"
step tests 330 240 env FUSER_TEST_DEVICE=cuda "$PYTHON" -m pytest tests/fuser -q -p no:cacheprovider -n 12
step call 120 130 "$PYTHON" benchmarks/call_path.py --device cuda --repeats 3 \
    --variants inductor fuser fuser-triton-launcher --json "$OUT/call_path.json"
# shellcheck disable=SC2086  # MODELS is a list
step first 400 5 "$PYTHON" benchmarks/first_call.py --device cuda --models ${MODELS:-gpt2} \
    --backends inductor fuser fuser-triton-launcher --repeats "${REPEATS:-2}" --json "$OUT/first_call.json"
bundle launch-path
