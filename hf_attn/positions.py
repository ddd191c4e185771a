"""The registry of position schemes.

A scheme can act at two places, and each class overrides only the hook it needs:

* `embed(inputs_embeds, position_ids)`: absolute schemes add a vector per position once, after the
  token embedding (`sinusoidal`, `learned`).
* in attention, relative schemes: `rotation(position_ids, key_length)`, RoPE's cos/sin to rotate queries and
  keys, or `relative_bias(offsets, query_positions)`, an additive bias of the key-query offset (ALiBi's fixed
  slopes, T5's learned buckets, FIRE's learned function). The model asks `attention_positions` once per forward
  pass and passes the result to all layers; sliding layers that compute only their band ask `band_bias`, the
  bias of the scores inside the band alone, so that its cost too grows linearly with the length.

Adding a scheme is one small subclass of `PositionScheme` plus one line in `POSITION_SCHEMES`. What the rest of
the package asks of a scheme (whether every length has positions, whether `rope_parameters` configure it,
which context scalings it has) are class attributes, so no module outside this one compares a scheme's name.
RoPE rotates pairs of channels of each query and key head; which channels pair up is the config's
`rope_layout` (`halves`, Llama's, or `interleaved`, RoFormer's: the same function of suitably
permuted Q/K weights, so both load exactly).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
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

    rotary: tuple[torch.Tensor, torch.Tensor] | None = None  # RoPE's cos and signed sin (see `rotary_tables`)
    bias: torch.Tensor | None = None  # additive scores bias, (1 or batch, heads, query, key)


class PositionScheme(nn.Module):
    """Base class: no positions at all (an encoder built on it is permutation-equivariant)."""

    extrapolates: ClassVar[bool] = True
    """Whether every input length has positions; `False` for a table of `max_position_embeddings` rows, so a
    longer input is read as windows or refused."""
    takes_rope_parameters: ClassVar[bool] = False
    """Whether the config's `rope_parameters` (transformers' RoPE dict) configure the scheme."""
    own_fields: ClassVar[tuple[str, ...]] = ()
    """The config fields that configure this scheme and no other (T5's buckets): a scheme that does not list one
    refuses a value other than its default, which would change nothing. (`rope_parameters`, which every config
    carries, follows `takes_rope_parameters`.)"""
    context_scalings: ClassVar[tuple[str, ...]] = ()
    """Ways to stretch the scheme past its training length (RoPE's `rope_type`s), each a reading the arena offers."""
    rotates_queries_and_keys: ClassVar[bool] = False
    """Whether the scheme rotates queries and keys so that their dot product depends on the offset alone (RoPE):
    it then needs a scoring that takes that dot product (`attention_scoring` `dot` or `general`)."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__()
        self.config = config

    @classmethod
    def check_config(cls, config: HfAttnConfig) -> None:
        """Raise a `ValueError` naming the field when `config` cannot work with this scheme."""

    def embed(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        return inputs_embeds

    def attention_positions(self, position_ids: torch.Tensor, key_length: int, bias: bool = True
                            ) -> AttentionPositions:
        """What every attention layer needs for the queries of `position_ids`, the last of `key_length` slots:
        RoPE's tables and the scores' bias over every query and key, (1|batch, heads, query, key) (not built
        without `bias`: sliding layers by blocks take `band_bias`)."""
        offsets = key_minus_query(position_ids, key_length) if bias else None
        return AttentionPositions(
            rotary=self.rotation(position_ids, key_length),
            bias=self.relative_bias(offsets, position_ids) if offsets is not None else None,
        )

    def band_bias(self, position_ids: torch.Tensor, band: BandBlocks) -> torch.Tensor | None:
        """The scores' bias inside a band's blocks alone, (batch x blocks, heads, block, span), as `band`'s
        attention takes it: linear in the length, where `attention_positions`' bias is quadratic."""
        offsets = band.key_slots[:, None, :] - band.query_slots[:, :, None]  # (blocks, block, span)
        bias = self.relative_bias(offsets, position_ids[:, band.query_slots])  # (1|batch, heads, blocks, ...)
        return fold_blocks(bias, band.batch) if bias is not None else None

    def rotation(self, position_ids: torch.Tensor, key_length: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        """RoPE's cos and signed sin for the queries and keys of `position_ids` (None: no rotation)."""
        return None

    def relative_bias(self, offsets: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor | None:
        """The scores' bias of key-minus-query slot `offsets` (..., query, key), for queries at `query_positions`
        (1|batch, ..., query): (1|batch, heads, ..., query, key), or None when the scheme adds none."""
        return None

    def reset_buffers(self) -> None:
        """Recompute the scheme's fp32 buffers (called by `_init_weights`: non-persistent buffers are not loaded)."""

    def init_parameters(self) -> None:
        """Initialise the scheme's own parameters that are not `nn.Linear` / `nn.Embedding` weights (called by
        `_init_weights`; transformers' `initialization` helpers leave a loaded parameter as it is)."""

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> PositionScheme:
        """Buffers (RoPE's frequencies, ALiBi's slopes) stay fp32 whatever dtype the model is cast to: each
        use casts what it computes from them (as transformers' RoPE computes cos/sin in fp32), and a model
        cast to bf16 and back would otherwise keep them rounded to 8 bits of mantissa. A cast buffer is
        recomputed, on its new device."""
        super()._apply(fn, recurse)
        if any(buffer.is_floating_point() and buffer.dtype != torch.float32 for buffer in self.buffers(recurse=False)):
            self.reset_buffers()
        return self


class NoPositions(PositionScheme):
    """`none`: a bag of tokens; useful as the control in position-scheme comparisons."""


def sinusoidal_embedding(position_ids: torch.Tensor, dim: int) -> torch.Tensor:
    """Vaswani et al.'s vector of each position id, fp32: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same).

    Computed from the ids on every call (d/2 angles per token, little next to one layer), so every
    length works without a table to grow and no id is read back to the host (`torch.compile`, export).
    """
    exponents = torch.arange(0, dim, 2, dtype=torch.float32, device=position_ids.device)
    angles = position_ids[..., None].float() * torch.exp(exponents * (-math.log(10_000.0) / dim))
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)


class SinusoidalPositions(PositionScheme):
    """`sinusoidal`: the fixed encoding added once after the embedding; extrapolates to any length."""

    @classmethod
    def check_config(cls, config: HfAttnConfig) -> None:
        if config.hidden_size % 2:
            raise ValueError(
                f"HfAttnConfig: invalid `hidden_size`={config.hidden_size}; position_embedding_type='sinusoidal' "
                "pairs sin/cos channels, so hidden_size must be even."
            )

    def embed(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        return inputs_embeds + sinusoidal_embedding(position_ids, self.config.hidden_size).to(inputs_embeds.dtype)


class LearnedPositions(PositionScheme):
    """`learned`: a trained table of `max_position_embeddings` rows (BERT); cannot extrapolate."""

    extrapolates = False

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)

    def embed(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        # Reading the largest id back is a host sync: skipped while a graph is captured (compile, export).
        longest = 0 if is_tracing(position_ids) or not position_ids.numel() else int(position_ids.max()) + 1
        if longest > self.embeddings.num_embeddings:
            raise ValueError(
                f"position_embedding_type='learned' has {self.embeddings.num_embeddings} trained positions "
                f"(max_position_embeddings) but the input (with generate(): prompt + new tokens) needs {longest}; "
                f"truncate inputs to "
                f"{self.embeddings.num_embeddings} tokens (tokenizer truncation=True) or use a scheme that "
                f"extrapolates ({', '.join(name for name, scheme in POSITION_SCHEMES.items() if scheme.extrapolates)})."
            )
        return inputs_embeds + self.embeddings(position_ids)


# RoPE variants whose init functions transformers ships and this package supports end to end.
ROPE_TYPES = ("default", "linear", "dynamic", "yarn")


def rotary_tables(angles: torch.Tensor, layout: str = "halves") -> tuple[torch.Tensor, torch.Tensor]:
    """(batch|1, seq, head_dim / 2) angles -> the (cos, signed sin) tables of `apply_rotary`, each (batch|1, seq,
    head_dim), laid out like the channels they multiply.

    `layout` says which channels pair up: `halves` pairs i with i + d/2 (Llama's `rotate_half`), `interleaved`
    pairs 2i with 2i + 1 (RoFormer's). The sin table carries the rotation's sign: -sin for the first channel of
    each pair, +sin for the second.
    """
    cos, sin = angles.cos(), angles.sin()
    if layout == "interleaved":
        return cos.repeat_interleave(2, dim=-1), torch.stack((-sin, sin), dim=-1).flatten(-2)
    return torch.cat((cos, cos), dim=-1), torch.cat((-sin, sin), dim=-1)


def apply_rotary(
    states: torch.Tensor, rotary: tuple[torch.Tensor, torch.Tensor], layout: str = "halves", heads_dim: int = 1
) -> torch.Tensor:
    """Rotate every channel pair (x, y) of queries or keys by its position's angle: (x cos - y sin, y cos + x sin).

    `rotary` is `rotary_tables`' (cos, signed sin) for the same `layout`; `heads_dim` is where the heads axis
    sits in `states` (1 for (batch, heads, seq, head_dim), 2 for (batch, seq, heads, head_dim)). With the
    tables built once per forward pass, a layer's rotation is three operations: swap the channels of each
    pair, then one multiply and one fused multiply-add.
    """
    cos, sin = (table.unsqueeze(heads_dim).to(states.dtype) for table in rotary)
    if layout == "interleaved":
        swapped = states.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)
    else:
        swapped = states.roll(states.shape[-1] // 2, dims=-1)
    return torch.addcmul(states * cos, swapped, sin)


def default_rope_inv_freq(config: HfAttnConfig) -> tuple[torch.Tensor, float]:
    """Unscaled RoPE frequencies theta^(-2i/d); transformers keeps this one per model, not in its registry."""
    dim = config.head_dim
    theta = config.rope_parameters["rope_theta"]
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)), 1.0


class RotaryPositions(PositionScheme):
    """`rope`: rotates Q and K inside every layer (V untouched), so q.k depends on the offset only.

    Context-length scaling (`linear`, `dynamic` NTK, `yarn`) reuses transformers' init functions. The
    frequencies are a fp32 buffer; cos/sin are computed from the position ids on every forward pass (as
    in transformers' Llama), so any length works and nothing is read back to the host. Only `dynamic`
    recomputes the frequencies, for an input longer than the training length, since they depend on it.
    """

    takes_rope_parameters = True
    rotates_queries_and_keys = True
    context_scalings = tuple(rope_type for rope_type in ROPE_TYPES if rope_type != "default")

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.rope_type = config.rope_parameters.get("rope_type", "default")
        inv_freq, self.attention_scaling = self._frequencies(config.max_position_embeddings)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @classmethod
    def check_config(cls, config: HfAttnConfig) -> None:
        if config.head_dim % 2:
            raise ValueError(
                f"HfAttnConfig: invalid `hidden_size`={config.hidden_size} with `num_attention_heads`="
                f"{config.num_attention_heads}; position_embedding_type='rope' rotates pairs of channels, so "
                f"head_dim (= {config.head_dim}) must be even."
            )

    def _frequencies(self, length: int) -> tuple[torch.Tensor, float]:
        if self.rope_type == "default":
            return default_rope_inv_freq(self.config)
        if self.rope_type == "dynamic":
            return ROPE_INIT_FUNCTIONS["dynamic"](self.config, None, seq_len=length)
        return ROPE_INIT_FUNCTIONS[self.rope_type](self.config, None)

    def reset_buffers(self) -> None:
        device = None if self.inv_freq.is_meta else self.inv_freq.device  # a meta buffer: not materialised yet
        inv_freq, self.attention_scaling = self._frequencies(self.config.max_position_embeddings)
        self.inv_freq = inv_freq.float().to(device)

    def rotation(self, position_ids: torch.Tensor, key_length: int) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq, attention_scaling = self.inv_freq, self.attention_scaling
        if self.rope_type == "dynamic" and key_length > self.config.max_position_embeddings:
            # NTK-aware frequencies depend on the actual length beyond training; within it they are fixed.
            inv_freq, attention_scaling = self._frequencies(key_length)
        angles = position_ids[..., None].float() * inv_freq.to(position_ids.device)  # (B|1, T, D/2)
        cos, sin = rotary_tables(angles, self.config.rope_layout)
        if attention_scaling != 1.0:
            cos, sin = cos * attention_scaling, sin * attention_scaling
        return cos, sin


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """Press et al.'s head slopes: 2^(-8/n), 2^(-16/n), ...; for a non-power-of-2 head count, the
    slopes of the next lower power of 2 followed by every other slope of twice that count."""

    def power_of_2_slopes(n: int) -> list[float]:
        start = 2.0 ** (-8.0 / n)
        return [start ** (i + 1) for i in range(n)]

    closest = 2 ** math.floor(math.log2(num_heads))
    slopes = power_of_2_slopes(closest)
    if closest != num_heads:
        slopes += power_of_2_slopes(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float32)


def key_minus_query(position_ids: torch.Tensor, key_length: int) -> torch.Tensor:
    """Key slot - query slot, (Q, K), for the queries of `position_ids` (the last Q of `key_length` slots).

    Relative schemes measure distances between slots: the queries are the last of the keys (the earlier ones
    come from a cache), so left padding, whose position ids restart at each row's first token, changes nothing.
    """
    slots = torch.arange(key_length, device=position_ids.device)
    return slots[None, :] - slots[key_length - position_ids.shape[-1] :, None]


class AlibiPositions(PositionScheme):
    """`alibi`: a per-head linear penalty on query-key distance, -slope * |i - j|; no extra parameters."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.register_buffer("slopes", alibi_slopes(config.num_attention_heads), persistent=False)

    def reset_buffers(self) -> None:
        self.slopes = alibi_slopes(self.config.num_attention_heads).to(self.slopes.device)

    def relative_bias(self, offsets: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor:
        slopes = self.slopes.to(offsets.device).view(1, -1, *[1] * offsets.dim())
        return -slopes * offsets.abs().float()


def t5_buckets(
    relative_position: torch.Tensor, bidirectional: bool, num_buckets: int, max_distance: int
) -> torch.Tensor:
    """T5's bucket of each key - query offset (Raffel et al., 2020): one bucket per distance below half the buckets,
    then buckets logarithmically wider up to `max_distance`, past which every distance shares the last one.
    Bidirectional (an encoder), half the buckets serve keys after the query; causal (a decoder), all serve keys at
    or before it, and a later key (masked anyway) shares bucket 0."""
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
    """`t5`: a learned bias per head and bucket of the key-query offset, added to the scores (T5's relative
    attention bias, one table per model as in T5's first layer). Offsets past `relative_attention_max_distance`
    share a bucket, so any length works; buckets are bidirectional in an encoder and causal in a decoder."""

    own_fields = ("relative_attention_num_buckets", "relative_attention_max_distance")

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.relative_attention_bias = nn.Embedding(config.relative_attention_num_buckets, config.num_attention_heads)

    @classmethod
    def check_config(cls, config: HfAttnConfig) -> None:
        per_side = config.relative_attention_num_buckets // (1 if config.is_decoder else 2)
        if per_side < 2:
            raise ValueError(
                f"HfAttnConfig: invalid `relative_attention_num_buckets`={config.relative_attention_num_buckets}; "
                f"position_embedding_type='t5' needs at least {2 if config.is_decoder else 4} (an exact bucket and "
                f"a logarithmic one{'' if config.is_decoder else ' on each side of the query'}); T5 uses 32."
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
            bidirectional=not self.config.is_decoder,
            num_buckets=self.config.relative_attention_num_buckets,
            max_distance=self.config.relative_attention_max_distance,
        )
        return self.relative_attention_bias.weight.T[:, buckets][None]  # (1, heads, ..., Q, K)


class FirePositions(PositionScheme):
    """`fire`: Functional Interpolation for Relative Positions (Li et al., ICLR 2024): the bias of query i and key j
    is a small MLP (1 -> 32 -> heads, ReLU) of psi(i - j) / psi(max(L, i)), psi(x) = log(|c x| + 1).

    The log compresses long distances and the division by the query's own position maps every offset into
    [0, 1] whatever the length, so a longer input interpolates between offsets the MLP saw instead of reaching
    unseen ones. c and the threshold L are learned (L = |scale * 512|, the scale starting at 1, as in the paper's
    listing); below L the normaliser is fixed, so short inputs are not over-normalised. The distance is |i - j|:
    in an encoder a key after the query gets the bias of one as far before it, as ALiBi's does. i - j is counted
    in slots (`key_minus_query`), i itself is the query's position id, so a left-padded row, whose ids start at
    its first token, gets the bias of the same text unpadded (the bias is then one per row).
    """

    mlp_width = 32
    initial_c = 0.1
    initial_threshold = 512.0
    eps = 1e-6  # keeps the normaliser above 0 if c is learned down to 0

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.mlp = nn.Sequential(
            nn.Linear(1, self.mlp_width), nn.ReLU(), nn.Linear(self.mlp_width, config.num_attention_heads)
        )
        self.c = nn.Parameter(torch.tensor(self.initial_c))
        self.threshold_scale = nn.Parameter(torch.tensor(1.0))

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


POSITION_SCHEMES: dict[str, type[PositionScheme]] = {
    "none": NoPositions,
    "sinusoidal": SinusoidalPositions,
    "learned": LearnedPositions,
    "rope": RotaryPositions,
    "alibi": AlibiPositions,
    "t5": T5Positions,
    "fire": FirePositions,
}


def build_position_scheme(config: HfAttnConfig) -> PositionScheme:
    """Instantiate the scheme named by `config.position_embedding_type`."""
    return POSITION_SCHEMES[config.position_embedding_type](config)
