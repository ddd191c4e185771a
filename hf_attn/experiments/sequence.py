"""Sequence tasks (`hf-attn train` on a `pairs` dataset): a decoder trained to answer, scored by exact match by length.

The data is a registered sequence task (`hf_attn.tasks`: `length` for the generated copy / reverse / sort /
addition tasks, `scan` for SCAN's length split). A decoder-only `HfAttnForCausalLM`, fresh and sized by the
experiment's `model` section, reads `[BOS] input [SEP]` and learns to write `target [EOS]`: the loss falls on the
answer only (`decoder_features`), with teacher forcing or scheduled sampling (the experiment's `scheduled_sampling`
section, `CausalScheduledSamplingTrainer`). With `model.is_decoder: false` the model is an encoder instead, an
`HfAttnForMaskedLM` that reads `[BOS] input [SEP] [MASK] ... [MASK] [EOS]` and fills the answer's places in one
pass (`encoder_features`: it is told the answer's length), so that one task compares the two: without positions
an encoder reads a bag of tokens, where a decoder's causal mask still carries order. Validation loss picks the
checkpoint. The saved folder holds the model and the task's word-level tokenizer, so `from_pretrained` loads both.

Scores: exact match of the answers (a decoder's greedy ones, batched, stopping at [EOS]; an encoder's most likely
token at each [MASK]) by length bucket, with binomial standard errors, on validation (the training lengths) and
test (L+1..2L and 4L for a generated task; 23..48 for SCAN).
`score_saved` scores a saved model on any JSONL file of pairs (`hf-attn score-pairs`).

Every example of every split must fit the experiment's `max_length` (the model's `max_position_embeddings`): a
learned table has no row past it, and the other schemes record it as the longest sequence the run reads, so a run
whose test split reaches past it is refused before training, naming the length to set.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import datasets
import torch
from transformers import DataCollatorForSeq2Seq, PreTrainedTokenizerBase, Trainer

from ..configuration_hf_attn import HfAttnConfig
from ..modeling_hf_attn import HfAttnForCausalLM, HfAttnForMaskedLM, HfAttnPreTrainedModel
from ..position_ids import POSITION_ID_RULES
from ..runtime.precision import autocast, trainer_precision
from ..saved import check_known_words, load_tokenizer
from ..tasks import SequenceTask, dataset_source
from ..tasks.length import (
    BucketScore,
    Pair,
    buckets_holding,
    decoder_features,
    digit_token_ids,
    encoder_features,
    exact_match_by_length,
    read_pairs,
    with_mask_token,
    word_accuracy_by_position,
)
from .config import Experiment, refuse_classifier_sections, refuse_scheduled_sampling
from .pretraining import IGNORE_INDEX
from .run import Task, run
from .scheduled_sampling import CausalScheduledSamplingTrainer

GENERATION_BATCH_SIZE = 256
# A task's position coupling (`SequenceTask.coupled_position_ids`): an input and an answer length to the ids of
# `[BOS] input [SEP]` and of the answer's positions.
Coupling = Callable[[str, int], list[int]]
SCORED_SPLITS = (("validation", "val"), ("test", "test"))
# Wrong test answers kept in metrics.json, to read what a model writes where it fails.
ERRORS_KEPT = 20


def check_max_length(experiment: Experiment, features: datasets.DatasetDict) -> None:
    """Refuse a run whose longest example ([BOS] input [SEP] target [EOS], any split) is longer than `max_length`."""
    longest = max(len(ids) for split in features.values() for ids in split["input_ids"])
    if longest > experiment.max_length:
        raise ValueError(f"the longest example of this task ([BOS] input [SEP] target [EOS], test split included) is "
                         f"{longest} tokens, past the experiment's max_length {experiment.max_length} (a learned "
                         f"table's rows): set max_length: {longest} or more.")


def bucket_records(scores: Sequence[BucketScore]) -> list[dict[str, Any]]:
    """`BucketScore`s as JSON rows: bounds, correct, count, accuracy and its standard error."""
    return [{"low": score.low, "high": score.high, "correct": score.correct, "count": score.count,
             "accuracy": score.accuracy, "standard_error": score.standard_error} for score in scores]


def answer_text(tokenizer: PreTrainedTokenizerBase, ids: Sequence[int]) -> str:
    """The text of the tokens a model wrote before its first [EOS], special ones included: an answer that holds
    [SEP], [BOS], [PAD] or [UNK] is then wrong, not cleaned into a right one by decoding."""
    if tokenizer.eos_token_id in ids:
        ids = ids[: list(ids).index(tokenizer.eos_token_id)]
    return tokenizer.decode(ids, skip_special_tokens=False)


def left_padded(rows: Sequence[Sequence[int]]) -> torch.Tensor:
    """Rows of position ids padded with 0 on the left to the longest, as a left-padded batch of prompts."""
    longest = max(len(row) for row in rows)
    return torch.tensor([[0] * (longest - len(row)) + list(row) for row in rows])


class PositionIdsCollator(DataCollatorForSeq2Seq):
    """`DataCollatorForSeq2Seq` that also pads a task's `position_ids` (with 0, on the tokenizer's padding side):
    the tokenizer pads only the ids it makes."""

    def __call__(self, features: list[dict[str, Any]], return_tensors: str | None = None) -> dict[str, Any]:
        if "position_ids" not in features[0]:
            return super().__call__(features, return_tensors)
        rows = [list(feature["position_ids"]) for feature in features]
        batch = super().__call__([{key: value for key, value in feature.items() if key != "position_ids"}
                                  for feature in features], return_tensors)
        width = len(batch["input_ids"][0])
        padding = [[0] * (width - len(row)) for row in rows]
        right = self.tokenizer.padding_side == "right"
        batch["position_ids"] = torch.tensor([row + pad if right else pad + row for row, pad in zip(rows, padding)])
        return batch


def batches_by_length(inputs: Sequence[str], batch_size: int) -> Iterator[list[int]]:
    """The inputs' indices in batches of similar length (sorted by words), so that little of a batch is padding."""
    order = sorted(range(len(inputs)), key=lambda index: len(inputs[index].split()))
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


@torch.no_grad()
def generate_answers(model: HfAttnForCausalLM, tokenizer: PreTrainedTokenizerBase, inputs: Sequence[str],
                     targets: Sequence[str], batch_size: int = GENERATION_BATCH_SIZE,
                     coupling: Coupling | None = None) -> list[str]:
    """The model's greedy answer to each input (`answer_text`), in the inputs' order.

    Inputs go in batches of similar length, padded on the left so every prompt ends where generation starts; each
    batch stops at [EOS] or after one token more than its longest target (an answer that long is wrong whatever
    follows, so exact match is that of unbounded generation). With a task's `coupling`, `generate()` is given the
    prompt's coupled ids and the planned ids of the answer's positions (as many for every row, so that the prompts'
    ids line up with the left padding), which each step takes in turn.
    """
    model.eval()
    answers: list[str] = [""] * len(inputs)
    padding_side, tokenizer.padding_side = tokenizer.padding_side, "left"
    try:
        for batch in batches_by_length(inputs, batch_size):
            prompts = tokenizer([inputs[index] for index in batch], padding=True, return_tensors="pt")
            prompts = prompts.to(model.device)
            longest_target = max(len(targets[index].split()) for index in batch)
            if coupling is not None:
                planned = [coupling(inputs[index], longest_target + 1) for index in batch]
                prompts["position_ids"] = left_padded(planned).to(model.device)
            generated = model.generate(**prompts, max_new_tokens=longest_target + 1, do_sample=False,
                                       eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
            for index, ids in zip(batch, generated[:, prompts["input_ids"].shape[1] :].tolist()):
                answers[index] = answer_text(tokenizer, ids)
    finally:
        tokenizer.padding_side = padding_side
    return answers


@torch.no_grad()
def fill_answers(model: HfAttnForMaskedLM, tokenizer: PreTrainedTokenizerBase, inputs: Sequence[str],
                 targets: Sequence[str], batch_size: int = GENERATION_BATCH_SIZE,
                 coupling: Coupling | None = None) -> list[str]:
    """An encoder's answer to each input, in the inputs' order: its most likely token at each of the answer's
    `[MASK]` places (`encoder_features`: as many as the target has words), special tokens kept (an answer
    holding one is wrong); with a task's `coupling`, read at the coupled position ids."""
    model.eval()
    answers: list[str] = [""] * len(inputs)
    for batch in batches_by_length(inputs, batch_size):
        features = encoder_features(tokenizer, [inputs[index] for index in batch],
                                    [targets[index] for index in batch])
        padded = tokenizer.pad({"input_ids": features["input_ids"], "attention_mask": features["attention_mask"]},
                               return_tensors="pt").to(model.device)
        if coupling is not None:
            padded["position_ids"] = PositionIdsCollator(tokenizer)(
                [{"input_ids": ids, "position_ids": coupling(inputs[index], len(targets[index].split()))}
                 for index, ids in zip(batch, features["input_ids"])])["position_ids"].to(model.device)
        predicted = model(**padded).logits.argmax(-1).tolist()
        for index, ids, labels in zip(batch, predicted, features["labels"]):
            answer = [token for token, label in zip(ids, labels) if label != IGNORE_INDEX]
            answers[index] = tokenizer.decode(answer, skip_special_tokens=False)
    return answers


def task_coupling(config: HfAttnConfig, task: SequenceTask | None) -> Coupling | None:
    """The task's position coupling where the model's `position_id_rule` takes its ids from the task, else None."""
    if not config.position_id_rule_class.from_task:
        return None
    if task is None:
        raise ValueError(f"position_id_rule={config.position_id_rule!r} reads the task's position ids, and no task "
                         "is known: score a run folder whose metrics.json names its task.")
    return task.coupled_position_ids


def score_pairs(model: HfAttnForCausalLM | HfAttnForMaskedLM, tokenizer: PreTrainedTokenizerBase,
                pairs: Sequence[Pair], buckets: Sequence[tuple[int, int]] | None, precision: str = "fp32",
                task: SequenceTask | None = None) -> tuple[list[BucketScore], list[str]]:
    """Exact match of the model's answers (a decoder's generated, an encoder's filled in) by length bucket
    (`exact_match_by_length`), and the answers; `task` gives the position ids of a model that reads the task's."""
    inputs, targets = [pair.input for pair in pairs], [pair.target for pair in pairs]
    answer = generate_answers if model.config.is_decoder else fill_answers
    coupling = task_coupling(model.config, task)
    with autocast(precision, model.device):
        answers = answer(model, tokenizer, inputs, targets, coupling=coupling)
    return exact_match_by_length(answers, targets, [pair.length for pair in pairs], buckets), answers


def validation_loss_by_step(log_history: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evaluations of a Trainer's `log_history` (its state, saved in each checkpoint's trainer_state.json) as
    `{"step", "loss"}` rows."""
    return [{"step": entry["step"], "loss": entry["eval_loss"]} for entry in log_history if "eval_loss" in entry]


def sequence_scores(trainer: Trainer, tokenizer: PreTrainedTokenizerBase, data: datasets.DatasetDict,
                    task: SequenceTask) -> dict[str, Any]:
    """Validation loss, of the kept checkpoint and at each evaluation during training (where a run sat on a plateau
    and when it left it); exact match by length bucket and at each length on validation and test; the first wrong
    test answers."""
    by_step = validation_loss_by_step(trainer.state.log_history)  # before `evaluate` logs the kept checkpoint's
    scores: dict[str, Any] = {"val_loss": trainer.evaluate()["eval_loss"], "val_loss_by_step": by_step}
    precision = trainer_precision(trainer.args)
    for split, prefix in SCORED_SPLITS:
        pairs = [Pair(row["input"], row["target"], row["length"]) for row in data[split]]
        by_bucket, answers = score_pairs(trainer.model, tokenizer, pairs, task.score_buckets(), precision, task)
        scores[f"{prefix}_exact_match_by_length"] = bucket_records(by_bucket)
        lengths = [pair.length for pair in pairs]
        if None not in lengths:
            scores[f"{prefix}_exact_match_by_each_length"] = bucket_records(
                exact_match_by_length(answers, [pair.target for pair in pairs], lengths))
        if split == "test":
            scores["test_errors"] = [{"input": pair.input, "target": pair.target, "prediction": answer}
                                     for pair, answer in zip(pairs, answers)
                                     if answer.split() != pair.target.split()][:ERRORS_KEPT]
    return scores


def task_features(tokenizer: PreTrainedTokenizerBase, batch: dict[str, list], decoder: bool,
                  coupled: SequenceTask | None) -> dict[str, list[list[int]]]:
    """A batch of pairs as a decoder's (`decoder_features`) or an encoder's (`encoder_features`) features, with the
    task's `position_ids` where the model reads them (`coupled`)."""
    features = (decoder_features if decoder else encoder_features)(tokenizer, batch["input"], batch["target"])
    if coupled is not None:
        features["position_ids"] = [coupled.coupled_position_ids(input, len(target.split()))
                                    for input, target in zip(batch["input"], batch["target"])]
    return features


def sequence_task(experiment: Experiment) -> Task:
    """The experiment's sequence task, a fresh decoder with the answer-only loss (teacher forcing or scheduled
    sampling), or with `model.is_decoder: false` an encoder filling the answer's masks, scored by
    `sequence_scores`."""
    refuse_classifier_sections(experiment, "a sequence task")
    if experiment.init_from is not None or experiment.week3 is not None:
        raise ValueError("a sequence task trains a new model with the task's own word-level tokenizer; drop "
                         "init_from and --week3.")
    decoder = experiment.model.get("is_decoder", True)
    if not decoder:
        refuse_scheduled_sampling(experiment, "an encoder (model.is_decoder: false), which fills every answer "
                                              "token at once,")
    source = dataset_source(experiment.dataset)
    data = source.load_pairs()
    if "validation" not in data:
        raise ValueError(f"the {source.kind} dataset has no validation split, which picks the checkpoint: set its "
                         "n_validation.")
    tokenizer = source.pairs_tokenizer(data)
    tokenizer = tokenizer if decoder else with_mask_token(tokenizer)
    rule = POSITION_ID_RULES[experiment.model.get("position_id_rule", "sequential")]  # checked with the experiment
    features = data.map(lambda batch: task_features(tokenizer, batch, decoder, source if rule.from_task else None),
                        batched=True, remove_columns=["input", "target", "length"])
    check_max_length(experiment, features)
    model_defaults = {"is_decoder": True, "bos_token_id": tokenizer.bos_token_id,
                      "eos_token_id": tokenizer.eos_token_id}
    if "digit_token_ids" in rule.own_fields:  # Abacus ids number the task's digits
        model_defaults["digit_token_ids"] = digit_token_ids(tokenizer)
    return Task(
        tokenizer=tokenizer,
        model_class=HfAttnForCausalLM if decoder else HfAttnForMaskedLM,
        train_dataset=features["train"],
        eval_dataset=features["validation"],
        data_collator=PositionIdsCollator(tokenizer, label_pad_token_id=IGNORE_INDEX),
        score=lambda trainer: sequence_scores(trainer, tokenizer, data, source),
        sizes={f"n_{name}": len(split) for name, split in data.items()},
        init_from_record="init_from",
        arguments={"load_best_model_at_end": True, "metric_for_best_model": "loss", "greater_is_better": False,
                   "prediction_loss_only": True},
        model_defaults=model_defaults,
        trainer_class=functools.partial(CausalScheduledSamplingTrainer,
                                        scheduled_sampling=experiment.scheduled_sampling) if decoder else Trainer,
    )


def is_sequence_experiment(experiment: Experiment) -> bool:
    """Whether the experiment's dataset is a sequence task (pairs scored by length) rather than labelled texts."""
    return isinstance(dataset_source(experiment.dataset), SequenceTask)


def train_sequence(experiment: Experiment, output_dir: str | os.PathLike[str], **options: Any) -> dict[str, Any]:
    """Train a decoder on the experiment's sequence task, keep the best checkpoint by validation loss, score it
    and save model and tokenizer; `options` are `run`'s (`resume`, `overwrite`, `results_path`, `max_time`, ...)."""
    return run(experiment, sequence_task, output_dir, **options)


# ------------------------------------------------------------------------------------ scoring a saved model


def recorded_task(model_dir: str | os.PathLike[str]) -> SequenceTask | None:
    """The sequence task a run folder's `metrics.json` records it was trained on (None: no such record)."""
    record = Path(model_dir) / "metrics.json"
    if not record.is_file():
        return None
    dataset = json.loads(record.read_text()).get("experiment", {}).get("dataset")
    if not isinstance(dataset, dict):
        return None
    try:
        source = dataset_source(dataset)
    except ValueError:
        return None
    return source if isinstance(source, SequenceTask) else None


def saved_sequence_model(model_dir: str | os.PathLike[str]) -> HfAttnPreTrainedModel:
    """A saved sequence-task model: the decoder (`HfAttnForCausalLM`) or the encoder (`HfAttnForMaskedLM`) its
    config's `is_decoder` says it is."""
    config = HfAttnConfig.from_pretrained(model_dir)
    return (HfAttnForCausalLM if config.is_decoder else HfAttnForMaskedLM).from_pretrained(model_dir, config=config)


def check_buckets_hold(pairs: Sequence[Pair], buckets: Sequence[tuple[int, int]] | None,
                       pairs_path: str | os.PathLike[str]) -> None:
    """Refuse, before anything is generated, a pair whose length lies in no bucket or in two, naming the pair and
    the option that sets the buckets (None: each length is its own bucket)."""
    if buckets is None:
        return
    for number, pair in enumerate(pairs, start=1):
        holding = len(buckets_holding(pair.length, buckets))
        if holding != 1:
            written = ",".join(str(low) if low == high else f"{low}-{high}" for low, high in buckets)
            example = f" (e.g. --buckets {written},{pair.length})" if holding == 0 else ""
            raise ValueError(f"{pairs_path}, pair {number}: its length {pair.length} lies in "
                             f"{'none' if holding == 0 else holding} of the buckets {written}; pass --buckets with "
                             f"each length in exactly one{example}.")


def score_saved(model_dir: str | os.PathLike[str], pairs_path: str | os.PathLike[str],
                buckets: Sequence[tuple[int, int]] | None = None, by_position: bool = False) -> dict[str, Any]:
    """Exact match by length bucket of a saved task model on a JSONL file of `{"input", "target"}` pairs.

    A pair's length is its `length` key, else the number of words of its input. `buckets` default to those of the
    task the run folder's metrics.json names (1..L, L+1..2L, 4L; SCAN 1..22, 23..48), else each length on its own.
    A pair holding a word the model's tokenizer does not know is refused in one line: the model could not read or
    write it. `by_position` adds, for each bucket, the answers' word accuracy at each position
    (`word_accuracy_by_position`): where along a longer answer the model starts to fail.
    """
    pairs = read_pairs(pairs_path)
    if not pairs:
        raise ValueError(f"{pairs_path} holds no pairs; write one {{\"input\": ..., \"target\": ...}} object a line.")
    tokenizer = load_tokenizer(model_dir)
    for number, pair in enumerate(pairs, start=1):
        for text in (pair.input, pair.target):
            check_known_words(tokenizer, text, f"{pairs_path}, pair {number}", model_dir,
                              "score pairs of the task the model was trained on.")
    pairs = [pair if pair.length is not None else Pair(pair.input, pair.target, len(pair.input.split()))
             for pair in pairs]
    task = recorded_task(model_dir)  # its buckets are the default; a coupled model reads its position ids
    if buckets is None and task is not None:
        buckets = task.score_buckets()
    check_buckets_hold(pairs, buckets, pairs_path)
    model = saved_sequence_model(model_dir)
    by_bucket, answers = score_pairs(model, tokenizer, pairs, buckets, task=task)
    scores = {"model": str(model_dir), "pairs": str(pairs_path), "n_pairs": len(pairs),
              "exact_match_by_length": bucket_records(by_bucket)}
    if by_position:
        for record in scores["exact_match_by_length"]:
            inside = [(answer, pair.target) for answer, pair in zip(answers, pairs)
                      if record["low"] <= pair.length <= record["high"]]
            record["word_accuracy_by_position"] = [
                {"position": score.low, "correct": score.correct, "count": score.count, "accuracy": score.accuracy}
                for score in word_accuracy_by_position(*zip(*inside))]
    return scores
