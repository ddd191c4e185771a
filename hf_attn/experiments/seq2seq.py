"""Date normalisation with an hf_attn encoder-decoder (`hf-attn seq2seq`): a written date -> `YYYY-MM-DD`.

The pairs come from `hf_attn.tasks.dates` (seeded, splits disjoint by source). A Week 3 byte-level BPE
is trained on the training sources and targets, with `</s>` added as the end-of-sequence token, which also
starts the decoder (as in BART). The model is transformers' `EncoderDecoderModel` of an `HfAttnModel` encoder
and an `HfAttnForCausalLM` decoder with cross-attention, both with the experiment's `model` settings (so the
position scheme is one field); it trains with teacher forcing through `Trainer` (the model shifts the labels
right itself), keeping the checkpoint with the lowest validation loss. The experiment's `seq2seq` section
(`config.Seq2SeqSettings`) can give the decoder one pooled vector of the source instead of cross-attention over
every encoder state, and its `scheduled_sampling` section train it with scheduled sampling instead of teacher
forcing.

Scores: exact match of greedy and of beam-search decoding (with the cache) on validation and test, overall, per
locale and per source and target length in tokens; the saved folder runs in `hf-attn generate`. Cross-attention
heatmaps of a few test sources go to `output_dir/heatmaps/`.
"""

from __future__ import annotations

import copy
import functools
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasets
import torch
from transformers import (
    DataCollatorForSeq2Seq,
    EncoderDecoderConfig,
    EncoderDecoderModel,
    PreTrainedTokenizerBase,
    Trainer,
)

from ..configuration_hf_attn import HfAttnConfig
from ..runtime.precision import autocast, trainer_precision
from ..tasks.dates import DateNormalisation, DatePair
from .config import Experiment, refuse_classifier_sections
from .pretraining import IGNORE_INDEX
from .run import Task, load_tokenizer, run
from .seq2seq_training import PooledContextEncoderDecoder, Seq2SeqScheduledSamplingTrainer

EOS_TOKEN = "</s>"
MAX_NEW_TOKENS = 16  # an ISO date is at most 10 tokens (one per character) plus `</s>`
HEATMAP_LOCALES = ("en", "de", "fr", "pl")  # one heatmap each, of the first long or full test source
HEATMAP_FORMATS = ("full", "long")
DECODINGS = ("greedy", "beam")


def encoder_decoder_model(config: HfAttnConfig, *, eos_token_id: int,
                          decoder_context: str = "attention") -> EncoderDecoderModel:
    """An `EncoderDecoderModel` whose encoder and decoder both have `config`'s settings; the decoder adds causal
    masking and cross-attention. `</s>` (`eos_token_id`) ends a target and starts the decoder. With
    `decoder_context="pooled"` it is a `PooledContextEncoderDecoder` (the decoder sees one mean-pooled vector of
    the source), and its config says so.

    `run` calls it as a model class: with the run's `HfAttnConfig`, or when resuming with the config read back
    from a checkpoint (its encoder half, whose settings are the decoder's too).
    """
    encoder_config = copy.deepcopy(config)
    encoder_config.is_decoder, encoder_config.add_cross_attention = False, False
    decoder_config = copy.deepcopy(config)
    decoder_config.is_decoder, decoder_config.add_cross_attention = True, True
    seq2seq_config = EncoderDecoderConfig.from_encoder_decoder_configs(
        encoder_config, decoder_config, decoder_start_token_id=eos_token_id, eos_token_id=eos_token_id,
        pad_token_id=config.pad_token_id,
    )
    if decoder_context == "pooled":
        seq2seq_config.decoder_context = decoder_context
        return PooledContextEncoderDecoder(config=seq2seq_config)
    return EncoderDecoderModel(config=seq2seq_config)


def seq2seq_tokenizer(experiment: Experiment, train_pairs: Sequence[DatePair]) -> PreTrainedTokenizerBase:
    """A Week 3 BPE trained on the training sources and targets (`load_tokenizer`), plus `</s>`: Week 3
    tokenizers have only `[PAD]`."""
    tokenizer = load_tokenizer(experiment, [text for pair in train_pairs for text in (pair.source, pair.target)])
    tokenizer.add_special_tokens({"eos_token": EOS_TOKEN})
    return tokenizer


def tokenize_pairs(pairs: Sequence[DatePair], tokenizer: PreTrainedTokenizerBase, max_length: int) -> datasets.Dataset:
    """`input_ids` / `attention_mask` of the sources (first `max_length` tokens) and `labels`: target ids + `</s>`."""
    sources = tokenizer([pair.source for pair in pairs], truncation=True, max_length=max_length)
    targets = tokenizer([pair.target for pair in pairs], truncation=True, max_length=max_length - 1)["input_ids"]
    return datasets.Dataset.from_dict({
        "input_ids": sources["input_ids"],
        "attention_mask": sources["attention_mask"],
        "labels": [ids + [tokenizer.eos_token_id] for ids in targets],
    })


def normalise(text: str) -> str:
    """`text` without whitespace: Week 3 tokens end words with a space, so `1987-03-05` decodes as
    `1987 - 03 - 05`; an ISO date holds no whitespace, so nothing else is lost."""
    return "".join(text.split())


def exact_match(predictions: Sequence[str], targets: Sequence[str]) -> float:
    """The share of predictions equal to their target after `normalise`; 0 for no pairs."""
    if len(predictions) != len(targets):
        raise ValueError(f"{len(predictions)} predictions for {len(targets)} targets; pass one per target.")
    if not targets:
        return 0.0
    return sum(normalise(p) == normalise(t) for p, t in zip(predictions, targets)) / len(targets)


@torch.no_grad()
def decode(
    model: EncoderDecoderModel, tokenizer: PreTrainedTokenizerBase, sources: Sequence[str], num_beams: int = 1,
    batch_size: int = 256,
) -> list[str]:
    """The model's output text for each source: greedy (`num_beams=1`) or beam search, with the cache."""
    model.eval()
    outputs: list[str] = []
    for start in range(0, len(sources), batch_size):
        batch = tokenizer(list(sources[start : start + batch_size]), padding=True, truncation=True,
                          return_tensors="pt").to(model.device)
        generated = model.generate(**batch, num_beams=num_beams, do_sample=False, max_new_tokens=MAX_NEW_TOKENS)
        outputs += tokenizer.batch_decode(generated, skip_special_tokens=True)
    return outputs


def exact_match_scores(predictions: Sequence[str], pairs: Sequence[DatePair],
                       tokenizer: PreTrainedTokenizerBase | None = None) -> dict[str, Any]:
    """Exact match overall and per locale (sorted by locale); given the `tokenizer`, also per length in tokens of
    the source and of the target (without `</s>`), each length with its number of pairs."""
    groups: dict[str, Any] = {"by_locale": [pair.locale for pair in pairs]}
    if tokenizer is not None:
        for side in ("source", "target"):
            ids = tokenizer([getattr(pair, side) for pair in pairs], add_special_tokens=False)["input_ids"]
            groups[f"by_{side}_tokens"] = [len(row) for row in ids]
    scores: dict[str, Any] = {"overall": exact_match(predictions, [pair.target for pair in pairs])}
    for name, keys in groups.items():
        rows: dict[Any, list[tuple[str, str]]] = defaultdict(list)
        for key, prediction, pair in zip(keys, predictions, pairs):
            rows[key].append((prediction, pair.target))
        if name == "by_locale":
            scores[name] = {key: exact_match(*zip(*group)) for key, group in sorted(rows.items())}
        else:
            scores[name] = {str(key): {"n": len(group), "exact_match": exact_match(*zip(*group))}
                            for key, group in sorted(rows.items())}
    return scores


def seq2seq_scores(
    trainer: Trainer, tokenizer: PreTrainedTokenizerBase, pairs: dict[str, list[DatePair]], num_beams: int
) -> dict[str, Any]:
    """Validation loss; exact match of greedy and beam decoding on validation and test (per locale too); a few
    wrong test outputs; and the cross-attention heatmaps written to `output_dir/heatmaps/`."""
    from ..analysis.probes import seq2seq_cross_attention_heatmaps

    model = trainer.model
    scores: dict[str, Any] = {"val_loss": trainer.evaluate()["eval_loss"], "num_beams": num_beams}
    for split, prefix in (("validation", "val"), ("test", "test")):
        sources = [pair.source for pair in pairs[split]]
        for decoding, beams in zip(DECODINGS, (1, num_beams)):
            with autocast(trainer_precision(trainer.args), model.device):
                predictions = decode(model, tokenizer, sources, num_beams=beams)
            result = exact_match_scores(predictions, pairs[split], tokenizer)
            scores[f"{prefix}_exact_match_{decoding}"] = result.pop("overall")
            for group, values in result.items():
                scores[f"{prefix}_exact_match_{decoding}_{group}"] = values
            if split == "test" and decoding == "greedy":
                scores["test_greedy_errors"] = [
                    {"source": pair.source, "target": pair.target, "prediction": normalise(prediction)}
                    for prediction, pair in zip(predictions, pairs[split]) if normalise(prediction) != pair.target
                ][:20]
    examples = heatmap_examples(pairs["test"])
    pictures = seq2seq_cross_attention_heatmaps(model, tokenizer, [pair.source for pair in examples],
                                                Path(trainer.args.output_dir) / "heatmaps", MAX_NEW_TOKENS)
    scores["heatmaps"] = [str(path) for path in pictures]
    return scores


def heatmap_examples(pairs: Sequence[DatePair]) -> list[DatePair]:
    """The first long or full source of each `HEATMAP_LOCALES` locale among `pairs` (month names, digits to copy)."""
    chosen = {}
    for pair in pairs:
        if pair.locale in HEATMAP_LOCALES and pair.format in HEATMAP_FORMATS:
            chosen.setdefault(pair.locale, pair)
    return [chosen[locale] for locale in HEATMAP_LOCALES if locale in chosen]


def seq2seq_task(experiment: Experiment) -> Task:
    """The generated date pairs (the experiment's `generator` settings and `seed`), tokenized, and an
    encoder-decoder trained on them (the `seq2seq` section: its decoder's context; the `scheduled_sampling`
    section: teacher forcing or scheduled sampling), scored by `seq2seq_scores`."""
    refuse_classifier_sections(experiment, "hf-attn seq2seq")
    if experiment.init_from is not None or experiment.week3 is not None:
        raise ValueError("hf-attn seq2seq trains a new encoder-decoder and its tokenizer on the generated pairs; "
                         "drop init_from and --week3.")
    pairs = DateNormalisation(**experiment.seq2seq.generator, seed=experiment.seed).date_pairs()
    settings = experiment.seq2seq
    tokenizer = seq2seq_tokenizer(experiment, pairs["train"])
    splits = {name: tokenize_pairs(split, tokenizer, experiment.max_length) for name, split in pairs.items()}
    return Task(
        tokenizer=tokenizer,
        model_class=functools.partial(encoder_decoder_model, eos_token_id=tokenizer.eos_token_id,
                                      decoder_context=settings.decoder_context),
        train_dataset=splits["train"],
        eval_dataset=splits["validation"],
        data_collator=DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=IGNORE_INDEX),
        score=lambda trainer: seq2seq_scores(trainer, tokenizer, pairs, experiment.seq2seq.num_beams),
        sizes={f"n_{name}": len(split) for name, split in splits.items()},
        init_from_record="init_from",
        arguments={"load_best_model_at_end": True, "metric_for_best_model": "loss", "greater_is_better": False,
                   "prediction_loss_only": True},
        trainer_class=functools.partial(Seq2SeqScheduledSamplingTrainer,
                                        scheduled_sampling=experiment.scheduled_sampling),
    )


def train_seq2seq(experiment: Experiment, output_dir: str | os.PathLike[str], **options: Any) -> dict[str, Any]:
    """Train the date-normalisation encoder-decoder, keep the best checkpoint by validation loss, score it, save
    model, tokenizer and heatmaps; `options` are `run`'s (`resume`, `overwrite`, `results_path`, `callbacks`)."""
    return run(experiment, seq2seq_task, output_dir, **options)
