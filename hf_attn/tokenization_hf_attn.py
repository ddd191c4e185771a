"""The Week 3 byte-level BPE as a Hugging Face fast tokenizer, plus its trainer.

The IMDb tutorial's Week 3 notebook saves ``bpe_merges.json``, ``bpe_vocab.json`` and
``vocab_config.json`` (format: ``shared/docs/week3-format.md``). This module turns them into a
self-contained ``tokenizer.json`` whose merges run in Rust, wraps it in ``HfAttnTokenizerFast``
and writes the three files back; ``train_week3_tokenizer`` learns new files with the documented
trainer's exact rules.

How the documented encoder maps onto ``tokenizers`` (ids are identical; the tests check it):

* The end-of-word symbol ``</w>`` becomes the byte-level symbol of the space byte, ``Ġ``. A Week 3
  word never holds a space (whitespace separates words), so ``Ġ`` is free, and a token such as
  ``e</w>`` becomes ``eĠ``, which the stock ``ByteLevel`` decoder already reads as "e ".
* The normalizer replaces each word's trailing whitespace (or nothing, as in ``don't``) by a single
  space, with a regex whose ``\\w``/``\\s`` classes are Python ``re``'s Unicode ones spelled out
  code point by code point: Oniguruma's own ``\\w`` also takes combining marks and connector
  punctuation, and its ``\\s`` misses U+001C-U+001F. The ``ByteLevel`` pre-tokenizer then maps the
  bytes, so every word ends with a separate ``Ġ`` symbol, as ``</w>`` in the document. BPE runs on
  the whole text at once: no merge can cross a word boundary because ``</w>`` only ever ends a
  merge's right part (the loader enforces it), which spares a per-word split.
* One thing BPE cannot do is drop a symbol. The document drops a lone ``</w>`` (a word whose last
  symbol never merged with it); here it comes out as the id of ``Ġ`` (always 32), an id the
  document never emits because no word contains a space byte. ``HfAttnTokenizerFast`` removes it.
  So a plain ``PreTrainedTokenizerFast`` loading the same ``tokenizer.json`` keeps those extra
  32s; load with ``AutoTokenizer.from_pretrained(..., trust_remote_code=True)`` (``save_pretrained``
  copies this file next to the tokenizer) or with this class.
* Per-text work in ``tokenizers`` (offset alignments, ``Encoding`` objects) costs more than the
  pure-Python reference's regex plus word cache: on the 40,000 training reviews the Rust tokenizer
  alone was 0.6x the reference's speed. So the class encodes each distinct whitespace-free chunk of
  text once, with the Rust tokenizer, and assembles texts from those chunk ids with Arrow and numpy
  (``_ChunkIdCache``): 2.3x the reference from cold, 3.7x once warm (``scripts/bench_tokenizer.py``).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import BatchEncoding, PreTrainedTokenizerFast
from transformers.tokenization_utils_base import PaddingStrategy, TruncationStrategy

END_OF_WORD = "</w>"
PAD_TOKEN = "[PAD]"
BYTE_VOCAB_SIZE = 256
WORD_PATTERN = re.compile(r"\w+|[^\w\s]")
"""Step 1 of the document: a run of word characters, or one character that is neither word nor space."""

MERGES_FILE = "bpe_merges.json"
VOCAB_FILE = "bpe_vocab.json"
CONFIG_FILE = "vocab_config.json"
WEEK3_SUBFOLDERS = {MERGES_FILE: "datasets", VOCAB_FILE: "datasets", CONFIG_FILE: "models"}
"""Where the tutorial keeps each file inside its Week 3 folder."""

CONFIG_KEYS = ("pad_token", "pad_id", "byte_vocab_size", "max_seq", "num_merges", "vocab_size")


class Week3FormatError(ValueError):
    """A Week 3 file is malformed or disagrees with another one; the message names the file and the fix."""


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table, the document's ``BYTE_ENCODER``."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {byte: chr(byte) for byte in printable}
    for byte in range(256):
        if byte not in table:
            table[byte] = chr(256 + len(table) - len(printable))
    return table


BYTE_ENCODER = bytes_to_unicode()
SPACE_SYMBOL = BYTE_ENCODER[ord(" ")]
"""``Ġ``: stands for ``</w>`` inside the Rust tokenizer (see the module docstring)."""


@dataclass(frozen=True)
class Week3Files:
    """The content of the three Week 3 tokenizer files (validated by ``validate``)."""

    merges: list[tuple[str, str]]
    vocab: dict[str, int]
    config: dict[str, Any]

    def validate(self, sources: Mapping[str, str] | None = None) -> None:
        """Raise ``Week3FormatError`` unless the files follow the format and agree with each other.

        ``sources`` maps each file name to where it was read from, so that messages name the file.
        Beyond the format, merges must only use tokens made by earlier merges: the document merges
        every occurrence of a pair before looking at new pairs, while ``tokenizers`` may apply a
        lower-ranked merge between two occurrences, and the two agree whenever a token is never
        made after a merge used it (true of the lists the Week 3 trainer writes in practice).
        """
        where = {name: (sources or {}).get(name, name) for name in (MERGES_FILE, VOCAB_FILE, CONFIG_FILE)}
        _check_config(self.config, where[CONFIG_FILE])
        _check_vocab(self.vocab, self.config, where[VOCAB_FILE], where[CONFIG_FILE])
        _check_merges(self.merges, self.vocab, self.config["pad_token"], where[MERGES_FILE], where[VOCAB_FILE])

    def write(self, directory: str | Path, flat: bool = False) -> tuple[Path, Path, Path]:
        """Write the files as the tutorial does (``datasets/`` and ``models/``), or all in ``directory``.

        The JSON layout matches the tutorial's own files byte for byte, so re-exported files diff cleanly.
        """
        directory = Path(directory)
        paths = tuple(
            directory / name if flat else directory / WEEK3_SUBFOLDERS[name] / name
            for name in (MERGES_FILE, VOCAB_FILE, CONFIG_FILE)
        )
        texts = (
            json.dumps([list(pair) for pair in self.merges], ensure_ascii=False),
            json.dumps(self.vocab, ensure_ascii=False),
            json.dumps(self.config, indent=2),
        )
        for path, text in zip(paths, texts):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        return paths


def find_week3_files(path: str | Path) -> tuple[Path, Path, Path]:
    """Paths of the merges, vocab and config files in a Week 3 folder or in a folder holding all three."""
    root = Path(path)
    if not root.is_dir():
        raise FileNotFoundError(
            f"{root}: no such folder. Pass the Week 3 folder (holding datasets/ and models/) "
            f"or a folder holding {MERGES_FILE}, {VOCAB_FILE} and {CONFIG_FILE}."
        )
    found = []
    for name in (MERGES_FILE, VOCAB_FILE, CONFIG_FILE):
        candidates = (root / WEEK3_SUBFOLDERS[name] / name, root / name)
        existing = [candidate for candidate in candidates if candidate.is_file()]
        if not existing:
            raise FileNotFoundError(
                f"{name} not found: looked for {candidates[0]} and {candidates[1]}. "
                "Copy it from the Week 3 notebook's output (all three files come from the same run)."
            )
        found.append(existing[0])
    return found[0], found[1], found[2]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise Week3FormatError(
            f"{path}: not valid UTF-8 JSON ({error}). Re-export it from the Week 3 notebook."
        ) from error


def read_week3_files(path: str | Path) -> Week3Files:
    """Read and validate the three files of a Week 3 folder (see ``find_week3_files``)."""
    merges_path, vocab_path, config_path = find_week3_files(path)
    raw_merges, vocab, config = _read_json(merges_path), _read_json(vocab_path), _read_json(config_path)
    if not isinstance(raw_merges, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and all(isinstance(part, str) for part in pair) for pair in raw_merges
    ):
        raise Week3FormatError(
            f'{merges_path}: expected a JSON list of [left, right] string pairs such as [["t", "h"], ...]. '
            "Re-export it from the Week 3 notebook."
        )
    if not isinstance(vocab, dict):
        raise Week3FormatError(f"{vocab_path}: expected a JSON object {{token: id}}. Re-export it from the notebook.")
    if not isinstance(config, dict):
        raise Week3FormatError(f"{config_path}: expected a JSON object with keys {', '.join(CONFIG_KEYS)}.")
    files = Week3Files([(left, right) for left, right in raw_merges], vocab, config)
    files.validate({MERGES_FILE: str(merges_path), VOCAB_FILE: str(vocab_path), CONFIG_FILE: str(config_path)})
    return files


def _check_config(config: Mapping[str, Any], config_file: str) -> None:
    missing = [key for key in CONFIG_KEYS if key not in config]
    if missing:
        raise Week3FormatError(
            f"{config_file}: missing key(s) {', '.join(missing)}; the notebook writes {CONFIG_KEYS}."
        )
    for key in CONFIG_KEYS[1:]:
        value = config[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise Week3FormatError(f"{config_file}: {key} must be a non-negative integer, got {value!r}.")
    if not isinstance(config["pad_token"], str):
        raise Week3FormatError(f"{config_file}: pad_token must be a string such as {PAD_TOKEN!r}.")
    if config["byte_vocab_size"] != BYTE_VOCAB_SIZE:
        raise Week3FormatError(
            f"{config_file}: byte_vocab_size is {config['byte_vocab_size']}, but a byte-level BPE has exactly 256."
        )
    if config["max_seq"] < 1:
        raise Week3FormatError(f"{config_file}: max_seq must be at least 1, got {config['max_seq']}.")


def _check_vocab(vocab: Mapping[str, Any], config: Mapping[str, Any], vocab_file: str, config_file: str) -> None:
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in vocab.values()):
        raise Week3FormatError(f"{vocab_file}: every id must be an integer.")
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise Week3FormatError(
            f"{vocab_file}: ids must be 0..{len(vocab) - 1}, each used once (a model's embedding rows are "
            "indexed by them). The file was edited or truncated; re-export it."
        )
    for byte in range(BYTE_VOCAB_SIZE):
        if vocab.get(BYTE_ENCODER[byte]) != byte:
            raise Week3FormatError(
                f"{vocab_file}: id {byte} must be the byte symbol {BYTE_ENCODER[byte]!r} (ids 0..255 are the "
                "256 bytes in order). This is not a Week 3 byte-level vocabulary."
            )
    pad_token, pad_id = config["pad_token"], config["pad_id"]
    if vocab.get(pad_token) != pad_id:
        raise Week3FormatError(
            f"{config_file} says pad_token {pad_token!r} has id {pad_id}, but {vocab_file} gives it "
            f"{vocab.get(pad_token)}. The two files come from different runs; use files saved together."
        )
    if pad_id != len(vocab) - 1 or config["vocab_size"] != len(vocab):
        raise Week3FormatError(
            f"{config_file}: vocab_size {config['vocab_size']} and pad_id {pad_id} must be {len(vocab)} and "
            f"{len(vocab) - 1} ({vocab_file} has {len(vocab)} tokens, the pad token last). Use files saved together."
        )


def _check_merges(
    merges: list[tuple[str, str]], vocab: Mapping[str, int], pad_token: str, merges_file: str, vocab_file: str
) -> None:
    latest_rank_making = {left + right: rank for rank, (left, right) in enumerate(merges)}
    seen: dict[tuple[str, str], int] = {}
    for rank, (left, right) in enumerate(merges):
        label = f"{merges_file}: merge #{rank} {[left, right]}"
        if (left, right) in seen:
            raise Week3FormatError(f"{label} repeats merge #{seen[left, right]}. Remove it.")
        seen[left, right] = rank
        if END_OF_WORD in left or END_OF_WORD in right.removesuffix(END_OF_WORD):
            raise Week3FormatError(
                f"{label}: {END_OF_WORD} ends a word, so it can only end the right part of a merge; this merge "
                "can never apply. Remove it."
            )
        for part in (left, right):
            if part != END_OF_WORD and part not in vocab:
                raise Week3FormatError(
                    f"{label}: {part!r} is not a token of {vocab_file}. The merges and the vocabulary come from "
                    "different runs; use files saved together."
                )
            if SPACE_SYMBOL in part:
                raise Week3FormatError(
                    f"{label}: the space byte {SPACE_SYMBOL!r} never occurs inside a Week 3 word, so this merge "
                    "can never apply (and this package uses that symbol for </w>). Remove it."
                )
            if part == END_OF_WORD or len(part) == 1:
                continue  # a byte symbol or the end-of-word symbol: there from the start
            if part not in latest_rank_making:
                raise Week3FormatError(f"{label}: no merge makes {part!r}, so this merge can never apply. Remove it.")
            if latest_rank_making[part] >= rank:
                raise Week3FormatError(
                    f"{label}: {part!r} is made (again) by the later merge #{latest_rank_making[part]}. Week 3 "
                    "trainers only use tokens made before; on other lists the document and tokenizers' BPE can "
                    "apply merges in different orders, so such files are refused."
                )
        if left + right not in vocab:
            raise Week3FormatError(
                f"{label}: the merged token {left + right!r} is missing from {vocab_file}. Use files saved together."
            )
    expected = week3_vocab(merges, pad_token)
    if expected != dict(vocab):
        wrong = next(token for token in vocab if expected.get(token) != vocab[token])
        raise Week3FormatError(
            f"{vocab_file}: token {wrong!r} has id {vocab[wrong]}, but the Week 3 construction from {merges_file} "
            f"(bytes, then each new merge result in order, then the pad token) gives {expected.get(wrong)}. "
            "The files come from different runs; use files saved together."
        )


def week3_vocab(merges: Iterable[tuple[str, str]], pad_token: str = PAD_TOKEN) -> dict[str, int]:
    """The document's vocabulary: the 256 bytes, each new merge result in merge order, then the pad token."""
    vocab = {BYTE_ENCODER[byte]: byte for byte in range(BYTE_VOCAB_SIZE)}
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    vocab[pad_token] = len(vocab)
    return vocab


def _to_internal(symbol: str) -> str:
    return symbol.replace(END_OF_WORD, SPACE_SYMBOL)


def _from_internal(symbol: str) -> str:
    return symbol.replace(SPACE_SYMBOL, END_OF_WORD)


def _code_point_ranges(pattern: str) -> list[tuple[int, int]]:
    """Maximal code point ranges that Python's ``re`` matches with ``pattern`` (``\\w`` or ``\\s``)."""
    ranges = []
    for first, last in ((0, 0xD7FF), (0xE000, 0x10FFFF)):  # lone surrogates cannot reach a tokenizer
        block = "".join(map(chr, range(first, last + 1)))
        ranges.extend((first + m.start(), first + m.end() - 1) for m in re.finditer(f"{pattern}+", block))
    return ranges


def _character_class(ranges: list[tuple[int, int]]) -> str:
    return "".join(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}" for a, b in ranges)


@functools.cache
def word_end_pattern() -> str:
    """Oniguruma regex matching each word's trailing whitespace (after ``\\K``), or leading whitespace.

    Replacing its matches by one space leaves every word followed by exactly one space and no other
    whitespace. The classes are Python's Unicode ``\\w`` and ``\\s`` of the running interpreter,
    frozen into ``tokenizer.json``, so a saved tokenizer splits the same way everywhere.
    """
    word = _character_class(_code_point_ranges(r"\w"))
    space = _character_class(_code_point_ranges(r"\s"))
    return f"(?:[{word}]+|[^{word}{space}])\\K[{space}]*|[{space}]+"


def build_backend_tokenizer(files: Week3Files) -> Tokenizer:
    """The ``tokenizers.Tokenizer`` encoding like the document, lone ``</w>`` left in as ``Ġ`` (see module doc)."""
    vocab = {_to_internal(token): i for token, i in files.vocab.items()}
    merges = [(_to_internal(left), _to_internal(right)) for left, right in files.merges]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, dropout=None, unk_token=None, fuse_unk=False))
    tokenizer.normalizer = normalizers.Replace(Regex(word_end_pattern()), " ")
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


SENTINELS = "".join(map(chr, [*range(0x00, 0x09), *range(0x0E, 0x1C), 0x7F]))
"""ASCII control characters: each is a word by itself, and its byte symbol comes from no other character."""


class _ChunkIdCache:
    """Ids of each distinct whitespace-free chunk of text, computed once by the Rust tokenizer.

    A Week 3 word never contains whitespace, so a text's ids are its chunks' ids end to end. Encoding
    whole texts in ``tokenizers`` is slower than the pure-Python reference with its word cache (its
    normalizer, alignments and ``Encoding`` objects cost about a microsecond per token), so texts are
    split with Arrow (``utf8_split_whitespace`` splits exactly like ``str.split()``; a test checks
    every code point), only new chunks go to Rust, and the rest is a numpy gather. Memory is bounded
    by ``capacity`` chunks; past it the cache starts over.
    """

    block_size = 8192
    """Texts per numpy pass: bounds the temporaries, several int64 arrays as long as all their chunks."""
    group_size = 512
    """New chunks per Rust call: they are joined by a sentinel word, as one call per chunk costs more
    than encoding it, and the sentinel's token marks where each chunk's tokens end."""

    def __init__(self, backend: Tokenizer, end_of_word_id: int, capacity: int = 1_000_000) -> None:
        self.backend = backend
        # Week 3 has no special tokens inside text: a review's "[PAD]" is five characters.
        backend.encode_special_tokens = True
        self.end_of_word_id = end_of_word_id
        self.capacity = capacity
        self.sentinel_ids = {sentinel: backend.encode(sentinel).ids[0] for sentinel in SENTINELS}
        self.clear()

    def __reduce__(self) -> tuple[type, tuple[Tokenizer, int, int]]:
        # Pickles (datasets.map fingerprints and workers, deepcopy) carry the settings, not the cached ids:
        # hashing stays cheap and the same however much the tokenizer was used.
        return type(self), (self.backend, self.end_of_word_id, self.capacity)

    def clear(self) -> None:
        self.row_of: dict[str, int] = {}
        self.ids = np.zeros(0, dtype=np.int32)
        self.bounds = np.zeros(1, dtype=np.int64)  # row r holds ids[bounds[r]:bounds[r + 1]]

    def _groups(self, chunks: list[str]) -> list[tuple[list[str], str | None]]:
        """Chunks in order, in groups that each get a sentinel none of their chunks contains (None: one chunk)."""
        groups: list[tuple[list[str], str | None]] = []
        pending = [chunks[start : start + self.group_size] for start in range(0, len(chunks), self.group_size)]
        pending.reverse()
        while pending:
            group = pending.pop()
            if len(group) == 1:
                groups.append((group, None))
                continue
            text = "".join(group)
            sentinel = next((candidate for candidate in SENTINELS if candidate not in text), None)
            if sentinel is None:  # every control character occurs: halve until one is free
                pending += [group[len(group) // 2 :], group[: len(group) // 2]]
            else:
                groups.append((group, sentinel))
        return groups

    def _add(self, chunks: list[str]) -> None:
        groups = self._groups(chunks)
        texts = [f" {sentinel} ".join(group) if sentinel else group[0] for group, sentinel in groups]
        new_ids, new_lengths = [], []
        for (group, sentinel), encoding in zip(groups, self.backend.encode_batch_fast(texts, add_special_tokens=False)):
            ids = np.asarray(encoding.ids, dtype=np.int32)
            is_sentinel = ids == self.sentinel_ids[sentinel] if sentinel else np.zeros(len(ids), dtype=bool)
            chunk_of_token = np.cumsum(is_sentinel)
            kept = ~is_sentinel & (ids != self.end_of_word_id)
            new_ids.append(ids[kept])
            new_lengths.append(np.bincount(chunk_of_token[kept], minlength=len(group)))
        self.row_of.update(zip(chunks, itertools.count(len(self.row_of))))
        self.ids = np.concatenate([self.ids, *new_ids])
        self.bounds = np.concatenate([self.bounds, self.bounds[-1] + np.cumsum(np.concatenate(new_lengths))])

    def _rows(self, chunks: list[str]) -> np.ndarray:
        """Row of each chunk, encoding the new ones first."""
        rows = np.fromiter(map(self.row_of.get, chunks, itertools.repeat(-1)), dtype=np.int64, count=len(chunks))
        missing = np.flatnonzero(rows < 0)
        if len(missing):
            if len(self.row_of) + len(missing) > self.capacity:
                self.clear()
                missing = np.arange(len(chunks))
            rows[missing] = np.arange(len(self.row_of), len(self.row_of) + len(missing))
            self._add([chunks[i] for i in missing])
        return rows

    def encode(
        self, texts: list[str], max_length: int | None = None, truncation_side: str = "right"
    ) -> tuple[np.ndarray, np.ndarray]:
        """All texts' Week 3 ids end to end and each text's count, cut to ``max_length`` when given.

        Works a block of texts at a time so that the numpy temporaries stay small.
        """
        ids, lengths = [np.zeros(0, dtype=np.int32)], [np.zeros(0, dtype=np.int64)]
        for start in range(0, len(texts), self.block_size):
            block_ids, block_lengths = self._encode_block(
                texts[start : start + self.block_size], max_length, truncation_side
            )
            ids.append(block_ids)
            lengths.append(block_lengths)
        return np.concatenate(ids).astype(np.int64), np.concatenate(lengths)

    def _encode_block(
        self, texts: list[str], max_length: int | None, truncation_side: str
    ) -> tuple[np.ndarray, np.ndarray]:
        chunk_lists = pc.utf8_split_whitespace(pa.array(texts, type=pa.large_string()))
        chunks_per_text = pc.list_value_length(chunk_lists).to_numpy(zero_copy_only=False)
        encoded = pc.dictionary_encode(chunk_lists.flatten())
        rows = self._rows(encoded.dictionary.to_pylist())[encoded.indices.to_numpy(zero_copy_only=False)]
        starts = self.bounds[rows]
        lengths = self.bounds[rows + 1] - starts
        first_chunk = np.concatenate([[0], np.cumsum(chunks_per_text)])
        if max_length is not None:  # cut before gathering: most reviews are longer than max_seq
            before = np.cumsum(lengths) - lengths  # ids before each chunk, counting from the block start
            text_begin = np.concatenate([[0], np.cumsum(lengths)])[first_chunk]
            offset = before - np.repeat(text_begin[:-1], chunks_per_text)  # ids before the chunk in its text
            if truncation_side == "left":
                after = np.repeat(np.diff(text_begin), chunks_per_text) - offset - lengths
                kept = np.clip(max_length - after, 0, lengths)
                starts = starts + lengths - kept
            else:
                kept = np.clip(max_length - offset, 0, lengths)
            lengths = kept
        chunk_ends = np.cumsum(lengths)
        total = int(chunk_ends[-1]) if len(chunk_ends) else 0
        ids = self.ids[np.arange(total) + np.repeat(starts - chunk_ends + lengths, lengths)]
        return ids, np.diff(np.concatenate([[0], chunk_ends])[first_chunk])


def _lay_out(
    values: np.ndarray, fill: int, lengths: np.ndarray, width: int | None, side: str
) -> np.ndarray | list[np.ndarray]:
    """Per-token ``values`` of consecutive rows as a ``(rows, width)`` array padded with ``fill``, or ragged."""
    if width is None:
        return np.split(values, np.cumsum(lengths)[:-1]) if len(lengths) else []
    rows = np.repeat(np.arange(len(lengths)), lengths)
    columns = np.arange(len(values)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    if side == "left":
        columns += np.repeat(width - lengths, lengths)
    padded = np.full((len(lengths), width, *values.shape[1:]), fill, dtype=values.dtype)
    padded[rows, columns] = values
    return padded


def _to_python(value: np.ndarray | list[np.ndarray], pairs: bool) -> Any:
    """Lists as transformers returns them without ``return_tensors``; ``pairs`` (offsets) as tuples."""
    if isinstance(value, list) or (pairs and value.ndim > 2):
        return [_to_python(row, pairs) for row in value]
    return [tuple(pair) for pair in value.tolist()] if pairs else value.tolist()


class HfAttnTokenizerFast(PreTrainedTokenizerFast):
    """Fast tokenizer with the Week 3 ids: ``[PAD]`` padding, ``model_max_length = max_seq``.

    ``tokenizer(texts, truncation=True, padding="max_length")`` gives the Week 3 ``input_ids`` and
    ``attention_mask`` (the notebook's ``padding_mask``). Build it with ``from_week3`` or
    ``train_week3_tokenizer``; ``save_pretrained`` / ``from_pretrained`` round-trip it, and
    ``save_week3`` writes the three Week 3 files back. Tokens read as byte-level strings where
    ``Ġ`` stands for ``</w>`` (``"the</w>"`` is ``"theĠ"``). There is no sentence-pair format.
    """

    model_input_names: ClassVar[list[str]] = ["input_ids", "attention_mask"]
    padding_side = "right"
    truncation_side = "right"

    # No __init__ on purpose: transformers loads tokenizer.json as-is only for classes without one;
    # for the others it rebuilds a bare BPE from the vocabulary, losing the Week 3 pre-tokenization.

    @property
    def _chunk_ids(self) -> _ChunkIdCache:
        """The chunk cache of the current Rust tokenizer, made on first use."""
        cache = self.__dict__.get("_chunk_id_cache")
        if cache is None or cache.backend is not self._tokenizer:
            cache = self.__dict__["_chunk_id_cache"] = _ChunkIdCache(self._tokenizer, self.end_of_word_id)
        return cache

    @property
    def end_of_word_id(self) -> int:
        """Id of ``Ġ``: the Rust tokenizer's lone ``</w>``, which the Week 3 ids never contain."""
        return self._tokenizer.token_to_id(SPACE_SYMBOL)

    @classmethod
    def from_week3(cls, path: str | Path, **kwargs: Any) -> HfAttnTokenizerFast:
        """Load a Week 3 folder (``datasets/`` + ``models/``) or a folder holding the three JSON files."""
        return cls.from_week3_files(read_week3_files(path), **kwargs)

    @classmethod
    def from_week3_files(cls, files: Week3Files, **kwargs: Any) -> HfAttnTokenizerFast:
        """Build the tokenizer from already-read Week 3 file content."""
        files.validate()
        kwargs.setdefault("model_max_length", files.config["max_seq"])
        # Week 3 reads "[PAD]" typed in a review as five characters, not as the pad token.
        kwargs.setdefault("split_special_tokens", True)
        # transformers' cleanup is meant for WordPiece and warns on BPE; _decode does the spacing.
        kwargs.setdefault("clean_up_tokenization_spaces", False)
        return cls(tokenizer_object=build_backend_tokenizer(files), pad_token=files.config["pad_token"], **kwargs)

    def week3_files(self) -> Week3Files:
        """The Week 3 merges, vocabulary and config equivalent to this tokenizer."""
        model = json.loads(self._tokenizer.to_str())["model"]
        merges = [(_from_internal(left), _from_internal(right)) for left, right in model["merges"]]
        vocab = {
            (token if i == self.end_of_word_id else _from_internal(token)): i for token, i in model["vocab"].items()
        }
        config = {
            "pad_token": self.pad_token,
            "pad_id": self.pad_token_id,
            "byte_vocab_size": BYTE_VOCAB_SIZE,
            "max_seq": self.model_max_length,
            "num_merges": len(merges),
            "vocab_size": len(vocab),
        }
        return Week3Files(merges, dict(sorted(vocab.items(), key=lambda item: item[1])), config)

    def save_week3(self, directory: str | Path, flat: bool = False) -> tuple[Path, Path, Path]:
        """Write ``bpe_merges.json``, ``bpe_vocab.json`` and ``vocab_config.json`` (see ``Week3Files.write``)."""
        return self.week3_files().write(directory, flat=flat)

    def _encode_plus(
        self,
        text: str | list[str] | list[list[str]],
        text_pair: Any = None,
        add_special_tokens: bool = True,
        padding_strategy: PaddingStrategy = PaddingStrategy.DO_NOT_PAD,
        truncation_strategy: TruncationStrategy = TruncationStrategy.DO_NOT_TRUNCATE,
        max_length: int | None = None,
        stride: int = 0,
        is_split_into_words: bool = False,
        pad_to_multiple_of: int | None = None,
        padding_side: str | None = None,
        return_tensors: Any = None,
        return_token_type_ids: bool | None = None,
        return_attention_mask: bool | None = None,
        return_overflowing_tokens: bool = False,
        return_special_tokens_mask: bool = False,
        return_offsets_mapping: bool = False,
        return_length: bool = False,
        verbose: bool = True,
        split_special_tokens: bool | None = None,
        **kwargs: Any,
    ) -> BatchEncoding:
        """Every ``__call__``/``encode`` lands here: ids from ``_ChunkIdCache``, truncation and padding in numpy."""
        if text_pair is not None:
            raise ValueError("Week 3 has no sentence-pair format (no separator token): encode each text on its own.")
        if return_overflowing_tokens:
            raise ValueError("return_overflowing_tokens is not supported: Week 3 truncates and keeps the start.")
        if is_split_into_words:
            batched = isinstance(text, (list, tuple)) and bool(text) and isinstance(text[0], (list, tuple))
            texts = [" ".join(words) for words in (text if batched else [text])]
        else:
            batched = isinstance(text, (list, tuple))
            texts = list(text) if batched else [text]
        if not all(isinstance(one_text, str) for one_text in texts):
            raise ValueError("text must be a string, a list of strings, or (is_split_into_words) lists of words.")
        if return_offsets_mapping and is_split_into_words:
            raise ValueError("return_offsets_mapping needs the original text, not words (is_split_into_words).")

        limit = None if truncation_strategy == TruncationStrategy.DO_NOT_TRUNCATE else max_length
        ids, lengths = self._chunk_ids.encode(texts, limit, self.truncation_side)
        self._eventual_warn_about_too_long_sequence(range(int(lengths.max(initial=0))), limit, verbose)
        width = None
        if padding_strategy != PaddingStrategy.DO_NOT_PAD:
            # transformers leaves rows longer than max_length unpadded, which no tensor can hold: pad to the longest.
            width = int(lengths.max(initial=0))
            if padding_strategy == PaddingStrategy.MAX_LENGTH:
                width = max(width, max_length)
            if pad_to_multiple_of:
                width = -(-width // pad_to_multiple_of) * pad_to_multiple_of
        side = padding_side or self.padding_side
        columns = {"input_ids": (ids, self.pad_token_id)}
        if return_attention_mask or (return_attention_mask is None and "attention_mask" in self.model_input_names):
            columns["attention_mask"] = (np.ones_like(ids), 0)
        if return_token_type_ids:
            columns["token_type_ids"] = (np.zeros_like(ids), self.pad_token_type_id)
        if return_special_tokens_mask:
            columns["special_tokens_mask"] = (np.zeros_like(ids), 1)
        if return_offsets_mapping:
            columns["offset_mapping"] = (self._offsets(texts, limit), 0)
        data = {name: _lay_out(values, fill, lengths, width, side) for name, (values, fill) in columns.items()}
        if return_length:
            data["length"] = lengths if width is None else np.full_like(lengths, width)
        if not batched and return_tensors is None:  # like transformers: tensors keep the batch axis
            data = {name: value[0] for name, value in data.items()}
        if return_tensors is None:
            data = {name: _to_python(value, pairs=name == "offset_mapping") for name, value in data.items()}
        return BatchEncoding(data, tensor_type=return_tensors)

    def _offsets(self, texts: list[str], limit: int | None) -> np.ndarray:
        """Character spans of all tokens, shaped (tokens, 2): the Rust encodings minus the lone ``</w>``."""
        spans = []
        for encoding in self._tokenizer.encode_batch(texts, add_special_tokens=False):
            kept = [span for token_id, span in zip(encoding.ids, encoding.offsets) if token_id != self.end_of_word_id]
            if limit is not None:
                kept = kept[-limit:] if self.truncation_side == "left" else kept[:limit]
            spans.extend(kept)
        return np.array(spans, dtype=np.int64).reshape(-1, 2)

    def tokenize(
        self, text: str, pair: str | None = None, add_special_tokens: bool = False, **kwargs: Any
    ) -> list[str]:
        if pair is not None:
            raise ValueError("Week 3 has no sentence-pair format: tokenize each text on its own.")
        return self.convert_ids_to_tokens(self._chunk_ids.encode([text])[0].tolist())

    def _decode(self, token_ids: int | list[int], skip_special_tokens: bool = False, **kwargs: Any) -> str:
        """Bytes back to text, one space after each word that kept its ``</w>``, none at the very end."""
        text = super()._decode(token_ids, skip_special_tokens=skip_special_tokens, **kwargs)
        return text[:-1] if text.endswith(" ") else text


HfAttnTokenizerFast.register_for_auto_class("AutoTokenizer")


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


def train_week3_tokenizer(
    texts: Iterable[str], vocab_size: int = 500, min_freq: int = 5, max_seq: int = 128
) -> HfAttnTokenizerFast:
    """Train Week 3 files on ``texts`` exactly as the documented trainer would, as a tokenizer.

    ``vocab_size`` counts the 256 bytes and the merges, not the pad token (the tutorial's 500 gives
    501 ids). Write the three files with ``tokenizer.save_week3(directory)``.
    """
    if vocab_size < BYTE_VOCAB_SIZE:
        raise ValueError(f"vocab_size must be at least {BYTE_VOCAB_SIZE} (the bytes), got {vocab_size}.")
    word_counts: Counter[str] = Counter()
    for text in texts:
        word_counts.update(WORD_PATTERN.findall(text))
    merges = learn_week3_merges(word_counts, vocab_size - BYTE_VOCAB_SIZE, min_freq)
    vocab = week3_vocab(merges)
    config = {
        "pad_token": PAD_TOKEN,
        "pad_id": vocab[PAD_TOKEN],
        "byte_vocab_size": BYTE_VOCAB_SIZE,
        "max_seq": max_seq,
        "num_merges": len(merges),
        "vocab_size": len(vocab),
    }
    return HfAttnTokenizerFast.from_week3_files(Week3Files(merges, vocab, config))
