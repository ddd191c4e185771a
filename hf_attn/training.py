"""Experiments: a YAML file -> tokenizer, data, model -> `Trainer` (Accelerate underneath) -> metrics.

One YAML file per experiment (see `configs/`). Its sections are checked against what they feed:
`model` against `HfAttnConfig`'s fields, `training` against `TrainingArguments`' fields, so a typo
fails before any data is loaded, with the file, the key and the allowed keys in the message.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from accelerate import PartialState
from datasets import DatasetDict
from sklearn.metrics import accuracy_score, f1_score
from transformers import (
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
    EarlyStoppingCallback,
    EvalPrediction,
    PreTrainedTokenizerBase,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)
from transformers.trainer_callback import ExportableState
from transformers.trainer_utils import get_last_checkpoint

from .configuration_hf_attn import HfAttnConfig
from .data import LABEL_NAMES, RandomWindowCollator, load_imdb, tokenize_splits
from .modeling_hf_attn import HfAttnForSequenceClassification, HfAttnPreTrainedModel


class ExperimentConfigError(ValueError):
    """A YAML experiment file (or a key=value override) that cannot describe an experiment."""


@dataclasses.dataclass
class Experiment:
    """What one training run needs; every field can come from the YAML file or a key=value override.

    Attributes:
        name: used for `results/<name>.json` and the default output folder.
        dataset: anything `hf_attn.data.load_imdb` takes (Hub id, parquet folder, aclImdb/, `sample`).
        week3: a Week 3 folder (tokenizer files, DAN embedding); `None` trains a tokenizer on the
            training split (for smoke runs and users without Week 3 files).
        tokenizer_vocab_size: vocabulary size when a tokenizer is trained here.
        max_length: tokens per review seen by the model (the reference used 128).
        train_window: which `max_length` tokens of a longer training review the model sees: `start`
            (the first ones, like evaluation and the reference) or `random` (a new random window of
            the whole review each time it is drawn; see `hf_attn.data.RandomWindowCollator`).
        init_embedding_from_dan: start the token embedding from the Week 3 DAN embedding.
        limit_train / limit_eval: keep only the first N reviews of train (when pretraining, also of the
            unlabelled reviews) / of validation and test (smoke tests, pretraining's evaluation);
            `None` keeps all.
        evals_per_epoch: evaluations (and checkpoints) per epoch; more means finer resumption points
            on slow machines at the cost of validation passes.
        early_stopping_patience: evaluations without a lower validation loss before stopping.
        init_from: a saved hf_attn model folder (e.g. from `hf-attn pretrain`) whose encoder and tokenizer
            start the classifier instead of a fresh encoder with the DAN embedding; `model` may then
            change only the fine-tuning settings in `FINE_TUNING_SETTINGS`.
        mlm_probability: `hf-attn pretrain` only: the share of real tokens each batch masks.
        objective: `hf-attn pretrain` only: `mlm` (masked language model, BERT) or `rtd` (replaced-token
            detection, ELECTRA: a small generator fills the masked positions and the encoder learns at
            every position whether its token is original; see `HfAttnForReplacedTokenDetection`).
        model: `HfAttnConfig` fields.
        training: `TrainingArguments` fields.
    """

    name: str
    dataset: str = "stanfordnlp/imdb"
    week3: str | None = None
    tokenizer_vocab_size: int = 500
    max_length: int = 128
    train_window: str = "start"
    init_embedding_from_dan: bool = True
    limit_train: int | None = None
    limit_eval: int | None = None
    evals_per_epoch: int = 1
    early_stopping_patience: int | None = 2
    seed: int = 42
    init_from: str | None = None
    mlm_probability: float = 0.15
    objective: str = "mlm"
    model: dict[str, Any] = dataclasses.field(default_factory=dict)
    training: dict[str, Any] = dataclasses.field(default_factory=dict)


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


def _type_matches(value: Any, default: Any) -> bool:
    """Loose YAML type check against a field's default: ints are floats, None is always allowed."""
    if value is None or default is None or default is dataclasses.MISSING:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, str):
        return isinstance(value, str)
    return True


def _check_section(section: dict[str, Any], cls: type, where: str) -> None:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key, value in section.items():
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=3, cutoff=0.6) or [
                name for name in fields if key.lower() in name.lower()
            ]
            hint = f" Did you mean {', '.join(close[:5])}?" if close else ""
            raise ExperimentConfigError(f"{where}: unknown key `{key}` for {cls.__name__}.{hint}")
        default = fields[key].default
        if not _type_matches(value, default):
            raise ExperimentConfigError(
                f"{where}: `{key}` must be of type {type(default).__name__} (like its default {default!r}), "
                f"got {value!r} ({type(value).__name__})."
            )


# Numbers in exponent form without a dot (3e-4, 1E5), which YAML 1.1 leaves as strings; nothing else
# (names like `nan`, `inf`, `1_000`) is turned into a float behind the user's back.
_EXPONENT_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")

# The values of Experiment.train_window: which tokens of a longer training review a step sees.
TRAIN_WINDOWS = frozenset({"start", "random"})
# The values of Experiment.objective (`hf-attn pretrain`): masked LM or replaced-token detection.
PRETRAINING_OBJECTIVES = frozenset({"mlm", "rtd"})

# What a classifier started from a pretrained folder (`init_from`) may set differently from it;
# anything else (width, positions, layers) is the pretrained architecture and must match.
FINE_TUNING_SETTINGS = frozenset(
    {"hidden_dropout", "attention_dropout", "classifier_dropout", "dropout_implementation", "classifier_pooling"}
)


def parse_override(override: str) -> tuple[list[str], Any]:
    """`training.learning_rate=1e-3` -> (["training", "learning_rate"], 0.001), values parsed as YAML."""
    if "=" not in override:
        raise ExperimentConfigError(f"override {override!r} must look like key=value (e.g. model.hidden_size=256)")
    key, raw = override.split("=", 1)
    value = yaml.safe_load(raw)
    if isinstance(value, str) and _EXPONENT_NUMBER.fullmatch(value):  # YAML 1.1 reads 3e-4 as a string
        value = float(value)
    return key.strip().split("."), value


def load_experiment(path: str | os.PathLike[str], overrides: Sequence[str] = ()) -> Experiment:
    """Read a YAML experiment, apply `key=value` overrides, and validate every section."""
    path = Path(path)
    if not path.is_file():
        raise ExperimentConfigError(f"experiment file {path} does not exist; see configs/ for examples.")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise ExperimentConfigError(f"{path} is not valid YAML: {error}") from error
    if not isinstance(raw, dict):
        raise ExperimentConfigError(f"{path} must hold a mapping of keys (name, model, training, ...).")
    raw.setdefault("name", path.stem)
    for override in overrides:
        keys, value = parse_override(override)
        target = raw
        for key in keys[:-1]:
            target = target.setdefault(key, {})
            if not isinstance(target, dict):
                raise ExperimentConfigError(f"override {override!r}: `{key}` is not a section")
        target[keys[-1]] = value

    known = {f.name for f in dataclasses.fields(Experiment)}
    unknown = set(raw) - known
    if unknown:
        raise ExperimentConfigError(f"{path}: unknown key(s) {sorted(unknown)}; allowed: {sorted(known)}.")
    for key, value in raw.items():
        default = Experiment.__dataclass_fields__[key].default
        if key in ("model", "training"):
            if not isinstance(value, dict):
                raise ExperimentConfigError(f"{path}: `{key}` must be a mapping of {key} settings.")
        elif not _type_matches(value, default):
            raise ExperimentConfigError(f"{path}: `{key}` must be like {default!r}, got {value!r}.")
    for key, allowed in (("train_window", TRAIN_WINDOWS), ("objective", PRETRAINING_OBJECTIVES)):
        if key in raw and raw[key] not in allowed:
            raise ExperimentConfigError(f"{path}: {key} must be one of {sorted(allowed)}, got {raw[key]!r}.")
    sampling = raw.get("training", {}).get("train_sampling_strategy")  # `training` is a mapping (checked above)
    if raw.get("train_window") == "random" and sampling == "group_by_length":
        raise ExperimentConfigError(
            f"{path}: train_sampling_strategy group_by_length would sort by whole-review lengths, which random "
            "windows cut to max_length; use one of the two."
        )
    _check_section(raw.get("model", {}), HfAttnConfig, f"{path} [model]")
    _check_section(raw.get("training", {}), TrainingArguments, f"{path} [training]")
    try:
        HfAttnConfig(**raw.get("model", {}))  # fail now, not after tokenizing 50,000 reviews
    except ValueError as error:
        raise ExperimentConfigError(f"{path} [model]: {error}") from error
    experiment = Experiment(**raw)
    if experiment.init_from is not None:
        check_init_from(experiment)
    return experiment


def compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
    """Accuracy and binary F1 (positive class), computed with scikit-learn."""
    predicted = np.argmax(prediction.predictions, axis=-1)
    labels = prediction.label_ids
    return {"accuracy": float(accuracy_score(labels, predicted)), "f1": float(f1_score(labels, predicted))}


def load_tokenizer(experiment: Experiment, train_texts: Sequence[str]) -> PreTrainedTokenizerBase:
    """The pretrained folder's tokenizer (`init_from`), the Week 3 one (`week3`), or one trained here."""
    from .tokenization_hf_attn import HfAttnTokenizerFast, train_week3_tokenizer

    if experiment.init_from is not None:
        return AutoTokenizer.from_pretrained(experiment.init_from)
    if experiment.week3 is not None:
        return HfAttnTokenizerFast.from_week3(experiment.week3)
    return train_week3_tokenizer(
        train_texts, vocab_size=experiment.tokenizer_vocab_size, max_seq=experiment.max_length
    )


def build_model(
    experiment: Experiment,
    tokenizer: PreTrainedTokenizerBase,
    model_class: type[HfAttnPreTrainedModel] = HfAttnForSequenceClassification,
) -> HfAttnPreTrainedModel:
    """The model for this experiment: from `experiment.init_from` when set, else a fresh one whose
    token embedding starts from the Week 3 DAN embedding if asked."""
    label_maps = {"id2label": dict(enumerate(LABEL_NAMES)), "label2id": {name: i for i, name in enumerate(LABEL_NAMES)}}
    if experiment.init_from is not None:
        return _from_pretrained(experiment, model_class, label_maps)
    model_settings = dict(experiment.model)
    embedding_file = Path(experiment.week3) / "models" / "imdb_embedding_layer.pt" if experiment.week3 else None
    use_dan = experiment.init_embedding_from_dan and embedding_file is not None and embedding_file.is_file()
    if use_dan:
        from .week3 import read_embedding_width

        model_settings.setdefault("hidden_size", read_embedding_width(embedding_file))
    config = HfAttnConfig(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        max_position_embeddings=experiment.max_length,
        **label_maps,
        **model_settings,
    )
    model = model_class(config)
    if use_dan:
        from .week3 import load_week3_embedding

        load_week3_embedding(model, embedding_file)
    return model


def _from_pretrained(
    experiment: Experiment, model_class: type[HfAttnPreTrainedModel], label_maps: dict[str, Any]
) -> HfAttnPreTrainedModel:
    """Load `experiment.init_from` (checked by `check_init_from`) with the experiment's fine-tuning settings."""
    fine_tuning = {key: value for key, value in experiment.model.items() if key in FINE_TUNING_SETTINGS}
    return model_class.from_pretrained(experiment.init_from, **label_maps, **fine_tuning)


def init_from_metrics(experiment: Experiment) -> dict[str, Any] | None:
    """The `metrics.json` of the run `experiment.init_from` came from (None for a folder without one)."""
    source = Path(experiment.init_from) / "metrics.json"
    return json.loads(source.read_text()) if source.is_file() else None


def check_init_from(experiment: Experiment) -> None:
    """Refuse an `init_from` folder that is not a saved model, or architecture settings that disagree
    with what was pretrained (they would load silently and then mean something else, e.g. RoPE weights
    read as sinusoidal)."""
    source = Path(experiment.init_from)
    if not (source / "config.json").is_file():
        raise ExperimentConfigError(
            f"init_from: {source} holds no config.json; pass a folder written by `hf-attn pretrain` "
            "(or any hf_attn save_pretrained folder)."
        )
    pretrained = HfAttnConfig.from_pretrained(source)
    for key, value in experiment.model.items():
        if key not in FINE_TUNING_SETTINGS and getattr(pretrained, key, None) != value:
            raise ExperimentConfigError(
                f"[model] {key}={value!r} but {source} was pretrained with {key}={getattr(pretrained, key, None)!r}; "
                f"drop the key or make it match (fine-tuning may change only {sorted(FINE_TUNING_SETTINGS)})."
            )
    if experiment.max_length > pretrained.max_position_embeddings:
        raise ExperimentConfigError(
            f"max_length {experiment.max_length} exceeds the {pretrained.max_position_embeddings} positions "
            f"{source} was pretrained on; use max_length <= {pretrained.max_position_embeddings}."
        )


def training_arguments(experiment: Experiment, output_dir: Path, n_train: int, **fixed: Any) -> TrainingArguments:
    """`TrainingArguments` from the package defaults, the YAML `training` section and `fixed` (which wins).

    Evaluation and checkpoints come `evals_per_epoch` times per epoch unless the YAML sets `eval_steps`
    / `save_steps`; on a machine without a GPU the run stays on the CPU (also under `accelerate launch`).
    """
    settings = {**TRAINING_DEFAULTS, **experiment.training}
    on_cpu = not torch.cuda.is_available()
    if on_cpu:
        settings.setdefault("use_cpu", True)
    world_size = PartialState(cpu=on_cpu).num_processes
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


def resume_checkpoint(output_dir: Path, resume: bool, model: HfAttnPreTrainedModel) -> str | None:
    """The last checkpoint in `output_dir` when resuming (an error if there is none), else None.

    The model is first switched to the checkpoint's RoPE channel pairing: a run interrupted before
    `rope_layout` existed trained halves pairs, which a config built from its YAML today would read as
    interleaved (the weights would load, silently meaning something else)."""
    if not resume:
        return None
    checkpoint = get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None
    if checkpoint is None:
        raise FileNotFoundError(
            f"--resume: no checkpoint-* folder in {output_dir}; start without --resume, or pass the "
            "--output-dir of the interrupted run."
        )
    model.set_rope_layout(HfAttnConfig.from_pretrained(checkpoint).rope_layout)
    return checkpoint


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


def cli_command() -> str | None:
    """This process's command line as `hf-attn ...` when it is the command-line tool (the `hf-attn` entry
    point, or `python -m hf_attn.cli` where the package is not installed), for a run's record; None for a
    run started from Python code, whose command line would not reproduce it."""
    program = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if program is None or not (program.match("hf-attn") or program.match("hf_attn/cli.py")):
        return None
    return " ".join(["hf-attn", *sys.argv[1:]])


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
        "vocab_size": len(tokenizer),
        "max_length": experiment.max_length,
        "command": cli_command(),
        "experiment": settings,
    }


def hardware_name(device: torch.device) -> str:
    """What a run trained on, for its card: the same run takes 40 s on a GPU and hours on 2 CPU cores."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU, {torch.get_num_threads()} threads"


def limit_rows(split: Any, limit: int | None) -> Any:
    """The first `limit` rows of a dataset (all of them when `limit` is None or larger)."""
    return split if limit is None else split.select(range(min(limit, len(split))))


def train(
    experiment: Experiment,
    output_dir: str | os.PathLike[str],
    resume: bool = False,
    results_path: str | os.PathLike[str] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> dict[str, Any]:
    """Train, keep the best checkpoint by validation loss, score validation and test, save everything.

    Writes `output_dir/` (model + tokenizer + code, loadable with `from_pretrained`),
    `output_dir/checkpoint-*` (for `resume=True`) and `output_dir/metrics.json`; also copies the
    metrics to `results_path` when given. Returns the metrics.
    """
    output_dir = Path(output_dir)
    started = time.time()
    raw = load_imdb(experiment.dataset)
    raw["train"] = limit_rows(raw["train"], experiment.limit_train)
    for name in ("validation", "test"):
        raw[name] = limit_rows(raw[name], experiment.limit_eval)
    tokenizer = load_tokenizer(experiment, raw["train"]["text"])
    random_windows = experiment.train_window == "random"
    splits = tokenize_splits(raw, tokenizer, experiment.max_length, untruncated=("train",) if random_windows else ())
    set_seed(experiment.seed)  # before the model exists: its random init must not depend on what ran earlier
    model = build_model(experiment, tokenizer)
    args = training_arguments(
        experiment, output_dir, len(splits["train"]),
        load_best_model_at_end=True, metric_for_best_model="loss", greater_is_better=False,
    )
    callbacks = [*callbacks, TrainingClock()]
    if experiment.early_stopping_patience is not None:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=experiment.early_stopping_patience))
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=splits["train"],
        eval_dataset=splits["validation"],
        data_collator=RandomWindowCollator(tokenizer, experiment.max_length) if random_windows
        else DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer,
        compute_metrics=compute_metrics,
        callbacks=callbacks,
    )
    train_output = trainer.train(resume_from_checkpoint=resume_checkpoint(output_dir, resume, model))
    validation = trainer.evaluate(splits["validation"], metric_key_prefix="val")
    test = trainer.evaluate(splits["test"], metric_key_prefix="test")
    trainer.save_model(str(output_dir))

    metrics = {
        "name": experiment.name,
        "test_accuracy": test["test_accuracy"],
        "test_f1": test["test_f1"],
        "test_loss": test["test_loss"],
        "val_accuracy": validation["val_accuracy"],
        "val_f1": validation["val_f1"],
        "val_loss": validation["val_loss"],
        "best_checkpoint": trainer.state.best_model_checkpoint,
        "n_train": len(splits["train"]),
        "n_validation": len(splits["validation"]),
        "n_test": len(splits["test"]),
        **run_record(experiment, trainer, train_output, tokenizer, started),
    }
    if experiment.init_from is not None:  # where the encoder came from, for tables and model cards
        metrics["pretraining"] = init_from_metrics(experiment)
    write_metrics(trainer, metrics, output_dir, results_path)
    return metrics


def evaluate_saved(
    model_dir: str | os.PathLike[str],
    dataset: str = "stanfordnlp/imdb",
    split: str = "test",
    limit: int | None = None,
    batch_size: int = 64,
) -> dict[str, float]:
    """Score a saved model (anything `from_pretrained` loads) on one split of the seed split."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir)
    raw = load_imdb(dataset)
    if split not in raw:
        raise ValueError(f"split {split!r} does not exist; choose one of {sorted(raw)}")
    tokenized = tokenize_splits(DatasetDict({split: limit_rows(raw[split], limit)}), tokenizer,
                                model.config.max_position_embeddings)
    args = TrainingArguments(output_dir=str(Path(model_dir) / "eval"), report_to="none",
                             per_device_eval_batch_size=batch_size)
    trainer = Trainer(model=model, args=args, data_collator=DataCollatorWithPadding(tokenizer),
                      compute_metrics=compute_metrics)
    return trainer.evaluate(tokenized[split], metric_key_prefix=split)
