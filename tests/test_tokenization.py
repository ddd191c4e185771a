"""HfAttnTokenizerFast and hf_attn.week3's files and trainer against the Week 3 document, through the
independent tests/week3_reference.py.

Every expected id here comes from the reference (or from files made outside this project), never from
output recorded from the code under test.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from helpers import SHARED, require
from tokenizers import Regex, normalizers
from transformers import PreTrainedTokenizerFast
from transformers.tokenization_utils_base import PaddingStrategy
from week3_reference import (
    END_OF_WORD,
    WORD_PATTERN,
    ReferenceTokenizer,
    reference_vocab,
    train_reference,
)

from hf_attn.tokenization_hf_attn import HfAttnTokenizerFast, head_of
from hf_attn.week3 import (
    Week3FormatError,
    batch_encoding,
    load_week3_tokenizer,
    save_week3,
    train_week3_tokenizer,
    week3_files_from_tokenizer,
)
from hf_attn.week3.batch_encoding import (
    append_to_rows,
    distinct_codes,
    encode_batch,
    first_words,
    kept_positions,
    laid_out,
    normalizer_words,
    padded_rows,
    padded_width,
    ragged_take,
    split_heads,
    word_pattern,
)
from hf_attn.week3.bpe import word_end_pattern

SAMPLE = SHARED / "week3-sample"
IMDB = SHARED / "data" / "imdb"
SAMPLE_FILES = {
    "bpe_merges.json": SAMPLE / "datasets" / "bpe_merges.json",
    "bpe_vocab.json": SAMPLE / "datasets" / "bpe_vocab.json",
    "vocab_config.json": SAMPLE / "models" / "vocab_config.json",
}

HARD_CASES = {
    "plain": "We love movies.",
    "emoji": "I 😀 loved it!!! 👍🏽 family: 👨‍👩‍👧 🇫🇷",
    "accents_nfc": "Café, naïve résumé — déjà vu à Noël",
    "accents_nfd": unicodedata.normalize("NFD", "Café, naïve résumé à Noël"),
    "cjk": "日本語のテキスト、中文，한국어 텍스트。",
    "url": "See https://www.imdb.com/title/tt0111161/?ref_=nv_sr_1#top or mail me@x.org",
    "contractions": "don't won't it's y'all rock'n'roll O'Neil",
    "digits": "10/10, 3.5 stars, 1,000,000 $ in 1999 — x² ½ ① ٣ ५ Ⅻ",
    "tabs_newlines": "tabs\tand\nnewlines\r\nand\u00a0nbsp\u3000wide\x1cfs\x1fus\u2028ls\u0085nel\x0bvt\x0cff",
    "br_tags": "Great film.<br /><br />Would watch again.<br/>The end",
    "empty": "",
    "whitespace_only": " \t\n\u3000 \x1c",
    "long_word": "a" * 1500,
    "long_mixed_word": "supercalifragilistic" * 60 + "!",
    "long_accented_word": "é" * 700,
    "combining": "e\u0301\u0301 a\u0308 n\u0303o \u0915\u093f\u0924\u093e\u092c \u05e9\u05c1",
    "underscores": "snake_case __init__ _ __ a_b_c_",
    "connector_punctuation": "a\u203fb a\u2040b x\ufe4dy",
    "format_characters": "zero\u200bwidth\u200djoiner\ufeffbom\u00adsoft",
    "control_characters": "".join(map(chr, range(32))) + "\x7f text \x7f\x00\x1b",
    "special_token_lookalikes": "[PAD] [PAD]x </w> e</w> Ġ ĠĠ",
    "arabic": "هذا فيلم رائع!",
    "symbols": "x≤y ∑∞ ±5 °C ™ © …",
    "repeats": "!!!! .... aaaa ---- ????",
}


@pytest.fixture(scope="module")
def tokenizer(sample_dir: Path) -> HfAttnTokenizerFast:
    return load_week3_tokenizer(sample_dir)


@pytest.fixture(scope="module")
def reference(sample_dir: Path) -> ReferenceTokenizer:
    return ReferenceTokenizer.from_week3_folder(sample_dir)


@pytest.fixture(scope="module")
def labelled_reviews() -> list[str]:
    """The 50,000 labelled reviews, IMDb train then test, the order split_indices.json indexes."""
    require(IMDB)
    return [
        text
        for split in ("train", "test")
        for text in pq.read_table(next(IMDB.glob(f"{split}-*.parquet")), columns=["text"]).column("text").to_pylist()
    ]


@pytest.fixture(scope="module")
def split_indices(sample_dir: Path) -> dict[str, list[int]]:
    return json.loads((sample_dir / "split_indices.json").read_text())


def expected_decoding(reference: ReferenceTokenizer, text: str) -> str:
    """What decoding the reference ids gives back: each word, then a space if its </w> was merged, not dropped."""
    spaced = "".join(
        word + ("" if reference.word_tokens(word)[-1] == END_OF_WORD else " ") for word in WORD_PATTERN.findall(text)
    )
    return spaced[:-1] if spaced.endswith(" ") else spaced


def without_end_of_word(ids: list[int], end_of_word_id: int) -> list[int]:
    return [i for i in ids if i != end_of_word_id]


# --- parity with the document ---------------------------------------------------------------------


@pytest.mark.parametrize("name", list(HARD_CASES))
def test_hard_case_ids_match_reference(
    name: str, tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer
) -> None:
    text = HARD_CASES[name]
    expected = reference.encode(text)
    assert tokenizer(text, truncation=False)["input_ids"] == expected
    assert tokenizer.encode(text, truncation=False) == expected
    # The Rust tokenizer alone gives the same ids once the lone </w> is dropped.
    assert without_end_of_word(tokenizer.backend_tokenizer.encode(text).ids, tokenizer.end_of_word_id) == expected


def test_hard_cases_in_one_batch_and_decode(tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer) -> None:
    texts = list(HARD_CASES.values())
    encoded = tokenizer(texts, truncation=False)["input_ids"]
    assert encoded == [reference.encode(text) for text in texts]
    for text, ids in zip(texts, encoded):
        assert tokenizer.decode(ids) == expected_decoding(reference, text), text[:40]


def test_no_byte_is_lost(tokenizer: HfAttnTokenizerFast) -> None:
    """Every byte of every non-space character comes back, whatever merges happened."""
    text = HARD_CASES["emoji"] + HARD_CASES["cjk"] + HARD_CASES["control_characters"] + HARD_CASES["combining"]
    decoded = tokenizer.decode(tokenizer(text, truncation=False)["input_ids"])
    assert "".join(decoded.split()) == "".join(text.split())


def test_imdb_reviews_match_reference(
    tokenizer: HfAttnTokenizerFast,
    reference: ReferenceTokenizer,
    labelled_reviews: list[str],
    split_indices: dict[str, list[int]],
) -> None:
    """A few thousand reviews from all three parts of the seed split, plain and in the Week 3 format."""
    rows = split_indices["train"][:2000] + split_indices["val"][:500] + split_indices["test"][:500]
    texts = [labelled_reviews[i] for i in rows]
    assert tokenizer(texts, truncation=False)["input_ids"] == [reference.encode(text) for text in texts]
    padded = tokenizer(texts, truncation=True, padding="max_length")
    expected = [reference.encode_padded(text) for text in texts]
    assert padded["input_ids"] == [ids for ids, _ in expected]
    assert padded["attention_mask"] == [mask for _, mask in expected]
    rust = tokenizer.backend_tokenizer.encode_batch(texts[:300])
    assert [without_end_of_word(e.ids, tokenizer.end_of_word_id) for e in rust] == [
        reference.encode(t) for t in texts[:300]
    ]


@pytest.mark.slow
def test_all_labelled_reviews_match_reference(
    tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer, labelled_reviews: list[str]
) -> None:
    assert len(labelled_reviews) == 50_000
    encoded = tokenizer(labelled_reviews, truncation=False)["input_ids"]
    assert encoded == [reference.encode(text) for text in labelled_reviews]
    assert encode_batch(tokenizer, labelled_reviews)["input_ids"] == encoded


def test_word_split_matches_python_re_on_every_code_point(tokenizer: HfAttnTokenizerFast) -> None:
    """The normalizer's frozen classes against Python's re, each code point inside a word and doubled."""
    code_points = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    text = "".join(f"a{c}{c}b " for c in code_points)
    expected = "".join(f"{word} " for word in WORD_PATTERN.findall(text))
    normalized = tokenizer.backend_tokenizer.normalizer.normalize_str(text)
    if normalized != expected:
        at = next(i for i, (a, b) in enumerate(zip(normalized, expected)) if a != b)
        pytest.fail(f"split differs near {expected[max(0, at - 20): at + 20]!r} (got {normalized[at - 20: at + 20]!r})")


# --- the Week 3 files --------------------------------------------------------------------------------


def test_sizes_and_special_tokens(tokenizer: HfAttnTokenizerFast) -> None:
    config = json.loads(SAMPLE_FILES["vocab_config.json"].read_text())
    assert len(tokenizer) == tokenizer.vocab_size == config["vocab_size"]
    assert (tokenizer.pad_token, tokenizer.pad_token_id) == (config["pad_token"], config["pad_id"])
    assert tokenizer.model_max_length == config["max_seq"]
    assert tokenizer.end_of_word_id == 32


@pytest.mark.parametrize("flat", [False, True])
def test_save_week3_rewrites_the_sample_files_byte_for_byte(
    tokenizer: HfAttnTokenizerFast, tmp_path: Path, flat: bool
) -> None:
    written = save_week3(tokenizer, tmp_path, flat=flat)
    assert [path.name for path in written] == list(SAMPLE_FILES)
    for path in written:
        assert path.read_bytes() == SAMPLE_FILES[path.name].read_bytes(), path.name
    assert load_week3_tokenizer(tmp_path)("don't stop")["input_ids"] == tokenizer("don't stop")["input_ids"]


def write_flat_copy(directory: Path, **changes: object) -> Path:
    """The sample's three files in ``directory``, with some replaced by new JSON values or raw text."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, source in SAMPLE_FILES.items():
        key = name.removesuffix(".json")
        if key in changes:
            value = changes[key]
            (directory / name).write_text(value if isinstance(value, str) else json.dumps(value), encoding="utf-8")
        else:
            shutil.copy(source, directory / name)
    return directory


def sample_json(name: str) -> object:
    return json.loads(SAMPLE_FILES[name].read_text(encoding="utf-8"))


def bad_files() -> dict[str, tuple[dict[str, object], str]]:
    """Broken variants of the sample files and a pattern their error message must contain."""
    merges, vocab, config = (
        sample_json("bpe_merges.json"),
        sample_json("bpe_vocab.json"),
        sample_json("vocab_config.json"),
    )
    gap_vocab = dict(vocab)
    gap_vocab["[PAD]"] = 501
    ghost_merge = [*merges[:10], ["t", "zz"], *merges[10:]]
    later_made = [["th", "e</w>"], *merges]
    end_inside = [*merges, ["e</w>", "s"]]
    return {
        "invalid_json": ({"bpe_vocab": '{"a": 0,'}, r"bpe_vocab\.json: not valid UTF-8 JSON"),
        "merges_not_pairs": (
            {"bpe_merges": [["t", "h", "e"]]},
            r"bpe_merges\.json: expected a JSON list of \[left, right\]",
        ),
        "merge_part_not_a_token": (
            {"bpe_merges": ghost_merge},
            r"merge #10 \['t', 'zz'\]: 'zz' is not a token of .*bpe_vocab\.json",
        ),
        "ids_not_contiguous": ({"bpe_vocab": gap_vocab}, r"bpe_vocab\.json: ids must be 0\.\.500"),
        "pad_id_disagrees": (
            {"vocab_config": {**config, "pad_id": 499}},
            r"vocab_config\.json says pad_token '\[PAD\]' has id 499",
        ),
        "vocab_size_disagrees": (
            {"vocab_config": {**config, "vocab_size": 600}},
            r"vocab_size 600 and pad_id 500 must be 501",
        ),
        "byte_vocab_size": ({"vocab_config": {**config, "byte_vocab_size": 128}}, r"byte_vocab_size is 128"),
        "config_key_missing": (
            {"vocab_config": {k: v for k, v in config.items() if k != "max_seq"}},
            r"missing key\(s\) max_seq",
        ),
        "merges_from_another_run": (
            {"bpe_merges": merges[:-1]},
            r"token 'time</w>' has id 499, but the Week 3 construction",
        ),
        "end_of_word_inside_merge": ({"bpe_merges": end_inside}, r"</w> ends a word"),
        "token_used_before_made": (
            {"bpe_merges": later_made},
            r"merge #0 \['th', 'e</w>'\]: 'th' is made \(again\) by the later",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "invalid_json",
        "merges_not_pairs",
        "merge_part_not_a_token",
        "ids_not_contiguous",
        "pad_id_disagrees",
        "vocab_size_disagrees",
        "byte_vocab_size",
        "config_key_missing",
        "merges_from_another_run",
        "end_of_word_inside_merge",
        "token_used_before_made",
    ],
)
def test_bad_week3_files_raise_clear_errors(sample_dir: Path, tmp_path: Path, case: str) -> None:
    changes, message = bad_files()[case]
    folder = write_flat_copy(tmp_path / case, **changes)
    with pytest.raises(Week3FormatError, match=message) as error:
        load_week3_tokenizer(folder)
    assert str(folder) in str(error.value)


def test_missing_week3_file_names_what_was_looked_for(sample_dir: Path, tmp_path: Path) -> None:
    folder = write_flat_copy(tmp_path / "partial")
    (folder / "bpe_vocab.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"bpe_vocab\.json not found: looked for .*datasets/bpe_vocab\.json"):
        load_week3_tokenizer(folder)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        load_week3_tokenizer(tmp_path / "nowhere")


# --- transformers behaviour -----------------------------------------------------------------------------


def test_week3_format_and_tensors(tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer) -> None:
    texts = [HARD_CASES["plain"], HARD_CASES["long_word"], HARD_CASES["empty"], HARD_CASES["br_tags"] * 30]
    batch = tokenizer(texts, truncation=True, padding="max_length", return_tensors="pt")
    assert batch["input_ids"].shape == batch["attention_mask"].shape == (4, 128)
    assert batch["input_ids"].dtype == torch.long
    expected = [reference.encode_padded(text) for text in texts]
    assert batch["input_ids"].tolist() == [ids for ids, _ in expected]
    assert batch["attention_mask"].tolist() == [mask for _, mask in expected]


def test_padding_and_truncation_options(tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer) -> None:
    texts = ["We love movies.", "don't", ""]
    ids = [reference.encode(text) for text in texts]
    pad = tokenizer.pad_token_id
    longest = tokenizer(texts, padding=True)
    assert longest["input_ids"] == [one + [pad] * (8 - len(one)) for one in ids]
    assert longest["attention_mask"] == [[1] * len(one) + [0] * (8 - len(one)) for one in ids]
    left = tokenizer(texts, padding=True, padding_side="left", pad_to_multiple_of=5, truncation=False)["input_ids"]
    assert left == [[pad] * (10 - len(one)) + one for one in ids]
    assert tokenizer(texts, truncation=True, max_length=3)["input_ids"] == [one[:3] for one in ids]
    single = tokenizer("We love movies.", truncation=True, max_length=4, padding="max_length", return_length=True)
    assert single["input_ids"] == ids[0][:4] and single["length"] == 4
    left_cut = copy.deepcopy(tokenizer)
    left_cut.truncation_side = "left"
    assert left_cut(texts, truncation=True, max_length=3)["input_ids"] == [one[-3:] for one in ids]
    extras = tokenizer(texts[:2], padding=True, return_special_tokens_mask=True, return_token_type_ids=True)
    assert extras["special_tokens_mask"][1] == [0] * len(ids[1]) + [1] * (8 - len(ids[1]))
    assert extras["token_type_ids"] == [[0] * 8, [0] * 8]


def test_truncation_is_transformers_default_every_token_unless_asked(
    tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer, labelled_reviews: list[str]
) -> None:
    """As every transformers tokenizer: `tokenizer(text)` and `encode(text)` keep all of the reference's ids,
    `truncation=True` the first `model_max_length`, `truncation=True, max_length=N` the first N."""
    limit = tokenizer.model_max_length
    texts = [*labelled_reviews[:40], HARD_CASES["long_word"], HARD_CASES["long_mixed_word"]]
    expected = [reference.encode(text) for text in texts]
    assert sum(len(ids) > limit for ids in expected) >= 10  # truncation is exercised, not vacuous
    assert tokenizer(texts)["input_ids"] == expected
    assert [tokenizer.encode(text) for text in texts] == expected
    assert tokenizer(texts, truncation=True)["input_ids"] == [ids[:limit] for ids in expected]
    assert [tokenizer.encode(text, truncation=True) for text in texts] == [ids[:limit] for ids in expected]
    padded = tokenizer(texts, truncation=True, padding=True, return_tensors="pt")["input_ids"]
    assert padded.shape == (len(texts), limit)
    longer = tokenizer(texts, truncation=True, max_length=limit + 50)["input_ids"]
    assert longer == [ids[: limit + 50] for ids in expected]
    assert tokenizer.tokenize(texts[-1]) == tokenizer.convert_ids_to_tokens(expected[-1])
    huge = "A fine film, " * 80_000  # about 1 MB
    assert tokenizer(huge, truncation=True)["input_ids"] == reference.encode(huge[:1000])[:limit]


def test_offsets_point_at_the_token_text(tokenizer: HfAttnTokenizerFast) -> None:
    text = "We love movies, don't you?"
    encoded = tokenizer(text, return_offsets_mapping=True)
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    assert len(encoded["offset_mapping"]) == len(tokens)
    for token, (start, end) in zip(tokens, encoded["offset_mapping"]):
        assert text[start:end].rstrip() == token.removesuffix("Ġ")
    short = len(tokenizer("We")["input_ids"])
    padded = tokenizer(["We", text], return_offsets_mapping=True, padding=True, return_tensors="pt")
    assert padded["offset_mapping"].shape == (2, len(tokens), 2)
    assert padded["offset_mapping"][1].tolist() == [list(span) for span in encoded["offset_mapping"]]
    assert padded["offset_mapping"][0, short:].tolist() == [[0, 0]] * (len(tokens) - short)


def test_tokens_words_and_unsupported_inputs(tokenizer: HfAttnTokenizerFast) -> None:
    assert tokenizer.tokenize("don't") == ["d", "onĠ", "'Ġ", "tĠ"]
    assert tokenizer.convert_tokens_to_ids(tokenizer.tokenize("don't")) == tokenizer("don't")["input_ids"]
    assert tokenizer(["don't", "stop"], is_split_into_words=True)["input_ids"] == tokenizer("don't stop")["input_ids"]
    assert tokenizer("[PAD]")["input_ids"] != [tokenizer.pad_token_id]
    with pytest.raises(ValueError, match="no sentence-pair format"):
        tokenizer("a review", "a question")
    with pytest.raises(ValueError, match="overflowing"):
        tokenizer("a review", return_overflowing_tokens=True)


def test_decode_skips_padding(tokenizer: HfAttnTokenizerFast) -> None:
    padded = tokenizer("We love movies.", padding="max_length")["input_ids"]
    assert tokenizer.decode(padded, skip_special_tokens=True) == "We love movies ."
    assert tokenizer.batch_decode([padded[:3], []]) == ["We l", ""]


def test_pickled_and_copied_tokenizers_encode_alike(
    tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer, labelled_reviews: list[str]
) -> None:
    """datasets.map pickles the tokenizer to fingerprint it and to send it to workers."""
    texts = labelled_reviews[:100] + list(HARD_CASES.values())
    expected = [reference.encode(text) for text in texts]
    for clone in (pickle.loads(pickle.dumps(tokenizer)), copy.deepcopy(tokenizer)):
        assert clone(texts, truncation=False)["input_ids"] == expected


def test_datasets_map(tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer) -> None:
    texts = list(HARD_CASES.values())
    mapped = datasets.Dataset.from_dict({"text": texts}).map(
        lambda batch: tokenizer(batch["text"], truncation=True, padding="max_length"), batched=True, batch_size=7
    )
    assert mapped["input_ids"] == [reference.encode_padded(text)[0] for text in texts]


# --- save_pretrained / from_pretrained ------------------------------------------------------------------

FRESH_PROCESS_CHECK = r"""
import importlib.abc, json, sys

class RefuseHfAttn(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "hf_attn" or name.startswith("hf_attn."):
            raise ModuleNotFoundError(f"{name} is kept out of this check")
        return None

sys.meta_path.insert(0, RefuseHfAttn())
try:
    import hf_attn
except ModuleNotFoundError:
    pass
else:
    raise SystemExit("hf_attn is importable here, so this check would prove nothing")

from transformers import AutoTokenizer

tokenizer = AutoTokenizer.from_pretrained(sys.argv[1], trust_remote_code=True)
texts = json.loads(sys.stdin.read())
print(json.dumps({
    "class": type(tokenizer).__module__ + "." + type(tokenizer).__name__,
    "ids": tokenizer(texts, truncation=False)["input_ids"],
    "default": tokenizer(texts)["input_ids"],
    "padded": tokenizer(texts, truncation=True, padding="max_length")["input_ids"],
    "hf_attn_modules": [name for name in sys.modules if name == "hf_attn" or name.startswith("hf_attn.")],
}))
"""


def test_save_pretrained_loads_in_a_fresh_process_without_hf_attn(
    tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer, tmp_path: Path
) -> None:
    saved = tmp_path / "tokenizer"
    tokenizer.save_pretrained(saved)
    texts = list(HARD_CASES.values())
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(HF_HOME=str(tmp_path / "hf_home"), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    run = subprocess.run(
        [sys.executable, "-I", "-c", FRESH_PROCESS_CHECK, str(saved)],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["class"].endswith("tokenization_hf_attn.HfAttnTokenizerFast")
    assert not result["class"].startswith("hf_attn")
    assert result["hf_attn_modules"] == []
    assert result["ids"] == [reference.encode(text) for text in texts]
    assert result["default"] == result["ids"]  # no truncation unless asked, as transformers' tokenizers
    assert result["padded"] == [reference.encode_padded(text)[0] for text in texts]


def test_from_pretrained_in_process_and_plain_fast_tokenizer(
    tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer, tmp_path: Path
) -> None:
    tokenizer.save_pretrained(tmp_path)
    texts = list(HARD_CASES.values())
    expected = [reference.encode(text) for text in texts]
    reloaded = HfAttnTokenizerFast.from_pretrained(tmp_path)
    assert reloaded(texts, truncation=False)["input_ids"] == expected
    assert week3_files_from_tokenizer(reloaded) == week3_files_from_tokenizer(tokenizer)
    # A plain fast tokenizer reads the same tokenizer.json; it only keeps the lone </w> (id 32) in.
    plain = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    assert [without_end_of_word(ids, 32) for ids in plain(texts)["input_ids"]] == expected


# --- the trainer --------------------------------------------------------------------------------------

TIE_CORPUS = [
    "ab ab ba ba cd cd dc dc",
    "abab baba cdcd",
    "zz yy xx ww zz yy xx ww",
    "a_b a_b é é è è",
    "don't don't can't can't",
    "ééé èèè ab! ab! ab?",
]


@pytest.mark.parametrize(("vocab_size", "min_freq"), [(300, 1), (280, 2), (256, 1), (400, 50)])
def test_trainer_matches_documented_trainer_on_ties(vocab_size: int, min_freq: int) -> None:
    files = week3_files_from_tokenizer(train_week3_tokenizer(TIE_CORPUS, vocab_size=vocab_size, min_freq=min_freq))
    expected = train_reference(TIE_CORPUS, vocab_size=vocab_size, min_freq=min_freq)
    assert files.merges == expected
    assert files.vocab == reference_vocab(expected)


def test_trainer_matches_documented_trainer_on_reviews(labelled_reviews: list[str]) -> None:
    texts = labelled_reviews[:80] + labelled_reviews[-80:]
    files = week3_files_from_tokenizer(train_week3_tokenizer(texts, vocab_size=330, min_freq=3))
    assert files.merges == train_reference(texts, vocab_size=330, min_freq=3)


def test_trainer_reproduces_the_sample_files(
    labelled_reviews: list[str], split_indices: dict[str, list[int]], tmp_path: Path
) -> None:
    """The sample files were made by an independent implementation on these 5,000 reviews."""
    texts = [labelled_reviews[i] for i in split_indices["train"][:5000]]
    trained = train_week3_tokenizer(texts, vocab_size=500, min_freq=5, max_seq=128)
    for path in save_week3(trained, tmp_path):
        assert path.read_bytes() == SAMPLE_FILES[path.name].read_bytes(), path.name


@pytest.mark.slow
def test_documented_trainer_reproduces_the_sample_merges(
    labelled_reviews: list[str], split_indices: dict[str, list[int]]
) -> None:
    """Checks the reference trainer itself against the sample (minutes of pure Python)."""
    texts = [labelled_reviews[i] for i in split_indices["train"][:5000]]
    merges = [tuple(pair) for pair in json.loads(SAMPLE_FILES["bpe_merges.json"].read_text())]
    assert train_reference(texts, vocab_size=500, min_freq=5) == merges


def test_trained_files_load_and_match_the_reference(labelled_reviews: list[str], tmp_path: Path) -> None:
    texts = labelled_reviews[:300]
    trained = train_week3_tokenizer(texts, vocab_size=320, min_freq=2, max_seq=64)
    paths = save_week3(trained, tmp_path)
    reference = ReferenceTokenizer.from_files(*paths)
    loaded = load_week3_tokenizer(tmp_path)
    probe = labelled_reviews[-200:] + list(HARD_CASES.values())
    assert loaded(probe, truncation=True, padding="max_length")["input_ids"] == [
        reference.encode_padded(text)[0] for text in probe
    ]
    assert loaded.model_max_length == 64


def test_trainer_rejects_a_vocabulary_smaller_than_the_bytes() -> None:
    with pytest.raises(ValueError, match="at least 256"):
        train_week3_tokenizer(["a b"], vocab_size=100)


@pytest.mark.parametrize("limit", [None, 0, 2, 50])
@pytest.mark.parametrize("keep_end", [False, True])
def test_kept_positions_is_a_per_row_filter_then_cut(limit: int | None, keep_end: bool) -> None:
    """The vectorised filter against the obvious per-row loop, empty rows and all-dropped rows included."""
    generator = np.random.default_rng(0)
    rows = [list(generator.integers(0, 3, size=n)) for n in (0, 5, 1, 9, 3, 4)] + [[0, 0]]
    flat = np.array([token for row in rows for token in row], dtype=np.int64)
    kept, kept_lengths = kept_positions(np.array([len(row) for row in rows]), flat == 0, limit, keep_end=keep_end)
    expected = []
    start = 0
    for row in rows:
        indices = [start + i for i, token in enumerate(row) if token != 0]
        if limit is not None:
            indices = indices[len(indices) - min(limit, len(indices)):] if keep_end else indices[:limit]
        expected.append(indices)
        start += len(row)
    assert kept.tolist() == [index for indices in expected for index in indices]
    assert kept_lengths.tolist() == [len(indices) for indices in expected]


def test_ragged_take_is_the_slices_laid_end_to_end() -> None:
    values = np.arange(100, 120)
    starts, lengths = np.array([3, 0, 7, 7, 19]), np.array([2, 0, 4, 1, 1])
    expected = [value for start, length in zip(starts, lengths) for value in values[start:start + length]]
    assert ragged_take(values, starts, lengths).tolist() == expected


def test_append_to_rows_appends_each_rows_values_after_its_own() -> None:
    values, lengths = np.arange(10), np.array([3, 0, 4, 3])
    more_values, more_lengths, rows = np.arange(100, 105), np.array([2, 3]), np.array([1, 3])
    starts, more_starts = np.cumsum(lengths) - lengths, np.cumsum(more_lengths) - more_lengths
    expected = [values[start:start + length].tolist() for start, length in zip(starts, lengths)]
    for row, start, length in zip(rows, more_starts, more_lengths):
        expected[row] += more_values[start:start + length].tolist()
    appended, new_lengths = append_to_rows(values, lengths, more_values, more_lengths, rows)
    assert appended.tolist() == [value for row in expected for value in row]
    assert new_lengths.tolist() == [len(row) for row in expected]


@pytest.mark.parametrize("encoder", ["class", "encode_batch"])
@pytest.mark.parametrize("max_length", [2, 5, 40])
def test_truncated_ids_are_the_start_of_every_token_whether_half_the_words_fill_them_or_not(
    tokenizer: HfAttnTokenizerFast, max_length: int, encoder: str
) -> None:
    """Truncating encodes half of ``max_length`` words first, then the next ones for the texts still short: rows
    of one-token words need both rounds, long words the first only. Every row must be the untruncated ids'
    first ``max_length``."""
    texts = ["a " * 60, "extraordinarily unbelievable " * 30, "a b", "", "a " * (max_length // 2) + "zzz!? " * 30,
             *HARD_CASES.values()]
    whole = tokenizer(texts, truncation=False)["input_ids"]
    assert ENCODERS[encoder](tokenizer, texts, truncation=True, max_length=max_length)["input_ids"] == [
        ids[:max_length] for ids in whole
    ]


@pytest.mark.parametrize("padding", ["longest", "max_length"])
@pytest.mark.parametrize("pad_to_multiple_of", [None, 4])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_padded_rows_are_what_pad_makes_of_the_lists(
    tokenizer: HfAttnTokenizerFast, padding: str, pad_to_multiple_of: int | None, padding_side: str
) -> None:
    """The numpy layout of rows padded to one length against transformers' own ``pad`` of the same lists."""
    rows = [[5, 6, 7], [], [8], [9, 10, 11, 12, 13]]
    strategy = PaddingStrategy(padding)
    width = padded_width(np.array([len(row) for row in rows]), strategy, 6, pad_to_multiple_of)
    ids, mask = padded_rows(np.array(sum(rows, [])), np.array([len(row) for row in rows]), width, 99,
                            left=padding_side == "left")
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.pad_token = tokenizer.convert_ids_to_tokens(99)
    expected = PreTrainedTokenizerFast.pad(tokenizer, {"input_ids": rows}, padding=padding, max_length=6,
                                           pad_to_multiple_of=pad_to_multiple_of, padding_side=padding_side)
    assert ids.tolist() == expected["input_ids"]
    assert mask.tolist() == expected["attention_mask"]
    assert padded_width(np.array([7]), PaddingStrategy.MAX_LENGTH, 6, None) is None  # a longer row stays ragged
    assert padded_width(np.array([7]), PaddingStrategy.DO_NOT_PAD, 6, None) is None


def every_code_point_texts() -> list[str]:
    """Every code point in order, 60,000 in random order, and 5,000 with random spaces between."""
    code_points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    generator = np.random.default_rng(0)
    shuffled = [code_points[i] for i in generator.permutation(len(code_points))[:60_000]]
    texts = ["".join(map(chr, code_points)), "".join(map(chr, shuffled))]
    return texts + ["".join(chr(c) + " " * int(generator.integers(0, 2)) for c in shuffled[:5000])]


def normalized_words(normalizer: Any, text: str) -> list[str]:
    return [word for word in normalizer.normalize_str(text).split(" ") if word]


def test_word_pattern_finds_the_normalizers_words(tokenizer: HfAttnTokenizerFast) -> None:
    """The word route's Python pattern against the Rust normalizer over every code point."""
    # built by this interpreter: its classes are re's own
    assert word_pattern(tokenizer) is batch_encoding.WORD_PATTERN
    for text in every_code_point_texts():
        assert word_pattern(tokenizer).findall(text) == normalized_words(tokenizer.backend_tokenizer.normalizer, text)


def test_word_pattern_of_other_classes_keeps_them() -> None:
    """A tokenizer.json frozen by an interpreter with other classes (here: no digits in words, so each digit is
    a word of its own) is split with its own classes, not this interpreter's."""
    other = normalizers.Replace(Regex(word_end_pattern().replace("\\x{30}-\\x{39}", "", 2)), " ")
    assert "\\x{30}-\\x{39}" in word_end_pattern()
    pattern = normalizer_words(other.__getstate__())
    assert pattern is not batch_encoding.WORD_PATTERN
    assert pattern.findall("ab12c 3") == ["ab", "1", "2", "c", "3"]
    for text in every_code_point_texts()[1:]:  # the random ones: the frozen classes are slow in re
        assert pattern.findall(text) == normalized_words(other, text)


@pytest.mark.parametrize("truncation_side", ["right", "left"])
@pytest.mark.parametrize("max_length", [None, 0, 3, 40])
def test_word_route_and_rust_route_give_the_same_ids(
    tokenizer: HfAttnTokenizerFast, truncation_side: str, max_length: int | None
) -> None:
    """``encode_batch`` encodes texts word by word; the class asks Rust for whole texts, also with a per-token
    output. All must give the same rows, truncated and padded alike."""
    texts = list(HARD_CASES.values()) * 2
    options = {"truncation": max_length is not None, "max_length": max_length, "padding": "longest"}
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.truncation_side = truncation_side
    by_words = encode_batch(tokenizer, texts, **options)
    by_texts = tokenizer(texts, **options)
    with_mask = tokenizer(texts, return_special_tokens_mask=True, **options)
    whole = tokenizer(texts)["input_ids"]
    if max_length is not None:
        cut = [ids[:max_length] if truncation_side == "right" else ids[len(ids) - min(max_length, len(ids)):]
               for ids in whole]
        assert by_texts["input_ids"] == [ids + [tokenizer.pad_token_id] * (max(map(len, cut)) - len(ids))
                                         for ids in cut]
    assert by_words["input_ids"] == by_texts["input_ids"] == with_mask["input_ids"]
    assert by_words["attention_mask"] == by_texts["attention_mask"] == with_mask["attention_mask"]


ENCODERS = {
    "class": lambda tokenizer, texts, **options: tokenizer(texts, **options),
    "encode_batch": encode_batch,
}
"""The two ways the package encodes a batch: the Hub class, and the opt-in word-level path."""


@pytest.mark.parametrize("encoder", list(ENCODERS))
@pytest.mark.parametrize("padding_side", ["right", "left"])
@pytest.mark.parametrize(
    "options",
    [{}, {"truncation": True}, {"truncation": True, "max_length": 7, "padding": True},
     {"truncation": True, "padding": "max_length", "return_tensors": "pt"}, {"padding": True, "pad_to_multiple_of": 8}],
)
def test_both_paths_give_the_references_ids_and_masks(
    tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer, labelled_reviews: list[str], encoder: str,
    padding_side: str, options: dict[str, Any],
) -> None:
    """Sample reviews, empty and non-ASCII texts, with and without truncation and padding: the reference's ids
    cut and padded by hand, the same from the Hub class and from ``encode_batch``."""
    texts = labelled_reviews[:60] + list(HARD_CASES.values()) + ["", " "]
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.padding_side = padding_side
    encoded = ENCODERS[encoder](tokenizer, texts, **options)
    limit = options.get("max_length", tokenizer.model_max_length) if options.get("truncation") else None
    rows = [reference.encode(text)[:limit] for text in texts]
    width = max(map(len, rows)) if options.get("padding") is True else None
    width = tokenizer.model_max_length if options.get("padding") == "max_length" else width
    if width is not None and options.get("pad_to_multiple_of"):
        width = -(-width // options["pad_to_multiple_of"]) * options["pad_to_multiple_of"]
    pads = [(width or len(row)) - len(row) for row in rows]
    left = padding_side == "left"
    pad_id = tokenizer.pad_token_id
    expected_ids = [[pad_id] * pad + row if left else row + [pad_id] * pad for row, pad in zip(rows, pads)]
    expected_masks = [[0] * pad + [1] * len(row) if left else [1] * len(row) + [0] * pad
                      for row, pad in zip(rows, pads)]
    ids, masks = encoded["input_ids"], encoded["attention_mask"]
    if options.get("return_tensors"):
        assert ids.dtype == masks.dtype == torch.int64
        ids, masks = ids.tolist(), masks.tolist()
    assert ids == expected_ids
    assert masks == expected_masks


@pytest.mark.parametrize("encoder", list(ENCODERS))
def test_truncation_without_a_known_length_keeps_every_token(
    tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer, encoder: str
) -> None:
    """A tokenizer saved without ``model_max_length`` (transformers' ``VERY_LARGE_INTEGER``) truncates nothing, as
    transformers' own tokenizers do."""
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.model_max_length = int(1e30)
    texts = [HARD_CASES["long_word"], HARD_CASES["plain"]]
    encoded = ENCODERS[encoder](tokenizer, texts, truncation=True)["input_ids"]
    assert encoded == [reference.encode(text) for text in texts]


def test_head_of_a_text_is_its_prefix_up_to_the_next_piece() -> None:
    assert head_of("a  b\tc d", 2) == "a  b\t"
    assert head_of(" a b", 5) == " a b"
    assert head_of("", 0) == ""
    for text in ("a  b\tc d", " x y z ", "one"):
        for pieces in range(5):
            head = head_of(text, pieces)
            assert text.startswith(head)
            assert head.split() == text.split()[:pieces] or len(head.split()) == pieces


@pytest.mark.parametrize("encoder", ["class", "encode_batch"])
def test_an_empty_batch_encodes_to_no_rows(tokenizer: HfAttnTokenizerFast, encoder: str) -> None:
    assert ENCODERS[encoder](tokenizer, [])["input_ids"] == []
    assert ENCODERS[encoder](tokenizer, [], padding=True, return_tensors="pt")["input_ids"].numel() == 0


@pytest.mark.parametrize("texts", ["", ["", " "], [" \n", "a"]])
def test_empty_texts_give_integer_tensors(tokenizer: HfAttnTokenizerFast, texts: str | list[str]) -> None:
    """Rows with no token still make int64 ids and mask (an empty numpy row is float64 by default)."""
    encoded = tokenizer(texts, padding=True, return_tensors="pt", return_length=True)
    assert {value.dtype for value in encoded.values()} == {torch.int64}
    if isinstance(texts, list):
        encoded = encode_batch(tokenizer, texts, padding=True, return_tensors="pt")
        assert {value.dtype for value in encoded.values()} == {torch.int64}


def test_re_whitespace_is_str_isspace_on_every_code_point() -> None:
    """The split route cuts texts with ``str.split``: it must cut exactly where ``WORD_PATTERN``'s ``\\s`` does."""
    whitespace = re.compile(r"\s")
    for code in (c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF):
        assert bool(whitespace.fullmatch(chr(code))) == chr(code).isspace(), hex(code)


def test_first_words_are_the_first_words_of_the_whole_text() -> None:
    """The prefix search against the whole text's words, with words cut by the prefix and texts shorter than it."""
    generator = np.random.default_rng(0)
    alphabet = list("ab .,!é日") + ["\n", "longword" * 5]
    texts = ["".join(generator.choice(alphabet, size=n)) for n in (0, 1, 3, 10, 40, 200, 1000)]
    texts += ["x" * 100 + " y", "a " * 50, "!" * 30]
    for text in texts:
        for count in (1, 2, 3, 7, 16, 64):
            assert first_words(WORD_PATTERN.findall, text, count) == WORD_PATTERN.findall(text)[:count]


def test_split_heads_is_each_texts_first_pieces_and_the_rest_after_them() -> None:
    texts = ["a b  c d e", "  one\ttwo\n", "", "x", "p q r"]
    counts = [2, 5, 3, 1, 3]
    pieces, found, rests = split_heads(texts, counts)
    expected = [text.split()[:count] for text, count in zip(texts, counts)]
    assert pieces == [piece for head in expected for piece in head]
    assert found.tolist() == [len(head) for head in expected]
    assert rests == ["c d e", "", "", "", ""]
    assert [head + rest.split() for head, rest in zip(expected, rests)] == [text.split() for text in texts]


def test_distinct_codes_number_the_items_in_order_of_first_appearance() -> None:
    items = ["b", "a", "b", "c", "a", "a", "d"]
    codes, distinct = distinct_codes(items)
    assert distinct == ["b", "a", "c", "d"]
    assert [distinct[code] for code in codes.tolist()] == items
    assert distinct_codes([])[1] == []


def test_laid_out_groups_the_parts_of_each_code_in_order() -> None:
    table, lengths = np.arange(100, 110), np.array([2, 3, 1, 4])  # part 0: 100 101, part 1: 102-104, ...
    parts = [table[start:start + length].tolist() for start, length in zip(np.cumsum(lengths) - lengths, lengths)]
    codes, parts_per_group = np.array([3, 0, 0, 2, 1]), np.array([2, 0, 3])
    values, group_lengths = laid_out(table, lengths, codes, parts_per_group)
    groups = [[part for code in codes[start:start + count].tolist() for part in parts[code]]
              for start, count in zip(np.cumsum(parts_per_group) - parts_per_group, parts_per_group)]
    assert values.tolist() == [value for group in groups for value in group]
    assert group_lengths.tolist() == [len(group) for group in groups]


@pytest.mark.parametrize("encoder", ["class", "encode_batch"])
@pytest.mark.parametrize("max_length", [1, 3, 128, 300])
def test_truncation_reads_as_many_rounds_as_the_texts_need(
    tokenizer: HfAttnTokenizerFast, reference: ReferenceTokenizer, max_length: int, encoder: str
) -> None:
    """Truncation reads each text's pieces in rounds, a fraction of the tokens still missing at a time: texts of
    one-token pieces need many rounds, of long words one; a text may end in any round. Each row must be the
    reference's first ``max_length`` ids."""
    rng = np.random.default_rng(0)
    words = ["a", "i", "the", "movie.", "extraordinarily", "don't", "!!", "x" * 40]
    texts = [" ".join(rng.choice(words, size=size, p=probabilities).tolist()) for size, probabilities in
             [(400, [0.5, 0.5, 0, 0, 0, 0, 0, 0]), (30, None), (900, None), (0, None), (129, [1, 0, 0, 0, 0, 0, 0, 0]),
              (127, [1, 0, 0, 0, 0, 0, 0, 0]), (80, [0, 0, 0, 0, 0, 0, 0, 1])]]
    encoded = ENCODERS[encoder](tokenizer, texts, truncation=True, max_length=max_length)["input_ids"]
    assert encoded == [reference.encode(text)[:max_length] for text in texts]
