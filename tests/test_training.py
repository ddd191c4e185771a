"""Classifier runs end to end on the packaged sample: metrics, Trainer runs, resume, 2 processes."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import SMOKE, SMOKE_TINY_MODEL, run_on_two_processes, tiny_config_kwargs
from safetensors.torch import load_file, save_file
from sklearn.metrics import accuracy_score, f1_score
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    EvalPrediction,
    TrainerCallback,
)

from hf_attn import HfAttnConfig, HfAttnForMaskedLM, HfAttnForReplacedTokenDetection, cli
from hf_attn.experiments.classification import compute_metrics, evaluate_saved, train
from hf_attn.experiments.config import load_experiment
from hf_attn.experiments.records import EXPERIMENT_RECORD, cli_command
from hf_attn.experiments.run import build_model, load_tokenizer, say_without_dan
from hf_attn.week3 import save_week3, train_week3_tokenizer

# Small enough for seconds per run: 256 training reviews, 64 for validation and test.
FAST = ["limit_train=256", "limit_eval=64", *SMOKE_TINY_MODEL]


@pytest.mark.parametrize("seed", range(3))
def test_accuracy_and_f1_agree_with_scikit_learn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    logits, labels = rng.normal(size=(300, 2)), rng.integers(0, 2, size=300)
    predicted = logits.argmax(axis=-1)
    metrics = compute_metrics(EvalPrediction(predictions=logits, label_ids=labels))
    assert metrics["accuracy"] == pytest.approx(accuracy_score(labels, predicted))
    assert metrics["f1"] == pytest.approx(f1_score(labels, predicted))
    no_positives = EvalPrediction(predictions=np.tile([1.0, 0.0], (4, 1)), label_ids=np.zeros(4, dtype=int))
    assert compute_metrics(no_positives) == {"accuracy": 1.0, "f1": f1_score([0] * 4, [0] * 4, zero_division=0)}


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


@pytest.mark.parametrize(("arguments", "reproducing"), [
    ("pretrain --config c.yaml x=1 --output-dir r --max-time 60 --resume",
     "hf-attn pretrain --config c.yaml x=1 --output-dir r"),
    ("train --max-time=30 --continue-from runs/x-step2960 --config c.yaml", "hf-attn train --config c.yaml"),
    ("train --config c.yaml", "hf-attn train --config c.yaml"),
])
def test_a_run_records_the_command_that_computes_it_whole(monkeypatch: pytest.MonkeyPatch, arguments: str,
                                                          reproducing: str) -> None:
    """A stage's --resume, --max-time and --continue-from say how it ran, not what it computes: on a fresh machine
    the recorded command must run the whole run (--resume would find nothing to continue)."""
    monkeypatch.setattr("sys.argv", ["/venv/bin/hf-attn", *arguments.split()])
    assert cli_command(stage_options=False) == reproducing
    monkeypatch.setattr("sys.argv", ["/venv/bin/hf-attn", "train", "name=it's", "--resume"])  # a quote in a value
    assert cli_command(stage_options=False) == "hf-attn train name=it's"
    monkeypatch.setattr("sys.argv", ["/venv/bin/pytest", *arguments.split()])
    assert cli_command(stage_options=False) is None


def test_smoke_run_trains_saves_and_reloads(tmp_path: Path) -> None:
    experiment = load_experiment(SMOKE, FAST)
    metrics = train(experiment, tmp_path / "run", results_path=tmp_path / "results" / "smoke.json")
    for key in ("test_accuracy", "test_f1", "test_loss", "val_accuracy", "epochs", "train_runtime_s"):
        assert key in metrics
    assert metrics["n_train"] == 256 and metrics["n_test"] == 64 and metrics["epochs"] == pytest.approx(2.0)
    # CI has no GPU: the record names the CPU as /proc/cpuinfo does, and the threads the run used.
    model = next((line.partition(":")[2].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), "CPU") if Path("/proc/cpuinfo").is_file() else "CPU"
    threads = torch.get_num_threads()
    assert metrics["hardware"].startswith(model)
    assert metrics["hardware"].endswith(f", {threads} thread{'s' if threads > 1 else ''}")
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_resumed_run_keeps_the_architecture_its_checkpoint_was_trained_with(tmp_path: Path) -> None:
    """Resuming builds the model from the checkpoint's config, not from the experiment as it reads now: a run
    interrupted with the RoPE channel layout that is not the default, under an older default (its record, like its
    file, does not name the layout), ends as its uninterrupted twin, in that layout."""
    other_layout = next(layout for layout in ("halves", "interleaved") if layout != HfAttnConfig().rope_layout)
    trained = load_experiment(SMOKE, [*FAST, "evals_per_epoch=2", f"model.rope_layout={other_layout}"])
    straight = train(trained, tmp_path / "straight")
    with pytest.raises(KeyboardInterrupt):
        train(trained, tmp_path / "interrupted", callbacks=[StopAfterFirstCheckpoint()])
    for record in (tmp_path / "interrupted").glob(f"checkpoint-*/{EXPERIMENT_RECORD}"):
        record.write_text(json.dumps({key: value for key, value in json.loads(record.read_text()).items()
                                      if key != "model.rope_layout"}))
    resumed = train(load_experiment(SMOKE, [*FAST, "evals_per_epoch=2"]), tmp_path / "interrupted", resume=True)
    assert resumed["test_loss"] == pytest.approx(straight["test_loss"], abs=1e-5)
    assert json.loads((tmp_path / "interrupted" / "config.json").read_text())["rope_layout"] == other_layout
    expected, actual = (load_file(tmp_path / run / "model.safetensors") for run in ("straight", "interrupted"))
    for name, value in expected.items():
        torch.testing.assert_close(actual[name], value, atol=1e-5, rtol=1e-4)


@pytest.mark.slow
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


@pytest.mark.slow
def test_accelerate_launch_on_two_processes(tmp_path: Path) -> None:
    output = tmp_path / "ddp"
    # float32: what is compared is how the processes' metrics are gathered, not bf16's rounding of two batchings.
    run_on_two_processes(["train", "--config", str(SMOKE), "--output-dir", str(output), *FAST, "precision=fp32"],
                         tmp_path)
    metrics = json.loads((output / "metrics.json").read_text())
    assert metrics["world_size"] == 2
    # 256 reviews, 2 processes x batch 32 = 64 per optimizer step, 2 epochs.
    assert metrics["optimizer_steps"] == 2 * 256 // 64
    # Metrics gathered across both processes equal a single-process evaluation of the saved model.
    single = evaluate_saved(output, dataset="sample", split="validation", limit=64, precision="fp32")
    assert metrics["n_validation"] == 64
    assert single["validation_accuracy"] == pytest.approx(metrics["val_accuracy"])
    assert single["validation_loss"] == pytest.approx(metrics["val_loss"], abs=1e-4)


def test_a_folder_holding_a_run_needs_resume_or_overwrite_and_one_writer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rerunning into a run folder would mix the older run's checkpoints with the new one's: it is an
    error naming --resume and --overwrite; --overwrite deletes them first; a folder another process holds
    (an flock, as a second `hf-attn train` takes) is refused, and a lock file left by a process that
    ended does not block."""
    import fcntl

    from hf_attn import cli
    from hf_attn.experiments.folders import LOCK_FILE, RunFolderError

    folder = tmp_path / "run"
    (folder / "checkpoint-999").mkdir(parents=True)  # what an older run left
    (folder / "metrics.json").write_text("{}")
    experiment = load_experiment(SMOKE, FAST)
    with pytest.raises(RunFolderError, match="already holds a run .*--resume to continue it, or --overwrite"):
        train(experiment, folder)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--config", str(SMOKE), "--output-dir", str(folder), *FAST])
    assert exit_info.value.code == 2 and "--overwrite" in capsys.readouterr().err
    with pytest.raises(RunFolderError, match="pass one"):
        train(experiment, folder, resume=True, overwrite=True)
    with open(folder / LOCK_FILE, "w") as other_process:
        fcntl.flock(other_process, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(RunFolderError, match="another process is writing"):
            train(experiment, folder, overwrite=True)
    metrics = train(experiment, folder, overwrite=True)  # the lock file is still there, released
    assert not (folder / "checkpoint-999").exists()
    assert json.loads((folder / "metrics.json").read_text())["test_loss"] == metrics["test_loss"]


def save_pretraining_folder(folder: Path) -> None:
    """A masked-LM folder of the smoke experiment's tiny shape (64 positions) with a tokenizer that reads 16 tokens,
    as `init_from` reads it."""
    tokenizer = train_week3_tokenizer(["a good film", "a bad film"] * 5, vocab_size=270, max_seq=16)
    config = HfAttnConfig(**tiny_config_kwargs(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                               max_position_embeddings=64))
    HfAttnForMaskedLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


@pytest.mark.parametrize("source", ["week3", "init_from"])
def test_a_run_reads_the_length_it_trains_at_and_its_tokenizer_carries_none(source: str, tmp_path: Path) -> None:
    """A Week 3 folder's max_seq and a pretraining run's length (16 here) are not the run's max_length (48): the
    tokenizer a run trains with and saves cuts nothing (the same ids as the folder's, every token), and the model
    it builds reads 48 tokens, what it was trained on (its config's `read_length`)."""
    save_pretraining_folder(tmp_path)
    folder_tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    if source == "week3":
        save_week3(folder_tokenizer, tmp_path / "week3")
    folder = tmp_path / "week3" if source == "week3" else tmp_path
    experiment = load_experiment(SMOKE, [*SMOKE_TINY_MODEL, f"{source}={folder}", "max_length=48"])
    tokenizer = load_tokenizer(experiment, train_texts=[])
    text = "a good film " * 20
    assert tokenizer(text, truncation=True)["input_ids"] == folder_tokenizer(text)["input_ids"]
    assert len(folder_tokenizer(text)["input_ids"]) > 48
    assert build_model(experiment, tokenizer).config.read_length == 48


@pytest.mark.parametrize("scale_embeddings", [False, True])
@pytest.mark.parametrize("model_class", [HfAttnForMaskedLM, HfAttnForReplacedTokenDetection])
def test_a_learned_position_table_starts_at_the_scale_of_the_dan_tokens(
    sample_dir: Path, model_class: type, scale_embeddings: bool
) -> None:
    """Beside the DAN's token vectors (N(0, 1) rows) a learned table drawn at initializer_range (0.02) would carry
    about 1/50 of the signal: each table a fresh model learns with (the ELECTRA generator's too) starts at the
    standard deviation of the DAN's rows, whatever the model's embedding scale."""
    dan = torch.load(sample_dir / "models" / "imdb_embedding_layer.pt", weights_only=True)["weight"]
    experiment = load_experiment(SMOKE, [f"week3={sample_dir}", "model.position_embedding_type=learned",
                                         "model.hidden_size=384", f"model.scale_embeddings={scale_embeddings}",
                                         "model.num_hidden_layers=1", "model.intermediate_size=64", "max_length=64"])
    model = build_model(experiment, load_tokenizer(experiment, train_texts=[]), model_class)
    tables = [module.weight.detach() for name, module in model.named_modules() if name.endswith("positions.embeddings")]
    assert len(tables) == (2 if model_class is HfAttnForReplacedTokenDetection else 1)
    for table in tables:
        assert float(table.std()) == pytest.approx(float(dan.std()), rel=0.05)
        assert abs(float(table.mean())) < 0.05


def test_a_pretrained_encoder_missing_weights_is_an_error_naming_them(tmp_path: Path) -> None:
    """Fine-tuning from `init_from` may start only the classifier head afresh: a pretraining folder whose encoder
    lacks a layer is refused, naming its weights, instead of training that layer from a random init."""
    save_pretraining_folder(tmp_path)
    experiment = load_experiment(SMOKE, [*SMOKE_TINY_MODEL, f"init_from={tmp_path}", "max_length=64"])
    tokenizer = load_tokenizer(experiment, train_texts=[])
    weights = load_file(tmp_path / "model.safetensors")
    model = build_model(experiment, tokenizer)  # the whole encoder is there: only the head is new
    assert all(torch.equal(model.state_dict()[name], value) for name, value in weights.items()
               if name.startswith("model."))
    save_file({name: value for name, value in weights.items() if not name.startswith("model.layers.1.")},
              tmp_path / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(ValueError, match=r"missing model\.layers\.1\..*\(\d+ in all\)"):
        build_model(experiment, tokenizer)


def test_scoring_a_finished_run_does_not_set_off_early_stopping(tmp_path: Path) -> None:
    """The validation and test scores after training are evaluations too; early stopping, done by then, must
    not answer them with "did not find eval_loss so early stopping is disabled"."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    transformers_logger = logging.getLogger("transformers")
    transformers_logger.addHandler(handler)
    try:
        metrics = train(load_experiment(SMOKE, [*FAST, "evals_per_epoch=2", "early_stopping_patience=2"]),
                        tmp_path / "run")
    finally:
        transformers_logger.removeHandler(handler)
    assert "test_accuracy" in metrics
    assert [record.getMessage() for record in records if "early stopping" in record.getMessage()] == []


def test_a_run_asked_for_the_dan_embedding_without_one_says_so_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`init_embedding_from_dan` (the default) without a Week 3 folder, or with one that lacks the embedding, trains
    from a random token table: the run says so, naming --week3 and init_embedding_from_dan=false; silent when asked
    not to start from the DAN, and on the command line before any training."""
    tokenizer = train_week3_tokenizer(["a good film", "a bad film"] * 50, vocab_size=300)
    say_without_dan(load_experiment(SMOKE), tokenizer)
    error = capsys.readouterr().err
    assert len(error.splitlines()) == 1 and f"byte-level BPE of {len(tokenizer)} tokens" in error
    assert "--week3 DIR" in error and "init_embedding_from_dan=false" in error
    save_week3(tokenizer, tmp_path / "week3")  # the tokenizer alone: no models/imdb_embedding_layer.pt
    say_without_dan(load_experiment(SMOKE, [f"week3={tmp_path / 'week3'}"]), tokenizer)
    assert f"{tmp_path / 'week3' / 'models' / 'imdb_embedding_layer.pt'} is absent" in capsys.readouterr().err
    say_without_dan(load_experiment(SMOKE, ["init_embedding_from_dan=false"]), tokenizer)
    assert capsys.readouterr().err == ""
    cli.main(["train", "--config", str(SMOKE), *FAST, "limit_train=64", "training.num_train_epochs=1",
              "--output-dir", str(tmp_path / "run")])
    assert "init_embedding_from_dan: no Week 3 folder (--week3)" in capsys.readouterr().err


def test_evaluate_scores_every_row_of_a_file_with_split_all(run_dir: Path, tmp_path: Path) -> None:
    """`split="all"` scores every row of a file the model never saw, where `test` is the 10% cut a file without a test
    split gets: its accuracy and loss are the row-weighted means of the three splits' own (a second code path)."""
    import pandas

    from hf_attn.experiments.data import load_sample

    rows = load_sample()["test"].select(range(40))
    path = tmp_path / "other.csv"
    short = [text[:300] for text in rows["text"]]  # the tiny classifier reads long texts in one slow pass
    pandas.DataFrame({"text": short, "label": ["neg", "pos"] * 20}).to_csv(path, index=False)
    everything = evaluate_saved(run_dir, dataset=str(path), split="all", precision="fp32")
    parts = {split: evaluate_saved(run_dir, dataset=str(path), split=split, precision="fp32")
             for split in ("train", "validation", "test")}
    sizes = {split: scores[f"{split}_reviews"] for split, scores in parts.items()}
    assert everything["all_reviews"] == sum(sizes.values()) == 40 and sizes["test"] < 40
    for metric in ("accuracy", "loss"):
        weighted = sum(parts[split][f"{split}_{metric}"] * size for split, size in sizes.items()) / 40
        assert everything[f"all_{metric}"] == pytest.approx(weighted, rel=1e-5)


def test_evaluate_matches_labels_by_name_in_any_order(run_dir: Path, tmp_path: Path) -> None:
    """A model whose labels are ("pos", "neg") scored on a file labelled neg / pos (whose names sort the other way)
    matches each row's name to the model's id of it, as the pipeline's predicted names do: by position, every
    prediction would count as its opposite."""
    import shutil

    import pandas
    from transformers import pipeline

    from hf_attn.experiments.data import load_sample

    model_dir = tmp_path / "model"
    shutil.copytree(run_dir, model_dir, ignore=shutil.ignore_patterns("checkpoint-*"))
    config = json.loads((model_dir / "config.json").read_text())
    config.update(id2label={"0": "pos", "1": "neg"}, label2id={"pos": 0, "neg": 1})
    (model_dir / "config.json").write_text(json.dumps(config))
    texts = [text[:300] for text in load_sample()["test"].select(range(40))["text"]]
    predicted = [answer["label"] for answer in pipeline("text-classification", model=str(model_dir))(texts)]
    flipped = {"pos": "neg", "neg": "pos"}
    labels = predicted[:30] + [flipped[name] for name in predicted[30:]]  # 30 of 40 agree with the model
    path = tmp_path / "labelled.csv"
    pandas.DataFrame({"text": texts, "label": labels}).to_csv(path, index=False)
    scores = evaluate_saved(model_dir, dataset=str(path), split="all", precision="fp32")
    assert scores["all_accuracy"] == pytest.approx(0.75)
