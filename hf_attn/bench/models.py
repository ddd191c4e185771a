"""The models under test: hf-attn in every scheme and variant, and transformers' anchors of the same shape.

The anchors are the classifiers a transformers user would reach for: `BertForSequenceClassification`
(absolute positions), `RoFormerForSequenceClassification` (RoPE) and `ModernBertForSequenceClassification`
(RoPE, pre-norm, gated FFN, no biases). Each is built with the bench's width, depth, heads, vocabulary
and maximum length; ModernBERT's GeGLU FFN projects to two branches of 2/3 of hf-attn's FFN width, so
its FFN costs the same multiply-adds per token (d x 2 x 2I/3 in, 2I/3 x d out = d x I x 2).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ..configuration_hf_attn import HfAttnConfig
from ..modeling_hf_attn import HfAttnForSequenceClassification

if TYPE_CHECKING:  # the settings gather every section's fields, and the sections import this module
    from .settings import BenchSettings


@dataclass
class Candidate:
    """One (model, attention backend) under test; eager and sdpa variants of a scheme share the model,
    so they run identical weights."""

    family: str  # "hf-attn", an hf-attn variant or an anchor name
    scheme: str  # position scheme
    backend: str  # requested attention implementation
    model: nn.Module
    optimizer: torch.optim.Optimizer | None = field(repr=False)  # None: inference only

    @property
    def name(self) -> str:
        return f"{self.family} {self.scheme} {self.backend}"

    def prepare(self, training: bool) -> None:
        """Select this candidate's backend and train/eval mode (outside the timed region)."""
        self.model.set_attn_implementation(self.backend)
        self.model.train(training)


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


def build_bert_or_roformer(settings: BenchSettings, max_length: int, family: str) -> nn.Module:
    """transformers' BERT or RoFormer classifier with exactly the hf-attn shape, vocabulary and dropout."""
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


def build_modernbert(settings: BenchSettings, max_length: int, own_dropout: bool = False) -> nn.Module:
    """transformers' ModernBERT classifier of the hf-attn shape and FFN cost, every layer global attention.

    Mean pooling, as hf-attn's default (Week 3 vocabularies have no CLS token). With `own_dropout`,
    ModernBertConfig's dropout defaults (0 everywhere) are kept; otherwise `settings.dropout` goes to its
    embedding, MLP and classifier dropout and `settings.attention_dropout` to its attention dropout.
    """
    from transformers import ModernBertConfig, ModernBertForSequenceClassification

    dropout = {} if own_dropout else dict(
        embedding_dropout=settings.dropout,
        mlp_dropout=settings.dropout,
        classifier_dropout=settings.dropout,
        attention_dropout=settings.attention_dropout,
    )
    config = ModernBertConfig(
        vocab_size=settings.vocab_size,
        hidden_size=settings.hidden_size,
        num_hidden_layers=settings.num_hidden_layers,
        num_attention_heads=settings.num_attention_heads,
        intermediate_size=round(2 * settings.intermediate_size / 3),
        hidden_activation="gelu",
        layer_types=["full_attention"] * settings.num_hidden_layers,
        max_position_embeddings=max_length,
        classifier_pooling="mean",
        pad_token_id=settings.vocab_size - 1,
        bos_token_id=None,
        eos_token_id=None,
        cls_token_id=None,
        sep_token_id=None,
        num_labels=2,
        **dropout,
    )
    return ModernBertForSequenceClassification(config)


# Each anchor: (position scheme as the tables name it, builder of the model for a maximum length).
ANCHOR_BUILDERS: dict[str, tuple[str, Callable[[BenchSettings, int], nn.Module]]] = {
    "BERT": ("absolute", partial(build_bert_or_roformer, family="BERT")),
    "RoFormer": ("rope", partial(build_bert_or_roformer, family="RoFormer")),
    "ModernBERT": ("rope", build_modernbert),
    "ModernBERT-defaults": ("rope", partial(build_modernbert, own_dropout=True)),
}
# transformers classifiers timed beside hf-attn, of the same shape.
ANCHORS = tuple(ANCHOR_BUILDERS)
# Anchors built with their library's own dropout rather than the bench's: not like-for-like, so they
# get a ratio column but are nobody's peer (below).
OWN_DROPOUT_ANCHORS = ("ModernBERT-defaults",)
# The transformers models each hf-attn scheme is judged against (its "peers"): RoPE against the rotary
# models, which do the same rotation work; every other scheme against all three.
PEERS = {"rope": ("RoFormer", "ModernBERT")}
DEFAULT_PEERS = ("BERT", "RoFormer", "ModernBERT")


def peer_families(scheme: str) -> tuple[str, ...]:
    """The transformers models an hf-attn scheme is judged against (`PEERS`)."""
    return PEERS.get(scheme, DEFAULT_PEERS)


def encoder_layers(model: nn.Module) -> nn.ModuleList:
    """The stack of Transformer blocks, wherever each family keeps it."""
    base = getattr(model, model.base_model_prefix)
    return base.layers if hasattr(base, "layers") else base.encoder.layer


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def supported_backends(model: nn.Module, backends: Sequence[str]) -> list[str]:
    """Those of `backends` the model runs: SDPA only where it has it (RoFormer does not, in transformers 5)."""
    return [backend for backend in backends if backend != "sdpa" or getattr(model, "_supports_sdpa", False)]


def build_candidates(settings: BenchSettings, max_length: int, device: torch.device) -> list[Candidate]:
    """hf-attn for every scheme x backend (and every variant x backend), then each anchor with every backend it
    supports (`supported_backends`); every model starts from the same seed."""
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
    for anchor in settings.anchors:
        scheme, build = ANCHOR_BUILDERS[anchor]
        torch.manual_seed(settings.seed)
        model = build(settings, max_length)
        add(anchor, scheme, supported_backends(model, settings.backends), model)
    return candidates
