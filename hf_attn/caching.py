"""The caches a decoder decodes with: transformers' cache classes, with one cache layer of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer, DynamicSlidingWindowLayer, EncoderDecoderCache
from transformers.utils import is_tracing

if TYPE_CHECKING:
    from .configuration_hf_attn import HfAttnConfig


class GrowingCacheLayer(DynamicLayer):
    """transformers' `DynamicLayer` writing each step's keys and values into spare room at the end of a buffer,
    instead of concatenating (a copy of the whole cache per token). A full buffer moves into one `growth` times
    longer (at least `min_room` more), a constant cost per token on average.

    `keys` and `values` stay views of the filled part, so `DynamicLayer`'s other methods work unchanged (one that
    replaces them starts a new buffer). While autograd records, or a graph is captured (a traced tensor has no
    data pointer to compare), the update is `DynamicLayer`'s.
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
        can be written here (not an inference-mode buffer outside inference mode)."""
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
    """A `GrowingCacheLayer`, or for a sliding layer a `DynamicSlidingWindowLayer` one longer than `sliding_window`
    (its window counts the query itself)."""
    if config.layer_types[layer_idx] == "sliding_attention":
        return DynamicSlidingWindowLayer(sliding_window=config.sliding_window + 1)
    return GrowingCacheLayer()


def decoding_cache(cache: Cache | None, cross_attention: bool, config: HfAttnConfig) -> Cache:
    """`cache`, or a new dynamic one (with a cross-attention half for a decoder that reads an encoder), its unfilled
    layers replaced: `self_attention_cache_layer`s (`generate()`'s sliding layers keep one key too few), and full
    `DynamicLayer`s for cross-attention. A static cache serves full-attention self-attention only: a static sliding
    layer drops keys the mask still sees, a static cross-attention half would pad the encoder's keys.
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
            # made now, not as used: each layer's kind decides its class
            part.layers = [self_attention_cache_layer(config, index) for index in range(len(config.layer_types))]
        for index, layer in enumerate(part.layers):
            if type(layer) in (DynamicLayer, DynamicSlidingWindowLayer) and not layer.is_initialized:
                part.layers[index] = self_attention_cache_layer(config, index) if is_self_attention else DynamicLayer()
    return cache
