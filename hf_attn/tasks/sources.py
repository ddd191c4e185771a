"""What a registered dataset is: labelled texts a classifier trains on, or source -> target pairs.

Every labelled-text source gives the same thing (`ClassificationData`): `train`, `validation` and `test` splits with
a `text` column (and `text_pair` for pairs of texts) and a `label` ClassLabel whose names come from the data, so
training, scoring, cards and `model-index` do not depend on where the data came from. Every pairs source gives
train / validation / test with `input` and `target` columns. A sequence task is a pairs source that also says
how its answers are scored by length and which word-level tokenizer reads them (`hf-attn train` trains a decoder
on it).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, ClassVar

import datasets
from transformers import PreTrainedTokenizerFast

from ..settings import Settings


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
class DatasetSource(Settings, abc.ABC):
    """A registered dataset: `kind` is its key in `DATASETS`, its dataclass fields are its settings (checked as every
    `Settings` are: types, rules, `check()`), and `task` what it holds."""

    kind: ClassVar[str]
    task: ClassVar[str]


@dataclasses.dataclass(frozen=True)
class LabelledTexts(DatasetSource):
    """A dataset of texts and their labels, which a classifier trains on."""

    task: ClassVar[str] = "text-classification"

    @abc.abstractmethod
    def load(self) -> ClassificationData:
        """The train / validation / test splits and their label names."""

    def unlabelled_texts(self) -> datasets.Dataset | None:
        """Texts beside the labelled ones that pretraining may read (a `text` column), None where there are none."""
        return None


@dataclasses.dataclass(frozen=True)
class PairsSource(DatasetSource):
    """A dataset of source -> target pairs."""

    task: ClassVar[str] = "pairs"

    @abc.abstractmethod
    def load_pairs(self) -> datasets.DatasetDict:
        """train / validation / test with `input` and `target` columns."""

    def load(self) -> ClassificationData:
        """Refused: a classifier's command reached pairs, and the error says so rather than a missing method."""
        raise DatasetError(f"the {self.kind} dataset holds {self.task}, not labelled texts: a classifier cannot "
                           "train on it")


@dataclasses.dataclass(frozen=True)
class SequenceTask(PairsSource):
    """Pairs a decoder learns one token at a time, scored by exact match per length bucket (`hf-attn train`):
    `load_pairs` adds a `length` column, the measure the buckets hold."""

    @abc.abstractmethod
    def score_buckets(self) -> list[tuple[int, int]]:
        """The inclusive length buckets exact match is reported in: the training lengths first, then those past
        them, nearest first (the first of those ranks the schemes)."""

    @abc.abstractmethod
    def pairs_tokenizer(self, data: datasets.DatasetDict) -> PreTrainedTokenizerFast:
        """The word-level tokenizer of the pairs `data` (`hf_attn.tasks.length.build_tokenizer`)."""

    def coupled_position_ids(self, input: str, answer_length: int | None = None) -> list[int]:
        """The position ids of `[BOS] input [SEP]` and of the answer's positions under the task's position coupling
        (`position_id_rule: coupled`; `hf_attn.tasks.length.coupled_position_ids`): the planned ones, or with
        `answer_length` those of `target [EOS]`."""
        raise ValueError(f"the {self.kind} task has no position coupling; use another position_id_rule.")
