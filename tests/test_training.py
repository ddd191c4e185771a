"""Experiments end to end on the packaged sample: YAML validation, Trainer runs, resume, 2 processes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
import yaml
from helpers import REPO, SMOKE, SMOKE_TINY_MODEL, run_on_two_processes
from safetensors.torch import load_file
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    TrainerCallback,
)

from hf_attn.training import (
    ExperimentConfigError,
    cli_command,
    evaluate_saved,
    load_experiment,
    parse_override,
    train,
)

# Small enough for seconds per run: 256 training reviews, 64 for validation and test.
FAST = ["limit_train=256", "limit_eval=64", *SMOKE_TINY_MODEL]


def write_yaml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "experiment.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "message"), [
    ("name: x\nlearning_rate: 0.1\n", "unknown key(s) ['learning_rate']"),
    ("name: x\nmodel:\n  hidden_sise: 64\n", "unknown key `hidden_sise` for HfAttnConfig. Did you mean hidden_size"),
    ("name: x\ntraining:\n  learning_rte: 0.1\n", "unknown key `learning_rte` for TrainingArguments"),
    ("name: x\ntraining:\n  num_train_epochs: three\n", "`num_train_epochs` must be of type float"),
    ("name: x\nmax_length: '128'\n", "`max_length` must be like 128"),
    ("name: x\nmodel:\n  position_embedding_type: t5\n", "position_embedding_type"),
    ("name: x\nmodel: [1, 2]\n", "`model` must be a mapping"),
    ("- just\n- a list\n", "must hold a mapping"),
    ("name: [unclosed\n", "not valid YAML"),
    ("name: x\ntrain_window: end\n", "train_window must be one of ['random', 'start']"),
    ("name: x\nobjective: electra\n", "objective must be one of ['mlm', 'rtd']"),
    ("name: x\ntrain_window: random\ntraining:\n  train_sampling_strategy: group_by_length\n", "use one of the two"),
])
def test_bad_experiment_files_get_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    path = write_yaml(tmp_path, text)
    with pytest.raises(ExperimentConfigError) as excinfo:
        load_experiment(path)
    assert message in str(excinfo.value)
    assert str(path) in str(excinfo.value) or "YAML" in str(excinfo.value) or "mapping" in str(excinfo.value)


def test_overrides_are_parsed_as_yaml_and_checked(tmp_path: Path) -> None:
    experiment = load_experiment(SMOKE, ["training.learning_rate=3e-4", "model.position_embedding_type=alibi",
                                         "limit_train=10"])
    assert experiment.training["learning_rate"] == 3e-4 and experiment.limit_train == 10
    assert experiment.model["position_embedding_type"] == "alibi"
    with pytest.raises(ExperimentConfigError, match="key=value"):
        load_experiment(SMOKE, ["learning_rate"])
    # Only YAML 1.1's dot-less exponents become numbers; other number-like names stay what was typed.
    assert parse_override("training.learning_rate=3e-4") == (["training", "learning_rate"], 3e-4)
    assert parse_override("name=nan")[1] == "nan" and parse_override("name=inf")[1] == "inf"
    with pytest.raises(ExperimentConfigError, match="does not exist"):
        load_experiment(tmp_path / "missing.yaml")


@pytest.mark.parametrize(("program", "recorded"), [
    ("/venv/bin/hf-attn", "hf-attn train --config c.yaml x=1"),
    ("/repo/hf_attn/cli.py", "hf-attn train --config c.yaml x=1"),  # python -m hf_attn.cli
    ("/venv/bin/pytest", None),
    ("", None),  # an interactive interpreter
])
def test_a_run_records_the_command_that_reproduces_it(monkeypatch: pytest.MonkeyPatch, program: str,
                                                      recorded: str | None) -> None:
    monkeypatch.setattr("sys.argv", [program, "train", "--config", "c.yaml", "x=1"])
    assert cli_command() == recorded


def test_smoke_run_trains_saves_and_reloads(tmp_path: Path) -> None:
    experiment = load_experiment(SMOKE, FAST)
    metrics = train(experiment, tmp_path / "run", results_path=tmp_path / "results" / "smoke.json")
    for key in ("test_accuracy", "test_f1", "test_loss", "val_accuracy", "epochs", "train_runtime_s"):
        assert key in metrics
    assert metrics["n_train"] == 256 and metrics["n_test"] == 64 and metrics["epochs"] == pytest.approx(2.0)
    assert metrics["hardware"] == f"CPU, {torch.get_num_threads()} threads"  # CI has no GPU
    assert json.loads((tmp_path / "results" / "smoke.json").read_text())["test_loss"] == metrics["test_loss"]
    # A second code path: a fresh evaluation of the saved folder gives the recorded test numbers.
    again = evaluate_saved(tmp_path / "run", dataset="sample", split="test", limit=64)
    assert again["test_accuracy"] == pytest.approx(metrics["test_accuracy"])
    assert again["test_loss"] == pytest.approx(metrics["test_loss"], abs=1e-5)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "run")
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "run")
    assert model.config.vocab_size == len(tokenizer) and model.config.pad_token_id == tokenizer.pad_token_id


class StopAfterFirstCheckpoint(TrainerCallback):
    """Simulates a killed session: training ends right after the first checkpoint is written."""

    def on_save(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201 - TrainerCallback's signature
        raise KeyboardInterrupt


class SessionTimer(TrainerCallback):
    """Wall time of one train() call, from its start to its end or its first checkpoint."""

    def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201 - TrainerCallback's signature
        self.started, self.seconds = time.perf_counter(), None

    def on_save(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
        self.seconds = self.seconds or time.perf_counter() - self.started

    def on_train_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
        self.seconds = time.perf_counter() - self.started


def test_interrupted_run_resumes_to_the_same_result(tmp_path: Path) -> None:
    experiment = load_experiment(SMOKE, [*FAST, "evals_per_epoch=2"])
    straight = train(experiment, tmp_path / "straight")
    first, second = SessionTimer(), SessionTimer()
    with pytest.raises(KeyboardInterrupt):
        train(experiment, tmp_path / "interrupted", callbacks=[first, StopAfterFirstCheckpoint()])
    assert not (tmp_path / "interrupted" / "metrics.json").exists()
    resumed = train(experiment, tmp_path / "interrupted", resume=True, callbacks=[second])
    # Training time adds up the first session up to its checkpoint and the whole second session.
    assert resumed["train_runtime_s"] == pytest.approx(first.seconds + second.seconds, abs=0.5)
    assert second.seconds < resumed["train_runtime_s"]
    assert resumed["timed_from_step"] == straight["timed_from_step"] == 0
    assert resumed["optimizer_steps"] == straight["optimizer_steps"]
    assert resumed["test_loss"] == pytest.approx(straight["test_loss"], abs=1e-5)
    assert resumed["val_accuracy"] == pytest.approx(straight["val_accuracy"])
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        train(experiment, tmp_path / "never-started", resume=True)


def test_a_run_interrupted_before_rope_layout_existed_resumes_with_its_halves_pairs(tmp_path: Path) -> None:
    """Checkpoints saved before the field have no `rope_layout` and hold halves-paired weights; the YAML
    rebuilt today gives interleaved pairs. Resuming must switch the model to the checkpoint's pairing before
    the weights load, so that the run ends as an uninterrupted halves run does."""
    halves = load_experiment(SMOKE, [*FAST, "evals_per_epoch=2", "model.rope_layout=halves"])
    straight = train(halves, tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        train(halves, tmp_path / "interrupted", callbacks=[StopAfterFirstCheckpoint()])
    for config_file in (tmp_path / "interrupted").glob("checkpoint-*/config.json"):
        saved = json.loads(config_file.read_text())
        del saved["rope_layout"]
        config_file.write_text(json.dumps(saved))
    today = load_experiment(SMOKE, [*FAST, "evals_per_epoch=2"])
    assert "rope_layout" not in today.model  # the default, interleaved
    resumed = train(today, tmp_path / "interrupted", resume=True)
    assert resumed["test_loss"] == pytest.approx(straight["test_loss"], abs=1e-5)
    assert json.loads((tmp_path / "interrupted" / "config.json").read_text())["rope_layout"] == "halves"
    expected, actual = (load_file(tmp_path / run / "model.safetensors") for run in ("straight", "interrupted"))
    for name, value in expected.items():
        torch.testing.assert_close(actual[name], value, atol=1e-5, rtol=1e-4)


def test_random_windows_resume_to_the_same_result(tmp_path: Path) -> None:
    """Random training windows come from the generator Trainer checkpoints, so an interrupted run
    draws the same windows after resuming; and they change what the model learns (other result than
    training on the first tokens)."""
    overrides = [*FAST, "evals_per_epoch=2", "max_length=32"]
    experiment = load_experiment(SMOKE, [*overrides, "train_window=random"])
    straight = train(experiment, tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        train(experiment, tmp_path / "interrupted", callbacks=[StopAfterFirstCheckpoint()])
    resumed = train(experiment, tmp_path / "interrupted", resume=True)
    assert resumed["test_loss"] == pytest.approx(straight["test_loss"], abs=1e-5)
    assert resumed["experiment"]["train_window"] == "random"
    from_start = train(load_experiment(SMOKE, overrides), tmp_path / "from-start")
    assert from_start["test_loss"] != pytest.approx(straight["test_loss"], abs=1e-4)


def test_accelerate_launch_on_two_processes(tmp_path: Path) -> None:
    output = tmp_path / "ddp"
    run_on_two_processes(["train", "--config", str(SMOKE), "--output-dir", str(output), *FAST], tmp_path)
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["world_size"] == 2
    # 256 reviews, 2 processes x batch 32 = 64 per optimizer step, 2 epochs.
    assert metrics["optimizer_steps"] == 2 * 256 // 64
    # Metrics gathered across both processes equal a single-process evaluation of the saved model.
    single = evaluate_saved(output, dataset="sample", split="validation", limit=64)
    assert metrics["n_validation"] == 64
    assert single["validation_accuracy"] == pytest.approx(metrics["val_accuracy"])
    assert single["validation_loss"] == pytest.approx(metrics["val_loss"], abs=1e-4)


CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_every_shipped_config_is_valid(path: Path, tmp_path: Path) -> None:
    raw = yaml.safe_load(path.read_text())
    if raw.get("init_from") and not (REPO / raw["init_from"] / "config.json").is_file():
        # A fine-tuning config reads its pretrained folder, which exists only after `hf-attn pretrain`:
        # check that it says so, then check everything else in the file.
        with pytest.raises(ExperimentConfigError, match="holds no config.json"):
            load_experiment(path)
        raw.pop("init_from")
        experiment = load_experiment(write_yaml(tmp_path, yaml.safe_dump(raw)))
    else:
        experiment = load_experiment(path)
    assert experiment.name == path.stem


@pytest.mark.parametrize(("first", "second", "difference"), [
    ("absolute", "rope", {"model.position_embedding_type"}),
    ("pretrain-absolute", "pretrain-rope", {"model.position_embedding_type"}),
    ("absolute-pretrained", "rope-pretrained", {"init_from"}),
    ("absolute", "absolute-grouped", {"training.train_sampling_strategy"}),
    ("absolute-embed-scale", "rope-embed-scale", {"model.position_embedding_type"}),
    ("absolute", "absolute-embed-scale", {"model.scale_embeddings"}),
    ("rope", "rope-embed-scale", {"model.scale_embeddings"}),
    ("rope-embed-scale", "rope-windows", {"train_window"}),
    ("pretrain-rope", "pretrain-rope-embed-scale", {"model.scale_embeddings"}),
    ("rope-pretrained", "rope-embed-scale-pretrained", {"init_from"}),
    ("pretrain-absolute", "pretrain-absolute-embed-scale", {"model.scale_embeddings"}),
    ("pretrain-absolute-embed-scale", "pretrain-rope-embed-scale", {"model.position_embedding_type"}),
    ("absolute-embed-scale-pretrained", "rope-embed-scale-pretrained", {"init_from"}),
    ("pretrain-absolute-6k", "pretrain-rope-6k", {"init_from", "model.position_embedding_type"}),
    ("absolute-pretrained-6k", "rope-pretrained-6k", {"init_from"}),
    ("rope-embed-scale-pretrained", "rope-pretrained-6k", {"init_from", "model.dropout_implementation"}),
    ("pretrain-absolute-rtd", "pretrain-rope-rtd", {"model.position_embedding_type"}),
    ("pretrain-rope-embed-scale", "pretrain-rope-rtd",
     {"objective", "model.rtd_generator_layers", "model.rtd_loss_weight"}),  # the last two: their defaults
    ("absolute-rtd-pretrained", "rope-rtd-pretrained", {"init_from"}),
    ("rope-pretrained-6k", "rope-pretrained-6k-2-epochs", {"training.num_train_epochs"}),
    ("rope-embed-scale-pretrained", "rope-rtd-pretrained", {"init_from"}),
    ("pretrain-absolute-long", "pretrain-rope-long", {"model.position_embedding_type"}),
    ("absolute-pretrained-long", "rope-pretrained-long", {"init_from"}),
    ("rope-pretrained-6k", "rope-pretrained-long", {"init_from", "training.num_train_epochs"}),
    ("pretrain-absolute-12k", "pretrain-rope-12k", {"model.position_embedding_type"}),
    ("pretrain-rope-long", "pretrain-rope-12k", {"training.max_steps"}),
    ("absolute-pretrained-12k", "rope-pretrained-12k", {"init_from"}),
    ("rope-pretrained-long", "rope-pretrained-12k", {"init_from", "training.num_train_epochs"}),
])
def test_paired_configs_differ_only_in_what_they_compare(first: str, second: str, difference: set[str]) -> None:
    def flat(name: str) -> dict[str, object]:
        raw = yaml.safe_load((REPO / "configs" / f"{name}.yaml").read_text())
        raw.pop("name")
        return {f"{section}.{key}" if isinstance(values, dict) else section: value
                for section, values in raw.items()
                for key, value in (values.items() if isinstance(values, dict) else [(None, values)])}

    left, right = flat(first), flat(second)
    assert {key for key in left.keys() | right.keys() if left.get(key) != right.get(key)} == difference
