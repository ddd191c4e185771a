"""What the arena measures: accuracy by read length, masked-LM loss by length, whole-review speed."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import datasets
import torch
from torch.utils.data import DataLoader
from transformers import AutoTokenizer

from ...bench.timing import MIB, interleaved_times, make_batch, peak_memory_bytes, summarize
from ...configuration_hf_attn import ROPE_CONTEXT_SCALINGS, HfAttnConfig
from ...modeling_hf_attn import HfAttnForMaskedLM, HfAttnForSequenceClassification
from ...positions import POSITION_SCHEMES
from ...runtime.precision import autocast, resolve_precision
from ...saved import beyond_learned_table
from ...tasks.imdb import load_imdb
from .. import classification
from ..config import Experiment
from ..data import limit_rows
from ..perplexity import token_stream
from ..pretraining import IGNORE_INDEX, MaskedLMCollator, masked_once

if TYPE_CHECKING:  # the arena's settings, read by its kinds of cells
    from .schema import Arena

WHOLE = "whole"  # a read length: each test review whole (read at the longest test review's length)
READINGS = ("direct", "windows")  # how every scheme reads past its training length; RoPE adds its scalings
SCALINGS = ROPE_CONTEXT_SCALINGS  # RoPE's, at inference
ATTENTION_MODES = ("full", "sliding", "windows")  # how the speed section reads a whole review
EVAL_BATCH_TOKENS = 8192  # padded tokens per evaluation batch: the batch shrinks as the read length grows


def na(reason: str) -> dict[str, Any]:
    """A cell that cannot be measured, and why."""
    return {"value": None, "reason": reason}


def readings_of(scheme: str, rope_scalings: Sequence[str]) -> list[str]:
    """How a scheme's classifier reads past its training length: directly, as windows, and (RoPE) scaled."""
    return [*READINGS, *(scaling for scaling in rope_scalings if scaling in POSITION_SCHEMES[scheme].context_scalings)]


def longest_review(model_dir: Path, dataset: str, limit: int | None, split: str = "test") -> int:
    """Tokens of the longest of the first `limit` reviews of `split`: the length `whole` reads at."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    texts = list(limit_rows(load_imdb(dataset)[split], limit)["text"])
    return max(len(ids) for ids in tokenizer(texts, truncation=False, verbose=False)["input_ids"])


def rope_scaling(config: HfAttnConfig, rope_type: str, length: int) -> dict[str, Any]:
    """The `rope_parameters` that make a RoPE model trained at `config.max_position_embeddings` tokens read
    `length` with `rope_type`. `linear` and `yarn` stretch the training length by factor = length / training
    length; `dynamic` (NTK) recomputes its frequencies from each input's own length (transformers'
    `_compute_dynamic_ntk_parameters`), so its factor stays 1: base theta is scaled by (length / training
    length) ** (d / (d - 2)) for an input of `length` tokens, and not at all within training."""
    factor = 1.0 if rope_type == "dynamic" else max(1.0, length / config.max_position_embeddings)
    return {**config.rope_parameters, "rope_type": rope_type, "factor": factor}


def read_accuracy(model_dir: Path, reading: str, length: int, arena: Arena, dataset: str, split: str = "test",
                  precision: str = "auto") -> dict[str, Any]:
    """Accuracy on `split` of a classifier reading `length` tokens of each review: `direct`ly, as `windows`, or
    (RoPE) with a scaling applied at inference (to the loaded model's config; the saved folder is not changed).
    A length the model cannot read directly (learned positions past their table) is n/a with the reason the
    config gives for refusing that reading policy."""
    policy = {"read_length": length, "window_stride": arena.window_stride if reading == "windows" else None}
    config = HfAttnConfig.from_pretrained(model_dir, **policy)
    try:
        config.validate_fields()
    except ValueError as error:
        return na(str(error))
    record: dict[str, Any] = {}
    batch_size = max(1, EVAL_BATCH_TOKENS // length)
    if reading in SCALINGS:
        record["rope_parameters"] = rope_scaling(config, reading, length)
        if reading == "dynamic":
            batch_size = 1  # its frequencies follow the padded batch length: one review per batch reads its own
    metrics = classification.evaluate_saved(model_dir, dataset=dataset, split=split, limit=arena.budget.eval_limit,
                                            batch_size=batch_size, precision=precision, **policy, **record)
    return {**record, "value": metrics[f"{split}_accuracy"], "f1": metrics[f"{split}_f1"],
            "loss": metrics[f"{split}_loss"], "n_reviews": metrics[f"{split}_reviews"],
            "precision": metrics["precision"]}


def mlm_token_budget(stream_length: int, lengths: Sequence[int], wanted: int) -> int:
    """Tokens every length is evaluated on: at most `wanted` and the stream, and a whole number of windows of
    every length, so each length reads the very same tokens. A ValueError when the stream is too short."""
    unit = math.lcm(*lengths)
    budget = min(wanted, stream_length) // unit * unit
    if budget == 0:
        raise ValueError(f"the validation stream has {stream_length} tokens and `mlm_tokens` is {wanted}, fewer "
                         f"than one window of every mlm length needs ({unit}); raise the pretraining experiment's "
                         "limit_eval or the budget's mlm_tokens, or drop the longest mlm length.")
    return budget


@torch.no_grad()
def masked_lm_loss(model: HfAttnForMaskedLM, collator: MaskedLMCollator, stream: Sequence[int], length: int,
                   n_tokens: int, batch_tokens: int = EVAL_BATCH_TOKENS) -> dict[str, Any]:
    """Mean loss per masked token on the first `n_tokens` of `stream` cut into windows of `length`, in batches of
    about `batch_tokens` tokens. The stream is masked once with `EVAL_SEED` (`masked_once`) before it is cut, so
    every length predicts the same masked tokens from the same corrupted text: only the context differs."""
    whole = datasets.Dataset.from_dict({"input_ids": [list(stream[:n_tokens])], "attention_mask": [[1] * n_tokens]})
    masked = masked_once(whole, collator)[0]
    windows = {key: [values[start : start + length] for start in range(0, n_tokens, length)]
               for key, values in masked.items()}
    loader = DataLoader(datasets.Dataset.from_dict(windows), batch_size=max(1, batch_tokens // length),
                        collate_fn=collator)
    model.eval()
    total, masked_tokens = 0.0, 0
    for batch in loader:
        count = int((batch["labels"] != IGNORE_INDEX).sum())
        if count:
            total += float(model(**batch).loss) * count  # the loss is the batch's mean over its masked tokens
            masked_tokens += count
    return {"value": total / masked_tokens, "masked_tokens": masked_tokens, "windows": len(windows["input_ids"]),
            "tokens": n_tokens}


def mlm_cell(model_dir: Path, length: int, experiment: Experiment, wanted_tokens: int,
             lengths: Sequence[int]) -> dict[str, Any]:
    """The masked-LM loss of a pretrained encoder on validation windows of `length` tokens (n/a for learned
    positions past their table)."""
    model = HfAttnForMaskedLM.from_pretrained(model_dir)
    if beyond_learned_table(model.config, length):
        return na(f"learned positions cover {model.config.max_position_embeddings} tokens (the pretraining length): "
                  f"a {length}-token window has no position rows past them")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # The pretraining run's validation reviews (its first `limit_eval`) as one stream, as `chunk_texts` reads them.
    texts = limit_rows(load_imdb(experiment.dataset)["validation"], experiment.limit_eval)["text"]
    stream = token_stream(tokenizer, texts, wanted_tokens).tolist()
    n_tokens = mlm_token_budget(len(stream), lengths, wanted_tokens)
    precision = resolve_precision(experiment.precision, torch.device("cpu"))
    with autocast(precision, torch.device("cpu")):
        collator = MaskedLMCollator(tokenizer, experiment.pretraining.mlm_probability)
        loss = masked_lm_loss(model, collator, stream, length, n_tokens)
    return {**loss, "precision": precision}


def attention_settings(mode: str, arena: Arena, num_layers: int) -> dict[str, Any]:
    """Config changes that make a saved classifier read a whole review with `mode`'s attention."""
    if mode == "sliding":
        return {"sliding_window": arena.sliding_window, "layer_types": ["sliding_attention"] * num_layers}
    if mode == "windows":
        return {"window_stride": arena.window_stride}
    return {}


def speed_cell(models: dict[str, Path], arena: Arena, length: int, batch: int) -> dict[str, Any]:
    """Median forward time and peak memory (fp32, no grad, CPU or the GPU there is) of a classifier of every
    scheme's architecture (the config of its model in `models`, weights drawn fresh: the time does not depend on
    them) in every attention mode reading `batch` random reviews of `length` tokens; the candidates are timed
    interleaved as in `hf-attn bench` (`interleaved_times`). A mode a scheme cannot read is n/a."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    generator = torch.Generator().manual_seed(0)
    steps: dict[str, Callable[[], None]] = {}
    results: dict[str, dict[str, Any]] = {}
    for scheme, model_dir in models.items():
        layers = HfAttnConfig.from_pretrained(model_dir).num_hidden_layers
        for mode in ATTENTION_MODES:
            name = f"{scheme}/{mode}"
            config = HfAttnConfig.from_pretrained(model_dir, read_length=length,
                                                  **attention_settings(mode, arena, layers))
            try:
                config.validate_fields()
            except ValueError as error:
                results[name] = na(str(error))
                continue
            model = HfAttnForSequenceClassification(config).to(device).eval()
            inputs = make_batch(batch, [length] * batch, length, model.config.vocab_size, generator, device)
            inputs.pop("labels")
            steps[name] = functools.partial(_forward, model, inputs)
    times = interleaved_times(steps, dict.fromkeys(steps, lambda: None), arena.budget.speed_warmup,
                              arena.budget.speed_repeats, device) if steps else {}
    for name, step in steps.items():
        summary = summarize(times[name])
        results[name] = {"value": summary["median_ms"], **summary, "peak_mib": peak_memory_bytes(step, device) / MIB}
    return {"length": length, "batch": batch, "device": str(device), "candidates": results}


@torch.no_grad()
def _forward(model: HfAttnForSequenceClassification, inputs: dict[str, torch.Tensor]) -> None:
    model(**inputs)
