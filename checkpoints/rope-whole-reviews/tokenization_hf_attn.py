"""Tokenizer for hf-attn: the IMDb tutorial's Week 3 byte-level BPE as a Hugging Face fast tokenizer.

``tokenizer.json`` holds the whole Week 3 encoder (built by ``hf_attn.week3.load_week3_tokenizer`` or
``train_week3_tokenizer``): the document's end-of-word symbol ``</w>`` is written ``Ġ``, the byte-level
symbol of a space, which no Week 3 word contains; a normalizer ends every word with one space, the
``ByteLevel`` pre-tokenizer turns it into ``Ġ``, and the merges run in Rust.

The one step BPE cannot do is drop a symbol. The document drops a lone ``</w>`` (a word whose last
symbol never merged with it); ``tokenizers`` emits it as the id of ``Ġ``, an id the document never
emits. ``HfAttnTokenizerFast`` removes that id before truncating and padding, so its ids are exactly
the document's. A plain ``PreTrainedTokenizerFast`` reading the same ``tokenizer.json`` keeps those
extra ids: load with ``AutoTokenizer.from_pretrained(path, trust_remote_code=True)`` or this class.

``save_pretrained`` copies this file next to the tokenizer, so it imports nothing from ``hf_attn``.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from transformers import BatchEncoding, PreTrainedTokenizerFast
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy

END_OF_WORD_TOKEN = "Ġ"
"""Week 3's ``</w>`` in ``tokenizer.json``: the byte-level symbol of a space."""


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_encodable(text: str, where: str) -> None:
    """A ValueError naming ``where`` when ``text`` holds a lone surrogate, which the Rust tokenizer cannot encode
    (a TypeError deep inside it otherwise). Python makes one of each byte that is not UTF-8 on the command
    line or in a file read with ``errors="surrogateescape"`` (U+DC80-U+DCFF: that byte plus 0xDC00)."""
    found = LONE_SURROGATE.search(text)
    if found is None:
        return
    code, before = ord(found.group()), text[: found.start()][-20:]
    if 0xDC80 <= code <= 0xDCFF:
        raise ValueError(f"{where} is not UTF-8: the byte 0x{code - 0xDC00:02x} after {before!r}; convert it to "
                         "UTF-8 (e.g. `iconv -f latin1 -t utf-8`)")
    raise ValueError(f"{where} holds a lone surrogate U+{code:04X} after {before!r} (half of a UTF-16 pair), which "
                     "is not text; remove it or join it with its other half")


def default_truncation(truncation: bool | str | TruncationStrategy | None) -> bool | str | TruncationStrategy:
    """``truncation`` as given, or True (to ``max_length``, else ``model_max_length``) when the caller left it out."""
    return True if truncation is None else truncation


class HfAttnTokenizerFast(PreTrainedTokenizerFast):
    """Fast tokenizer with the Week 3 ids: ``[PAD]`` padding, ``model_max_length = max_seq``.

    ``tokenizer(texts, truncation=True, padding="max_length")`` gives the Week 3 ``input_ids`` and
    ``attention_mask`` (the notebook's ``padding_mask``).

    Length policy: a call that does not pass ``truncation`` (``tokenizer(text)``, ``tokenizer.encode(text)``)
    keeps a text's first ``model_max_length`` tokens, the length the saved model was trained at.
    ``pipeline("text-classification")``, ``hf-attn predict`` and ``hf-attn evaluate`` all tokenize through
    this class, so they read the same tokens of a long review and agree on it; and a 1 MB review no
    longer runs for minutes, as the model reads its first tokens only. ``truncation=False`` gives every token
    (``tokenize`` too, as in transformers), ``truncation=True, max_length=N`` the first N; a scheme that
    extrapolates (RoPE, ALiBi, sinusoidal) can read more than it was trained at that way.

    Tokens read as byte-level strings where
    ``Ġ`` stands for ``</w>`` (``"the</w>"`` is ``"theĠ"``). There is no sentence-pair format, and
    encodings carry no Rust ``Encoding`` objects (ids were removed after Rust made them), so
    ``BatchEncoding.word_ids()`` and friends are unavailable; ``return_offsets_mapping`` works.
    """

    model_input_names: ClassVar[list[str]] = ["input_ids", "attention_mask"]
    padding_side = "right"
    truncation_side = "right"

    # No __init__ on purpose: transformers loads tokenizer.json as-is only for classes without one;
    # for the others it rebuilds a bare BPE from the vocabulary, losing the Week 3 pre-tokenization.

    @property
    def end_of_word_id(self) -> int:
        """Id of ``Ġ`` (32): the Rust tokenizer's lone ``</w>``, which the Week 3 ids never contain."""
        return self.convert_tokens_to_ids(END_OF_WORD_TOKEN)

    def __call__(
        self, *args: Any, truncation: bool | str | TruncationStrategy | None = None, **kwargs: Any
    ) -> BatchEncoding:
        """The parent's call, truncated to ``model_max_length`` unless ``truncation`` is given (the length policy)."""
        return super().__call__(*args, truncation=default_truncation(truncation), **kwargs)

    def encode(
        self, *args: Any, truncation: bool | str | TruncationStrategy | None = None, **kwargs: Any
    ) -> list[int]:
        """The parent's ``encode``, truncated to ``model_max_length`` unless ``truncation`` is given."""
        return super().encode(*args, truncation=default_truncation(truncation), **kwargs)

    def _encode_plus(
        self,
        text: str | list[str] | list[list[str]],
        text_pair: Any = None,
        padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
        truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
        max_length: int | None = None,
        is_split_into_words: bool = False,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_tensors: Any = None,
        return_attention_mask: bool | None = None,
        return_overflowing_tokens: bool = False,
        return_length: bool = False,
        **kwargs: Any,
    ) -> BatchEncoding:
        """Rust encodings without the lone ``</w>`` id, then truncated and padded.

        Overridden because every ``__call__``/``encode`` lands here and transformers offers no public
        hook between the Rust encoding and truncation, while the lone ``</w>`` must go before
        truncation counts tokens. Everything else is the parent's: encoding, ``pad``, tensors.
        """
        if text_pair is not None:
            raise ValueError("Week 3 has no sentence-pair format (no separator token): encode each text on its own.")
        if return_overflowing_tokens:
            raise ValueError("return_overflowing_tokens is not supported: Week 3 truncates and keeps the start.")
        if is_split_into_words:
            batched = isinstance(text, (list, tuple)) and bool(text) and isinstance(text[0], (list, tuple))
        else:
            batched = isinstance(text, (list, tuple))
        texts = text if batched else [text]
        for index, one in enumerate(texts if not is_split_into_words else []):
            if isinstance(one, str):
                check_encodable(one, f"text {index + 1}" if batched else "the text")
        encoded = super()._encode_plus(
            texts,
            is_split_into_words=is_split_into_words,
            max_length=max_length,
            return_attention_mask=False,
            **kwargs,
        )
        limit = None if truncation_strategy == TruncationStrategy.DO_NOT_TRUNCATE else max_length
        end_of_word_id = self.end_of_word_id
        rows = {name: [] for name in encoded}
        for index, ids in enumerate(encoded["input_ids"]):
            kept = [position for position, token_id in enumerate(ids) if token_id != end_of_word_id]
            if limit is not None:
                kept = kept[-limit:] if self.truncation_side == "left" else kept[:limit]
            for name, values in encoded.items():
                rows[name].append([values[index][position] for position in kept])
        offsets = rows.pop("offset_mapping", None)
        padded = self.pad(
            rows,
            padding=padding_strategy,
            max_length=max_length,
            pad_to_multiple_of=pad_to_multiple_of,
            padding_side=padding_side,
            return_attention_mask=return_attention_mask,
        )
        data = dict(padded)
        if offsets is not None:  # pad() knows nothing of offsets: padding gets (0, 0), as in tokenizers
            right = (padding_side or self.padding_side) == "right"
            fills = [[(0, 0)] * (len(ids) - len(spans)) for spans, ids in zip(offsets, data["input_ids"])]
            data["offset_mapping"] = [spans + fill if right else fill + spans for spans, fill in zip(offsets, fills)]
        if return_length:
            data["length"] = [len(ids) for ids in data["input_ids"]]
        if not batched and return_tensors is None:  # like transformers: tensors keep the batch axis
            data = {name: values[0] for name, values in data.items()}
        return BatchEncoding(data, tensor_type=return_tensors)

    def tokenize(
        self, text: str, pair: str | None = None, add_special_tokens: bool = False, **kwargs: Any
    ) -> list[str]:
        """The tokens of ``text``'s ids, all of them unless ``truncation`` is passed (the parent's come from the
        Rust encoding, lone ``</w>`` included)."""
        kwargs.setdefault("truncation", False)
        return self.convert_ids_to_tokens(self.encode(text, pair, add_special_tokens=add_special_tokens, **kwargs))

    def decode(self, token_ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str | list[str]:
        """Bytes back to text, one space after each word that kept its ``</w>``, none at the very end."""
        decoded = super().decode(token_ids, skip_special_tokens=skip_special_tokens, **kwargs)
        return decoded.removesuffix(" ") if isinstance(decoded, str) else [one.removesuffix(" ") for one in decoded]


HfAttnTokenizerFast.register_for_auto_class("AutoTokenizer")
