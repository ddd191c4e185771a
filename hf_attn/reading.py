"""How much of a text a sequence classifier reads (`read_length`, `window_stride`, `max_direct_length`): applied
in the model, so `pipeline(...)`, the CLI and remote code read the same tokens."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from transformers.utils import is_tracing, logging

if TYPE_CHECKING:
    from .configuration_hf_attn import HfAttnConfig

logger = logging.get_logger(__name__)


@dataclass
class TextReading:
    """The inputs a classifier encodes, (windows, window, ...) when read as windows, and each window's text (`texts`;
    None when each text is read in one pass)."""

    input_ids: torch.Tensor | None
    inputs_embeds: torch.Tensor | None
    attention_mask: torch.Tensor | None
    position_ids: torch.Tensor | None
    texts: torch.Tensor | None = None
    batch: int = 0

    def pool(self, pooled: torch.Tensor) -> torch.Tensor:
        """(windows, hidden) -> (batch, hidden): each text's windows' vectors weighted by their real tokens."""
        if self.texts is None:
            return pooled
        weights = self.attention_mask.sum(dim=-1, keepdim=True).to(pooled.dtype)
        total = sum_by_text(weights, self.texts, self.batch).clamp(min=1.0)
        return sum_by_text(pooled * weights, self.texts, self.batch) / total


def read_inputs(
    config: HfAttnConfig, extrapolates: bool, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None,
    attention_mask: torch.Tensor | None, position_ids: torch.Tensor | None,
) -> TextReading:
    """The `TextReading` of a batch; `extrapolates`: the position scheme has positions for every length."""
    text = input_ids if input_ids is not None else inputs_embeds
    if text is None:
        return TextReading(input_ids, inputs_embeds, attention_mask, position_ids)
    if config.read_length is not None:  # the slice is a no-op on shorter inputs: no branch
        if attention_mask is not None and not is_tracing(text) and text.shape[1] > config.read_length:
            check_right_padded(attention_mask)
        input_ids, inputs_embeds, attention_mask, position_ids, text = (
            None if tensor is None else tensor[:, : config.read_length]
            for tensor in (input_ids, inputs_embeds, attention_mask, position_ids, text)
        )
    stride = window_stride(config, extrapolates, text)
    # A captured graph always reads windows: a branch on the example's length would serve that length alone.
    window = config.max_position_embeddings
    if stride is None or not (is_tracing(text) or text.shape[1] > window):
        if position_ids is None and not extrapolates and not is_tracing(text) and text.shape[1] > window:
            raise ValueError(
                f"this classifier's learned positions cover {window} tokens but the input has {text.shape[1]}; "
                f"set config.read_length to {window} or less, or config.window_stride to read longer texts "
                "as windows."
            )
        return TextReading(input_ids, inputs_embeds, attention_mask, position_ids)
    if position_ids is not None:
        raise ValueError(
            "position_ids cannot be combined with window_stride: every window numbers its own positions from 0; "
            "leave position_ids out."
        )
    return read_windows(config, input_ids, inputs_embeds, attention_mask, stride)


def window_stride(config: HfAttnConfig, extrapolates: bool, text: torch.Tensor) -> int | None:
    """The windows' stride, or None: `window_stride`, else the window for an input past `max_direct_length`."""
    limit = config.max_direct_length
    if config.window_stride is not None or limit is None or not extrapolates or is_tracing(text):
        return config.window_stride
    if text.shape[1] <= limit:
        return None
    logger.warning_once(  # the same words for every long input, so that a batch of them warns once
        f"An input is longer than max_direct_length={limit}: it is read as windows of "
        f"{config.max_position_embeddings} tokens (linear cost). Set config.window_stride to choose the windows, "
        "config.read_length to read only the start, or config.max_direct_length=None to read it in one pass."
    )
    return config.max_position_embeddings


def read_windows(
    config: HfAttnConfig, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None,
    attention_mask: torch.Tensor | None, stride: int,
) -> TextReading:
    """The inputs as windows of `max_position_embeddings` every `stride` tokens. The windows a text does not need
    (after one that reaches its end) are left out, or, while tracing, kept and masked out."""
    window = config.max_position_embeddings
    text = input_ids if input_ids is not None else inputs_embeds
    if attention_mask is None:
        attention_mask = torch.ones(text.shape[:2], dtype=torch.long, device=text.device)
    windows = split_into_windows(attention_mask, window, stride, 0)  # (batch, windows, window)
    starts = torch.arange(windows.shape[1], device=text.device) * stride
    needed = (starts == 0) | (starts - stride + window < attention_mask.sum(dim=-1, keepdim=True))
    texts = torch.arange(text.shape[0], device=text.device)[:, None].expand_as(needed)
    if input_ids is not None:
        input_ids = split_into_windows(input_ids, window, stride, config.pad_token_id or 0)
    else:
        inputs_embeds = split_into_windows(inputs_embeds, window, stride, 0.0)
    tracing = is_tracing(needed)
    if tracing:  # every window kept, those a text does not need masked out
        windows = windows * needed[..., None]
    input_ids, inputs_embeds, attention_mask, texts = (
        None if piece is None else piece.flatten(0, 1) if tracing else piece[needed]
        for piece in (input_ids, inputs_embeds, windows, texts)
    )
    return TextReading(input_ids, inputs_embeds, attention_mask, None, texts, batch=text.shape[0])


def split_into_windows(tensor: torch.Tensor, length: int, stride: int, fill: float) -> torch.Tensor:
    """(batch, seq, ...) -> (batch, windows, length, ...): windows of `length` every `stride` positions over the
    input and `length - 1` positions of `fill` (a fixed padding: shapes without a branch on `seq`, for tracing).
    That makes ceil(seq / stride) windows: one for an input of at most `stride` tokens, and always the window that
    reaches the input's end, with at most `(length - 1) // stride` after it (none when the stride is `length`)."""
    padding = tensor.new_full((tensor.shape[0], length - 1, *tensor.shape[2:]), fill)
    return torch.cat([tensor, padding], dim=1).unfold(1, length, stride).movedim(-1, 2)


def check_right_padded(attention_mask: torch.Tensor) -> None:
    """A ValueError for a left-padded batch, whose first columns are not each text's first tokens."""
    if (attention_mask[:, 1:] > attention_mask[:, :-1]).any():
        raise ValueError(
            "config.read_length keeps the first tokens of each text, but this batch is padded on the left; "
            "tokenize with padding_side='right' (the hf_attn tokenizer's default)."
        )


def sum_by_text(rows: torch.Tensor, texts: torch.Tensor, batch: int) -> torch.Tensor:
    """(windows, ...) -> (batch, ...): the sum of each text's rows. While tracing, every text has as many rows, so
    it is a reshape (Inductor cannot compile `index_add` over a data-dependent number of rows)."""
    if is_tracing(rows):
        return rows.unflatten(0, (batch, -1)).sum(dim=1)
    return rows.new_zeros(batch, *rows.shape[1:]).index_add(0, texts, rows)
