"""The dataset registry (`hf_attn.tasks`): any classification data `datasets` reads, IMDb as before, a Week 3
folder's splits, the dates.

References: the files are written here and read back with the standard library's `csv` / pandas, not with the
code under test; metrics against scikit-learn; the Week 3 sample splits against the IMDb parquet files and the
split's own indices (`shared/week3-sample/split_indices.json`), read with pyarrow and `re`.
"""

from __future__ import annotations

import csv
import datetime
import json
import re
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from helpers import SHARED, SMOKE, SMOKE_TINY_MODEL, require
from sklearn.metrics import f1_score
from transformers import EvalPrediction

from hf_attn import cli
from hf_attn.experiments.classification import compute_metrics
from hf_attn.experiments.config import ExperimentConfigError, load_experiment
from hf_attn.tasks import (
    DATASETS,
    DatasetError,
    DateNormalisation,
    ImdbDataset,
    LoadedDataset,
    Week3Splits,
    dataset_source,
    load_classification,
)

WORDS = {"1": "awful dull", "2": "weak slow", "3": "fine okay", "4": "good fun", "5": "great moving"}


def write_reviews(path: Path, rows: int = 120, empty_row: int | None = None) -> list[dict[str, object]]:
    """A CSV of `review` texts and `stars` (1-5, as numbers), the star's words in each review."""
    records = [{"review": f"{WORDS[str(1 + i % 5)]} film {i}", "stars": 1 + i % 5} for i in range(rows)]
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=["review", "stars"])
        writer.writeheader()
        for row, record in enumerate(records):
            writer.writerow({**record, "review": "" if row == empty_row else record["review"]})
    return records


def write_three_labels(folder: Path) -> dict[str, pd.DataFrame]:
    """A parquet folder in the Hub layout (train and test shards) with three string labels."""
    folder.mkdir(parents=True)
    frames = {}
    for split, rows in (("train", 90), ("test", 30)):
        frames[split] = pd.DataFrame({"text": [f"{split} text {i}" for i in range(rows)],
                                      "label": [("red", "green", "blue")[i % 3] for i in range(rows)]})
        frames[split].to_parquet(folder / f"{split}-00000-of-00001.parquet")
    return frames


def test_a_csv_with_its_own_column_names_is_split_with_a_seed_and_labelled_in_numeric_order(tmp_path: Path) -> None:
    records = write_reviews(tmp_path / "reviews.csv")
    data = load_classification(str(tmp_path / "reviews.csv"), text_column="review", label_column="stars")
    assert data.label_names == ("1", "2", "3", "4", "5") and data.hub_id is None and data.name == "reviews.csv"
    rows = {split: list(zip(part["text"], part["label"], strict=True)) for split, part in data.splits.items()}
    assert [len(part) for part in rows.values()] == [96, 12, 12]
    texts = [text for part in rows.values() for text, _ in part]
    assert sorted(texts) == sorted(record["review"] for record in records)  # every row once: disjoint and whole
    stars_of = {record["review"]: str(record["stars"]) for record in records}
    assert all(data.label_names[label] == stars_of[text] for part in rows.values() for text, label in part)
    again = load_classification(str(tmp_path / "reviews.csv"), text_column="review", label_column="stars")
    assert again.splits["test"]["text"] == data.splits["test"]["text"]
    other_seed = dataset_source({"path": str(tmp_path / "reviews.csv"), "text_column": "review",
                                 "label_column": "stars", "split_seed": 7}).load()
    assert other_seed.splits["test"]["text"] != data.splits["test"]["text"]


def test_a_parquet_folder_with_three_labels_keeps_its_test_split_and_names_its_labels(tmp_path: Path) -> None:
    frames = write_three_labels(tmp_path / "three")
    source = dataset_source(str(tmp_path / "three"))
    assert isinstance(source, LoadedDataset)  # the Hub layout, but not IMDb's labels
    data = source.load()
    assert data.label_names == ("blue", "green", "red")
    assert data.splits["test"]["text"] == frames["test"]["text"].tolist()
    names = [data.label_names[label] for label in data.splits["test"]["label"]]
    assert names == frames["test"]["label"].tolist()
    assert len(data.splits["train"]) + len(data.splits["validation"]) == 90 and len(data.splits["validation"]) == 9


def test_imdb_sources_stay_the_seed_split() -> None:
    for spec in ("sample", "imdb", "stanfordnlp/imdb", {"kind": "imdb", "source": "sample"}):
        assert isinstance(dataset_source(spec), ImdbDataset), spec
    data = load_classification("sample")
    assert data.label_names == ("neg", "pos") and data.hub_id == "stanfordnlp/imdb"
    assert [len(part) for part in data.splits.values()] == [1600, 200, 200]
    assert set(DATASETS) >= {"imdb", "datasets"}


@pytest.mark.parametrize(("make", "columns", "message"), [
    ("reviews", {}, "the train split has no column 'text' (the text column); its columns are ['review', 'stars']"),
    ("reviews", {"text_column": "review", "label_column": "rating"}, "no column 'rating' (the label column)"),
    ("empty", {"text_column": "review", "label_column": "stars"}, "text column 'review' is empty in data row 4"),
    ("numbers", {"text_column": "stars", "label_column": "stars"}, "text column 'stars' is a int (1), not a string"),
    ("one-class", {"text_column": "review", "label_column": "stars"}, "label column 'stars' has one class (3)"),
])
def test_data_that_cannot_train_a_classifier_is_one_line_naming_the_column_and_the_file(
    make: str, columns: dict[str, str], message: str, tmp_path: Path
) -> None:
    path = tmp_path / f"{make}.csv"
    write_reviews(path, empty_row=3 if make == "empty" else None)
    if make == "one-class":
        path.write_text("review,stars\n" + "".join(f"fine {i},3\n" for i in range(20)))
    with pytest.raises(DatasetError) as error:
        load_classification(str(path), **columns)
    assert message in str(error.value) and str(path) in str(error.value) and "\n" not in str(error.value)



def write_bad_data(kind: str, folder: Path) -> Path:
    """A data file or folder `datasets` fails to read (it ended in a traceback): written here byte by byte."""
    header = "review,stars\n"
    rows = "".join(f"{WORDS[str(1 + i % 5)]} film {i},{1 + i % 5}\n" for i in range(30))
    path = folder / ("data" if kind in ("other-columns", "mixed-formats") else f"{kind}.csv")
    if kind == "empty":
        path.write_text("")
    elif kind == "header-only":
        path.write_text(header + "\n")
    elif kind == "unquoted-commas":  # every row one field more than the header: pandas reads the first as an index
        path.write_text(header + "".join(f"{WORDS[str(1 + i % 5)]}, a film {i},{1 + i % 5}\n" for i in range(30)))
    elif kind in ("latin-1", "latin-1-late"):
        latin = "caf\xe9 film,4\n".encode("latin-1")
        path.write_bytes((header + rows).encode() + latin if kind == "latin-1-late" else header.encode() + latin)
    else:
        path.mkdir()
        (path / "train.csv").write_text(header + rows)
        if kind == "other-columns":
            (path / "test.csv").write_text("sentence,label\n" + rows)
        else:
            (path / "test.jsonl").write_text(json.dumps({"review": "good fun film", "stars": 4}) + "\n")
    return path


@pytest.mark.parametrize(("kind", "message"), [
    ("empty", "{path} is empty; write a header line and data rows into it"),
    ("header-only", "{path} holds a header (review, stars) but no data rows"),
    ("latin-1", "{path} line 2 is not UTF-8: the byte 0xe9 after 'caf'; convert it to UTF-8 (e.g. `iconv"),
    ("latin-1-late", "{path} line 32 is not UTF-8: the byte 0xe9 after 'caf'"),
    ("other-columns", "{path}/train.csv has the columns ['review', 'stars'], but {path}/test.csv has ['sentence', "
     "'label']: every file of {path} needs the same columns"),
    ("mixed-formats", "{path} mixes data formats ({path}/test.jsonl, {path}/train.csv), and `datasets` reads one "
     "format per folder"),
    ("unquoted-commas", "{path}: its rows have more fields than its header, so pandas read the first field of each "
     "row as an index and shifted the others; quote each text"),
])
def test_a_data_file_datasets_cannot_read_is_one_line_naming_the_file_and_the_fix(
    kind: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hf-attn train --dataset` on files `datasets` raises on (pandas' EmptyDataError, UnicodeDecodeError, a cast
    error per file, "corresponds to no data") ends in one line, exit status 2."""
    path = write_bad_data(kind, tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--config", str(SMOKE), "--dataset", str(path), "--text-column", "review",
                  "--label-column", "stars", "--output-dir", str(tmp_path / "run")])
    error = capsys.readouterr().err
    last_line = error.strip().splitlines()[-1]  # after `datasets`' progress bar, where it began to read
    assert exit_info.value.code == 2 and last_line.startswith(f"hf-attn train: error: {message.format(path=path)}")
    assert "Traceback" not in error and "Failed to read" not in error


@pytest.mark.parametrize(("spec", "message"), [
    ({"kind": "nope"}, "dataset kind 'nope' is not registered; known kinds"),
    ({"path": "x.csv", "colour": "red"}, "dataset kind 'datasets': unknown key `colour` for LoadedDataset"),
    ({"kind": "datasets"}, "dataset kind 'datasets': `path` must be given"),
    ({"path": "x.csv", "test_size": 1.5}, "`test_size` must be a share of the training rows in (0, 1)"),
])
def test_a_dataset_mapping_that_names_no_known_kind_or_setting_is_refused_before_any_work(
    spec: dict[str, object], message: str
) -> None:
    with pytest.raises(DatasetError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        dataset_source(spec)
    with pytest.raises(ExperimentConfigError, match="dataset"):
        load_experiment(SMOKE, [f"dataset={json.dumps(spec)}"])


def test_a_hub_id_offline_is_one_line_that_names_the_local_alternatives(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", True, raising=False)
    with pytest.raises(DatasetError, match="the Hub dataset 'someone/reviews' could not be loaded .*a local copy"):
        load_classification("someone/reviews")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_classification("./missing/reviews.csv")


@pytest.mark.parametrize("classes", [2, 3, 5])
def test_metrics_are_accuracy_and_f1_of_the_positive_class_or_macro_f1_beyond_two(classes: int) -> None:
    generator = np.random.default_rng(classes)
    logits = generator.normal(size=(200, classes))
    labels = generator.integers(0, classes, size=200)
    metrics = compute_metrics(EvalPrediction(predictions=logits, label_ids=labels))
    predicted = logits.argmax(axis=-1)
    assert metrics["accuracy"] == pytest.approx(np.mean(predicted == labels))
    if classes == 2:
        assert metrics["f1"] == pytest.approx(f1_score(labels, predicted))
    else:
        assert metrics["macro_f1"] == pytest.approx(f1_score(labels, predicted, average="macro"))


def test_train_on_a_csv_in_one_command_then_evaluate_and_card_name_its_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's command: a CSV whose columns are `review` and `stars`. The saved classifier's labels are the
    stars, `hf-attn evaluate` on the same file scores test as the run did (a second code path), and the card names
    the file and macro-F1, not IMDb."""
    write_reviews(tmp_path / "reviews.csv", rows=200)
    run = tmp_path / "run"
    cli.main(["train", "--config", str(SMOKE), "--dataset", str(tmp_path / "reviews.csv"), "--text-column", "review",
              "--label-column", "stars", "--output-dir", str(run), *SMOKE_TINY_MODEL, "precision=fp32",
              "training.num_train_epochs=1"])
    capsys.readouterr()
    metrics = json.loads((run / "metrics.json").read_text())
    assert json.loads((run / "config.json").read_text())["id2label"] == {str(i): str(i + 1) for i in range(5)}
    assert metrics["dataset"]["label_names"] == ["1", "2", "3", "4", "5"] and "test_macro_f1" in metrics
    cli.main(["evaluate", "--model", str(run), "--dataset", str(tmp_path / "reviews.csv"), "--text-column", "review",
              "--label-column", "stars", "--precision", "fp32"])
    scored = json.loads(capsys.readouterr().out)
    assert scored["test_accuracy"] == pytest.approx(metrics["test_accuracy"], abs=1e-9)
    assert scored["test_macro_f1"] == pytest.approx(metrics["test_macro_f1"], abs=1e-9)
    cli.main(["card", "--model", str(run), "--repo-id", "someone/stars", "--output", str(tmp_path / "card.md")])
    card = (tmp_path / "card.md").read_text()
    assert "reviews.csv" in card and "macro_f1" in card and "IMDb" not in card


def test_generated_length_tasks_and_scan_are_registered_sequence_tasks_a_classifier_refuses() -> None:
    source = dataset_source({"kind": "length", "name": "reverse", "max_train_length": 4, "n_train": 20,
                             "n_validation": 5, "n_test_per_length": 3, "seed": 1})
    pairs = source.load_pairs()
    assert all(row["target"] == " ".join(reversed(row["input"].split())) for row in pairs["test"])
    assert sorted(set(pairs["test"]["length"])) == [5, 6, 7, 8, 16]
    with pytest.raises(DatasetError, match="holds pairs, not labelled texts: a classifier cannot train on it"):
        source.load()
    with pytest.raises(ExperimentConfigError, match="dataset kind .length.: unknown length task .unknown."):
        load_experiment(SMOKE, ['dataset={"kind": "length", "name": "unknown", "max_train_length": 4}'])
    assert DATASETS["scan"].task == "pairs"


def test_prepare_reads_any_two_label_dataset_and_refuses_more_labels_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Week 3 files hold one float label and the DAN classifies two: a five-label CSV is refused by name."""
    write_reviews(tmp_path / "reviews.csv")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["prepare", "--dataset", str(tmp_path / "reviews.csv"), "--text-column", "review", "--label-column",
                  "stars", "--output", str(tmp_path / "week3")])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert exit_info.value.code == 2 and "reviews.csv has 5 labels (1, 2, 3, 4, 5)" in error
    assert not (tmp_path / "week3" / "datasets").exists()


def test_a_week3_folders_splits_are_the_seed_splits_first_reviews_as_its_ids_spell_them(sample_dir: Path) -> None:
    """The sample's `.pt` splits hold the first 200 reviews of each seed-split part: the source gives their labels,
    and texts whose characters (whitespace aside) begin the reviews' own; the ids lose only word boundaries."""
    imdb = require(SHARED / "data" / "imdb")
    reviews = []
    for part in ("train", "test"):  # the seed split indexes IMDb train followed by test
        table = pq.read_table(imdb / f"{part}-00000-of-00001.parquet", columns=["text", "label"]).to_pydict()
        reviews += list(zip(table["text"], table["label"], strict=True))
    indices = json.loads((sample_dir / "split_indices.json").read_text())
    source = dataset_source({"kind": "week3", "folder": str(sample_dir)})
    assert isinstance(source, Week3Splits)
    data = source.load()
    assert data.label_names == ("neg", "pos") and data.hub_id is None
    for split, key in (("train", "train"), ("validation", "val"), ("test", "test")):
        expected = [reviews[index] for index in indices[key][:200]]
        rows = data.splits[split]
        assert rows["label"] == [label for _, label in expected]
        for text, (review, _) in zip(rows["text"], expected, strict=True):
            spelled = "".join(text.split())
            assert len(spelled) > 100 and "".join(re.findall(r"\w+|[^\w\s]", review)).startswith(spelled)


def test_the_dates_are_registered_pairs_a_classifier_refuses() -> None:
    source = dataset_source({"kind": "dates", "n_train": 30, "n_validation": 5, "n_test": 5, "seed": 2})
    assert isinstance(source, DateNormalisation) and source.task == "pairs"
    pairs = source.load_pairs()
    assert [len(pairs[split]) for split in ("train", "validation", "test")] == [30, 5, 5]
    for row in pairs["train"]:
        assert row["input"].startswith(f"{row['locale']}: ")
        assert datetime.date.fromisoformat(row["target"]).isoformat() == row["target"]
    assert pairs["test"]["input"] == [pair.source for pair in source.date_pairs()["test"]]
    with pytest.raises(DatasetError, match="holds pairs, not labelled texts: a classifier cannot train on it"):
        source.load()
