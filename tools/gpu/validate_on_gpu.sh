#!/usr/bin/env bash
# Validate every lowered op without a fresh entry on this GPU's architecture, in one batch run over every
# GPU of the machine (issue 27), and bring back what it wrote. Resumable: a second call on the same warm
# machine continues where the first stopped (after the first call's manifest is applied here, since the
# working tree is copied anew):
#   bash tools/gpu/validate_on_gpu.sh            # from the repository root on the lent machine; OUT set
#   DEVICE=cpu bash tools/gpu/validate_on_gpu.sh # the cpu manifest, over the lent machine's CPU cores
#                                                # (Triton's interpreter; the entries name its torch and triton)
# VALIDATE_COMMIT names the commit the copy was made from (the device's git metadata is the session's start).
# STATE=records/<...>.jsonl.gz seeds a fresh machine with a batch state kept from an earlier session (cases
# logged at today's fingerprints are not run again; an op whose kernels changed since starts over).
# Writes $OUT/validate.log, $OUT/<arch>.toml (the manifest after the run), $OUT/versions.txt, and
# $OUT/validate-state.tar.gz (the batch's progress state and per-op logs).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/gpu/lib.sh
gpu_setup
versions | tee "$OUT/versions.txt"
WORKERS=${WORKERS:-$(( $(nproc) - 4 ))}
DEVICE=${DEVICE:-cuda}
arch=$("$PYTHON" -c "import torch; from fuser.validate.validation import arch_of; print(arch_of(torch.device('$DEVICE')))")
state=reports/validate/progress-fuser-$arch.batch.jsonl
if [[ -n "${STATE:-}" && ! -e $state ]]; then
    mkdir -p reports/validate && gunzip -c "$STATE" >"$state" && echo "seeded $state from $STATE ($(wc -l <"$state") lines)"
fi
# On cpu: no GPU in sight, and one eager thread a worker (the workers fill the cores).
[[ $DEVICE == cpu ]] && export CUDA_VISIBLE_DEVICES= OMP_NUM_THREADS=1
step validate "${VALIDATE_S:-540}" 5 "$PYTHON" -m conformance.validate --batch --all-unvalidated --device "$DEVICE" \
    --workers "$WORKERS" --logs reports/validate/logs
cp "fuser/manifest/$arch.toml" "$OUT/" 2>/dev/null
tar -czf "$OUT/validate-state.tar.gz" reports/validate 2>/dev/null
ls -la "$OUT"
