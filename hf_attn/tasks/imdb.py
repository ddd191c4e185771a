"""IMDb as a registered dataset: the Week 3 seed split, its unlabelled reviews and a packaged sample.

Results here are compared with the Week 3 tutorial, so the evaluation split is not IMDb's own
25k/25k one but the tutorial's 80/10/10 re-split of the 50,000 labelled reviews ("the seed
split"): concatenate IMDb ``train`` then ``test`` (each negatives then positives, by numeric file
id), permute with ``torch.randperm(n, generator=torch.Generator().manual_seed(42))`` and cut the
permutation into 40,000 train, 5,000 validation and 5,000 test rows. Every local copy this module
reads (parquet or aclImdb) yields those rows; the Hub copy does not (see :func:`load_labelled`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import warnings
from pathlib import Path
from typing import ClassVar

import datasets
import pyarrow.parquet as pq
import torch

from .sources import ClassificationData, LabelledTexts

IMDB_HUB_ID = "stanfordnlp/imdb"
LABEL_NAMES = ("neg", "pos")
FEATURES = datasets.Features(
    {"text": datasets.Value("string"), "label": datasets.ClassLabel(names=list(LABEL_NAMES))}
)
SAMPLE_PATH = Path(__file__).resolve().parents[1] / "sample" / "imdb_sample.parquet"

ACCEPTED_SOURCES = (
    "a Hugging Face Hub dataset id in the stanfordnlp/imdb layout (default 'stanfordnlp/imdb'); "
    "a local folder in that parquet layout (train-*.parquet and test-*.parquet, at the top or "
    "one folder down, e.g. plain_text/); "
    "the original aclImdb/ folder (train/neg, train/pos, test/neg, test/pos holding <id>_<rating>.txt); "
    "or 'sample' for the small sample shipped with hf_attn"
)

_ACLIMDB_FILE = re.compile(r"(\d+)_(\d+)\.txt")


def _split_sizes(n: int) -> tuple[int, int]:
    """Sizes of the 80% train and 10% validation parts of ``n`` rows; the test part is the rest."""
    return n * 8 // 10, n // 10


def seed_split_indices(n: int = 50_000, seed: int = 42) -> dict[str, list[int]]:
    """Row indices of the seed split's ``train``/``validation``/``test`` parts.

    Indices point into the ``n`` labelled reviews (IMDb train followed by test). Using torch's
    generator, not numpy's, is what makes these the same rows as the Week 3 tutorial's; for
    n = 50,000 they equal ``week3-sample/split_indices.json`` (whose ``val`` is ``validation``).
    """
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    n_train, n_val = _split_sizes(n)
    return {
        "train": perm[:n_train],
        "validation": perm[n_train : n_train + n_val],
        "test": perm[n_train + n_val :],
    }


def load_imdb(source: str | os.PathLike[str] | None = None) -> datasets.DatasetDict:
    """IMDb as the seed split: ``train`` (80%), ``validation`` (10%), ``test`` (10%).

    ``source`` is anything :func:`load_labelled` accepts, or ``"sample"`` for
    :func:`load_sample`. Columns: ``text`` and ``label`` (ClassLabel ``neg``/``pos``).
    """
    if isinstance(source, str) and source == "sample":
        return load_sample()
    labelled = load_labelled(source)
    return datasets.DatasetDict(
        {name: labelled.select(rows) for name, rows in seed_split_indices(len(labelled)).items()}
    )


def load_labelled(source: str | os.PathLike[str] | None = None) -> datasets.Dataset:
    """The labelled reviews in seed-split order: IMDb ``train`` then ``test`` concatenated.

    The seed split indexes these rows, so their order is part of the contract: within each
    split, negatives then positives, each sorted by the numeric file id of ``<id>_<rating>.txt``.
    The local parquet copy and the aclImdb folder give that order. ``source`` is one of
    :data:`ACCEPTED_SOURCES` (except ``"sample"``); ``None`` means the Hub id
    ``stanfordnlp/imdb``.

    Raises FileNotFoundError for a path that does not exist and ValueError for a path in
    neither layout, both naming the path and the accepted layouts.
    """
    source = IMDB_HUB_ID if source is None else source
    path = Path(source)
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"IMDb source {path} is a file, not a folder. Accepted: {ACCEPTED_SOURCES}.")
        if _is_aclimdb(path):
            return _read_aclimdb(path)
        if _has_parquet_splits(path):
            return _read_hf_layout(str(path))
        raise ValueError(
            f"IMDb source {path} is a folder in neither known layout. Accepted: {ACCEPTED_SOURCES}."
        )
    if isinstance(source, os.PathLike) or _looks_like_path(source):
        raise FileNotFoundError(f"IMDb source {path} does not exist. Accepted: {ACCEPTED_SOURCES}.")
    warnings.warn(
        f"Loading IMDb from the Hub id {source!r}: the stanfordnlp/imdb parquet rows are in the "
        "original archive's order, not file-id order (its train[0] is row 127 of the file-id "
        "order), so the seed split then holds different reviews than split_indices.json and the "
        "local copy. Pass a local parquet copy or the aclImdb folder to reproduce the Week 3 split.",
        stacklevel=2,
    )
    return _read_hf_layout(source)


def is_imdb_folder(source: str | os.PathLike[str]) -> bool:
    """Whether `source` is a local folder in one of IMDb's layouts: aclImdb/, or the stanfordnlp/imdb parquet files
    (train and test shards with a `text` column and labels 0 and 1; other data in that layout is not IMDb)."""
    path = Path(source)
    if not path.is_dir():
        return False
    if _is_aclimdb(path):
        return True
    if not _has_parquet_splits(path):
        return False
    shard = pq.ParquetFile(_parquet_shards(path, "train")[0])
    if not {"text", "label"} <= set(shard.schema_arrow.names):
        return False
    return set(shard.read(columns=["label"]).column("label").unique().to_pylist()) <= {0, 1}


def load_unlabelled(source: str | os.PathLike[str] | None = None) -> datasets.Dataset | None:
    """IMDb's 50,000 unlabelled reviews (``unsupervised`` split, ``aclImdb/train/unsup``) as a ``text`` column.

    They are disjoint from the labelled 50,000, so pretraining on them cannot leak the seed split's
    validation or test reviews. Returns None where the source has none (the packaged sample, a
    parquet copy without ``unsupervised-*.parquet``).
    """
    if isinstance(source, str) and source == "sample":
        return None
    source = IMDB_HUB_ID if source is None else source
    path = Path(source)
    if path.is_dir() and _is_aclimdb(path):
        files = sorted((path / "train" / "unsup").glob("*.txt"), key=_file_id)
        texts = [f.read_bytes().decode("utf-8") for f in files]
        return datasets.Dataset.from_dict({"text": texts}) if texts else None
    if path.is_dir():
        files = _parquet_shards(path, "unsupervised")
        if not files:
            return None
        unlabelled = datasets.load_dataset("parquet", data_files={"unsupervised": [str(f) for f in files]})
        return unlabelled["unsupervised"].select_columns(["text"])
    return datasets.load_dataset(str(source), split="unsupervised").select_columns(["text"])


def _looks_like_path(source: str) -> bool:
    """Whether a missing ``source`` was meant as a path rather than a Hub id (``name`` or ``owner/name``)."""
    return os.path.isabs(source) or source.startswith((".", "~")) or source.count("/") > 1 or "\\" in source


def _is_aclimdb(root: Path) -> bool:
    """Whether ``root`` is the aclImdb layout; a partial one is an error, not another layout."""
    class_dirs = [root / split / name for split in ("train", "test") for name in LABEL_NAMES]
    missing = [str(d.relative_to(root)) for d in class_dirs if not d.is_dir()]
    if missing and len(missing) < len(class_dirs):
        raise ValueError(
            f"IMDb source {root} looks like aclImdb but lacks {', '.join(missing)}. "
            f"Accepted: {ACCEPTED_SOURCES}."
        )
    return not missing


def _parquet_shards(root: Path, split: str) -> list[Path]:
    """``root``'s parquet files of one split, at the top or one folder down (e.g. plain_text/), as on the Hub."""
    return sorted(root.glob(f"{split}-*.parquet")) or sorted(root.glob(f"*/{split}-*.parquet"))


def _has_parquet_splits(root: Path) -> bool:
    """Whether ``root`` holds train and test parquet shards the way the Hub repo lays them out."""
    return all(_parquet_shards(root, split) for split in ("train", "test"))


def _file_id(path: Path) -> int:
    """The numeric id of an aclImdb review file, the key that orders the local parquet copy."""
    match = _ACLIMDB_FILE.fullmatch(path.name)
    if match is None:
        raise ValueError(f"{path} is not named <id>_<rating>.txt as aclImdb review files are.")
    return int(match.group(1))


def _read_aclimdb(root: Path) -> datasets.Dataset:
    """Read aclImdb review files into rows ordered like the parquet copy (see :func:`load_labelled`)."""
    texts: list[str] = []
    labels: list[int] = []
    for split in ("train", "test"):
        for label, name in enumerate(LABEL_NAMES):
            files = sorted((root / split / name).glob("*.txt"), key=_file_id)
            texts.extend(f.read_bytes().decode("utf-8") for f in files)
            labels.extend([label] * len(files))
    return datasets.Dataset.from_dict({"text": texts, "label": labels}, features=FEATURES)


def _read_hf_layout(source: str) -> datasets.Dataset:
    """Load train+test of a Hub id or local parquet folder via ``datasets`` and normalise the schema."""
    try:
        labelled = datasets.load_dataset(source, split="train+test")
    except ConnectionError as error:  # offline (HF_HUB_OFFLINE=1) or no network: name the local way
        raise ValueError(
            f"IMDb could not be loaded from the Hub id {source!r} ({type(error).__name__}); pass a local copy with "
            f"--dataset PATH (a parquet folder or aclImdb/) or --dataset sample."
        ) from None
    missing = {"text", "label"} - set(labelled.column_names)
    if missing:
        raise ValueError(
            f"IMDb source {source} lacks column(s) {sorted(missing)}. Accepted: {ACCEPTED_SOURCES}."
        )
    return labelled.select_columns(["text", "label"]).cast(FEATURES)


def load_sample() -> datasets.DatasetDict:
    """The packaged 2,000-review sample, split 1,600/200/200 with both classes equal in each part.

    It exists so that tests, demos and smoke runs work offline without the 50,000-review
    dataset. Its reviews all come from the seed split's training part (see
    ``hf_attn/sample/README.md``), so nothing in it is a validation or test review of the full
    split. The file lists the reviews in seed-permutation order; the n-th review of a class goes to
    train, validation or test by the same 80/10/10 cut as the seed split, applied per class.
    """
    columns = pq.read_table(SAMPLE_PATH, columns=["text", "label"]).to_pydict()
    sample = datasets.Dataset.from_dict(columns, features=FEATURES)
    per_class = {label: columns["label"].count(label) for label in range(len(LABEL_NAMES))}
    seen = dict.fromkeys(per_class, 0)
    rows: dict[str, list[int]] = {"train": [], "validation": [], "test": []}
    for row, label in enumerate(columns["label"]):
        n_train, n_val = _split_sizes(per_class[label])
        rank = seen[label]
        seen[label] += 1
        part = "train" if rank < n_train else "validation" if rank < n_train + n_val else "test"
        rows[part].append(row)
    return datasets.DatasetDict({name: sample.select(idx) for name, idx in rows.items()})



@dataclasses.dataclass(frozen=True)
class ImdbDataset(LabelledTexts):
    """IMDb as the Week 3 seed split (40,000 / 5,000 / 5,000): `source` is anything `load_imdb` reads (the Hub
    id, a parquet copy, an aclImdb/ folder) or `sample`, the 2,000 reviews shipped in the package."""

    kind: ClassVar[str] = "imdb"
    source: str = IMDB_HUB_ID

    def load(self) -> ClassificationData:
        name = "IMDb sample shipped with hf-attn" if self.source == "sample" else "IMDb seed split"
        return ClassificationData(load_imdb(self.source), LABEL_NAMES, IMDB_HUB_ID, name)

    def unlabelled_texts(self) -> datasets.Dataset | None:
        return load_unlabelled(self.source)
