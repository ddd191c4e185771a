"""The `realistic` section: one training epoch over real IMDb review lengths, three ways of padding.

Fixed padding to the truncation length, dynamic padding to each batch's longest review (random
batches), and length-grouped batches (as transformers' `group_by_length`), for each truncation length.
Review lengths come from a Week 3 tokenizer trained on the sample's training reviews; token ids are
random, since only the shapes matter for speed.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from ...modeling_hf_attn import HfAttnForSequenceClassification
from ...timing import timed
from ..markdown import ratio, table
from ..models import ANCHOR_BUILDERS, OWN_DROPOUT_ANCHORS, Candidate, hf_attn_config, peer_families, supported_backends
from ..timing import make_batch, train_step
from .base import BenchSection, option

if TYPE_CHECKING:  # the settings gather every section's fields
    from ..settings import BenchSettings

STRATEGIES = ("fixed", "dynamic", "grouped")
WEEK3_VOCAB = 500  # bytes + merges of the Week 3 tokenizer's default (plus [PAD])


def review_token_lengths(texts: Sequence[str], vocab_size: int = WEEK3_VOCAB) -> tuple[list[int], int]:
    """Token counts of `texts`, whole (not truncated), under a Week 3 tokenizer trained on them, and the
    vocabulary it reached without [PAD] (a small corpus may stop merging short of `vocab_size`)."""
    from ...week3 import train_week3_tokenizer  # here: the Week 3 package imports `datasets`

    tokenizer = train_week3_tokenizer(texts, vocab_size=vocab_size)
    lengths = [len(ids) for ids in tokenizer(list(texts), truncation=False, verbose=False)["input_ids"]]
    return lengths, len(tokenizer) - 1


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


@dataclasses.dataclass(frozen=True)
class RealisticSection(BenchSection):
    """One training epoch of real review lengths, by padding strategy, hf-attn against its peers."""

    name: ClassVar[str] = "realistic"
    by_default: ClassVar[bool] = True
    realistic_scheme: str = option("rope", "hf-attn position scheme of the realistic section")
    realistic_backend: str | None = option(
        None, "attention implementation of every model in the realistic section (default: each of --backends the "
        "model has, its fastest on a strategy's batches counting)")
    realistic_batch: int = option(32, "training batch size of the realistic section")
    realistic_max_lengths: tuple[int, ...] = option(
        (128, 512), "truncation lengths, each also the width of fixed padding")
    realistic_vocab_size: int = option(
        WEEK3_VOCAB, "vocabulary (bytes + merges) of the Week 3 tokenizer that measures review lengths (a larger "
        "one makes reviews shorter in tokens; the full IMDb runs use 8000)")
    epoch_reviews: int | None = option(None, "reviews in the epoch (default: the sample's whole train split)")
    group_megabatch: int = option(50, "length-grouped batching sorts chunks of this many batches")

    @classmethod
    def run(cls, settings: BenchSettings, device: torch.device) -> dict[str, Any]:
        """One training epoch over IMDb review lengths: fixed padding vs dynamic vs length-grouped, for each
        truncation length."""
        from ...tasks.imdb import load_sample

        texts = list(load_sample()["train"]["text"])  # the tokenizer learns from all of them
        all_lengths, vocab = review_token_lengths(texts, settings.realistic_vocab_size)
        all_lengths = all_lengths[: settings.epoch_reviews]
        ordered = sorted(all_lengths)
        return {
            "scheme": settings.realistic_scheme, "reviews": len(all_lengths),
            "batch": settings.realistic_batch,
            "tokenizer": f"Week 3 byte-level BPE (vocab {vocab} of {settings.realistic_vocab_size} asked, min_freq 5), "
                         f"trained on the sample's {len(texts):,} training reviews",
            "length_median": ordered[len(ordered) // 2],
            "length_p90": ordered[int(0.9 * (len(ordered) - 1))],
            "runs": [realistic_epoch(settings, all_lengths, max_length, device, precision)
                     for precision in settings.precision for max_length in settings.realistic_max_lengths],
        }

    @classmethod
    def report(cls, record: dict[str, Any]) -> list[str]:
        attention = f" {record['backend']}" if "backend" in record else ""  # later records: per model, in each run
        out = [f"## Realistic batches (one epoch of {record['reviews']} IMDb reviews, hf-attn {record['scheme']}"
               f"{attention}, batch {record['batch']})", "",
               f"Lengths: {record['tokenizer']}; median {record['length_median']}, 90th percentile "
               f"{record['length_p90']} tokens.", ""]
        for run in record["runs"]:
            rows = [[r["strategy"], r["batches"], f"{r['real_tokens']:,}", f"{r['padded_tokens']:,}",
                     f"{r['padding_efficiency']:.0%}", f"{r['epoch_s']:.1f}", ratio(r["speedup_vs_fixed"])]
                    for r in run["rows"]]
            precision = f", {run['precision']}" if "precision" in run else ""  # records before #51: fp32 alone
            out += [f"### Truncated to {run['max_length']} tokens{precision} ({run['truncated_fraction']:.0%} of "
                    "reviews longer)", "",
                    table(["padding", "batches", "real tokens", "padded tokens", "efficiency", "epoch s", "vs fixed"],
                          rows), ""]
            if "epoch_s_by_model" in run["rows"][0]:  # records from before the peers joined the section: hf-attn alone
                models = list(run["rows"][0]["epoch_s_by_model"])
                peer = [[r["strategy"], *(f"{r['epoch_s_by_model'][name]:.1f}{_attention(r, name)}" for name in models),
                         ratio(r["speedup_vs_padded"]),
                         f"{r['speedup_vs_peer']:.2f}x ({r['fastest_peer']})" if "speedup_vs_peer" in r else ""]
                        for r in run["rows"]]
                at_best = ", each at the fastest of its attentions" if "backend_by_model" in run["rows"][0] else ""
                out += ["Epoch seconds of every model on the same batches (hf-attn computes only the real tokens "
                        f"outside attention; the others every padded slot){at_best}:", "",
                        table(["padding", *models, "hf-attn vs padded", "hf-attn vs fastest peer"], peer), ""]
        return out


def _attention(row: dict[str, Any], model: str) -> str:
    """" (eager)": the attention a realistic row timed `model` with (older records: one for all, in the heading)."""
    return f" ({row['backend_by_model'][model]})" if "backend_by_model" in row else ""


REALISTIC_UNPADDED = "hf-attn"
REALISTIC_PADDED = "hf-attn (unpad_inputs=False)"
HF_ATTN_MODELS = (REALISTIC_UNPADDED, REALISTIC_PADDED)


def realistic_models(settings: BenchSettings, max_length: int) -> dict[str, Callable[[], nn.Module]]:
    """What the section trains, by name: hf-attn (which computes only a padded batch's real tokens outside
    attention, `unpad_inputs`), hf-attn computing the padding too, and the scheme's peers among the anchors (as in
    the throughput section), which compute every padded slot."""
    config = hf_attn_config(settings, settings.realistic_scheme, max_length)
    models: dict[str, Callable[[], nn.Module]] = {
        REALISTIC_UNPADDED: lambda: HfAttnForSequenceClassification(config),
        REALISTIC_PADDED: lambda: HfAttnForSequenceClassification(dataclasses.replace(config, unpad_inputs=False)),
    }
    for anchor in settings.anchors:
        if anchor in peer_families(settings.realistic_scheme) and anchor not in OWN_DROPOUT_ANCHORS:
            models[anchor] = functools.partial(ANCHOR_BUILDERS[anchor][1], settings, max_length)
    return models


def realistic_epoch(settings: BenchSettings, all_lengths: Sequence[int], max_length: int,
                    device: torch.device, precision: str = "fp32") -> dict[str, Any]:
    """The three padding strategies over one epoch of reviews truncated to `max_length`, for every model of
    `realistic_models` with each of its attentions, interleaved batch by batch in a rotating order, training in
    `precision`; a model's epoch is that of its fastest attention on the strategy's batches."""
    lengths = [max(1, min(n, max_length)) for n in all_lengths]
    builders = realistic_models(settings, max_length)
    # One model and optimizer per strategy, model and attention, all of a model from the same initial weights, so
    # nothing trains on weights another has moved.
    candidates: dict[tuple[str, str, str], Candidate] = {}
    for strategy in STRATEGIES:
        for name, build in builders.items():
            torch.manual_seed(settings.seed)
            model = build()
            backends = ([settings.realistic_backend] if settings.realistic_backend
                        else supported_backends(model, settings.backends))
            for backend in backends:
                if backend != backends[0]:
                    torch.manual_seed(settings.seed)
                    model = build()
                model.to(device)
                optimizer = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate)
                candidates[strategy, name, backend] = Candidate(name, settings.realistic_scheme, backend, model,
                                                                optimizer)
    generator = torch.Generator().manual_seed(settings.seed)
    plans: dict[str, list[dict[str, torch.Tensor]]] = {}
    stats: dict[str, dict[str, Any]] = {}
    for strategy in STRATEGIES:
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

    for (strategy, _, _), candidate in candidates.items():  # warm-up on each strategy's first batch
        candidate.prepare(True)
        train_step(candidate, plans[strategy][0], precision)
    order = list(candidates)
    totals = dict.fromkeys(order, 0.0)
    for index in range(len(plans["fixed"])):
        shift = index % len(order)
        for key in order[shift:] + order[:shift]:
            candidate = candidates[key]
            candidate.prepare(True)
            totals[key] += timed(lambda: train_step(candidate, plans[key[0]][index], precision), device)
    fastest_backend: dict[tuple[str, str], str] = {}  # (strategy, model) -> its fastest attention on those batches
    for strategy, name, backend in order:
        best = fastest_backend.get((strategy, name))
        if best is None or totals[strategy, name, backend] < totals[strategy, name, best]:
            fastest_backend[strategy, name] = backend
    peers = [name for name in builders if name not in HF_ATTN_MODELS]
    rows = []
    for strategy, stat in stats.items():
        backends = {name: fastest_backend[strategy, name] for name in builders}
        epochs = {name: totals[strategy, name, backend] for name, backend in backends.items()}
        fixed = totals["fixed", REALISTIC_UNPADDED, fastest_backend["fixed", REALISTIC_UNPADDED]]
        stat.update(epoch_s=epochs[REALISTIC_UNPADDED], epoch_s_by_model=epochs, backend_by_model=backends,
                    epoch_s_by_model_and_backend={f"{name} {backend}": seconds for (run_strategy, name, backend),
                                                  seconds in totals.items() if run_strategy == strategy},
                    speedup_vs_fixed=fixed / epochs[REALISTIC_UNPADDED],
                    speedup_vs_padded=epochs[REALISTIC_PADDED] / epochs[REALISTIC_UNPADDED])
        if peers:
            fastest = min(peers, key=epochs.__getitem__)
            stat["fastest_peer"] = fastest
            stat["speedup_vs_peer"] = epochs[fastest] / epochs[REALISTIC_UNPADDED]
        rows.append(stat)
    return {"max_length": max_length, "precision": precision,
            "truncated_fraction": sum(n > max_length for n in all_lengths) / len(all_lengths), "rows": rows}
