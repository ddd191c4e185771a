"""Attention masks as small pure functions.

Convention (the one `torch.nn.functional.scaled_dot_product_attention` and transformers' SDPA path
take): a boolean tensor broadcastable to (batch, heads, query, key), `True` where attention is
allowed. `None` means nothing is masked, which lets SDPA pick its fastest kernel. The model builds
each distinct mask once per forward pass and hands it to every layer.
"""

from __future__ import annotations

import torch
from transformers.utils import is_tracing


def key_padding_mask(attention_mask: torch.Tensor | None) -> torch.Tensor | None:
    """(batch, key) 1/0 padding mask -> (batch, 1, 1, key) boolean, or None when nothing is padding.

    Whether anything is padding is read back to the host, so while a graph is captured (`torch.compile`,
    export) the mask is always kept: the graph must serve padded batches too.
    """
    if attention_mask is None or (not is_tracing(attention_mask) and bool(attention_mask.all())):
        return None
    return attention_mask.bool()[:, None, None, :]


def distance_mask(
    query_length: int,
    key_length: int,
    *,
    causal: bool,
    sliding_window: int | None,
    device: torch.device,
    query_start: int | torch.Tensor | None = None,
) -> torch.Tensor | None:
    """(1, 1, query, key) mask of which key positions each query position may see.

    `causal`: key j is visible from query i only if j <= i. `sliding_window`: only if |i - j| is at most
    the window. Queries are aligned to the end of the keys, so a query block shorter than the keys
    (incremental decoding) still lines up with its positions. A single query, the last key, sees every key
    unless the window is shorter than the keys: no mask then (each decoding step of generation).

    `query_start`: the key slot of the first query when the keys run past the queries (a static cache's
    slots not yet written, which causality hides); a tensor stays on the device, so a compiled graph
    serves every step.
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
    if not present:
        return None
    combined = present[0]
    for mask in present[1:]:
        combined = combined & mask
    return combined


def self_attention_mask(
    padding: torch.Tensor | None,
    query_length: int,
    *,
    causal: bool,
    sliding_window: int | None,
    device: torch.device,
    key_length: int | None = None,
    query_start: int | torch.Tensor | None = None,
) -> torch.Tensor | None:
    """The full self-attention mask: padding (`key_padding_mask`'s, built once for every layer type) AND
    causal AND sliding window.

    `key_length` (default: `query_length`) is longer when earlier keys come from a cache; `padding` then
    covers all the keys, past and current, and the queries are the last `query_length` of them unless
    `query_start` places them (see `distance_mask`).
    """
    key_length = query_length if key_length is None else key_length
    return combine_masks(
        padding,
        distance_mask(
            query_length, key_length, causal=causal, sliding_window=sliding_window, device=device,
            query_start=query_start,
        ),
    )
