"""The Week 3 byte-level BPE: its trainer, and its conversion to and from ``HfAttnTokenizerFast``.

How the documented encoder (``shared/docs/week3-format.md``) maps onto ``tokenizers``; ids are
identical, and the tests check it against an independent reference:

* The end-of-word symbol ``</w>`` becomes ``Ġ``, the byte-level symbol of the space byte. A Week 3
  word never holds a space (whitespace separates words), so ``Ġ`` is free, and a token such as
  ``e</w>`` becomes ``eĠ``, which the stock ``ByteLevel`` decoder already reads as "e ".
* The normalizer replaces each word's trailing whitespace (or nothing, as in ``don't``) by a single
  space, with a regex whose ``\\w``/``\\s`` classes are Python ``re``'s Unicode ones spelled out
  code point by code point: Oniguruma's own ``\\w`` also takes combining marks and connector
  punctuation, and its ``\\s`` misses U+001C-U+001F. The ``ByteLevel`` pre-tokenizer then maps the
  bytes, so every word ends with a separate ``Ġ`` symbol, as ``</w>`` in the document. BPE runs on
  the whole text at once: no merge can cross a word boundary because ``</w>`` only ever ends a
  merge's right part (``Week3Files.validate`` enforces it).
* BPE cannot drop a symbol, so a lone ``</w>`` comes out as the id of ``Ġ``; ``HfAttnTokenizerFast``
  removes it (see ``hf_attn/tokenization_hf_attn.py``), and so does ``hf_attn.week3.batch_encoding``.
"""

from __future__ import annotations

import functools
import heapq
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from ..tokenization_hf_attn import END_OF_WORD_TOKEN, HfAttnTokenizerFast
from .files import (
    BYTE_ENCODER,
    BYTE_VOCAB_SIZE,
    END_OF_WORD,
    WORD_PATTERN,
    Week3Files,
    read_week3_files,
    week3_config,
    week3_vocab,
)


def load_week3_tokenizer(path: str | Path, **kwargs: Any) -> HfAttnTokenizerFast:
    """The tokenizer of a Week 3 folder (``datasets/`` + ``models/``) or of a folder holding the three JSON files.

    ``kwargs`` go to ``HfAttnTokenizerFast`` (for example ``model_max_length``, default ``max_seq``).
    """
    return tokenizer_from_week3_files(read_week3_files(path), **kwargs)


def tokenizer_from_week3_files(files: Week3Files, **kwargs: Any) -> HfAttnTokenizerFast:
    """Build the tokenizer from already-read Week 3 file content."""
    files.validate()
    kwargs.setdefault("model_max_length", files.config["max_seq"])
    # Week 3 reads "[PAD]" typed in a review as five characters, not as the pad token.
    kwargs.setdefault("split_special_tokens", True)
    # transformers' cleanup is meant for WordPiece and warns on BPE; the tokenizer's decode does the spacing.
    kwargs.setdefault("clean_up_tokenization_spaces", False)
    return HfAttnTokenizerFast(
        tokenizer_object=build_backend_tokenizer(files), pad_token=files.config["pad_token"], **kwargs
    )


def week3_files_from_tokenizer(tokenizer: HfAttnTokenizerFast) -> Week3Files:
    """The Week 3 merges, vocabulary and config equivalent to ``tokenizer``."""
    model = json.loads(tokenizer.backend_tokenizer.to_str())["model"]
    merges = [(_from_internal(left), _from_internal(right)) for left, right in model["merges"]]
    vocab = {
        (token if i == tokenizer.end_of_word_id else _from_internal(token)): i for token, i in model["vocab"].items()
    }
    vocab = dict(sorted(vocab.items(), key=lambda item: item[1]))
    return Week3Files(merges, vocab, week3_config(vocab, len(merges), tokenizer.model_max_length, tokenizer.pad_token))


def save_week3(tokenizer: HfAttnTokenizerFast, directory: str | Path, flat: bool = False) -> tuple[Path, Path, Path]:
    """Write ``bpe_merges.json``, ``bpe_vocab.json`` and ``vocab_config.json`` (see ``Week3Files.write``)."""
    return week3_files_from_tokenizer(tokenizer).write(directory, flat=flat)


def train_week3_tokenizer(
    texts: Iterable[str], vocab_size: int = 500, min_freq: int = 5, max_seq: int = 128
) -> HfAttnTokenizerFast:
    """Train Week 3 files on ``texts`` exactly as the documented trainer would, as a tokenizer.

    ``vocab_size`` counts the 256 bytes and the merges, not the pad token (the tutorial's 500 gives
    501 ids). Write the three files with ``save_week3(tokenizer, directory)``.
    """
    if vocab_size < BYTE_VOCAB_SIZE:
        raise ValueError(f"vocab_size must be at least {BYTE_VOCAB_SIZE} (the bytes), got {vocab_size}.")
    word_counts: Counter[str] = Counter()
    for text in texts:
        word_counts.update(WORD_PATTERN.findall(text))
    merges = learn_week3_merges(word_counts, vocab_size - BYTE_VOCAB_SIZE, min_freq)
    vocab = week3_vocab(merges)
    return tokenizer_from_week3_files(Week3Files(merges, vocab, week3_config(vocab, len(merges), max_seq)))


def learn_week3_merges(word_counts: Mapping[str, int], max_merges: int, min_freq: int) -> list[tuple[str, str]]:
    """The document's trainer on ``{word: count}``, with incremental pair counts instead of recounting.

    Same rules: the most frequent adjacent pair wins, ties go to the smallest pair in Python tuple
    order, every occurrence is merged left to right; stop after ``max_merges`` merges or when the best
    count is below ``min_freq``. Only the words holding the merged pair are revisited, and a heap
    with stale entries skipped finds the best pair, so training takes seconds instead of minutes.
    """
    words = [[BYTE_ENCODER[byte] for byte in word.encode("utf-8")] + [END_OF_WORD] for word in word_counts]
    counts = list(word_counts.values())
    pair_counts: Counter[tuple[str, str]] = Counter()
    words_with_pair: defaultdict[tuple[str, str], set[int]] = defaultdict(set)
    for index, symbols in enumerate(words):
        for pair in zip(symbols, symbols[1:]):
            pair_counts[pair] += counts[index]
            words_with_pair[pair].add(index)
    heap = [(-count, pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)
    merges: list[tuple[str, str]] = []
    while heap and len(merges) < max_merges:
        negative_count, pair = heapq.heappop(heap)
        if pair_counts.get(pair) != -negative_count:
            continue  # stale: the count changed after this entry was pushed
        if -negative_count < min_freq:
            break
        merges.append(pair)
        changed: set[tuple[str, str]] = set()
        for index in words_with_pair.pop(pair):
            old = words[index]
            new = _merge_pair(old, pair)
            if len(new) == len(old):
                continue  # the word lost this pair to an earlier merge
            for gone in zip(old, old[1:]):
                pair_counts[gone] -= counts[index]
                changed.add(gone)
            for made in zip(new, new[1:]):
                pair_counts[made] += counts[index]
                words_with_pair[made].add(index)
                changed.add(made)
            words[index] = new
        for changed_pair in changed:
            if pair_counts[changed_pair] > 0:
                heapq.heappush(heap, (-pair_counts[changed_pair], changed_pair))
            else:
                del pair_counts[changed_pair]
    return merges


def _merge_pair(symbols: list[str], pair: tuple[str, str]) -> list[str]:
    """Every occurrence of ``pair`` merged, scanning left to right ("a a a" gives "aa a")."""
    left, right = pair
    merged: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == left and symbols[i + 1] == right:
            merged.append(left + right)
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return merged


def build_backend_tokenizer(files: Week3Files) -> Tokenizer:
    """The ``tokenizers.Tokenizer`` encoding like the document, lone ``</w>`` left in as ``Ġ`` (see module doc)."""
    vocab = {_to_internal(token): i for token, i in files.vocab.items()}
    merges = [(_to_internal(left), _to_internal(right)) for left, right in files.merges]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None, fuse_unk=False))
    tokenizer.normalizer = normalizers.Replace(Regex(word_end_pattern()), " ")
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


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


def _to_internal(symbol: str) -> str:
    return symbol.replace(END_OF_WORD, END_OF_WORD_TOKEN)


def _from_internal(symbol: str) -> str:
    return symbol.replace(END_OF_WORD_TOKEN, END_OF_WORD)
