"""Self-training on unlabelled texts: the teacher's labels against its own predictions read one text at a time, the
cache, and a run whose training split grows by the texts the teacher is sure of."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
import torch
from helpers import SMOKE, SMOKE_TINY_MODEL

from hf_attn.experiments import self_training
from hf_attn.experiments.classification import train
from hf_attn.experiments.config import load_experiment
from hf_attn.experiments.data import load_sample
from hf_attn.experiments.pretraining import pretrain
from hf_attn.saved import load_saved_classifier
from hf_attn.tasks import imdb

TEXTS = [text[:400] for text in load_sample()["test"]["text"][:12]]
TINY_RUN = [*SMOKE_TINY_MODEL, "limit_train=64", "limit_eval=16", "training.num_train_epochs=1"]


def flat(labels: list[tuple[int, float]]) -> list[float]:
    return [value for pair in labels for value in pair]


def one_by_one(teacher: Path, texts: list[str]) -> list[tuple[int, float]]:
    """The teacher's label and probability of each text read alone: no padding, no batch."""
    model, tokenizer = load_saved_classifier(teacher)
    model.eval()
    read = []
    with torch.no_grad():
        for text in texts:
            probabilities = model(**tokenizer(text, return_tensors="pt")).logits.softmax(-1)[0]
            read.append((int(probabilities.argmax()), float(probabilities.max())))
    return read


def test_teacher_labels_are_its_own_predictions_and_a_cache_continues_where_it_stopped(
    run_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ["LABEL_0", "LABEL_1"]
    cache = tmp_path / "labels.jsonl"
    labels = self_training.teacher_labels(run_dir, TEXTS, names, cache=cache)
    expected = one_by_one(run_dir, TEXTS)
    for (label, probability), (alone, alone_probability) in zip(labels, expected):
        assert probability == pytest.approx(alone_probability, abs=1e-4)
        assert label == alone or abs(alone_probability - 0.5) < 1e-4  # a tie may fall either way

    # a stage stopped after 5 texts: the next reads only the other 7, and the labels are those of one pass
    lines = cache.read_text().splitlines()
    cache.write_text("\n".join(lines[:5]) + "\n" + lines[5][:9])  # a line cut short by a killed process
    read: list[int] = []
    load = self_training.load_saved_classifier

    def counting(folder: Path) -> tuple:
        model, tokenizer = load(folder)
        forward = model.forward
        model.forward = lambda **inputs: (read.append(len(inputs["input_ids"])), forward(**inputs))[1]
        return model, tokenizer

    monkeypatch.setattr(self_training, "load_saved_classifier", counting)
    assert flat(self_training.teacher_labels(run_dir, TEXTS, names, cache=cache)) == pytest.approx(flat(labels),
                                                                                                  abs=1e-4)
    assert sum(read) == len(TEXTS) - 5
    assert len(cache.read_text().splitlines()) == len(TEXTS) + 1  # the cut line stays, on a line of its own
    # all cached: the teacher is not even loaded
    monkeypatch.setattr(self_training, "load_saved_classifier", lambda folder: pytest.fail("the teacher was read"))
    assert flat(self_training.teacher_labels(run_dir, TEXTS, names, cache=cache)) == pytest.approx(flat(labels),
                                                                                                  abs=1e-4)


def test_batches_hold_at_most_their_count_and_their_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(self_training, "BATCH_SIZE", 3)
    monkeypatch.setattr(self_training, "BATCH_CHARACTERS", 10)
    sizes = [1, 1, 1, 1, 4, 4, 4, 12, 2]
    # by hand: three short ones (the count), then 1 + 4 + 4 (9 characters), 4, 12 alone, 2
    assert self_training.batches_of(range(9), sizes) == [[0, 1, 2], [3, 4, 5], [6], [7], [8]]


def test_the_cache_key_changes_with_the_teacher_and_the_texts(run_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    for name in ("config.json", "model.safetensors"):
        (other / name).write_bytes((run_dir / name).read_bytes() + (b" " if name == "config.json" else b""))
    key = self_training.labels_key(run_dir, TEXTS)
    assert key == self_training.labels_key(run_dir, list(TEXTS))
    assert len({key, self_training.labels_key(other, TEXTS), self_training.labels_key(run_dir, TEXTS[:-1]),
                self_training.labels_key(run_dir, TEXTS[::-1])}) == 4


def test_a_teacher_of_other_labels_is_refused(run_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"labels \['LABEL_0', 'LABEL_1'\], the dataset \['neg', 'pos'\]"):
        self_training.teacher_labels(run_dir, TEXTS, ["neg", "pos"], cache=tmp_path / "labels.jsonl")


def test_a_run_trains_on_the_split_and_the_unlabelled_texts_its_teacher_is_sure_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ATTN_CACHE", str(tmp_path / "cache"))
    teacher = tmp_path / "teacher"
    train(load_experiment(SMOKE, TINY_RUN), teacher)
    monkeypatch.setattr(imdb, "load_unlabelled", lambda source: datasets.Dataset.from_dict({"text": TEXTS}))
    expected = one_by_one(teacher, TEXTS)
    ordered = sorted(probability for _, probability in expected)
    threshold = (ordered[len(TEXTS) // 2 - 1] + ordered[len(TEXTS) // 2]) / 2  # half are kept, the cut between two
    kept = [label for label, probability in expected if probability >= threshold]
    metrics = train(load_experiment(SMOKE, [*TINY_RUN, "precision=fp32", f"self_training.teacher={teacher}",
                                            f"self_training.threshold={threshold}"]), tmp_path / "student")
    assert metrics["n_train"] == 64 + len(kept)
    record = metrics["self_training"]
    assert (record["texts"], record["kept"], record["teacher"]) == (len(TEXTS), len(kept), str(teacher))
    assert record["label_shares"]["pos"] == pytest.approx(kept.count(1) / len(kept))
    assert len(list((tmp_path / "cache" / "pseudo-labels").glob("*.jsonl"))) == 1
    assert json.loads((tmp_path / "student" / "metrics.json").read_text())["self_training"] == record


def test_self_training_is_refused_without_unlabelled_texts_and_where_no_classifier_trains(run_dir: Path,
                                                                                         tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="has no unlabelled texts"):
        train(load_experiment(SMOKE, [*TINY_RUN, f"self_training.teacher={run_dir}"]), tmp_path / "run")
    with pytest.raises(ValueError, match="trains no classifier: the self_training section"):
        pretrain(load_experiment(SMOKE, [*SMOKE_TINY_MODEL, f"self_training.teacher={run_dir}"]), tmp_path / "run")
    with pytest.raises(ValueError, match="self_training.*threshold"):
        load_experiment(SMOKE, ["self_training.threshold=0.3"])
