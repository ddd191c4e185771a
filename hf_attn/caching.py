"""The caches a decoder decodes with: transformers' cache classes, with one cache layer of its own.

`decoding_cache` makes or completes the cache of a forward pass: a `GrowingCacheLayer` for each full-attention
layer (transformers' `DynamicLayer` without the copy of the whole cache at every step), transformers'
`DynamicSlidingWindowLayer` for each sliding one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer, DynamicSlidingWindowLayer, EncoderDecoderCache
from transformers.utils import is_tracing

if TYPE_CHECKING:
    from .configuration_hf_attn import HfAttnConfig


class GrowingCacheLayer(DynamicLayer):
    """transformers' `DynamicLayer` with room to grow: each step's keys and values are written into spare slots
    at the end of a larger buffer instead of being concatenated to the cache.

    `DynamicLayer` concatenates, which copies every cached key and value at every step: O(context) bytes per
    generated token on top of what attention reads. Here a step writes only its own tokens; when the buffer is
    full it moves into one with room for `growth` times the context more (at least `min_room` tokens), so the
    copies cost a constant per token on average, for at most that much unused room.

    `keys` and `values` stay views of the filled part, so `DynamicLayer`'s other methods (crop, beam-search
    reordering, batch selection) work on them unchanged; when one of them replaces the views by new tensors,
    the next update starts a new buffer from those. While autograd records, the update is `DynamicLayer`'s:
    writing in place would change tensors the backward pass needs. While a graph is captured (`torch.export`,
    `torch.compile`) it is `DynamicLayer`'s too: whether a buffer still has room is a question about memory
    (data pointers), which a traced tensor does not have, and a graph's output is a new tensor anyway.
    """

    growth = 0.25
    min_room = 64
    key_buffer: torch.Tensor | None = None
    value_buffer: torch.Tensor | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        records_grad = torch.is_grad_enabled() and (key_states.requires_grad or value_states.requires_grad)
        if records_grad or is_tracing(key_states):
            return super().update(key_states, value_states, *args, **kwargs)
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        past = self.get_seq_length()
        length = past + key_states.shape[-2]
        if not (self._fills_start_of(self.key_buffer, self.keys, length, key_states)
                and self._fills_start_of(self.value_buffer, self.values, length, value_states)):
            room = max(self.min_room, int(length * self.growth))
            self.key_buffer = self._new_buffer(self.keys, past, length + room, key_states)
            self.value_buffer = self._new_buffer(self.values, past, length + room, value_states)
        self.key_buffer[..., past:length, :] = key_states
        self.value_buffer[..., past:length, :] = value_states
        self.keys, self.values = self.key_buffer[..., :length, :], self.value_buffer[..., :length, :]
        return self.keys, self.values

    @staticmethod
    def _fills_start_of(buffer: torch.Tensor | None, cached: torch.Tensor, length: int, new: torch.Tensor) -> bool:
        """Whether `cached` is still the filled start of `buffer`, which has room for `length` tokens of `new` and
        can be written here (a buffer made under `torch.inference_mode` cannot be written outside it)."""
        return (
            buffer is not None
            and (torch.is_inference_mode_enabled() or not buffer.is_inference())
            and cached.data_ptr() == buffer.data_ptr()
            and cached.stride() == buffer.stride()
            and buffer.shape[-2] >= length
            and buffer.shape[:-2] == new.shape[:-2]
            and buffer.dtype == new.dtype
            and buffer.device == new.device
        )

    @staticmethod
    def _new_buffer(cached: torch.Tensor, past: int, capacity: int, new: torch.Tensor) -> torch.Tensor:
        buffer = new.new_empty((*new.shape[:-2], capacity, new.shape[-1]))
        if past:
            buffer[..., :past, :] = cached
        return buffer


def self_attention_cache_layer(config: HfAttnConfig, layer_idx: int) -> DynamicLayer:
    """The cache layer of a decoder's self-attention layer: a `GrowingCacheLayer` of every key, or for a sliding
    layer transformers' `DynamicSlidingWindowLayer`, which keeps only the keys the window still sees: its window
    counts the query itself, hf_attn's is `sliding_window` keys besides the query, so it is built one longer."""
    if config.layer_types[layer_idx] == "sliding_attention":
        return DynamicSlidingWindowLayer(sliding_window=config.sliding_window + 1)
    return GrowingCacheLayer()


def decoding_cache(cache: Cache | None, cross_attention: bool, config: HfAttnConfig) -> Cache:
    """The cache to decode with: a new dynamic one when none is given (with a cross-attention half when the
    decoder reads an encoder), else `cache`. Its self-attention layers not yet filled become
    `self_attention_cache_layer`s (the layers `generate()` builds from `layer_types` keep one key too few), and its
    cross-attention layers full `DynamicLayer`s, which keep every encoder key.

    A static cache (`StaticCache`, `cache_implementation="static"`, what `torch.compile` decodes with) serves
    full-attention self-attention: its unwritten slots lie after the queries, where the causal mask hides them
    (`HfAttnModel.attention_masks`); a static sliding-window layer drops keys that the mask's window does not
    model, and the decoder of an encoder-decoder keeps dynamic caches (a static cross-attention half would pad the
    encoder's keys).
    """
    if cache is None:
        cache = EncoderDecoderCache(DynamicCache(), DynamicCache()) if cross_attention else DynamicCache()
    is_pair = isinstance(cache, EncoderDecoderCache)
    parts = [cache.self_attention_cache, cache.cross_attention_cache] if is_pair else [cache]
    for part in parts:
        if part.is_compileable:
            if not is_pair and not any(getattr(layer, "is_sliding", False) for layer in part.layers):
                continue
            raise ValueError(
                f"hf_attn decodes with a static cache ({type(part).__name__}) for full-attention self-attention "
                "only (no sliding-window layers, no cross-attention); drop cache_implementation (or pass a "
                "DynamicCache)."
            )
        is_self_attention = part is parts[0]
        if is_self_attention and part.layer_class_to_replicate is not None and not part.layers:
            # made now rather than one by one as used: each layer's kind decides its class
            part.layers = [self_attention_cache_layer(config, index) for index in range(len(config.layer_types))]
        for index, layer in enumerate(part.layers):
            if type(layer) in (DynamicLayer, DynamicSlidingWindowLayer) and not layer.is_initialized:
                part.layers[index] = self_attention_cache_layer(config, index) if is_self_attention else DynamicLayer()
    return cache
