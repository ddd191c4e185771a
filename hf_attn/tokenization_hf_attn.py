"""The Week 3 byte-level BPE as a Hugging Face fast tokenizer (``tokenizer.json``: ``</w>`` written ``Ġ``).

Week 3 drops a lone ``</w>`` (a word whose last symbol never merged with it), which no ``tokenizers`` component
can do once the model made it: ``HfAttnTokenizerFast.__call__`` removes that id, then truncates and pads. A plain
``PreTrainedTokenizerFast`` keeps those ids. This file is copied beside the tokenizer: it imports nothing from hf_attn.
"""

from __future__ import annotations

import itertools
import re
from typing import Any, ClassVar

from transformers import BatchEncoding, PreTrainedTokenizerFast
from transformers.tokenization_utils_base import LARGE_INTEGER

END_OF_WORD_TOKEN = "Ġ"  # Week 3's ``</w>`` in ``tokenizer.json``: the byte-level symbol of a space

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_encodable(text: str, where: str) -> None:
    """A ValueError naming ``where`` for a lone surrogate, which Rust cannot encode: Python makes one of each byte
    that is not UTF-8 (``errors="surrogateescape"``, U+DC80-U+DCFF: that byte plus 0xDC00)."""
    found = None if text.isascii() else LONE_SURROGATE.search(text)
    if found is None:
        return
    code, before = ord(found.group()), text[: found.start()][-20:]
    if 0xDC80 <= code <= 0xDCFF:
        raise ValueError(f"{where} is not UTF-8: the byte 0x{code - 0xDC00:02x} after {before!r}; convert it to "
                         "UTF-8 (e.g. `iconv -f latin1 -t utf-8`)")
    raise ValueError(f"{where} holds a lone surrogate U+{code:04X} after {before!r} (half of a UTF-16 pair), which "
                     "is not text; remove it or join it with its other half")


def head_of(text: str, pieces: int) -> str:
    """The prefix of ``text`` before its ``pieces + 1``-th whitespace-separated piece (all of it when it has no
    more): a piece holds at least one token, so the prefix holds the first ``pieces`` tokens."""
    split = text.split(maxsplit=pieces)
    return text if len(split) <= pieces else text[: len(text) - len(split[-1])]


class HfAttnTokenizerFast(PreTrainedTokenizerFast):
    """Fast tokenizer with the Week 3 ids (``[PAD]`` padding, ``model_max_length = max_seq``); truncation and
    padding are transformers'. No sentence pairs, and no Rust ``Encoding`` objects (``word_ids()``)."""

    model_input_names: ClassVar[list[str]] = ["input_ids", "attention_mask"]
    padding_side = "right"
    truncation_side = "right"

    # No __init__ on purpose: transformers loads tokenizer.json as-is only for classes without one;
    # for the others it rebuilds a bare BPE from the vocabulary, losing the Week 3 pre-tokenization.

    @property
    def end_of_word_id(self) -> int:
        """Id of ``Ġ``: the Rust tokenizer's lone ``</w>``, which the Week 3 ids never contain."""
        return self.convert_tokens_to_ids(END_OF_WORD_TOKEN)

    def __call__(
        self,
        text: str | list[str] | list[list[str]],
        text_pair: Any = None,
        *,
        padding: bool | str = False,
        truncation: bool | str | None = None,
        max_length: int | None = None,
        is_split_into_words: bool = False,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_tensors: Any = None,
        return_attention_mask: bool | None = None,
        return_length: bool = False,
        return_overflowing_tokens: bool = False,
        **kwargs: Any,
    ) -> BatchEncoding:
        """Every token from Rust, the lone ``</w>`` removed, then truncated and padded as transformers does (with
        right truncation Rust first sees only ``head_of`` each text)."""
        if text_pair is not None or kwargs.get("text_target") is not None:
            raise ValueError("Week 3 has no sentence-pair format (no separator token): encode each text on its own.")
        if return_overflowing_tokens:
            raise ValueError("return_overflowing_tokens is not supported: Week 3 truncates and keeps the start.")
        batched = isinstance(text, (list, tuple)) and not (is_split_into_words and text and isinstance(text[0], str))
        texts = list(text) if batched else [text]
        for index, one in enumerate(texts):
            if isinstance(one, str):
                check_encodable(one, f"text {index + 1}" if batched else "the text")
        limit = self.truncation_length(truncation, max_length)
        if limit is not None and self.truncation_side == "right" and not is_split_into_words:
            texts = [head_of(one, limit) if isinstance(one, str) else one for one in texts]
        encoded = super().__call__(texts, is_split_into_words=is_split_into_words, return_attention_mask=False,
                                   **kwargs) if texts else {"input_ids": []}  # the parent fails on an empty batch
        data = self.without_end_of_word(encoded, limit)
        offsets = data.pop("offset_mapping", None)
        data = self.pad(data, padding=padding, max_length=max_length, pad_to_multiple_of=pad_to_multiple_of,
                        padding_side=padding_side, return_attention_mask=return_attention_mask, verbose=False)
        if offsets is not None:  # pad() knows nothing of offsets: padding gets (0, 0), as in tokenizers
            right = (padding_side or self.padding_side) == "right"
            fills = [[(0, 0)] * (len(ids) - len(spans)) for spans, ids in zip(offsets, data["input_ids"])]
            data["offset_mapping"] = [spans + fill if right else fill + spans for spans, fill in zip(offsets, fills)]
        if return_length:
            data["length"] = [len(ids) for ids in data["input_ids"]]
        if not batched and return_tensors is None:  # like transformers: tensors keep the batch axis
            return BatchEncoding({name: values[0] for name, values in data.items()})
        return BatchEncoding(dict(data), tensor_type=return_tensors)

    def truncation_length(self, truncation: bool | str | None, max_length: int | None) -> int | None:
        """How many tokens ``truncation`` and ``max_length`` keep, as transformers reads them (None: all)."""
        if truncation is None:  # transformers truncates when a max_length alone is given
            truncation = max_length is not None
        if truncation in (False, "do_not_truncate"):
            return None
        if max_length is None and self.model_max_length > LARGE_INTEGER:  # no length known: transformers keeps all
            return None
        return self.model_max_length if max_length is None else max_length

    def without_end_of_word(self, encoded: dict[str, list[list[Any]]], limit: int | None) -> dict[str, list[list[Any]]]:
        """Each per-token output without the lone ``</w>``'s positions, cut to ``limit`` on ``truncation_side``."""
        end_of_word = self.end_of_word_id
        kept = [[token != end_of_word for token in ids] for ids in encoded["input_ids"]]

        def cut(values: list[Any]) -> list[Any]:
            if limit is None:
                return values
            return values[:limit] if self.truncation_side == "right" else values[max(len(values) - limit, 0):]

        return {name: [cut(list(itertools.compress(row, keep))) for row, keep in zip(rows, kept)]
                for name, rows in encoded.items()}

    def encode(self, text: str | list[str], text_pair: Any = None, **kwargs: Any) -> list[int]:
        """The ids of one text (see ``__call__``); the parent's skip ``__call__``."""
        return self(text, text_pair, **kwargs)["input_ids"]

    def tokenize(
        self, text: str, pair: str | None = None, add_special_tokens: bool = False, **kwargs: Any
    ) -> list[str]:
        """The tokens of ``text``'s ids (the parent's come from the Rust encoding, lone ``</w>`` included)."""
        return self.convert_ids_to_tokens(self.encode(text, pair, add_special_tokens=add_special_tokens, **kwargs))

    def decode(self, token_ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str | list[str]:
        """Bytes back to text, one space after each word that kept its ``</w>``, none at the very end."""
        decoded = super().decode(token_ids, skip_special_tokens=skip_special_tokens, **kwargs)
        return decoded.removesuffix(" ") if isinstance(decoded, str) else [one.removesuffix(" ") for one in decoded]


HfAttnTokenizerFast.register_for_auto_class("AutoTokenizer")
