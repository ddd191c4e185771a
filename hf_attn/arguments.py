"""Argument types of the command line: each checks one value when the arguments are read, so that a wrong
path or number fails in a second with a usage error that names it, not after minutes of work.

Kept apart from `cli` so that the commands' modules (`hf_attn.commands`, the benchmark's options) can use them
without importing the command line that imports them.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path

HUB_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")


def model_folder(value: str, needs: tuple[str, ...] = ("config.json",)) -> str:
    """A `--model`: a folder holding the files `needs`, or a Hub repo id; anything else is a usage error
    that names the problem (transformers would report a missing folder as a malformed repo id, and a
    folder without a tokenizer as a missing sentencepiece)."""
    path = Path(value)
    if not path.exists():
        if not HUB_REPO_ID.fullmatch(value):
            raise argparse.ArgumentTypeError(f"model folder {value} does not exist")
        if not hub_repo_reachable(value):
            raise argparse.ArgumentTypeError(f"model folder {value} does not exist, and no Hub repo of that name is in "
                                             "the local cache (HF_HUB_OFFLINE is set, so the Hub is not asked)")
        return value
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value} is a file; pass the folder that holds a saved model")
    missing = [name for name in needs if not (path / name).is_file()]
    if missing:
        models = sorted(child.name for child in path.iterdir()
                        if child.is_dir() and all((child / name).is_file() for name in needs))
        hint = (f"its subfolders {', '.join(models)} are model folders: pass one, e.g. {path / models[0]}" if models
                else "pass a folder written by `hf-attn train` (model and tokenizer)")
        raise argparse.ArgumentTypeError(f"{value} holds no {' or '.join(missing)}; {hint}")
    return value


def hub_repo_reachable(repo_id: str) -> bool:
    """Whether `from_pretrained(repo_id)` can look for it: online, or offline with its config.json in the cache."""
    import huggingface_hub
    from huggingface_hub.errors import HFValidationError

    if not huggingface_hub.is_offline_mode():
        return True
    try:
        return isinstance(huggingface_hub.try_to_load_from_cache(repo_id, "config.json"), str)
    except HFValidationError:
        return False


def model_with_tokenizer(value: str) -> str:
    """A `--model` that reads text (classifies or generates it): a saved model with its tokenizer."""
    return model_folder(value, needs=("config.json", "tokenizer.json"))


def run_folder(value: str) -> str:
    """`checkpoint --model`: a run folder on this machine (not a Hub repo id) holding a saved model and tokenizer."""
    if not Path(value).is_dir():
        raise argparse.ArgumentTypeError(f"run folder {value} does not exist; pass the --output-dir of a finished "
                                         "`hf-attn train` or `hf-attn pretrain`")
    return model_with_tokenizer(value)


def positive_int(value: str) -> int:
    """A count such as `--window-stride`: a whole number above 0."""
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number above 0, got {value!r}")
    return int(value)


def read_length(value: str) -> int | str:
    """`--read-length`: a whole number above 0, or `all` (every token of each text)."""
    return value if value == "all" else positive_int(value)


def reading_policy(read_length: int | str | None, window_stride: int | None) -> dict[str, int | None]:
    """The config fields `--read-length` / `--window-stride` set over a saved classifier's (only those given)."""
    changes: dict[str, int | None] = {}
    if read_length is not None:
        changes["read_length"] = None if read_length == "all" else read_length
    if window_stride is not None:
        changes["window_stride"] = window_stride
    return changes


def positive_number(value: str, unit: str = "") -> float:
    """A size such as `checkpoint --max-mb`: a finite number above 0 (of `unit`, which the error names)."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (math.isfinite(number) and number > 0):
        raise argparse.ArgumentTypeError(f"expected a number{f' of {unit}' if unit else ''} above 0, got {value!r}")
    return number


def minutes(value: str) -> float:
    """`--max-time`: a number of minutes above 0."""
    return positive_number(value, "minutes")


def lengths_list(value: str) -> list[int]:
    """`perplexity --lengths`: comma-separated whole numbers of at least 2 (a window of 1 predicts nothing)."""
    parts = value.split(",")
    if not all(part.strip().isdigit() and int(part) >= 2 for part in parts):
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers of at least 2 (e.g. 64,128,256), "
                                         f"got {value!r}")
    return sorted({int(part) for part in parts})


def names_list(value: str) -> list[str]:
    """`arena --schemes / --tasks`: comma-separated names (the arena says which it has)."""
    names = [part.strip() for part in value.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"expected comma-separated names (e.g. fire,alibi), got {value!r}")
    return names


def seeds_list(value: str) -> list[int]:
    """`arena --seeds`: comma-separated whole numbers (the arena says which it has)."""
    parts = [part.strip() for part in value.split(",")]
    if not all(part.isdigit() for part in parts):
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers (e.g. 1,2), got {value!r}")
    return [int(part) for part in parts]


def length_buckets(value: str) -> list[tuple[int, int]]:
    """`score-pairs --buckets`: comma-separated inclusive length ranges, `LOW-HIGH` or one length (`1-8,9-16,32`)."""
    buckets = []
    for part in value.split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdigit() or not (high or low).isdigit() or int(low) > int(high or low):
            raise argparse.ArgumentTypeError(f"expected comma-separated lengths or LOW-HIGH ranges (e.g. 1-8,9-16,32), "
                                             f"got {value!r}")
        buckets.append((int(low), int(high or low)))
    return buckets


def input_file(value: str) -> str:
    """`predict --input`: an existing file, or `-` for standard input."""
    if value != "-" and not Path(value).is_file():
        raise argparse.ArgumentTypeError(f"{value} is not a file; pass a text or JSONL file, or - for standard input")
    return value


def _writable(path: Path, value: str) -> None:
    """`path` exists and this process may write it, or it can be made: its nearest existing ancestor is a
    folder this process may write. A pure check: nothing is created."""
    if path.exists():
        if not os.access(path, os.W_OK | (os.X_OK if path.is_dir() else 0)):
            raise argparse.ArgumentTypeError(f"{value} is not writable")
        return
    ancestor = next(parent for parent in path.absolute().parents if parent.exists())
    if not ancestor.is_dir():
        raise argparse.ArgumentTypeError(f"{value} cannot be created: {ancestor} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{value} cannot be created: {ancestor} is not writable")


def output_file(value: str) -> str:
    """A file a command writes after its work (`--results`, `--output`): checked when the arguments are read, so
    that a wrong path fails in a second and not after a run."""
    path = Path(value)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{value} is a folder; pass a file path, e.g. {path / 'metrics.json'}")
    _writable(path, value)
    return value


def output_folder(value: str) -> str:
    """A folder a command writes into (`--output-dir`): an existing writable folder or one that can be made."""
    path = Path(value)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value} is a file; pass a folder path")
    _writable(path, value)
    return value
