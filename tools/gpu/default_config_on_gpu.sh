#!/usr/bin/env bash
# Issue 27: what users get by default, on one GPU. With NOTHING set (FUSER_UNVALIDATED unset: an op the
# GPU's manifest does not validate runs eagerly), every perf-gate workload (swiglu and cross_entropy
# included) under eager, Inductor (torch.compile's default backend) and the fuser: the median kernel time
# of PROCESSES fresh processes a variant, rounds alternating, through the gate's own measuring worker
# (tools/gpu/default_config.py), and the fuser's launches without and with FUSER_UNVALIDATED=fuse.
# Meant for a GPU whose manifest is complete, with the perf gate's fuser backend no longer opting in
# (the Python part refuses, exit 2, where it still does).
#   OUT=$OUT bash tools/gpu/default_config_on_gpu.sh
#   WORKLOADS="swiglu cross_entropy"  only these (default: all); PROCESSES=3; SEED=1 repeats an order;
#   TOTAL_S=580  the call's budget (lib: DEADLINE); TIER=cpu  the same on a CPU (cpu sizes: launches only)
# A process per variant and round compiles every workload it measures: all eleven, three rounds, may
# not fit in one 10-minute call; the table and JSON are rewritten after every process, so a run cut
# short keeps its finished processes. Split the set across calls if so (WORKLOADS).
# Writes $OUT/default_config.md (the table), $OUT/default_config.json (every process's numbers) and
# $OUT/measure.log, then bundles $OUT (the md and json are kept beside the archive).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/default-config}
TIER=${TIER:-gpu}
unset FUSER_UNVALIDATED  # nothing set: the fuser's defaults (the opted-in processes set it themselves)
source tools/gpu/lib.sh
gpu_setup
if [[ $TIER == gpu ]]; then
    step env 60 0 bash -c versions
fi
only=()
for w in ${WORKLOADS:-}; do only+=(--workload "$w"); done
step measure 600 15 env PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" tools/gpu/default_config.py \
    --tier "$TIER" --out "$OUT" --processes "${PROCESSES:-3}" ${SEED:+--seed "$SEED"} "${only[@]}"
printf '\n=== steps ===\n'
cat "$OUT/steps.txt"
bundle default-config-on-gpu
tar -xzf "$OUT/default-config-on-gpu.tar.gz" -C "$OUT" ./default_config.md ./default_config.json 2>/dev/null
ls "$OUT"
