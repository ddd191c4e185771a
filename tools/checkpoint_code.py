"""Refresh the model code the committed checkpoints ship, from the package (`hf_attn/`), its one source.

    python tools/checkpoint_code.py           # write hf_attn's current code into every folder of checkpoints/
    python tools/checkpoint_code.py --check   # list the copies that differ from hf_attn/, exit 1 if any

Each folder of `checkpoints/` is a whole Hub repo: it loads with `trust_remote_code=True` from a clone, a copy or
an upload, where hf_attn is not installed, so it keeps a copy of the five model-code files (docs/checkpoints.md).
The copies are generated, as transformers generates its modeling files from a modular source and checks them
(`utils/check_modular_conversion.py`); `tests/test_checkpoint.py` runs the check and names this command.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the copies are this checkout's package, whichever hf_attn the environment installed

from hf_attn.analysis.hub import MODEL_CODE_MODULES, write_model_code  # noqa: E402

REFRESH_COMMAND = "python tools/checkpoint_code.py"


def checkpoint_folders(root: Path) -> list[Path]:
    """Every saved model under `root`: the folders holding a config.json."""
    return sorted(path.parent for path in root.rglob("config.json"))


def stale_copies(root: Path) -> list[Path]:
    """The model-code files under `root`'s checkpoints that are missing or differ from the package's."""
    stale = []
    for folder in checkpoint_folders(root):
        for module in MODEL_CODE_MODULES:
            source = Path(module.__file__)
            copy = folder / source.name
            if not copy.is_file() or copy.read_bytes() != source.read_bytes():
                stale.append(copy)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=REFRESH_COMMAND, description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only list the stale copies; exit 1 if there are any")
    parser.add_argument("--checkpoints", type=Path, default=REPO / "checkpoints", help="default: checkpoints/")
    args = parser.parse_args(argv)
    stale = stale_copies(args.checkpoints)
    if args.check:
        for path in stale:
            print(f"{path} differs from hf_attn/{path.name}: run {REFRESH_COMMAND}")
        return 1 if stale else 0
    for folder in sorted({path.parent for path in stale}):
        write_model_code(folder)
        print(f"refreshed {folder}: {', '.join(sorted({path.name for path in stale if path.parent == folder}))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
