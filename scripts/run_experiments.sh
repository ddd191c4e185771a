#!/usr/bin/env bash
# Full-data runs on a machine whose sessions end (3 hours here): each experiment resumes from its last
# checkpoint when one exists and is skipped once its metrics are written. A plain NAME trains
# configs/NAME.yaml (hf-attn train); pretrain:NAME pretrains configs/NAME.yaml (hf-attn pretrain).
# Output: runs/NAME/ (model, checkpoints, metrics.json) and results/NAME.json.
#   usage: scripts/run_experiments.sh WEEK3_DIR [[pretrain:]NAME ...]   (default: absolute rope)
#   e.g.   scripts/run_experiments.sh runs/week3-8k pretrain:pretrain-rope rope-pretrained
set -euo pipefail
week3=${1:?usage: scripts/run_experiments.sh WEEK3_DIR [[pretrain:]NAME ...]}
shift
items=("$@")
[ ${#items[@]} -gt 0 ] || items=(absolute rope)
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
for item in "${items[@]}"; do
  command=train name=$item
  if [[ $item == pretrain:* ]]; then command=pretrain name=${item#pretrain:}; fi
  out="runs/$name"
  if [ -f "results/$name.json" ] && [ -f "$out/metrics.json" ]; then echo "$name: done"; continue; fi
  resume=()
  if compgen -G "$out/checkpoint-*" > /dev/null; then resume=(--resume); fi
  .venv/bin/hf-attn "$command" --config "configs/$name.yaml" --week3 "$week3" --output-dir "$out" \
    --results "results/$name.json" "${resume[@]}"
done
