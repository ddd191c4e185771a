"""Week 3 ids of a large batch of texts, opt-in: each distinct word of the batch encoded once, laid out by numpy.

``HfAttnTokenizerFast`` (the class a saved model ships) asks the Rust tokenizer for every token of every
text, which merges every word of every text anew. ``encode_batch(tokenizer, texts, ...)`` gives the same
``input_ids`` and ``attention_mask`` several times faster on a batch of reviews, which repeats most of its
words: a text's ids are its words' ids in order (no merge crosses a ``</w>``), so each distinct word is
encoded once and the texts are laid out from the words' ids. The package's own bulk encoding (the Week 3
tensors of ``hf-attn prepare``, the datasets of the experiments) calls it; ``docs/week3.md`` has the
figures and the command that measures them.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable

import numpy as np
from transformers import BatchEncoding
from transformers.tokenization_utils_base import PaddingStrategy

from ..tokenization_hf_attn import END_OF_WORD_TOKEN, HfAttnTokenizerFast, check_encodable
from .bpe import word_end_pattern
from .files import WORD_PATTERN

CHARACTERS_PER_WORD = 6
"""Characters searched per word wanted before the whole text is (about 5 a word in English reviews)."""

PIECES_PER_MISSING_TOKEN = 0.375
"""Pieces read, per token a truncated text still lacks, in each round of ``truncated_ids``
(a review's piece is two or three tokens of the Week 3 vocabulary: most texts need one round and a short one)."""

WORDS_PER_CHUNK = 2048
"""Distinct words encoded in one Rust string (several strings run in parallel)."""



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


def encode_batch(
    tokenizer: HfAttnTokenizerFast,
    texts: list[str],
    *,
    truncation: bool = False,
    max_length: int | None = None,
    padding: bool | str = False,
    pad_to_multiple_of: int | None = None,
    return_tensors: str | None = None,
) -> BatchEncoding:
    """``tokenizer(texts, truncation=..., max_length=..., padding=..., pad_to_multiple_of=..., return_tensors=...)``'s
    ``input_ids`` and ``attention_mask``, word by word (see the module doc); truncation and padding sides are the
    tokenizer's. Rows padded to one length are laid out by numpy (``padded_rows``), ragged rows go through ``pad``.
    """
    for index, text in enumerate(texts):
        check_encodable(text, f"text {index + 1}")
    pad_length = tokenizer.model_max_length if max_length is None else max_length
    limit = tokenizer.truncation_length(truncation, max_length)
    keep_end = tokenizer.truncation_side == "left"
    flat_ids, lengths = word_level_ids(tokenizer, texts, limit, keep_end)
    kept, kept_lengths = kept_positions(lengths, flat_ids == tokenizer.end_of_word_id, limit, keep_end=keep_end)
    strategy = PaddingStrategy.LONGEST if padding is True else PaddingStrategy(padding or "do_not_pad")
    width = padded_width(kept_lengths, strategy, pad_length, pad_to_multiple_of)
    if width is None:
        rows = [row.tolist() for row in np.split(flat_ids[kept], np.cumsum(kept_lengths)[:-1])] if texts else []
        return tokenizer.pad({"input_ids": rows}, padding=strategy, max_length=pad_length,
                             pad_to_multiple_of=pad_to_multiple_of, return_tensors=return_tensors, verbose=False)
    left = tokenizer.padding_side == "left"
    ids, mask = padded_rows(flat_ids[kept], kept_lengths, width, tokenizer.pad_token_id, left)
    if return_tensors is None:
        return BatchEncoding({"input_ids": ids.tolist(), "attention_mask": mask.tolist()})
    return BatchEncoding({"input_ids": ids, "attention_mask": mask}, tensor_type=return_tensors)


def word_pattern(tokenizer: HfAttnTokenizerFast) -> re.Pattern[str]:
    """The words ``tokenizer``'s normalizer ends with a space, as a Python pattern (see ``normalizer_words``)."""
    return normalizer_words(tokenizer.backend_tokenizer.normalizer.__getstate__())


def word_level_ids(
    tokenizer: HfAttnTokenizerFast, texts: list[str], limit: int | None, keep_end: bool
) -> tuple[np.ndarray, np.ndarray]:
    """The texts' Rust ids (lone ``</w>`` included) laid end to end and each text's count, every distinct
    piece of text encoded once.

    A word's ids never depend on its neighbours (no merge crosses a ``</w>``), so a text's ids are
    its words' ids in order. The Rust tokenizer given a whole text merges it as one sequence, every
    word anew; a batch of reviews repeats most of its words. With ``WORD_PATTERN`` (whose ``\\s`` is
    ``str.isspace``) the pieces are ``str.split``'s, whole words with the punctuation beside them, found
    in C; otherwise the pattern's words. Truncating to ``limit`` tokens needs at most ``limit`` pieces
    (each word keeps at least one token), and usually far fewer: see ``truncated_ids``.
    """
    pattern = word_pattern(tokenizer)
    find_words, by_spaces = pattern.findall, pattern is WORD_PATTERN
    if by_spaces and limit and not keep_end:
        return truncated_ids(tokenizer, texts, np.full(len(texts), limit))
    if limit is None:
        pieces_of_texts = [text.split() if by_spaces else find_words(text) for text in texts]
    elif keep_end:
        pieces_of_texts = [(text.rsplit(maxsplit=limit) if by_spaces else find_words(text))[-limit:]
                           if limit else [] for text in texts]
    else:
        pieces_of_texts = [first_words(find_words, text, limit) for text in texts]
    pieces_per_text = np.fromiter(map(len, pieces_of_texts), dtype=np.int64, count=len(pieces_of_texts))
    return ids_of_pieces(tokenizer, list(itertools.chain.from_iterable(pieces_of_texts)), pieces_per_text)


def truncated_ids(
    tokenizer: HfAttnTokenizerFast, texts: list[str], missing: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``word_level_ids`` of texts truncated to their first tokens, ``missing[i]`` of them for text ``i``: each
    text's first pieces, read in rounds until they hold that many tokens or the text ends.

    A piece keeps at least one token, so a text short of ``missing`` tokens needs at most ``missing`` more
    pieces; with a few hundred tokens in the vocabulary a piece is two or three, so a round reads
    ``PIECES_PER_MISSING_TOKEN`` of that (at least one), and the texts still short go to the next round on
    what is left of them, its ids appended after this round's (``append_to_rows``). Every piece read costs
    its split and its look-up, so reading fewer than the bound pays for the extra rounds.
    """
    counts = np.ceil(missing * PIECES_PER_MISSING_TOKEN).astype(np.int64)
    pieces, pieces_per_text, rests = split_heads(texts, counts.tolist())
    ids, lengths = ids_of_pieces(tokenizer, pieces, pieces_per_text)
    text_of_id = np.repeat(np.arange(len(texts)), lengths)
    missing = missing - np.bincount(text_of_id, weights=ids != tokenizer.end_of_word_id, minlength=len(texts))
    short = np.flatnonzero((missing > 0) & np.fromiter(map(bool, rests), dtype=bool, count=len(rests)))
    if len(short):
        more = truncated_ids(tokenizer, [rests[row] for row in short.tolist()], missing[short])
        ids, lengths = append_to_rows(ids, lengths, *more, short)
    return ids, lengths


def ids_of_pieces(
    tokenizer: HfAttnTokenizerFast, pieces: list[str], pieces_per_text: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The Rust ids of texts' pieces (``pieces``, laid end to end, ``pieces_per_text`` of them to each text),
    laid end to end, and each text's count (see ``word_level_ids``).

    A batch repeats its pieces ("movie.", "it's") and, more still, their words: each distinct piece is split
    into its words once, each distinct word encoded once, and the ids are laid out by numpy, word ids into
    piece ids, piece ids into the texts'."""
    piece_codes, pieces = distinct_codes(pieces)
    # A piece goes to Rust as its words, so that "[PAD]" in a text stays three words, as in the document.
    # No list per piece is kept: many live lists make Python's garbage collector walk the caller's heap.
    if word_pattern(tokenizer) is WORD_PATTERN:
        find_words = WORD_PATTERN.findall
        word_codes, words = distinct_codes(list(itertools.chain.from_iterable(map(find_words, pieces))))
        words_per_piece = np.fromiter(map(len, map(find_words, pieces)), dtype=np.int64, count=len(pieces))
    else:
        word_codes, words, words_per_piece = np.arange(len(pieces)), pieces, np.ones(len(pieces), dtype=np.int64)
    word_table = distinct_word_ids(tokenizer, words)
    word_lengths = np.diff(np.flatnonzero(ends_word(tokenizer, word_table)) + 1, prepend=0)
    piece_table, piece_lengths = laid_out(word_table, word_lengths, word_codes, words_per_piece)
    return laid_out(piece_table, piece_lengths, piece_codes, pieces_per_text)


def distinct_word_ids(tokenizer: HfAttnTokenizerFast, words: list[str]) -> np.ndarray:
    """The Rust ids of ``words`` laid end to end, a few thousand words to a string: one Rust encoding per
    word costs more than its merges, and no merge crosses the space between two words."""
    chunks = [" ".join(words[start:start + WORDS_PER_CHUNK]) for start in range(0, len(words), WORDS_PER_CHUNK)]
    encodings = tokenizer.backend_tokenizer.encode_batch_fast(chunks, add_special_tokens=False)
    return np.fromiter(itertools.chain.from_iterable(encoding.ids for encoding in encodings), dtype=np.int64)


def ends_word(tokenizer: HfAttnTokenizerFast, ids: np.ndarray) -> np.ndarray:
    """Whether each id is a word's last token: its string ends with ``</w>`` (merged or lone)."""
    distinct = np.unique(ids)
    ends = np.zeros(int(distinct.max(initial=0)) + 1, dtype=bool)
    ends[distinct] = [token.endswith(END_OF_WORD_TOKEN) for token in tokenizer.convert_ids_to_tokens(distinct.tolist())]
    return ends[ids]
