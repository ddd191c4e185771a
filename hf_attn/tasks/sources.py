"""The registry of classification datasets: IMDb's seed split, and anything the `datasets` library loads.

Every source gives the same thing (`ClassificationData`): `train`, `validation` and `test` splits with a
`text` column (and `text_pair` for pairs of texts) and a `label` ClassLabel whose names come from the data,
so training, scoring, cards and `model-index` do not depend on where the data came from. A source that lacks a
validation or test split has one cut from its training split with a seed, so every run of the same
experiment sees the same rows.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import datasets
import pyarrow.parquet as pq
from datasets.exceptions import DatasetGenerationError
from transformers import PreTrainedTokenizerFast

from ..experiments.data import IMDB_HUB_ID, LABEL_NAMES, is_imdb_folder, load_imdb, load_unlabelled
from ..tokenization_hf_attn import check_encodable
from .length import get_length_task, length_buckets, length_splits, task_tokenizer
from .scan import SCAN_LENGTH_BUCKETS, scan_length_split, scan_tokenizer


class DatasetError(ValueError):
    """A dataset that cannot be read as the task needs it; the message names the column and the source."""


@dataclasses.dataclass(frozen=True)
class ClassificationData:
    """Train / validation / test with `text` (and `text_pair`) and a `label` ClassLabel named `label_names`.

    Attributes:
        hub_id: the Hub dataset a card's metadata names (`datasets:` and `model-index`), None for local data.
        name: how a card names the data, e.g. "IMDb seed split" or "reviews.csv".
    """

    splits: datasets.DatasetDict
    label_names: tuple[str, ...]
    hub_id: str | None
    name: str

    def record(self) -> dict[str, Any]:
        """What a run's metrics.json keeps of its data (a card is written from it)."""
        return {"name": self.name, "hub_id": self.hub_id, "label_names": list(self.label_names),
                "rows": {split: len(rows) for split, rows in self.splits.items()}}


@dataclasses.dataclass(frozen=True)
class DatasetSource:
    """A registered dataset: `kind` is its key in `DATASETS`, its dataclass fields are its settings, and `task` what
    it holds: `text-classification` (texts and labels, `load`) or `pairs` (input/target pairs, `load_pairs`)."""

    kind: ClassVar[str]
    task: ClassVar[str] = "text-classification"

    def load(self) -> ClassificationData:
        raise DatasetError(f"the {self.kind} dataset holds {self.task}, not labelled texts: a classifier cannot "
                           "train on it")

    def load_pairs(self) -> datasets.DatasetDict:
        """train / validation / test with `input`, `target` and `length` columns (a sequence task's data)."""
        raise self._holds_no_pairs()

    def unlabelled_texts(self) -> datasets.Dataset | None:
        """Texts beside the labelled ones that pretraining may read (a `text` column), None where there are none."""
        return None

    def _holds_no_pairs(self) -> DatasetError:
        """The error of asking a labelled-text dataset for what only a sequence task's pairs have."""
        return DatasetError(f"the {self.kind} dataset holds labelled texts, not input/target pairs")

    def score_buckets(self) -> list[tuple[int, int]]:
        """The inclusive length buckets a sequence task's exact match is reported in: the training lengths first,
        then those past them, nearest first (the first of those ranks the schemes)."""
        raise self._holds_no_pairs()

    def pairs_tokenizer(self, data: datasets.DatasetDict) -> PreTrainedTokenizerFast:
        """A sequence task's word-level tokenizer for its pairs `data` (`hf_attn.tasks.length.build_tokenizer`)."""
        raise self._holds_no_pairs()


@dataclasses.dataclass(frozen=True)
class ImdbDataset(DatasetSource):
    """IMDb as the Week 3 seed split (40,000 / 5,000 / 5,000): `source` is anything `load_imdb` reads (the Hub
    id, a parquet copy, an aclImdb/ folder) or `sample`, the 2,000 reviews shipped in the package."""

    kind: ClassVar[str] = "imdb"
    source: str = IMDB_HUB_ID

    def load(self) -> ClassificationData:
        name = "IMDb sample shipped with hf-attn" if self.source == "sample" else "IMDb seed split"
        return ClassificationData(load_imdb(self.source), LABEL_NAMES, IMDB_HUB_ID, name)

    def unlabelled_texts(self) -> datasets.Dataset | None:
        return load_unlabelled(self.source)


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
class LoadedDataset(DatasetSource):
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
    validation_size: float = 0.1
    test_size: float = 0.1
    split_seed: int = 42

    def __post_init__(self) -> None:
        for field in ("validation_size", "test_size"):
            value = getattr(self, field)
            if not (isinstance(value, float | int) and not isinstance(value, bool) and 0 < value < 1):
                raise DatasetError(f"dataset `{field}` must be a share of the training rows in (0, 1), got {value!r}")

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


@dataclasses.dataclass(frozen=True)
class GeneratedLengthTask(DatasetSource):
    """A generated length-generalization task (`hf_attn.tasks.length`: copy, reverse, sort, addition, ...): train and
    validation at lengths 1..`max_train_length`, test at L+1..2L and 4L, drawn with `seed` (docs/length-tasks.md)."""

    kind: ClassVar[str] = "length"
    task: ClassVar[str] = "pairs"
    name: str
    max_train_length: int
    n_train: int = 10_000
    n_validation: int = 500
    n_test_per_length: int = 100
    seed: int = 0

    def __post_init__(self) -> None:
        get_length_task(self.name)  # an unknown task is refused now, naming the known ones

    def load_pairs(self) -> datasets.DatasetDict:
        return length_splits(self.name, self.max_train_length, self.n_train, self.n_validation,
                             self.n_test_per_length, self.seed)

    def score_buckets(self) -> list[tuple[int, int]]:
        return length_buckets(self.max_train_length)

    def pairs_tokenizer(self, data: datasets.DatasetDict) -> PreTrainedTokenizerFast:
        """The task's symbols, whatever the drawn pairs hold."""
        return task_tokenizer(self.name)


@dataclasses.dataclass(frozen=True)
class ScanLengthSplit(DatasetSource):
    """SCAN's length split (Lake & Baroni 2018) from the public files in `folder`; `n_validation` training pairs,
    drawn with `seed`, become the validation split (`hf_attn.tasks.scan`)."""

    kind: ClassVar[str] = "scan"
    task: ClassVar[str] = "pairs"
    folder: str
    n_validation: int = 0
    seed: int = 0

    def load_pairs(self) -> datasets.DatasetDict:
        return scan_length_split(self.folder, self.n_validation, self.seed)

    def score_buckets(self) -> list[tuple[int, int]]:
        return list(SCAN_LENGTH_BUCKETS)

    def pairs_tokenizer(self, data: datasets.DatasetDict) -> PreTrainedTokenizerFast:
        """Every word of the commands and actions."""
        return scan_tokenizer(data)


DATASETS: dict[str, type[DatasetSource]] = {
    source.kind: source for source in (ImdbDataset, LoadedDataset, GeneratedLengthTask, ScanLengthSplit)
}


def dataset_source(spec: str | Mapping[str, Any], **columns: str | None) -> DatasetSource:
    """The registered dataset an experiment's `dataset` names.

    A mapping names its `kind` (default `datasets`) and that kind's settings. A string is IMDb for `sample`,
    `imdb`, the IMDb Hub id, an aclImdb/ folder or a parquet copy of IMDb (unless `columns` name columns);
    anything else is read by `datasets` (a data file, a folder, a Hub id). `columns` (`text_column`,
    `text_pair_column`, `label_column`; None: unset) are settings of a `datasets` source.
    """
    columns = {key: value for key, value in columns.items() if value is not None}
    if isinstance(spec, str):
        if not columns and (spec in ("sample", "imdb", IMDB_HUB_ID) or is_imdb_folder(spec)):
            return ImdbDataset(IMDB_HUB_ID if spec == "imdb" else spec)
        spec = {"kind": LoadedDataset.kind, "path": spec}
    if not isinstance(spec, Mapping):
        raise DatasetError(f"`dataset` must name a source or be a mapping with its `kind`, got {spec!r}")
    settings = {**spec, **columns}
    kind = settings.pop("kind", LoadedDataset.kind)
    if kind not in DATASETS:
        raise DatasetError(f"dataset kind {kind!r} is not registered; known kinds: {sorted(DATASETS)}")
    source = DATASETS[kind]
    allowed = [field.name for field in dataclasses.fields(source)]
    unknown = sorted(set(settings) - set(allowed))
    if unknown:
        raise DatasetError(f"dataset kind {kind!r} has no setting(s) {unknown}; its settings: {allowed}")
    try:
        return source(**settings)
    except DatasetError:
        raise
    except (TypeError, ValueError) as error:  # a required setting left out, or a value the source refuses
        raise DatasetError(f"dataset kind {kind!r}: {error}; its settings: {allowed}") from None


def load_classification(spec: str | Mapping[str, Any] | os.PathLike[str], **columns: str | None) -> ClassificationData:
    """The splits and label names of the dataset `spec` names (see `dataset_source`)."""
    return dataset_source(str(spec) if isinstance(spec, os.PathLike) else spec, **columns).load()
