"""What `hf-attn` says about a `--model` that is not a model: one line naming it, exit status 2."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_config_kwargs
from transformers import pipeline

from hf_attn import HfAttnConfig, HfAttnForSequenceClassification, cli
from hf_attn.week3 import train_week3_tokenizer

SAVED = Path(__file__).parent / "fixtures" / "pre-1.0" / "alibi-gqa"


@pytest.mark.parametrize("command", ["predict", "evaluate", "probe", "card", "push"])
@pytest.mark.parametrize(("folder", "message"), [("missing", "does not exist"), ("empty", "holds no config.json")])
def test_a_model_folder_that_is_not_a_model_is_a_usage_error(
    command: str, folder: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    extra = {"predict": ["some text"], "card": ["--repo-id", "a/b", "--output", "x.md"], "push": ["--repo-id", "a/b"]}
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--model", str(tmp_path / folder), *extra.get(command, [])])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert str(tmp_path / folder) in error and message in error
    assert "Traceback" not in error


@pytest.mark.parametrize("command", ["predict", "evaluate", "probe"])
def test_a_classifier_folder_without_its_tokenizer_is_a_usage_error(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--model", str(SAVED), *(["some text"] if command == "predict" else [])])
    assert exit_info.value.code == 2
    assert "holds no tokenizer.json" in capsys.readouterr().err


@pytest.mark.parametrize("value", [str(SAVED), "someone/hf-attn-imdb-rope"])
def test_a_saved_folder_or_a_hub_repo_id_passes(value: str) -> None:
    assert cli.model_folder(value) == value


def save_tiny_classifier(folder: Path) -> HfAttnForSequenceClassification:
    """A 2-layer classifier and a Week 3 tokenizer trained on a few words, saved to `folder`."""
    tokenizer = train_week3_tokenizer(["a good film", "a bad film", "good good bad"] * 5, vocab_size=270, max_seq=16)
    config = HfAttnConfig(**tiny_config_kwargs(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                               max_position_embeddings=16))
    torch.manual_seed(0)
    model = HfAttnForSequenceClassification(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model


def test_a_truncated_weights_file_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    save_tiny_classifier(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["predict", "--model", str(tmp_path), "a good film"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "truncated or corrupt" in error and "Traceback" not in error


def test_empty_and_whitespace_texts_are_classified_by_the_bias_through_pipeline_and_predict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty review has no tokens: `pipeline` and `hf-attn predict` return the label the classifier's
    bias alone gives, with softmax(bias) as its score, instead of crashing."""
    model = save_tiny_classifier(tmp_path)
    expected = model.classifier.bias.softmax(dim=-1).max().item()
    classify = pipeline("text-classification", model=str(tmp_path), tokenizer=str(tmp_path))
    for text in ("", "   "):
        assert classify(text)[0]["score"] == pytest.approx(expected, abs=1e-6)
    cli.main(["predict", "--model", str(tmp_path), "", "a good film"])
    first_line = capsys.readouterr().out.splitlines()[0]
    assert first_line.split("\t")[1] == f"{expected:.3f}"
