#!/usr/bin/env bash
# The zoo tier on the lent GPU (recorded in docs/zoo.md): real transformers and timm models under one
# backend, fp32 and bf16 autocast, 20 training steps. One device call runs what fits in ten minutes:
#   MODELS=llama,mistral BACKEND=fuser bash tools/gpu/zoo_on_gpu.sh
# Writes $OUT/zoo-<backend>-cuda.{md,json}, the training PNG and each step's log.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/gpu/lib.sh
gpu_setup
versions | tee "$OUT/versions.txt"
step zoo 560 5 "$PYTHON" -m conformance.zoo --device cuda --backend "${BACKEND:-fuser}" \
    --model "${MODELS:?name the models}" --steps "${STEPS_TRAINED:-20}" --out "$OUT"
