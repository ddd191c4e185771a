"""Long runs in stages (docs/long-runs.md): a run stops at `--max-time`, saves a checkpoint and writes `stage.json`
with the commands that continue it, here (`--resume`) or on another machine from committed float16 weights
(`--continue-from`: the data order and learning-rate schedule go on, a fresh optimizer warms up again)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import broadcast_object_list
from transformers import Trainer, TrainerCallback, TrainingArguments
from transformers.trainer import TRAINER_STATE_NAME

from ..modeling_hf_attn import HfAttnPreTrainedModel
from ..runtime.precision import trainer_precision
from ..saved import load_strictly
from .config import Experiment
from .records import TrainingClock, cli_command, hardware_name

STAGE_RECORD = "stage.json"  # written by a run stopped at --max-time, in its folder and its last checkpoint
CONTINUATION_RECORD = "continued_from.json"  # in a run continued from committed weights: the step it went on from
REWARM_SHARE = 0.02  # of a run's optimizer steps: the warm-up of a fresh optimizer in a continued run


def check_max_time(max_time: float | None) -> None:
    """Refuse a `--max-time` that is not a positive number of minutes."""
    if max_time is not None and not (isinstance(max_time, (int, float)) and max_time > 0 and math.isfinite(max_time)):
        raise ValueError(f"--max-time must be a positive number of minutes, got {max_time!r}; leave it out to run "
                         "to the end, or give the minutes this stage may take (e.g. --max-time 90).")


class StageStopped(Exception):
    """A stage's --max-time is up: it ends here, with what it finished kept."""


class StageClock:
    """The minutes left to one stage: `max_time` minutes from `started` (a `time.time()`, default now), unlimited
    without one. A training run stops at the first optimizer step past it (`StageLimit`); an arena stage starts a
    piece of work only with the time it needs left (`check`). The one place `--max-time` is checked."""

    def __init__(self, max_time: float | None, started: float | None = None) -> None:
        check_max_time(max_time)
        self.max_time = max_time
        start = time.time() if started is None else started
        self.deadline = None if max_time is None else start + 60.0 * max_time

    def minutes_left(self) -> float | None:
        return None if self.deadline is None else (self.deadline - time.time()) / 60.0

    def is_up(self) -> bool:
        return self.deadline is not None and time.time() >= self.deadline

    def check(self, needs_minutes: float = 0.0, what: str = "the next piece") -> None:
        """Raise `StageStopped` when the stage has not `needs_minutes` left for `what`."""
        left = self.minutes_left()
        if left is not None and left <= needs_minutes:
            raise StageStopped(f"{left:.1f} minutes of --max-time left, {what} needs {max(needs_minutes, 0):.1f}")


class StageLimit(TrainerCallback):
    """Stops training at the first optimizer step that ends past its `clock`'s time, with a checkpoint saved at that
    step; `stopped` says whether it did (a run that reaches its last step is not stopped). Under several processes
    the main process's clock decides for all."""

    def __init__(self, clock: StageClock) -> None:
        self.clock = clock
        self.stopped = False

    def on_step_end(self, args: TrainingArguments, state: Any, control: Any, **kwargs: Any) -> None:
        if self.clock.deadline is None or state.global_step >= state.max_steps:
            return
        past = [self.clock.is_up()]
        if args.world_size > 1:
            past = broadcast_object_list(past, from_process=0)
        if past[0]:
            control.should_save = control.should_training_stop = self.stopped = True


def continued_factor(schedule: Callable[[int], float], from_step: int, rewarm_steps: int, step: int) -> float:
    """The learning-rate factor at `step` of a run continued at `from_step`: the original `schedule` where
    it would be, times a linear warm-up over `rewarm_steps` for the fresh optimizer."""
    return min(1.0, (step + 1) / rewarm_steps) * schedule(step + from_step)


class ContinuedSchedule(TrainerCallback):
    """The learning-rate schedule of a run that went on from committed weights at step `from_step`.

    `Trainer` starts such a run at `from_step` (its data order skips the batches already trained on), but
    with a new optimizer and a scheduler counting from 0: this wraps the scheduler's factors so that step
    `s` of the new scheduler uses the original schedule's factor at `s + from_step`, warmed up again over
    `REWARM_SHARE` of the run's steps (Adam's moments start from zero). It is applied on every start of
    the run, so a `--resume` of the continued run keeps the same schedule.
    """

    def __init__(self, from_step: int) -> None:
        self.from_step = from_step

    def on_train_begin(self, args: TrainingArguments, state: Any, control: Any, optimizer: Any = None,
                       lr_scheduler: Any = None, **kwargs: Any) -> None:
        if not isinstance(lr_scheduler, torch.optim.lr_scheduler.LambdaLR):
            raise ValueError(f"a run continued from committed weights needs a LambdaLR schedule (linear, cosine, "
                             f"constant, ...), not lr_scheduler_type {args.lr_scheduler_type!r}")
        rewarm_steps = max(1, math.ceil(REWARM_SHARE * state.max_steps))
        lr_scheduler.lr_lambdas = [functools.partial(continued_factor, schedule, self.from_step, rewarm_steps)
                                   for schedule in lr_scheduler.lr_lambdas]
        for group, base_lr, factor in zip(optimizer.param_groups, lr_scheduler.base_lrs, lr_scheduler.lr_lambdas,
                                          strict=True):
            group["lr"] = base_lr * factor(lr_scheduler.last_epoch)


def read_continuation(output_dir: Path) -> dict[str, Any] | None:
    """`ContinuedSchedule`'s arguments when the run in `output_dir` went on from committed weights, else None."""
    record = output_dir / CONTINUATION_RECORD
    return {"from_step": json.loads(record.read_text())["from_step"]} if record.is_file() else None


def continued_checkpoint(source: str | os.PathLike[str], output_dir: Path,
                         model_class: type[HfAttnPreTrainedModel]) -> str:
    """A `Trainer` checkpoint in `output_dir` made from `source`, a stopped stage's checkpoint as `hf-attn
    checkpoint` commits it (float16 weights, `trainer_state.json`, `stage.json`); returns its path.

    The checkpoint holds the weights in float32 and the recorded training state, and no optimizer,
    scheduler or random state: `Trainer` resumes from it at the recorded step with a new optimizer, and
    `CONTINUATION_RECORD` makes every start of this run apply `ContinuedSchedule`.
    """
    source = Path(source)
    state_file = source / TRAINER_STATE_NAME
    if not state_file.is_file():
        raise FileNotFoundError(
            f"--continue-from {source} holds no {TRAINER_STATE_NAME}: pass a folder that `hf-attn checkpoint "
            "--model RUN/checkpoint-N` wrote from the last checkpoint of a stage stopped by --max-time"
        )
    state = json.loads(state_file.read_text())
    if state.get("best_model_checkpoint") and not Path(state["best_model_checkpoint"]).is_dir():
        state["best_model_checkpoint"] = None  # a folder of the machine the stage ran on
    model = load_strictly(model_class, source, dtype=torch.float32)
    target = output_dir / f"checkpoint-{state['global_step']}"
    model.save_pretrained(target)
    (target / TRAINER_STATE_NAME).write_text(json.dumps(state, indent=2))
    (output_dir / CONTINUATION_RECORD).write_text(json.dumps({"from_step": state["global_step"],
                                                              "source": str(source)}, indent=2))
    return str(target)


def continue_command(*flags: str) -> str | None:
    """This process's `hf-attn` command line without its run-folder flags (--resume, --overwrite,
    --continue-from X), with `flags` added: how to continue a stopped stage. None outside the CLI."""
    command = cli_command()
    if command is None:
        return None
    words, kept = shlex.split(command), []
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
        elif word in ("--resume", "--overwrite"):
            continue
        elif word == "--continue-from":
            skip_next = True
        elif not word.startswith("--continue-from="):
            kept.append(word)
    return shlex.join([*kept, *flags])


def write_stage(trainer: Trainer, experiment: Experiment, output_dir: Path, max_time: float | None,
                started: float) -> dict[str, Any]:
    """The record of a run stopped by `StageLimit`, written to `output_dir` and to its last checkpoint (so
    that `hf-attn checkpoint` commits it with the weights), and returned. The commands it suggests for another
    machine write the float16 checkpoint beside the run folder (`OUTPUT_DIR-stepN`): where to keep it is the user's."""
    step, total = trainer.state.global_step, trainer.state.max_steps
    checkpoint = output_dir / f"checkpoint-{step}"
    committed = f"{output_dir}-step{step}"
    clock = next(callback for callback in trainer.callback_handler.callbacks if isinstance(callback, TrainingClock))
    record = {
        "name": experiment.name,
        "stage": "stopped",
        "step": step,
        "max_steps": total,
        "max_time_min": max_time,
        "train_runtime_s": clock.elapsed_s,
        "wall_time_s": time.time() - started,
        "hardware": hardware_name(trainer.args.device),
        "precision": trainer_precision(trainer.args),
        "checkpoint": str(checkpoint),
        "continue_here": continue_command("--resume"),
        "continue_elsewhere": [f"hf-attn checkpoint --model {checkpoint} --output {committed}",
                               continue_command("--continue-from", committed)],
        "experiment": dataclasses.asdict(experiment),
    }
    if trainer.is_world_process_zero():
        text = json.dumps(record, indent=2, default=str)
        (output_dir / STAGE_RECORD).write_text(text)
        if checkpoint.is_dir():
            (checkpoint / STAGE_RECORD).write_text(text)
    return record
