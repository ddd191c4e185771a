"""`hf-attn perplexity`: a saved causal LM's perplexity on validation text at several window lengths (the ALiBi
paper's Figure 1; docs/causal-lm.md)."""

from __future__ import annotations

import argparse

from ..arguments import lengths_list, model_with_tokenizer, output_file, positive_int
from ..runtime.precision import PRECISIONS
from .common import PRECISION_HELP, print_report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, type=model_with_tokenizer, help="a causal-LM folder")
    parser.add_argument("--lengths", required=True, type=lengths_list,
                        help="window lengths, e.g. 64,128,256,512,1024 (1x-16x a training length of 64)")
    parser.add_argument("--dataset", default="stanfordnlp/imdb",
                        help="Hub id, parquet folder, aclImdb/ or 'sample': its seed split's validation reviews")
    parser.add_argument("--max-tokens", type=positive_int, default=65_536,
                        help="tokens of validation text every length reads (rounded down to whole windows)")
    parser.add_argument("--output", type=output_file, help="write the JSON here (e.g. results/causal-lm/rope.json)")
    parser.add_argument("--precision", choices=PRECISIONS, default="auto", help=PRECISION_HELP)


def run(args: argparse.Namespace) -> None:
    """Print the perplexity at each length, with the command that measured it, as JSON (and write it to --output)."""
    from ..experiments.perplexity import evaluate_perplexity
    from ..experiments.records import cli_command

    print_report({**evaluate_perplexity(args.model, args.lengths, dataset=args.dataset, max_tokens=args.max_tokens,
                                        precision=args.precision), "command": cli_command()}, args.output)
