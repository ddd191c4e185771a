"""Speed and memory benchmark of hf-attn against transformers' BERT and RoFormer of the same shape.

Everything is measured in one process and one run, and reported as ratios, because absolute times
say more about the machine than about the model. Three sections:

* `throughput`: training steps (forward + backward + AdamW, fp32) and inference (no grad) at fixed
  shapes, for hf-attn with every position scheme x {eager, sdpa} and for `BertForSequenceClassification`
  (absolute positions) and `RoFormerForSequenceClassification` (RoPE) built with the identical shape.
  After a warm-up, every repeat times one step of *each* model, in an order rotated from repeat to
  repeat, so that drift of a shared machine (other jobs, thermal throttling) hits all models alike;
  the median over repeats is reported.
* `scaling`: inference time and memory of hf-attn, eager vs SDPA, from 128 to 2048 tokens: eager
  materialises the (batch, heads, T, T) score matrix, SDPA's fused kernels need not.
* `realistic`: one epoch of training batches over real IMDb review lengths, padded to the maximum
  length versus dynamically padded to each batch's longest review (random and length-grouped batches),
  for each truncation length (128, the reference's, and 512).

Peak memory is the high-water mark of bytes held by torch's allocator during one step, *above what
was already held when the step began* (parameters, AdamW state, other models and cached tables are
not counted; activations, gradients and temporaries are). On CUDA it is
`torch.cuda.max_memory_allocated()` minus `torch.cuda.memory_allocated()` before the step. On CPU
no allocator statistics exist (and `tracemalloc` does not see torch's allocations), so the step runs
once under `torch.profiler` with `profile_memory=True` and the peak is the maximum of the running
sum of the allocations and frees it records. Both count tensor bytes, not process RSS (no allocator
caching or fragmentation).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import platform
import random
import statistics
import time
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .configuration_hf_attn import HfAttnConfig
from .modeling_hf_attn import HfAttnForSequenceClassification
from .positions import POSITION_SCHEMES

SECTIONS = ("throughput", "scaling", "realistic")
BASELINES = ("BERT", "RoFormer")
# Written by scripts/bench_tokenizer.py; merged into the report when present.
DEFAULT_TOKENIZER_JSON = "results/bench_tokenizer.json"
MIB = 2**20
WEEK3_VOCAB = 500  # BPE tokens of the Week 3 tokenizer's default (plus [PAD])


def _setting(default: Any, help_text: str) -> Any:
    """A `BenchSettings` field whose help text the command line reuses."""
    return field(default=default, metadata={"help": help_text})


@dataclass(frozen=True)
class BenchSettings:
    """Every size and repeat count of a run; the defaults are the issue's benchmark, tests shrink them."""

    device: str = _setting("cpu", "torch device: cpu, cuda, cuda:1, ...")
    threads: int | None = _setting(None, "torch intra-op threads (default: torch's choice)")
    seed: int = _setting(0, "seed of weights, token ids and batch order")
    sections: tuple[str, ...] = _setting(SECTIONS, "sections to run")
    # Model shape, shared by hf-attn, BERT and RoFormer.
    hidden_size: int = _setting(384, "model width of every model")
    num_hidden_layers: int = _setting(4, "Transformer blocks of every model")
    num_attention_heads: int = _setting(4, "attention heads of every model")
    intermediate_size: int = _setting(1536, "FFN width of every model")
    vocab_size: int = _setting(501, "vocabulary of every model (the Week 3 one; its last id is [PAD])")
    dropout: float = _setting(0.1, "hidden dropout of every model (both libraries' default)")
    attention_dropout: float = _setting(
        0.1, "attention-weight dropout of every model (both libraries' default); on CPU, SDPA has no fused "
        "kernel with dropout and trains through its unfused math path, 0 shows the fused one")
    # Throughput section.
    schemes: tuple[str, ...] = _setting(tuple(POSITION_SCHEMES), "hf-attn position schemes")
    backends: tuple[str, ...] = _setting(("eager", "sdpa"), "hf-attn attention implementations")
    variants: tuple[str, ...] = _setting(
        ("rope:dropout_implementation=torch", "rope:rope_layout=halves"),
        "hf-attn models measured beside the defaults, each SCHEME:FIELD=VALUE (one HfAttnConfig field set), "
        "e.g. torch's dropout instead of packed, or RoPE on halves instead of interleaved pairs")
    modes: tuple[str, ...] = _setting(("train", "infer"), "train: forward + backward + AdamW; infer: no grad")
    train_batch: int = _setting(32, "training batch size")
    infer_batch: int = _setting(64, "inference batch size")
    seq_lengths: tuple[int, ...] = _setting((128, 512), "sequence lengths; the first is where 'as fast' suffices")
    warmup: int = _setting(2, "untimed steps of each model before timing")
    repeats: int = _setting(7, "timed steps of each model (the median is reported)")
    learning_rate: float = _setting(1e-4, "AdamW learning rate")
    # Attention-scaling section (hf-attn only).
    scaling_scheme: str = _setting("rope", "hf-attn position scheme of the scaling section")
    scaling_lengths: tuple[int, ...] = _setting((128, 256, 512, 1024, 2048), "sequence lengths of the scaling section")
    scaling_batch: int = _setting(8, "inference batch size of the scaling section")
    scaling_repeats: int = _setting(3, "timed steps per length and backend")
    # Realistic-batches section.
    realistic_scheme: str = _setting("rope", "hf-attn position scheme of the realistic section")
    realistic_backend: str = _setting("sdpa", "attention implementation of the realistic section")
    realistic_batch: int = _setting(32, "training batch size of the realistic section")
    realistic_max_lengths: tuple[int, ...] = _setting(
        (128, 512), "truncation lengths, each also the width of fixed padding")
    realistic_vocab_size: int = _setting(
        WEEK3_VOCAB, "BPE vocabulary of the tokenizer that measures review lengths (a larger one makes reviews "
        "shorter in tokens; the full IMDb runs use 8000)")
    epoch_reviews: int | None = _setting(None, "reviews in the epoch (default: the sample's whole train split)")
    group_megabatch: int = _setting(50, "length-grouped batching sorts chunks of this many batches")
    # Profile of hf-attn training steps.
    profile_steps: int = _setting(3, "profiled training steps (0: no profile)")
    profile_scheme: str = _setting("rope", "hf-attn position scheme of the profile")
    profile_backend: str = _setting("sdpa", "attention implementation of the profile")
    profile_seq: int = _setting(128, "sequence length of the profile (batch: --train-batch)")
    profile_rows: int = _setting(15, "operators listed, by self CPU time")
    tokenizer_json: str | None = _setting(
        DEFAULT_TOKENIZER_JSON, "scripts/bench_tokenizer.py's JSON, merged into the report if it exists ('' to skip)")


@dataclass
class Candidate:
    """One (model, attention backend) under test; eager and sdpa variants of a scheme share the model,
    so they run identical weights."""

    family: str  # "hf-attn", "BERT" or "RoFormer"
    scheme: str  # position scheme
    backend: str  # requested attention implementation
    model: nn.Module
    optimizer: torch.optim.Optimizer | None = field(repr=False)  # None: inference only

    @property
    def name(self) -> str:
        return f"{self.family} {self.scheme} {self.backend}"

    def prepare(self, training: bool) -> None:
        """Select this candidate's backend and train/eval mode (outside the timed region)."""
        if self.model.config._attn_implementation != self.backend:
            self.model.set_attn_implementation(self.backend)
        self.model.train(training)


# --------------------------------------------------------------------------------------------------
# Models


@dataclass(frozen=True)
class Variant:
    """An hf-attn model with one config field changed, benchmarked beside the default of its scheme."""

    scheme: str
    field: str
    value: Any

    @classmethod
    def parse(cls, text: str) -> Variant:
        """`rope:rope_layout=halves` -> Variant("rope", "rope_layout", "halves"); numbers and booleans
        are read as Python literals, anything else as a string."""
        scheme, _, assignment = text.partition(":")
        name, equals, raw = assignment.partition("=")
        if not (scheme and name and equals and raw):
            raise ValueError(f"bench variant {text!r}: expected SCHEME:FIELD=VALUE, e.g. rope:rope_layout=halves.")
        if name not in HfAttnConfig.__dataclass_fields__:
            raise ValueError(f"bench variant {text!r}: HfAttnConfig has no field {name!r}.")
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            value = raw
        return cls(scheme, name, value)

    @property
    def family(self) -> str:
        return f"hf-attn ({self.field}={self.value})"


def hf_attn_config(settings: BenchSettings, scheme: str, max_length: int, **overrides: Any) -> HfAttnConfig:
    """The hf-attn config of the benchmark shape; `max_length` sizes the learned position table."""
    shape = dict(
        vocab_size=settings.vocab_size,
        hidden_size=settings.hidden_size,
        num_hidden_layers=settings.num_hidden_layers,
        num_attention_heads=settings.num_attention_heads,
        intermediate_size=settings.intermediate_size,
        position_embedding_type=scheme,
        max_position_embeddings=max_length,
        hidden_dropout=settings.dropout,
        attention_dropout=settings.attention_dropout,
        pad_token_id=settings.vocab_size - 1,
        num_labels=2,
    )
    return HfAttnConfig(**{**shape, **overrides})


def build_baseline(settings: BenchSettings, family: str, max_length: int) -> nn.Module:
    """transformers' BERT or RoFormer classifier with exactly the hf-attn shape and vocabulary."""
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        RoFormerConfig,
        RoFormerForSequenceClassification,
    )

    config_class, model_class = {
        "BERT": (BertConfig, BertForSequenceClassification),
        "RoFormer": (RoFormerConfig, RoFormerForSequenceClassification),
    }[family]
    config = config_class(
        vocab_size=settings.vocab_size,
        hidden_size=settings.hidden_size,
        num_hidden_layers=settings.num_hidden_layers,
        num_attention_heads=settings.num_attention_heads,
        intermediate_size=settings.intermediate_size,
        hidden_act="gelu",
        hidden_dropout_prob=settings.dropout,
        attention_probs_dropout_prob=settings.attention_dropout,
        max_position_embeddings=max_length,
        pad_token_id=settings.vocab_size - 1,
        num_labels=2,
    )
    return model_class(config)


def encoder_layers(model: nn.Module) -> nn.ModuleList:
    """The stack of Transformer blocks, wherever each family keeps it."""
    if isinstance(model, HfAttnForSequenceClassification):
        return model.model.layers
    return getattr(model, model.base_model_prefix).encoder.layer


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _best_backend(model: nn.Module) -> str:
    """SDPA where the model supports it (RoFormer does not, in transformers 5), eager otherwise."""
    return "sdpa" if getattr(model, "_supports_sdpa", False) else "eager"


def build_candidates(settings: BenchSettings, max_length: int, device: torch.device) -> list[Candidate]:
    """hf-attn for every scheme x backend (and every variant x backend), then BERT and RoFormer with their
    fastest attention."""
    candidates: list[Candidate] = []

    def add(family: str, scheme: str, backends: Sequence[str], model: nn.Module) -> None:
        model.to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
        candidates.extend(Candidate(family, scheme, backend, model, optimizer) for backend in backends)

    for scheme in settings.schemes:
        torch.manual_seed(settings.seed)
        model = HfAttnForSequenceClassification(hf_attn_config(settings, scheme, max_length))
        add("hf-attn", scheme, settings.backends, model)
    for variant in map(Variant.parse, settings.variants):
        torch.manual_seed(settings.seed)
        config = hf_attn_config(settings, variant.scheme, max_length, **{variant.field: variant.value})
        add(variant.family, variant.scheme, settings.backends, HfAttnForSequenceClassification(config))
    for family, scheme in zip(BASELINES, ("absolute", "rope")):
        torch.manual_seed(settings.seed)
        model = build_baseline(settings, family, max_length)
        add(family, scheme, [_best_backend(model)], model)
    return candidates


# --------------------------------------------------------------------------------------------------
# Steps, timing and memory


def make_batch(
    batch: int, lengths: Sequence[int], padded_length: int, vocab_size: int, generator: torch.Generator,
    device: torch.device,
) -> dict[str, torch.Tensor]:
    """Random token ids (never [PAD], the last id) for `lengths` real tokens per row, right-padded."""
    pad_id = vocab_size - 1
    input_ids = torch.randint(0, pad_id, (batch, padded_length), generator=generator)
    attention_mask = (torch.arange(padded_length)[None, :] < torch.tensor(lengths)[:, None]).long()
    input_ids = input_ids.masked_fill(attention_mask == 0, pad_id)
    labels = torch.randint(0, 2, (batch,), generator=generator)
    return {"input_ids": input_ids.to(device), "attention_mask": attention_mask.to(device), "labels": labels.to(device)}


def train_step(candidate: Candidate, batch: dict[str, torch.Tensor]) -> None:
    loss = candidate.model(**batch).loss
    loss.backward()
    candidate.optimizer.step()
    candidate.optimizer.zero_grad(set_to_none=True)


def infer_step(candidate: Candidate, batch: dict[str, torch.Tensor]) -> None:
    # no_grad, not inference_mode: a RoPE/sinusoidal cache grown here must stay usable for training.
    with torch.no_grad():
        candidate.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(step: Callable[[], None], device: torch.device) -> float:
    """Wall-clock seconds of one step; CUDA work is waited for on both sides."""
    _synchronize(device)
    start = time.perf_counter()
    step()
    _synchronize(device)
    return time.perf_counter() - start


def peak_memory_bytes(step: Callable[[], None], device: torch.device) -> int:
    """Peak bytes allocated by torch during `step` above what was held before it (see module doc)."""
    if device.type == "cuda":
        _synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        step()
        _synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    # The running sum of this step's allocations and frees (negative sizes). The events' own
    # `total_allocated` is no use: it also counts tensors allocated under earlier profiles and still
    # alive (e.g. AdamW state), and frees of tensors from before the step (last step's gradients)
    # would push it below 0, so the peak starts at 0.
    allocations = []
    pending = list(prof.profiler.kineto_results.experimental_event_tree())
    while pending:
        event = pending.pop()
        pending.extend(event.children)
        if event.tag == _EventType.Allocation and event.extra_fields.device.type == "cpu":
            allocations.append((event.start_time_ns, event.extra_fields.alloc_size))
    held = peak = 0
    for _, size in sorted(allocations):
        held += size
        peak = max(peak, held)
    return peak


def interleaved_times(
    steps: dict[str, Callable[[], None]], prepare: dict[str, Callable[[], None]], warmup: int, repeats: int,
    device: torch.device,
) -> dict[str, list[float]]:
    """Seconds per repeat for every named step, one step of each per repeat in a rotating order."""
    names = list(steps)
    for _ in range(warmup):
        for name in names:
            prepare[name]()
            steps[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(repeats):
        shift = repeat % len(names)
        for name in names[shift:] + names[:shift]:
            prepare[name]()
            times[name].append(timed(steps[name], device))
    return times


def _summary(times: list[float]) -> dict[str, Any]:
    """Median, minimum and maximum, plus every repeat in timing order (each repeat times every model once,
    so the i-th entries of two models are neighbours in time)."""
    return {"median_ms": 1e3 * statistics.median(times), "min_ms": 1e3 * min(times), "max_ms": 1e3 * max(times),
            "times_ms": [1e3 * seconds for seconds in times]}


# --------------------------------------------------------------------------------------------------
# Sections


def bench_throughput(settings: BenchSettings, device: torch.device) -> dict[str, Any]:
    """Training and inference at fixed shapes for every candidate, plus their parameter counts."""
    candidates = build_candidates(settings, max(settings.seq_lengths), device)
    generator = torch.Generator().manual_seed(settings.seed)
    models = []
    for candidate in candidates:
        layers = encoder_layers(candidate.model)
        models.append({
            "name": candidate.name, "family": candidate.family, "scheme": candidate.scheme,
            "backend": candidate.backend, "hidden_size": candidate.model.config.hidden_size,
            "num_layers": len(layers), "params": count_parameters(candidate.model),
            "encoder_layer_params": count_parameters(layers),
        })
    rows = []
    cases = {"train": (settings.train_batch, train_step), "infer": (settings.infer_batch, infer_step)}
    for mode in settings.modes:
        batch_size, step_fn = cases[mode]
        for seq in settings.seq_lengths:
            batch = make_batch(batch_size, [seq] * batch_size, seq, settings.vocab_size, generator, device)
            steps = {c.name: (lambda c=c: step_fn(c, batch)) for c in candidates}
            prepare = {c.name: (lambda c=c: c.prepare(mode == "train")) for c in candidates}
            times = interleaved_times(steps, prepare, settings.warmup, settings.repeats, device)
            for candidate in candidates:
                candidate.prepare(mode == "train")
                row = {"mode": mode, "batch": batch_size, "seq": seq, "name": candidate.name,
                       "family": candidate.family, "scheme": candidate.scheme, "backend": candidate.backend,
                       **_summary(times[candidate.name]),
                       "peak_mib": peak_memory_bytes(steps[candidate.name], device) / MIB}
                row["sequences_per_s"] = batch_size / (row["median_ms"] / 1e3)
                rows.append(row)
            _add_ratios(rows, mode, seq)
    return {"models": models, "rows": rows}


def _add_ratios(rows: list[dict[str, Any]], mode: str, seq: int) -> None:
    """Speed-ups (baseline time / this time) against each transformers model and the faster of them."""
    case = [r for r in rows if r["mode"] == mode and r["seq"] == seq]
    baseline_ms = {r["family"]: r["median_ms"] for r in case if r["family"] in BASELINES}
    for row in case:
        for family, ms in baseline_ms.items():
            row[f"speedup_vs_{family}"] = ms / row["median_ms"]
        if baseline_ms:
            row["speedup_vs_best"] = min(baseline_ms.values()) / row["median_ms"]


def bench_scaling(settings: BenchSettings, device: torch.device) -> dict[str, Any]:
    """Inference time and memory of hf-attn, eager vs SDPA, as the sequence grows."""
    torch.manual_seed(settings.seed)
    config = hf_attn_config(settings, settings.scaling_scheme, max(settings.scaling_lengths))
    model = HfAttnForSequenceClassification(config).to(device)
    candidates = [Candidate("hf-attn", settings.scaling_scheme, b, model, None) for b in settings.backends]
    generator = torch.Generator().manual_seed(settings.seed)
    rows = []
    for seq in settings.scaling_lengths:
        size = settings.scaling_batch
        batch = make_batch(size, [seq] * size, seq, settings.vocab_size, generator, device)
        steps = {c.backend: (lambda c=c: infer_step(c, batch)) for c in candidates}
        prepare = {c.backend: (lambda c=c: c.prepare(False)) for c in candidates}
        times = interleaved_times(steps, prepare, 1, settings.scaling_repeats, device)
        for candidate in candidates:
            candidate.prepare(False)
            rows.append({"seq": seq, "batch": settings.scaling_batch, "backend": candidate.backend,
                         **_summary(times[candidate.backend]),
                         "peak_mib": peak_memory_bytes(steps[candidate.backend], device) / MIB})
    return {"scheme": settings.scaling_scheme, "rows": rows}


def review_token_lengths(texts: Sequence[str], vocab_size: int = WEEK3_VOCAB) -> tuple[list[int], int]:
    """Token counts of `texts` under a byte-pair tokenizer trained on them the Week 3 way.

    The recipe of `shared/docs/week3-format.md`: words are `\\w+` runs or single punctuation marks,
    each ending in `</w>`, merges learned up to `vocab_size` tokens with min_freq 5. It is `tokenizers`' BPE, not
    the byte-level Week 3 implementation, so counts are close but not identical (non-ASCII bytes and
    tie-breaking differ); only lengths are used, and they do not depend on the benchmarked model's vocab.
    Returns the lengths and the vocabulary actually reached (a small corpus may stop short of `vocab_size`).
    """
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(end_of_word_suffix="</w>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(r"\w+|[^\w\s]"), behavior="isolated")]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=5, end_of_word_suffix="</w>", show_progress=False
    )
    tokenizer.train_from_iterator(texts, trainer)
    return [len(encoding.ids) for encoding in tokenizer.encode_batch(list(texts))], tokenizer.get_vocab_size()


def epoch_batches(
    lengths: Sequence[int], batch: int, grouped: bool, megabatch: int, rng: random.Random
) -> list[list[int]]:
    """Review indices of each batch of one epoch, in random order.

    Fixed and dynamic padding use the same random batches (they differ only in padding). `grouped`
    sorts each chunk of `megabatch` batches by length before cutting it (as transformers'
    `group_by_length`), so a batch holds reviews of similar length, then shuffles the batch order so
    the long batches do not all come first.
    """
    order = list(range(len(lengths)))
    rng.shuffle(order)
    if grouped:
        chunk = batch * megabatch
        order = [i for start in range(0, len(order), chunk)
                 for i in sorted(order[start:start + chunk], key=lambda i: -lengths[i])]
    batches = [order[start:start + batch] for start in range(0, len(order), batch)]
    if grouped:
        rng.shuffle(batches)
    return batches


def bench_realistic(settings: BenchSettings, device: torch.device) -> dict[str, Any]:
    """One training epoch over IMDb review lengths: fixed padding vs dynamic vs length-grouped, for each
    truncation length."""
    from .data import load_sample

    texts = list(load_sample()["train"]["text"])  # the tokenizer learns from all of them
    all_lengths, vocab = review_token_lengths(texts, settings.realistic_vocab_size)
    all_lengths = all_lengths[: settings.epoch_reviews]
    ordered = sorted(all_lengths)
    return {
        "scheme": settings.realistic_scheme, "backend": settings.realistic_backend, "reviews": len(all_lengths),
        "batch": settings.realistic_batch,
        "tokenizer": f"tokenizers BPE, Week 3 recipe (vocab {vocab} of {settings.realistic_vocab_size} asked, "
                     f"min_freq 5), trained on the sample's {len(texts):,} training reviews",
        "length_median": ordered[len(ordered) // 2],
        "length_p90": ordered[int(0.9 * (len(ordered) - 1))],
        "runs": [_realistic_epoch(settings, all_lengths, max_length, device)
                 for max_length in settings.realistic_max_lengths],
    }


def _realistic_epoch(settings: BenchSettings, all_lengths: Sequence[int], max_length: int,
                     device: torch.device) -> dict[str, Any]:
    """The three padding strategies over one epoch of reviews truncated to `max_length`, interleaved."""
    lengths = [max(1, min(n, max_length)) for n in all_lengths]
    config = hf_attn_config(settings, settings.realistic_scheme, max_length)
    # One model and optimizer per strategy, all from the same initial weights, so no strategy trains on
    # weights another has moved.
    candidates = {}
    for strategy in ("fixed", "dynamic", "grouped"):
        torch.manual_seed(settings.seed)
        model = HfAttnForSequenceClassification(config).to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
        candidates[strategy] = Candidate(
            "hf-attn", settings.realistic_scheme, settings.realistic_backend, model, optimizer
        )

    generator = torch.Generator().manual_seed(settings.seed)
    plans: dict[str, list[dict[str, torch.Tensor]]] = {}
    stats: dict[str, dict[str, Any]] = {}
    for strategy in candidates:
        rng = random.Random(settings.seed)
        batches = epoch_batches(lengths, settings.realistic_batch, strategy == "grouped", settings.group_megabatch, rng)
        plans[strategy] = []
        padded = 0
        for indices in batches:
            batch_lengths = [lengths[i] for i in indices]
            width = max_length if strategy == "fixed" else max(batch_lengths)
            padded += width * len(indices)
            plans[strategy].append(
                make_batch(len(indices), batch_lengths, width, settings.vocab_size, generator, device)
            )
        stats[strategy] = {"strategy": strategy, "batches": len(batches), "real_tokens": sum(lengths),
                           "padded_tokens": padded, "padding_efficiency": sum(lengths) / padded}

    for strategy, candidate in candidates.items():  # warm-up on each strategy's first batch
        candidate.prepare(True)
        train_step(candidate, plans[strategy][0])
    totals = dict.fromkeys(candidates, 0.0)
    for index in range(len(plans["fixed"])):  # interleaved batch by batch, order rotated
        names = list(candidates)
        shift = index % len(names)
        for strategy in names[shift:] + names[:shift]:
            candidate = candidates[strategy]
            candidate.prepare(True)
            totals[strategy] += timed(lambda: train_step(candidate, plans[strategy][index]), device)
    rows = []
    for strategy, stat in stats.items():
        stat["epoch_s"] = totals[strategy]
        stat["speedup_vs_fixed"] = totals["fixed"] / totals[strategy]
        rows.append(stat)
    return {"max_length": max_length,
            "truncated_fraction": sum(n > max_length for n in all_lengths) / len(all_lengths), "rows": rows}


def profile_training(settings: BenchSettings, device: torch.device) -> dict[str, Any]:
    """Top operators by self CPU time over a few hf-attn training steps (after one warm-up step)."""
    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(settings.seed)
    model = HfAttnForSequenceClassification(hf_attn_config(settings, settings.profile_scheme, settings.profile_seq))
    model.to(device)
    candidate = Candidate("hf-attn", settings.profile_scheme, settings.profile_backend, model,
                          torch.optim.AdamW(model.parameters(), lr=settings.learning_rate))
    generator = torch.Generator().manual_seed(settings.seed)
    seq, size = settings.profile_seq, settings.train_batch
    batch = make_batch(size, [seq] * size, seq, settings.vocab_size, generator, device)
    candidate.prepare(True)
    train_step(candidate, batch)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(settings.profile_steps):
            train_step(candidate, batch)
        _synchronize(device)
    averages = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total_us = sum(e.self_cpu_time_total for e in averages)
    return {
        "scheme": settings.profile_scheme, "backend": settings.profile_backend, "batch": size, "seq": seq,
        "steps": settings.profile_steps,
        "top_ops": [{"op": e.key, "calls": e.count, "self_cpu_ms": e.self_cpu_time_total / 1e3,
                     "self_cpu_share": e.self_cpu_time_total / total_us} for e in averages[: settings.profile_rows]],
    }


# --------------------------------------------------------------------------------------------------
# Entry points


def run_benchmark(settings: BenchSettings | None = None, **overrides: Any) -> dict[str, Any]:
    """Run the selected sections and return one JSON-ready dict (settings and environment included).

    `run_benchmark(repeats=2, seq_lengths=(16,))` overrides single fields of the defaults.
    """
    settings = dataclasses.replace(settings or BenchSettings(), **overrides)
    unknown = set(settings.sections) - set(SECTIONS)
    if unknown:
        raise ValueError(f"unknown benchmark section(s) {sorted(unknown)}; allowed: {', '.join(SECTIONS)}")
    for variant in settings.variants:  # fail before minutes of timing, not at the first variant
        Variant.parse(variant)
    if settings.threads:
        torch.set_num_threads(settings.threads)
    device = torch.device(settings.device)
    import transformers

    results: dict[str, Any] = {
        "settings": dataclasses.asdict(settings),
        "environment": {
            "torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
            "machine": platform.machine(), "device": str(device), "threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(), "load_average_start": os.getloadavg(),
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
    }
    if device.type == "cuda":
        results["environment"]["gpu"] = torch.cuda.get_device_name(device)
    sections = {"throughput": bench_throughput, "scaling": bench_scaling, "realistic": bench_realistic}
    for name in settings.sections:
        results[name] = sections[name](settings, device)
    if settings.profile_steps:
        results["profile"] = profile_training(settings, device)
    if settings.tokenizer_json and Path(settings.tokenizer_json).is_file():
        results["tokenizer"] = json.loads(Path(settings.tokenizer_json).read_text())
    results["environment"]["load_average_end"] = os.getloadavg()
    return results


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _ratio(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}x"


def _faster_repeats(row: dict[str, Any], case: list[dict[str, Any]]) -> str:
    """In how many repeats this row's step beat the faster transformers model's step of the same repeat
    ("k/n"): interleaving puts the two side by side in time, so this count is not moved by the drift
    between repeats that moves medians. Empty for the transformers models and for records without
    per-repeat times."""
    baselines = [r for r in case if r["family"] in BASELINES and "times_ms" in r]
    if row["family"] in BASELINES or not baselines or "times_ms" not in row:
        return ""
    best = min(baselines, key=lambda r: r["median_ms"])["times_ms"]
    return f"{sum(mine < theirs for mine, theirs in zip(row['times_ms'], best, strict=True))}/{len(best)}"


def _goal(row: dict[str, Any], shortest: int) -> str:
    """The issue's target for hf-attn + sdpa: at least as fast as the faster transformers model at the
    shortest length, strictly faster at longer ones."""
    if row["family"] != "hf-attn" or row["backend"] != "sdpa" or "speedup_vs_best" not in row:
        return ""
    met = row["speedup_vs_best"] >= 1.0 if row["seq"] <= shortest else row["speedup_vs_best"] > 1.0
    return "yes" if met else "NO"


def _format_throughput(section: dict[str, Any]) -> list[str]:
    rows = section["rows"]
    shortest = min(r["seq"] for r in rows)
    out = ["## Throughput", "",
           "Speed-up = the transformers model's median step time / this row's (above 1: this row is faster); "
           "seq/s from the median; the minimum is the least disturbed repeat, for judging noise, and 'faster "
           "in' counts the repeats in which this row beat the faster transformers model of that repeat. "
           "Peak MiB: allocator high-water mark above what was held before the step (activations, "
           "gradients, temporaries).", ""]
    labels = {"train": "Training (forward + backward + AdamW, fp32)", "infer": "Inference (no grad, fp32)"}
    goals = []
    for mode, batch, seq in dict.fromkeys((r["mode"], r["batch"], r["seq"]) for r in rows):
        case = [r for r in rows if (r["mode"], r["seq"]) == (mode, seq)]
        out += [f"### {labels[mode]}, batch {batch}, sequence {seq}", ""]
        table_rows = []
        for r in case:
            goal = _goal(r, shortest)
            if goal:
                goals.append((goal, f"{mode} {seq} {r['scheme']}"))
            table_rows.append([r["family"], r["scheme"], r["backend"], f"{r['median_ms']:.1f}", f"{r['min_ms']:.1f}",
                               f"{r['sequences_per_s']:.1f}", _ratio(r.get("speedup_vs_BERT")),
                               _ratio(r.get("speedup_vs_RoFormer")), _faster_repeats(r, case), f"{r['peak_mib']:.1f}",
                               goal])
        out += [_table(["model", "positions", "attention", "median ms", "min ms", "seq/s", "vs BERT", "vs RoFormer",
                        "faster in", "peak MiB", "goal"], table_rows), ""]
    if goals:
        misses = [case for goal, case in goals if goal == "NO"]
        out += [f"Goal (hf-attn + sdpa at least as fast as the faster transformers model at {shortest} tokens, "
                f"faster beyond): met in {len(goals) - len(misses)}/{len(goals)} cases"
                + (f"; missed: {', '.join(misses)}." if misses else "."), ""]
    out += ["### Parameters", "",
            _table(["model", "positions", "hidden", "layers", "parameters", "encoder-layer parameters"],
                   [[m["family"], m["scheme"], m["hidden_size"], m["num_layers"], f"{m['params']:,}",
                     f"{m['encoder_layer_params']:,}"]
                    for m in {(m["family"], m["scheme"]): m for m in section["models"]}.values()]), ""]
    return out


def _format_scaling(section: dict[str, Any]) -> list[str]:
    by_seq: dict[int, dict[str, dict[str, Any]]] = {}
    for r in section["rows"]:
        by_seq.setdefault(r["seq"], {})[r["backend"]] = r
    backends = list(dict.fromkeys(r["backend"] for r in section["rows"]))
    header = ["seq"] + [f"{b} ms" for b in backends] + [f"{b} peak MiB" for b in backends]
    rows = [
        [seq] + [f"{cells[b]['median_ms']:.1f}" for b in backends] + [f"{cells[b]['peak_mib']:.1f}" for b in backends]
        for seq, cells in by_seq.items()
    ]
    if {"eager", "sdpa"} <= set(backends):
        header.append("sdpa speed-up")
        for row, cells in zip(rows, by_seq.values()):
            row.append(_ratio(cells["eager"]["median_ms"] / cells["sdpa"]["median_ms"]))
    batch = section["rows"][0]["batch"] if section["rows"] else "?"
    return [f"## Attention cost scaling (hf-attn {section['scheme']}, inference, batch {batch})", "",
            _table(header, rows), ""]


def _format_realistic(section: dict[str, Any]) -> list[str]:
    out = [f"## Realistic batches (one epoch of {section['reviews']} IMDb reviews, hf-attn {section['scheme']} "
           f"{section['backend']}, batch {section['batch']})", "",
           f"Lengths: {section['tokenizer']}; median {section['length_median']}, 90th percentile "
           f"{section['length_p90']} tokens.", ""]
    for run in section["runs"]:
        rows = [[r["strategy"], r["batches"], f"{r['real_tokens']:,}", f"{r['padded_tokens']:,}",
                 f"{r['padding_efficiency']:.0%}", f"{r['epoch_s']:.1f}", _ratio(r["speedup_vs_fixed"])]
                for r in run["rows"]]
        out += [f"### Truncated to {run['max_length']} tokens ({run['truncated_fraction']:.0%} of reviews longer)", "",
                _table(["padding", "batches", "real tokens", "padded tokens", "efficiency", "epoch s", "vs fixed"],
                       rows), ""]
    return out


def _format_profile(section: dict[str, Any]) -> list[str]:
    rows = [[f"`{op['op']}`", op["calls"], f"{op['self_cpu_ms']:.1f}", f"{op['self_cpu_share']:.1%}"]
            for op in section["top_ops"]]
    return [f"## Profile (hf-attn {section['scheme']} {section['backend']} training, batch {section['batch']}, "
            f"sequence {section['seq']}, {section['steps']} profiled step(s))", "",
            _table(["op", "calls", "self CPU ms", "share"], rows), ""]


def _format_tokenizer(section: Any) -> list[str]:
    """scripts/bench_tokenizer.py's JSON: its top-level scalars as a caption and its `rows` records as a
    table; any other layout verbatim, so a change on that side never breaks this report."""
    out = ["## Tokenizer speed (from scripts/bench_tokenizer.py)", ""]
    records = section.get("rows") if isinstance(section, dict) else None
    if not (isinstance(records, list) and records and all(isinstance(r, dict) for r in records)):
        return out + ["```json", json.dumps(section, indent=2), "```", ""]
    caption = [f"{key} {value}" for key, value in section.items() if isinstance(value, (str, int, float))]
    header = list(dict.fromkeys(key for record in records for key in record))
    body = [[record.get(key, "") for key in header] for record in records]
    return out + ([", ".join(caption) + ".", ""] if caption else []) + [_table(header, body), ""]


def format_markdown(results: dict[str, Any]) -> str:
    """The report: one table per measured case, then scaling, realistic batches, tokenizer and profile."""
    env = results["environment"]
    out = ["# hf-attn benchmark", "",
           f"torch {env['torch']}, transformers {env['transformers']}, device {env.get('gpu', env['device'])}, "
           f"{env['threads']} threads of {env['cpu_count']} CPUs, 1-minute load average "
           f"{env['load_average_start'][0]:.1f} at start, {env['load_average_end'][0]:.1f} at end; "
           f"started {env['started']}. "
           "All numbers come from this one run; compare ratios, not absolute times.", ""]
    formatters = {"throughput": _format_throughput, "scaling": _format_scaling, "realistic": _format_realistic,
                  "tokenizer": _format_tokenizer, "profile": _format_profile}
    for name, formatter in formatters.items():
        if name in results:
            out += formatter(results[name])
    return "\n".join(out)


def plot_attention_scaling(results: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Time and peak memory against sequence length, one line per attention backend, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    section = results["scaling"]
    backends = list(dict.fromkeys(r["backend"] for r in section["rows"]))
    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(10, 4))
    for backend in backends:
        rows = [r for r in section["rows"] if r["backend"] == backend]
        seqs = [r["seq"] for r in rows]
        time_axis.plot(seqs, [r["median_ms"] for r in rows], marker="o", label=backend)
        memory_axis.plot(seqs, [max(r["peak_mib"], 1e-3) for r in rows], marker="o", label=backend)
    lengths = sorted({r["seq"] for r in section["rows"]})
    for axis, label in ((time_axis, "median inference time (ms)"), (memory_axis, "peak memory above baseline (MiB)")):
        axis.set_xscale("log", base=2)
        axis.set_xticks(lengths, labels=[str(n) for n in lengths], minor=False)
        axis.minorticks_off()
        axis.set_yscale("log")
        axis.set_xlabel("sequence length (tokens)")
        axis.set_ylabel(label)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend()
    batch = section["rows"][0]["batch"] if section["rows"] else "?"
    figure.suptitle(f"hf-attn {section['scheme']}: attention cost, batch {batch}")
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _int_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part)


def _str_tuple(text: str) -> tuple[str, ...]:
    return tuple(part for part in text.split(",") if part)


def parse_side_by_side_arguments(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, arm: str, output: str
) -> argparse.Namespace:
    """Parse `argv` for a script that times a few arms against each other (`scripts/bench_*.py`), with the
    options they share added (warm-up and timed steps of each `arm`, torch threads, JSON record) and the
    thread count applied."""
    parser.add_argument("--warmup", type=int, default=1, help=f"untimed steps of each {arm}")
    parser.add_argument("--repeats", type=int, default=6, help=f"timed steps of each {arm} (median reported)")
    parser.add_argument("--threads", type=int, help="torch intra-op threads (default: torch's choice)")
    parser.add_argument("--output", default=output, help="JSON record")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    return args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `hf-attn bench`: one per `BenchSettings` field (dashes for underscores), plus outputs.

    Generated from the dataclass so that a new setting cannot be forgotten on the command line.
    Tuples are comma-separated (`--seq-lengths 128,512`); defaults are `BenchSettings`'."""
    hints = typing.get_type_hints(BenchSettings)
    for settings_field in dataclasses.fields(BenchSettings):
        hint = hints[settings_field.name]
        default = settings_field.default
        if typing.get_origin(hint) is tuple:
            parse: Callable[[str], Any] = _int_tuple if typing.get_args(hint)[0] is int else _str_tuple
            shown = ",".join(map(str, default))
        else:  # a plain type, or `X | None`: parse as X
            parse = next(arg for arg in (typing.get_args(hint) or (hint,)) if arg is not type(None))
            shown = default
        parser.add_argument("--" + settings_field.name.replace("_", "-"), type=parse, default=default,
                            help=settings_field.metadata["help"] + ("" if default is None else f" (default {shown})"))
    parser.add_argument("--output", default="results/bench.json", help="JSON results (default results/bench.json)")
    parser.add_argument("--markdown", default="results/bench.md", help="markdown report (default results/bench.md)")
    parser.add_argument("--plot", default="results/bench_attention_scaling.png",
                        help="attention-scaling PNG, written when the scaling section runs")


def run_from_args(args: argparse.Namespace) -> None:
    """Run with the parsed options, write JSON, markdown and plot, and print the markdown."""
    names = {f.name for f in dataclasses.fields(BenchSettings)}
    settings = BenchSettings(**{name: value for name, value in vars(args).items() if name in names})
    results = run_benchmark(settings)
    report = format_markdown(results)
    for path, text in ((args.output, json.dumps(results, indent=2)), (args.markdown, report)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text + "\n")
    if "scaling" in results:
        plot_attention_scaling(results, args.plot)
    print(report)


__all__ = [
    "BenchSettings",
    "add_arguments",
    "format_markdown",
    "plot_attention_scaling",
    "run_benchmark",
    "run_from_args",
]
