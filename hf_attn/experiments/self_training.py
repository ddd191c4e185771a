"""Self-training on a dataset's unlabelled texts (the experiment's `self_training` section): a teacher classifier,
trained on the training split only, labels the unlabelled texts; those it labels with a probability of at least
`threshold` join the training split, and the student trains on both as on the training split alone (Yarowsky 1995;
Xie et al. 2020's noisy student without the noise schedule: the student reads random windows, the teacher whole
texts).

The teacher's labels cost one pass of it over every unlabelled text (IMDb's 50,000 reviews, read whole), so they are
cached: `HF_ATTN_CACHE` (default `~/.cache/hf_attn`)`/pseudo-labels/<key>.jsonl`, one line a text, appended a batch
at a time, so that a stage stopped while the teacher reads continues where it stopped. The key is a SHA-256 of the
teacher's weights and config and of the texts, so another teacher or other texts never read a stale file.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasets
import torch

from ..runtime.precision import autocast
from ..saved import load_saved_classifier
from .config import SelfTrainingSettings

# The teacher reads texts sorted by length, at most BATCH_SIZE at once and at most BATCH_CHARACTERS in all, so that a
# batch pads little and a batch of the longest reviews (read whole) fits in memory as a batch of short ones does.
BATCH_SIZE = 32
BATCH_CHARACTERS = 32_000


def cache_dir() -> Path:
    """Where teachers' labels are kept (`HF_ATTN_CACHE`, default `~/.cache/hf_attn`)."""
    return Path(os.environ.get("HF_ATTN_CACHE", Path.home() / ".cache" / "hf_attn")) / "pseudo-labels"


def labels_key(teacher: str | os.PathLike[str], texts: Sequence[str]) -> str:
    """A SHA-256 of the teacher's saved files (weights and config) and of the texts, in order."""
    digest = hashlib.sha256()
    for name in ("config.json", "model.safetensors"):
        path = Path(teacher) / name
        if path.is_file():
            with path.open("rb") as file:
                while chunk := file.read(1 << 20):
                    digest.update(chunk)
    for text in texts:
        digest.update(hashlib.sha256(text.encode()).digest())
    return digest.hexdigest()[:32]


@torch.inference_mode()
def teacher_labels(teacher: str | os.PathLike[str], texts: Sequence[str], label_names: Sequence[str],
                   precision: str = "fp32", cache: Path | None = None) -> list[tuple[int, float]]:
    """The teacher's label (an index into `label_names`) and its probability for each text, as it reads texts when
    saved (its reading policy: whole reviews as windows for a whole-review classifier), computed in `precision`
    (`bf16` or `fp32`); read from the cache where an earlier run (or stage) wrote them, the rest computed and
    appended there."""
    cache = cache or cache_dir() / f"{labels_key(teacher, texts)}.jsonl"
    done = {}
    written = cache.read_text() if cache.is_file() else ""
    for line in written.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # the last line of a process killed while it wrote: read again
            continue
        done[record["index"]] = (record["label"], record["probability"])
    order = sorted((index for index in range(len(texts)) if index not in done), key=lambda index: len(texts[index]))
    if order:
        model, tokenizer = load_saved_classifier(teacher)
        model.eval()
        teacher_names = [model.config.id2label[index] for index in range(model.config.num_labels)]
        if teacher_names != list(label_names):
            raise ValueError(f"self_training.teacher {teacher} labels {teacher_names}, the dataset "
                             f"{list(label_names)}: use a teacher trained on this dataset.")
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("a") as file:
            if written and not written.endswith("\n"):
                file.write("\n")  # after a cut line, the next record starts a line of its own
            for batch in batches_of(order, [len(text) for text in texts]):
                # whole texts: the model applies its own reading policy (read length, windows)
                inputs = tokenizer([texts[index] for index in batch], padding=True, return_tensors="pt")
                with autocast(precision, model.device):
                    probabilities = model(**inputs).logits.float().softmax(-1)
                top, labels = probabilities.max(-1)
                for index, label, probability in zip(batch, labels.tolist(), top.tolist()):
                    done[index] = (label, probability)
                    file.write(json.dumps({"index": index, "label": label, "probability": probability}) + "\n")
                file.flush()
    return [done[index] for index in range(len(texts))]


def batches_of(order: Sequence[int], sizes: Sequence[int]) -> list[list[int]]:
    """`order` cut into consecutive batches of at most `BATCH_SIZE` indices whose `sizes` add up to at most
    `BATCH_CHARACTERS` (a longer text alone)."""
    batches: list[list[int]] = []
    total = 0
    for index in order:
        if not batches or len(batches[-1]) == BATCH_SIZE or total + sizes[index] > BATCH_CHARACTERS:
            batches.append([])
            total = 0
        batches[-1].append(index)
        total += sizes[index]
    return batches


def pseudo_labelled(settings: SelfTrainingSettings, texts: datasets.Dataset, train: datasets.Dataset,
                    precision: str = "fp32") -> tuple[datasets.Dataset, dict[str, Any]]:
    """The unlabelled `texts` (a `text` column) the teacher labels with a probability of at least the threshold, as
    rows of the training split's features, and what the run records of them (teacher, texts read, kept, and the
    share of each label among those kept)."""
    label_names = train.features["label"].names
    extra = [name for name in train.column_names if name not in ("text", "label")]
    if extra:
        raise ValueError(f"self_training reads single texts; this dataset's training rows also hold {extra}.")
    labels = teacher_labels(settings.teacher, texts["text"], label_names, precision)
    kept = [index for index, (_, probability) in enumerate(labels) if probability >= settings.threshold]
    rows = {"text": [texts[index]["text"] for index in kept], "label": [labels[index][0] for index in kept]}
    pseudo = datasets.Dataset.from_dict(rows, features=datasets.Features(
        {"text": train.features["text"], "label": train.features["label"]}))
    record = {"teacher": str(settings.teacher), "threshold": settings.threshold, "texts": len(labels),
              "kept": len(kept), "label_shares": {name: rows["label"].count(number) / max(len(kept), 1)
                                                  for number, name in enumerate(label_names)}}
    return pseudo, record
