#!/usr/bin/env bash
# The FX graphs the fuser gets for conformance cases that fail on CUDA but pass on CPU, to diff against
# the CPU's: each case once with TORCH_LOGS=graph_code,aot_graphs, its log in $OUT/<case>.log.
#   OUT=/tmp/graphs bash tools/gpu/graphs_on_gpu.sh "aten.narrow.default float32 from_reduction fwd" ...
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/graphs}
DEVICE=${DEVICE:-cuda}
source tools/gpu/lib.sh
gpu_setup
for spec in "$@"; do
    read -r op dtype context direction <<<"$spec"
    TORCH_LOGS=graph_code,aot_graphs FUSER_STRICT=1 timeout 120 "$PYTHON" -m pytest conformance/test_ops.py \
        --conformance-backend fuser --conformance-device "$DEVICE" --conformance-tier full --conformance-op "$op" --conformance-dtype "$dtype" --conformance-context "$context" \
        --conformance-direction "$direction" -p no:cacheprovider -p no:benchmark -q --tb=short \
        >"$OUT/$op-$dtype-$context-$direction-$DEVICE.log" 2>&1
    echo "$spec: exit $? ($(grep -c . "$OUT/$op-$dtype-$context-$direction-$DEVICE.log") lines)"
done
