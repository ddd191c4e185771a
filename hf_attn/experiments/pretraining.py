"""Pretraining of an hf_attn encoder on IMDb text, for a classifier to start from: masked language
modelling (BERT, `objective: mlm`) or replaced-token detection (ELECTRA, `objective: rtd`); and of a
decoder (`objective: causal`, an `HfAttnForCausalLM` with next-token loss) on the same chunks, for
perplexity by position scheme and length (`hf_attn.experiments.perplexity`) and for generating reviews.

Why it exists: a classifier trained on the labelled reviews from the DAN embedding reads only the first
`max_length` tokens of each and ends about where the bag-of-words DAN ends. Text it never reads could
teach it how words combine: IMDb's 50,000 unlabelled reviews, and the tokens of each training review past
the first `max_length`. Pretraining reads both, cut into `max_length`-token chunks; validation and test
reviews are never trained on.

`hf-attn pretrain --config configs/pretraining/pretrain-rope.yaml --week3 DIR --output-dir runs/pretrain-rope`
writes an `HfAttnForMaskedLM` (or `HfAttnForReplacedTokenDetection`) folder (model + tokenizer); a
classification experiment with `init_from: runs/pretrain-rope` fine-tunes it with `hf-attn train`. A
pretraining experiment with `init_from` continues an earlier pretraining run (all its weights, heads
included) with a new optimizer and schedule: pretraining grows in stages that each fit a session, and
each stage's `metrics.json` records the one before it (`continued_from`).

Week 3 vocabularies have no mask token. Rather than grow the vocabulary (and break the match with the
Week 3 embedding and tokenizer files), the `[PAD]` id stands in for it: its embedding row is fixed at
zero, so a masked position reads as "position only, no token" — and a classifier never sees `[PAD]` at a
position it attends to. A tokenizer that has a mask token uses its own.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import datasets
import torch
from torch.utils.data import DataLoader
from transformers import PreTrainedTokenizerBase, Trainer

from ..modeling_hf_attn import (
    HfAttnForCausalLM,
    HfAttnForMaskedLM,
    HfAttnForReplacedTokenDetection,
    HfAttnPreTrainedModel,
)
from ..tasks import dataset_source
from .config import Experiment, refuse_classifier_sections, refuse_scheduled_sampling
from .data import limit_rows
from .run import Task, load_tokenizer, run, say_without_dan

# The model of each masked objective (an encoder); `objective: causal` trains an `HfAttnForCausalLM` (a decoder).
PRETRAINING_MODELS: dict[str, type[HfAttnPreTrainedModel]] = {
    "mlm": HfAttnForMaskedLM,
    "rtd": HfAttnForReplacedTokenDetection,
}
IGNORE_INDEX = -100  # labels of positions that are not predicted (PyTorch's cross-entropy default)
MIN_CHUNK_TOKENS = 16  # a review's last chunk shorter than this is dropped: little to predict from
EVAL_SEED = 1234  # the evaluation chunks are masked once, with this seed, so every evaluation is comparable


@contextlib.contextmanager
def evaluation_randomness() -> Iterator[None]:
    """Random draws inside come from torch's generators seeded with `EVAL_SEED`, and the generators are
    restored on the way out. Replaced-token detection samples the generator's replacements even when
    evaluating: with this, every evaluation of one model repeats exactly, and the training run's own
    random stream (masking, dropout) is the same however often it is evaluated."""
    with torch.random.fork_rng():
        torch.manual_seed(EVAL_SEED)
        yield


class PretrainingTrainer(Trainer):
    """`Trainer` whose evaluations run under `evaluation_randomness`."""

    def evaluate(self, *args: Any, **kwargs: Any) -> dict[str, float]:
        with evaluation_randomness():
            return super().evaluate(*args, **kwargs)


def mask_tokens(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    *,
    probability: float,
    mask_token_id: int,
    replacement_ids: torch.Tensor,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's corruption: pick `probability` of the real tokens (at least one per sequence); of those,
    80% become `mask_token_id`, 10% a random id from `replacement_ids`, 10% stay. Returns the corrupted
    ids and labels (the original id where picked, `IGNORE_INDEX` elsewhere)."""
    real = attention_mask.bool()
    scores = torch.rand(input_ids.shape, generator=generator)
    picked = (scores < probability) & real
    nothing_picked = ~picked.any(dim=1) & real.any(dim=1)
    if nothing_picked.any():
        lowest = scores.masked_fill(~real, 2.0).argmin(dim=1)
        picked[nothing_picked, lowest[nothing_picked]] = True
    labels = input_ids.masked_fill(~picked, IGNORE_INDEX)
    action = torch.rand(input_ids.shape, generator=generator)
    corrupted = input_ids.masked_fill(picked & (action < 0.8), mask_token_id)
    randomised = picked & (action >= 0.8) & (action < 0.9)
    draws = torch.randint(len(replacement_ids), (int(randomised.sum()),), generator=generator)
    corrupted[randomised] = replacement_ids[draws]
    return corrupted, labels


def pad_features(features: Sequence[dict[str, Any]], key: str, fill: int) -> torch.Tensor:
    """The `key` lists of a batch's rows, right-padded with `fill` to the longest row, as one tensor."""
    length = max(len(feature[key]) for feature in features)
    return torch.tensor([list(feature[key]) + [fill] * (length - len(feature[key])) for feature in features])


class MaskedLMCollator:
    """Pads a batch to its longest chunk and masks it afresh (a new mask every epoch); examples that
    already carry `labels` (the fixed evaluation set) are only padded."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, mlm_probability: float = 0.15) -> None:
        if not 0.0 < mlm_probability < 1.0:
            raise ValueError(f"mlm_probability must be in (0, 1), got {mlm_probability}; BERT uses 0.15.")
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; masked-LM batches need one to pad (and to mask).")
        self.pad_token_id = tokenizer.pad_token_id
        self.mask_token_id = tokenizer.mask_token_id if tokenizer.mask_token_id is not None else tokenizer.pad_token_id
        special = set(tokenizer.all_special_ids)
        self.replacement_ids = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
        self.mlm_probability = mlm_probability

    def mask(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
             generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        return mask_tokens(input_ids, attention_mask, probability=self.mlm_probability,
                           mask_token_id=self.mask_token_id, replacement_ids=self.replacement_ids, generator=generator)

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        input_ids = pad_features(features, "input_ids", self.pad_token_id)
        attention_mask = pad_features(features, "attention_mask", 0)
        if "labels" in features[0]:
            return {"input_ids": input_ids, "attention_mask": attention_mask,
                    "labels": pad_features(features, "labels", IGNORE_INDEX)}
        input_ids, labels = self.mask(input_ids, attention_mask)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


class CausalLMCollator:
    """Pads a batch to its longest chunk; the labels are the ids themselves (`HfAttnForCausalLM` shifts
    them to score each next token), `IGNORE_INDEX` on padding."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token; causal-LM batches of unequal chunks need one to pad.")
        self.pad_token_id = tokenizer.pad_token_id

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        input_ids = pad_features(features, "input_ids", self.pad_token_id)
        attention_mask = pad_features(features, "attention_mask", 0)
        return {"input_ids": input_ids, "attention_mask": attention_mask,
                "labels": input_ids.masked_fill(~attention_mask.bool(), IGNORE_INDEX)}


def chunk_texts(texts: datasets.Dataset, tokenizer: PreTrainedTokenizerBase, chunk_length: int) -> datasets.Dataset:
    """Every review's tokens cut into consecutive `chunk_length` pieces (a last piece under
    `MIN_CHUNK_TOKENS` is dropped): `input_ids` and `attention_mask` rows, unpadded."""

    def cut(batch: dict[str, list[Any]]) -> dict[str, list[Any]]:
        chunks = [
            ids[start : start + chunk_length]
            for ids in tokenizer(batch["text"], add_special_tokens=False, truncation=False, verbose=False)["input_ids"]
            for start in range(0, len(ids), chunk_length)
        ]
        kept = [chunk for chunk in chunks if len(chunk) >= MIN_CHUNK_TOKENS]
        return {"input_ids": kept, "attention_mask": [[1] * len(chunk) for chunk in kept]}

    return texts.map(cut, batched=True, remove_columns=texts.column_names, desc="Cutting reviews into chunks")


def masked_once(chunks: datasets.Dataset, collator: MaskedLMCollator, seed: int = EVAL_SEED) -> datasets.Dataset:
    """The chunks with one fixed masking (from `seed`), so successive evaluations score the same task."""
    generator = torch.Generator().manual_seed(seed)
    rows = {"input_ids": [], "attention_mask": [], "labels": []}
    for chunk in chunks:
        ids = torch.tensor([chunk["input_ids"]])
        corrupted, labels = collator.mask(ids, torch.ones_like(ids), generator=generator)
        rows["input_ids"].append(corrupted[0].tolist())
        rows["attention_mask"].append(chunk["attention_mask"])
        rows["labels"].append(labels[0].tolist())
    return datasets.Dataset.from_dict(rows)


def pretraining_corpus(experiment: Experiment) -> tuple[datasets.Dataset, datasets.Dataset, int]:
    """(training texts, validation texts, unlabelled texts used): the dataset's training texts plus its unlabelled
    ones where the source has them (IMDb's 50,000); validation texts (first `limit_eval`) only measure the
    objective's loss."""
    source = dataset_source(experiment.dataset)
    splits = source.load().splits
    train_texts = limit_rows(splits["train"].select_columns(["text"]), experiment.limit_train)
    unlabelled = source.unlabelled_texts()
    n_unlabelled = 0
    if unlabelled is not None:
        unlabelled = limit_rows(unlabelled, experiment.limit_train)
        n_unlabelled = len(unlabelled)
        train_texts = datasets.concatenate_datasets([train_texts, unlabelled])
    validation = limit_rows(splits["validation"].select_columns(["text"]), experiment.limit_eval)
    return train_texts, validation, n_unlabelled


def pretraining_task(experiment: Experiment) -> Task:
    """The pretraining corpus cut into chunks, and the model of the experiment's `objective`, scored by
    `pretraining_scores`. Masked objectives mask the training chunks afresh in every batch and the
    validation chunks once; the causal objective predicts every next token of both (a decoder,
    `is_decoder=True`)."""
    refuse_scheduled_sampling(experiment, "pretraining")
    refuse_classifier_sections(experiment, "pretraining")
    train_texts, validation_texts, n_unlabelled = pretraining_corpus(experiment)
    tokenizer = load_tokenizer(experiment, train_texts["text"])
    say_without_dan(experiment, tokenizer)
    train_chunks = chunk_texts(train_texts, tokenizer, experiment.max_length)
    eval_chunks = chunk_texts(validation_texts, tokenizer, experiment.max_length)
    if experiment.pretraining.objective == "causal":
        model_class, collator, model_defaults = HfAttnForCausalLM, CausalLMCollator(tokenizer), {"is_decoder": True}
    else:
        model_class = PRETRAINING_MODELS[experiment.pretraining.objective]
        collator = MaskedLMCollator(tokenizer, experiment.pretraining.mlm_probability)
        model_defaults = {"sparse_prediction": True}
        eval_chunks = masked_once(eval_chunks, collator)
    return Task(
        tokenizer=tokenizer,
        model_class=model_class,
        train_dataset=train_chunks,
        eval_dataset=eval_chunks,
        data_collator=collator,
        score=lambda trainer: pretraining_scores(trainer, experiment.pretraining.objective),
        sizes={"n_train_chunks": len(train_chunks), "n_train_reviews": len(train_texts),
               "n_unlabelled_reviews": n_unlabelled, "n_eval_chunks": len(eval_chunks)},
        init_from_record="continued_from",
        arguments={"prediction_loss_only": True},
        model_defaults=model_defaults,
        trainer_class=PretrainingTrainer,
    )


def pretraining_scores(trainer: Trainer, objective: str) -> dict[str, Any]:
    """The objective's losses on the evaluation chunks and how many chunks training read.

    Replaced-token detection is scored by every process on the whole evaluation set, not on its shard of
    `Trainer`'s dataloader: with the same fixed-seed samples each one reports what a single process would.
    """
    args = trainer.args
    if objective == "rtd":
        every_chunk = DataLoader(trainer.eval_dataset, batch_size=args.per_device_eval_batch_size,
                                 collate_fn=trainer.data_collator)
        losses = replaced_token_detection_metrics(trainer.model, every_chunk)
    else:  # `eval_mlm_loss` or `eval_causal_loss`: the mean loss per evaluation batch
        loss = trainer.evaluate()["eval_loss"]
        losses = {f"eval_{objective}_loss": loss, "eval_perplexity": math.exp(loss)}
    chunks_seen = trainer.state.global_step * args.train_batch_size * args.gradient_accumulation_steps * args.world_size
    return {"objective": objective, **losses, "chunks_seen": chunks_seen}


def pretrain(experiment: Experiment, output_dir: str | os.PathLike[str], **options: Any) -> dict[str, Any]:
    """Pretrain the experiment's encoder or decoder (a new one, or `init_from`'s to continue it) with its `objective`;
    writes an `HfAttnForMaskedLM`, `HfAttnForReplacedTokenDetection` or `HfAttnForCausalLM` folder (model and
    tokenizer) that `init_from` reads, its checkpoints, and `metrics.json` (`options` are `run`'s), in which the
    record of the run it continues goes under `continued_from`. Returns the metrics."""
    return run(experiment, pretraining_task, output_dir, **options)


@torch.no_grad()
def replaced_token_detection_metrics(
    model: HfAttnForReplacedTokenDetection, batches: Iterable[dict[str, torch.Tensor]]
) -> dict[str, float]:
    """The two halves of the ELECTRA loss on the evaluation chunks, and how often the encoder tells
    original from replaced: the generator's masked-LM loss (per masked token), the detection loss and
    accuracy (per real token), and the share of real tokens the generator replaced. The generator's
    samples are drawn under `evaluation_randomness`, so evaluations of one model repeat exactly."""
    was_training = model.training
    model.eval()
    totals = {"generator": 0.0, "detection": 0.0, "correct": 0.0, "replaced": 0.0, "masked": 0, "real": 0}
    with evaluation_randomness():
        for batch in batches:
            batch = {key: value.to(model.device) for key, value in batch.items()}
            output = model(**batch)
            masked, real = int((batch["labels"] != IGNORE_INDEX).sum()), int(batch["attention_mask"].sum())
            keep = batch["attention_mask"].bool()
            totals["generator"] += float(output.generator_loss) * masked
            totals["detection"] += float(output.discriminator_loss) * real
            totals["correct"] += float(((output.logits[keep] > 0) == output.replaced[keep]).sum())
            totals["replaced"] += float(output.replaced[keep].sum())
            totals["masked"] += masked
            totals["real"] += real
    model.train(was_training)
    return {
        "eval_generator_mlm_loss": totals["generator"] / totals["masked"],
        "eval_detection_loss": totals["detection"] / totals["real"],
        "eval_detection_accuracy": totals["correct"] / totals["real"],
        "eval_replaced_share": totals["replaced"] / totals["real"],
    }
