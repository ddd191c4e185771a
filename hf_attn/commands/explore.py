"""`hf-attn explore`: a local Gradio page to read texts with saved classifiers (docs/explore.md)."""

from __future__ import annotations

import argparse

from ..arguments import model_with_tokenizer, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, action="append", type=model_with_tokenizer,
                        help="a saved classifier folder; repeat to compare several")
    parser.add_argument("--port", type=positive_int, help="serve on 127.0.0.1:PORT (default: Gradio's, 7860)")


def run(args: argparse.Namespace) -> None:
    """Build the page and serve it on 127.0.0.1 (Gradio keeps serving it until Ctrl-C)."""
    from ..explore.page import launch

    launch(args.model, args.port)
