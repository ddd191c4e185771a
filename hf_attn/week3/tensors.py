"""The Week 3 tensor files: pickled dataset splits and the DAN embedding, loaded without running pickles.

The tutorial saves ``datasets/{train,val,test}_ds.pt`` as
``Subset(TensorDataset(input_ids[N, max_seq], labels[N], padding_mask[N, max_seq]), indices)`` and
``models/imdb_embedding_layer.pt`` / ``models/dan_imdb.pt`` as state dicts (format:
``shared/docs/week3-format.md``). A ``.pt`` file is a pickle, and unpickling runs whatever code it
names, so every load here uses ``torch.load(weights_only=True)`` with exactly two extra classes
allowed, ``TensorDataset`` and ``Subset``; anything else is refused before it runs.
"""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import torch
from torch.utils.data import Subset, TensorDataset
from transformers import PreTrainedModel
from transformers.utils import logging

from ..positions import PositionScheme
from .files import CONFIG_FILE, Week3FormatError

logger = logging.get_logger(__name__)

ALLOWED_CLASSES = (TensorDataset, Subset)
"""The only classes a Week 3 pickle may name, besides tensors and containers."""
EMBEDDING_KEYS = ("weight", "embedding.weight")
"""Where the embedding sits: the nn.Embedding state dict, or the whole DAN's."""
SPLIT_FILES = {"train": "train_ds.pt", "validation": "val_ds.pt", "test": "test_ds.pt"}
"""The file of each split in a Week 3 folder's ``datasets/``."""
SPLIT_FEATURES = datasets.Features(
    {
        "input_ids": datasets.Sequence(datasets.Value("int64")),
        "attention_mask": datasets.Sequence(datasets.Value("int64")),
        "labels": datasets.Value("int64"),
    }
)


def load_week3_pickle(path: str | Path) -> Any:
    """``torch.load`` of a Week 3 file allowing only tensors, containers, ``TensorDataset`` and ``Subset``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file. Week 3 keeps splits in datasets/ and weights in models/.")
    try:
        with torch.serialization.safe_globals(list(ALLOWED_CLASSES)):
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        reason = re.search(r"WeightsUnpickler error:\s*([^\n]+)", str(error))
        raise Week3FormatError(
            f"{path}: refused to load: it holds more than tensors, containers, TensorDataset and Subset, or is "
            f"not a torch.save file ({reason.group(1).strip() if reason else error}). Nothing in it was run. If you "
            "made this file, save tensors, a state dict or Subset(TensorDataset(...)) with torch.save."
        ) from error
    except (RuntimeError, EOFError, OSError, KeyError, ValueError) as error:
        raise Week3FormatError(f"{path}: not a readable torch.save file ({error!r}). Re-save it.") from error


def load_week3_split(path: str | Path) -> datasets.Dataset:
    """A split as a ``datasets.Dataset`` with ``input_ids``, ``attention_mask`` and ``labels`` columns.

    Rows come in the ``Subset``'s order. Labels become integer class ids (the notebook stored 0./1.
    floats for its BCE loss; transformers' classification heads take class ids).
    """
    path = Path(path)
    split = load_week3_pickle(path)
    if not (isinstance(split, Subset) and isinstance(split.dataset, TensorDataset) and len(split.dataset.tensors) == 3):
        raise Week3FormatError(
            f"{path}: expected Subset(TensorDataset(input_ids, labels, padding_mask), indices), got "
            f"{type(split).__name__}. Save the split the way the Week 3 notebook does."
        )
    input_ids, labels, padding_mask = split.dataset.tensors
    if input_ids.ndim != 2 or padding_mask.shape != input_ids.shape or labels.shape != input_ids.shape[:1]:
        raise Week3FormatError(
            f"{path}: tensor shapes {tuple(input_ids.shape)}, {tuple(labels.shape)}, {tuple(padding_mask.shape)} "
            "must be input_ids [N, max_seq], labels [N], padding_mask [N, max_seq] in that order."
        )
    if input_ids.is_floating_point() or padding_mask.is_floating_point():
        raise Week3FormatError(f"{path}: input_ids and padding_mask must be integer tensors.")
    if not torch.equal(labels, labels.round()):
        raise Week3FormatError(f"{path}: labels must be class ids (0. or 1. in the notebook), found fractions.")
    other_labels = sorted({int(label) for label in labels.unique().tolist()} - {0, 1})
    if other_labels:
        raise Week3FormatError(
            f"{path}: labels must be 0 (negative) or 1 (positive), found {other_labels[:5]}; relabel the split."
        )
    indices = torch.as_tensor(list(split.indices), dtype=torch.long)
    if len(indices) and (indices.min() < 0 or indices.max() >= len(input_ids)):
        raise Week3FormatError(f"{path}: Subset indices fall outside the {len(input_ids)} rows of its TensorDataset.")
    return datasets.Dataset.from_dict(
        {
            "input_ids": input_ids[indices].tolist(),
            "attention_mask": padding_mask[indices].tolist(),
            "labels": labels[indices].long().tolist(),
        },
        features=SPLIT_FEATURES,
    )


def save_week3_split(split: datasets.Dataset | TensorDataset, path: str | Path) -> Path:
    """Write a split as the notebook's ``Subset(TensorDataset(input_ids, labels, padding_mask), indices)``.

    Takes what ``load_week3_split`` returns, or a ``TensorDataset`` already in the notebook's order.
    Labels are stored as float32 and ids/mask as int64, as the notebook did.
    """
    path = Path(path)
    if isinstance(split, TensorDataset):
        input_ids, labels, padding_mask = split.tensors
    else:
        missing = {"input_ids", "attention_mask", "labels"} - set(split.column_names)
        if missing:
            raise ValueError(f"split lacks column(s) {sorted(missing)}; it needs input_ids, attention_mask, labels.")
        try:
            input_ids = torch.as_tensor(np.array(split["input_ids"], dtype=np.int64))
            padding_mask = torch.as_tensor(np.array(split["attention_mask"], dtype=np.int64))
        except ValueError as error:
            raise ValueError("rows differ in length: pad them to max_seq first (padding='max_length').") from error
        labels = torch.as_tensor(split["labels"])
    if input_ids.ndim != 2 or padding_mask.shape != input_ids.shape or labels.shape != input_ids.shape[:1]:
        raise ValueError(
            f"shapes {tuple(input_ids.shape)}, {tuple(labels.shape)}, {tuple(padding_mask.shape)} must be "
            "input_ids [N, max_seq], labels [N], padding_mask [N, max_seq]."
        )
    tensors = TensorDataset(input_ids.long(), labels.float(), padding_mask.long())
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(Subset(tensors, list(range(len(tensors)))), path)
    return path


def read_embedding(path: str | Path) -> torch.Tensor:
    """The ``[vocab_size, width]`` embedding of ``imdb_embedding_layer.pt`` or of the whole ``dan_imdb.pt``."""
    path = Path(path)
    state = load_week3_pickle(path)
    if not isinstance(state, Mapping):
        raise Week3FormatError(f"{path}: expected a state dict, got {type(state).__name__}.")
    key = next((key for key in EMBEDDING_KEYS if key in state), None)
    if key is None:
        raise Week3FormatError(
            f"{path}: no embedding among keys {sorted(state)}; expected one of {EMBEDDING_KEYS} "
            "(imdb_embedding_layer.pt or dan_imdb.pt from the Week 3 notebook)."
        )
    weight = state[key]
    if not isinstance(weight, torch.Tensor) or weight.ndim != 2 or not weight.is_floating_point():
        raise Week3FormatError(f"{path}: {key} must be a 2-D float tensor [vocab_size, width].")
    return weight


def read_embedding_width(path: str | Path) -> int:
    """The embedding width of a Week 3 weights file (the model's hidden size must match it)."""
    return read_embedding(path).shape[1]


def load_week3_embedding(
    model: PreTrainedModel,
    path: str | Path,
    vocab_config: str | Path | Mapping[str, Any] | None = None,
    *,
    start_position_tables_at_token_scale: bool = False,
) -> PreTrainedModel:
    """Copy a Week 3 embedding into ``model.get_input_embeddings()`` and return the model.

    ``vocab_config`` (a path or the parsed ``vocab_config.json``; by default the one next to
    ``path``, if any) must agree with the embedding rows and the model's ``pad_token_id``, so that
    ids mean the same tokens in the tokenizer, the embedding and the model.

    The vectors the model computes with are the DAN's: a model whose config has
    ``scale_embeddings`` multiplies its table by sqrt(hidden_size) in the forward pass, so the
    table stores the DAN rows divided by that. Stored small, the table trains at the pace of the
    other weights: AdamW moves each weight by about the learning rate per step whatever its size,
    and the DAN's rows are N(0, 1) draws (nn.Embedding's init, which its training moves by ~7%),
    so stored as they are they barely move.

    A fresh model's trained position table (hf-attn's `learned`, BERT's `position_embeddings`) starts at
    `initializer_range`, about 1/50 of the DAN's vectors, and an encoder learns to ignore a table that small
    (results/arena/study/NOTEBOOK.md, "Learned positions barely moved").
    ``start_position_tables_at_token_scale=True`` draws such tables afresh at the standard deviation of the token
    vectors; without it a table that much smaller is kept, with a warning (a pretrained table should be kept).
    """
    path = Path(path)
    weight = read_embedding(path)
    rows, width = weight.shape
    if vocab_config is None and (path.parent / CONFIG_FILE).is_file():
        vocab_config = path.parent / CONFIG_FILE
    if vocab_config is not None:
        config_name = str(vocab_config) if not isinstance(vocab_config, Mapping) else CONFIG_FILE
        if not isinstance(vocab_config, Mapping):
            try:
                vocab_config = json.loads(Path(vocab_config).read_text(encoding="utf-8"))
            except json.JSONDecodeError as error:
                raise Week3FormatError(f"{config_name}: not valid JSON ({error}). Re-export it.") from error
        if vocab_config.get("vocab_size") != rows:
            raise Week3FormatError(
                f"{path}: the embedding has {rows} rows but {config_name} says vocab_size "
                f"{vocab_config.get('vocab_size')}. Use the embedding saved with these tokenizer files."
            )
        if vocab_config.get("pad_id") != model.config.pad_token_id:
            raise Week3FormatError(
                f"{config_name}: pad_id {vocab_config.get('pad_id')} differs from the model's pad_token_id "
                f"{model.config.pad_token_id}. Build the model config from this tokenizer "
                "(pad_token_id=tokenizer.pad_token_id)."
            )
    if (rows, width) != (model.config.vocab_size, model.config.hidden_size):
        raise Week3FormatError(
            f"{path}: the embedding is [{rows}, {width}] but the model expects [vocab_size={model.config.vocab_size}, "
            f"hidden_size={model.config.hidden_size}]. Build the model with vocab_size={rows} and hidden_size={width}."
        )
    embeddings = model.get_input_embeddings()
    if tuple(embeddings.weight.shape) != (rows, width):
        raise Week3FormatError(
            f"{path}: the model's input embedding is {list(embeddings.weight.shape)}, not [{rows}, {width}] as its "
            "config says; resize it with model.resize_token_embeddings first."
        )
    forward_scale = getattr(model.config, "embedding_scale", 1.0)  # HfAttnConfig's; stock models scale by 1
    with torch.no_grad():
        stored = weight.to(device=embeddings.weight.device, dtype=embeddings.weight.dtype) / forward_scale
        embeddings.weight.copy_(stored)
    token_std = float(weight.std())
    for table in position_tables(model):
        table_std = float(table.weight.detach().std())
        if start_position_tables_at_token_scale:
            torch.nn.init.normal_(table.weight, std=token_std)
        elif table_std < token_std / 10:
            logger.warning(
                f"The model's position table has std {table_std:.3g}, the DAN's token "
                f"vectors {token_std:.3g}: an encoder learns to ignore a table that small. To train it from here, "
                "pass start_position_tables_at_token_scale=True to draw it at the tokens' scale."
            )
    return model


def position_tables(model: PreTrainedModel) -> list[torch.nn.Embedding]:
    """The trained position tables added to the token vectors: those of hf-attn's position schemes (`learned`)
    and BERT-style `position_embeddings`, the ELECTRA generator's included."""
    schemes = [module for module in model.modules() if isinstance(module, PositionScheme)]
    learned = [table for scheme in schemes for table in scheme.modules() if isinstance(table, torch.nn.Embedding)]
    stock = [module for name, module in model.named_modules()
             if name.endswith("position_embeddings") and isinstance(module, torch.nn.Embedding)]
    return learned + stock
