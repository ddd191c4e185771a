"""`hf-attn prepare`: a complete Week 3 folder (BPE tokenizer, splits, DAN embedding) made from IMDb or another
two-label dataset (docs/week3.md)."""

from __future__ import annotations

import argparse
import json

from ..arguments import output_folder, positive_int
from .common import DATASET_HELP, add_column_arguments, dataset_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", required=True, type=output_folder,
                        help="folder to create (datasets/ and models/ inside)")
    parser.add_argument("--dataset", default="stanfordnlp/imdb", help=DATASET_HELP + " (two labels)")
    add_column_arguments(parser)
    parser.add_argument("--vocab-size", type=positive_int, default=500, help="256 bytes + merges (the tutorial: 500)")
    parser.add_argument("--min-freq", type=positive_int, default=5, help="stop merging below this pair count")
    parser.add_argument("--max-seq", type=positive_int, default=128, help="ids per review in the .pt splits")
    parser.add_argument("--tokenizer-train-size", type=positive_int,
                        help="train the BPE on the first N training reviews")


def run(args: argparse.Namespace) -> None:
    """Write the folder and print its report (sizes, vocabulary, the DAN's accuracy)."""
    from ..week3.prepare import prepare_week3

    report = prepare_week3(args.output, dataset=dataset_argument(args), vocab_size=args.vocab_size,
                           min_freq=args.min_freq, max_seq=args.max_seq, tokenizer_train_size=args.tokenizer_train_size)
    print(json.dumps(report, indent=2))
