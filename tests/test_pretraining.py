"""Masked-LM pretraining: the corruption rule, chunking, the corpus, and pretrain -> fine-tune end to end."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
import torch
from helpers import SMOKE, SMOKE_TINY_MODEL, run_on_two_processes
from safetensors.torch import load_file
from transformers import AutoTokenizer, TrainerCallback, pipeline

from hf_attn.experiments.classification import train
from hf_attn.experiments.config import ExperimentConfigError, load_experiment
from hf_attn.experiments.data import load_imdb, load_unlabelled
from hf_attn.experiments.pretraining import (
    IGNORE_INDEX,
    MIN_CHUNK_TOKENS,
    MaskedLMCollator,
    chunk_texts,
    mask_tokens,
    masked_once,
    pretrain,
    pretraining_corpus,
    replaced_token_detection_metrics,
)
from hf_attn.modeling_hf_attn import HfAttnForReplacedTokenDetection
from hf_attn.publishing.cards import _pretraining_text, card_for_run
from hf_attn.week3 import train_week3_tokenizer

TINY = ["limit_train=96", "limit_eval=32", *SMOKE_TINY_MODEL]


class CaptureStart(TrainerCallback):
    """Copies the weights a run starts training from."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):  # noqa: ANN001, ANN201
        self.start = {name: value.detach().clone() for name, value in model.state_dict().items()}


@pytest.fixture(scope="module")
def tokenizer():  # noqa: ANN201 - a HfAttnTokenizerFast
    return train_week3_tokenizer(load_imdb("sample")["train"]["text"][:200], vocab_size=300, max_seq=128)


def test_mask_tokens_follows_bert_proportions_and_never_touches_padding() -> None:
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(0, 50, (400, 100), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[:, 80:] = 0  # 20 padding positions per row
    replacement_ids = torch.arange(0, 50)
    corrupted, labels = mask_tokens(input_ids, attention_mask, probability=0.15, mask_token_id=99,
                                    replacement_ids=replacement_ids, generator=generator)
    picked = labels != IGNORE_INDEX
    real = attention_mask.bool()
    assert not (picked & ~real).any() and torch.equal(corrupted[~real], input_ids[~real])
    assert torch.equal(labels[picked], input_ids[picked]) and torch.equal(corrupted[~picked], input_ids[~picked])
    share = picked.sum() / real.sum()
    assert abs(share - 0.15) < 0.01
    masked = (corrupted == 99) & picked
    kept = (corrupted == input_ids) & picked
    assert abs(masked.sum() / picked.sum() - 0.8) < 0.02
    # Kept: the 10% left alone plus the random draws that hit the original id (1 in 50 of 10%).
    assert abs(kept.sum() / picked.sum() - (0.1 + 0.1 / 50)) < 0.015
    assert ((corrupted[picked & ~masked] >= 0) & (corrupted[picked & ~masked] < 50)).all()


def test_every_sequence_predicts_at_least_one_real_token() -> None:
    input_ids = torch.tensor([[5, 6, 0, 0], [7, 0, 0, 0], [0, 0, 0, 0]])
    attention_mask = (input_ids != 0).long()
    _, labels = mask_tokens(input_ids, attention_mask, probability=1e-9, mask_token_id=1,
                            replacement_ids=torch.tensor([5, 6, 7]), generator=torch.Generator().manual_seed(0))
    picked = labels != IGNORE_INDEX
    assert picked[:2].sum(dim=1).tolist() == [1, 1] and not picked[2].any()
    assert not (picked & ~attention_mask.bool()).any()


def test_collator_masks_training_batches_and_only_pads_fixed_ones(tokenizer) -> None:  # noqa: ANN001
    collator = MaskedLMCollator(tokenizer, mlm_probability=0.5)
    assert collator.mask_token_id == tokenizer.pad_token_id  # Week 3 vocabularies have no mask token
    assert tokenizer.pad_token_id not in collator.replacement_ids.tolist()
    features = [{"input_ids": [3, 4, 5], "attention_mask": [1, 1, 1]}, {"input_ids": [6], "attention_mask": [1]}]
    batch = collator(features)
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["labels"][1, 1:].tolist() == [IGNORE_INDEX, IGNORE_INDEX] and (batch["labels"] != IGNORE_INDEX).any()
    fixed = [{"input_ids": [3, 9], "attention_mask": [1, 1], "labels": [-100, 4]},
             {"input_ids": [6], "attention_mask": [1], "labels": [6]}]
    batch = collator(fixed)
    assert batch["input_ids"].tolist() == [[3, 9], [6, tokenizer.pad_token_id]]
    assert batch["labels"].tolist() == [[-100, 4], [6, -100]]
    with pytest.raises(ValueError, match="mlm_probability"):
        MaskedLMCollator(tokenizer, mlm_probability=1.5)


def test_chunks_are_the_whole_review_in_order(tokenizer) -> None:  # noqa: ANN001
    texts = load_imdb("sample")["train"].select(range(20)).select_columns(["text"])
    chunks = chunk_texts(texts, tokenizer, chunk_length=32)
    rebuilt = [token for chunk in chunks["input_ids"] for token in chunk]
    # Independent reference: each review tokenized whole, minus a last piece too short to keep.
    expected = []
    for text in texts["text"]:
        ids = tokenizer(text, add_special_tokens=False, truncation=False)["input_ids"]
        tail = len(ids) % 32
        expected.extend(ids[: len(ids) - tail] if 0 < tail < MIN_CHUNK_TOKENS else ids)
    assert rebuilt == expected
    assert all(len(chunk) <= 32 for chunk in chunks["input_ids"])


def test_corpus_adds_unlabelled_reviews_and_never_evaluation_text(tmp_path: Path) -> None:
    splits = load_imdb("sample")
    labelled_only, full = tmp_path / "labelled-only", tmp_path / "full"
    for folder in (full, labelled_only):
        folder.mkdir()
        for name, split in (("train", splits["train"]), ("test", splits["test"])):
            split.to_parquet(str(folder / f"{name}-00000-of-00001.parquet"))
    assert load_unlabelled(str(labelled_only)) is None  # no unsupervised-*.parquet: nothing extra, no error
    unlabelled = datasets.Dataset.from_dict({"text": ["an unlabelled review", "another one"], "label": [-1, -1]})
    unlabelled.to_parquet(str(full / "unsupervised-00000-of-00001.parquet"))
    assert load_unlabelled(str(full))["text"] == ["an unlabelled review", "another one"]
    assert load_unlabelled("sample") is None

    experiment = load_experiment(SMOKE, [f"dataset={full}"])
    train_texts, validation_texts, n_unlabelled = pretraining_corpus(experiment)
    held_out = set(load_imdb(str(full))["validation"]["text"]) | set(load_imdb(str(full))["test"]["text"])
    assert n_unlabelled == 2 and train_texts["text"][-2:] == ["an unlabelled review", "another one"]
    assert not held_out & set(train_texts["text"])
    assert set(validation_texts["text"]) == set(load_imdb(str(full))["validation"]["text"])


@pytest.mark.slow
def test_pretrained_encoder_starts_the_classifier(tmp_path: Path) -> None:
    pretrained = tmp_path / "pretrained"
    experiment = load_experiment(SMOKE, [*TINY, "training.max_steps=4", "training.eval_steps=2"])
    metrics = pretrain(experiment, pretrained, results_path=tmp_path / "pretrain.json")
    assert metrics["optimizer_steps"] == 4 and metrics["chunks_seen"] == 4 * 32
    assert 0 < metrics["eval_mlm_loss"] < 2 * torch.log(torch.tensor(300.0)).item()
    weights = load_file(pretrained / "model.safetensors")
    # A classifier built on the encoder (its head new) answers with transformers' placeholder names, not the
    # task's: nothing in the pretrained folder looks like a trained classifier's labels.
    classify = pipeline("text-classification", model=str(pretrained))
    assert classify("a good film")[0]["label"] in {"LABEL_0", "LABEL_1"}

    capture = CaptureStart()
    fine_tune = load_experiment(SMOKE, [*TINY, f"init_from={pretrained}", "training.num_train_epochs=1"])
    result = train(fine_tune, tmp_path / "classifier", callbacks=[capture])
    encoder = {name: value for name, value in weights.items() if name.startswith("model.")}
    assert encoder and all(torch.equal(capture.start[name], value) for name, value in encoder.items())
    assert result["vocab_size"] == metrics["vocab_size"]
    assert json.loads((tmp_path / "classifier" / "config.json").read_text())["id2label"] == {"0": "neg", "1": "pos"}
    assert result["pretraining"]["eval_mlm_loss"] == metrics["eval_mlm_loss"]
    card = card_for_run(tmp_path / "classifier", "someone/rope-pretrained").content
    assert "## Pretraining" in card and f"masked-LM loss {metrics['eval_mlm_loss']:.3f}" in card
    assert "4 steps over 128 chunks" in card

    with pytest.raises(ExperimentConfigError, match="pretrained with position_embedding_type='rope'"):
        load_experiment(SMOKE, [f"init_from={pretrained}", "model.position_embedding_type=alibi"])
    with pytest.raises(ExperimentConfigError, match="holds no config.json"):
        load_experiment(SMOKE, [f"init_from={tmp_path}"])


def test_pretraining_continues_a_pretrained_folder(tmp_path: Path) -> None:
    """init_from in a pretraining experiment starts from every pretrained weight (masked-LM head too), and
    the record and the model card add up both stages."""
    first = pretrain(load_experiment(SMOKE, [*TINY, "training.max_steps=4", "training.eval_steps=4"]),
                     tmp_path / "first")
    weights = load_file(tmp_path / "first" / "model.safetensors")

    capture = CaptureStart()
    continued = load_experiment(SMOKE, [*TINY, f"init_from={tmp_path / 'first'}", "training.max_steps=2",
                                        "training.eval_steps=2", "seed=43"])
    second = pretrain(continued, tmp_path / "second", callbacks=[capture])
    assert any(name.startswith("head_norm") or name.startswith("dense") for name in weights)
    assert all(torch.equal(capture.start[name], value) for name, value in weights.items())
    assert second["continued_from"]["eval_mlm_loss"] == first["eval_mlm_loss"]
    text = _pretraining_text(second)
    assert "6 steps over 192 chunks" in text and "in 2 runs" in text
    assert text.count("see its metrics.json") == 2  # both stages' commands (None when run from Python)


def test_replaced_token_detection_pretrains_an_encoder_a_classifier_starts_from(tmp_path: Path) -> None:
    """objective=rtd trains ELECTRA's pair; the generator starts from the encoder's token table, the
    classifier loads the encoder (not the generator), and the record and card report detection."""
    capture = CaptureStart()
    experiment = load_experiment(SMOKE, [*TINY, "pretraining.objective=rtd", "training.max_steps=2",
                                         "training.eval_steps=2"])
    metrics = pretrain(experiment, tmp_path / "rtd", callbacks=[capture])
    assert torch.equal(capture.start["generator.model.embed_tokens.weight"], capture.start["model.embed_tokens.weight"])
    assert metrics["objective"] == "rtd" and 0 < metrics["eval_replaced_share"] < 0.15
    assert 0 <= metrics["eval_detection_accuracy"] <= 1 and metrics["eval_generator_mlm_loss"] > 0
    again = pretrain(experiment, tmp_path / "rtd-again")  # same seed, same fixed-seed evaluation
    assert again["eval_detection_loss"] == metrics["eval_detection_loss"]
    weights = load_file(tmp_path / "rtd" / "model.safetensors")
    assert any(name.startswith("generator.") for name in weights)

    start = CaptureStart()
    fine_tune = load_experiment(SMOKE, [*TINY, f"init_from={tmp_path / 'rtd'}", "training.max_steps=1"])
    result = train(fine_tune, tmp_path / "classifier", callbacks=[start])
    encoder = {name: value for name, value in weights.items() if name.startswith("model.")}
    assert all(torch.equal(start.start[name], value) for name, value in encoder.items())
    assert not any(name.startswith("generator.") for name in start.start)
    text = _pretraining_text(result["pretraining"])
    assert "replaced-token detection" in text and f"detection accuracy {metrics['eval_detection_accuracy']:.3f}" in text


@pytest.mark.slow
def test_replaced_token_detection_training_does_not_depend_on_how_often_it_is_evaluated(tmp_path: Path) -> None:
    """Evaluating samples the generator's replacements; those draws must not come out of the random
    stream that masks training batches, or a run evaluated every step would train on other masks than
    one evaluated once. Same seed, evaluation every step vs at the end: the same weights."""
    weights = {}
    for eval_steps in (1, 4):
        overrides = [*TINY, "pretraining.objective=rtd", "training.max_steps=4", f"training.eval_steps={eval_steps}"]
        pretrain(load_experiment(SMOKE, overrides), tmp_path / str(eval_steps))
        weights[eval_steps] = load_file(tmp_path / str(eval_steps) / "model.safetensors")
    assert all(torch.equal(weights[1][name], weights[4][name]) for name in weights[4])


@pytest.mark.slow
def test_replaced_token_detection_metrics_cover_the_whole_evaluation_set_on_two_processes(tmp_path: Path) -> None:
    """Under `accelerate launch` each process holds a shard of Trainer's evaluation dataloader; the
    recorded detection metrics are still those of the saved model on every evaluation chunk."""
    # float32: what is compared is the processes' shards against the whole set, not bf16's rounding.
    overrides = [*TINY, "pretraining.objective=rtd", "training.max_steps=2", "training.eval_steps=2", "precision=fp32"]
    output = tmp_path / "rtd"
    run_on_two_processes(["pretrain", "--config", str(SMOKE), "--output-dir", str(output), *overrides], tmp_path)
    recorded = json.loads((output / "metrics.json").read_text())
    assert recorded["world_size"] == 2

    experiment = load_experiment(SMOKE, overrides)
    tokenizer = AutoTokenizer.from_pretrained(output)
    collator = MaskedLMCollator(tokenizer, experiment.pretraining.mlm_probability)
    validation = pretraining_corpus(experiment)[1]
    chunks = masked_once(chunk_texts(validation, tokenizer, experiment.max_length), collator)
    assert recorded["n_eval_chunks"] == len(chunks)
    model = HfAttnForReplacedTokenDetection.from_pretrained(output)
    batches = torch.utils.data.DataLoader(chunks, batch_size=8, collate_fn=collator)  # TrainingArguments' default
    single = replaced_token_detection_metrics(model, batches)
    for name, value in single.items():
        assert recorded[name] == pytest.approx(value, abs=1e-5), name
