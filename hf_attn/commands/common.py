"""What several commands share: the dataset option and its columns, the help texts of options that more than one
command takes, the overrides of an experiment, texts given as arguments, and a JSON report written and printed."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DATASET_HELP = ("a data file (CSV, TSV, JSON, JSONL, parquet), a folder of them, a Hub id, an IMDb copy (parquet "
                "folder, aclImdb/) or 'sample'")
READ_LENGTH_HELP = ("tokens read of each text, or `all` (default: the saved config's read_length); past the "
                    "training length a model reads directly (sinusoidal, rope, alibi) or as windows (--window-stride)"
                    "; --max-length is its 1.0 name")
WINDOW_STRIDE_HELP = ("read a text longer than the model's positions as windows of that many tokens starting every N "
                      "tokens, pooled (any scheme, any length; default: the saved config's window_stride)")
PRECISION_HELP = "bf16 autocast where the hardware has bfloat16 units (auto, the default), or as chosen"


def add_column_arguments(command: argparse.ArgumentParser) -> None:
    """--text-column and --label-column, which name the columns of --dataset (`dataset_argument` reads them)."""
    command.add_argument("--text-column", help="the --dataset column holding the texts (default: text)")
    command.add_argument("--label-column", help="the --dataset column holding the labels, names or numbers "
                         "(default: label)")


def dataset_argument(args: argparse.Namespace) -> str | dict[str, str] | None:
    """--dataset, or with --text-column / --label-column the mapping of a `datasets` source (None: neither given)."""
    columns = {key: value for key, value in (("text_column", args.text_column), ("label_column", args.label_column))
               if value is not None}
    if not columns:
        return args.dataset
    if args.dataset is None:
        raise ValueError("--text-column and --label-column name columns of --dataset: pass --dataset too")
    return {"kind": "datasets", "path": args.dataset, **columns}


def experiment_overrides(args: argparse.Namespace) -> list[str]:
    """The command line's key=value overrides of an experiment, with --week3 and the dataset (--dataset and its
    columns) as more."""
    overrides = list(args.overrides)
    if args.week3:
        overrides.append(f"week3={args.week3}")
    dataset = dataset_argument(args)
    if dataset is not None:
        overrides.append(f"dataset={json.dumps(dataset)}")  # JSON is YAML: a string or a mapping
    return overrides


def text_arguments(texts: Sequence[str], kind: str) -> list[str]:
    """The command line's texts, each checked to be UTF-8 (Python keeps other bytes as lone surrogates, which the
    tokenizer cannot read): a ValueError naming the `kind` and number of the first that is not."""
    from ..tokenization_hf_attn import check_encodable

    for number, text in enumerate(texts, 1):
        check_encodable(text, f"{kind} {number}")
    return list(texts)


def print_report(report: dict[str, Any], output: str | None) -> None:
    """Print `report` as JSON, and write the same text to `output` (its folder made) where one is given."""
    text = json.dumps(report, indent=2, default=str)
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        Path(output).write_text(text)
    print(text)
