"""`hf-attn write-pairs`: a generated length task's train / validation / test pairs as JSONL, for `score-pairs` or
another model (docs/length-tasks.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..arguments import output_folder, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task", help="copy, reverse, sort, addition, ... (an unknown name lists them)")
    parser.add_argument("--max-train-length", type=positive_int, required=True,
                        help="L: train and validation at 1..L, test at L+1..2L and 4L")
    parser.add_argument("--n-train", type=positive_int, required=True)
    parser.add_argument("--n-validation", type=positive_int, required=True)
    parser.add_argument("--n-test-per-length", type=positive_int, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output-dir", type=output_folder, required=True, help="gets SPLIT.jsonl")


def run(args: argparse.Namespace) -> None:
    """Write the splits and print each file with its number of pairs."""
    from ..tasks.length import write_length_splits

    for path, count in write_length_splits(args.task, args.max_train_length, args.n_train, args.n_validation,
                                           args.n_test_per_length, args.seed, Path(args.output_dir)).items():
        print(f"{path}: {count} pairs")
