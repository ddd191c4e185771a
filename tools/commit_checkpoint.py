"""Write a checkpoint into this repository's `checkpoints/` under its rules: at most `MAX_CHECKPOINTS` folders, each
at most `MAX_CHECKPOINT_MB`, so that the repository stays cheap to clone (docs/checkpoints.md).

    python tools/commit_checkpoint.py --model runs/rope-whole --output checkpoints/rope-whole-reviews [--overwrite]

The options are `hf-attn checkpoint`'s, which writes the folder; this script adds the rules. A better checkpoint
replaces one of the same kind (`--output` with its path and `--overwrite`) rather than adding one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from hf_attn import cli
from hf_attn.analysis.checkpoint import is_checkpoint

MAX_CHECKPOINT_MB = 30  # per checkpoint folder, in 10^6 bytes
MAX_CHECKPOINTS = 3  # folders in checkpoints/ at a time: a better one replaces an old one


def checkpoints_beside(output: Path) -> list[str]:
    """The names of the checkpoints in `output`'s parent folder other than `output` itself (hidden folders, such as
    the staging folder an interrupted write leaves, are not counted)."""
    if not output.parent.is_dir():
        return []
    return sorted(path.name for path in output.parent.iterdir()
                  if path != output and not path.name.startswith(".") and is_checkpoint(path))


def check_room(output: Path) -> None:
    """Refuse a new checkpoint beside `MAX_CHECKPOINTS` others; replacing one (an `output` holding files) is fine."""
    if output.is_dir() and any(output.iterdir()):
        return
    others = checkpoints_beside(output)
    if len(others) >= MAX_CHECKPOINTS:
        raise ValueError(f"{output.parent} already holds {len(others)} checkpoints ({', '.join(others)}), the most it "
                         "keeps; replace one (--output with its path and --overwrite), or delete one first")


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    where = argparse.ArgumentParser(add_help=False)
    where.add_argument("--output")
    output = where.parse_known_args(argv)[0].output
    if output is not None:
        try:
            check_room(Path(output))
        except ValueError as error:
            print(f"{Path(__file__).name}: error: {error}", file=sys.stderr)
            raise SystemExit(2) from None
    cli.main(["checkpoint", *argv, "--max-mb", str(MAX_CHECKPOINT_MB)])


if __name__ == "__main__":
    main()
