"""The one run skeleton behind `hf-attn train` and `hf-attn pretrain`.

A run goes tokenizer -> model config -> model -> `Trainer` -> metrics. What differs between kinds of run
is a `Task`: `classification.classification_task` and `pretraining.pretraining_task` load their data and
tokenizer and say which datasets, collator, model class and scores the run has. `run` does the rest the
same way for both: the model (fresh, from `init_from`, or from the checkpoint a resumed run continues),
`TrainingArguments`, a `Trainer` with a `TrainingClock`, training with resumption, saving model and
tokenizer, scoring, and `metrics.json` with the run's record (steps, time, hardware, precision, command,
experiment).

Long runs go in stages (docs/long-runs.md). With `max_time`, a run stops at the first step boundary past
that many minutes, saves a checkpoint and writes `stage.json` (how far it got, and the commands that
continue it) instead of scores. `resume` continues from that checkpoint on the same machine, to the same
result as a run that was never stopped. On another machine, a stage continues from the checkpoint's
weights committed as float16 (`hf-attn checkpoint`, which keeps its `trainer_state.json`) with
`continue_from`: the data order and learning-rate schedule go on from the recorded step, and the optimizer,
whose state is not committed, restarts with a short linear warm-up (`ContinuedSchedule`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import json
import math
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import datasets
import torch
from accelerate import PartialState
from accelerate.utils import broadcast_object_list
from transformers import (
    AutoTokenizer,
    EarlyStoppingCallback,
    EvalPrediction,
    PreTrainedTokenizerBase,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)
from transformers.tokenization_utils_base import VERY_LARGE_INTEGER
from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_callback import ExportableState
from transformers.trainer_utils import get_last_checkpoint

from ..configuration_hf_attn import HfAttnConfig
from ..modeling_hf_attn import (
    HfAttnForReplacedTokenDetection,
    HfAttnForSequenceClassification,
    HfAttnPreTrainedModel,
)
from ..saved import load_strictly
from ..week3 import load_week3_embedding, load_week3_tokenizer, read_embedding_width, train_week3_tokenizer
from .config import FINE_TUNING_SETTINGS, Experiment
from .precision import default_device, resolve_precision

# Defaults of this package's runs; the YAML `training` section overrides any of them.
TRAINING_DEFAULTS: dict[str, Any] = {
    "num_train_epochs": 3,
    "learning_rate": 5e-4,
    "per_device_train_batch_size": 32,
    "per_device_eval_batch_size": 64,
    "weight_decay": 0.01,
    "warmup_steps": 0.1,
    "lr_scheduler_type": "cosine",
    "logging_steps": 50,
    "save_total_limit": 2,
    "report_to": "none",
    "dataloader_num_workers": 0,
    # a resumed run continues its callbacks (early-stopping patience, the training clock) where they were
    "restore_callback_states_from_checkpoint": True,
}


@dataclasses.dataclass
class Task:
    """What one kind of run supplies to `run`.

    Attributes:
        tokenizer: the run's tokenizer (`load_tokenizer`); saved with the model.
        model_class: what `build_model` builds, e.g. `HfAttnForSequenceClassification`.
        train_dataset / eval_dataset: tokenized rows for `Trainer` (evaluation picks the best checkpoint
            when the arguments ask for it).
        data_collator: batches rows of both datasets.
        score: the trained model's scores, given the trainer; they open `metrics.json`.
        sizes: how many rows each dataset has, recorded after the scores.
        init_from_record: the `metrics.json` key that keeps the `init_from` run's own metrics.
        arguments: `TrainingArguments` the task fixes (they win over the experiment's `training`).
        model_defaults: `HfAttnConfig` settings of this task that the experiment's `model` may override.
        trainer_class: `Trainer` or a subclass.
        compute_metrics: `Trainer`'s metrics of an evaluation beyond the loss.
        label_names: a classifier's names of its labels, by id (empty for other tasks).
    """

    tokenizer: PreTrainedTokenizerBase
    model_class: type[HfAttnPreTrainedModel]
    train_dataset: datasets.Dataset
    eval_dataset: datasets.Dataset
    data_collator: Callable[[list[dict[str, Any]]], dict[str, Any]]
    score: Callable[[Trainer], dict[str, Any]]
    sizes: dict[str, int]
    init_from_record: str
    arguments: dict[str, Any] = dataclasses.field(default_factory=dict)
    model_defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    trainer_class: type[Trainer] = Trainer
    compute_metrics: Callable[[EvalPrediction], dict[str, float]] | None = None
    label_names: Sequence[str] = ()


def run(
    experiment: Experiment,
    make_task: Callable[[Experiment], Task],
    output_dir: str | os.PathLike[str],
    resume: bool = False,
    results_path: str | os.PathLike[str] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
    overwrite: bool = False,
    max_time: float | None = None,
    continue_from: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Train the task `make_task` prepares for `experiment`, save it and write its metrics; returns them.

    Writes `output_dir/` (model + tokenizer + code, loadable with `from_pretrained`),
    `output_dir/checkpoint-*` (for `resume=True`, which continues from the last one) and
    `output_dir/metrics.json`, copied to `results_path` when given. Early stopping on validation loss
    applies when the task restores the best checkpoint at the end. A folder that already holds a run
    needs `resume` or `overwrite` (see `claim_output_dir`).

    With `max_time` (minutes, counted from the call), the run stops at the first optimizer step past it,
    saves a checkpoint and writes `output_dir/stage.json`; the returned record then has `stage: stopped`
    and no scores. `continue_from` is a folder written by `hf-attn checkpoint` from a stopped stage's
    checkpoint (float16 weights and its `trainer_state.json`): the run goes on from its step in a new
    `output_dir` (see `continued_checkpoint`).
    """
    output_dir = Path(output_dir)
    started = time.time()
    check_max_time(max_time)
    run_precision(experiment)  # bf16 asked of hardware without it fails now, not after the data is loaded
    if resume and continue_from is not None:
        raise RunFolderError("--resume continues from the output folder's last checkpoint and --continue-from from a "
                             "committed one: pass one.")
    with claim_output_dir(output_dir, resume, overwrite):
        checkpoint = resume_checkpoint(output_dir) if resume else None
        task = make_task(experiment)
        if task.model_defaults:
            experiment = dataclasses.replace(experiment, model={**task.model_defaults, **experiment.model})
        if continue_from is not None:
            checkpoint = continued_checkpoint(continue_from, output_dir, task.model_class)
        set_seed(experiment.seed)  # before the model exists: its random init must not depend on what ran earlier
        model = build_model(experiment, task.tokenizer, task.model_class, checkpoint, task.label_names)
        args = training_arguments(experiment, output_dir, len(task.train_dataset), **task.arguments)
        stage_limit = StageLimit(started, max_time)
        callbacks = [*callbacks, TrainingClock(), stage_limit]
        continuation = read_continuation(output_dir)
        if continuation is not None:
            callbacks.append(ContinuedSchedule(**continuation))
        if args.load_best_model_at_end and experiment.early_stopping_patience is not None:
            callbacks.append(EarlyStoppingCallback(early_stopping_patience=experiment.early_stopping_patience))
        trainer = task.trainer_class(
            model=model,
            args=args,
            train_dataset=task.train_dataset,
            eval_dataset=task.eval_dataset,
            data_collator=task.data_collator,
            processing_class=task.tokenizer,
            compute_metrics=task.compute_metrics,
            callbacks=callbacks,
        )
        train_output = trainer.train(resume_from_checkpoint=checkpoint)
        if stage_limit.stopped:
            return write_stage(trainer, experiment, output_dir, max_time, started)
        (output_dir / STAGE_RECORD).unlink(missing_ok=True)  # an earlier stage's: this run has ended
        # Scoring evaluates again under other metric prefixes (val_, test_), where early stopping, whose work
        # is done, would warn that it found no eval_loss and "is disabled".
        trainer.remove_callback(EarlyStoppingCallback)
        trainer.save_model(str(output_dir))
        metrics = {
            "name": experiment.name,
            **task.score(trainer),
            **task.sizes,
            **run_record(experiment, trainer, train_output, task.tokenizer, started),
        }
        if experiment.init_from is not None:  # where the weights came from, for tables and model cards
            metrics[task.init_from_record] = init_from_metrics(experiment)
        write_metrics(trainer, metrics, output_dir, results_path)
        return metrics


class RunFolderError(ValueError):
    """An output folder this run may not write: it holds another run, or another process writes it."""


# What marks a folder as holding a run: a saved model, its record or its checkpoints.
RUN_MARKERS = ("config.json", "metrics.json", "checkpoint-*")
LOCK_FILE = ".hf-attn.lock"


@contextlib.contextmanager
def claim_output_dir(output_dir: Path, resume: bool, overwrite: bool) -> Iterator[None]:
    """Hold `output_dir` for one run: one process at a time, and an earlier run in it only on request.

    A folder that already holds a run is continued with `resume` or, with `overwrite`, first loses that
    run's checkpoints and metrics, so that an old run's checkpoints never mix with a new one's;
    otherwise it is a `RunFolderError` naming both options. The lock is an `flock` on `LOCK_FILE`,
    which the operating system releases when the process ends, also when it is killed. Under
    `accelerate launch` the main process holds it for all of them.
    """
    if resume and overwrite:
        raise RunFolderError("--resume continues the run in the output folder and --overwrite replaces it: pass one.")
    if not process_state().is_main_process:
        yield
        return
    previous = [path for marker in RUN_MARKERS for path in output_dir.glob(marker)]
    if previous and not (resume or overwrite):
        raise RunFolderError(
            f"{output_dir} already holds a run ({', '.join(sorted(path.name for path in previous)[:4])}); pass "
            "--resume to continue it, or --overwrite to start again (its checkpoints and metrics are deleted)."
        )
    output_dir.mkdir(parents=True, exist_ok=True)
    with open(output_dir / LOCK_FILE, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunFolderError(
                f"another process is writing {output_dir}; wait for it to end or pass another --output-dir."
            ) from None
        if overwrite:
            for path in previous:
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.name != "config.json":  # the new run's save replaces the model files
                    path.unlink()
        yield


def process_state() -> PartialState:
    """accelerate's view of this process (the main one, how many): on a machine without a GPU, CPU processes
    (also under `accelerate launch`)."""
    return PartialState(cpu=not torch.cuda.is_available())


def load_tokenizer(experiment: Experiment, train_texts: Sequence[str]) -> PreTrainedTokenizerBase:
    """The pretrained folder's tokenizer (`init_from`), the Week 3 one (`week3`), or one trained on `train_texts`.

    It carries no length of its own (`model_max_length` unset, whatever the Week 3 `max_seq` said): what a
    saved model reads of a text is its config's `read_length`, applied by the model.
    """
    if experiment.init_from is not None:
        tokenizer = AutoTokenizer.from_pretrained(experiment.init_from)
    elif experiment.week3 is not None:
        tokenizer = load_week3_tokenizer(experiment.week3)
    else:
        tokenizer = train_week3_tokenizer(train_texts, vocab_size=experiment.tokenizer_vocab_size,
                                          max_seq=experiment.max_length)
    tokenizer.model_max_length = VERY_LARGE_INTEGER
    return tokenizer


def build_model(
    experiment: Experiment,
    tokenizer: PreTrainedTokenizerBase,
    model_class: type[HfAttnPreTrainedModel] = HfAttnForSequenceClassification,
    checkpoint: str | os.PathLike[str] | None = None,
    label_names: Sequence[str] = (),
) -> HfAttnPreTrainedModel:
    """The model a run trains (a classifier's config names its `label_names`).

    Resuming (`checkpoint`), it is built from the checkpoint's config: the architecture the interrupted
    run trained (its RoPE layout, say), whatever the experiment file or the defaults say today; `Trainer`
    then loads the weights. Otherwise it is `experiment.init_from`'s model with the experiment's
    fine-tuning settings (its encoder must load whole: only the head may be new), or a fresh one sized to
    the tokenizer whose token embedding starts from the Week 3 DAN embedding if asked. A fresh
    replaced-token-detection pair starts its generator's token table equal to the encoder's (ELECTRA
    shares the table).
    """
    if checkpoint is not None:
        return model_class(HfAttnConfig.from_pretrained(checkpoint))
    # Only a classifier has label names: a pretrained encoder's config that carried them would make a classifier
    # built on it (a pipeline over the folder, its head untrained) answer with names that look real.
    label_maps = {"id2label": dict(enumerate(label_names)), "label2id": {name: i for i, name in enumerate(label_names)}
                  } if label_names else {}
    if experiment.init_from is not None:
        fine_tuning = {key: value for key, value in experiment.model.items() if key in FINE_TUNING_SETTINGS}
        return load_strictly(model_class, experiment.init_from, new_head=True, **label_maps,
                             read_length=experiment.reading_length, **fine_tuning)
    model_settings = dict(experiment.model)
    embedding_file = Path(experiment.week3) / "models" / "imdb_embedding_layer.pt" if experiment.week3 else None
    use_dan = experiment.init_embedding_from_dan and embedding_file is not None and embedding_file.is_file()
    if use_dan:
        model_settings.setdefault("hidden_size", read_embedding_width(embedding_file))
    config = HfAttnConfig(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        max_position_embeddings=experiment.max_length,
        read_length=experiment.reading_length,
        **label_maps,
        **model_settings,
    )
    model = model_class(config)
    if use_dan:
        load_week3_embedding(model, embedding_file, start_position_tables_at_token_scale=True)
    if isinstance(model, HfAttnForReplacedTokenDetection):
        with torch.no_grad():
            model.generator.get_input_embeddings().weight.copy_(model.get_input_embeddings().weight)
    return model


def training_arguments(experiment: Experiment, output_dir: Path, n_train: int, **fixed: Any) -> TrainingArguments:
    """`TrainingArguments` from the package defaults, the YAML `training` section and `fixed` (which wins).

    Evaluation and checkpoints come `evals_per_epoch` times per epoch unless the YAML sets `eval_steps`
    / `save_steps`; on a machine without a GPU the run stays on the CPU (also under `accelerate launch`).
    """
    settings = {**TRAINING_DEFAULTS, **experiment.training}
    if not torch.cuda.is_available():
        settings.setdefault("use_cpu", True)
    settings["bf16"] = run_precision(experiment) == "bf16"
    world_size = process_state().num_processes
    batch = settings["per_device_train_batch_size"] * settings.get("gradient_accumulation_steps", 1) * world_size
    steps_per_epoch = max(1, math.ceil(n_train / batch))
    settings.setdefault("eval_steps", max(1, steps_per_epoch // experiment.evals_per_epoch))
    settings.setdefault("save_steps", settings["eval_steps"])
    settings.update(
        output_dir=str(output_dir),
        eval_strategy="steps",
        save_strategy="steps",
        seed=experiment.seed,
        data_seed=experiment.seed,
        **fixed,
    )
    return TrainingArguments(**settings)


def run_precision(experiment: Experiment) -> str:
    """`bf16` or `fp32`: what the experiment's `precision` means on the device its run trains on (a
    `PrecisionError` for bf16 asked of hardware without it)."""
    on_cpu = experiment.training.get("use_cpu", False) or not torch.cuda.is_available()
    return resolve_precision(experiment.precision, torch.device("cpu") if on_cpu else default_device())


def resume_checkpoint(output_dir: Path) -> str:
    """The last checkpoint in `output_dir`; before any data is loaded, a FileNotFoundError if there is none and a
    ValueError naming it if it is incomplete: `Trainer` writes `trainer_state.json` last, so a run stopped while
    writing a checkpoint leaves it without one, or with a weights file cut short."""
    from safetensors import SafetensorError, safe_open

    checkpoint = get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None
    if checkpoint is None:
        raise FileNotFoundError(
            f"--resume: no checkpoint-* folder in {output_dir}; start without --resume, or pass the "
            "--output-dir of the interrupted run."
        )
    unreadable = [] if (Path(checkpoint) / "trainer_state.json").is_file() else ["trainer_state.json"]
    for weights in sorted(Path(checkpoint).glob("*.safetensors")):
        try:
            with safe_open(weights, framework="pt"):  # reads the header, which must match the file's size
                pass
        except SafetensorError:
            unreadable.append(weights.name)
    if unreadable:
        steps = sorted(int(path.name.split("-")[-1]) for path in output_dir.glob("checkpoint-*")
                       if path.name.split("-")[-1].isdigit())
        way_back = f"delete it to resume from checkpoint-{steps[-2]}, or" if len(steps) > 1 else "none is earlier:"
        raise ValueError(
            f"--resume: {checkpoint} is incomplete ({' and '.join(unreadable)} missing or cut short): the run was "
            f"stopped while writing it; {way_back} start again with --overwrite."
        )
    return checkpoint


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


STAGE_RECORD = "stage.json"  # written by a run stopped at --max-time, in its folder and its last checkpoint
CONTINUATION_RECORD = "continued_from.json"  # in a run continued from committed weights: the step it went on from
REWARM_SHARE = 0.02  # of a run's optimizer steps: the warm-up of a fresh optimizer in a continued run


def check_max_time(max_time: float | None) -> None:
    """Refuse a `--max-time` that is not a positive number of minutes."""
    if max_time is not None and not (isinstance(max_time, (int, float)) and max_time > 0 and math.isfinite(max_time)):
        raise ValueError(f"--max-time must be a positive number of minutes, got {max_time!r}; leave it out to run "
                         "to the end, or give the minutes this stage may take (e.g. --max-time 90).")


class StageLimit(TrainerCallback):
    """Stops training at the first optimizer step that ends past `max_time` minutes from `started` (a
    `time.time()`), with a checkpoint saved at that step; `stopped` says whether it did (a run that reaches
    its last step is not stopped). Under several processes the main process's clock decides for all."""

    def __init__(self, started: float, max_time: float | None) -> None:
        self.deadline = None if max_time is None else started + 60.0 * max_time
        self.stopped = False

    def on_step_end(self, args: TrainingArguments, state: Any, control: Any, **kwargs: Any) -> None:
        if self.deadline is None or state.global_step >= state.max_steps:
            return
        past = [time.time() >= self.deadline]
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
    that `hf-attn checkpoint` commits it with the weights), and returned."""
    step, total = trainer.state.global_step, trainer.state.max_steps
    checkpoint = output_dir / f"checkpoint-{step}"
    committed = f"checkpoints/{experiment.name}"
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
        "precision": "bf16" if trainer.args.bf16 else "fp32",
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


def run_record(
    experiment: Experiment, trainer: Trainer, train_output: Any, tokenizer: PreTrainedTokenizerBase, started: float
) -> dict[str, Any]:
    """What every run's metrics.json records besides its scores: steps, time, machine, command, experiment.

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
        "precision": "bf16" if trainer.args.bf16 else "fp32",
        "vocab_size": len(tokenizer),
        "max_length": experiment.max_length,
        "command": cli_command(),
        "experiment": settings,
    }


def cli_command() -> str | None:
    """This process's command line as `hf-attn ...` when it is the command-line tool (the `hf-attn` entry
    point, or `python -m hf_attn.cli` where the package is not installed), for a run's record; None for a
    run started from Python code, whose command line would not reproduce it."""
    program = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if program is None or not (program.match("hf-attn") or program.match("hf_attn/cli.py")):
        return None
    return " ".join(["hf-attn", *sys.argv[1:]])


def hardware_name(device: torch.device) -> str:
    """What a run trained on, for its card: the same run takes seconds on a GPU and hours on a few CPU cores."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU, {torch.get_num_threads()} threads"


def init_from_metrics(experiment: Experiment) -> dict[str, Any] | None:
    """The `metrics.json` of the run `experiment.init_from` came from (None for a folder without one)."""
    source = Path(experiment.init_from) / "metrics.json"
    return json.loads(source.read_text()) if source.is_file() else None


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
