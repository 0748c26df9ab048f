#!/usr/bin/env bash
# The full tier's eager-rejects check on CUDA, in just the cases where eager rejects a sample
# (tools/eager_rejected_cases.py --check), over SHARDS processes (default: the cores less 4), the fuser in
# the configuration users get unless OPT_IN=1. Each shard's lines (a failure each) and summary land in
# $OUT/eager-rejects-<k>of<n>.{txt,err}; a shard cut off by the step's time limit keeps what it wrote.
# FIRST and LAST run only those shards of the SHARDS (a run split over calls); `done <op>` lines in the .err
# files name the ops a shard finished.
#   OUT=/tmp/er SHARDS=24 FIRST=1 LAST=12 bash tools/gpu/eager_rejects_on_gpu.sh [--ops A,B]
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/eager-rejects}
source tools/gpu/lib.sh
gpu_setup
export FUSER_STRICT=1
# Cut off (the step's timeout): stop the shards too, keeping what they wrote.
trap 'kill $(jobs -p) 2>/dev/null' TERM INT
n=${SHARDS:-$(( $(nproc) - 4 ))}
for k in $(seq "${FIRST:-1}" "${LAST:-$n}"); do
    "$PYTHON" tools/eager_rejected_cases.py --device cuda --check --shard "$k/$n" "$@" \
        >"$OUT/eager-rejects-${k}of$n.txt" 2>"$OUT/eager-rejects-${k}of$n.err" &
done
wait
cat "$OUT"/eager-rejects-*of"$n".txt | cut -c1-300
grep -h "full-tier cases\|answered where" "$OUT"/eager-rejects-*.err
echo "$(cat "$OUT"/eager-rejects-*.err | grep -c "^done ") ops done"
