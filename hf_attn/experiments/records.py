"""What a run records beside its scores (`metrics.json`): steps, training time summed over resumed sessions,
the machine, the command line and the experiment; and in each checkpoint, the experiment it was trained with, which
a resumed run must keep (`ExperimentRecord`)."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase, Trainer, TrainerCallback, TrainingArguments
from transformers.trainer_callback import ExportableState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..runtime.cpu import this_cpu
from ..runtime.precision import trainer_precision
from .config import SECTIONS, Experiment
from .folders import RunFolderError


class TrainingClock(TrainerCallback, ExportableState):
    """Training time summed over every session of a resumed run.

    `Trainer`'s `train_runtime` covers the last `train()` call only, so a run resumed from a checkpoint
    would report the time of its final stretch as the whole. The clock's total goes into each
    checkpoint (`stateful_callbacks`, restored on resume); time after an interrupted session's last
    checkpoint is not counted, because those steps are redone. `timed_from_step` is the step the
    clock started at: above 0 only for a run resumed from a checkpoint written without a clock.
    """

    def __init__(self) -> None:
        self.seconds_before_this_session = 0.0
        self.timed_from_step: int | None = None
        self._session_started: float | None = None

    def on_train_begin(self, args: TrainingArguments, state: Any, control: Any, **kwargs: Any) -> None:
        self._session_started = time.perf_counter()
        if self.timed_from_step is None:
            self.timed_from_step = state.global_step

    def on_train_end(self, args: TrainingArguments, state: Any, control: Any, **kwargs: Any) -> None:
        self.seconds_before_this_session, self._session_started = self.elapsed_s, None

    @property
    def elapsed_s(self) -> float:
        session = 0.0 if self._session_started is None else time.perf_counter() - self._session_started
        return self.seconds_before_this_session + session

    def state(self) -> dict[str, Any]:
        return {"args": {}, "attributes": {"seconds_before_this_session": self.elapsed_s,
                                           "timed_from_step": self.timed_from_step}}


EXPERIMENT_RECORD = "experiment.json"  # in each checkpoint: the experiment as given (before a task's model defaults)
# What a resumed run may set otherwise than the run it continues, each applied from then on: how long it trains (the
# run goes on to the new length) and how it saves, logs and evaluates. Anything else would be recorded but not applied
# (the model, optimizer, schedule and callbacks are the checkpoint's) or would change the run halfway. (Where a stage
# ends is --max-time, not a setting of the experiment.)
RESUME_MAY_CHANGE = frozenset({
    "name", "training.num_train_epochs", "training.max_steps", "training.save_total_limit", "training.logging_steps",
    "training.report_to", "training.disable_tqdm", "training.dataloader_num_workers",
    "training.per_device_eval_batch_size",
})


def experiment_settings(experiment: Experiment) -> dict[str, Any]:
    """`experiment` as its JSON record reads back, a section's settings under dotted keys (`model.hidden_size`)."""
    settings = json.loads(json.dumps(dataclasses.asdict(experiment), default=str))
    return {name: value for key, value in settings.items() for name, value in (
        [(f"{key}.{inner}", setting) for inner, setting in value.items()] if key in SECTIONS else [(key, value)])}


class ExperimentRecord(TrainerCallback):
    """Writes the experiment into every checkpoint the run saves (`EXPERIMENT_RECORD`), for `check_resumed` to read."""

    def __init__(self, experiment: Experiment) -> None:
        self.text = json.dumps(experiment_settings(experiment), indent=2)

    def on_save(self, args: TrainingArguments, state: Any, control: Any, **kwargs: Any) -> None:
        checkpoint = Path(args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}"
        if state.is_world_process_zero and checkpoint.is_dir():
            (checkpoint / EXPERIMENT_RECORD).write_text(self.text)


def changed_settings(checkpoint: str | os.PathLike[str], experiment: Experiment) -> list[str]:
    """How `experiment` differs from the one `checkpoint` was trained with, one phrase per setting (`RESUME_MAY_CHANGE`
    aside). A setting the checkpoint's record lacks counts as its default (the run's code did not have it yet); a
    checkpoint saved before runs recorded their experiment differs in nothing."""
    record = Path(checkpoint) / EXPERIMENT_RECORD
    if not record.is_file():
        return []
    defaults = experiment_settings(Experiment(name=experiment.name))
    recorded = {**defaults, **json.loads(record.read_text())}
    now = {**defaults, **experiment_settings(experiment)}
    return [f"{key} {_stated(recorded, key)} in the run, {_stated(now, key)} now"
            for key in sorted((recorded.keys() | now.keys()) - RESUME_MAY_CHANGE)
            if key not in recorded or key not in now or recorded[key] != now[key]]


def check_resumed(checkpoint: str | os.PathLike[str], experiment: Experiment) -> None:
    """Refuse to resume from `checkpoint` with other settings than it was trained with (`changed_settings`): the
    model and its training state are the checkpoint's, so the new settings would be recorded but not used."""
    changed = changed_settings(checkpoint, experiment)
    if changed:
        raise RunFolderError(f"--resume: {checkpoint} was trained with other settings ({'; '.join(changed)}); drop "
                             "the changes to continue it, or start a new run with --overwrite or another --output-dir.")


def _stated(settings: dict[str, Any], key: str) -> str:
    return repr(settings[key]) if key in settings else "not set"


def run_record(
    experiment: Experiment, trainer: Trainer, train_output: Any, tokenizer: PreTrainedTokenizerBase, started: float
) -> dict[str, Any]:
    """What every run's metrics.json records besides its scores: steps, time, machine, the command that computes it
    whole (`cli_command` without stage options), experiment.

    `train_runtime_s` is the `TrainingClock`'s total when the trainer has one, else `Trainer`'s
    `train_runtime` (the last session's).
    """
    clock = next((callback for callback in trainer.callback_handler.callbacks if isinstance(callback, TrainingClock)),
                 None)
    settings = dataclasses.asdict(experiment)
    if experiment.week3 is not None or experiment.init_from is not None:
        del settings["tokenizer_vocab_size"]  # no tokenizer was trained; `vocab_size` is the one used
    return {
        "epochs": trainer.state.epoch,
        "optimizer_steps": trainer.state.global_step,
        "train_runtime_s": clock.elapsed_s if clock else train_output.metrics.get("train_runtime"),
        "timed_from_step": clock.timed_from_step if clock else None,
        "wall_time_s": time.time() - started,
        "world_size": trainer.args.world_size,
        "hardware": hardware_name(trainer.args.device),
        "precision": trainer_precision(trainer.args),
        "vocab_size": len(tokenizer),
        "max_length": experiment.max_length,
        "command": cli_command(stage_options=False),
        "experiment": settings,
    }


# Options that say how a stage ran (where it stopped, what it continued), not what it computes: how many values each
# takes after it.
STAGE_OPTIONS = {"--resume": 0, "--max-time": 1, "--continue-from": 1}


def without_stage_options(arguments: Sequence[str]) -> list[str]:
    """`arguments` without the stage options (`STAGE_OPTIONS`, as `--name value` or `--name=value`)."""
    words, kept = list(arguments), []
    while words:
        word = words.pop(0)
        name = word.split("=", 1)[0]
        if name in STAGE_OPTIONS:
            if "=" not in word:
                del words[: STAGE_OPTIONS[name]]
            continue
        kept.append(word)
    return kept


def cli_command(stage_options: bool = True) -> str | None:
    """This process's command line as `hf-attn ...` when it is the command-line tool (the `hf-attn` entry
    point, or `python -m hf_attn.cli` where the package is not installed), for a run's record; None for a
    run started from Python code, whose command line would not reproduce it. Without `stage_options`: the command
    that computes the whole run in one go on a fresh machine, where `--resume` would find no checkpoint to
    continue."""
    program = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if program is None or not (program.match("hf-attn") or program.match("hf_attn/cli.py")):
        return None
    arguments = sys.argv[1:] if stage_options else without_stage_options(sys.argv[1:])
    return " ".join(["hf-attn", *arguments])


def hardware_name(device: torch.device) -> str:
    """What a run trained on, for its card: the same run takes seconds on a GPU and hours on a few CPU cores."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpu = this_cpu()
    threads = torch.get_num_threads()
    flags = f" ({', '.join(cpu['matmul_flags'])})" if cpu["matmul_flags"] else ""
    return f"{cpu['model'] or 'CPU'}{flags}, {threads} thread{'s' if threads > 1 else ''}"


def read_run_metrics(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The `metrics.json` of the run saved in `folder` (None for a folder without one: a Hub repo, other code's)."""
    source = Path(folder) / "metrics.json"
    return json.loads(source.read_text()) if source.is_file() else None


def init_from_metrics(experiment: Experiment) -> dict[str, Any] | None:
    """The `metrics.json` of the run `experiment.init_from` came from (None for a folder without one)."""
    return read_run_metrics(experiment.init_from)


def write_metrics(
    trainer: Trainer, metrics: dict[str, Any], output_dir: Path, results_path: str | os.PathLike[str] | None
) -> None:
    """`output_dir/metrics.json` (and a copy at `results_path`), written by the main process only."""
    if not trainer.is_world_process_zero():
        return
    text = json.dumps(metrics, indent=2, default=str)
    (output_dir / "metrics.json").write_text(text)
    if results_path is not None:
        Path(results_path).parent.mkdir(parents=True, exist_ok=True)
        Path(results_path).write_text(text)
