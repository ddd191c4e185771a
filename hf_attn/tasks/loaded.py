"""Any classification data the `datasets` library loads: a data file, a folder of them, or a Hub id.

`LoadedDataset` reads the data, names the columns that hold the texts and labels, checks them with errors that
name the file, the row and the fix, and cuts a missing validation or test split from the training rows with a
seed, so every run of the same experiment sees the same rows.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import datasets
import pyarrow.parquet as pq
from datasets.exceptions import DatasetGenerationError

from ..settings import setting
from ..tokenization_hf_attn import check_encodable
from .sources import ClassificationData, DatasetError, LabelledTexts

# What `datasets.load_dataset` builder reads a data file of each suffix (and with which options).
FILE_BUILDERS: dict[str, tuple[str, dict[str, Any]]] = {
    ".csv": ("csv", {}),
    ".tsv": ("csv", {"delimiter": "\t"}),
    ".json": ("json", {}),
    ".jsonl": ("json", {}),
    ".parquet": ("parquet", {}),
}
# The names sources give the split a model is chosen on.
VALIDATION_NAMES = ("validation", "valid", "dev", "val")


@dataclasses.dataclass(frozen=True)
class LoadedDataset(LabelledTexts):
    """Any classification data the `datasets` library loads: a data file (CSV, TSV, JSON, JSONL, parquet), a
    local folder of such files (split by file name, as `datasets` splits them), or a Hub id (with `config_name`
    for a dataset with configurations). `text_column` (and `text_pair_column`) and `label_column` name the
    columns; labels may be names or numbers. A missing `validation` / `test` split is cut from `train`
    (`validation_size`, `test_size` of it, with `split_seed`)."""

    kind: ClassVar[str] = "datasets"
    path: str
    text_column: str = "text"
    text_pair_column: str | None = None
    label_column: str = "label"
    config_name: str | None = None
    validation_size: float = setting(0.1, accepts=lambda value: 0 < value < 1,
                                     meaning="a share of the training rows in (0, 1)")
    test_size: float = setting(0.1, accepts=lambda value: 0 < value < 1,
                               meaning="a share of the training rows in (0, 1)")
    split_seed: int = 42

    @property
    def is_local(self) -> bool:
        return Path(self.path).exists() or Path(self.path).suffix.lower() in FILE_BUILDERS or self.path.startswith(
            (".", "/", "~"))

    def load(self) -> ClassificationData:
        raw = self._read()
        columns = {"text": self.text_column, "text_pair": self.text_pair_column, "label": self.label_column}
        columns = {role: column for role, column in columns.items() if column is not None}
        for name, rows in raw.items():
            self._check_columns(rows, name, columns)
        splits = self._splits(raw)
        label_names = self._label_names(splits)
        features = datasets.ClassLabel(names=list(label_names))
        name_of = self._label_name_of(splits["train"])
        renamed = {column: role for role, column in columns.items() if role != "label"}

        def normalize(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
            labels = [features.str2int(name_of(value)) for value in batch[self.label_column]]
            return {**{role: batch[column] for column, role in renamed.items()}, "label": labels}

        normalized = datasets.DatasetDict({
            name: rows.map(normalize, batched=True, remove_columns=rows.column_names, desc=f"Reading {name}")
            .cast_column("label", features) for name, rows in splits.items()})
        hub_id = None if self.is_local else self.path
        return ClassificationData(normalized, label_names, hub_id, Path(self.path).name or self.path)

    def _check_columns(self, rows: datasets.Dataset, split: str, columns: dict[str, str]) -> None:
        """Every named column is there, and every text a string: one line naming the column, the row and the file."""
        for role, column in columns.items():
            if column not in rows.column_names:
                raise DatasetError(
                    f"{self.path}: the {split} split has no column {column!r} (the {role} column); its columns are "
                    f"{rows.column_names}: name the right one with `{role}_column` (--{role.replace('_', '-')}-column)")
        for role, column in columns.items():
            if role == "label":
                continue
            for row, text in enumerate(rows[column]):
                if not isinstance(text, str):
                    what = "empty" if text is None else f"a {type(text).__name__} ({text!r}), not a string"
                    raise DatasetError(f"{self.path}: text column {column!r} is {what} in data row {row + 1} of the "
                                       f"{split} split; fill or drop that row")

    def _read(self) -> datasets.DatasetDict:
        path = Path(self.path).expanduser()
        if path.is_file():
            suffix = path.suffix.lower()
            if suffix not in FILE_BUILDERS:
                raise DatasetError(f"{path}: a data file must end in one of {', '.join(FILE_BUILDERS)}")
            builder, options = FILE_BUILDERS[suffix]
            return read_data_files([path], path, builder, data_files={"train": str(path)}, **options)
        if path.is_dir():
            try:
                return read_data_files(data_files_in(path), path, str(path))
            except DatasetError:
                raise
            except (ValueError, FileNotFoundError) as error:
                raise DatasetError(f"{path}: no data files `datasets` can read ({error})") from None
        if self.is_local:
            raise FileNotFoundError(f"dataset {path} does not exist")
        try:
            return datasets.load_dataset(self.path, self.config_name)
        except ConnectionError as error:
            raise DatasetError(
                f"the Hub dataset {self.path!r} could not be loaded ({type(error).__name__}: offline, or no network); "
                "pass a local copy instead: a data file (CSV, JSON, JSONL, parquet) or a folder of them"
            ) from None

    def _splits(self, raw: datasets.DatasetDict) -> dict[str, datasets.Dataset]:
        """train / validation / test from what the source has, the missing ones cut from train with the seed."""
        if "train" not in raw:
            raise DatasetError(f"{self.path} has no train split (splits: {sorted(raw)}); name a file or folder with "
                               "training rows")
        validation = next((raw[name] for name in VALIDATION_NAMES if name in raw), None)
        test = raw.get("test")
        train = raw["train"]
        missing = {"validation": validation is None, "test": test is None}
        share = self.validation_size * missing["validation"] + self.test_size * missing["test"]
        if share:
            if share >= 1 or round(len(train) * share) < sum(missing.values()):
                raise DatasetError(f"{self.path}: {len(train)} training rows are too few to cut "
                                   f"{' and '.join(name for name, gone in missing.items() if gone)} from")
            cut = train.train_test_split(test_size=share, seed=self.split_seed, shuffle=True)
            train, held_out = cut["train"], cut["test"]
            if missing["validation"] and missing["test"]:
                parts = held_out.train_test_split(test_size=self.test_size / share, seed=self.split_seed)
                validation, test = parts["train"], parts["test"]
            elif missing["validation"]:
                validation = held_out
            else:
                test = held_out
        return {"train": train, "validation": validation, "test": test}

    def _label_name_of(self, rows: datasets.Dataset) -> Any:
        """value -> label name: a ClassLabel's name for its id, else the value as text."""
        feature = rows.features[self.label_column]
        return feature.int2str if isinstance(feature, datasets.ClassLabel) else str

    def _label_names(self, splits: dict[str, datasets.Dataset]) -> tuple[str, ...]:
        """The label names: a ClassLabel's own (in its order), else the values found, numbers in numeric order."""
        feature = splits["train"].features[self.label_column]
        values = [value for rows in splits.values() for value in rows[self.label_column]]
        if isinstance(feature, datasets.ClassLabel):
            values = [feature.int2str(value) for value in values]
            named = {name: index for index, name in enumerate(feature.names)}
        else:
            named = None
        bad = next((value for value in values if not isinstance(value, str | int) or isinstance(value, bool)), "ok")
        if bad != "ok":
            raise DatasetError(f"{self.path}: label column {self.label_column!r} holds {bad!r}; labels are names or "
                               "whole numbers, and every row needs one")
        distinct = set(values)
        if len(distinct) < 2:
            raise DatasetError(f"{self.path}: label column {self.label_column!r} has one class ({distinct.pop()!r}); "
                               "a classifier needs two or more")
        if named is not None:
            ordered = sorted(distinct, key=named.__getitem__)
        elif all(isinstance(value, int) for value in distinct):
            ordered = sorted(distinct)
        else:
            ordered = sorted(distinct, key=str)
        return tuple(str(value) for value in ordered)


def data_files_in(folder: Path) -> list[Path]:
    """The data files `datasets` reads in `folder` (any depth, hidden ones and `__pycache__`-like folders left
    out): a DatasetError naming what it holds where there are none, or where their formats differ (`datasets`
    reads one per folder)."""
    files = sorted(path for path in folder.rglob("*") if path.is_file()
                   and not any(part.startswith((".", "__")) for part in path.relative_to(folder).parts))
    data = [path for path in files if path.suffix.lower() in FILE_BUILDERS]
    if not data:
        held = ", ".join(path.name for path in files[:5]) + (", ..." if len(files) > 5 else "") or "nothing"
        raise DatasetError(f"{folder} holds no data file ({', '.join(FILE_BUILDERS)}), only: {held}; put the data "
                           "files there, or pass one file as --dataset")
    formats: dict[str, Path] = {}
    for path in data:
        builder, options = FILE_BUILDERS[path.suffix.lower()]
        formats.setdefault(json.dumps([builder, options]), path)
    if len(formats) > 1:
        raise DatasetError(f"{folder} mixes data formats ({', '.join(str(path) for path in formats.values())}), and "
                           "`datasets` reads one format per folder; convert the files to one format, or pass one "
                           "file as --dataset")
    return data


def check_data_files(files: list[Path], where: Path) -> None:
    """What `datasets` would fail on with a traceback, checked from the first lines of each file: an empty file, a
    header without rows, a first line that is not UTF-8, files of one folder with other columns; each a
    DatasetError naming the file and the fix."""
    columns_of: dict[Path, list[str]] = {}
    for path in files:
        columns = _columns_and_rows(path)
        if columns is not None:
            columns_of[path] = columns
    first, *others = columns_of.items() or [(where, [])]
    for path, columns in others:
        if sorted(columns) != sorted(first[1]):
            raise DatasetError(f"{path} has the columns {columns}, but {first[0]} has {first[1]}: every file of "
                               f"{where} needs the same columns; rename them, or pass one file as --dataset")


def _columns_and_rows(path: Path) -> list[str] | None:
    """The columns of a data file (None where its first line does not say them: a JSON array), refusing a file
    without data rows."""
    if path.suffix.lower() == ".parquet":
        try:
            metadata = pq.ParquetFile(path).metadata
        except ValueError as error:  # pyarrow's ArrowInvalid
            raise DatasetError(f"{path} cannot be read as parquet ({error}); write it again, or rename it") from None
        if metadata.num_rows == 0:
            raise DatasetError(f"{path} holds no rows; write the data rows into it")
        return list(metadata.schema.to_arrow_schema().names)
    builder, options = FILE_BUILDERS[path.suffix.lower()]
    with path.open(encoding="utf-8", errors="surrogateescape", newline="") as stream:
        lines = list(itertools.islice(_text_lines(stream, path), 2))
    if not lines:
        rows = "a header line and data rows" if builder == "csv" else "its JSON records"
        raise DatasetError(f"{path} is empty; write {rows} into it")
    if builder == "csv":
        header = next(csv.reader(lines[:1], delimiter=options.get("delimiter", ",")))
        if len(lines) < 2:
            raise DatasetError(f"{path} holds a header ({', '.join(header)}) but no data rows; add the rows below it")
        return header
    try:
        record = json.loads(lines[0])
    except json.JSONDecodeError:
        return None
    return list(record) if isinstance(record, dict) else None


def _text_lines(stream: Iterator[str], path: Path) -> Iterator[str]:
    """The non-blank lines of a text data file read with `errors="surrogateescape"`; a line that is not UTF-8 is a
    DatasetError naming the file, the line and `iconv` (as `hf-attn predict` names one)."""
    for number, line in enumerate(stream, 1):
        try:
            check_encodable(line, f"{path} line {number}")
        except ValueError as error:
            raise DatasetError(str(error)) from None
        if line.strip():
            yield line


# The column pandas (behind `datasets`' CSV reader) makes of a CSV's first fields when every row has one more field
# than the header: the texts' tails then pass for the texts, silently.
PANDAS_INDEX_COLUMN = "__index_level_"


def read_data_files(files: list[Path], where: Path, *args: Any, **kwargs: Any) -> datasets.DatasetDict:
    """`datasets.load_dataset(*args, **kwargs)` of the local data `files` (a file or a folder, `where`), checked
    first (`check_data_files`): what it fails to read is one DatasetError naming the file and the line that is not
    UTF-8, or what `datasets` says (its file readers' own log line of the failure is left out: the error says it);
    and a CSV whose rows have more fields than its header (read with shifted columns)."""
    check_data_files(files, where)
    builders = logging.getLogger("datasets.packaged_modules")
    level = builders.level
    builders.setLevel(logging.CRITICAL)
    try:
        loaded = datasets.load_dataset(*args, **kwargs)
    except DatasetGenerationError as error:
        for path in files:
            if path.suffix.lower() != ".parquet":
                with path.open(encoding="utf-8", errors="surrogateescape", newline="") as stream:
                    for _ in _text_lines(stream, path):
                        pass
        cause = error.__cause__ or error
        raise DatasetError(f"{where}: `datasets` cannot read it ({type(cause).__name__}: {' '.join(str(cause).split())}"
                           "); fix the file it names, or pass the files that read") from None
    finally:
        builders.setLevel(level)
    if any(name.startswith(PANDAS_INDEX_COLUMN) for name in itertools.chain(*loaded.column_names.values())):
        raise DatasetError(f"{where}: its rows have more fields than its header, so pandas read the first field of "
                           "each row as an index and shifted the others; quote each text that holds the delimiter "
                           '("a long, slow film",0), or save the data as TSV or JSONL')
    return loaded
