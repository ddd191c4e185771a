"""Attention masks as small pure functions: boolean, broadcastable to (batch, heads, query, key), `True` where
attention is allowed, as SDPA takes them; `None` masks nothing (SDPA then picks its fastest kernel)."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import nn
from transformers.utils import is_tracing


def key_padding_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """(batch, key) 1/0 padding mask -> (batch, 1, 1, key) boolean, or None when nothing is padding (always kept
    while tracing: the graph must serve padded batches too)."""
    if attention_mask is None or (not is_tracing(attention_mask) and bool(attention_mask.all())):
        return None
    return attention_mask.bool()[:, None, None, :]


@dataclass
class RealTokens:
    """Where a padded batch's real tokens sit (`indices`, flat in batch x length), so that every step but attention
    runs on them alone, (1, tokens, ...), as ModernBERT unpads."""

    batch: int
    length: int
    indices: torch.Tensor

    def take(self, padded: torch.Tensor) -> torch.Tensor:
        """(batch, length, ...) -> (1, tokens, ...): the real tokens' states."""
        return padded.flatten(0, 1).index_select(0, self.indices)[None]

    def pad(self, tokens: torch.Tensor) -> torch.Tensor:
        """(1, tokens, ...) -> (batch, length, ...): the real tokens' states back in place, zeros at the padding."""
        rows = tokens.new_zeros(self.batch * self.length, *tokens.shape[2:])
        return rows.index_copy(0, self.indices, tokens[0]).unflatten(0, (self.batch, self.length))


def real_tokens(attention_mask: torch.Tensor | None) -> RealTokens | None:
    """The `RealTokens` of a (batch, length) 1/0 padding mask, or None without padding and while tracing."""
    if attention_mask is None or is_tracing(attention_mask) or bool(attention_mask.all()):
        return None
    batch, length = attention_mask.shape
    return RealTokens(batch, length, attention_mask.flatten().nonzero().squeeze(1))


def distance_mask(
    query_length: int, key_length: int, *, causal: bool, sliding_window: int | None, device: torch.device,
    query_start: int | torch.Tensor | None = None,
) -> torch.Tensor | None:
    """(1, 1, query, key) mask of the keys each query may see: j <= i if `causal`, |i - j| <= `sliding_window`.

    The queries are the last of the keys unless `query_start` places them (a static cache's unwritten slots run
    past them; a tensor, so a compiled graph serves every step). A single last query seeing every key gets None.
    """
    if not causal and sliding_window is None:
        return None
    if query_start is None:
        if query_length == 1 and (sliding_window is None or key_length - 1 <= sliding_window):
            return None
        query_start = key_length - query_length
    query_pos = (torch.arange(query_length, device=device) + query_start)[:, None]
    key_pos = torch.arange(key_length, device=device)[None, :]
    allowed = torch.ones(query_length, key_length, dtype=torch.bool, device=device)
    if causal:
        allowed &= key_pos <= query_pos
    if sliding_window is not None:
        allowed &= (query_pos - key_pos).abs() <= sliding_window
    return allowed[None, None]


def combine_masks(*masks: torch.Tensor | None) -> torch.Tensor | None:
    """Logical AND of broadcastable boolean masks, skipping `None` (= no restriction)."""
    present = [mask for mask in masks if mask is not None]
    return functools.reduce(torch.logical_and, present) if present else None


def self_attention_mask(
    padding: torch.Tensor | None, query_length: int, *, causal: bool, sliding_window: int | None,
    device: torch.device, key_length: int | None = None, query_start: int | torch.Tensor | None = None,
) -> torch.Tensor | None:
    """Padding (`key_padding_mask`'s) AND causal AND sliding window, over `key_length` keys (default:
    `query_length`; more after a cache), the queries placed as `distance_mask` places them."""
    key_length = query_length if key_length is None else key_length
    return combine_masks(
        padding,
        distance_mask(
            query_length, key_length, causal=causal, sliding_window=sliding_window, device=device,
            query_start=query_start,
        ),
    )


def fold_blocks(states: torch.Tensor, batch: int) -> torch.Tensor:
    """(1|batch, heads, blocks, ...) -> (batch x blocks, heads, ...): each block of each row becomes a row."""
    states = states.transpose(1, 2)
    return states.expand(batch, *states.shape[1:]).reshape(-1, *states.shape[2:])


@dataclass
class BandBlocks:
    """Sliding-window attention that computes only the scores inside the window: the queries cut into blocks of
    `block`, block b's queries seeing only the `span` keys from slot b x block - window on (block + 2 x window, or
    block + window when causal), so (batch x blocks) small attentions of (block, span) scores each.

    `query_slots` (blocks, block) and `key_slots` (blocks, span): the slots each block reads, clamped into the
    sequence; `mask` (batch x blocks, 1, block, span): the keys each query may see; `sees_a_key` (batch, length,
    1, 1): the queries that see a key, None when all do.
    """

    batch: int
    length: int
    block: int
    window: int
    query_slots: torch.Tensor
    key_slots: torch.Tensor
    mask: torch.Tensor
    sees_a_key: torch.Tensor | None

    def queries(self, states: torch.Tensor) -> torch.Tensor:
        """(batch, heads, length, head_dim) -> (batch x blocks, heads, block, head_dim)."""
        return self._windows(states, 0, self.block)

    def keys(self, states: torch.Tensor) -> torch.Tensor:
        """(batch, heads, length, head_dim) -> (batch x blocks, heads, span, head_dim)."""
        return self._windows(states, self.window, self.key_slots.shape[-1])

    def _windows(self, states: torch.Tensor, before: int, size: int) -> torch.Tensor:
        """Windows of `size` slots every `block` slots, the first `before` slots ahead, zeros outside the sequence:
        one copy (the padding), then views, so that overlapping key windows share memory."""
        blocks = self.query_slots.shape[0]
        after = (blocks - 1) * self.block + size - before - self.length
        padded = nn.functional.pad(states.transpose(1, 2), (0, 0, 0, 0, before, after))
        return padded.unfold(1, size, self.block).transpose(-1, -2).flatten(0, 1)  # (batch x blocks, heads, size, d)


def band_blocks(
    padding: torch.Tensor | None, batch: int, length: int, *, causal: bool, sliding_window: int, block: int,
    device: torch.device,
) -> BandBlocks:
    """`BandBlocks` for `length` queries over the same keys: the window (and causality) AND `padding`."""
    window = sliding_window
    blocks = -(-length // block)
    span = block + window + (0 if causal else window)
    query_slots = torch.arange(blocks * block, device=device).view(blocks, block)
    key_slots = query_slots[:, :1] - window + torch.arange(span, device=device)
    offset = key_slots[:, None, :] - query_slots[:, :, None]  # key - query, (blocks, block, span)
    visible = (offset <= 0) & (offset >= -window) if causal else offset.abs() <= window
    visible = (visible & ((key_slots >= 0) & (key_slots < length))[:, None, :])[None]  # (1, blocks, block, span)
    query_slots, key_slots = query_slots.clamp(max=length - 1), key_slots.clamp(0, length - 1)
    sees_a_key = None
    if padding is not None:
        visible = visible & padding[:, 0, 0, key_slots][:, :, None, :]  # (batch, blocks, block, span)
        sees_a_key = visible.any(dim=-1).reshape(batch, -1)[:, :length, None, None]
    mask = fold_blocks(visible[:, None], batch)
    return BandBlocks(batch, length, block, window, query_slots, key_slots, mask, sees_a_key)
