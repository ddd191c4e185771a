"""`hf-attn baseline`: TF-IDF and logistic regression on each text's first N tokens, the bar a model of the same
reading length must clear."""

from __future__ import annotations

import argparse

from ..arguments import output_file, positive_int
from .common import DATASET_HELP, add_column_arguments, dataset_argument, print_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", default="stanfordnlp/imdb", help=DATASET_HELP)
    add_column_arguments(parser)
    parser.add_argument("--week3", help="tokenizer whose first --max-tokens tokens define the input")
    parser.add_argument("--max-tokens", type=positive_int, default=128)
    parser.add_argument("--output", type=output_file,
                        help="write the metrics JSON here (e.g. results/baselines/tfidf-128.json)")


def run(args: argparse.Namespace) -> None:
    """Print the metrics, with the command that measured them, as JSON (and write them to --output)."""
    from ..experiments.baseline import run_tfidf_baseline
    from ..experiments.records import cli_command
    from ..tasks import load_classification

    tokenizer = None
    if args.week3:
        from ..week3 import load_week3_tokenizer

        tokenizer = load_week3_tokenizer(args.week3)
    metrics = run_tfidf_baseline(load_classification(dataset_argument(args)).splits, tokenizer=tokenizer,
                                 max_tokens=args.max_tokens)
    metrics["command"] = cli_command()
    print_report(metrics, args.output)
