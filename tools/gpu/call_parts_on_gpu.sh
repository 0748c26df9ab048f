#!/usr/bin/env bash
# Issue 29 items 3 and 5, diagnosis on the lent GPU (recorded in docs/gpu-runs.md):
#   parts: where the fuser's share of a small call goes (tools/probes/call_path_parts_cuda.py);
#   sweep: pointwise kernels under other block sizes and warps, beside Inductor in one process
#          (benchmarks/compare.py --sweep), Inductor's own pointwise kernels kept in $OUT/inductor.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/call-parts}
source tools/gpu/lib.sh
gpu_setup
step env 30 0 bash -c versions
step parts 120 0 "$PYTHON" tools/probes/call_path_parts_cuda.py --out "$OUT/parts"
export TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-cache
step sweep 400 20 "$PYTHON" benchmarks/compare.py --workload pointwise_chain --workload bias_gelu --repeats 3 \
    --json "$OUT/sweep.json" --sweep "${SWEEP:-GPU_BLOCK=512,GPU_BLOCK=2048,GPU_BLOCK=4096,GPU_WARPS=8,GPU_BLOCK=2048+GPU_WARPS=8,GPU_BLOCK=4096+GPU_WARPS=8,GPU_BLOCK=4096+GPU_WARPS=16}"
mkdir -p "$OUT/inductor"
grep -rl "triton_heuristics.pointwise" /tmp/inductor-cache --include="*.py" | head -20 | xargs -r cp -t "$OUT/inductor"
bundle call-parts
