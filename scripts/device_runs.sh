#!/usr/bin/env bash
# The accuracy goal's runs on a lent GPU machine, in one call: masked-LM pretraining of both schemes
# (configs/gpu/pretrain-{rope,absolute}-long.yaml, 4x the chunks of the best CPU run) and their fine-tuning
# (configs/gpu/{rope,absolute}-pretrained-long.yaml), the two schemes side by side on the one GPU; then, in a
# second call, the speed benchmark there. On 2 CPU cores the same runs would take about 20 hours each.
#
# The machine starts bare and reaches nothing: `pack` (here) copies what the runs read into .devcarry/
# (ignored): IMDb's parquet files, the Week 3 tokenizer and DAN embedding, wheels of the Python packages
# the machine lacks. `run` (there) installs those and trains; it writes both runs' logs to $OUT as they go
# and, at the end, one archive with every new results/gpu/*.json and each run folder without its weights and
# checkpoints (metrics.json, config.json, tokenizer: enough for `hf-attn card`).
#   here:  scripts/device_runs.sh pack runs/week3-8k
#   there: the device tool's run with carry [".devcarry"], command "bash scripts/device_runs.sh run",
#          timeout_s 590; then unpack here: scripts/device_runs.sh unpack <files_at> long
#          right after (the machine stays warm 30 s): the same with "bash scripts/device_runs.sh bench"
# `run NAME` trains configs/gpu/pretrain-{rope,absolute}-NAME.yaml and {rope,absolute}-pretrained-NAME.yaml
# (default long); CALIBRATE=0 keeps the config's pretraining steps instead of timing what fits. Each
# fine-tuned classifier also comes back, in float16 shards (a returned file may be 16 MB at most); `unpack`
# turns them back into a float32 run folder here, runs/SCHEME-pretrained-NAME, for cards, probes and plots,
# and scores those weights on the test split again (hf_attn/experiments/transfer.py; ~3 min per model on 2 cores).
set -euo pipefail
mode=${1:?usage: scripts/device_runs.sh pack WEEK3_DIR | run [NAME] | bench | unpack FILES_AT [NAME]}
carry=.devcarry
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1

if [ "$mode" = pack ]; then
  week3=${2:?usage: scripts/device_runs.sh pack WEEK3_DIR}
  exclude=$(git rev-parse --git-path info/exclude)
  grep -qx "/$carry/" "$exclude" 2>/dev/null || echo "/$carry/" >> "$exclude"
  rm -rf "$carry" && mkdir -p "$carry/imdb" "$carry/week3/datasets" "$carry/week3/models" "$carry/whl"
  cp ../shared/data/imdb/*.parquet "$carry/imdb/"
  cp "$week3"/datasets/bpe_*.json "$carry/week3/datasets/"
  cp "$week3"/models/imdb_embedding_layer.pt "$week3"/models/vocab_config.json "$carry/week3/models/"
  # The machine's image has torch, transformers, accelerate, tokenizers, pyarrow, scikit-learn: not these.
  for package in datasets dill multiprocess; do
    version=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('$package'))")
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$carry/whl" "$package==$version"
  done
  du -sh "$carry"
  exit 0
fi

if [ "$mode" = unpack ]; then  # here, after a run: results, metrics and the classifiers in float32
  files_at=${2:?usage: scripts/device_runs.sh unpack FILES_AT [NAME]} name=${3:-long}
  tar -xzf "$files_at/device-results.tgz"
  for scheme in rope absolute; do
    half="runs/half/$scheme" run="runs/$scheme-pretrained-$name"
    [ -d "$files_at/$scheme-half" ] || continue
    cp "$files_at/$scheme-half"/*.safetensors "$half/"
    .venv/bin/python -c "import sys; from hf_attn.experiments.transfer import restore_half_precision
print(sys.argv[2], 'restored; test scores of these weights:', restore_half_precision(*sys.argv[1:]))" \
      "$half" "$run" ../shared/data/imdb
  done
  exit 0
fi
[ "$mode" = run ] || [ "$mode" = bench ] || { echo "unknown mode $mode: pack, run, bench or unpack" >&2; exit 2; }
: "${OUT:?run on the device machine, where \$OUT is set}"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$carry"/whl/*.whl
export PYTHONPATH=/tmp/site:$PWD
if [ "$mode" = bench ]; then  # speed against BERT and RoFormer on the GPU: a second, short call (~2 min)
  python3 -m hf_attn.cli bench --device cuda --sections throughput,scaling --warmup 5 --repeats 20 \
    --output "$OUT/bench-gpu.json" --markdown "$OUT/bench-gpu.md" --plot "$OUT/bench-gpu-scaling.png"
  exit 0
fi
nvidia-smi -L
python3 -c "import torch, transformers, datasets, pyarrow, hf_attn
print('torch', torch.__version__, torch.cuda.get_device_name(), '| transformers', transformers.__version__,
      '| datasets', datasets.__version__, '| pyarrow', pyarrow.__version__)"
hf_attn() { python3 -m hf_attn.cli "$@"; }
gpu=(training.tf32=true training.dataloader_num_workers=2)  # TF32 matrix products; masking off the main process

pretrain() {  # SCHEME OUTPUT_DIR RESULTS_JSON [key=value ...]
  local scheme=$1 output=$2 results=$3
  shift 3
  hf_attn pretrain --config "configs/gpu/pretrain-$scheme-$name.yaml" --dataset "$carry/imdb" --week3 "$carry/week3" \
    --output-dir "$output" --results "$results" "${gpu[@]}" "$@"
}

name=${2:-long}
# How many pretraining steps fit: 200 steps of both schemes at once, as in the real runs, timed whole
# (start-up included, so the estimate errs long). The config's steps are the most; fewer are recorded in
# the run's command. The call's 600 s, as estimated before the first call: ~20 install, ~70 this, ~90 data
# and evaluations, the pretraining steps, ~150 fine-tuning, ~50 spare. Measured in it (long, 6,000 steps):
# 60 s install and calibration, 0.026 s per step with both schemes at once, 232 s for both pipelines;
# `CALIBRATE=0 ... run 12k` (12,000 steps, one fine-tuning epoch): 430 s for both pipelines, 454 s in all.
steps=()
if [ "${CALIBRATE:-1}" != 0 ]; then
  budget_s=${PRETRAIN_BUDGET_S:-220}
  for scheme in rope absolute; do
    pretrain "$scheme" "/tmp/calibrate-$scheme" "/tmp/calibrate-$scheme.json" training.max_steps=200 \
      training.eval_steps=1000 training.save_steps=1000 limit_eval=8 > "$OUT/calibrate-$scheme.log" 2>&1 &
  done
  wait
  fit=$(python3 -c "
import json
from hf_attn.experiments.config import load_experiment
most = load_experiment('configs/gpu/pretrain-rope-$name.yaml').training['max_steps']
per_step = max(json.load(open(f'/tmp/calibrate-{s}/metrics.json'))['train_runtime_s'] / 200 for s in ('rope', 'absolute'))
print(f'{per_step:.3f} s per step;', min(most, int($budget_s / per_step) // 500 * 500))")
  echo "calibration: $fit pretraining steps"
  fit=${fit##* }
  [ "$fit" -ge 500 ] || { echo "under 500 pretraining steps fit: not worth running" >&2; exit 1; }
  steps=("training.max_steps=$fit")
fi

export_half() {  # SCHEME: the fine-tuned classifier as float16 shards under the 16 MB a returned file may be
  python3 -c "import sys; from hf_attn.experiments.transfer import save_half_precision; save_half_precision(*sys.argv[1:])" \
    "runs/$1-pretrained-$name" "runs/half/$1"
  mkdir -p "$OUT/$1-half" && mv "runs/half/$1"/*.safetensors "$OUT/$1-half/"
}

pipeline() {  # pretraining, then fine-tuning, of one scheme; its log goes straight to $OUT (back even if killed)
  local scheme=$1
  {
    pretrain "$scheme" "runs/pretrain-$scheme-$name" "results/gpu/pretrain-$scheme-$name.json" "${steps[@]}"
    hf_attn train --config "configs/gpu/$scheme-pretrained-$name.yaml" --dataset "$carry/imdb" --week3 "$carry/week3" \
      --output-dir "runs/$scheme-pretrained-$name" --results "results/gpu/$scheme-pretrained-$name.json" "${gpu[@]}"
    export_half "$scheme"
  } > "$OUT/$scheme.log" 2>&1
}
started=$SECONDS
pipeline rope & rope=$!
pipeline absolute & absolute=$!
status=0
wait $rope || status=$?
wait $absolute || status=$?
echo "both pipelines ended after $((SECONDS - started)) s (status $status)"
tail -n 5 "$OUT/rope.log" "$OUT/absolute.log"
tar -czf "$OUT/device-results.tgz" --exclude='checkpoint-*' --exclude='*.safetensors' --exclude=training_args.bin \
  results/gpu/*-"$name".json runs/*-"$name" runs/half 2>/dev/null || true
exit $status
