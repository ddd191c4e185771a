"""How much of a text a sequence classifier reads: its config's reading policy, applied to every input.

The first `read_length` tokens of each (right-padded) text are read; with `window_stride`, an input longer than
`max_position_embeddings` is read as overlapping windows of that many tokens, encoded on their own and pooled
together; without it, an input longer than `max_direct_length` is read as windows too (linear cost), with a warning,
where the scheme has positions for every length, and a scheme with a table of positions refuses an input past it.
`read_inputs` applies the policy to a batch and `TextReading.pool` puts the windows' vectors back together, so the
head applies it in a few lines and `pipeline(...)`, the CLI and remote code read the same tokens.
"""

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
    """The inputs a classifier encodes for a batch, (windows, window, ...) when read as windows, and the text (row
    of the batch) each window comes from (`texts`; None when each text is read in one pass)."""

    input_ids: torch.Tensor | None
    inputs_embeds: torch.Tensor | None
    attention_mask: torch.Tensor | None
    position_ids: torch.Tensor | None
    texts: torch.Tensor | None = None
    batch: int = 0

    def pool(self, pooled: torch.Tensor) -> torch.Tensor:
        """(windows, hidden) -> (batch, hidden): each text's windows' vectors weighted by their real tokens (padding
        alone counts 0); the pooled vectors unchanged when each text was read in one pass."""
        if self.texts is None:
            return pooled
        weights = self.attention_mask.sum(dim=-1, keepdim=True).to(pooled.dtype)
        total = sum_by_text(weights, self.texts, self.batch).clamp(min=1.0)
        return sum_by_text(pooled * weights, self.texts, self.batch) / total


def read_inputs(
    config: HfAttnConfig,
    extrapolates: bool,
    input_ids: torch.Tensor | None,
    inputs_embeds: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
    position_ids: torch.Tensor | None,
) -> TextReading:
    """The `TextReading` of a batch under `config`'s policy; `extrapolates`: the position scheme has positions for
    every length (a table of `max_position_embeddings` rows reads past it only as windows)."""
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
    # A captured graph always reads windows: a branch on the example's length would serve it alone (a shorter text is
    # one window, read as the model reads it whole).
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
    """The stride of the windows an input is read in, or None: `window_stride`, else the window itself for an input
    past `max_direct_length` (learned positions read past their table only as the windows `window_stride` asks for)."""
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
    config: HfAttnConfig,
    input_ids: torch.Tensor | None,
    inputs_embeds: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
    stride: int,
) -> TextReading:
    """The inputs cut into windows of `max_position_embeddings` every `stride` tokens, with their attention mask and
    the text each window comes from.

    A text's windows must not depend on the batch: the windows a shorter (right-padded) text does not need, all
    those after one that reaches its end, are left out, so they cost nothing. While a graph is captured (compile,
    export), whose shapes cannot depend on the data, they are kept and masked out, so they weigh nothing.
    """
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
    """(batch, seq, ...) -> (batch, windows, length, ...): windows of `length` starting every `stride` positions,
    over the input followed by `length` positions of `fill`.

    The windows go on past the last one a text needs (the first that reaches its end, at most `stride` before
    `seq` since `stride <= length`); the caller drops or masks those. Padding by a fixed amount keeps every
    shape a plain function of `seq`, with no branch on it, so a captured graph serves any length.
    """
    padding = tensor.new_full((tensor.shape[0], length, *tensor.shape[2:]), fill)
    return torch.cat([tensor, padding], dim=1).unfold(1, length, stride).movedim(-1, 2)


def check_right_padded(attention_mask: torch.Tensor) -> None:
    """A ValueError for a left-padded batch: cutting to `read_length` keeps the first columns, which are a text's
    first tokens only when the padding is on the right (the tokenizer's `padding_side`)."""
    if (attention_mask[:, 1:] > attention_mask[:, :-1]).any():
        raise ValueError(
            "config.read_length keeps the first tokens of each text, but this batch is padded on the left; "
            "tokenize with padding_side='right' (the hf_attn tokenizer's default)."
        )


def sum_by_text(rows: torch.Tensor, texts: torch.Tensor, batch: int) -> torch.Tensor:
    """(windows, ...) -> (batch, ...): the sum of each text's rows; `texts` holds the text of every row, in order.

    While a graph is captured every text has the same number of rows (`read_windows` keeps them all), so the sum
    is a reshape: Inductor cannot compile `index_add` over a data-dependent number of rows (torch 2.13)."""
    if is_tracing(rows):
        return rows.unflatten(0, (batch, -1)).sum(dim=1)
    return rows.new_zeros(batch, *rows.shape[1:]).index_add(0, texts, rows)
