"""SCAN's length split (Lake & Baroni, ICML 2018), read from its public files.

`tasks_train_length.txt` holds the commands whose action sequences have at most 22 actions,
`tasks_test_length.txt` those with 24 to 48; one pair a line, `IN: <command> OUT: <actions>`. A pair reads
as the generated tasks' (`hf_attn.tasks.length.Pair`): `input` the command's words, `target` the actions,
both joined by single spaces as in the files, and `length` the number of actions in the target, the measure
the split is made by.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import ClassVar

from datasets import DatasetDict
from transformers import PreTrainedTokenizerFast

from .length import Pair, build_tokenizer, pairs_to_dataset_dict, split_seed
from .sources import SequenceTask

SCAN_LENGTH_FILES = {"train": "tasks_train_length.txt", "test": "tasks_test_length.txt"}
# The split's length measure: training targets have at most this many actions, test targets more.
SCAN_MAX_TRAIN_LENGTH = 22
# Exact match is reported in distribution (1..22) and past it (the test file's 24..48 actions), as one figure each:
# Lake & Baroni and Kazemnejad et al. report the split's test accuracy whole.
SCAN_LENGTH_BUCKETS = ((1, SCAN_MAX_TRAIN_LENGTH), (SCAN_MAX_TRAIN_LENGTH + 1, 48))


def parse_scan_line(line: str, where: str) -> Pair:
    """One `IN: <command> OUT: <actions>` line as a Pair; anything else is refused naming `where`."""
    text = line.rstrip("\r\n")
    if not text.startswith("IN: ") or text.count(" OUT: ") != 1:
        raise ValueError(f"{where}: not a SCAN line 'IN: <command> OUT: <actions>': {text[:80]!r}.")
    command, actions = text[len("IN: "):].split(" OUT: ")
    return Pair(" ".join(command.split()), " ".join(actions.split()), len(actions.split()))


def read_scan_pairs(path: str | Path) -> list[Pair]:
    """Every pair of one SCAN file, in file order (blank lines skipped)."""
    with open(path, encoding="utf-8") as file:
        return [parse_scan_line(line, f"{path}, line {number}")
                for number, line in enumerate(file, start=1) if line.strip()]


def scan_length_split(folder: str | Path, n_validation: int = 0, seed: int = 0) -> DatasetDict:
    """SCAN's length split from `folder` as a `DatasetDict` (`train`, `test`; columns input, target, length).

    With `n_validation`, that many training pairs, drawn with `random.Random(split_seed(seed, "validation"))`,
    move to a `validation` split (the public split has none); the rest stay in file order.
    """
    folder = Path(folder)
    missing = [name for name in SCAN_LENGTH_FILES.values() if not (folder / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{folder} lacks {', '.join(missing)}: point to a folder holding SCAN's "
                                f"length_split files (brendenlake/SCAN, length_split/).")
    splits = {split: read_scan_pairs(folder / name) for split, name in SCAN_LENGTH_FILES.items()}
    train = splits["train"]
    if not isinstance(n_validation, int) or isinstance(n_validation, bool) or not 0 <= n_validation < len(train):
        raise ValueError(f"n_validation must be an integer from 0 to {len(train) - 1}, got {n_validation!r}.")
    if n_validation:
        chosen = set(random.Random(split_seed(seed, "validation")).sample(range(len(train)), n_validation))
        splits = {"train": [pair for index, pair in enumerate(train) if index not in chosen],
                  "validation": [train[index] for index in sorted(chosen)],
                  "test": splits["test"]}
    return pairs_to_dataset_dict(splits)


def scan_tokenizer(dataset: DatasetDict) -> PreTrainedTokenizerFast:
    """`build_tokenizer` of every word of the commands and actions of `dataset`'s splits."""
    return build_tokenizer({word for split in dataset.values()
                            for column in ("input", "target") for text in split[column] for word in text.split()})


@dataclasses.dataclass(frozen=True)
class ScanLengthSplit(SequenceTask):
    """SCAN's length split (Lake & Baroni 2018) from the public files in `folder`; `n_validation` training pairs,
    drawn with `seed`, become the validation split (`hf_attn.tasks.scan`)."""

    kind: ClassVar[str] = "scan"
    folder: str
    n_validation: int = 0
    seed: int = 0

    def load_pairs(self) -> DatasetDict:
        return scan_length_split(self.folder, self.n_validation, self.seed)

    def score_buckets(self) -> list[tuple[int, int]]:
        return list(SCAN_LENGTH_BUCKETS)

    def pairs_tokenizer(self, data: DatasetDict) -> PreTrainedTokenizerFast:
        """Every word of the commands and actions."""
        return scan_tokenizer(data)
