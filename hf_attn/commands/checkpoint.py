"""`hf-attn checkpoint`: a run's model as a small float16 from_pretrained folder with its tokenizer, code and card
(this repository commits its own with tools/commit_checkpoint.py, which adds its limits; docs/checkpoints.md)."""

from __future__ import annotations

import argparse

from ..arguments import output_folder, positive_int, positive_number, run_folder


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, type=run_folder,
                        help="a finished `hf-attn train` or `hf-attn pretrain` --output-dir")
    parser.add_argument("--output", required=True, type=output_folder, help="e.g. checkpoints/rope-mlm")
    parser.add_argument("--overwrite", action="store_true", help="replace what --output holds (a refresh)")
    parser.add_argument("--encoder-only", action="store_true",
                        help="keep the encoder without the run's heads (ELECTRA's generator, the masked-LM head): "
                        "what a classifier fine-tunes from, smaller")
    parser.add_argument("--max-mb", type=positive_number,
                        help="refuse a checkpoint over this many megabytes (10^6 bytes), leaving nothing behind")
    parser.add_argument("--max-checkpoints", type=positive_int, metavar="N",
                        help="refuse a new checkpoint beside N others in --output's folder (replacing one is fine)")


def run(args: argparse.Namespace) -> None:
    """Write the checkpoint and say its size and how to load it."""
    from ..publishing.checkpoint import write_checkpoint

    max_bytes = None if args.max_mb is None else round(args.max_mb * 1_000_000)
    size = write_checkpoint(args.model, args.output, overwrite=args.overwrite, encoder_only=args.encoder_only,
                            max_bytes=max_bytes, max_checkpoints=args.max_checkpoints)
    print(f"wrote {args.output} ({size / 1e6:.1f} MB, float16 weights): from_pretrained({args.output!r}) loads it")
