"""Runs in stages (--max-time, --resume, --continue-from) and the precision runs compute in."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from helpers import SMOKE, SMOKE_TINY_MODEL
from safetensors.torch import load_file
from transformers import TrainerCallback

from hf_attn import cli
from hf_attn.experiments import stages
from hf_attn.experiments.classification import train
from hf_attn.experiments.config import ExperimentConfigError, load_experiment
from hf_attn.experiments.stages import REWARM_SHARE, check_max_time
from hf_attn.publishing.checkpoint import write_checkpoint
from hf_attn.runtime import precision
from hf_attn.runtime.precision import PrecisionError, resolve_precision

# 256 training reviews in batches of 32: 8 steps an epoch, 16 in all, a checkpoint every 4.
STAGED = ["limit_train=256", "limit_eval=64", "evals_per_epoch=2", "precision=fp32", *SMOKE_TINY_MODEL]
A_MOMENT = 1e-6  # minutes: a --max-time that every run passes at its first step


class LearningRates(TrainerCallback):
    """The learning rate each optimizer step uses, by the step's number (1 for the first)."""

    def __init__(self) -> None:
        self.by_step: dict[int, float] = {}

    def on_step_begin(self, args, state, control, optimizer=None, **kwargs):  # noqa: ANN001, ANN201
        self.by_step[state.global_step + 1] = optimizer.param_groups[0]["lr"]


class AutocastDtypes(TrainerCallback):
    """The dtype of the classifier head's output at each training step (bfloat16 under bf16 autocast)."""

    def __init__(self) -> None:
        self.seen: set[torch.dtype] = set()

    def on_train_begin(self, args, state, control, model=None, **kwargs):  # noqa: ANN001, ANN201
        model.classifier.register_forward_hook(lambda module, inputs, output: self.seen.add(output.dtype))


def cosine_with_warmup(step: int, total: int, warmup: int) -> float:
    """The learning-rate factor of step index `step` (0-based) of a linear warm-up then a cosine to 0."""
    if step < warmup:
        return step / warmup
    return 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / (total - warmup)))


def test_max_time_must_be_a_positive_number_of_minutes(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="--max-time must be a positive number of minutes"):
            check_max_time(bad)
    check_max_time(None)
    check_max_time(0.5)
    for bad in ("0", "-5", "soon"):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["train", "--config", str(SMOKE), "--max-time", bad])
        assert exit_info.value.code == 2
        error = capsys.readouterr().err
        assert "--max-time: expected a number of minutes above 0" in error and "Traceback" not in error


def test_a_stopped_stage_resumes_to_the_result_of_a_run_never_stopped(tmp_path: Path) -> None:
    experiment = load_experiment(SMOKE, STAGED)
    straight = train(experiment, tmp_path / "straight")
    stopped = train(experiment, tmp_path / "staged", max_time=A_MOMENT)
    assert stopped["stage"] == "stopped" and stopped["step"] == 1 and stopped["max_steps"] == 16
    assert not (tmp_path / "staged" / "metrics.json").exists()  # no scores for a stage that stopped
    for folder in (tmp_path / "staged", tmp_path / "staged" / "checkpoint-1"):
        assert json.loads((folder / "stage.json").read_text())["step"] == 1
    resumed = train(experiment, tmp_path / "staged", resume=True)
    assert resumed["optimizer_steps"] == straight["optimizer_steps"] == 16
    assert resumed["test_loss"] == pytest.approx(straight["test_loss"], abs=1e-5)
    assert resumed["val_accuracy"] == pytest.approx(straight["val_accuracy"])


def test_a_resume_refuses_settings_other_than_the_runs_and_takes_those_of_the_session(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The resumed model and its training state are the checkpoint's: a width, a learning rate or a tokenizer other
    than the run's would be recorded in metrics.json but not used, so the resume is refused in one line naming each
    setting with both values and the way out. How the session saves and logs, and its --max-time, may change."""
    run = tmp_path / "run"
    train(load_experiment(SMOKE, STAGED), run, max_time=A_MOMENT)
    capsys.readouterr()
    changed = [*STAGED, "model.hidden_size=48", "training.learning_rate=0.01", "tokenizer_vocab_size=500"]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["train", "--config", str(SMOKE), *changed, "--output-dir", str(run), "--resume"])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error and error.startswith("hf-attn train: error: --resume:")
    for phrase in ("model.hidden_size 32 in the run, 48 now", "training.learning_rate 0.001 in the run, 0.01 now",
                   "tokenizer_vocab_size 300 in the run, 500 now", "--overwrite", "--output-dir"):
        assert phrase in error
    session = load_experiment(SMOKE, [*STAGED, "training.save_total_limit=1", "training.logging_steps=1"])
    resumed = train(session, run, resume=True, max_time=A_MOMENT)
    assert resumed["step"] == 2 and resumed["experiment"]["model"]["hidden_size"] == 32


class LateClock(TrainerCallback):
    """The time as `StageLimit` reads it (`stages.time`): this machine's until step `at` ends, then a day later."""

    def __init__(self, at: int) -> None:
        self.at, self.late = at, False

    def time(self) -> float:
        return time.time() + (86400.0 if self.late else 0.0)

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001, ANN201
        self.late = state.global_step >= self.at


def test_a_stage_stopped_after_a_best_checkpoint_keeps_its_own_under_a_limit_of_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `save_total_limit: 1`, Trainer deletes all but the best checkpoint when train() ends; the checkpoint a
    stage stops with (step 6, after the best at step 4) is the one stage.json names and the next stage resumes;
    the stage that finishes the run leaves the best alone, as a run without stages does."""
    experiment = load_experiment(SMOKE, [*STAGED, "training.save_total_limit=1", "early_stopping_patience=null"])
    clock = LateClock(at=6)
    monkeypatch.setattr(stages, "time", SimpleNamespace(time=clock.time))
    stopped = train(experiment, tmp_path / "staged", max_time=60.0, callbacks=[clock])
    assert stopped["step"] == 6 and Path(stopped["checkpoint"]).name == "checkpoint-6"
    assert json.loads((Path(stopped["checkpoint"]) / "stage.json").read_text())["step"] == 6
    monkeypatch.undo()
    rates = LearningRates()
    resumed = train(experiment, tmp_path / "staged", resume=True, max_time=60.0, callbacks=[rates])
    assert sorted(rates.by_step) == list(range(7, 17)) and resumed["optimizer_steps"] == 16
    # The stage that ends within its time leaves what the limit of 1 leaves a run: the best checkpoint alone
    train(experiment, tmp_path / "straight")
    assert sorted(path.name for path in (tmp_path / "staged").glob("checkpoint-*")) == \
        sorted(path.name for path in (tmp_path / "straight").glob("checkpoint-*"))


def test_a_stage_continues_on_another_machine_from_its_committed_float16_weights(tmp_path: Path) -> None:
    """The committed folder keeps Trainer's state; the continued run starts from the float16 weights, at the
    recorded step, on the original schedule times a fresh warm-up, and runs to the original last step."""
    experiment = load_experiment(SMOKE, [*STAGED, "early_stopping_patience=null"])
    train(experiment, tmp_path / "machine-1", max_time=A_MOMENT)
    write_checkpoint(tmp_path / "machine-1" / "checkpoint-1", tmp_path / "committed" / "smoke")
    committed = tmp_path / "committed" / "smoke"
    assert {"trainer_state.json", "stage.json"} <= {path.name for path in committed.iterdir()}

    class FirstWeights(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, **kwargs):  # noqa: ANN001, ANN201
            self.weights = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}

    rates, first = LearningRates(), FirstWeights()
    continued = train(experiment, tmp_path / "machine-2", continue_from=committed, callbacks=[rates, first])
    stored = load_file(committed / "model.safetensors")
    for name, tensor in stored.items():
        assert tensor.dtype == torch.float16
        torch.testing.assert_close(first.weights[name], tensor.float(), rtol=0, atol=0)
    assert continued["optimizer_steps"] == 16 and "test_accuracy" in continued
    assert sorted(rates.by_step) == list(range(2, 17))  # step 1 was the first machine's
    total, warmup = 16, math.ceil(0.1 * 16)
    rewarm = max(1, math.ceil(REWARM_SHARE * total))
    base = experiment.training["learning_rate"]
    for step, rate in rates.by_step.items():
        new_steps = step - 1  # optimizer steps of the new optimizer before this one
        expected = base * min(1.0, (new_steps + 1) / rewarm) * cosine_with_warmup(step - 1, total, warmup)
        assert rate == pytest.approx(expected, rel=1e-6, abs=1e-12)
    assert json.loads((tmp_path / "machine-2" / "continued_from.json").read_text())["from_step"] == 1


def test_continue_from_needs_a_committed_stage(tmp_path: Path) -> None:
    experiment = load_experiment(SMOKE, STAGED)
    with pytest.raises(FileNotFoundError, match="holds no trainer_state.json"):
        train(experiment, tmp_path / "run", continue_from=tmp_path)


def test_auto_precision_is_bf16_only_where_the_hardware_has_it(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = torch.device("cpu")
    monkeypatch.setattr(precision, "this_cpu", lambda: {"model": None, "matmul_flags": ["avx2", "fma"]})
    assert resolve_precision("auto", cpu) == "fp32"
    assert resolve_precision("fp32", cpu) == "fp32"
    with pytest.raises(PrecisionError, match=r"this CPU \(no amx_bf16 or avx512_bf16 in its flags\) has no bfloat16"):
        resolve_precision("bf16", cpu)
    monkeypatch.setattr(precision, "this_cpu", lambda: {"model": None, "matmul_flags": ["avx2", "amx_bf16"]})
    assert resolve_precision("auto", cpu) == resolve_precision("bf16", cpu) == "bf16"
    with pytest.raises(PrecisionError, match="one of auto, bf16, fp32"):
        resolve_precision("fp16", cpu)


def test_bf16_asked_of_a_cpu_without_it_fails_before_any_data_is_read(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Path) -> None:
    monkeypatch.setattr(precision, "this_cpu", lambda: {"model": None, "matmul_flags": []})
    experiment = load_experiment(SMOKE, [*STAGED, "precision=bf16", "dataset=/no/such/folder"])
    with pytest.raises(PrecisionError, match="has no bfloat16 units"):
        train(experiment, tmp_path / "run")


def test_precision_is_one_setting() -> None:
    with pytest.raises(ExperimentConfigError, match=r"\[training\] bf16 would set the precision a second time"):
        load_experiment(SMOKE, ["training.bf16=true"])
    with pytest.raises(ExperimentConfigError, match="`precision` must be one of"):
        load_experiment(SMOKE, ["precision=fp16"])


@pytest.mark.parametrize("chosen", ["bf16", "fp32"])
def test_a_run_computes_in_its_precision_and_records_it(chosen: str, monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    """bf16 autocast makes the linear layers' outputs bfloat16 while the parameters stay float32."""
    monkeypatch.setattr(precision, "this_cpu", lambda: {"model": None, "matmul_flags": ["avx512_bf16"]})
    experiment = load_experiment(SMOKE, [*STAGED, f"precision={chosen}", "training.max_steps=2"])
    dtypes = AutocastDtypes()
    metrics = train(experiment, tmp_path / "run", callbacks=[dtypes])
    assert dtypes.seen == {torch.bfloat16 if chosen == "bf16" else torch.float32}
    assert metrics["precision"] == chosen
    saved = load_file(tmp_path / "run" / "model.safetensors")
    assert {tensor.dtype for tensor in saved.values() if tensor.is_floating_point()} == {torch.float32}
