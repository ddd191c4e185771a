#!/usr/bin/env bash
# The accuracy goal's runs on a lent GPU machine, each flow in one call: masked-LM pretraining and then
# fine-tuning, of every scheme the flow NAME has configs for (configs/gpu/pretrain-SCHEME-NAME.yaml and
# configs/gpu/SCHEME-pretrained-NAME.yaml), the schemes side by side on the one GPU; then, in a second call, the
# speed benchmark there. On 2 CPU cores the same runs would take about 20 hours each. The flows:
#   long, 12k  RoPE and sinusoidal at 128 tokens, 6,000 and 12,000 pretraining steps (docs/results.md, "On a GPU")
#   whole      RoPE alone, the classifier reading whole reviews (read_length 8192, 128-token windows every 64);
#              the encoder comes back too (see configs/gpu/pretrain-rope-whole.yaml for why one scheme)
#
# The machine starts bare and reaches nothing: `pack` (here) copies what the runs read into .devcarry/
# (ignored): IMDb's parquet files, the Week 3 tokenizer and DAN embedding, wheels of the Python packages
# the machine lacks. `run` (there) installs those and trains; it writes each scheme's log and the calibration
# log to $OUT as they go and, at the end, one archive with every new results/gpu/*-NAME.json and each run
# folder without its weights and checkpoints (metrics.json, config.json, tokenizer: enough for `hf-attn card`).
#   here:  tools/device_runs.sh pack runs/week3-8k
#   there: the device tool's run with carry [".devcarry"], command "bash tools/device_runs.sh run NAME",
#          timeout_s 590; then unpack here: tools/device_runs.sh unpack <files_at>
#          right after (the machine stays warm 30 s): the same with "bash tools/device_runs.sh bench"
# `run` alone is `run long`. CALIBRATE=0 keeps the config's pretraining steps instead of timing what fits in
# PRETRAIN_BUDGET_S (220 s). Each fine-tuned classifier comes back in float16 shards (a returned file may be
# 16 MiB at most, 8 files and 64 MiB in all), and so does the encoder where the flow has one scheme (two
# schemes' encoders and classifiers would be 90 MiB); `unpack` turns each back into a float32 run folder here,
# runs/RUN, and scores a classifier's restored weights on the test split again (tools/transfer.py;
# ~3 min per 128-token model on 2 cores, an estimated 4-5x that for a whole-review one, ~5 windows a review).
#
# Dry run, here on the CPU before spending GPU time (after `pack`; 40 s for whole, 75 s for long on one thread):
# the same steps at a toy size (48 training rows, 16 validation and test rows, 4 steps, 2 calibration steps) in a
# new folder, whose runs/, results/gpu/ and out/ (as $OUT) it writes instead of the repository's; then unpack
# into another new folder:
#   OMP_NUM_THREADS=1 DRY_RUN=/tmp/dry tools/device_runs.sh run whole
#   DRY_RUN=/tmp/dry-back tools/device_runs.sh unpack /tmp/dry/out      # scores 16 test reviews
# PYTHON names the interpreter with hf_attn's dependencies here (default .venv/bin/python); the repository's
# hf_attn is imported first either way.
set -euo pipefail
mode=${1:?usage: tools/device_runs.sh pack WEEK3_DIR | run [NAME] | bench | unpack FILES_AT}
repo=$PWD
carry=.devcarry
python=${PYTHON:-.venv/bin/python}
case $python in */*) python=$(realpath -s "$python") ;; esac  # a dry run leaves the repository's folder
dry=${DRY_RUN:-}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONUNBUFFERED=1

new_folder() {  # DIR: a dry run writes only into a folder of its own, never over an earlier one
  if [ -e "$1" ] && [ -n "$(ls -A "$1")" ]; then
    echo "DRY_RUN=$1 must be a new or empty folder" >&2
    exit 2
  fi
  mkdir -p "$1"
}

if [ "$mode" = pack ]; then
  week3=${2:?usage: tools/device_runs.sh pack WEEK3_DIR}
  exclude=$(git rev-parse --git-path info/exclude)
  grep -qx "/$carry/" "$exclude" 2>/dev/null || echo "/$carry/" >> "$exclude"
  rm -rf "$carry" && mkdir -p "$carry/imdb" "$carry/week3/datasets" "$carry/week3/models" "$carry/whl"
  cp ../shared/data/imdb/*.parquet "$carry/imdb/"
  cp "$week3"/datasets/bpe_*.json "$carry/week3/datasets/"
  cp "$week3"/models/imdb_embedding_layer.pt "$week3"/models/vocab_config.json "$carry/week3/models/"
  # The machine's image has torch, transformers, accelerate, tokenizers, pyarrow, scikit-learn: not these.
  for package in datasets dill multiprocess; do
    version=$("$python" -c "import importlib.metadata as m; print(m.version('$package'))")
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$carry/whl" "$package==$version"
  done
  du -sh "$carry"
  exit 0
fi

if [ "$mode" = unpack ]; then  # here, after a run: results, run folders, and the models in float32
  files_at=$(cd "${2:?usage: tools/device_runs.sh unpack FILES_AT}" && pwd)
  dataset=$repo/../shared/data/imdb limit=()
  if [ -n "$dry" ]; then
    new_folder "$dry" && cd "$dry"
    dataset=$repo/$carry/imdb limit=(--limit 16)
  fi
  export PYTHONPATH=$repo
  tar -xzf "$files_at/device-results.tgz"
  for shards in "$files_at"/half-*/; do  # one folder of float16 shards per model: half-RUN
    [ -d "$shards" ] || continue
    run=$(basename "$shards") && run=${run#half-}
    cp "$shards"*.safetensors "runs/half/$run/"
    "$python" "$repo/tools/transfer.py" restore "runs/half/$run" "runs/$run" --dataset "$dataset" "${limit[@]}"
  done
  exit 0
fi
[ "$mode" = run ] || [ "$mode" = bench ] || { echo "unknown mode $mode: pack, run, bench or unpack" >&2; exit 2; }

if [ -n "$dry" ]; then  # here, at a toy size: everything the GPU call does but the install and the GPU
  [ "$mode" = run ] || { echo "DRY_RUN is for run and unpack" >&2; exit 2; }
  [ -d "$carry/imdb" ] || { echo "no $carry/: run tools/device_runs.sh pack WEEK3_DIR first" >&2; exit 2; }
  new_folder "$dry"
  export OUT=${OUT:-$dry/out}
  mkdir -p "$OUT"
  configs=$repo/configs/gpu carry=$repo/$carry scratch=$dry calibration_steps=2
  gpu=()
  toy=(limit_train=48 limit_eval=16 training.max_steps=4 training.eval_steps=2 training.save_steps=2
       training.logging_steps=1 training.per_device_train_batch_size=8 training.per_device_eval_batch_size=8)
  export PYTHONPATH=$repo
  cd "$dry"
else
  : "${OUT:?run on the device machine, where \$OUT is set (or here with DRY_RUN=DIR)}"
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$carry"/whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
  python=python3 configs=configs/gpu scratch=/tmp calibration_steps=200
  gpu=(training.tf32=true training.dataloader_num_workers=2)  # TF32 matrix products; masking off the main process
  toy=()
fi
hf_attn() { "$python" -m hf_attn.cli "$@"; }

if [ "$mode" = bench ]; then  # speed against BERT and RoFormer on the GPU: a second, short call (~2 min)
  hf_attn bench --device cuda --sections throughput,scaling --warmup 5 --repeats 20 \
    --output "$OUT/bench-gpu.json" --markdown "$OUT/bench-gpu.md" --plot "$OUT/bench-gpu-scaling.png"
  exit 0
fi

name=${2:-long}
schemes=()
for config in "$configs"/pretrain-*-"$name".yaml; do
  [ -f "$config" ] || { echo "no $configs/pretrain-SCHEME-$name.yaml: unknown flow $name" >&2; exit 2; }
  scheme=${config##*/pretrain-} && schemes+=("${scheme%-"$name".yaml}")
done
# Encoders come back only where one scheme's encoder and classifier (45 MiB in float16) fit the 64 MiB returned.
return_encoders=$([ ${#schemes[@]} -eq 1 ] && echo 1 || echo 0)
echo "flow $name: ${schemes[*]}; encoders returned: $return_encoders"
if [ -z "$dry" ]; then
  nvidia-smi -L
fi
"$python" -c "import torch, transformers, datasets, pyarrow, hf_attn
device = torch.cuda.get_device_name() if torch.cuda.is_available() else 'CPU (dry run)'
print('torch', torch.__version__, device, '| transformers', transformers.__version__,
      '| datasets', datasets.__version__, '| pyarrow', pyarrow.__version__, '| hf_attn from', hf_attn.__file__)"

pretrain() {  # SCHEME OUTPUT_DIR RESULTS_JSON [key=value ...]
  local scheme=$1 output=$2 results=$3
  shift 3
  hf_attn pretrain --config "$configs/pretrain-$scheme-$name.yaml" --dataset "$carry/imdb" --week3 "$carry/week3" \
    --output-dir "$output" --results "$results" "${gpu[@]}" "$@"
}

# How many pretraining steps fit: 200 steps of every scheme at once, as in the real runs, timed whole
# (start-up included, so the estimate errs long). The config's steps are the most; fewer are recorded in
# the run's command. The call's 600 s, as estimated before the first call: ~20 install, ~70 this, ~90 data
# and evaluations, the pretraining steps, ~150 fine-tuning, ~50 spare. Measured in it (long, 6,000 steps):
# 60 s install and calibration, 0.026 s per step with both schemes at once, 232 s for both pipelines;
# `CALIBRATE=0 ... run 12k` (12,000 steps, one fine-tuning epoch): 430 s for both pipelines, 454 s in all.
# The whole flow (one scheme, its classifier scored on whole reviews at 4 validations, the end's and the test)
# has not run on a GPU yet: its budget is the same 220 s of pretraining steps.
steps=()
if [ "${CALIBRATE:-1}" != 0 ]; then
  budget_s=${PRETRAIN_BUDGET_S:-220}
  for scheme in "${schemes[@]}"; do  # one log for all schemes (a returned file each counts against the 8)
    pretrain "$scheme" "$scratch/calibrate-$scheme" "$scratch/calibrate-$scheme.json" "${toy[@]}" \
      "training.max_steps=$calibration_steps" training.eval_steps=1000 training.save_steps=1000 limit_eval=8 \
      2>&1 | sed -u "s/^/$scheme: /" >> "$OUT/calibrate.log" &
  done
  wait
  fit=$("$python" -c "
import json, sys
from hf_attn.experiments.config import load_experiment
configs, name, steps, budget_s, *schemes = sys.argv[1:]
most = min(load_experiment(f'{configs}/pretrain-{s}-{name}.yaml').training['max_steps'] for s in schemes)
per_step = max(json.load(open(f'$scratch/calibrate-{s}/metrics.json'))['train_runtime_s'] / int(steps) for s in schemes)
print(f'{per_step:.3f} s per step;', min(most, int(float(budget_s) / per_step) // 500 * 500))" \
    "$configs" "$name" "$calibration_steps" "$budget_s" "${schemes[@]}")
  echo "calibration: $fit pretraining steps"
  fit=${fit##* }
  if [ -n "$dry" ]; then
    echo "dry run: the toy's training.max_steps replaces them"
  elif [ "$fit" -lt 500 ]; then
    echo "under 500 pretraining steps fit: not worth running" >&2
    exit 1
  fi
  steps=("training.max_steps=$fit")
fi

send_back() {  # RUN: its model as float16 shards under the 16 MiB a returned file may be, in $OUT/half-RUN/
  "$python" "$repo/tools/transfer.py" save "runs/$1" "runs/half/$1"
  mkdir -p "$OUT/half-$1" && mv "runs/half/$1"/*.safetensors "$OUT/half-$1/"
}

pipeline() {  # pretraining, then fine-tuning, of one scheme; its log goes straight to $OUT (back even if killed)
  local scheme=$1 encoder=pretrain-$1-$name classifier=$1-pretrained-$name
  {
    pretrain "$scheme" "runs/$encoder" "results/gpu/$encoder.json" "${steps[@]}" "${toy[@]}"
    hf_attn train --config "$configs/$classifier.yaml" --dataset "$carry/imdb" --week3 "$carry/week3" \
      --output-dir "runs/$classifier" --results "results/gpu/$classifier.json" "${gpu[@]}" "${toy[@]}"
    send_back "$classifier"
    if [ "$return_encoders" = 1 ]; then
      send_back "$encoder"
    fi
  } > "$OUT/$scheme.log" 2>&1
}
started=$SECONDS
pids=()
for scheme in "${schemes[@]}"; do
  pipeline "$scheme" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do
  wait "$pid" || status=$?
done
echo "${#schemes[@]} pipeline(s) ended after $((SECONDS - started)) s (status $status)"
for scheme in "${schemes[@]}"; do
  tail -n 5 "$OUT/$scheme.log"
done
tar -czf "$OUT/device-results.tgz" --exclude='checkpoint-*' --exclude='*.safetensors' --exclude=training_args.bin \
  --exclude=.hf-attn.lock results/gpu/*-"$name".json runs/*-"$name" runs/half 2>/dev/null || true
ls -l "$OUT" "$OUT"/half-* 2>/dev/null || true
exit $status
