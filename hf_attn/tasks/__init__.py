"""Datasets and tasks as a registry: what an experiment trains and scores on.

An experiment's `dataset` is a registry entry and its settings, either a mapping (`{kind: datasets, path:
reviews.csv, text_column: review, label_column: stars}`) or, for the common cases, a string that names the
source (`sample`, an IMDb copy, a data file, a Hub id). A source holds labelled texts (`LabelledTexts`: IMDb's
seed split in `imdb`, anything `datasets` reads in `loaded`, a Week 3 folder's `.pt` splits in `week3`), which
`load_classification` turns into train / validation / test splits with `text` (and `text_pair`) and `label` columns
and the label names, whatever the source called them; or source -> target pairs (`PairsSource`: the dates of
`hf-attn seq2seq` in `dates`), of which a `SequenceTask` is scored by length (`length`: generated copy, reverse,
sort, addition; `scan`: SCAN's length split; they hold the generators, the tokenizer and exact-match scoring).
Adding a dataset is one subclass of either base and one line in `registry.DATASETS`.
"""

from .dates import DateNormalisation
from .imdb import ImdbDataset
from .length import GeneratedLengthTask
from .loaded import LoadedDataset
from .registry import DATASETS, dataset_source, load_classification
from .scan import ScanLengthSplit
from .sources import ClassificationData, DatasetError, DatasetSource, LabelledTexts, PairsSource, SequenceTask
from .week3 import Week3Splits

__all__ = [
    "DATASETS",
    "ClassificationData",
    "DatasetError",
    "DatasetSource",
    "DateNormalisation",
    "GeneratedLengthTask",
    "ImdbDataset",
    "LabelledTexts",
    "LoadedDataset",
    "PairsSource",
    "ScanLengthSplit",
    "SequenceTask",
    "Week3Splits",
    "dataset_source",
    "load_classification",
]
