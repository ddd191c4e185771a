#!/usr/bin/env bash
# The reference comparison on the full seed split: sinusoidal ("absolute") then RoPE, identical but for
# the scheme, each resumed from its last checkpoint when one exists (sessions on this machine end
# after 3 hours; a checkpoint is written every quarter epoch). Metrics go to results/<name>.json.
#   usage: scripts/run_reference_pair.sh WEEK3_DIR [config names...]   (default: absolute rope)
set -euo pipefail
week3=${1:?usage: scripts/run_reference_pair.sh WEEK3_DIR [config names...]}
shift
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(absolute rope)
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
for name in "${names[@]}"; do
  out="runs/$name"
  if [ -f "results/$name.json" ] && [ -f "$out/metrics.json" ]; then echo "$name: done"; continue; fi
  resume=()
  if compgen -G "$out/checkpoint-*" > /dev/null; then resume=(--resume); fi
  .venv/bin/hf-attn train --config "configs/$name.yaml" --week3 "$week3" --output-dir "$out" \
    --results "results/$name.json" "${resume[@]}"
done
