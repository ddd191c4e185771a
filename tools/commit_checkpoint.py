"""Write a checkpoint into this repository's `checkpoints/` under its rules: at most `MAX_CHECKPOINTS` folders, each
at most `MAX_CHECKPOINT_MB`, so that the repository stays cheap to clone (docs/checkpoints.md).

    python tools/commit_checkpoint.py --model runs/rope-whole --output checkpoints/rope-whole-reviews [--overwrite]

The options are `hf-attn checkpoint`'s, which writes the folder; this script adds the rules. A better checkpoint
replaces one of the same kind (`--output` with its path and `--overwrite`) rather than adding one.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from hf_attn import cli

MAX_CHECKPOINT_MB = 30  # per checkpoint folder, in 10^6 bytes
MAX_CHECKPOINTS = 3  # large folders in checkpoints/ at a time: a better one replaces an old one
MAX_TASK_MODEL_MB = 5  # a task model this small (tools/commit_length_models.py) sits beside them, uncounted


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    cli.main(["checkpoint", *argv, "--max-mb", str(MAX_CHECKPOINT_MB), "--max-checkpoints", str(MAX_CHECKPOINTS)])


if __name__ == "__main__":
    main()
