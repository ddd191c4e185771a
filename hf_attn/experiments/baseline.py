"""TF-IDF + logistic regression baseline, restricted to the text a transformer actually sees.

A transformer trained with ``max_length=N`` reads only the first N tokens of a review, while a
bag-of-words model on the full review reads all of it; comparing the two would credit the
baseline with information the transformer never had. :func:`truncate_to_tokens` cuts each review
to the text its first N tokens cover, so both models judge the same prefix.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import datasets
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score
from sklearn.multiclass import OneVsRestClassifier

from ..evaluation import classification_metric, f1_key

C_GRID = (1.0, 4.0, 16.0, 64.0)


def truncate_to_tokens(texts: Sequence[str], tokenizer: Any, max_tokens: int) -> list[str]:
    """The part of each text covered by its first ``max_tokens`` tokens.

    Tokens are counted as :func:`hf_attn.experiments.data.tokenize_splits` with ``max_length=max_tokens``
    counts them: special tokens the tokenizer adds ([CLS], [SEP], ...) use up part of the budget,
    so the result is the text that model input holds. Rust-backed tokenizers report character
    offsets, and the result is then the exact prefix of the original text up to the end of the
    last kept token. Python tokenizers have no offsets; their kept tokens are decoded instead,
    which may differ from the original in spacing or normalisation and spells unknown words as
    the unknown token.
    """
    budget = max_tokens - tokenizer.num_special_tokens_to_add()
    if budget < 1:
        raise ValueError(
            f"max_tokens={max_tokens} leaves no room for text next to the tokenizer's special tokens"
        )
    texts = list(texts)
    encoded = tokenizer(
        texts,
        add_special_tokens=False,
        truncation=True,
        max_length=budget,
        return_offsets_mapping=tokenizer.is_fast,
    )
    if tokenizer.is_fast:
        return [
            text[: offsets[-1][1]] if offsets else ""
            for text, offsets in zip(texts, encoded["offset_mapping"])
        ]
    return tokenizer.batch_decode(encoded["input_ids"])


def run_tfidf_baseline(
    dataset_dict: datasets.DatasetDict,
    tokenizer: Any | None = None,
    max_tokens: int = 128,
    C: float | None = None,
) -> dict[str, Any]:
    """Fit TF-IDF (word 1-2 grams) + logistic regression on ``train`` and score it on ``test``.

    The regularisation strength ``C`` is picked by validation accuracy from :data:`C_GRID`
    unless given. With a ``tokenizer`` every review is first cut to its first ``max_tokens``
    tokens (see :func:`truncate_to_tokens`); without one the full reviews are used and
    ``max_tokens`` is reported as None. ``dataset_dict`` needs ``train``, ``validation`` and
    ``test`` splits with ``text`` and a ``label`` ClassLabel, as every source of :mod:`hf_attn.tasks` gives.
    The test scores are the classifiers' (:func:`hf_attn.evaluation.classification_metric`): accuracy, and F1
    of the positive class (label 1) for two labels, ``test_macro_f1`` beyond.
    """
    start = time.perf_counter()
    texts = {name: list(dataset_dict[name]["text"]) for name in ("train", "validation", "test")}
    if tokenizer is not None:
        texts = {name: truncate_to_tokens(split, tokenizer, max_tokens) for name, split in texts.items()}
    labels = {name: list(dataset_dict[name]["label"]) for name in texts}

    # sublinear_tf dampens words repeated within one long review; min_df=2 drops hapax n-grams,
    # which are most of the bigram vocabulary and cannot generalise.
    vectorizer = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True)
    x_train = vectorizer.fit_transform(texts["train"])
    x_val = vectorizer.transform(texts["validation"])
    x_test = vectorizer.transform(texts["test"])

    num_labels = dataset_dict["train"].features["label"].num_classes
    best_model, best_c, best_val = None, None, -1.0
    for c in C_GRID if C is None else (C,):
        model = LogisticRegression(C=c, solver="liblinear", max_iter=1000)
        if num_labels > 2:  # liblinear fits two classes; beyond, one of them against the rest each
            model = OneVsRestClassifier(model)
        model.fit(x_train, labels["train"])
        val_accuracy = accuracy_score(labels["validation"], model.predict(x_val))
        if val_accuracy > best_val:
            best_model, best_c, best_val = model, c, val_accuracy

    scores = classification_metric(num_labels).compute(predictions=best_model.predict(x_test),
                                                       references=labels["test"])
    return {
        **{f"test_{key}": float(scores[key]) for key in ("accuracy", f1_key(num_labels))},
        "val_accuracy": float(best_val),
        "C": best_c,
        "max_tokens": max_tokens if tokenizer is not None else None,
        "n_train": len(texts["train"]),
        "runtime_s": time.perf_counter() - start,
    }
