"""The registry of datasets: each kind once, and the one reader of an experiment's `dataset` setting."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..settings import read_settings
from .dates import DateNormalisation
from .imdb import IMDB_HUB_ID, ImdbDataset, is_imdb_folder
from .length import GeneratedLengthTask
from .loaded import LoadedDataset
from .scan import ScanLengthSplit
from .sources import ClassificationData, DatasetError, DatasetSource
from .week3 import Week3Splits

# Every dataset an experiment can name, by its `kind`: a new one is a class and a line here.
DATASETS: dict[str, type[DatasetSource]] = {source.kind: source for source in (
    ImdbDataset,
    LoadedDataset,
    Week3Splits,
    GeneratedLengthTask,
    ScanLengthSplit,
    DateNormalisation,
)}


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
    try:
        return read_settings(source, settings, f"dataset kind {kind!r}")
    except DatasetError:
        raise
    except ValueError as error:  # a setting it does not have, a required one left out, or a value it refuses
        raise DatasetError(str(error)) from None


def load_classification(spec: str | Mapping[str, Any] | os.PathLike[str], **columns: str | None) -> ClassificationData:
    """The splits and label names of the dataset `spec` names (see `dataset_source`)."""
    return dataset_source(str(spec) if isinstance(spec, os.PathLike) else spec, **columns).load()
