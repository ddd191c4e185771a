"""Bringing trained models back from a machine that returns only small files.

The lent GPU machine (tools/device_runs.sh) hands back at most 8 files of 16 MiB, 64 MiB in all: a
float32 classifier of the reference size is 41 MB, its masked-LM encoder (untied output layer) 54 MB.
They travel as float16 safetensors shards (half the bytes) and are restored to float32 here. float16
keeps 11 significant bits, so the restored weights are not the trained ones to the last digit:
`restore_half_precision` scores a restored classifier on the test split again and records that beside
the run's own scores, so a card states the accuracy of the weights it ships with. Any hf_attn model
travels this way (the class is read from the folder's config.json); only classifiers are scored.

From the shell (what tools/device_runs.sh runs)::

    python tools/transfer.py save RUN_DIR SHARD_DIR
    python tools/transfer.py restore SHARD_DIR RUN_DIR --dataset DATASET [--limit N]

A tool of this repository's machines, not part of the package (which it imports).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from hf_attn import modeling_hf_attn
from hf_attn.configuration_hf_attn import HfAttnConfig
from hf_attn.experiments.classification import evaluate_saved
from hf_attn.modeling_hf_attn import HfAttnForSequenceClassification, HfAttnPreTrainedModel

# Under the 16 MB a returned file may be, with room for the shard's header.
SHARD_SIZE = "15MB"
# What the weights travel in; `restored_weights` names it from here, so the record cannot drift from the save.
TRAVEL_DTYPE = torch.float16


def saved_model_class(model_dir: str | os.PathLike[str]) -> type[HfAttnPreTrainedModel]:
    """The hf_attn class a saved folder holds: the first of its config.json's `architectures`."""
    architectures = HfAttnConfig.from_pretrained(model_dir).architectures or []
    model_class = getattr(modeling_hf_attn, architectures[0], None) if architectures else None
    if not (isinstance(model_class, type) and issubclass(model_class, HfAttnPreTrainedModel)):
        raise ValueError(f"{model_dir}/config.json names no hf_attn model class in `architectures` "
                         f"({architectures}); is it a folder written by hf-attn train or pretrain?")
    return model_class


def save_half_precision(run_dir: str | os.PathLike[str], shard_dir: str | os.PathLike[str],
                        max_shard_size: str = SHARD_SIZE) -> list[Path]:
    """Write the run's model (classifier, masked-LM encoder, ...) to `shard_dir` in TRAVEL_DTYPE, split into
    shards of at most `max_shard_size`."""
    model = saved_model_class(run_dir).from_pretrained(run_dir, dtype=TRAVEL_DTYPE)
    model.save_pretrained(shard_dir, max_shard_size=max_shard_size)
    return sorted(Path(shard_dir).glob("*.safetensors"))


def restore_half_precision(shard_dir: str | os.PathLike[str], run_dir: str | os.PathLike[str], dataset: str,
                           limit: int | None = None) -> dict[str, Any]:
    """Save the float16 shards as a float32 model into `run_dir` (which holds the run's tokenizer and
    metrics.json) and add `restored_weights` to its metrics.json: the travel dtype and, for a classifier,
    its scores on the test split (first `limit` reviews) of `dataset`."""
    model = saved_model_class(shard_dir).from_pretrained(shard_dir, dtype=torch.float32)
    model.save_pretrained(run_dir)
    restored: dict[str, Any] = {"from": str(TRAVEL_DTYPE).removeprefix("torch.")}
    if isinstance(model, HfAttnForSequenceClassification):
        scores = evaluate_saved(run_dir, dataset=dataset, split="test", limit=limit)
        limited = f" --limit {limit}" if limit is not None else ""
        restored.update(test_accuracy=scores["test_accuracy"], test_f1=scores["test_f1"],
                        command=f"hf-attn evaluate --model {run_dir} --dataset {dataset} --split test{limited}")
    metrics_path = Path(run_dir) / "metrics.json"
    metrics = json.loads(metrics_path.read_text())
    metrics["restored_weights"] = restored
    metrics_path.write_text(json.dumps(metrics, indent=2))
    return restored


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python tools/transfer.py", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    save = commands.add_parser("save", help="a run's model as float16 shards")
    save.add_argument("run_dir")
    save.add_argument("shard_dir")
    restore = commands.add_parser("restore", help="float16 shards back into a float32 run folder")
    restore.add_argument("shard_dir")
    restore.add_argument("run_dir")
    restore.add_argument("--dataset", required=True, help="IMDb source a classifier's test split is scored on")
    restore.add_argument("--limit", type=int, default=None, help="score only the first N test reviews")
    args = parser.parse_args(argv)
    if args.command == "save":
        shards = save_half_precision(args.run_dir, args.shard_dir)
        print(f"{args.run_dir}: {len(shards)} shard(s) in {args.shard_dir},",
              ", ".join(f"{path.stat().st_size / 2**20:.1f} MiB" for path in shards))
    else:
        restored = restore_half_precision(args.shard_dir, args.run_dir, args.dataset, args.limit)
        print(f"{args.run_dir} restored to float32 ({saved_model_class(args.run_dir).__name__}):", restored)


if __name__ == "__main__":
    main()
