"""Tokenizer for hf-attn: the IMDb tutorial's Week 3 byte-level BPE as a Hugging Face fast tokenizer.

``tokenizer.json`` holds the whole Week 3 encoder (built by ``hf_attn.week3.load_week3_tokenizer`` or
``train_week3_tokenizer``): the document's end-of-word symbol ``</w>`` is written ``Ġ``, the byte-level
symbol of a space, which no Week 3 word contains; a normalizer ends every word with one space, the
``ByteLevel`` pre-tokenizer turns it into ``Ġ``, and the merges run in Rust.

The one step BPE cannot do is drop a symbol. The document drops a lone ``</w>`` (a word whose last
symbol never merged with it); ``tokenizers`` emits it as the id of ``Ġ``, an id the document never
emits, and no ``tokenizers`` component (normalizer, pre-tokenizer, model, post-processor) can remove
a token once the model made it. ``HfAttnTokenizerFast._encode_plus`` removes that id, with numpy,
before truncating and padding, so its ids are exactly the document's; transformers' own Rust-backed
tokenizers with an encoding step of their own (``CodeLlamaTokenizer``, ``LukeTokenizer``) extend the
same method. Texts asked for ids alone are split into words by the normalizer's own pattern and each
distinct word of the batch is encoded once, in Rust. A plain ``PreTrainedTokenizerFast`` reading the
same ``tokenizer.json`` keeps those extra ids: load with
``AutoTokenizer.from_pretrained(path, trust_remote_code=True)`` or this class.

``save_pretrained`` copies this file next to the tokenizer, so it imports nothing from ``hf_attn``.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from transformers import BatchEncoding, PreTrainedTokenizerFast
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy

END_OF_WORD_TOKEN = "Ġ"
"""Week 3's ``</w>`` in ``tokenizer.json``: the byte-level symbol of a space."""


CHARACTERS_PER_WORD = 6
"""Characters searched per word wanted before the whole text is (about 5 a word in English reviews)."""

PIECES_PER_MISSING_TOKEN = 0.375
"""Pieces read, per token a truncated text still lacks, in each round of ``HfAttnTokenizerFast._truncated_ids``
(a review's piece is two or three tokens of the Week 3 vocabulary: most texts need one round and a short one)."""

WORDS_PER_CHUNK = 2048
"""Distinct words encoded in one Rust string (several strings run in parallel)."""

PER_TOKEN_OUTPUTS = ("return_offsets_mapping", "return_special_tokens_mask", "return_token_type_ids")
"""Outputs that need the Rust encoding of each whole text."""

LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_encodable(text: str, where: str) -> None:
    """A ValueError naming ``where`` when ``text`` holds a lone surrogate, which the Rust tokenizer cannot encode
    (a TypeError deep inside it otherwise). Python makes one of each byte that is not UTF-8 on the command
    line or in a file read with ``errors="surrogateescape"`` (U+DC80-U+DCFF: that byte plus 0xDC00).
    An ASCII text (most reviews) is known clean without a regex search."""
    found = None if text.isascii() else LONE_SURROGATE.search(text)
    if found is None:
        return
    code, before = ord(found.group()), text[: found.start()][-20:]
    if 0xDC80 <= code <= 0xDCFF:
        raise ValueError(f"{where} is not UTF-8: the byte 0x{code - 0xDC00:02x} after {before!r}; convert it to "
                         "UTF-8 (e.g. `iconv -f latin1 -t utf-8`)")
    raise ValueError(f"{where} holds a lone surrogate U+{code:04X} after {before!r} (half of a UTF-16 pair), which "
                     "is not text; remove it or join it with its other half")


def kept_positions(
    lengths: np.ndarray, dropped: np.ndarray, limit: int | None, keep_end: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Which tokens of a flattened batch stay, and how many per row: not ``dropped``, then at most ``limit``.

    ``lengths`` holds each row's token count, ``dropped`` one flag per token of the rows laid end to end.
    Returns the flat indices of the kept tokens, in order, and the kept count of each row; ``keep_end``
    keeps a row's last ``limit`` tokens instead of its first (left truncation).
    """
    rows = np.repeat(np.arange(len(lengths)), lengths)
    kept = np.flatnonzero(~dropped)
    kept_lengths = np.bincount(rows[kept], minlength=len(lengths))
    if limit is not None:
        row_starts = np.cumsum(kept_lengths) - kept_lengths
        position = np.arange(len(kept)) - np.repeat(row_starts, kept_lengths)
        from_end = np.repeat(kept_lengths, kept_lengths) - position
        kept = kept[from_end <= limit] if keep_end else kept[position < limit]
        kept_lengths = np.minimum(kept_lengths, limit)
    return kept, kept_lengths


def first_words(find_words: Callable[..., list[str]], text: str, count: int) -> list[str]:
    """The first ``count`` words of ``text``, looked for in its first ``CHARACTERS_PER_WORD * count`` characters
    first: when more than ``count`` words start there, the first ``count`` end there too."""
    words = find_words(text, 0, CHARACTERS_PER_WORD * count)
    return words[:count] if len(words) > count else find_words(text)[:count]


def ragged_take(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``values[starts[i]:starts[i] + lengths[i]]`` for every ``i``, laid end to end, without a Python loop."""
    offsets = np.cumsum(lengths) - lengths
    return values[np.repeat(starts - offsets, lengths) + np.arange(int(lengths.sum()))]


def split_heads(texts: list[str], counts: list[int]) -> tuple[list[str], np.ndarray, list[str]]:
    """The first ``counts[i]`` whitespace-separated pieces of each text ``i``, laid end to end; how many each text
    had; and the rest of each text after them ("" where none is left). ``str.split`` makes one list per text,
    dropped as soon as its pieces are copied: tens of thousands of live lists would make Python's garbage
    collector walk the caller's heap."""
    pieces: list[str] = []
    found = np.zeros(len(texts), dtype=np.int64)
    rests = [""] * len(texts)
    for row, (text, count) in enumerate(zip(texts, counts)):
        head = text.split(maxsplit=count)
        if len(head) > count:
            rests[row] = head.pop()
        found[row] = len(head)
        pieces += head
    return pieces, found, rests


def distinct_codes(items: list[str]) -> tuple[np.ndarray, list[str]]:
    """Each item's index among the distinct items, and the distinct items in order of first appearance: one dict
    pass (``setdefault`` keeps each item's first position), the rest in numpy."""
    first_seen: dict[str, int] = {}
    firsts = np.fromiter(map(first_seen.setdefault, items, itertools.count()), dtype=np.int64, count=len(items))
    index_of_first = np.zeros(len(items), dtype=np.int64)
    index_of_first[np.fromiter(first_seen.values(), dtype=np.int64, count=len(first_seen))] = np.arange(
        len(first_seen)
    )
    return index_of_first[firsts], list(first_seen)


def laid_out(
    table: np.ndarray, lengths: np.ndarray, codes: np.ndarray, parts_per_group: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Groups of parts by code: part ``i``'s values are ``table``'s ``lengths[i]`` values from the sum of the
    lengths before it; ``codes`` lists the parts of every group, ``parts_per_group[g]`` of them for group ``g``.
    Returns the groups' values laid end to end and each group's count."""
    starts = np.cumsum(lengths) - lengths
    part_lengths = lengths[codes]
    group_of_part = np.repeat(np.arange(len(parts_per_group)), parts_per_group)
    group_lengths = np.bincount(group_of_part, weights=part_lengths, minlength=len(parts_per_group))
    return ragged_take(table, starts[codes], part_lengths), group_lengths.astype(np.int64)


def append_to_rows(
    values: np.ndarray, lengths: np.ndarray, more_values: np.ndarray, more_lengths: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``lengths`` laid end to end in ``values``, with the rows of ``more_values`` (``more_lengths`` each)
    appended to the distinct rows ``rows``: the values laid end to end again, and the new lengths. Each value
    is written once at its new place (no sort)."""
    new_lengths = lengths.copy()
    new_lengths[rows] += more_lengths
    new_starts = np.cumsum(new_lengths) - new_lengths
    appended = np.empty(len(values) + len(more_values), dtype=values.dtype)
    starts, more_starts = np.cumsum(lengths) - lengths, np.cumsum(more_lengths) - more_lengths
    appended[np.repeat(new_starts - starts, lengths) + np.arange(len(values))] = values
    more_places = np.repeat(new_starts[rows] + lengths[rows] - more_starts, more_lengths)
    appended[more_places + np.arange(len(more_values))] = more_values
    return appended, new_lengths


def padded_width(
    lengths: np.ndarray, strategy: PaddingStrategy, max_length: int | None, multiple: int | None
) -> int | None:
    """The row length ``pad`` gives rows of ``lengths``, or None when they stay ragged (no padding, or a
    row longer than ``max_length``)."""
    longest = int(lengths.max(initial=0))
    if strategy == PaddingStrategy.LONGEST:
        width = longest
    elif strategy == PaddingStrategy.MAX_LENGTH and max_length is not None:
        width = max_length
    else:
        return None
    if multiple is not None and width % multiple:
        width = (width // multiple + 1) * multiple
    return width if longest <= width else None


def padded_rows(
    values: np.ndarray, lengths: np.ndarray, width: int, pad_id: int, left: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``lengths`` laid end to end in ``values`` as a ``[rows, width]`` matrix padded with ``pad_id``
    (on the left when ``left``), and the mask of the values: what ``pad`` makes of lists, without one."""
    row_starts = np.cumsum(lengths) - lengths
    columns = np.arange(len(values)) - np.repeat(row_starts - (width - lengths if left else 0), lengths)
    rows = np.repeat(np.arange(len(lengths)), lengths)
    ids = np.full((len(lengths), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(lengths), width), dtype=np.int64)
    ids[rows, columns] = values
    mask[rows, columns] = 1
    return ids, mask


WORD_PATTERN = re.compile(r"\w+|[^\w\s]")
"""A Week 3 word: a run of Python ``\\w`` characters, or any one character that is neither that nor space."""


@functools.cache
def word_end_pattern() -> str:
    """Oniguruma regex matching each word's trailing whitespace (after ``\\K``), or leading whitespace.

    Replacing its matches by one space (the normalizer of ``tokenizer.json``) leaves every word of
    ``WORD_PATTERN`` followed by exactly one space and no other whitespace. The classes are Python's
    Unicode ``\\w`` and ``\\s`` of the running interpreter, frozen into ``tokenizer.json``, so a saved
    tokenizer splits the same way everywhere.
    """
    word = character_class(r"\w")
    space = character_class(r"\s")
    return f"(?:[{word}]+|[^{word}{space}])\\K[{space}]*|[{space}]+"


@functools.cache
def character_class(pattern: str) -> str:
    """The code points Python's ``re`` matches with ``pattern`` (``\\w`` or ``\\s``), as an Oniguruma class body."""
    ranges = []
    for first, last in ((0, 0xD7FF), (0xE000, 0x10FFFF)):  # lone surrogates cannot reach a tokenizer
        block = "".join(map(chr, range(first, last + 1)))
        ranges.extend((first + m.start(), first + m.end() - 1) for m in re.finditer(f"{pattern}+", block))
    return "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)


@functools.lru_cache(maxsize=8)
def normalizer_words(normalizer_json: bytes) -> re.Pattern[str]:
    """The words a Week 3 normalizer ends with a space, as a Python pattern.

    The normalizer's pattern is ``word_end_pattern()`` of the interpreter that built it; its part before
    ``\\K`` finds the words. When its classes are this interpreter's ``\\w`` and ``\\s`` that is
    ``WORD_PATTERN`` (``re``'s built-in classes are fast); otherwise the frozen classes, in Python's escapes.
    Cached on the normalizer's JSON, so encoding never changes a tokenizer object.
    """
    words = json.loads(normalizer_json)["pattern"]["Regex"].split("\\K")[0]
    if words == word_end_pattern().split("\\K")[0]:
        return WORD_PATTERN
    return re.compile(re.sub(r"\\x\{([0-9A-F]+)\}", lambda code: f"\\U{int(code[1], 16):08X}", words))


class HfAttnTokenizerFast(PreTrainedTokenizerFast):
    """Fast tokenizer with the Week 3 ids: ``[PAD]`` padding, ``model_max_length = max_seq``.

    ``tokenizer(texts, truncation=True, padding="max_length")`` gives the Week 3 ``input_ids`` and
    ``attention_mask`` (the notebook's ``padding_mask``). Truncation and padding are transformers':
    ``tokenizer(text)`` keeps every token, ``truncation=True`` the first ``model_max_length`` (the
    length the saved model was trained at), ``truncation=True, max_length=N`` the first N.

    Tokens read as byte-level strings where ``Ġ`` stands for ``</w>`` (``"the</w>"`` is ``"theĠ"``).
    There is no sentence-pair format, and encodings carry no Rust ``Encoding`` objects (ids were
    removed after Rust made them), so ``BatchEncoding.word_ids()`` and friends are unavailable;
    ``return_offsets_mapping`` works.
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

    @property
    def word_pattern(self) -> re.Pattern[str]:
        """The words the normalizer ends with a space, as a Python pattern (see ``normalizer_words``)."""
        return normalizer_words(self.backend_tokenizer.normalizer.__getstate__())

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
        """The ids without the lone ``</w>``, then truncated and padded as transformers does.

        The lone ``</w>`` must go before truncation counts tokens, and transformers has no public step
        between the Rust encoding and truncation. Rows padded to one length are laid out by numpy
        (``padded_rows``, what ``pad`` makes of them); ragged rows and per-token outputs go through ``pad``.
        Texts asked only for ids take the word route (``_word_level_ids``); offsets, pre-split words and
        the other per-token outputs come from the parent's Rust encodings.
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
        limit = None if truncation_strategy == TruncationStrategy.DO_NOT_TRUNCATE else max_length
        keep_end = self.truncation_side == "left"
        by_whole_texts = (
            is_split_into_words
            or any(kwargs.get(name) for name in PER_TOKEN_OUTPUTS)
            or kwargs.get("split_special_tokens") is False  # "[PAD]" in a text read as the token: Rust's matching
            or not all(isinstance(one, str) for one in texts)  # the parent's error names the accepted types
        )
        if by_whole_texts:
            encoded = super()._encode_plus(
                texts, is_split_into_words=is_split_into_words, max_length=max_length, return_attention_mask=False,
                **kwargs,
            )
            rows = encoded.pop("input_ids")
            lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
            flat_ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=int(lengths.sum()))
            extras = {name: np.array(list(itertools.chain.from_iterable(values))) for name, values in encoded.items()}
        else:
            flat_ids, lengths = self._word_level_ids(texts, limit, keep_end)
            extras = {}
        kept, kept_lengths = kept_positions(lengths, flat_ids == self.end_of_word_id, limit, keep_end=keep_end)
        width = padded_width(kept_lengths, padding_strategy, max_length, pad_to_multiple_of)
        if width is not None and not extras and self.pad_token_id is not None:  # every row as long: numpy pads
            left = (padding_side or self.padding_side) == "left"
            ids, mask = padded_rows(flat_ids[kept], kept_lengths, width, self.pad_token_id, left)
            data = {"input_ids": ids}
            if return_attention_mask or (return_attention_mask is None and "attention_mask" in self.model_input_names):
                data["attention_mask"] = mask
            if return_length:
                data["length"] = np.full(len(texts), width, dtype=np.int64)
            if return_tensors is None:
                data = {name: values.tolist() if batched else values[0].tolist() for name, values in data.items()}
            return BatchEncoding(data, tensor_type=return_tensors)
        row_ends = np.cumsum(kept_lengths)[:-1]
        data = {name: [row.tolist() for row in np.split(flat[kept], row_ends)] if texts else [] for name, flat in
                {"input_ids": flat_ids, **extras}.items()}
        offsets = data.pop("offset_mapping", None)
        data = dict(
            self.pad(
                data,
                padding=padding_strategy,
                max_length=max_length,
                pad_to_multiple_of=pad_to_multiple_of,
                padding_side=padding_side,
                return_attention_mask=return_attention_mask,
            )
        )
        if offsets is not None:  # pad() knows nothing of offsets: padding gets (0, 0), as in tokenizers
            right = (padding_side or self.padding_side) == "right"
            fills = [[(0, 0)] * (len(ids) - len(spans)) for spans, ids in zip(offsets, data["input_ids"])]
            offsets = [[tuple(span) for span in spans] for spans in offsets]
            data["offset_mapping"] = [spans + fill if right else fill + spans for spans, fill in zip(offsets, fills)]
        if return_length:
            data["length"] = [len(ids) for ids in data["input_ids"]]
        if not batched and return_tensors is None:  # like transformers: tensors keep the batch axis
            data = {name: values[0] for name, values in data.items()}
        elif return_tensors is not None and len(set(map(len, data["input_ids"]))) == 1:
            data = {name: np.array(values, dtype=np.int64) for name, values in data.items()}  # faster than torch
        return BatchEncoding(data, tensor_type=return_tensors)

    def _word_level_ids(self, texts: list[str], limit: int | None, keep_end: bool) -> tuple[np.ndarray, np.ndarray]:
        """The texts' Rust ids (lone ``</w>`` included) laid end to end and each text's count, every distinct
        piece of text encoded once.

        A word's ids never depend on its neighbours (no merge crosses a ``</w>``), so a text's ids are
        its words' ids in order. The Rust tokenizer given a whole text merges it as one sequence, every
        word anew; a batch of reviews repeats most of its words. With ``WORD_PATTERN`` (whose ``\\s`` is
        ``str.isspace``) the pieces are ``str.split``'s, whole words with the punctuation beside them, found
        in C; otherwise the pattern's words. Truncating to ``limit`` tokens needs at most ``limit`` pieces
        (each word keeps at least one token), and usually far fewer: see ``_truncated_ids``.
        """
        find_words = self.word_pattern.findall
        by_spaces = self.word_pattern is WORD_PATTERN
        if by_spaces and limit and not keep_end:
            return self._truncated_ids(texts, np.full(len(texts), limit))
        if limit is None:
            pieces_of_texts = [text.split() if by_spaces else find_words(text) for text in texts]
        elif keep_end:
            pieces_of_texts = [(text.rsplit(maxsplit=limit) if by_spaces else find_words(text))[-limit:]
                               if limit else [] for text in texts]
        else:
            pieces_of_texts = [first_words(find_words, text, limit) for text in texts]
        pieces_per_text = np.fromiter(map(len, pieces_of_texts), dtype=np.int64, count=len(pieces_of_texts))
        return self._ids_of_pieces(list(itertools.chain.from_iterable(pieces_of_texts)), pieces_per_text)

    def _truncated_ids(self, texts: list[str], missing: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``_word_level_ids`` of texts truncated to their first tokens, ``missing[i]`` of them for text ``i``: each
        text's first pieces, read in rounds until they hold that many tokens or the text ends.

        A piece keeps at least one token, so a text short of ``missing`` tokens needs at most ``missing`` more
        pieces; with a few hundred tokens in the vocabulary a piece is two or three, so a round reads
        ``PIECES_PER_MISSING_TOKEN`` of that (at least one), and the texts still short go to the next round on
        what is left of them, its ids appended after this round's (``append_to_rows``). Every piece read costs
        its split and its look-up, so reading fewer than the bound pays for the extra rounds.
        """
        counts = np.ceil(missing * PIECES_PER_MISSING_TOKEN).astype(np.int64)
        pieces, pieces_per_text, rests = split_heads(texts, counts.tolist())
        ids, lengths = self._ids_of_pieces(pieces, pieces_per_text)
        text_of_id = np.repeat(np.arange(len(texts)), lengths)
        missing = missing - np.bincount(text_of_id, weights=ids != self.end_of_word_id, minlength=len(texts))
        short = np.flatnonzero((missing > 0) & np.fromiter(map(bool, rests), dtype=bool, count=len(rests)))
        if len(short):
            more = self._truncated_ids([rests[row] for row in short.tolist()], missing[short])
            ids, lengths = append_to_rows(ids, lengths, *more, short)
        return ids, lengths

    def _ids_of_pieces(self, pieces: list[str], pieces_per_text: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The Rust ids of texts' pieces (``pieces``, laid end to end, ``pieces_per_text`` of them to each text),
        laid end to end, and each text's count (see ``_word_level_ids``).

        A batch repeats its pieces ("movie.", "it's") and, more still, their words: each distinct piece is split
        into its words once, each distinct word encoded once, and the ids are laid out by numpy, word ids into
        piece ids, piece ids into the texts'."""
        piece_codes, pieces = distinct_codes(pieces)
        # A piece goes to Rust as its words, so that "[PAD]" in a text stays three words, as in the document.
        # No list per piece is kept: many live lists make Python's garbage collector walk the caller's heap.
        if self.word_pattern is WORD_PATTERN:
            find_words = self.word_pattern.findall
            word_codes, words = distinct_codes(list(itertools.chain.from_iterable(map(find_words, pieces))))
            words_per_piece = np.fromiter(map(len, map(find_words, pieces)), dtype=np.int64, count=len(pieces))
        else:
            word_codes, words, words_per_piece = np.arange(len(pieces)), pieces, np.ones(len(pieces), dtype=np.int64)
        word_table = self._distinct_word_ids(words)
        word_lengths = np.diff(np.flatnonzero(self._ends_word(word_table)) + 1, prepend=0)
        piece_table, piece_lengths = laid_out(word_table, word_lengths, word_codes, words_per_piece)
        return laid_out(piece_table, piece_lengths, piece_codes, pieces_per_text)

    def _distinct_word_ids(self, words: list[str]) -> np.ndarray:
        """The Rust ids of ``words`` laid end to end, a few thousand words to a string: one Rust encoding per
        word costs more than its merges, and no merge crosses the space between two words."""
        chunks = [" ".join(words[start:start + WORDS_PER_CHUNK]) for start in range(0, len(words), WORDS_PER_CHUNK)]
        encodings = self.backend_tokenizer.encode_batch_fast(chunks, add_special_tokens=False)
        return np.fromiter(itertools.chain.from_iterable(encoding.ids for encoding in encodings), dtype=np.int64)

    def _ends_word(self, ids: np.ndarray) -> np.ndarray:
        """Whether each id is a word's last token: its string ends with ``</w>`` (merged or lone)."""
        distinct = np.unique(ids)
        ends = np.zeros(int(distinct.max(initial=0)) + 1, dtype=bool)
        ends[distinct] = [token.endswith(END_OF_WORD_TOKEN) for token in self.convert_ids_to_tokens(distinct.tolist())]
        return ends[ids]

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
