"""Text classification on any registered dataset (`hf_attn.tasks`): training a classifier (`hf-attn train`) and
scoring a saved one (`hf-attn evaluate`).

`train` keeps the checkpoint with the lowest validation loss (early stopping on it) and scores validation and
test with accuracy and F1: the positive class's (label 1) for two labels, the mean over classes (macro) beyond.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import datasets
import numpy as np
from datasets import DatasetDict
from transformers import (
    DataCollatorWithPadding,
    EvalPrediction,
    Trainer,
    TrainingArguments,
)

from ..configuration_hf_attn import HfAttnConfig
from ..evaluation import classification_metric, f1_key
from ..modeling_hf_attn import HfAttnForSequenceClassification
from ..runtime.precision import default_device, resolve_precision
from ..saved import load_saved_classifier
from ..tasks import dataset_source, load_classification
from ..tasks.imdb import IMDB_HUB_ID
from .adversarial import AdversarialTrainer
from .config import Experiment, refuse_scheduled_sampling
from .data import RandomWindows, limit_rows, tokenize_splits
from .records import read_run_metrics
from .run import Task, load_tokenizer, run, say_without_dan
from .self_training import pseudo_labelled


def compute_metrics(prediction: EvalPrediction) -> dict[str, float]:
    """Accuracy, and F1: of the positive class (label 1) for two labels, `macro_f1` (the unweighted mean of every
    class's F1) for more, computed by the package's `evaluate` metric module (`hf_attn.evaluation`), the one
    `evaluate.evaluator` takes, so that both give the same numbers. A class that neither labels nor predictions
    hold has F1 0."""
    metric = classification_metric(num_labels=prediction.predictions.shape[-1])
    return metric.compute(predictions=np.argmax(prediction.predictions, axis=-1), references=prediction.label_ids)


def unlabelled_texts(experiment: Experiment, reader: str, fix: str) -> datasets.Dataset:
    """The dataset's unlabelled texts (first `limit_train`) that `reader` (a setting) asks for; refused, naming `fix`,
    where the dataset has none."""
    texts = dataset_source(experiment.dataset).unlabelled_texts()
    if texts is None:
        raise ValueError(f"{reader}: the dataset {experiment.dataset!r} has no unlabelled texts (IMDb's are its "
                         f"`unsupervised` split); {fix}.")
    return limit_rows(texts, experiment.limit_train)


def unlabelled_windows(experiment: Experiment, tokenizer: Any) -> datasets.Dataset | None:
    """The dataset's unlabelled texts (first `limit_train`) for virtual adversarial training
    (`adversarial.unlabelled`), tokenized whole and read as random `max_length`-token windows; None when not asked."""
    if not experiment.adversarial.unlabelled:
        return None
    texts = unlabelled_texts(experiment, "adversarial.unlabelled", "set adversarial.unlabelled=false")
    tokenized = tokenize_splits(DatasetDict(unlabelled=texts), tokenizer, experiment.max_length, ("unlabelled",))
    return tokenized["unlabelled"].with_transform(RandomWindows(experiment.max_length))


def with_pseudo_labels(experiment: Experiment, train: datasets.Dataset
                       ) -> tuple[datasets.Dataset, dict[str, Any] | None]:
    """The training split with the unlabelled texts (first `limit_train`) its `self_training.teacher` labels surely
    enough, and what the run records of them; the split alone, and None, without a teacher."""
    if experiment.self_training.teacher is None:
        return train, None
    texts = unlabelled_texts(experiment, "self_training", "drop self_training.teacher")
    precision = resolve_precision(experiment.precision, default_device())
    pseudo, record = pseudo_labelled(experiment.self_training, texts, train, precision)
    return datasets.concatenate_datasets([train, pseudo]), record


def classification_task(experiment: Experiment) -> Task:
    """The experiment's dataset (rows limited as the experiment asks), tokenized; training sees each text's first
    `max_length` tokens, or a random window of them with `train_window: random`; validation and test the
    first `read_length` (what the saved classifier reads)."""
    refuse_scheduled_sampling(experiment, "a classifier")
    data = load_classification(experiment.dataset)
    raw = data.splits
    raw["train"] = limit_rows(raw["train"], experiment.limit_train)
    for name in ("validation", "test"):
        raw[name] = limit_rows(raw[name], experiment.limit_eval)
    raw["train"], self_training = with_pseudo_labels(experiment, raw["train"])
    tokenizer = load_tokenizer(experiment, raw["train"]["text"])
    say_without_dan(experiment, tokenizer)
    random_windows = experiment.train_window == "random"
    untruncated = ("train",) if random_windows else ()
    splits = tokenize_splits(DatasetDict(train=raw["train"]), tokenizer, experiment.max_length, untruncated)
    splits.update(tokenize_splits(DatasetDict(validation=raw["validation"], test=raw["test"]), tokenizer,
                                  experiment.reading_length))

    def score(trainer: Trainer) -> dict[str, Any]:
        validation = trainer.evaluate(splits["validation"], metric_key_prefix="val")
        test = trainer.evaluate(splits["test"], metric_key_prefix="test")
        keys = ("accuracy", f1_key(len(data.label_names)), "loss")
        return {
            **{f"test_{key}": test[f"test_{key}"] for key in keys},
            **{f"val_{key}": validation[f"val_{key}"] for key in keys},
            "best_checkpoint": trainer.state.best_model_checkpoint,
            "dataset": data.record(),
            **({"self_training": self_training} if self_training else {}),
        }

    return Task(
        tokenizer=tokenizer,
        model_class=HfAttnForSequenceClassification,
        train_dataset=splits["train"].with_transform(RandomWindows(experiment.max_length)) if random_windows
        else splits["train"],
        eval_dataset=splits["validation"],
        data_collator=DataCollatorWithPadding(tokenizer),
        score=score,
        sizes={f"n_{name}": len(split) for name, split in splits.items()},
        init_from_record="pretraining",
        arguments={"load_best_model_at_end": True, "metric_for_best_model": "loss", "greater_is_better": False},
        trainer_class=functools.partial(AdversarialTrainer, adversarial=experiment.adversarial,
                                        unlabelled=unlabelled_windows(experiment, tokenizer)),
        compute_metrics=compute_metrics,
        label_names=data.label_names,
    )


def train(experiment: Experiment, output_dir: str | os.PathLike[str], **options: Any) -> dict[str, Any]:
    """Train a classifier, keep the best checkpoint by validation loss, score validation and test, save
    everything; `options` are `run`'s (`resume`, `results_path`, `callbacks`). With `init_from`, the record of
    the pretraining run goes under `pretraining`."""
    return run(experiment, classification_task, output_dir, **options)


def trained_dataset(model_dir: str | os.PathLike[str]) -> str | dict[str, Any]:
    """The dataset the run in `model_dir` trained on, as its metrics.json records it (the experiment's `dataset`, with
    its columns and split seed); IMDb (the Hub id) for a folder without that record: a Hub repo, a model saved by
    other code."""
    metrics = read_run_metrics(model_dir) or {}
    return metrics.get("experiment", {}).get("dataset", IMDB_HUB_ID)


def _moved_dataset(model_dir: str | os.PathLike[str], spec: str | dict[str, Any]) -> FileNotFoundError:
    """The error of a run's recorded dataset that is not where the run read it: naming it and the --dataset
    (and --text-column / --label-column) that score the run on it where it is now."""
    settings = {"path": spec} if isinstance(spec, str) else spec
    where = settings.get("path") or settings.get("source") or settings.get("folder")
    columns = "".join(f" --{key.replace('_', '-')} {settings[key]}" for key in ("text_column", "label_column")
                      if key in settings)
    return FileNotFoundError(f"{model_dir} was trained on {where} (its metrics.json says so), which is not found from "
                             f"{os.getcwd()}; pass where it is now: --dataset PATH{columns}")


def evaluate_saved(
    model_dir: str | os.PathLike[str],
    dataset: str | dict[str, Any] | None = None,
    split: str = "test",
    limit: int | None = None,
    batch_size: int = 64,
    precision: str = "auto",
    **config_changes: Any,
) -> dict[str, float]:
    """Score a saved classifier on one split of a registered dataset (`hf_attn.tasks`; `all`: every row of it; by
    default the dataset the run trained on, `trained_dataset`: one that has moved is a FileNotFoundError naming it),
    reading each review as its config's reading policy says (`read_length`, `window_stride`), as `pipeline` and
    `hf-attn predict` read it; `config_changes` are config fields the model is loaded with instead of the saved ones
    (another `read_length` or `window_stride`, a RoPE scaling).

    The folder is loaded strictly (`load_saved_classifier`): a weight it lacks or has left over is a
    ValueError, not an accuracy of random weights. `precision` is an experiment's (`auto`, `bf16`, `fp32`);
    the scores say which one they were computed in.
    """
    device = default_device()
    computed_in = resolve_precision(precision, device)
    model, tokenizer = load_saved_classifier(model_dir, **config_changes)
    spec = trained_dataset(model_dir) if dataset is None else dataset
    try:
        data = load_classification(spec)
    except FileNotFoundError:
        if dataset is not None:
            raise
        raise _moved_dataset(model_dir, spec) from None
    raw = data.splits
    if split == "all":  # data the model never saw: every row, not the cut a file's missing test split gets
        raw = {split: datasets.concatenate_datasets(list(raw.values()))}
    if split not in raw:
        raise ValueError(f"split {split!r} does not exist; choose one of {sorted(raw)} or 'all'")
    saved_labels = [model.config.id2label[index] for index in range(model.config.num_labels)]
    if len(saved_labels) != len(data.label_names):
        raise ValueError(f"{model_dir} classifies into {len(saved_labels)} labels ({', '.join(saved_labels)}) but "
                         f"{data.name} has {len(data.label_names)} ({', '.join(data.label_names)}); score it on the "
                         "dataset it was trained for")
    if data.label_names != tuple(saved_labels) and set(data.label_names) == set(saved_labels):
        # The model's names in another order (a file's labels are sorted): each row scored against its name's id.
        model_id = [saved_labels.index(name) for name in data.label_names]
        raw[split] = raw[split].map(lambda row: {"label": model_id[row["label"]]})
    # An hf_attn model cuts at its read_length (no need to tokenize more); other models read at most their
    # tokenizer's model_max_length, as pipelines with truncation do.
    config = model.config
    length = config.read_length if isinstance(config, HfAttnConfig) else tokenizer.model_max_length
    reviews = tokenize_splits(DatasetDict({split: limit_rows(raw[split], limit)}), tokenizer, length)[split]
    # Batches of reviews of similar length: each batch pads to its longest review, so sorting cuts the padding
    # (and the attention over it) of long readings; accuracy, F1 and the mean loss do not depend on the order.
    lengths = [len(ids) for ids in reviews["input_ids"]]
    reviews = reviews.select(sorted(range(len(reviews)), key=lengths.__getitem__))
    args = TrainingArguments(output_dir=str(Path(model_dir) / "eval"), report_to="none",
                             per_device_eval_batch_size=batch_size, bf16=computed_in == "bf16",
                             use_cpu=device.type == "cpu")
    trainer = Trainer(model=model, args=args, data_collator=DataCollatorWithPadding(tokenizer),
                      compute_metrics=compute_metrics)
    return {**trainer.evaluate(reviews, metric_key_prefix=split), f"{split}_reviews": len(reviews),
            "precision": computed_in}
