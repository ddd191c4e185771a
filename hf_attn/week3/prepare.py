"""`hf-attn prepare`: a complete Week 3 folder from IMDb, for users who have none.

Trains the byte-level BPE on the seed split's training part only, tokenizes the three parts the
Week 3 way (128 ids, `[PAD]`-padded, a padding mask), trains the DAN with early stopping on
validation loss, and writes every file of the format (see `../shared/docs/week3-format.md`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import TensorDataset

from ..tasks import load_classification
from ..tokenization_hf_attn import HfAttnTokenizerFast
from .batch_encoding import encode_batch
from .bpe import save_week3, train_week3_tokenizer
from .dan import train_dan
from .tensors import SPLIT_FILES, save_week3_split

logger = logging.getLogger(__name__)


def encode_week3(tokenizer: HfAttnTokenizerFast, texts: list[str], labels: list[int], max_seq: int) -> TensorDataset:
    """The notebook's tensors: input_ids[N, max_seq] long, labels[N] float, padding_mask[N, max_seq] long."""
    encoded = encode_batch(tokenizer, texts, padding="max_length", truncation=True, max_length=max_seq,
                           return_tensors="pt")
    return TensorDataset(encoded["input_ids"].long(), torch.tensor(labels, dtype=torch.float32),
                         encoded["attention_mask"].long())


def prepare_week3(
    output_dir: str | os.PathLike[str],
    dataset: str | dict[str, Any] = "stanfordnlp/imdb",
    vocab_size: int = 500,
    min_freq: int = 5,
    max_seq: int = 128,
    tokenizer_train_size: int | None = None,
    embedding_dim: int = 384,
    seed: int = 42,
) -> dict[str, Any]:
    """Write `output_dir/{datasets,models}/` from a registered dataset of two labels (`hf_attn.tasks`; IMDb's seed
    split by default) and return a report (also saved as `prepare_report.json`).

    `tokenizer_train_size` limits BPE training to the first N training reviews (the sample files used
    5,000); `None` uses all 40,000. Validation and test reviews never reach the tokenizer or the DAN's
    weights (validation only decides when the DAN stops).
    """
    started = time.time()
    output_dir = Path(output_dir)
    data = load_classification(dataset)
    if len(data.label_names) != 2:
        raise ValueError(f"{data.name} has {len(data.label_names)} labels ({', '.join(data.label_names)}); the Week 3 "
                         "files hold one float label and the DAN classifies two: prepare a dataset of two labels")
    splits = data.splits
    bpe_texts = list(splits["train"]["text"][:tokenizer_train_size])
    tokenizer = train_week3_tokenizer(bpe_texts, vocab_size=vocab_size, min_freq=min_freq, max_seq=max_seq)
    save_week3(tokenizer, output_dir)

    tensors = {}
    for name, filename in SPLIT_FILES.items():
        part = splits[name]
        tensors[name] = encode_week3(tokenizer, list(part["text"]), list(part["label"]), max_seq)
        save_week3_split(tensors[name], output_dir / "datasets" / filename)

    result = train_dan(tensors["train"], tensors["validation"], tensors["test"], vocab_size=len(tokenizer),
                       pad_id=tokenizer.pad_token_id, embedding_dim=embedding_dim, seed=seed)
    models = output_dir / "models"
    torch.save(result.model.state_dict(), models / "dan_imdb.pt")
    torch.save({"weight": result.model.embedding.weight.detach().clone()}, models / "imdb_embedding_layer.pt")

    report = {
        "dataset": dataset if isinstance(dataset, dict) else str(dataset),
        "vocab_size": len(tokenizer),
        "num_merges": len(tokenizer) - 257,
        "min_freq": min_freq,
        "max_seq": max_seq,
        "tokenizer_train_reviews": len(bpe_texts),
        "real_tokens_per_review_mean": float(tensors["train"].tensors[2].sum(1).float().mean()),
        "truncated_fraction": float((tensors["train"].tensors[2][:, -1] == 1).float().mean()),
        "dan": {"val_accuracy": result.val_accuracy, "val_loss": result.val_loss,
                "test_accuracy": result.test_accuracy, "test_loss": result.test_loss,
                "epochs_run": result.epochs_run, "best_epoch": result.best_epoch},
        "runtime_s": time.time() - started,
    }
    (output_dir / "prepare_report.json").write_text(json.dumps(report, indent=2))
    return report
