"""Texts longer than the model's positions: read directly (schemes that extrapolate) or as pooled windows.

The reference for windows is written out here: each window cut with Python slicing and encoded alone
(no padding), its mean-pooled vector weighted by its token count, then the same linear head.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from helpers import SMOKE, SMOKE_TINY_MODEL, tiny_config_kwargs
from test_cli import save_tiny_classifier
from transformers import AutoTokenizer, pipeline

from hf_attn import HfAttnConfig, HfAttnForSequenceClassification, cli
from hf_attn.experiments.classification import evaluate_saved, train
from hf_attn.experiments.config import ExperimentConfigError, load_experiment

WINDOW = 16


def classifier(scheme: str, stride: int | None, read_length: int | None = None) -> HfAttnForSequenceClassification:
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type=scheme, max_position_embeddings=WINDOW,
                                               window_stride=stride, read_length=read_length))
    torch.manual_seed(0)
    return HfAttnForSequenceClassification(config).eval()


def windows_by_hand(model: HfAttnForSequenceClassification, tokens: list[int], stride: int) -> torch.Tensor:
    """Logits of one text read as windows: starts 0, stride, ... until a window reaches the end."""
    starts = [0]
    while starts[-1] + WINDOW < len(tokens):
        starts.append(starts[-1] + stride)
    vectors, weights = [], []
    for start in starts:
        window = torch.tensor([tokens[start : start + WINDOW]])
        vectors.append(model.model(input_ids=window).last_hidden_state.mean(dim=1)[0])
        weights.append(window.shape[1])
    weights = torch.tensor(weights, dtype=torch.float32)[:, None]
    return model.classifier((torch.stack(vectors) * weights).sum(dim=0) / weights.sum())


@pytest.mark.parametrize("scheme", ["learned", "rope", "alibi"])
@pytest.mark.parametrize("stride", [WINDOW, 5])
def test_windows_equal_windows_encoded_alone_and_averaged_by_their_tokens(scheme: str, stride: int) -> None:
    """A batch of a long text (several windows, the last one short) and a short one (padding only beyond
    its first window): every row gives the logits of its own windows read one by one."""
    model = classifier(scheme, stride)
    generator = torch.Generator().manual_seed(1)
    long_text = torch.randint(1, 64, (3 * WINDOW + 7,), generator=generator).tolist()
    short_text = torch.randint(1, 64, (WINDOW - 3,), generator=generator).tolist()
    input_ids = torch.zeros(2, len(long_text), dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, tokens in enumerate((long_text, short_text)):
        input_ids[row, : len(tokens)] = torch.tensor(tokens)
        attention_mask[row, : len(tokens)] = 1
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        for row, tokens in enumerate((long_text, short_text)):
            torch.testing.assert_close(logits[row], windows_by_hand(model, tokens, stride), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("stride", [WINDOW, 5])
def test_a_captured_graph_cuts_as_few_windows_as_reach_the_end_of_its_input(stride: int) -> None:
    """While tracing every window is kept: an input of at most a window is one window (not one more, past its end),
    and the windows cut always include those `windows_by_hand` reads, with at most (WINDOW - 1) // stride after them."""
    from hf_attn.reading import split_into_windows

    for length in range(1, 4 * WINDOW + 2):
        tokens = torch.arange(1, length + 1)[None]
        windows = split_into_windows(tokens, WINDOW, stride, 0)[0]
        starts = [0]
        while starts[-1] + WINDOW < length:
            starts.append(starts[-1] + stride)
        for index, start in enumerate(starts):
            assert windows[index][windows[index] > 0].tolist() == tokens[0, start : start + WINDOW].tolist()
        assert len(starts) <= windows.shape[0] <= len(starts) + (WINDOW - 1) // stride
        if length <= stride or stride == WINDOW:
            assert windows.shape[0] == len(starts)


def test_inputs_embeds_are_windowed_like_input_ids() -> None:
    model = classifier("rope", 8)
    input_ids = torch.randint(1, 64, (2, 3 * WINDOW), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        from_ids = model(input_ids=input_ids).logits
        from_embeds = model(inputs_embeds=model.model.embed_tokens(input_ids)).logits
    torch.testing.assert_close(from_embeds, from_ids)


def test_a_text_within_the_window_is_read_as_without_windows() -> None:
    windowed, direct = classifier("rope", 4), classifier("rope", None)
    input_ids = torch.randint(1, 64, (3, WINDOW), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        assert torch.equal(windowed(input_ids=input_ids).logits, direct(input_ids=input_ids).logits)


@pytest.mark.parametrize("stride", [0, WINDOW + 1, 2.5, True])
def test_a_stride_that_would_skip_tokens_or_is_not_a_count_is_refused(stride: object) -> None:
    with pytest.raises(ValueError, match="window_stride"):
        HfAttnConfig(**tiny_config_kwargs(max_position_embeddings=WINDOW, window_stride=stride))


@pytest.mark.parametrize("read_length", [0, -3, 2.5, True, "all"])
def test_a_read_length_that_is_not_a_count_is_refused(read_length: object) -> None:
    with pytest.raises(ValueError, match="read_length"):
        HfAttnConfig(**tiny_config_kwargs(read_length=read_length))


def test_learned_positions_read_past_their_table_only_as_windows() -> None:
    with pytest.raises(ValueError, match=r"`read_length`=17.*cover max_position_embeddings=16 tokens.*window_stride"):
        HfAttnConfig(**tiny_config_kwargs(position_embedding_type="learned", max_position_embeddings=WINDOW,
                                          read_length=WINDOW + 1))
    config = HfAttnConfig(**tiny_config_kwargs(position_embedding_type="learned", max_position_embeddings=WINDOW,
                                               read_length=10 * WINDOW, window_stride=WINDOW))
    assert config.read_length == 10 * WINDOW


@pytest.mark.parametrize(("scheme", "stride"), [("rope", None), ("alibi", None), ("learned", 5), ("rope", WINDOW)])
def test_the_model_reads_the_first_read_length_tokens_of_each_text(scheme: str, stride: int | None) -> None:
    """A batch of a text longer than `read_length` and a shorter one, right-padded: each row's logits are those
    of its own first `read_length` tokens read alone by the same weights without a read length."""
    read_length = 2 * WINDOW + 3
    model = classifier(scheme, stride, read_length)
    reference = classifier(scheme, stride)
    reference.load_state_dict(model.state_dict())
    generator = torch.Generator().manual_seed(4)
    texts = [torch.randint(1, 64, (n,), generator=generator).tolist() for n in (read_length + 20, read_length - 9)]
    input_ids = torch.zeros(2, max(map(len, texts)), dtype=torch.long)
    attention_mask = torch.zeros_like(input_ids)
    for row, tokens in enumerate(texts):
        input_ids[row, : len(tokens)] = torch.tensor(tokens)
        attention_mask[row, : len(tokens)] = 1
    with torch.no_grad():
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        for row, tokens in enumerate(texts):
            alone = reference(input_ids=torch.tensor([tokens[:read_length]])).logits[0]
            torch.testing.assert_close(logits[row], alone, atol=1e-5, rtol=1e-5)
        assert (logits[0] - reference(input_ids=torch.tensor([texts[0]])).logits[0]).abs().max() > 1e-4


def test_a_left_padded_batch_cut_to_read_length_is_refused() -> None:
    """Cutting keeps the first columns: with padding on the left they are not the texts' first tokens."""
    model = classifier("rope", None, read_length=8)
    attention_mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1, 1], [1] * 10])
    with pytest.raises(ValueError, match="padding_side='right'"):
        model(input_ids=torch.ones(2, 10, dtype=torch.long), attention_mask=attention_mask)


def test_position_ids_and_windows_together_are_refused() -> None:
    model = classifier("rope", 8)
    with pytest.raises(ValueError, match="position_ids"):
        model(input_ids=torch.ones(1, 2 * WINDOW, dtype=torch.long), position_ids=torch.arange(2 * WINDOW)[None])


@pytest.mark.parametrize("length", [WINDOW + 1, 4 * WINDOW])
def test_a_learned_classifier_given_more_than_its_positions_is_told_to_truncate_or_read_windows(length: int) -> None:
    """The error names the input's length, the limit and the classifier's two ways on (not generate()); an input
    past `max_direct_length` too: learned positions read windows only when `window_stride` asks for them."""
    model = classifier("learned", None)
    model.config.max_direct_length = 2 * WINDOW
    with pytest.raises(ValueError, match=rf"cover {WINDOW} tokens but the input has {length}") as error:
        model(input_ids=torch.ones(1, length, dtype=torch.long))
    assert "config.read_length" in str(error.value) and "config.window_stride" in str(error.value)
    assert "generate" not in str(error.value)


def test_a_saved_windowed_classifier_reads_a_whole_review_through_the_pipeline_defaults(tmp_path: Path) -> None:
    """Called with its defaults (no truncation), the pipeline gives the model every token and the model reads
    its `read_length` (more than the review has) as windows (its saved stride)."""
    model = save_tiny_classifier(tmp_path, read_length=10_000, window_stride=8).eval()
    classify = pipeline("text-classification", model=str(tmp_path), tokenizer=str(tmp_path), top_k=None)
    review = "a good film but a bad ending " * 20
    tokens = classify.tokenizer(review)["input_ids"]
    assert len(tokens) > 5 * WINDOW  # the whole review, not the first 16 tokens
    with torch.no_grad():
        expected = windows_by_hand(model, tokens, stride=8).softmax(dim=-1)
    scores = {result["label"]: result["score"] for result in classify([review])[0]}
    torch.testing.assert_close(torch.tensor([scores["LABEL_0"], scores["LABEL_1"]]), expected, atol=1e-5, rtol=1e-5)


def test_an_input_past_max_direct_length_is_read_as_windows_of_the_positions() -> None:
    """Reading directly is quadratic in the length: past `max_direct_length` a model without a `window_stride`
    reads windows of `max_position_embeddings` tokens one after another (the reference: windows by hand), no
    encoder pass longer than a window; at or under the limit it reads as a model without a limit."""
    model = classifier("rope", None)
    model.config.max_direct_length = 3 * WINDOW
    unlimited = classifier("rope", None)
    unlimited.config.max_direct_length = None
    longest_pass = []
    model.model.register_forward_pre_hook(
        lambda module, args, kwargs: longest_pass.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
    generator = torch.Generator().manual_seed(4)
    with torch.no_grad():
        long_text = torch.randint(1, 64, (1, 5 * WINDOW + 3), generator=generator)
        torch.testing.assert_close(model(input_ids=long_text).logits[0],
                                   windows_by_hand(model, long_text[0].tolist(), stride=WINDOW), atol=1e-5, rtol=1e-5)
        assert max(longest_pass) == WINDOW
        within = torch.randint(1, 64, (2, 3 * WINDOW), generator=generator)
        assert torch.equal(model(input_ids=within).logits, unlimited(input_ids=within).logits)


@pytest.mark.parametrize("limit", [0, -3, 2.5, True])
def test_a_max_direct_length_that_is_not_a_count_is_refused(limit: object) -> None:
    with pytest.raises(ValueError, match="max_direct_length"):
        HfAttnConfig(**tiny_config_kwargs(max_direct_length=limit))


def test_a_saved_classifier_without_a_reading_policy_reads_a_megabyte_through_the_pipeline_in_windows(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A model saved with `save_pretrained` and no `read_length` (none) through `pipeline(...)` with its defaults:
    a 1 MB text is read in windows (the warning names the length and the policy), not in one quadratic pass."""
    model = save_tiny_classifier(tmp_path, read_length=None)
    longest_pass = []
    classify = pipeline("text-classification", model=str(tmp_path), tokenizer=str(tmp_path))
    classify.model.model.register_forward_pre_hook(
        lambda module, args, kwargs: longest_pass.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
    megabyte = ("a good film but a bad ending " * 40_000)[:1_000_000]
    with caplog.at_level("WARNING"):
        (answer,) = classify(megabyte)
    assert answer["label"] in {"LABEL_0", "LABEL_1"}
    assert max(longest_pass) == model.config.max_position_embeddings
    assert "longer than max_direct_length=8192: it is read as windows of 16 tokens" in caplog.text


def test_predict_reads_past_a_learned_table_only_as_windows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = save_tiny_classifier(tmp_path, position_embedding_type="learned").eval()
    text = "a good film but a bad ending " * 10
    with pytest.raises(SystemExit):
        cli.main(["predict", "--model", str(tmp_path), "--read-length", "100", text])
    assert "window_stride" in capsys.readouterr().err
    cli.main(["predict", "--model", str(tmp_path), "--read-length", "100", "--window-stride", "8", text])
    label, score, _ = capsys.readouterr().out.split("\t")
    tokens = AutoTokenizer.from_pretrained(tmp_path)(text)["input_ids"][:100]
    with torch.no_grad():
        expected = windows_by_hand(model, tokens, stride=8).softmax(dim=-1)
    assert label == f"LABEL_{int(expected.argmax())}" and float(score) == pytest.approx(float(expected.max()), abs=1e-3)


@pytest.mark.parametrize("train_window", ["start", "random"])
def test_a_run_with_read_length_scores_and_saves_whole_reviews_as_windows(tmp_path: Path, train_window: str) -> None:
    """Trained on 32-token windows (each review's first, or a random one), scored and saved to read 256 tokens
    as windows 16 apart: the run's test scores are what `evaluate_saved` measures on the saved folder (random
    training windows must not reach the scored splits), and the saved config reads 256 (the tokenizer holds no
    length of its own)."""
    experiment = load_experiment(SMOKE, [*SMOKE_TINY_MODEL, "limit_train=64", "limit_eval=32", "max_length=32",
                                         "read_length=256", "model.window_stride=16",
                                         "model.position_embedding_type=learned", "training.num_train_epochs=1",
                                         f"train_window={train_window}"])
    metrics = train(experiment, tmp_path)
    saved = HfAttnConfig.from_pretrained(tmp_path)
    assert (saved.read_length, saved.window_stride) == (256, 16)
    assert AutoTokenizer.from_pretrained(tmp_path).model_max_length > 10**20
    evaluated = evaluate_saved(tmp_path, dataset="sample", split="test", limit=32)
    assert evaluated["test_accuracy"] == pytest.approx(metrics["test_accuracy"])
    assert evaluated["test_loss"] == pytest.approx(metrics["test_loss"], rel=1e-5)


def test_read_length_past_learned_positions_needs_windows(tmp_path: Path) -> None:
    overrides = [*SMOKE_TINY_MODEL, "max_length=32", "read_length=256", "model.position_embedding_type=learned"]
    with pytest.raises(ExperimentConfigError, match="window_stride"):
        load_experiment(SMOKE, overrides)


@pytest.mark.parametrize(("key", "fix"), [("max_position_embeddings", "set `max_length`"),
                                          ("vocab_size", "the tokenizer's size"), ("pad_token_id", "[PAD] id"),
                                          ("read_length", "a top-level key")])
def test_model_fields_a_run_derives_are_refused_before_any_work(key: str, fix: str) -> None:
    with pytest.raises(ExperimentConfigError, match=rf"`{key}` is not set here: .*{re.escape(fix)}"):
        load_experiment(SMOKE, [*SMOKE_TINY_MODEL, f"model.{key}=256"])
