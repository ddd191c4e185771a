"""`evaluate`, offline: the package's classification metrics as a metric module loaded by its path, and the same
numbers from `hf-attn evaluate` (Trainer's `compute_metrics`), `evaluate.evaluator("text-classification")` over a
saved folder, and scikit-learn on the model's own predictions."""

from __future__ import annotations

import json
from pathlib import Path

import evaluate
import numpy as np
import pytest
import torch
from helpers import tiny_config_kwargs
from sklearn.metrics import accuracy_score, f1_score
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from hf_attn import HfAttnConfig, HfAttnForSequenceClassification, cli
from hf_attn.evaluation import CLASSIFICATION_METRICS
from hf_attn.experiments.data import limit_rows
from hf_attn.tasks import load_classification
from hf_attn.week3 import train_week3_tokenizer

ROWS = 12


@pytest.mark.parametrize("num_labels", [2, 3, 5])
def test_the_metric_module_loads_by_path_and_agrees_with_scikit_learn(num_labels: int) -> None:
    """Label `num_labels - 1` is never predicted nor true: it still counts (F1 0) in the macro mean."""
    generator = np.random.default_rng(num_labels)
    predictions = generator.integers(0, max(num_labels - 1, 2), size=200)
    references = generator.integers(0, max(num_labels - 1, 2), size=200)
    metric = evaluate.load(CLASSIFICATION_METRICS, num_labels=num_labels)
    scores = metric.compute(predictions=predictions, references=references)
    expected = {"accuracy": accuracy_score(references, predictions)}
    if num_labels == 2:
        expected["f1"] = f1_score(references, predictions)
    else:
        expected["macro_f1"] = f1_score(references, predictions, labels=range(num_labels), average="macro",
                                        zero_division=0)
    assert scores == pytest.approx(expected)


@pytest.mark.parametrize("num_labels", [1, 2.0, True])
def test_a_number_of_labels_that_is_not_a_count_of_two_or_more_is_refused(num_labels: object) -> None:
    with pytest.raises(ValueError, match="num_labels must be a whole number of at least 2.*model.config.num_labels"):
        evaluate.load(CLASSIFICATION_METRICS, num_labels=num_labels)


@pytest.fixture(scope="module")
def saved_classifier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer classifier with a tokenizer trained on sample reviews (so that its predictions vary),
    reading each review's first 64 tokens."""
    folder = tmp_path_factory.mktemp("classifier")
    texts = load_classification("sample").splits["train"]["text"][:64]
    tokenizer = train_week3_tokenizer(texts, vocab_size=400, min_freq=2, max_seq=64)
    config = HfAttnConfig(**tiny_config_kwargs(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                               max_position_embeddings=64, read_length=64,
                                               id2label={0: "neg", 1: "pos"}, label2id={"neg": 0, "pos": 1}))
    torch.manual_seed(3)
    HfAttnForSequenceClassification(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_hf_attn_evaluate_the_evaluator_and_scikit_learn_give_the_same_numbers(
        saved_classifier: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`evaluate.evaluator` builds its own pipeline from the folder, or from a model and tokenizer (a ready
    `Pipeline` fails in evaluate 0.4 on transformers 5, see docs/ecosystem.md); the pipeline reads each review's
    first `read_length` tokens, as `hf-attn evaluate` does."""
    rows = limit_rows(load_classification("sample").splits["test"], ROWS)
    cli.main(["evaluate", "--model", str(saved_classifier), "--dataset", "sample", "--limit", str(ROWS),
              "--precision", "fp32"])
    command = json.loads(capsys.readouterr().out)

    tokenizer = AutoTokenizer.from_pretrained(saved_classifier)
    model = AutoModelForSequenceClassification.from_pretrained(saved_classifier).eval()
    with torch.no_grad():
        predicted = [int(model(**tokenizer(text, truncation=True, max_length=64, return_tensors="pt")).logits.argmax())
                     for text in rows["text"]]
    assert 0 < sum(predicted) < ROWS  # both labels predicted: F1 is not a degenerate 0 or 1
    reference = {"accuracy": accuracy_score(rows["label"], predicted), "f1": f1_score(rows["label"], predicted)}
    assert {"accuracy": command["test_accuracy"], "f1": command["test_f1"]} == pytest.approx(reference)

    task_evaluator = evaluate.evaluator("text-classification")
    metric = evaluate.load(CLASSIFICATION_METRICS, num_labels=model.config.num_labels)
    for model_or_folder, given_tokenizer in ((str(saved_classifier), None), (model, tokenizer)):
        scores = task_evaluator.compute(model_or_pipeline=model_or_folder, tokenizer=given_tokenizer, data=rows,
                                        metric=metric, label_mapping=model.config.label2id)
        assert {key: scores[key] for key in reference} == pytest.approx(reference)
