"""Classification data made ready for `Trainer`: tokenized splits, row limits and random training windows.

Where the data comes from is `hf_attn.tasks`' concern (IMDb's seed split is `hf_attn.tasks.imdb`); the IMDb names
are re-exported here because `hf_attn.experiments.data` was their public home.
"""

from __future__ import annotations

from typing import Any

import datasets
import torch

from ..tasks.imdb import (
    ACCEPTED_SOURCES,
    FEATURES,
    IMDB_HUB_ID,
    LABEL_NAMES,
    SAMPLE_PATH,
    is_imdb_folder,
    load_imdb,
    load_labelled,
    load_sample,
    load_unlabelled,
    seed_split_indices,
)
from ..tokenization_hf_attn import HfAttnTokenizerFast
from ..week3.batch_encoding import encode_batch

__all__ = [
    "ACCEPTED_SOURCES",
    "FEATURES",
    "IMDB_HUB_ID",
    "LABEL_NAMES",
    "SAMPLE_PATH",
    "RandomWindows",
    "is_imdb_folder",
    "limit_rows",
    "load_imdb",
    "load_labelled",
    "load_sample",
    "load_unlabelled",
    "seed_split_indices",
    "tokenize_splits",
]


def limit_rows(split: datasets.Dataset, limit: int | None) -> datasets.Dataset:
    """The first ``limit`` rows of a dataset (all of them when ``limit`` is None or larger)."""
    return split if limit is None else split.select(range(min(limit, len(split))))


def tokenize_splits(
    dataset_dict: datasets.DatasetDict,
    tokenizer: Any,
    max_length: int | None,
    untruncated: tuple[str, ...] = (),
) -> datasets.DatasetDict:
    """Tokenize every split (``text``, and ``text_pair`` where the dataset has pairs) into ``input_ids``,
    ``attention_mask`` and, where it has a ``label`` column, ``labels``.

    Sequences are truncated to ``max_length`` tokens (special tokens the tokenizer adds count
    towards it; ``None`` keeps every token) and left unpadded, so a collator can pad each batch only
    to its longest member.
    Splits named in ``untruncated`` keep whole reviews (for :class:`RandomWindows`, which cuts a
    window of each review as it is read). All other columns are dropped, leaving exactly what a model's
    ``forward`` takes. ``tokenizer`` is any Hugging Face tokenizer (Rust-backed or Python).
    """
    if max_length is not None and max_length < 1:
        raise ValueError(f"max_length must be positive or None, got {max_length}")

    def encoder(truncate: bool) -> Any:
        def encode(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
            texts = (batch["text"], batch["text_pair"]) if "text_pair" in batch else (batch["text"],)
            if isinstance(tokenizer, HfAttnTokenizerFast) and len(texts) == 1:  # the same ids, word by word
                encoded = encode_batch(tokenizer, batch["text"], truncation=truncate, max_length=max_length)
            else:
                encoded = tokenizer(*texts, truncation=truncate, max_length=max_length if truncate else None,
                                    return_attention_mask=True, verbose=truncate)
            labels = {"labels": batch["label"]} if "label" in batch else {}  # unlabelled texts have none
            return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"], **labels}

        return encode

    return datasets.DatasetDict(
        {
            name: split.map(
                encoder(name not in untruncated and max_length is not None), batched=True,
                remove_columns=split.column_names,
                desc=f"Tokenizing {name}",
            )
            for name, split in dataset_dict.items()
        }
    )


class RandomWindows:
    """The training split's transform (`Dataset.with_transform`): each time a review longer than
    ``window_length`` tokens is read, it is cut to a random window of it.

    Training on a fresh window of each whole review, instead of always its first ``window_length``
    tokens, shows the model text it would otherwise never see (most IMDb reviews are longer than the
    reference's 128 tokens), so a second epoch is not a repeat of the first. Only the training split
    gets it: validation and test keep what they were tokenized to (the first ``read_length`` tokens),
    which a collator, shared by every split `Trainer` batches, could not tell apart. Window starts
    are uniform over every offset that fits and come from torch's global generator, which `Trainer`
    seeds and restores with each checkpoint, so a resumed run draws the same windows.
    """

    def __init__(self, window_length: int) -> None:
        if window_length < 1:
            raise ValueError(f"window_length must be positive, got {window_length}")
        self.window_length = window_length

    def __call__(self, batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for row, ids in enumerate(batch["input_ids"]):
            excess = len(ids) - self.window_length
            if excess > 0:
                start = int(torch.randint(excess + 1, ()))
                window = slice(start, start + self.window_length)
                batch["input_ids"][row] = ids[window]
                batch["attention_mask"][row] = batch["attention_mask"][row][window]
        return batch
