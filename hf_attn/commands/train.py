"""`hf-attn train`, `hf-attn pretrain` and `hf-attn seq2seq`: one YAML experiment run to its metrics. The three take
the same options and share the run skeleton (--resume, --max-time, --continue-from); they differ in what trains."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from ..arguments import minutes, model_folder, output_file, output_folder
from .common import DATASET_HELP, add_column_arguments, experiment_overrides

MAX_TIME_HELP = ("stop at the first step past this many minutes, with a checkpoint and stage.json, and print the "
                 "commands that continue (--resume here, --continue-from elsewhere); exits 0")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="experiment YAML (see configs/)")
    parser.add_argument("--week3", help="Week 3 folder: tokenizer files and the DAN embedding")
    parser.add_argument("--dataset", help=DATASET_HELP)
    add_column_arguments(parser)
    parser.add_argument("--output-dir", type=output_folder, help="where model, tokenizer, checkpoints, metrics.json go")
    parser.add_argument("--results", type=output_file,
                        help="also write the metrics JSON here (e.g. results/positions/rope.json)")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --output-dir")
    parser.add_argument("--overwrite", action="store_true",
                        help="start again in an --output-dir that holds a run (deletes its checkpoints)")
    parser.add_argument("--max-time", type=minutes, metavar="MINUTES", help=MAX_TIME_HELP)
    parser.add_argument("--continue-from", type=model_folder, metavar="DIR",
                        help="go on from a stopped stage's checkpoint committed with `hf-attn checkpoint` "
                        "(float16 weights and trainer_state.json), in a new --output-dir")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, e.g. training.learning_rate=1e-3")


def run(args: argparse.Namespace) -> None:
    """Run the experiment with the trainer of the command given (`args.command`), print its metrics (the main
    process alone, under `accelerate launch`), and where --max-time stopped it, the commands that continue it."""
    trains = _trainer(args.command)
    from ..experiments.config import load_experiment
    from ..experiments.folders import process_state

    experiment = load_experiment(args.config, experiment_overrides(args))
    output_dir = args.output_dir or f"outputs/{experiment.name}"
    metrics = trains(experiment, output_dir, resume=args.resume, overwrite=args.overwrite, results_path=args.results,
                     max_time=args.max_time, continue_from=args.continue_from)
    if not process_state().is_main_process:
        return
    print(json.dumps({k: v for k, v in metrics.items() if k != "experiment"}, indent=2, default=str))
    if metrics.get("stage") == "stopped":
        print(f"stopped at step {metrics['step']} of {metrics['max_steps']} (--max-time {args.max_time}); continue "
              f"here with:\n  {metrics['continue_here']}\nor on another machine, after committing the checkpoint:\n  "
              + "\n  ".join(metrics["continue_elsewhere"]))


def _trainer(command: str) -> Callable[..., dict[str, Any]]:
    """What `command` trains with, imported now: `train` trains a classifier, or a decoder where the experiment's
    dataset is a sequence task; `pretrain` an encoder or a causal LM; `seq2seq` an encoder-decoder."""
    if command == "pretrain":
        from ..experiments.pretraining import pretrain

        return pretrain
    if command == "seq2seq":
        from ..experiments.seq2seq import train_seq2seq

        return train_seq2seq
    from ..experiments.classification import train
    from ..experiments.sequence import is_sequence_experiment, train_sequence

    def train_by_task(experiment: Any, output_dir: str, **options: Any) -> dict[str, Any]:
        trains = train_sequence if is_sequence_experiment(experiment) else train
        return trains(experiment, output_dir, **options)

    return train_by_task
