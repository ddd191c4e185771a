"""`hf-attn card`: the model card of a trained run, written from its metrics.json."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..arguments import model_folder, output_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, type=model_folder,
                        help="a finished `hf-attn train` or `hf-attn pretrain` --output-dir")
    parser.add_argument("--repo-id", required=True, help="the Hub repo the card's loading example names")
    parser.add_argument("--output", required=True, type=output_file, help="e.g. model_cards/rope.md")


def run(args: argparse.Namespace) -> None:
    """Write the card to --output (its folder made) and say where."""
    from ..publishing.cards import card_for_run

    card = card_for_run(args.model, args.repo_id)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    card.save(args.output)
    print(f"wrote {args.output}")
