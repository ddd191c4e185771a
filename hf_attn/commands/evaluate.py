"""`hf-attn evaluate`: accuracy and F1 of a saved classifier on a split of a dataset (by default the one it was
trained on)."""

from __future__ import annotations

import argparse
import json

from ..arguments import model_with_tokenizer, positive_int, read_length, reading_policy
from ..runtime.precision import PRECISIONS
from .common import (
    DATASET_HELP,
    PRECISION_HELP,
    READ_LENGTH_HELP,
    WINDOW_STRIDE_HELP,
    add_column_arguments,
    dataset_argument,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, type=model_with_tokenizer)
    parser.add_argument("--dataset", help=DATASET_HELP + " (default: the one the run trained on, as its "
                        "metrics.json says, with its columns and split; stanfordnlp/imdb for a folder without one)")
    add_column_arguments(parser)
    parser.add_argument("--split", default="test", choices=["train", "validation", "test", "all"],
                        help="the split scored (default: test); all: every row of the dataset, e.g. a file of texts "
                             "the model never saw (a file without a test split has one cut from its rows)")
    parser.add_argument("--limit", type=positive_int, help="only the first N reviews of the split")
    parser.add_argument("--read-length", "--max-length", type=read_length, help=READ_LENGTH_HELP)
    parser.add_argument("--window-stride", type=positive_int, help=WINDOW_STRIDE_HELP)
    parser.add_argument("--precision", choices=PRECISIONS, default="auto",
                        help=f"{PRECISION_HELP}; predict, pipeline() and export compute in float32, so a review's "
                             "score differs slightly from theirs under bf16: fp32 gives theirs")


def run(args: argparse.Namespace) -> None:
    """Print the metrics as JSON."""
    from ..experiments.classification import evaluate_saved

    metrics = evaluate_saved(args.model, dataset=dataset_argument(args), split=args.split, limit=args.limit,
                             precision=args.precision, **reading_policy(args.read_length, args.window_stride))
    print(json.dumps(metrics, indent=2))
