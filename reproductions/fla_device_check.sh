#!/usr/bin/env bash
# The next device check (issue 45, item 5): how fast the 4B trains and judges on flash-linear-attention's kernels on
# the lent image, whose Triton (3.6.0 with torch 2.11) fla 0.6.0 refuses on Hopper (fla #640). One call of the device
# tool: phases versions, build, fla, trainer, world_model of reproductions/gpu_check.py with --fla-unguarded, limits
# 30 + 60 + 60 + 170 + 90 s times 1.3 = 533 s (under its 600 s), the machine's facts first.
#   fla:         the chunked gated delta rule, forward and backward, fla against transformers' torch fallback on one
#                4B-shaped layer (8,192 tokens): both timed, and fla's output and gradient error (absolute and
#                relative to the fallback's largest value) with the guard off: is the kernel fla refuses wrong here?
#   trainer:     the 4B WMRL trainer step at the paper's row shape (21,604 tokens) with fla bound: tokens/s against
#                824 on the fallback (h200_qwen3.5-4b.json: compare only on the same card), the allocated peak, and
#                the plan's activation term beside the one the peak implies (report key activation_term)
#   world_model: the world model's decode on fla's recurrent kernel (transformers in bf16: the image has no vLLM)
# Run there from the repository root with gpu-wheels carried (make gpu-wheels here first):
#   bash reproductions/fla_device_check.sh            # writes $OUT (the device tool's folder), else /tmp/wmrl-fla-check
# CPU rehearsal (what CPU allows: the guard found and switched off in the real wheel, fla skipped by nature, the
# trainer on the torch fallback, every report key written): FLA_CHECK_ARGS="--arch tiny-qwen3.5 --config qwen3.5-4b
# --shape-tokens 512 --completion-tokens 16" bash reproductions/fla_device_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/wmrl-fla-check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || echo "no nvidia-smi";
  nproc; free -g | head -2; df -h /tmp | tail -1; $PY --version; } > "$OUT/machine.txt" 2>&1
start=$(date +%s)
# shellcheck disable=SC2086  # FLA_CHECK_ARGS is a list of options
$PY reproductions/gpu_check.py --wheels "${WHEELS:-gpu-wheels}" --fla-unguarded \
  --phases versions,build,fla,trainer,world_model --max-solutions 2 --completion-tokens 128 --steps 1 --scale 1.3 \
  ${FLA_CHECK_ARGS:-} --out "$OUT/fla_unguarded.json" 2>&1 | tee "$OUT/fla_unguarded.log"
rc=${PIPESTATUS[0]}
echo "fla device check: exit $rc after $(( $(date +%s) - start )) s; report $OUT/fla_unguarded.json" | tee -a "$OUT/fla_unguarded.log"
exit "$rc"
