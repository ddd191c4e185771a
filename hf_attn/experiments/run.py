"""The one run skeleton behind `hf-attn train` and `hf-attn pretrain`.

A run goes tokenizer -> model config -> model -> `Trainer` -> metrics. What differs between kinds of run
is a `Task`: `classification.classification_task` and `pretraining.pretraining_task` load their data and
tokenizer and say which datasets, collator, model class and scores the run has. `run` does the rest the
same way for both: the model (fresh, from `init_from`, or from the checkpoint a resumed run continues),
`TrainingArguments`, a `Trainer` with a `TrainingClock`, training with resumption, saving model and
tokenizer, scoring, and `metrics.json` with the run's record (steps, time, hardware, precision, command,
experiment).

The concerns around it live beside it: `folders` (who may write the output folder, the checkpoint to resume),
`stages` (stopping at `max_time` and continuing, here or on another machine) and `records` (what metrics.json
keeps besides the scores).
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import datasets
import torch
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
from transformers.trainer_utils import TrainOutput

from ..configuration_hf_attn import HfAttnConfig
from ..modeling_hf_attn import HfAttnForReplacedTokenDetection, HfAttnForSequenceClassification, HfAttnPreTrainedModel
from ..runtime.precision import default_device, resolve_precision
from ..saved import load_strictly
from ..week3 import load_week3_embedding, load_week3_tokenizer, read_embedding_width, train_week3_tokenizer
from .config import FINE_TUNING_SETTINGS, Experiment
from .folders import RunFolderError, claim_output_dir, keep_only_checkpoint, process_state, resume_checkpoint
from .records import ExperimentRecord, TrainingClock, check_resumed, init_from_metrics, run_record, write_metrics
from .stages import (
    STAGE_RECORD,
    ContinuedSchedule,
    StageClock,
    StageLimit,
    continued_checkpoint,
    read_continuation,
    write_stage,
)

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
    needs `resume` or `overwrite` (see `claim_output_dir`); `resume` refuses an experiment that differs from the one
    the checkpoint records (`check_resumed`).

    With `max_time` (minutes, counted from the call), the run stops at the first optimizer step past it,
    saves a checkpoint and writes `output_dir/stage.json`; the returned record then has `stage: stopped`
    and no scores. `continue_from` is a folder written by `hf-attn checkpoint` from a stopped stage's
    checkpoint (float16 weights and its `trainer_state.json`): the run goes on from its step in a new
    `output_dir` (see `continued_checkpoint`).
    """
    output_dir = Path(output_dir)
    started = time.time()
    clock = StageClock(max_time, started)
    run_precision(experiment)  # bf16 asked of hardware without it fails now, not after the data is loaded
    if resume and continue_from is not None:
        raise RunFolderError("--resume continues from the output folder's last checkpoint and --continue-from from a "
                             "committed one: pass one.")
    with claim_output_dir(output_dir, resume, overwrite):
        checkpoint = resume_checkpoint(output_dir) if resume else None
        if checkpoint is not None:
            check_resumed(checkpoint, experiment)
        record = ExperimentRecord(experiment)  # as given: a task's model defaults are its code's, not settings
        task = make_task(experiment)
        if task.model_defaults:
            experiment = dataclasses.replace(experiment, model={**task.model_defaults, **experiment.model})
        if continue_from is not None:
            checkpoint = continued_checkpoint(continue_from, output_dir, task.model_class)
        set_seed(experiment.seed)  # before the model exists: its random init must not depend on what ran earlier
        model = build_model(experiment, task.tokenizer, task.model_class, checkpoint, task.label_names)
        args = training_arguments(experiment, output_dir, len(task.train_dataset), **task.arguments)
        keeps_stop_checkpoint = max_time is not None and args.load_best_model_at_end and args.save_total_limit == 1
        if keeps_stop_checkpoint:
            # Under a limit of 1, Trainer deletes every checkpoint but the best when train() ends, the one a stopped
            # stage saves with it: a stage keeps two, the best and the last, for the next stage to resume from
            args.save_total_limit = 2
        stage_limit = StageLimit(clock)
        callbacks = [*callbacks, TrainingClock(), stage_limit, record]
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
        if keeps_stop_checkpoint:  # ended within its time: the limit of 1 it was asked for holds again
            keep_only_checkpoint(output_dir, trainer.state.best_model_checkpoint)
        return score_and_save(trainer, task, experiment, train_output, output_dir, results_path, started)


def score_and_save(
    trainer: Trainer,
    task: Task,
    experiment: Experiment,
    train_output: TrainOutput,
    output_dir: Path,
    results_path: str | os.PathLike[str] | None,
    started: float,
) -> dict[str, Any]:
    """Save the trained model in `output_dir`, score it and write its metrics (and `results_path`); returns them."""
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


def dan_embedding_file(experiment: Experiment) -> Path | None:
    """Where the experiment's Week 3 folder keeps the DAN embedding a fresh model's token table starts from."""
    return Path(experiment.week3) / "models" / "imdb_embedding_layer.pt" if experiment.week3 else None


def say_without_dan(experiment: Experiment, tokenizer: PreTrainedTokenizerBase) -> None:
    """One line on stderr when a run asks to start its token embedding from the Week 3 DAN
    (`init_embedding_from_dan`, the default) but has no DAN embedding: it then starts at random, with the tokenizer
    trained here when there is no Week 3 folder."""
    embedding_file = dan_embedding_file(experiment)
    if not experiment.init_embedding_from_dan or experiment.init_from is not None or (
            embedding_file is not None and embedding_file.is_file()):
        return
    missing = f"{embedding_file} is absent, so" if embedding_file else (
        f"no Week 3 folder (--week3): the tokenizer is a byte-level BPE of {len(tokenizer)} tokens trained on the "
        "training texts, and")
    print(f"init_embedding_from_dan: {missing} the token embedding starts at random, not from the Week 3 DAN; pass "
          "--week3 DIR (with models/imdb_embedding_layer.pt), or set init_embedding_from_dan=false to say so",
          file=sys.stderr)


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
    embedding_file = dan_embedding_file(experiment)
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
