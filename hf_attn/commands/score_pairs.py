"""`hf-attn score-pairs`: exact match by length of a saved sequence-task model on a JSONL file of pairs
(docs/length-tasks.md)."""

from __future__ import annotations

import argparse
import json

from ..arguments import input_file, length_buckets, model_with_tokenizer


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, type=model_with_tokenizer,
                        help="a run folder of `hf-attn train` on a sequence task")
    parser.add_argument("--pairs", required=True, type=input_file, help="JSONL: input, target, optional length")
    parser.add_argument("--buckets", type=length_buckets,
                        help="inclusive length ranges, e.g. 1-8,9-16,32 (default: the run's task's 1..L, L+1..2L, "
                        "4L; else each length)")
    parser.add_argument("--by-position", action="store_true",
                        help="also each bucket's word accuracy at each answer position: where a longer answer "
                        "starts to go wrong")


def run(args: argparse.Namespace) -> None:
    """Print the scores as JSON."""
    from ..experiments.sequence import score_saved

    print(json.dumps(score_saved(args.model, args.pairs, args.buckets, args.by_position), indent=2))
