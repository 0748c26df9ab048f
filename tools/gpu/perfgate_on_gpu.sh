#!/usr/bin/env bash
# The recorded GPU run of the A/B perf gate (docs/perfgate.md, "Recorded on a GPU"), on one lent GPU,
# in one call of under 9 minutes:
#   1. versions, and checks: a git checkout with no uncommitted changes (the A/B gate puts HEAD in a
#      worktree), scipy importable (from .whl/ or PYTHONPATH where pip has no index);
#   2. aa: head against an identical copy of head (gate --against HEAD) on WORKLOADS (5 workloads x
#      kernel and host time = 10 verdicts): false alarms;
#   3. catch1, catch2: the same with the testing-only slowdowns planted in head's processes (10% kernel
#      time, 15 us host time per call, in every workload), two seeds: 10 kernel and 10 host verdicts;
#   catch1-unpinned: catch1 again with PERFGATE_UNPINNED=1 (what pinning the processes buys);
#   default: one A/B gate of the default workload set (every workload, default budget), head against
#      HEAD, timed: issue 12's "one gate within 8 minutes" (STEPS=default runs it alone);
#   against: one A/B gate of HEAD against the commit AGAINST names (the default workload set, or WORKLOADS when
#      set; AGAINST_BUDGET_S, default 400): what a change since then costs, measured in one run;
#   update: python -m perfgate update (every workload, this device) and a copy of the rewritten
#      perfgate/baselines/<arch>.json in $OUT: the committed file's counts and this device's history;
#   aa11..aa16: six A/A gates with the default budget (does the gate settle on unchanged code?);
#   plant-block, plant-launch, plant-run: a real commit from tools/gpu/plants/ gated against HEAD (does it catch?);
#   sizes-small, sizes-large: planted slowdowns of other sizes than the thresholds were set from;
#   COMMIT_COPY=1 commits the checkout's files first where they differ from HEAD (the device tool's copy
#   carries the history of when the session started): on the device, with STEPS naming these;
#   FRESH=1 empties Triton's and the fuser's kernel caches before the first gate (a fresh machine's state);
#   4. spread: python -m perfgate.spread on adam_step, 3 fresh processes: why its kernel time varies
#      (with the time left; STEPS=spread runs it alone).
# Run from the repository root: OUT=/tmp/perfgate-gpu bash tools/gpu/perfgate_on_gpu.sh
# Each step's output lands in $OUT/<step>.log, its reports in $OUT/<step>/ (report.md, ratios.png,
# head.json, base.json), exit statuses in $OUT/steps.txt; the last lines are a table of the results.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/perfgate-gpu}
TOTAL_S=${TOTAL_S:-540}
WORKLOADS_SET=${WORKLOADS:+1}
WORKLOADS=${WORKLOADS:-"pointwise_chain bias_gelu softmax rms_norm add_layer_norm"}
source tools/gpu/lib.sh
gpu_setup
step env 60 0 bash -c versions

if ! "$PYTHON" -c "import scipy" 2>/dev/null; then
    ls .whl/scipy*.whl >/dev/null 2>&1 \
        && "$PYTHON" -m pip install -q --no-index --no-deps --target /tmp/site .whl/scipy*.whl \
        && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
    "$PYTHON" -c "import scipy" || { echo "FAILED: scipy is not importable (carry its wheel in .whl/)"; exit 1; }
fi
if ! git rev-parse --verify -q HEAD >/dev/null; then
    echo "FAILED: no git repository here (.git missing or not a repository): the A/B gate needs HEAD's history"
    exit 1
fi
git config core.fileMode false  # a copied checkout may lose executable bits: not a change to measure
AS_DEVICE=(git -c user.name=device -c user.email=device@localhost)  # commits made here, on the device
if [[ -n "${COMMIT_COPY:-}" && -n "$(git status --porcelain --untracked-files=no)" ]]; then
    # The device tool's copy carries the working tree with the history of when the session started:
    # commit the tree as it came, so HEAD is what is measured.
    "${AS_DEVICE[@]}" commit -qam "device copy" && echo "COMMIT_COPY: the copy committed as $(git rev-parse --short HEAD)"
fi
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
    echo "FAILED: the checkout has uncommitted changes; the A/B gate measures commits. git status:"
    git status --short --untracked-files=no | head -20
    exit 1
fi

if [[ -n "${FRESH:-}" ]]; then
    rm -rf ~/.triton/cache "${TMPDIR:-/tmp}"/fuser-kernels-*
    echo "FRESH: Triton's and the fuser's kernel caches emptied"
fi
only=()
for w in $WORKLOADS; do only+=(--workload "$w"); done
ab() {  # ab NAME CAP RESERVE SEED [ENV=VALUE]: one A/B gate of HEAD against HEAD
    local name=$1 cap=$2 reserve=$3 seed=$4
    shift 4
    step "$name" "$cap" "$reserve" env "$@" "$PYTHON" -m perfgate gate --tier gpu --against HEAD "${only[@]}" \
        --seed "$seed" --budget-s $((cap - 70)) --out "$OUT/$name"
}
PLANT=PERFGATE_TESTING_SLOWDOWN=kernel:*,host:*
ab aa 160 0 1
ab catch1 160 0 2 "$PLANT"
ab catch2 160 0 3 "$PLANT"
# The same as catch1 with the measuring processes not pinned (what pinning buys, on the same machine).
ab catch1-unpinned 160 0 2 "$PLANT" PERFGATE_UNPINNED=1
step default 580 0 "$PYTHON" -m perfgate gate --tier gpu --against HEAD --seed 5 --out "$OUT/default"
against_only=()
[[ -n "${WORKLOADS_SET:-}" ]] && against_only=("${only[@]}")
step against 580 0 "$PYTHON" -m perfgate gate --tier gpu --against "${AGAINST:-HEAD}" "${against_only[@]}" --seed 7 \
    --budget-s "${AGAINST_BUDGET_S:-400}" --out "$OUT/against"
# Does the gate settle on unchanged code (issue 30)? aa11..aa16: A/A on WORKLOADS with the default budget.
for seed in 11 12 13 14 15 16; do
    step "aa$seed" 480 0 "$PYTHON" -m perfgate gate --tier gpu --against HEAD "${only[@]}" --seed "$seed" \
        --out "$OUT/aa$seed"
done
# Does it catch real code changes? One commit each on top of HEAD, from tools/gpu/plants/ (plant-block: a
# smaller pointwise block; plant-launch: the kernel's source hashed on every launch, 2-3 us; plant-run: every
# launch through JITFunction.run, the direct launch path off), applied in a worktree
# of its own and gated from there against HEAD. A patch that no longer applies leaves no worktree, so its
# step fails instead of gating HEAD against itself.
base=$(git rev-parse HEAD)
for plant in plant-block plant-launch plant-run; do
    [[ -n "${STEPS:-}" && " $STEPS " != *" $plant "* ]] && continue
    git worktree add -q -f --detach "/tmp/$plant" "$base" \
        && "${AS_DEVICE[@]}" -C "/tmp/$plant" am -q "$PWD/tools/gpu/plants/$plant.patch" \
        || { echo "FAILED: tools/gpu/plants/$plant.patch does not apply to HEAD"; git worktree remove -f "/tmp/$plant"; }
done
step plant-block 220 0 env -C /tmp/plant-block "$PYTHON" -m perfgate gate --tier gpu --against "$base" \
    "${only[@]}" --seed 21 --budget-s 150 --out "$OUT/plant-block"
step plant-launch 220 0 env -C /tmp/plant-launch "$PYTHON" -m perfgate gate --tier gpu --against "$base" \
    "${only[@]}" --seed 22 --budget-s 150 --out "$OUT/plant-launch"
step plant-run 220 0 env -C /tmp/plant-run "$PYTHON" -m perfgate gate --tier gpu --against "$base" \
    "${only[@]}" --seed 25 --budget-s 150 --out "$OUT/plant-run"
# Planted slowdowns of sizes other than those the thresholds were set from.
ab sizes-small 220 0 23 PERFGATE_TESTING_SLOWDOWN=kernel=0.07:*,host=8:*
ab sizes-large 220 0 24 PERFGATE_TESTING_SLOWDOWN=kernel=0.2:*,host=30:*
update() {
    "$PYTHON" -m perfgate update --tier gpu && mkdir -p "$OUT/baselines" && cp perfgate/baselines/*.json "$OUT/baselines/"
    git diff --stat -- perfgate/baselines/
}
export -f update
step update 200 0 bash -c update
step spread 150 0 "$PYTHON" -m perfgate.spread --workload adam_step --processes 3 --out "$OUT/spread"

printf '\n=== steps ===\n'
cat "$OUT/steps.txt"
printf '\n=== summary ===\n'
"$PYTHON" - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print(f"{'run':8} {'metric':14} {'verdicts':>8} {'regr':>5} {'inconcl':>7} {'ok':>4}  ratio range       widest interval below the ratio")
runs = ("aa", "against", "catch1", "catch2", "catch1-unpinned", *(f"aa{seed}" for seed in range(11, 17)),
        "plant-block", "plant-launch", "plant-run", "sizes-small", "sizes-large")
for run in runs:
    path = out / run / "head.json"
    if not path.exists():
        if (out / f"{run}.log").exists():
            print(f"{run:8} (no report: see {run}.log)")
        continue
    benchmarks = json.loads(path.read_text())["benchmarks"]
    for metric in ("kernel_time_ms", "host_relative", "host_time_us"):
        rows = [b["extra_info"] for b in benchmarks if b["group"] == metric and b["extra_info"]["against"] == "base"]
        if not rows:
            continue
        count = lambda status: sum(r["verdict"] == status for r in rows)
        ratios = [r["ratio"] for r in rows]
        below = max((r["ratio"] - r["interval"][0] for r in rows if r.get("interval")), default=float("nan"))
        print(f"{run:8} {metric:14} {len(rows):>8} {count('REGRESSION'):>5} {count('inconclusive'):>7} {count('ok'):>4}"
              f"  {min(ratios):.3f}-{max(ratios):.3f}     {below:.3f}")
spread = out / "spread" / "spread.json"
if spread.exists():
    data = json.loads(spread.read_text())
    print("adam_step between processes (max/min - 1): " + ", ".join(f"{k} {v:.1%}" for k, v in data["spreads"].items()))
PY
echo "details: $OUT/<step>.log and $OUT/<step>/ (report.md, ratios.png, head.json, base.json), $OUT/spread/spread.json"
bundle perfgate-on-gpu  # the device tool brings back at most 8 files
