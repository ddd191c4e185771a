"""Datasets and tasks as a registry: what an experiment trains and scores on.

An experiment's `dataset` is a registry entry and its settings, either a mapping (`{kind: files, path:
reviews.csv, text_column: review, label_column: stars}`) or, for the common cases, a string that names the
source (`sample`, an IMDb copy, a data file, a Hub id). `load_classification` turns it into train /
validation / test splits with `text` (and `text_pair`) and `label` columns and the label names, whatever the
source called them. Sequence tasks (`length`: generated copy, reverse, sort, addition; `scan`: SCAN's length split)
give input/target pairs instead (`DatasetSource.load_pairs`; `length` and `scan` hold the generators, the tokenizer
and exact-match scoring). Adding a dataset is one `DatasetSource` subclass and one line in `DATASETS`.
"""

from .sources import (
    DATASETS,
    ClassificationData,
    DatasetError,
    DatasetSource,
    GeneratedLengthTask,
    ImdbDataset,
    LoadedDataset,
    ScanLengthSplit,
    dataset_source,
    load_classification,
)

__all__ = [
    "DATASETS",
    "ClassificationData",
    "DatasetError",
    "DatasetSource",
    "GeneratedLengthTask",
    "ImdbDataset",
    "LoadedDataset",
    "ScanLengthSplit",
    "dataset_source",
    "load_classification",
]
