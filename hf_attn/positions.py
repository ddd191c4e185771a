"""The registry of position schemes: one small `PositionScheme` subclass and one line in `POSITION_SCHEMES` each.

A scheme overrides the hooks it needs: `embed` (absolute schemes add a vector per position after the token
embedding), `rotation` (RoPE's cos/sin) or `relative_bias` (an additive bias of the key-query offset). What the
package asks of a scheme is a class attribute, so no module outside this one compares a scheme's name.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import nn
from transformers import initialization as init
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.utils import is_tracing

from .masking import BandBlocks, fold_blocks

if TYPE_CHECKING:
    from .configuration_hf_attn import HfAttnConfig


@dataclass
class AttentionPositions:
    """What a relative scheme passes to every attention layer (both empty for absolute schemes)."""

    # RoPE's cos and signed sin (`rotary_tables`) per layer type (empty: no rotation); RoPE's theta may differ by type
    rotary: dict[str, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    bias: torch.Tensor | None = None  # the scores' additive bias, (1|batch, heads, query, key)


class PositionScheme(nn.Module):
    """Base class: no positions at all (an encoder built on it is permutation-equivariant)."""

    extrapolates: ClassVar[bool] = True  # every length has positions (not a table of max_position_embeddings rows)
    takes_rope_parameters: ClassVar[bool] = False  # the config's `rope_parameters` configure it
    # Config fields of this scheme alone (T5's buckets): other schemes refuse a value but the default.
    own_fields: ClassVar[tuple[str, ...]] = ()
    context_scalings: ClassVar[tuple[str, ...]] = ()  # ways past the training length (RoPE's `rope_type`s)
    # Rotates queries and keys so that q . k depends on the offset alone: it needs a dot-product scoring.
    rotates_queries_and_keys: ClassVar[bool] = False
    paired_width: ClassVar[str | None] = None  # the config width whose channels the scheme pairs: it must be even
    # Adds logits computed from each layer's attention scores (`score_logits`): attention runs eagerly, densely.
    reads_scores: ClassVar[bool] = False
    # The position ids change what it computes (a rule other than `sequential` needs one that reads them); a scheme
    # with no positions, or one that counts them from the scores, ignores them.
    reads_position_ids: ClassVar[bool] = False
    # Its `relative_bias` reads key-minus-query distances of the ids: a cached step needs the cached keys' ids.
    reads_distances: ClassVar[bool] = False

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__()
        self.config = config

    @classmethod
    def check_config(cls, config: HfAttnConfig) -> None:
        """Raise a `ValueError` naming the field that this scheme cannot work with."""
        width = getattr(config, cls.paired_width) if cls.paired_width else 0
        if width % 2:
            raise ValueError(
                f"HfAttnConfig: invalid `hidden_size`={config.hidden_size} with `num_attention_heads`="
                f"{config.num_attention_heads}; position_embedding_type={config.position_embedding_type!r} pairs "
                f"channels, so {cls.paired_width} (= {width}) must be even."
            )

    @classmethod
    def rotated_layers(cls, config: HfAttnConfig) -> list[bool]:
        """Per layer, whether its queries and keys are rotated (every layer of a scheme that rotates them)."""
        return [cls.rotates_queries_and_keys] * config.num_hidden_layers

    def embed(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        return inputs_embeds

    def attention_positions(self, position_ids: torch.Tensor, key_length: int, bias: bool = True,
                            key_position_ids: torch.Tensor | None = None) -> AttentionPositions:
        """RoPE's tables of each layer type and (with `bias`) the scores' bias for the queries of `position_ids`, the
        last of `key_length` slots, the keys at `key_position_ids` (`key_minus_query`)."""
        offsets = key_minus_query(position_ids, key_length, key_position_ids) if bias else None
        rotary = {kind: self.rotation(position_ids, key_length, kind) for kind in sorted(set(self.config.layer_types))}
        return AttentionPositions(
            rotary={kind: tables for kind, tables in rotary.items() if tables is not None},
            bias=self.relative_bias(offsets, position_ids) if offsets is not None else None,
        )

    def band_bias(self, position_ids: torch.Tensor, band: BandBlocks) -> torch.Tensor | None:
        """The scores' bias inside a band's blocks alone, (batch x blocks, heads, block, span): linear in the length."""
        offsets = (band.key_slots[:, None, :] - band.query_slots[:, :, None])[None]  # (1, blocks, block, span)
        bias = self.relative_bias(offsets, position_ids[:, band.query_slots])  # (1|batch, heads, blocks, ...)
        return fold_blocks(bias, band.batch) if bias is not None else None

    def rotation(
        self, position_ids: torch.Tensor, key_length: int, layer_type: str
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """RoPE's cos and signed sin for `position_ids` in `layer_type` layers (None: no rotation)."""
        return None

    def relative_bias(self, offsets: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor | None:
        """The bias (1|batch, heads, ..., query, key) of key-minus-query `offsets` (1|batch, ..., query, key) for
        queries at `query_positions` (1|batch, ..., query), or None."""
        return None

    def score_logits(self, query: torch.Tensor, scores: torch.Tensor, visible: torch.Tensor | None,
                     layer_idx: int) -> torch.Tensor:
        """With `reads_scores`: the logits (batch, heads, query, key) added to a layer's `scores` of the scaled
        `query` (batch, heads, query, head_dim), `visible` the attention mask (None: every key)."""
        raise NotImplementedError(f"{type(self).__name__} reads no attention scores")

    def reset_buffers(self) -> None:
        """Recompute the scheme's fp32 buffers (non-persistent: not in checkpoints); an override ends by calling
        `super().reset_buffers()`, so that a scheme of two parents recomputes both's."""

    def init_parameters(self) -> None:
        """Initialise the parameters that transformers' default init does not (called by `_init_weights`)."""

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> PositionScheme:
        """Buffers stay fp32 whatever the model is cast to (a cast buffer is recomputed on its new device): a model
        cast to bf16 and back would otherwise keep them rounded."""
        super()._apply(fn, recurse)
        if any(buffer.is_floating_point() and buffer.dtype != torch.float32 for buffer in self.buffers(recurse=False)):
            self.reset_buffers()
        return self


class NoPositions(PositionScheme):
    """`none`: a bag of tokens; useful as the control in position-scheme comparisons."""


def sinusoidal_embedding(position_ids: torch.Tensor, dim: int) -> torch.Tensor:
    """Vaswani et al.'s vector of each position id, fp32: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same),
    computed from the ids: any length, no table to grow."""
    exponents = torch.arange(0, dim, 2, dtype=torch.float32, device=position_ids.device)
    angles = position_ids[..., None].float() * torch.exp(exponents * (-math.log(10_000.0) / dim))
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)


class SinusoidalPositions(PositionScheme):
    """`sinusoidal`: the fixed encoding added once after the embedding; extrapolates to any length."""

    paired_width = "hidden_size"
    reads_position_ids = True

    def embed(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        return inputs_embeds + sinusoidal_embedding(position_ids, self.config.hidden_size).to(inputs_embeds.dtype)


class LearnedPositions(PositionScheme):
    """`learned`: a trained table of `max_position_embeddings` rows (BERT); cannot extrapolate."""

    extrapolates = False
    reads_position_ids = True

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)

    def embed(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        longest = 0 if is_tracing(position_ids) or not position_ids.numel() else int(position_ids.max()) + 1
        trained = self.embeddings.num_embeddings
        if longest > trained:
            raise ValueError(
                f"position_embedding_type='learned' has {trained} trained positions (max_position_embeddings) but the "
                f"input (with generate(): prompt + new tokens) needs {longest}; truncate inputs to {trained} tokens "
                "(tokenizer truncation=True) or use a scheme that extrapolates "
                f"({', '.join(name for name, scheme in POSITION_SCHEMES.items() if scheme.extrapolates)})."
            )
        return inputs_embeds + self.embeddings(position_ids)


ROPE_CONTEXT_SCALINGS = ("linear", "dynamic", "yarn")  # ways past the training length
# `proportional` is p-RoPE (Barbero et al., ICLR 2025; Gemma 4's spelling): see `RotaryPositions`.
ROPE_TYPES = ("default", *ROPE_CONTEXT_SCALINGS, "proportional")


def rotary_tables(angles: torch.Tensor, layout: str = "halves") -> tuple[torch.Tensor, torch.Tensor]:
    """(batch|1, seq, head_dim / 2) angles -> `apply_rotary`'s (cos, signed sin) tables, (batch|1, seq, head_dim):
    -sin for the first channel of each pair, +sin for the second, pairs as `layout` says (see `rope_layout`)."""
    cos, sin = angles.cos(), angles.sin()
    if layout == "interleaved":
        return cos.repeat_interleave(2, dim=-1), torch.stack((-sin, sin), dim=-1).flatten(-2)
    return torch.cat((cos, cos), dim=-1), torch.cat((-sin, sin), dim=-1)


def apply_rotary(
    states: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor], layout: str = "halves", heads_dim: int = 1
) -> torch.Tensor:
    """Rotate every channel pair (x, y) by its position's angle: (x cos - y sin, y cos + x sin). `rotary` is
    `rotary_tables`' for the same `layout`; `heads_dim` is the heads axis of `states`."""
    cos, sin = (table.unsqueeze(heads_dim).to(states.dtype) for table in rotary)
    if layout == "interleaved":
        swapped = states.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)
    else:
        swapped = states.roll(states.shape[-1] // 2, dims=-1)
    return torch.addcmul(states * cos, swapped, sin)


def default_rope_inv_freq(config: HfAttnConfig, layer_type: str) -> tuple[torch.Tensor, float]:
    """Unscaled RoPE frequencies theta^(-2i/d) (transformers keeps this one per model, not in its registry)."""
    dim = config.head_dim
    theta = config.layer_rope_parameters(layer_type)["rope_theta"]
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)), 1.0


class RotaryPositions(PositionScheme):
    """`rope`: rotates Q and K in every layer, so q . k depends on the offset only. `rope_parameters` may be one dict
    or one per layer type (ModernBERT's spelling: e.g. theta 160,000 on `full_attention` layers, 10,000 on
    `sliding_attention` ones). Its `rope_type` is transformers' init function's: context-length scaling (`linear`,
    `dynamic`, `yarn`) or `proportional`, p-RoPE (Barbero et al., ICLR 2025, "Round and Round We Go"): of the d/2
    frequencies theta^(-2i/d), the p = `partial_rotary_factor` x d/2 highest (smallest i) rotate their channel pair
    and the lowest ones, which the paper finds carry semantic rather than positional content, are removed (angle 0:
    those channels are not rotated); p = 1 is RoPE, p = 0 no positions."""

    takes_rope_parameters = True
    rotates_queries_and_keys = True
    reads_position_ids = True
    context_scalings = ROPE_CONTEXT_SCALINGS
    paired_width = "head_dim"

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.layer_types = sorted(set(config.layer_types))
        self.rope_types = {
            kind: config.layer_rope_parameters(kind).get("rope_type", "default") for kind in self.layer_types
        }
        inv_freq, self.attention_scaling = self._all_frequencies()
        self.register_buffer("inv_freq", inv_freq, persistent=False)  # (layer types, head_dim / 2)

    def _frequencies(self, layer_type: str, length: int) -> tuple[torch.Tensor, float]:
        rope_type = self.rope_types[layer_type]
        if rope_type == "default":
            return default_rope_inv_freq(self.config, layer_type)
        # transformers' init functions read `rope_parameters[layer_type]` where it is keyed by layer type.
        keyed = layer_type if layer_type in self.config.rope_parameters else None
        if rope_type == "dynamic":
            return ROPE_INIT_FUNCTIONS["dynamic"](self.config, None, seq_len=length, layer_type=keyed)
        return ROPE_INIT_FUNCTIONS[rope_type](self.config, None, layer_type=keyed)

    def _all_frequencies(self) -> tuple[torch.Tensor, dict[str, float]]:
        """Each layer type's frequencies at the training length, stacked, and their attention scalings."""
        computed = {kind: self._frequencies(kind, self.config.max_position_embeddings) for kind in self.layer_types}
        inv_freq = torch.stack([computed[kind][0].float() for kind in self.layer_types])
        return inv_freq, {kind: scaling for kind, (_, scaling) in computed.items()}

    def reset_buffers(self) -> None:
        device = None if self.inv_freq.is_meta else self.inv_freq.device  # a meta buffer: not materialised yet
        inv_freq, self.attention_scaling = self._all_frequencies()
        self.inv_freq = inv_freq.to(device)
        super().reset_buffers()

    def rotation(
        self, position_ids: torch.Tensor, key_length: int, layer_type: str
    ) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq = self.inv_freq[self.layer_types.index(layer_type)]
        attention_scaling = self.attention_scaling[layer_type]
        if self.rope_types[layer_type] == "dynamic" and key_length > self.config.max_position_embeddings:
            # NTK-aware frequencies depend on the actual length beyond training; within it they are fixed.
            inv_freq, attention_scaling = self._frequencies(layer_type, key_length)
        angles = position_ids[..., None].float() * inv_freq.to(position_ids.device)  # (B|1, T, D/2)
        cos, sin = rotary_tables(angles, self.config.rope_layout)
        if attention_scaling != 1.0:
            cos, sin = cos * attention_scaling, sin * attention_scaling
        return cos, sin


class RopeWithNopeLayers(RotaryPositions):
    """`rope_nope`: RoPE in some layers and no positions (NoPE) in the others, as SmolLM3 and Llama 4 interleave
    them: `no_rope_layers` lists 1 (RoPE) or 0 (none) per layer; unset, every `no_rope_layer_interval`-th layer
    (SmolLM3's 4) goes without RoPE. A NoPE layer knows positions only from the layers before it and, in a decoder,
    the causal mask."""

    own_fields = ("no_rope_layers", "no_rope_layer_interval")

    @classmethod
    def rotated_layers(cls, config: HfAttnConfig) -> list[bool]:
        if config.no_rope_layers is not None:
            return [bool(flag) for flag in config.no_rope_layers]
        return [(layer + 1) % config.no_rope_layer_interval != 0 for layer in range(config.num_hidden_layers)]


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """Press et al.'s head slopes 2^(-8/n), 2^(-16/n), ...; for n not a power of 2, those of the power of 2 below,
    then every other slope of twice that count."""

    def power_of_2_slopes(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    closest = 2 ** math.floor(math.log2(num_heads))
    slopes = power_of_2_slopes(closest)
    if closest != num_heads:
        slopes += power_of_2_slopes(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def key_minus_query(position_ids: torch.Tensor, key_length: int,
                    key_position_ids: torch.Tensor | None = None) -> torch.Tensor:
    """Key id - query id, (1|batch, Q, K), the queries (at `position_ids`) being the last of `key_length` keys at
    `key_position_ids` (1|batch, K), so that a bias reads the distances of the ids a rule gives (coupled places,
    randomized ids); without them (sequential ids after a cache) the slots' distances, which left padding leaves as
    the ids' are."""
    if key_position_ids is not None:
        return key_position_ids[:, None, :] - position_ids[:, :, None]
    slots = torch.arange(key_length, device=position_ids.device)
    return (slots[None, :] - slots[key_length - position_ids.shape[-1] :, None])[None]


class AlibiPositions(PositionScheme):
    """`alibi`: a per-head linear penalty on query-key distance, -slope * |i - j|; no extra parameters."""

    reads_position_ids = reads_distances = True

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.register_buffer("slopes", alibi_slopes(config.num_attention_heads), persistent=False)

    def reset_buffers(self) -> None:
        self.slopes = alibi_slopes(self.config.num_attention_heads).to(self.slopes.device)
        super().reset_buffers()

    def relative_bias(self, offsets: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor:
        slopes = self.slopes.to(offsets.device).view(1, -1, *[1] * (offsets.dim() - 1))
        return -slopes * offsets[:, None].abs().float()


class RotaryWithAlibi(RotaryPositions, AlibiPositions):
    """`rope_alibi`: RoPE's rotations and ALiBi's penalty -slope * |i - j| on the same scores, i and j the query's
    and the key's position ids. RoPE scores a key at an id distance that training never showed by a rotation the
    model never learned, so past the training length a far key can outscore the near ones; the penalty keeps far
    keys below near ones whatever their rotation (Press et al.'s argument for ALiBi, applied on top of RoPE)."""


def t5_buckets(
    relative_position: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int
) -> torch.Tensor:
    """T5's bucket of each key - query offset: exact for small distances, then logarithmically wider up to
    `max_distance`. Bidirectional, half the buckets serve keys after the query; causal, a later key gets bucket 0."""
    if bidirectional:
        num_buckets //= 2
        side = (relative_position > 0).long() * num_buckets
        distance = relative_position.abs()
    else:
        side = torch.zeros_like(relative_position)
        distance = (-relative_position).clamp(min=0)
    exact = num_buckets // 2
    # clamp: log(0) is never used (those distances are exact) but would make the cast to long undefined.
    log_ratio = torch.log(distance.clamp(min=1).float() / exact) / math.log(max_distance / exact)
    logarithmic = (exact + (log_ratio * (num_buckets - exact)).long()).clamp(max=num_buckets - 1)
    return side + torch.where(distance < exact, distance, logarithmic)


class T5Positions(PositionScheme):
    """`t5`: a learned bias per head and bucket of the key-query offset (T5's, one table per model). A decoder's
    keys are at or before the query, so its buckets are causal (one side) under sequential ids; a rule that
    renumbers (coupled, Abacus) puts a key of the next place at a larger id than the query's, so then the buckets
    are bidirectional, as an encoder's: causal buckets would give that key the bucket of the query's own place."""

    own_fields = ("relative_attention_num_buckets", "relative_attention_max_distance")
    reads_position_ids = reads_distances = True

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.relative_attention_bias = nn.Embedding(config.relative_attention_num_buckets, config.num_attention_heads)

    @staticmethod
    def bidirectional(config: HfAttnConfig) -> bool:
        """Whether a key may have a larger id than its query: in an encoder, or in a decoder whose rule renumbers."""
        return not config.is_decoder or config.position_id_rule_class.renumbers

    @classmethod
    def check_config(cls, config: HfAttnConfig) -> None:
        bidirectional = cls.bidirectional(config)
        per_side = config.relative_attention_num_buckets // (2 if bidirectional else 1)
        if per_side < 2:
            raise ValueError(
                f"HfAttnConfig: invalid `relative_attention_num_buckets`={config.relative_attention_num_buckets}; "
                f"position_embedding_type='t5' needs at least {4 if bidirectional else 2} (an exact bucket and "
                f"a logarithmic one{' on each side of the query' if bidirectional else ''}); T5 uses 32."
            )
        if config.relative_attention_max_distance <= per_side // 2:
            raise ValueError(
                f"HfAttnConfig: invalid `relative_attention_max_distance`={config.relative_attention_max_distance}; "
                f"must exceed the {per_side // 2} distances with a bucket each (relative_attention_num_buckets="
                f"{config.relative_attention_num_buckets}); T5 uses 128."
            )

    def relative_bias(self, offsets: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor:
        buckets = t5_buckets(
            offsets,
            bidirectional=self.bidirectional(self.config),
            num_buckets=self.config.relative_attention_num_buckets,
            max_distance=self.config.relative_attention_max_distance,
        )
        return self.relative_attention_bias.weight.T[:, buckets].transpose(0, 1)  # (1|batch, heads, ..., Q, K)


class FirePositions(PositionScheme):
    """`fire` (Li et al., ICLR 2024): the bias of query i and key j is a small MLP (1 -> 32 -> heads) of
    psi(|i - j|) / psi(max(L, i)), psi(x) = log(|c x| + 1), c and L learned: every offset maps into [0, 1], so a
    longer input interpolates between offsets the MLP saw. i and j are the query's and the key's position ids.

    L starts at `fire_initial_threshold` (the paper's listing: 512, this package's default, so models saved before the
    field are unchanged; `None`: max_position_embeddings, the training length). Below L the normaliser is the fixed
    psi(L): while every query sits before L, as in a study whose inputs are all shorter than L, FIRE never
    interpolates and its bias is a learned function of log(1 + c|i - j|) alone."""

    own_fields = ("fire_initial_threshold",)
    reads_position_ids = reads_distances = True
    mlp_width = 32
    initial_c = 0.1
    eps = 1e-6  # keeps the normaliser above 0 if c is learned down to 0

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.mlp = nn.Sequential(
            nn.Linear(1, self.mlp_width), nn.ReLU(), nn.Linear(self.mlp_width, config.num_attention_heads)
        )
        self.c = nn.Parameter(torch.tensor(self.initial_c))
        self.threshold_scale = nn.Parameter(torch.tensor(1.0))
        self.initial_threshold = float(config.fire_initial_threshold or config.max_position_embeddings)

    def init_parameters(self) -> None:
        init.constant_(self.c, self.initial_c)
        init.constant_(self.threshold_scale, 1.0)

    def relative_bias(self, offsets: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor:
        c = self.c.float()
        threshold = (self.threshold_scale.float() * self.initial_threshold).abs()
        # |c x|: c is learned and could turn negative.
        distance = torch.log((c * offsets.float()).abs() + 1)  # (..., Q, K)
        query = torch.maximum(query_positions.float(), threshold)  # (B|1, ..., Q)
        normaliser = torch.log((c * query).abs() + 1) + self.eps
        inputs = (distance / normaliser[..., None])[..., None]  # (B|1, ..., Q, K, 1)
        bias = self.mlp(inputs.to(self.mlp[0].weight.dtype))  # (B|1, ..., Q, K, heads)
        return bias.movedim(bias.dim() - 1, 1)  # a positive dimension: TorchScript's ONNX export takes no -1 here


class ContextualPositions(PositionScheme):
    """`cope` (Golovneva et al., 2024, "Contextual Position Encoding"): key j's position from query i counts the gates
    g_ik = sigmoid(q_i . k_k) (the layer's scaled scores) of k = j..i, p_ij = sum_k g_ik, so that a head can count
    words or sentences rather than tokens. The logit q_i . e[p_ij] is added to the score, e[p] interpolated between
    the learned vectors e[floor p] and e[ceil p] of the layer (shared by its heads; p at most `cope_max_positions` -
    1), from q . e at every whole position as the paper computes it. The vectors start as transformers' normal init
    (the paper's code: zero, so no position at first). The paper counts causally; in an encoder a later key counts
    k = i..j, this package's mirror of it. It needs the scores, so attention runs eagerly; position ids are not
    read."""

    own_fields = ("cope_max_positions",)
    reads_scores = True

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.max_positions = config.cope_max_positions or config.max_position_embeddings + 1
        self.embeddings = nn.Parameter(torch.empty(config.num_hidden_layers, config.head_dim, self.max_positions))

    def init_parameters(self) -> None:
        init.normal_(self.embeddings, std=self.config.initializer_range)

    def score_logits(self, query: torch.Tensor, scores: torch.Tensor, visible: torch.Tensor | None,
                     layer_idx: int) -> torch.Tensor:
        gates = torch.sigmoid(scores.float())
        if visible is not None:
            gates = gates.masked_fill(~visible, 0.0)
        counted = gates.cumsum(dim=-1)  # (B, H, Q, K): the gates of keys 0..j
        if self.config.is_decoder:  # every visible key is at or before the query, whose count ends the row
            positions = counted[..., -1:] - counted + gates
        else:  # no cache: the queries are the keys, the diagonal the query's own count and gate
            own_count, own_gate = (part.diagonal(dim1=-2, dim2=-1)[..., None] for part in (counted, gates))
            later = torch.ones(gates.shape[-2:], dtype=torch.bool, device=gates.device).triu(1)
            positions = (own_count - counted).abs() + torch.where(later, own_gate, gates)
        positions = positions.clamp(max=self.max_positions - 1)
        floor = positions.floor()
        logits = torch.matmul(query, self.embeddings[layer_idx].to(query.dtype))  # (B, H, Q, max_positions)
        at_floor, at_ceil = (logits.gather(-1, index.long()) for index in (floor, positions.ceil()))
        return at_floor + (positions - floor).to(logits.dtype) * (at_ceil - at_floor)


POSITION_SCHEMES: dict[str, type[PositionScheme]] = {
    "none": NoPositions,
    "sinusoidal": SinusoidalPositions,
    "learned": LearnedPositions,
    "rope": RotaryPositions,
    "alibi": AlibiPositions,
    "t5": T5Positions,
    "fire": FirePositions,
    "rope_nope": RopeWithNopeLayers,
    "rope_alibi": RotaryWithAlibi,
    "cope": ContextualPositions,
}


def build_position_scheme(config: HfAttnConfig) -> PositionScheme:
    return POSITION_SCHEMES[config.position_embedding_type](config)
