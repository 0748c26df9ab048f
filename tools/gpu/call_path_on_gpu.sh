#!/usr/bin/env bash
# CUDA graphs of any graph and the call path (issue 29 item 3; recorded in docs/gpu-runs.md), on the lent GPU:
#   bash tools/gpu/call_path_on_gpu.sh               env, tests, bench, zoo (FUSER_CUDA_GRAPHS=1)
#   STEPS="env bench" REPEATS=3 VARIANTS="eager fuser" bash tools/gpu/call_path_on_gpu.sh
# tests: the replay rules on real CUDA graphs (tests/fuser/test_cuda_graphs.py, the optimizer's replay)
#   and the compile pool's GPU test; written: the call written out for a graph (tests/fuser/test_call_function.py)
#   and the launches it writes out (tests/fuser/test_launches.py);
# zoo: real models trained 20 steps with every static graph replayed, against eager (conformance.zoo);
# bench: benchmarks/call_path.py, each variant in fresh processes, writes $OUT/call_path.json.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/call-path}
source tools/gpu/lib.sh
gpu_setup
step env 30 0 bash -c versions
step tests 150 0 env FUSER_TEST_DEVICE=cuda "$PYTHON" -m pytest tests/fuser/test_cuda_graphs.py \
    tests/fuser/test_compile_pool.py tests/fuser/test_optimizers.py -q -p no:cacheprovider -k "cuda_graph or replay or gpu or pool"
step written 120 0 env FUSER_TEST_DEVICE=cuda "$PYTHON" -m pytest tests/fuser/test_call_function.py \
    tests/fuser/test_launches.py -q -p no:cacheprovider
# shellcheck disable=SC2086  # VARIANTS is a list
step bench 420 0 "$PYTHON" benchmarks/call_path.py --device cuda --repeats "${REPEATS:-3}" --json "$OUT/call_path.json" \
    ${VARIANTS:+--variants $VARIANTS}
step zoo 600 5 env FUSER_CUDA_GRAPHS=1 FUSER_LOG=1 "$PYTHON" -m conformance.zoo --device cuda --backend fuser \
    --model "${MODELS:-gpt2,llama,bert,vit}" --steps 20 --out "$OUT"

printf "\n=== summary ===\n"
cat "$OUT/steps.txt"
bundle call-path
