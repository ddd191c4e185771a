#!/usr/bin/env bash
# Full-data runs on a machine whose sessions end (3 hours here): each experiment resumes from its last
# checkpoint when one exists and is skipped once its metrics are written. A plain STUDY/NAME trains
# configs/STUDY/NAME.yaml (hf-attn train); pretrain:STUDY/NAME pretrains it (hf-attn pretrain).
# Output: runs/NAME/ (model, checkpoints, metrics.json) and results/STUDY/NAME.json. IMDb comes from
# configs/base.yaml's `dataset`, or from DATASET=DIR when set.
#   usage: scripts/run_experiments.sh WEEK3_DIR [[pretrain:]STUDY/NAME ...]   (default: positions/sinusoidal positions/rope)
#   e.g.   scripts/run_experiments.sh runs/week3-8k pretrain:pretraining/pretrain-rope pretraining/rope-pretrained
set -euo pipefail
week3=${1:?usage: scripts/run_experiments.sh WEEK3_DIR [[pretrain:]STUDY/NAME ...]}
shift
items=("$@")
[ ${#items[@]} -gt 0 ] || items=(positions/sinusoidal positions/rope)
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
dataset=()
if [ -n "${DATASET:-}" ]; then dataset=(--dataset "$DATASET"); fi
for item in "${items[@]}"; do
  command=train config=$item
  if [[ $item == pretrain:* ]]; then command=pretrain config=${item#pretrain:}; fi
  name=$(basename "$config")
  out="runs/$name" results="results/$config.json"
  if [ -f "$results" ] && [ -f "$out/metrics.json" ]; then echo "$name: done"; continue; fi
  resume=()
  if compgen -G "$out/checkpoint-*" > /dev/null; then resume=(--resume); fi
  .venv/bin/hf-attn "$command" --config "configs/$config.yaml" --week3 "$week3" "${dataset[@]}" --output-dir "$out" \
    --results "$results" "${resume[@]}"
done
