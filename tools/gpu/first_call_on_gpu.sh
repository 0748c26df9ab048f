#!/usr/bin/env bash
# The first call of zoo models (forward and backward, fp32) from empty caches, per backend, on the lent
# GPU (issue 29 item 4; recorded in docs/gpu-runs.md), and the compile pool's GPU test:
#   MODELS="gpt2 t5" REPEATS=3 bash tools/gpu/first_call_on_gpu.sh
#   STEPS="env pool" ...        only the versions and tests/fuser/test_compile_pool.py on CUDA
# Backends: `aot_eager` (Dynamo and AOTAutograd, no backend compile: the share of a first call that is
# not the backend's own), `inductor`, and `fuser` as configured by default (since session 22 its kernels
# compiled ahead in worker processes; `fuser-threads` in threads, session 21's default; `fuser-at-launch`
# at each kernel's first launch). A process took 30-40 s with its imports
# in session 21, when the GPU machine compiled every imported module's source in each process (the bench
# now compiles their bytecode once, first): a device call of ten minutes held about a dozen processes.
# Writes $OUT/first_call.json (every run) and each step's log; the bench prints the table of medians.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/first-call}
source tools/gpu/lib.sh
gpu_setup
step env 30 0 bash -c versions
step pool 120 0 env FUSER_TEST_DEVICE=cuda "$PYTHON" -m pytest tests/fuser/test_compile_pool.py -q -p no:cacheprovider
# shellcheck disable=SC2086  # MODELS and BACKENDS are lists
step bench 600 5 "$PYTHON" benchmarks/first_call.py --device cuda --models ${MODELS:-gpt2} \
    --backends ${BACKENDS:-aot_eager inductor fuser} --repeats "${REPEATS:-3}" --seed "${SEED:-0}" \
    --json "$OUT/first_call.json"
