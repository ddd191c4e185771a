"""The registry of position schemes.

A scheme can act at two places, and each class overrides only the hook it needs:

* `embed(inputs_embeds, position_ids)`: absolute schemes add a vector per position once, after the
  token embedding (`sinusoidal`, `learned`).
* `attention_positions(position_ids, key_length)`: relative schemes hand every attention layer what
  it needs: RoPE's cos/sin table to rotate queries and keys, or ALiBi's additive bias. The model calls
  it once per forward pass and passes the result to all layers.

Adding a scheme is one small subclass of `PositionScheme` plus one line in `POSITION_SCHEMES`.
RoPE rotates pairs of channels of each query and key head; which channels pair up is the config's
`rope_layout` (`halves`, Llama's, or `interleaved`, RoFormer's: the same function of suitably
permuted Q/K weights, so both load exactly).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import nn
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

if TYPE_CHECKING:
    from .configuration_hf_attn import HfAttnConfig


@dataclass
class AttentionPositions:
    """What a relative scheme passes to every attention layer (both empty for absolute schemes)."""

    rotary: torch.Tensor | None = None  # (cos, sin) x scaling, (batch|1, seq, head_dim / 2, 2)
    bias: torch.Tensor | None = None  # additive scores bias, (1, heads, query, key)


def positions_needed(position_ids: torch.Tensor) -> int:
    """How many rows of a position table `position_ids` reach: the largest id + 1, or 0 for no tokens."""
    return int(position_ids.max()) + 1 if position_ids.numel() else 0


class PositionScheme(nn.Module):
    """Base class: no positions at all (an encoder built on it is permutation-equivariant)."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__()
        self.config = config

    @classmethod
    def check_config(cls, config: HfAttnConfig) -> None:
        """Raise a `ValueError` naming the field when `config` cannot work with this scheme."""

    def embed(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        return inputs_embeds

    def attention_positions(self, position_ids: torch.Tensor, key_length: int) -> AttentionPositions:
        return AttentionPositions()

    def reset_cache(self) -> None:
        """Recompute cached tables (called by `_init_weights`: non-persistent buffers are not loaded)."""

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> PositionScheme:
        """Cached tables stay fp32 whatever dtype the model is cast to: each use casts them after indexing
        (as transformers' RoPE computes cos/sin in fp32), and a model cast to bf16 and back would otherwise
        keep tables rounded to 8 bits of mantissa. A cast table is rebuilt, on its new device."""
        super()._apply(fn, recurse)
        if any(table.is_floating_point() and table.dtype != torch.float32 for table in self.buffers(recurse=False)):
            self.reset_cache()
        return self


class NoPositions(PositionScheme):
    """`none`: a bag of tokens; useful as the control in position-scheme comparisons."""


def sinusoidal_table(length: int, dim: int) -> torch.Tensor:
    """Vaswani et al.'s table, fp32: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same)."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    inv_freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10_000.0) / dim))
    table = torch.empty(length, dim, dtype=torch.float32)
    table[:, 0::2] = torch.sin(position * inv_freq)
    table[:, 1::2] = torch.cos(position * inv_freq)
    return table


class SinusoidalPositions(PositionScheme):
    """`sinusoidal`: the fixed table added once after the embedding; extrapolates to any length."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.register_buffer("table", sinusoidal_table(config.max_position_embeddings, config.hidden_size),
                             persistent=False)

    @classmethod
    def check_config(cls, config: HfAttnConfig) -> None:
        if config.hidden_size % 2:
            raise ValueError(
                f"HfAttnConfig: invalid `hidden_size`={config.hidden_size}; position_embedding_type='sinusoidal' "
                "pairs sin/cos channels, so hidden_size must be even."
            )

    def reset_cache(self) -> None:
        self.table = sinusoidal_table(len(self.table), self.config.hidden_size).to(self.table.device)

    def embed(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        needed = positions_needed(position_ids)
        if needed > len(self.table):  # grow on demand, doubling, so long inputs rebuild it rarely
            self.table = sinusoidal_table(max(needed, 2 * len(self.table)), self.config.hidden_size).to(
                self.table.device
            )
        return inputs_embeds + self.table[position_ids].to(inputs_embeds.dtype)


class LearnedPositions(PositionScheme):
    """`learned`: a trained table of `max_position_embeddings` rows (BERT); cannot extrapolate."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)

    def embed(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        longest = positions_needed(position_ids)
        if longest > self.embeddings.num_embeddings:
            raise ValueError(
                f"position_embedding_type='learned' has {self.embeddings.num_embeddings} trained positions "
                f"(max_position_embeddings) but the input needs {longest}; truncate inputs to "
                f"{self.embeddings.num_embeddings} tokens (tokenizer truncation=True) or use a scheme that "
                "extrapolates (sinusoidal, rope, alibi)."
            )
        return inputs_embeds + self.embeddings(position_ids)


ROPE_LAYOUTS = ("halves", "interleaved")


def apply_rotary(
    states: torch.Tensor, rotation: torch.Tensor, layout: str = "halves", heads_dim: int = 1
) -> torch.Tensor:
    """Rotate every channel pair (x, y) of queries or keys by its position's angle.

    `rotation` is `RotaryPositions`' (batch|1, seq, head_dim / 2, 2) table of (cos, sin) per position
    and frequency; `heads_dim` is where the heads axis sits in `states` (1 for (batch, heads, seq,
    head_dim), 2 for (batch, seq, heads, head_dim)). `layout` says which channels pair up: `halves`
    pairs i with i + d/2 (Llama's `rotate_half`), `interleaved` pairs 2i with 2i + 1 (RoFormer's).
    """
    cos, sin = rotation.unsqueeze(heads_dim).to(states.dtype).unbind(-1)
    if layout == "interleaved":
        x, y = states.unflatten(-1, (-1, 2)).unbind(-1)
        return torch.stack((x * cos - y * sin, y * cos + x * sin), dim=-1).flatten(-2)
    x, y = states.chunk(2, dim=-1)
    return torch.cat((x * cos - y * sin, y * cos + x * sin), dim=-1)


def default_rope_inv_freq(config: HfAttnConfig) -> tuple[torch.Tensor, float]:
    """Unscaled RoPE frequencies theta^(-2i/d); transformers keeps this one per model, not in its registry."""
    dim = config.head_dim
    theta = config.rope_parameters["rope_theta"]
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)), 1.0


class RotaryPositions(PositionScheme):
    """`rope`: rotates Q and K inside every layer (V untouched), so q.k depends on the offset only.

    Context-length scaling (`linear`, `dynamic` NTK, `yarn`) reuses transformers' init functions.
    cos/sin are cached in fp32 for `cached_length` positions and grown on demand; only `dynamic`
    rebuilds them when an input is longer than the training length, since its frequencies depend on
    that length.
    """

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.rope_type = config.rope_parameters.get("rope_type", "default")
        self.cached_length = 0
        self.cached_scaled_length = 0
        self.register_buffer("rotation_cached", torch.empty(0), persistent=False)
        self._build_cache(config.max_position_embeddings)

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

    def _build_cache(self, length: int) -> None:
        device = self.rotation_cached.device if self.rotation_cached.device.type != "meta" else None
        inv_freq, attention_scaling = self._frequencies(length)
        angles = torch.outer(torch.arange(length, dtype=torch.float32), inv_freq.float())
        self.rotation_cached = (torch.stack((angles.cos(), angles.sin()), dim=-1) * attention_scaling).to(device)
        self.cached_length = length
        self.cached_scaled_length = max(length, self.config.max_position_embeddings)

    def reset_cache(self) -> None:
        self._build_cache(self.config.max_position_embeddings)

    def attention_positions(self, position_ids: torch.Tensor, key_length: int) -> AttentionPositions:
        needed = max(positions_needed(position_ids), key_length)
        if self.rope_type == "dynamic":
            # NTK-aware frequencies depend on the actual length beyond training; within it they are fixed.
            scaled = max(needed, self.config.max_position_embeddings)
            if scaled != self.cached_scaled_length:
                self._build_cache(scaled)
        elif needed > self.cached_length:
            self._build_cache(max(needed, 2 * self.cached_length))
        return AttentionPositions(rotary=self.rotation_cached.to(position_ids.device)[position_ids])


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


class AlibiPositions(PositionScheme):
    """`alibi`: a per-head linear penalty on query-key distance, -slope * |i - j|; no extra parameters."""

    def __init__(self, config: HfAttnConfig) -> None:
        super().__init__(config)
        self.register_buffer("slopes", alibi_slopes(config.num_attention_heads), persistent=False)

    def reset_cache(self) -> None:
        self.slopes = alibi_slopes(self.config.num_attention_heads).to(self.slopes.device)

    def attention_positions(self, position_ids: torch.Tensor, key_length: int) -> AttentionPositions:
        query_pos = position_ids[:1, :, None].float()  # positions are shared across the batch
        key_pos = torch.arange(key_length, device=position_ids.device, dtype=torch.float32)[None, None, :]
        distance = (query_pos - key_pos).abs()  # (1, Q, K)
        return AttentionPositions(bias=-self.slopes.to(distance.device)[None, :, None, None] * distance[:, None])


POSITION_SCHEMES: dict[str, type[PositionScheme]] = {
    "none": NoPositions,
    "sinusoidal": SinusoidalPositions,
    "learned": LearnedPositions,
    "rope": RotaryPositions,
    "alibi": AlibiPositions,
}


def build_position_scheme(config: HfAttnConfig) -> PositionScheme:
    """Instantiate the scheme named by `config.position_embedding_type`."""
    return POSITION_SCHEMES[config.position_embedding_type](config)
