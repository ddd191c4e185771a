"""IMDb (`hf_attn.tasks.imdb`: the seed split, the three source layouts, the sample) and tokenization
(`hf_attn.experiments.data`, which also still exports the IMDb names)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import torch
from datasets import Dataset, DatasetDict
from helpers import SHARED
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from hf_attn.experiments import data
from hf_attn.experiments.data import RandomWindows, tokenize_splits
from hf_attn.tasks import imdb
from hf_attn.tasks.imdb import SAMPLE_PATH, load_imdb, load_labelled, load_sample, seed_split_indices

IMDB_DIR = SHARED / "data" / "imdb"
SPLIT_JSON = SHARED / "week3-sample" / "split_indices.json"

needs_imdb = pytest.mark.skipif(not IMDB_DIR.is_dir(), reason=f"full IMDb copy not found at {IMDB_DIR}")
needs_split_json = pytest.mark.skipif(
    not SPLIT_JSON.is_file(), reason=f"Week 3 split indices not found at {SPLIT_JSON}"
)


@pytest.fixture(scope="module")
def week3_split() -> dict[str, list[int]]:
    """The reference split from the independent Week 3 implementation, keyed like ours."""
    reference = json.loads(SPLIT_JSON.read_text())
    return {"train": reference["train"], "validation": reference["val"], "test": reference["test"]}


@pytest.fixture(scope="module")
def raw_imdb() -> dict[str, list]:
    """train+test of the local parquet copy read with pyarrow alone, independent of hf_attn."""
    columns: dict[str, list] = {"text": [], "label": []}
    for split in ("train", "test"):
        table = pq.read_table(IMDB_DIR / f"{split}-00000-of-00001.parquet", columns=["text", "label"])
        for name in columns:
            columns[name].extend(table.column(name).to_pylist())
    return columns


def test_seed_split_partitions_rows() -> None:
    split = seed_split_indices()
    assert [len(split[name]) for name in ("train", "validation", "test")] == [40_000, 5_000, 5_000]
    assert sorted(split["train"] + split["validation"] + split["test"]) == list(range(50_000))
    small = seed_split_indices(n=10, seed=0)
    assert [len(small[name]) for name in ("train", "validation", "test")] == [8, 1, 1]


@needs_split_json
def test_seed_split_matches_week3(week3_split: dict[str, list[int]]) -> None:
    assert seed_split_indices() == week3_split


@needs_imdb
@needs_split_json
def test_load_imdb_parquet_folder(week3_split: dict[str, list[int]], raw_imdb: dict[str, list]) -> None:
    imdb = load_imdb(IMDB_DIR)
    sizes = {name: len(split) for name, split in imdb.items()}
    assert sizes == {"train": 40_000, "validation": 5_000, "test": 5_000}
    assert imdb["train"].features["label"].names == ["neg", "pos"]
    for name, split in imdb.items():
        assert split["text"] == [raw_imdb["text"][i] for i in week3_split[name]]
        assert split["label"] == [raw_imdb["label"][i] for i in week3_split[name]]


def _write_aclimdb(root: Path, reviews: dict[tuple[str, str], list[str]]) -> None:
    """Write reviews as aclImdb files whose ids are their positions, in shuffled creation order."""
    files = [
        (root / split / name / f"{review_id}_{3 if name == 'neg' else 8}.txt", text)
        for (split, name), texts in reviews.items()
        for review_id, text in enumerate(texts)
    ]
    random.Random(0).shuffle(files)
    for path, text in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text.encode("utf-8"))
    # Files of the real archive that are not labelled reviews must be ignored.
    (root / "train" / "unsup").mkdir()
    (root / "train" / "unsup" / "0_0.txt").write_text("unlabelled review")
    (root / "train" / "labeledBow.feat").write_text("0 0:1")


@needs_imdb
def test_aclimdb_round_trip(tmp_path: Path, raw_imdb: dict[str, list]) -> None:
    # Rows of the parquet copy are ordered by file id, so row k of a split's class has id k. Twelve
    # ids per class put 10 and 11 where a string sort of the file names would misplace them.
    counts = {("train", "neg"): 12, ("train", "pos"): 12, ("test", "neg"): 3, ("test", "pos"): 3}
    reviews, expected = {}, {"text": [], "label": []}
    for (split, name), count in counts.items():
        start = (0 if split == "train" else 25_000) + (0 if name == "neg" else 12_500)
        reviews[split, name] = raw_imdb["text"][start : start + count]
        expected["text"] += reviews[split, name]
        expected["label"] += [0 if name == "neg" else 1] * count
    _write_aclimdb(tmp_path / "aclImdb", reviews)

    labelled = load_labelled(tmp_path / "aclImdb")
    assert labelled["text"] == expected["text"]
    assert labelled["label"] == expected["label"]
    assert labelled.features["label"].names == ["neg", "pos"]
    assert [len(split) for split in load_imdb(str(tmp_path / "aclImdb")).values()] == [24, 3, 3]


def test_bad_sources_fail_clearly(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_imdb"
    with pytest.raises(FileNotFoundError, match="no_such_imdb.*aclImdb"):
        load_imdb(missing)
    with pytest.raises(FileNotFoundError, match="no_such_imdb"):
        load_imdb(str(missing))
    with pytest.raises(ValueError, match="neither known layout.*parquet.*aclImdb"):
        load_imdb(tmp_path)
    (tmp_path / "review.txt").write_text("not a dataset")
    with pytest.raises(ValueError, match="is a file"):
        load_imdb(tmp_path / "review.txt")
    (tmp_path / "partial" / "train" / "neg").mkdir(parents=True)
    with pytest.raises(ValueError, match="lacks .*test/pos"):
        load_imdb(tmp_path / "partial")
    for name in ("neg", "pos"):
        (tmp_path / "badname" / "train" / name).mkdir(parents=True)
        (tmp_path / "badname" / "test" / name).mkdir(parents=True)
    (tmp_path / "badname" / "train" / "neg" / "review.txt").write_text("misnamed")
    with pytest.raises(ValueError, match="review.txt is not named"):
        load_imdb(tmp_path / "badname")


def test_sample_is_balanced_and_split() -> None:
    sample = load_sample()
    assert {name: Counter(split["label"]) for name, split in sample.items()} == {
        "train": {0: 800, 1: 800},
        "validation": {0: 100, 1: 100},
        "test": {0: 100, 1: 100},
    }
    texts = [text for split in sample.values() for text in split["text"]]
    assert len(set(texts)) == 2_000
    assert sample["train"].features["label"].names == ["neg", "pos"]
    assert load_imdb("sample")["test"]["text"] == sample["test"]["text"]


@needs_split_json
def test_sample_comes_from_seed_train(week3_split: dict[str, list[int]]) -> None:
    rows = pq.read_table(SAMPLE_PATH, columns=["imdb_index"]).column("imdb_index").to_pylist()
    assert len(set(rows)) == 2_000
    assert set(rows) <= set(week3_split["train"])


@needs_imdb
@needs_split_json
def test_sample_matches_its_recipe(week3_split: dict[str, list[int]], raw_imdb: dict[str, list]) -> None:
    """The shipped file is the first 1,000 reviews per class in seed-train order, as README says."""
    table = pq.read_table(SAMPLE_PATH).to_pydict()
    expected = [i for i in week3_split["train"] if raw_imdb["label"][i] == 0][:1000]
    expected += [i for i in week3_split["train"] if raw_imdb["label"][i] == 1][:1000]
    assert sorted(table["imdb_index"]) == sorted(expected)
    assert table["text"] == [raw_imdb["text"][i] for i in table["imdb_index"]]
    assert table["label"] == [raw_imdb["label"][i] for i in table["imdb_index"]]


def whitespace_tokenizer() -> PreTrainedTokenizerFast:
    """A word-level tokenizer whose every word is [UNK]: token counts are word counts, an independent measure."""
    backend = Tokenizer(models.WordLevel({"[UNK]": 0, "[PAD]": 1}, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]")


def first_rows(dataset_dict: DatasetDict, n: int) -> DatasetDict:
    return DatasetDict({name: split.select(range(n)) for name, split in dataset_dict.items()})


def test_tokenize_splits_truncates_without_padding() -> None:
    small = first_rows(load_sample(), 20)
    tokenizer = whitespace_tokenizer()

    tokenized = tokenize_splits(small, tokenizer, max_length=16)
    for name, split in tokenized.items():
        assert split.column_names == ["input_ids", "attention_mask", "labels"]
        assert split["labels"] == small[name]["label"]
        lengths = [len(ids) for ids in split["input_ids"]]
        assert max(lengths) == 16
        assert [len(mask) for mask in split["attention_mask"]] == lengths
        assert all(set(mask) == {1} for mask in split["attention_mask"])
    short = tokenize_splits(small, tokenizer, max_length=10_000)["train"]
    assert len({len(ids) for ids in short["input_ids"]}) > 1, "sequences must stay unpadded"


def test_untruncated_splits_keep_whole_reviews() -> None:
    small = first_rows(load_sample(), 20)
    tokenized = tokenize_splits(small, whitespace_tokenizer(), max_length=16, untruncated=("train",))
    words = [len(pre_tokenizers.Whitespace().pre_tokenize_str(text)) for text in small["train"]["text"]]
    assert [len(ids) for ids in tokenized["train"]["input_ids"]] == words
    assert max(words) > 16
    assert max(len(ids) for ids in tokenized["validation"]["input_ids"]) == 16


def test_random_windows_are_uniform_slices_of_each_review() -> None:
    long_review = list(range(100, 120))  # 20 distinct ids: a window's first id gives its start
    short_review = [7, 8, 9]
    split = Dataset.from_dict({"input_ids": [long_review, short_review],
                                        "attention_mask": [[1] * 20, [1] * 3], "labels": [1, 0]})
    windowed = split.with_transform(RandomWindows(5))
    torch.manual_seed(0)
    starts = Counter()
    for _ in range(1600):
        rows = windowed[:]
        window = rows["input_ids"][0]
        start = window[0] - 100
        assert window == long_review[start:start + 5]
        assert rows["attention_mask"] == [[1] * 5, [1, 1, 1]]
        assert rows["input_ids"][1] == short_review  # shorter reviews are left as they are
        assert rows["labels"] == [1, 0]
        starts[start] += 1
    # 16 possible starts (0..15), both ends included, each drawn about 100 times (sd ~10).
    assert sorted(starts) == list(range(16))
    assert all(60 < count < 140 for count in starts.values()), starts
    assert split["input_ids"][0] == long_review  # the split itself is untouched


def test_the_imdb_names_keep_their_old_home() -> None:
    for name in ("IMDB_HUB_ID", "LABEL_NAMES", "SAMPLE_PATH", "load_imdb", "load_labelled", "load_sample",
                 "load_unlabelled", "seed_split_indices", "is_imdb_folder"):
        assert getattr(data, name) is getattr(imdb, name), name
