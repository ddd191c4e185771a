"""The three Week 3 tokenizer files: constants, reading, validation and writing.

The IMDb tutorial's Week 3 notebook saves ``datasets/bpe_merges.json``, ``datasets/bpe_vocab.json`` and
``models/vocab_config.json`` (format: ``shared/docs/week3-format.md``). ``read_week3_files`` loads and
checks them with messages that name the file and the fix; ``Week3Files.write`` writes them back byte
for byte as the notebook does. Turning them into a tokenizer is ``hf_attn.week3.bpe``'s job.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

END_OF_WORD = "</w>"
WORD_PATTERN = re.compile(r"\w+|[^\w\s]")
"""A Week 3 word: a run of Python ``\\w`` characters, or any one character that is neither that nor space."""
PAD_TOKEN = "[PAD]"
BYTE_VOCAB_SIZE = 256

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
"""``Ġ``: the space byte's symbol. No Week 3 word holds a space, so the tokenizer uses it for ``</w>``."""


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


def week3_vocab(merges: Iterable[tuple[str, str]], pad_token: str = PAD_TOKEN) -> dict[str, int]:
    """The document's vocabulary: the 256 bytes, each new merge result in merge order, then the pad token."""
    vocab = {BYTE_ENCODER[byte]: byte for byte in range(BYTE_VOCAB_SIZE)}
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    vocab[pad_token] = len(vocab)
    return vocab


def week3_config(vocab: Mapping[str, int], num_merges: int, max_seq: int, pad_token: str = PAD_TOKEN) -> dict[str, Any]:
    """The ``vocab_config.json`` content for ``vocab``, in the notebook's key order."""
    return {
        "pad_token": pad_token,
        "pad_id": vocab[pad_token],
        "byte_vocab_size": BYTE_VOCAB_SIZE,
        "max_seq": max_seq,
        "num_merges": num_merges,
        "vocab_size": len(vocab),
    }


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


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise Week3FormatError(
            f"{path}: not valid UTF-8 JSON ({error}). Re-export it from the Week 3 notebook."
        ) from error


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
