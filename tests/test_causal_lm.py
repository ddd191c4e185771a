"""Causal-LM pretraining (`objective: causal`) and the perplexity-by-length evaluation (ALiBi's Figure 1)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from helpers import SMOKE_TINY_MODEL, tiny_config_kwargs

from hf_attn import HfAttnConfig
from hf_attn.cli import main
from hf_attn.experiments.config import load_experiment
from hf_attn.experiments.data import load_imdb
from hf_attn.experiments.perplexity import (
    NOT_APPLICABLE,
    extrapolation_perplexity,
    token_stream,
    unigram_perplexity,
    windowed_nll,
)
from hf_attn.experiments.pretraining import IGNORE_INDEX, CausalLMCollator, pretrain, pretraining_corpus
from hf_attn.modeling_hf_attn import HfAttnForCausalLM
from hf_attn.week3 import train_week3_tokenizer

CAUSAL = Path(__file__).resolve().parents[1] / "configs" / "causal-lm"
# The scheme configs with the sample data, a tokenizer trained on it, and a tiny model.
TINY_CAUSAL = ["dataset=sample", "week3=null", "limit_train=48", "limit_eval=8", "model.num_hidden_layers=2",
               *SMOKE_TINY_MODEL]


def tiny_decoder(scheme: str, **overrides: object) -> HfAttnForCausalLM:
    torch.manual_seed(0)
    config = HfAttnConfig(**tiny_config_kwargs(is_decoder=True, position_embedding_type=scheme, **overrides))
    return HfAttnForCausalLM(config).eval()


def manual_nll(model: HfAttnForCausalLM, stream: torch.Tensor, length: int) -> tuple[float, int]:
    """Reference: every predicted token scored from its own prefix (one forward pass per token, the prefix
    starting at its window's first token), log-softmax by hand."""
    total, count = 0.0, 0
    for start in range(0, len(stream) - length + 1, length):
        window = stream[start : start + length]
        for t in range(1, length):
            with torch.no_grad():
                logits = model(input_ids=window[None, :t]).logits[0, -1].double()
            log_probs = logits - logits.exp().sum().log()
            total -= float(log_probs[window[t]])
            count += 1
    return total, count


@pytest.mark.parametrize("scheme", ["alibi", "rope", "learned"])
def test_windowed_perplexity_equals_scoring_each_token_from_its_prefix(scheme: str) -> None:
    model = tiny_decoder(scheme)
    stream = torch.randint(1, 64, (8 * 3 + 5,), generator=torch.Generator().manual_seed(1))  # a tail of 5 is left out
    total, predicted = windowed_nll(model, stream, 8)
    expected_total, expected_count = manual_nll(model, stream, 8)
    assert predicted == expected_count == 3 * 7
    assert total == pytest.approx(expected_total, rel=1e-5)

    results = extrapolation_perplexity(model, stream, [4, 8])  # both read the first 24 tokens
    assert results["8"]["perplexity"] == pytest.approx(math.exp(expected_total / expected_count), rel=1e-5)
    assert results["4"]["predicted_tokens"] == 6 * 3 and results["4"]["windows"] == 6


def test_learned_positions_past_their_table_are_not_applicable_not_a_crash() -> None:
    model = tiny_decoder("learned", max_position_embeddings=8)
    stream = torch.randint(1, 64, (64,), generator=torch.Generator().manual_seed(2))
    with pytest.raises(ValueError, match="trained positions"):  # what evaluating it would do
        windowed_nll(model, stream, 16)
    results = extrapolation_perplexity(model, stream, [8, 16, 32])
    assert isinstance(results["8"]["perplexity"], float)
    for length in ("16", "32"):
        assert results[length]["perplexity"] == NOT_APPLICABLE and "8 trained positions" in results[length]["reason"]
    rope = extrapolation_perplexity(tiny_decoder("rope", max_position_embeddings=8), stream, [8, 16, 32])
    assert all(isinstance(result["perplexity"], float) for result in rope.values())


def test_token_stream_is_the_reviews_tokenized_whole_and_concatenated() -> None:
    texts = load_imdb("sample")["validation"]["text"][:5]
    tokenizer = train_week3_tokenizer(texts, vocab_size=300, max_seq=16)  # model_max_length 16: must not truncate
    expected = [i for text in texts for i in tokenizer.encode(text, add_special_tokens=False, truncation=False)]
    assert len(expected) > 3 * 16
    assert token_stream(tokenizer, texts, max_tokens=10**6).tolist() == expected
    assert token_stream(tokenizer, texts, max_tokens=40).tolist() == expected[:40]


def test_causal_collator_scores_every_real_token_and_no_padding() -> None:
    tokenizer = train_week3_tokenizer(["a b c"], vocab_size=260)
    batch = CausalLMCollator(tokenizer)([{"input_ids": [3, 4, 5], "attention_mask": [1, 1, 1]},
                                         {"input_ids": [6], "attention_mask": [1]}])
    pad = tokenizer.pad_token_id
    assert batch["input_ids"].tolist() == [[3, 4, 5], [6, pad, pad]]
    assert batch["labels"].tolist() == [[3, 4, 5], [6, IGNORE_INDEX, IGNORE_INDEX]]


def test_causal_corpus_never_holds_validation_or_test_reviews() -> None:
    experiment = load_experiment(CAUSAL / "rope.yaml", ["dataset=sample", "week3=null", "limit_train=null"])
    train_texts, validation_texts, _ = pretraining_corpus(experiment)
    splits = load_imdb("sample")
    held_out = set(splits["validation"]["text"]) | set(splits["test"]["text"])
    assert len(train_texts) == len(splits["train"]) and not held_out & set(train_texts["text"])
    assert validation_texts["text"] == splits["validation"]["text"][: experiment.limit_eval]


def test_causal_run_saves_a_decoder_that_generate_and_perplexity_continue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    experiment = load_experiment(CAUSAL / "alibi.yaml", [*TINY_CAUSAL, "training.max_steps=3",
                                                         "training.eval_steps=3"])
    metrics = pretrain(experiment, tmp_path / "lm")
    assert metrics["objective"] == "causal" and metrics["optimizer_steps"] == 3
    assert 0 < metrics["eval_causal_loss"] < 2 * math.log(metrics["vocab_size"])
    assert json.loads((tmp_path / "lm" / "config.json").read_text())["is_decoder"] is True

    main(["generate", "--model", str(tmp_path / "lm"), "--max-new-tokens", "5", "This film was"])
    assert capsys.readouterr().out.strip()
    output = tmp_path / "ppl.json"
    main(["perplexity", "--model", str(tmp_path / "lm"), "--lengths", "128,64", "--dataset", "sample",
          "--max-tokens", "512", "--output", str(output)])
    report = json.loads(output.read_text())
    assert list(report["perplexity_by_length"]) == ["64", "128"] and report["evaluated_tokens"] == 512
    assert report["training"]["optimizer_steps"] == 3
    assert 1 < report["unigram_perplexity"] < metrics["vocab_size"]  # the sample's frequencies tell something
    assert all(result["predicted_tokens"] == 512 - 512 // int(length)
               for length, result in report["perplexity_by_length"].items())


def test_perplexity_command_rejects_bad_lengths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["perplexity", "--lengths", "64,x", "--model", str(tmp_path)])
    assert "--lengths" in capsys.readouterr().err


def test_unigram_perplexity_is_the_smoothed_frequency_of_each_token() -> None:
    texts = load_imdb("sample")["train"]["text"][:20]
    tokenizer = train_week3_tokenizer(texts, vocab_size=300, max_seq=16)
    stream = token_stream(tokenizer, load_imdb("sample")["validation"]["text"][:3], max_tokens=200)
    counts = [0] * len(tokenizer)
    for text in texts:
        for i in tokenizer.encode(text, add_special_tokens=False, truncation=False):
            counts[i] += 1
    nll = [-math.log((counts[i] + 1) / (sum(counts) + len(tokenizer))) for i in stream.tolist()]
    assert unigram_perplexity(tokenizer, texts, stream) == pytest.approx(math.exp(sum(nll) / len(nll)), rel=1e-9)
