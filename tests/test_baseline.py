"""Tests for hf_attn.experiments.baseline: token-exact truncation and the TF-IDF baseline on the sample."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import datasets
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizer, PreTrainedTokenizerFast

from hf_attn import cli
from hf_attn.experiments.baseline import C_GRID, run_tfidf_baseline, truncate_to_tokens
from hf_attn.experiments.data import load_sample

SPECIALS = ["[UNK]", "[PAD]", "[CLS]", "[SEP]"]


@pytest.fixture(scope="module")
def sample() -> datasets.DatasetDict:
    return load_sample()


@pytest.fixture(scope="module")
def word_tokenizer(sample: datasets.DatasetDict) -> PreTrainedTokenizerFast:
    """A word-level tokenizer trained on the sample that adds [CLS] ... [SEP], like BERT does."""
    backend = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(vocab_size=5_000, special_tokens=SPECIALS)
    backend.train_from_iterator(sample["train"]["text"], trainer)
    backend.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[(name, backend.token_to_id(name)) for name in ("[CLS]", "[SEP]")],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]"
    )


class WordPythonTokenizer(PreTrainedTokenizer):
    """A Python (offset-less) tokenizer, to exercise the decode path of truncate_to_tokens."""

    def __init__(self, vocab: dict[str, int], **kwargs) -> None:
        self.vocab = dict(vocab)
        self.ids_to_tokens = {i: token for token, i in self.vocab.items()}
        super().__init__(unk_token="[UNK]", pad_token="[PAD]", **kwargs)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab)

    def _tokenize(self, text: str) -> list[str]:
        return re.findall(r"\w+|[^\w\s]+", text)

    def _convert_token_to_id(self, token: str) -> int:
        return self.vocab.get(token, self.vocab["[UNK]"])

    def _convert_id_to_token(self, index: int) -> str:
        return self.ids_to_tokens[index]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return " ".join(tokens)


def test_truncation_covers_exactly_max_tokens(
    word_tokenizer: PreTrainedTokenizerFast, sample: datasets.DatasetDict
) -> None:
    texts = sample["test"]["text"][:50] + ["Great film!"]
    truncated = truncate_to_tokens(texts, word_tokenizer, max_tokens=20)
    for text, cut in zip(texts, truncated):
        assert text.startswith(cut)
        kept_ids = word_tokenizer(text, truncation=True, max_length=20)["input_ids"]
        # Re-tokenizing the cut text, without any truncation, gives back exactly the kept tokens.
        assert word_tokenizer(cut)["input_ids"] == kept_ids
    assert truncated[-1] == "Great film!"
    assert sum(len(word_tokenizer(cut)["input_ids"]) == 20 for cut in truncated) == 50


def test_truncation_without_offsets_decodes(
    word_tokenizer: PreTrainedTokenizerFast, sample: datasets.DatasetDict
) -> None:
    texts = sample["test"]["text"][:20]
    tokenizer = WordPythonTokenizer(word_tokenizer.get_vocab())
    assert not tokenizer.is_fast
    truncated = truncate_to_tokens(texts, tokenizer, max_tokens=12)
    for text, cut in zip(texts, truncated):
        assert tokenizer(cut)["input_ids"] == tokenizer(text, truncation=True, max_length=12)["input_ids"]


def test_truncation_rejects_non_positive_budget(word_tokenizer: PreTrainedTokenizerFast) -> None:
    with pytest.raises(ValueError, match="max_tokens=2 leaves no room"):
        truncate_to_tokens(["text"], word_tokenizer, max_tokens=2)


def test_baseline_on_sample(word_tokenizer: PreTrainedTokenizerFast, sample: datasets.DatasetDict) -> None:
    full = run_tfidf_baseline(sample)
    assert full["n_train"] == 1_600 and full["max_tokens"] is None
    assert full["test_accuracy"] > 0.75 and full["test_f1"] > 0.75
    assert full["C"] in C_GRID

    truncated = run_tfidf_baseline(sample, tokenizer=word_tokenizer, max_tokens=64, C=4.0)
    assert truncated["C"] == 4.0 and truncated["max_tokens"] == 64
    assert truncated["test_accuracy"] > 0.65


def test_baseline_reads_any_dataset_by_its_columns_and_scores_macro_f1_beyond_two_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`hf-attn baseline --dataset FILE --text-column --label-column`, as `train` takes them (it read IMDb only): on
    five classes that each have their own words, the baseline is right on every test review, which a macro-F1 of
    1 says; 150 rows leave 120 to train on (a tenth each cut for validation and test)."""
    words = ["awful dull", "weak slow", "fine okay", "good fun", "great moving"]
    with (tmp_path / "reviews.csv").open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["review", "stars"])
        writer.writerows([f"{words[i % 5]} film number {i}", 1 + i % 5] for i in range(150))
    cli.main(["baseline", "--dataset", str(tmp_path / "reviews.csv"), "--text-column", "review", "--label-column",
              "stars"])
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["n_train"] == 120 and "test_f1" not in metrics
    assert metrics["test_accuracy"] == 1.0 and metrics["test_macro_f1"] == 1.0
