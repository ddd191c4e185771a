"""Bringing a trained classifier back from a machine that returns only small files.

The lent GPU machine (scripts/device_runs.sh) hands back at most 8 files of 16 MB: a float32 classifier
of the reference size is 41 MB. It travels as float16 safetensors shards (half the bytes) and is
restored to float32 here. float16 keeps 11 significant bits, so the restored weights are not the
trained ones to the last digit: `restore_half_precision` scores them on the test split again and
records that beside the run's own scores, so a card states the accuracy of the weights it ships with.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from ..modeling_hf_attn import HfAttnForSequenceClassification
from .classification import evaluate_saved

# Under the 16 MB a returned file may be, with room for the shard's header.
SHARD_SIZE = "15MB"
# What the weights travel in; `restored_weights` names it from here, so the record cannot drift from the save.
TRAVEL_DTYPE = torch.float16


def save_half_precision(run_dir: str | os.PathLike[str], shard_dir: str | os.PathLike[str],
                        max_shard_size: str = SHARD_SIZE) -> list[Path]:
    """Write the run's classifier to `shard_dir` in TRAVEL_DTYPE, split into shards of at most `max_shard_size`."""
    model = HfAttnForSequenceClassification.from_pretrained(run_dir, dtype=TRAVEL_DTYPE)
    model.save_pretrained(shard_dir, max_shard_size=max_shard_size)
    return sorted(Path(shard_dir).glob("*.safetensors"))


def restore_half_precision(shard_dir: str | os.PathLike[str], run_dir: str | os.PathLike[str], dataset: str,
                           limit: int | None = None) -> dict[str, Any]:
    """Save the float16 shards as a float32 model into `run_dir` (which holds the run's tokenizer and
    metrics.json), score it on the test split and add that to metrics.json as `restored_weights`."""
    model = HfAttnForSequenceClassification.from_pretrained(shard_dir, dtype=torch.float32)
    model.save_pretrained(run_dir)
    scores = evaluate_saved(run_dir, dataset=dataset, split="test", limit=limit)
    limited = f" --limit {limit}" if limit is not None else ""
    restored = {
        "from": str(TRAVEL_DTYPE).removeprefix("torch."),
        "test_accuracy": scores["test_accuracy"],
        "test_f1": scores["test_f1"],
        "command": f"hf-attn evaluate --model {run_dir} --dataset {dataset} --split test{limited}",
    }
    metrics_path = Path(run_dir) / "metrics.json"
    metrics = json.loads(metrics_path.read_text())
    metrics["restored_weights"] = restored
    metrics_path.write_text(json.dumps(metrics, indent=2))
    return restored
