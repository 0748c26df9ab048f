#!/usr/bin/env bash
# The fuser's recorded GPU checks, one device call's worth (docs/gpu-runs.md records what they printed):
#   env          versions;
#   bench        benchmarks/compare.py (fuser, default backend, eager);
#                BENCH_ARGS replaces its arguments;
#   gap          benchmarks/launch_gap.py (kernel time after a flush and back to back, launch shapes,
#                launch settings against the default backend); GAP_ARGS replaces its arguments;
#   ftz          tools/probes/reflect_ftz.py;
#   tests        the fuser's tests on CUDA (TESTS: which, default tests/fuser);
#   conformance  the suite's speed on this box: full tier, shard 1/32, for CONFORMANCE_S seconds;
#   profile      one conformance case under cProfile with an empty Triton cache (where a case's time goes).
#   OUT=/tmp/gpu-checks STEPS="env bench tests" bash tools/gpu/gpu_checks.sh    (STEPS: only those; TOTAL_S:
#   the whole run's limit, default 580 s). Each step's output lands in $OUT/<step>.log; all of $OUT is
#   packed into one archive at the end (the device tool brings back at most 8 files).
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/gpu-checks}
source tools/gpu/lib.sh
gpu_setup

BENCH_ARGS=${BENCH_ARGS:-"--repeats 3 --workload pointwise_chain --workload add_layer_norm
    --workload rms_norm --workload softmax --workload add_layer_norm_backward"}

step env 30 0 bash -c versions
# shellcheck disable=SC2086  # BENCH_ARGS and TESTS are lists of arguments
step bench "${BENCH_S:-240}" 0 "$PYTHON" benchmarks/compare.py --json "$OUT/bench.json" $BENCH_ARGS
GAP_ARGS=${GAP_ARGS:-"--workload add_layer_norm --setting GPU_ELEMENTS_PER_WARP=256
    --setting GPU_ELEMENTS_PER_WARP=1024 --setting GPU_ROW_ELEMENTS=8192
    --setting GPU_ROW_ELEMENTS=8192,GPU_ELEMENTS_PER_WARP=1024"}
# shellcheck disable=SC2086
step gap "${GAP_S:-180}" 0 "$PYTHON" benchmarks/launch_gap.py --out "$OUT/gap" $GAP_ARGS
step ftz 60 0 "$PYTHON" tools/probes/reflect_ftz.py
step tests "${TESTS_S:-180}" 0 env FUSER_TEST_DEVICE=cuda "$PYTHON" -m pytest ${TESTS:-tests/fuser} -q -n 14 \
    -p no:cacheprovider
step conformance "${CONFORMANCE_S:-150}" 0 "$PYTHON" -m pytest conformance/test_ops.py --conformance-backend fuser \
    --conformance-device cuda --conformance-tier full --conformance-shard 1/32 -n 15 -p no:cacheprovider -p no:benchmark -q --tb=no \
    --conformance-report "$OUT"
step profile 90 0 env TRITON_CACHE_DIR=/tmp/empty-triton-cache "$PYTHON" -m cProfile -o "$OUT/case.prof" \
    -m pytest conformance/test_ops.py --conformance-backend fuser --conformance-device cuda --conformance-tier full --conformance-op aten.cosh.default \
    --conformance-dtype bfloat16 --conformance-context into_reduction --conformance-direction bwd -p no:cacheprovider -p no:benchmark -q
[[ -f "$OUT/case.prof" ]] && "$PYTHON" -c "import pstats; pstats.Stats('$OUT/case.prof').sort_stats('cumulative').print_stats(30)"

printf '\n=== summary ===\n'
cat "$OUT/steps.txt"
bundle gpu-checks
