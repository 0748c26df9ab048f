#!/usr/bin/env bash
# How long each perf-gate workload takes to compile cold on this GPU machine: every workload's warm-up
# (perfgate.worker with "warm": true) in its own process, all at once, Triton's and the fuser's caches
# emptied first. Prints "workload seconds" as each finishes.
#   LIMIT_S=300 bash tools/gpu/warm_times.sh
set -u
cd "$(dirname "$0")/../.." || exit 1
PYTHON=${PYTHON:-python3}
rm -rf ~/.triton/cache "${TMPDIR:-/tmp}"/fuser-kernels-*
spec_dir=$(mktemp -d)
for w in $("$PYTHON" -c "from perfgate.workloads import WORKLOADS; print(' '.join(WORKLOADS))"); do
    echo "{\"tier\": \"gpu\", \"backend\": \"fuser\", \"instructions\": false, \"workloads\": [\"$w\"], \"warm\": true}" >"$spec_dir/$w.json"
    (
        started=$SECONDS
        timeout "${LIMIT_S:-300}" "$PYTHON" -m perfgate.worker "$spec_dir/$w.json" "$spec_dir/$w.out" >"$spec_dir/$w.log" 2>&1
        echo "$w $((SECONDS - started)) s (exit $?) $(cat "$spec_dir/$w.out" 2>/dev/null)"
    ) &
done
wait
