"""`hf-attn push`: upload a run's model, tokenizer, code and model card to the Hub (or, with --dry-run, only
write the folder that would be uploaded)."""

from __future__ import annotations

import argparse

from ..arguments import model_folder, output_folder


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, type=model_folder,
                        help="a finished `hf-attn train` or `hf-attn pretrain` --output-dir, or a checkpoint")
    parser.add_argument("--repo-id", required=True, help="e.g. your-name/hf-attn-imdb-rope")
    parser.add_argument("--private", action="store_true")
    parser.add_argument("--dry-run", metavar="DIR", type=output_folder,
                        help="only write the folder that would be uploaded to DIR")


def run(args: argparse.Namespace) -> None:
    """Upload (or write) the folder and name the files it holds."""
    from ..publishing.hub import push

    names = push(args.model, args.repo_id, private=args.private, dry_run_dir=args.dry_run)
    print(f"{f'wrote {args.dry_run}' if args.dry_run else f'uploaded to {args.repo_id}'}: {', '.join(names)}")
