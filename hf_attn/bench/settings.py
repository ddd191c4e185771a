"""Every size, repeat count and model choice of a benchmark run, in one frozen dataclass: `BenchSettings`.

Its fields are those every section shares (`SharedSettings`: the device, the seed, the sections chosen, the models'
shape, the anchors, attentions and precisions, the training step's), then each section's own, declared by the
section's class (`sections.base`), in the registry's order. The command line is generated from `BenchSettings` (one
option per field, see `runner.add_arguments`), and the settings are saved with the results, so that a JSON file says
how its numbers were taken.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable
from typing import Any

from ..runtime.precision import COMPUTED_PRECISIONS
from .models import ANCHORS
from .sections import BENCH_SECTIONS, BenchSection, section_names
from .sections.base import option


@dataclasses.dataclass(frozen=True)
class SharedSettings:
    """The settings every section reads; the defaults are the issue's benchmark, tests shrink them."""

    device: str = option("cpu", "torch device: cpu, cuda, cuda:1, ...")
    threads: int | None = option(None, "torch intra-op threads (default: torch's choice)")
    seed: int = option(0, "seed of weights, token ids and batch order")
    sections: tuple[str, ...] = option(section_names(by_default=True),
                                       f"sections to run, of {', '.join(section_names())}")
    # Model shape, shared by hf-attn and the transformers models.
    hidden_size: int = option(384, "model width of every model")
    num_hidden_layers: int = option(4, "Transformer blocks of every model")
    num_attention_heads: int = option(4, "attention heads of every model")
    intermediate_size: int = option(
        1536, "FFN width of every model; ModernBERT's gated (GeGLU) FFN gets 2/3 of it, for the same FLOPs")
    vocab_size: int = option(501, "vocabulary of every model (the Week 3 one; its last id is [PAD])")
    dropout: float = option(
        0.1, "hidden dropout of every model but ModernBERT-defaults (hf-attn's, BERT's and RoFormer's default; "
        "ModernBERT's embedding, MLP and classifier dropout)")
    attention_dropout: float = option(
        0.1, "attention dropout of every model but ModernBERT-defaults (ModernBERT applies it to the attention "
        "weights and output); on CPU, SDPA has no fused kernel with dropout and trains through its unfused "
        "math path, 0 shows the fused one")
    anchors: tuple[str, ...] = option(
        ANCHORS, "transformers models timed beside hf-attn, of the same shape: BERT, RoFormer (no SDPA in "
        "transformers 5, so eager), ModernBERT (all layers global) with --dropout and --attention-dropout like "
        "hf-attn, and ModernBERT-defaults, ModernBERT with its own defaults (no dropout at all), as it is "
        "usually trained: both settings in one interleaved run")
    backends: tuple[str, ...] = option(
        ("eager", "sdpa"), "attention implementations of every model (an anchor without SDPA, RoFormer, runs eager "
        "alone); a model's fastest in a cell is its time there")
    precision: tuple[str, ...] = option(
        COMPUTED_PRECISIONS,
        "precisions of every throughput case, of fp32, bf16 (bf16: forward under bfloat16 autocast, "
        "parameters float32, as Trainer(bf16=True)); speed-ups compare models of one precision")
    # The training step (forward + backward + AdamW) of the throughput, realistic, objectives and profile sections.
    train_batch: int = option(32, "training batch size")
    warmup: int = option(2, "untimed steps of each model before timing")
    learning_rate: float = option(1e-4, "AdamW learning rate")
    # Every profile's table: the profile part's training steps, the generation section's decoding steps.
    profile_rows: int = option(15, "operators listed, by self CPU time")


def declared_fields(owner: type) -> list[tuple[str, Any, dataclasses.Field]]:
    """The dataclass fields of `owner` as `make_dataclass` takes them: name, resolved type, a fresh field."""
    hints = typing.get_type_hints(owner)
    return [(field.name, hints[field.name], dataclasses.field(default=field.default, metadata=field.metadata))
            for field in dataclasses.fields(owner)]


def settings_class(sections: Iterable[type[BenchSection]]) -> type:
    """A frozen dataclass `BenchSettings` of `SharedSettings`' fields, then each of `sections`' own (a name declared
    twice is refused)."""
    fields = [*declared_fields(SharedSettings), *(field for section in sections for field in declared_fields(section))]
    return dataclasses.make_dataclass("BenchSettings", fields, frozen=True, namespace={
        "__module__": __name__, "__doc__": "Every size and repeat count of a run: the settings every section shares, "
        "then each section's own; the defaults are the issue's benchmark, tests shrink them."})


BenchSettings = settings_class(BENCH_SECTIONS.values())
