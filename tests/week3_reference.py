"""A slow, pure-Python Week 3 tokenizer and trainer, written from ``shared/docs/week3-format.md`` only.

This is the independent oracle of the parity tests and of ``scripts/bench_tokenizer.py``: it
shares no code with ``hf_attn`` (not even the byte table), so a bug in the package cannot hide
in both. It follows the document step by step and makes no attempt to be clever, apart from a
per-word cache (a word's ids never depend on its context), which the document's tutorial used too
and which the benchmark needs for a fair comparison.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

END_OF_WORD = "</w>"
WORD_PATTERN = re.compile(r"\w+|[^\w\s]")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table: printable bytes keep their character, the others get 256, 257, ... in order."""
    printable = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    )
    table = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in table:
            table[byte] = chr(256 + extra)
            extra += 1
    return table


BYTE_ENCODER = bytes_to_unicode()


def word_to_symbols(word: str) -> list[str]:
    """Step 2: the word's UTF-8 bytes as printable symbols, then the end-of-word symbol."""
    return [BYTE_ENCODER[byte] for byte in word.encode("utf-8")] + [END_OF_WORD]


def merge_pair(symbols: list[str], pair: tuple[str, str]) -> list[str]:
    """Merge every occurrence of ``pair``, scanning left to right (so "a a a" gives "aa a")."""
    first, second = pair
    merged: list[str] = []
    i = 0
    while i < len(symbols):
        if i + 1 < len(symbols) and symbols[i] == first and symbols[i + 1] == second:
            merged.append(first + second)
            i += 2
        else:
            merged.append(symbols[i])
            i += 1
    return merged


class ReferenceTokenizer:
    """Encoding steps 1-5 of the document, one word at a time, with a per-word id cache."""

    def __init__(self, merges: list[tuple[str, str]], vocab: dict[str, int], pad_id: int, max_seq: int) -> None:
        self.ranks = {tuple(pair): rank for rank, pair in enumerate(merges)}
        self.vocab = vocab
        self.pad_id = pad_id
        self.max_seq = max_seq
        self.cache: dict[str, list[int]] = {}

    @classmethod
    def from_files(cls, merges_path: Path, vocab_path: Path, config_path: Path) -> ReferenceTokenizer:
        config = json.loads(config_path.read_text(encoding="utf-8"))
        merges = [tuple(pair) for pair in json.loads(merges_path.read_text(encoding="utf-8"))]
        vocab = json.loads(vocab_path.read_text(encoding="utf-8"))
        return cls(merges, vocab, config["pad_id"], config["max_seq"])

    @classmethod
    def from_week3_folder(cls, folder: Path) -> ReferenceTokenizer:
        return cls.from_files(
            folder / "datasets" / "bpe_merges.json",
            folder / "datasets" / "bpe_vocab.json",
            folder / "models" / "vocab_config.json",
        )

    def word_tokens(self, word: str) -> list[str]:
        """Step 3: apply the lowest-ranked adjacent pair everywhere until no pair has a rank."""
        symbols = word_to_symbols(word)
        while len(symbols) > 1:
            best = min(zip(symbols, symbols[1:]), key=lambda pair: self.ranks.get(pair, float("inf")))
            if best not in self.ranks:
                break
            symbols = merge_pair(symbols, best)
        return symbols

    def word_ids(self, word: str) -> list[int]:
        """Step 4: look the tokens up; only a lone end-of-word symbol has no id and is dropped."""
        ids = self.cache.get(word)
        if ids is None:
            ids = [self.vocab[token] for token in self.word_tokens(word) if token != END_OF_WORD]
            self.cache[word] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """Steps 1-4: ids of a whole text, neither truncated nor padded."""
        ids: list[int] = []
        for word in WORD_PATTERN.findall(text):
            ids.extend(self.word_ids(word))
        return ids

    def encode_padded(self, text: str) -> tuple[list[int], list[int]]:
        """Step 5: ``max_seq`` ids (truncated, then padded with ``pad_id``) and the padding mask."""
        ids = self.encode(text)[: self.max_seq]
        n_pad = self.max_seq - len(ids)
        return ids + [self.pad_id] * n_pad, [1] * len(ids) + [0] * n_pad


def train_reference(texts: Iterable[str], vocab_size: int = 500, min_freq: int = 5) -> list[tuple[str, str]]:
    """The document's trainer, recounting every pair at every step (slow: minutes for 5,000 reviews)."""
    word_counts = Counter(word for text in texts for word in WORD_PATTERN.findall(text))
    words = {tuple(word_to_symbols(word)): count for word, count in word_counts.items()}
    merges: list[tuple[str, str]] = []
    while 256 + len(merges) < vocab_size:
        pair_counts: Counter[tuple[str, str]] = Counter()
        for symbols, count in words.items():
            for pair in zip(symbols, symbols[1:]):
                pair_counts[pair] += count
        if not pair_counts:
            break
        best = min(pair_counts, key=lambda pair: (-pair_counts[pair], pair))
        if pair_counts[best] < min_freq:
            break
        merges.append(best)
        words = {tuple(merge_pair(list(symbols), best)): count for symbols, count in words.items()}
    return merges


def reference_vocab(merges: list[tuple[str, str]], pad_token: str = "[PAD]") -> dict[str, int]:
    """The document's vocabulary: 256 bytes, each new merge result in order, then the pad token."""
    vocab = {BYTE_ENCODER[byte]: byte for byte in range(256)}
    for first, second in merges:
        vocab.setdefault(first + second, len(vocab))
    vocab[pad_token] = len(vocab)
    return vocab
