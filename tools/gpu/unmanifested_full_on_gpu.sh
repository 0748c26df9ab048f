#!/usr/bin/env bash
# The full conformance tier of the ops no sm_90 manifest entry covers (decompositions of lowered ops:
# tools/unmanifested_ops.py), on CUDA in the default configuration, in shards so that the run can be
# spread over device calls and resumed: SHARDS="1 2" OF=6 runs shards 1/6 and 2/6, each into $OUT/s<k>.
#   SHARDS="1 2" OF=6 SHARD_S=270 OUT=$OUT bash tools/gpu/unmanifested_full_on_gpu.sh [--conformance-dtype float64 ...]
# Further arguments go to pytest (a dtype or a direction: a slice sharded on its own; --conformance-resume R,
# once per earlier shard report, to go on where a cut shard stopped: records/gpu-h100-2026-12-07-s41.md).
# tools/merge_reports.py merges the shards' reports.
set -u
cd "$(dirname "$0")/../.." || exit 1
source tools/gpu/lib.sh
gpu_setup  # the carried wheels first: listing the ops imports the suite, which needs jsonschema
ops=$("$PYTHON" tools/unmanifested_ops.py --arch sm_90) || exit 1
echo "$(tr ',' '\n' <<<"$ops" | wc -l) ops no sm_90 entry covers (in-place twins left out)"
root=$OUT
for k in ${SHARDS:?SHARDS names the shards to run, e.g. \"1 2\"}; do
    OUT=$root/s$k SUITE_TIMEOUT=${SHARD_S:-270} WORKERS=${WORKERS:-15} bash tools/gpu/conformance_on_gpu.sh \
        --conformance-op "$ops" --conformance-shard "$k/${OF:?OF is the number of shards}" "$@"
done
