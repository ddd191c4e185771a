"""Probes and pictures: the hard probe's bookkeeping, cross-attention mechanics, PNG output."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config_kwargs

from hf_attn import HfAttnConfig, HfAttnForSequenceClassification, HfAttnModel
from hf_attn.analysis import plots
from hf_attn.analysis.plots import plot_rope_decay, plot_sinusoidal_table, rope_offset_scores
from hf_attn.analysis.probes import (
    CONTEXT_WORDS,
    CROSS_ATTENTION_RECORDS,
    HARD_REVIEWS,
    contextual_probe,
    contextual_similarity,
    cross_attention_probe,
    paired_decoder,
    run_hard_probe,
)
from hf_attn.experiments.data import load_sample
from hf_attn.positions import apply_rotary, rotary_tables
from hf_attn.week3 import train_week3_tokenizer

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class FixedScores:
    """A stand-in text-classification pipeline that gives P(positive) = 0.9 to even-numbered reviews."""

    class model:  # noqa: N801 - mimics pipeline.model.config
        class config:  # noqa: N801
            label2id = {"neg": 0, "pos": 1}

    def __call__(self, reviews: list[str], top_k: None = None) -> list[list[dict]]:
        return [[{"label": "pos", "score": p}, {"label": "neg", "score": 1 - p}]
                for p in (0.9 if i % 2 == 0 else 0.2 for i in range(len(reviews)))]


def test_hard_probe_scores_each_review_against_its_label() -> None:
    results = run_hard_probe(FixedScores())
    assert [r.predicted for r in results] == [1, 0, 1, 0, 1, 0]
    expected = [int(prediction == label) for prediction, (_, label, _) in zip([1, 0, 1, 0, 1, 0], HARD_REVIEWS)]
    assert [int(r.correct) for r in results] == expected


def test_rope_offset_scores_match_rotated_all_ones_vectors() -> None:
    head_dim, theta = 16, 10_000.0
    inv_freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    for offset in (0, 1, 7, 40):
        angles = offset * inv_freq
        turn = rotary_tables(angles[None, None])  # (1, 1, D) cos and signed sin
        q = torch.ones(1, 1, 1, head_dim, dtype=torch.float64)
        rotated_q = apply_rotary(q, turn)
        no_turn = rotary_tables(torch.zeros_like(angles)[None, None])
        unrotated_k = apply_rotary(q, no_turn)
        score = float((rotated_q * unrotated_k).sum()) / head_dim
        assert rope_offset_scores(head_dim, 40)[offset].item() == pytest.approx(score)


def test_position_plots_are_png_files(tmp_path: Path) -> None:
    for path in (plot_sinusoidal_table(tmp_path / "s.png", 32, 16), plot_rope_decay(tmp_path / "r.png")):
        assert path.read_bytes().startswith(PNG_MAGIC)


@pytest.fixture(scope="module")
def tokenizer():  # noqa: ANN201
    return train_week3_tokenizer(load_sample()["train"]["text"][:200], vocab_size=300, max_seq=64)


def test_cross_attention_probe_reads_each_review(tokenizer, tmp_path: Path) -> None:  # noqa: ANN001
    config = HfAttnConfig(**tiny_config_kwargs(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                               position_embedding_type="rope", max_position_embeddings=64))
    torch.manual_seed(0)
    encoder = HfAttnModel(config).eval()
    results = cross_attention_probe(encoder, tokenizer, tmp_path)
    assert [r["title"] for r in results] == [r["title"] for r in CROSS_ATTENTION_RECORDS]
    for record, result in zip(CROSS_ATTENTION_RECORDS, results):
        assert Path(result["png"]).read_bytes().startswith(PNG_MAGIC)
        assert len(result["top_review_token"]) == len(tokenizer(record["query"])["input_ids"])


def test_cross_step_ignores_context_order(tokenizer) -> None:  # noqa: ANN001
    """No positions in cross-attention: shuffling the encoded review's rows leaves the decoder unchanged."""
    config = HfAttnConfig(**tiny_config_kwargs(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                               position_embedding_type="rope", max_position_embeddings=64))
    encoder = HfAttnModel(config).eval()
    decoder = paired_decoder(encoder)
    assert decoder.get_input_embeddings() is encoder.get_input_embeddings()
    context = tokenizer([CROSS_ATTENTION_RECORDS[0]["context"]], return_tensors="pt")
    query = tokenizer([CROSS_ATTENTION_RECORDS[0]["query"]], return_tensors="pt")
    with torch.no_grad():
        memory = encoder(**context).last_hidden_state
        order = torch.randperm(memory.shape[1], generator=torch.Generator().manual_seed(0))
        straight = decoder(**query, encoder_hidden_states=memory).last_hidden_state
        shuffled = decoder(**query, encoder_hidden_states=memory[:, order]).last_hidden_state
    torch.testing.assert_close(shuffled, straight, atol=1e-5, rtol=1e-5)


def tiny_classifier(tokenizer, scheme: str) -> HfAttnForSequenceClassification:  # noqa: ANN001
    config = HfAttnConfig(**tiny_config_kwargs(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                               position_embedding_type=scheme, max_position_embeddings=64))
    torch.manual_seed(0)
    return HfAttnForSequenceClassification(config).eval()


def word_vectors_by_hand(model, tokenizer, word: str, context: str) -> list[torch.Tensor]:  # noqa: ANN001
    """Per layer, the mean hidden state of the word's tokens, found as the word's own tokens inside the context's."""
    ids = tokenizer(context)["input_ids"]
    own = tokenizer(word, add_special_tokens=False)["input_ids"]
    start = next(index for index in range(len(ids)) if ids[index : index + len(own)] == own)
    with torch.no_grad():
        hidden_states = model(torch.tensor([ids]), output_hidden_states=True).hidden_states
    return [states[0, start : start + len(own)].double().mean(0) for states in hidden_states]


def cosine_by_hand(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a @ b) / (a.norm() * b.norm()))


@pytest.mark.parametrize("scheme", ["none", "rope", "alibi", "sinusoidal"])
def test_contextual_similarity_is_the_cosine_of_the_words_mean_token_vectors(tokenizer, scheme: str) -> None:  # noqa: ANN001
    model = tiny_classifier(tokenizer, scheme)
    word, contexts = CONTEXT_WORDS[0]
    result = contextual_similarity(model, tokenizer, word, contexts)
    assert len(result.tokens) > 1  # the tiny tokenizer splits "bank": the mean over its tokens is exercised
    first, second = (word_vectors_by_hand(model, tokenizer, word, context) for context in contexts)
    assert len(result.between_contexts) == model.config.num_hidden_layers + 1
    for layer, (a, b) in enumerate(zip(first, second)):
        assert result.between_contexts[layer] == pytest.approx(cosine_by_hand(a, b), abs=1e-9)
    own = torch.tensor(tokenizer(word, add_special_tokens=False)["input_ids"])
    embedding = model.get_input_embeddings().weight.detach()[own].double().mean(0)
    for layer in range(len(first)):
        by_hand = (cosine_by_hand(first[layer], embedding) + cosine_by_hand(second[layer], embedding)) / 2
        assert result.to_input_embedding[layer] == pytest.approx(by_hand, abs=1e-9)


@pytest.mark.parametrize("scheme", ["none", "rope", "alibi"])
def test_without_absolute_positions_a_word_starts_identical_in_every_context(tokenizer, scheme: str) -> None:  # noqa: ANN001
    model = tiny_classifier(tokenizer, scheme)
    for result in contextual_probe(model, tokenizer):
        assert result.between_contexts[0] == pytest.approx(1.0, abs=1e-12)
        assert result.to_input_embedding[0] == pytest.approx(1.0, abs=1e-12)


def test_absolute_positions_make_a_word_at_other_positions_differ_at_the_input(tokenizer) -> None:  # noqa: ANN001
    """"bank" is the 6th word of one context and the 8th of the other: the sinusoidal vectors added differ."""
    result = contextual_similarity(tiny_classifier(tokenizer, "sinusoidal"), tokenizer, *CONTEXT_WORDS[0])
    assert result.between_contexts[0] < 1 - 1e-3


def test_contextual_probe_refuses_a_missing_word_and_a_single_context(tokenizer) -> None:  # noqa: ANN001
    model = tiny_classifier(tokenizer, "rope")
    with pytest.raises(ValueError, match="'bank' is not a word of the context 'A bankrupt firm.'"):
        contextual_similarity(model, tokenizer, "bank", ("He sat on the river bank.", "A bankrupt firm."))
    with pytest.raises(ValueError, match="at least two contexts"):
        contextual_similarity(model, tokenizer, "bank", ("He sat on the river bank.",))


def test_line_panels_wrap_into_rows_ticked_at_their_lengths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    figures = []
    monkeypatch.setattr(plots, "_save", lambda figure, path: figures.append(figure) or Path(path))
    lines = {"rope": ([8, 16, 32], [1.0, 0.2, 0.0], [0.0, 0.05, 0.0]), "none": ([8, 16, 32], [1.0, 0.4, 0.1])}
    panels = [(f"task {number}", "exact match", lines) for number in range(4)] + [
        ("scan", "exact match", {"rope": ([22, 48], [1.0, 0.1])})]
    plots.plot_line_panels(panels, tmp_path / "p.png", "length", log_x=True)
    axes = figures[0].axes
    assert len(axes) == 6 and [axis.get_visible() for axis in axes] == [True] * 5 + [False]  # 2 rows of 3
    assert axes[0].get_position().y0 > axes[3].get_position().y1  # the fourth panel starts the second row
    assert [label.get_text() for label in axes[0].get_xticklabels()] == ["8", "16", "32"]
    assert [label.get_text() for label in axes[4].get_xticklabels()] == ["22", "48"]
