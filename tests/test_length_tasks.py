"""The length-generalization tasks (hf_attn.tasks.length, hf_attn.tasks.scan): answers computed here
independently, split bounds and disjointness, determinism, the tokenizer, scoring against hand values."""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
import subprocess
import sys

import pytest
import torch
from helpers import REPO, SHARED, tiny_config_kwargs
from transformers import AutoTokenizer

from hf_attn import HfAttnConfig, HfAttnForCausalLM, cli
from hf_attn.tasks import dataset_source
from hf_attn.tasks.length import (
    LENGTH_TASKS,
    Pair,
    coupled_position_ids,
    decoder_features,
    digit_token_ids,
    draw_length_splits,
    exact_match_by_length,
    get_length_task,
    length_buckets,
    length_splits,
    mean_reciprocal_rank,
    read_pairs,
    task_tokenizer,
    word_accuracy_by_position,
    write_pairs,
)
from hf_attn.tasks.scan import SCAN_LENGTH_FILES, scan_length_split, scan_tokenizer

SCAN_FOLDER = SHARED / "data" / "scan"
MAX_TRAIN_LENGTH = 5
COUNTS = dict(max_train_length=MAX_TRAIN_LENGTH, n_train=200, n_validation=40, n_test_per_length=3)


@pytest.fixture(scope="module")
def splits() -> dict[str, dict[str, list[Pair]]]:
    return {name: draw_length_splits(name, **COUNTS, seed=7) for name in LENGTH_TASKS}


@pytest.fixture(scope="module")
def scan():
    if not SCAN_FOLDER.is_dir():
        pytest.skip(f"{SCAN_FOLDER} is absent; it holds SCAN's length split (brendenlake/SCAN, length_split/)")
    return scan_length_split(SCAN_FOLDER, n_validation=500, seed=3)


def _digits(text: str) -> str:
    return re.sub(r"[^0-9]", "", text)


HINTS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def reference_written(task: str, number: str, start: int = 0) -> str:
    """How an addition task writes `number`: spaced digits, reversed, each after its place letter if hinted (the
    units' letter HINTS[start])."""
    written = number[::-1] if "_reversed" in task else number
    places = range(len(number)) if "_reversed" in task else range(len(number) - 1, -1, -1)
    if "_hints" in task:
        return " ".join(f"{HINTS[start + place]} {digit}" for place, digit in zip(places, written))
    return " ".join(written)


def reference_operands(task: str, text: str) -> list[str]:
    """The operands of an addition input, most significant digit first."""
    return [_digits(operand)[:: -1 if "_reversed" in task else 1] for operand in text.split(" + ")]


def reference_answer(task: str, text: str) -> str:
    """The target of `text`, computed without the package."""
    items = text.split()
    if task == "copy":
        return text
    if task == "reverse":
        return " ".join(reversed(items))
    if task == "sort":
        return " ".join(sorted(items))
    first, second = reference_operands(task, text)
    start = HINTS.index(items[0]) if task.endswith("_random") else 0  # reversed: the units' letter comes first
    assert text == f"{reference_written(task, first, start)} + {reference_written(task, second, start)}"
    return reference_written(task, str(int(first) + int(second)), start)


def reference_length(task: str, text: str) -> int:
    if task.startswith("addition"):
        return max(len(operand) for operand in reference_operands(task, text))
    return len(text.split())


def all_pairs(by_split: dict[str, list[Pair]]) -> list[Pair]:
    return [pair for pairs in by_split.values() for pair in pairs]


@pytest.mark.parametrize("task", list(LENGTH_TASKS))
def test_every_target_is_the_independently_computed_answer(task, splits):
    for pair in all_pairs(splits[task]):
        assert pair.target == reference_answer(task, pair.input), pair
        assert pair.length == reference_length(task, pair.input), pair


@pytest.mark.parametrize("task", ["copy", "reverse", "sort"])
def test_items_come_from_the_ten_letters_with_repeats(task, splits):
    items = [item for pair in all_pairs(splits[task]) for item in pair.input.split()]
    assert set(items) <= set("abcdefghij")
    assert any(len(set(pair.input.split())) < pair.length for pair in splits[task]["test"])  # sort sees repeats


@pytest.mark.parametrize("task", ["addition", "addition_reversed", "addition_hints", "addition_reversed_hints",
                                  "addition_reversed_hints_random"])
def test_operands_have_exactly_length_digits_without_leading_zeros(task, splits):
    for pair in all_pairs(splits[task]):
        for digits in reference_operands(task, pair.input):
            assert re.fullmatch(r"[0-9]" if pair.length == 1 else r"[1-9][0-9]*", digits), pair
            assert len(digits) == pair.length


@pytest.mark.parametrize("task", list(LENGTH_TASKS))
def test_splits_hold_their_lengths_and_counts(task, splits):
    by_split = splits[task]
    assert len(by_split["train"]) == COUNTS["n_train"] and len(by_split["validation"]) == COUNTS["n_validation"]
    for split in ("train", "validation"):
        assert {pair.length for pair in by_split[split]} <= set(range(1, MAX_TRAIN_LENGTH + 1))
    test_counts = {}
    for pair in by_split["test"]:
        test_counts[pair.length] = test_counts.get(pair.length, 0) + 1
    assert test_counts == {length: COUNTS["n_test_per_length"] for length in [6, 7, 8, 9, 10, 20]}
    assert length_buckets(MAX_TRAIN_LENGTH) == [(1, 5), (6, 10), (20, 20)]


def test_every_test_length_holds_each_length_past_the_training_length_to_4l() -> None:
    by_split = draw_length_splits("reverse", 3, n_train=20, n_validation=5, n_test_per_length=2, seed=0,
                                  every_test_length=True)
    assert [pair.length for pair in by_split["test"]] == [n for n in range(4, 13) for _ in range(2)]
    assert length_buckets(3, every_test_length=True) == [(1, 3), (4, 6), (7, 11), (12, 12)]
    assert length_buckets(1, every_test_length=True) == [(1, 1), (2, 2), (3, 3), (4, 4)]
    # the same seed's train and validation pairs as the held-out split's: only the test split differs
    held_out = draw_length_splits("reverse", 3, n_train=20, n_validation=5, n_test_per_length=2, seed=0)
    for split in ("train", "validation"):
        assert by_split[split] == held_out[split]


@pytest.mark.parametrize("task", list(LENGTH_TASKS))
def test_no_input_is_in_two_splits(task, splits):
    hashes = {split: {hashlib.sha256(pair.input.encode()).hexdigest() for pair in pairs}
              for split, pairs in splits[task].items()}
    assert not hashes["train"] & hashes["validation"]
    assert not (hashes["train"] | hashes["validation"]) & hashes["test"]


def test_validation_avoids_short_inputs_train_has_taken():
    # Lengths 1..2 of copy have 10 + 100 distinct inputs; 300 training draws take most of them.
    by_split = draw_length_splits("copy", 2, n_train=300, n_validation=20, n_test_per_length=1, seed=0)
    train_inputs = {pair.input for pair in by_split["train"]}
    assert len(by_split["validation"]) == 20
    assert not train_inputs & {pair.input for pair in by_split["validation"]}


def test_a_split_that_cannot_be_disjoint_is_refused_in_one_line():
    # Length 1 has 10 inputs; 200 draws take all, so no validation example of length 1 remains.
    with pytest.raises(ValueError, match="copy: 1000 draws in a row for validation .* lower its count"):
        draw_length_splits("copy", 1, n_train=200, n_validation=1, n_test_per_length=1, seed=0)


def test_the_same_seed_gives_the_same_data_whatever_the_global_random_state():
    random.seed(1)
    first = length_splits("addition_reversed", **COUNTS, seed=11)
    random.seed(2)
    second = length_splits("addition_reversed", **COUNTS, seed=11)
    for split in first:
        assert json.dumps(first[split].to_list()) == json.dumps(second[split].to_list())
    other = length_splits("addition_reversed", **COUNTS, seed=12)
    assert first["train"]["input"] != other["train"]["input"]
    assert first["test"]["input"] != other["test"]["input"]


DIGEST_OF_SPLITS = (
    "import dataclasses, hashlib, json; from hf_attn.tasks.length import LENGTH_TASKS, draw_length_splits; "
    "print(hashlib.sha256(json.dumps([[dataclasses.asdict(p) for p in draw_length_splits(t, 4, 50, 10, 2, seed=3)[s]]"
    " for t in LENGTH_TASKS for s in ('train', 'validation', 'test')]).encode()).hexdigest())"
)


@pytest.mark.slow
def test_the_data_does_not_depend_on_the_process_hash_seed():
    digests = {subprocess.run([sys.executable, "-c", DIGEST_OF_SPLITS], capture_output=True, text=True, check=True,
                              cwd=REPO, env={"PYTHONHASHSEED": hash_seed, "HF_HUB_OFFLINE": "1"}).stdout
               for hash_seed in ("1", "2")}
    assert len(digests) == 1


def test_the_test_split_does_not_depend_on_the_training_count():
    small = draw_length_splits("sort", 4, n_train=10, n_validation=5, n_test_per_length=4, seed=5)
    large = draw_length_splits("sort", 4, n_train=100, n_validation=5, n_test_per_length=4, seed=5)
    assert small["test"] == large["test"]
    assert small["train"] == large["train"][:10]


def test_an_unknown_task_or_a_bad_count_is_refused():
    with pytest.raises(ValueError, match="unknown length task 'add'; choose one of copy, reverse, sort, addition"):
        get_length_task("add")
    with pytest.raises(ValueError, match="n_train must be an integer of at least 0, got -1"):
        draw_length_splits("copy", 3, n_train=-1, n_validation=1, n_test_per_length=1, seed=0)
    with pytest.raises(ValueError, match="addition_hints writes examples of length at most 51, and the test split of "
                                         "max_train_length=13 reaches 52: lower max_train_length"):
        draw_length_splits("addition_hints", 13, n_train=1, n_validation=1, n_test_per_length=1, seed=0)


def test_index_hints_change_the_writing_not_the_numbers():
    plain, hinted = (draw_length_splits(task, 3, 20, 5, 2, seed=9) for task in ("addition", "addition_reversed_hints"))
    for split in plain:
        assert [_digits(pair.input) for pair in plain[split]] == [
            "".join(_digits(operand)[::-1] for operand in pair.input.split(" + ")) for pair in hinted[split]]
    assert len(draw_length_splits("addition_reversed_hints", 12, 1, 0, 1, seed=0)["test"]) == 13  # 48 digits fit


def test_random_hint_starts_keep_the_numbers_and_show_training_every_letter_the_test_needs():
    fixed, shifted = (draw_length_splits(task, 8, 2000, 50, 20, seed=3)
                      for task in ("addition_reversed_hints", "addition_reversed_hints_random"))
    for split in fixed:
        assert [_digits(pair.input) for pair in fixed[split]] == [_digits(pair.input) for pair in shifted[split]]
        assert [_digits(pair.target) for pair in fixed[split]] == [_digits(pair.target) for pair in shifted[split]]
    starts = {pair.input.split()[0] for pair in shifted["train"]}
    assert len(starts) > 40  # the units' letter varies (44 possible starts at 8 digits)
    seen = {symbol for pair in shifted["train"] for symbol in pair.input.split() + pair.target.split()}
    needed = {symbol for pair in shifted["test"] for symbol in pair.input.split() + pair.target.split()}
    assert needed <= seen  # the fixed hints' 9- to 32-digit numbers need letters training never shows
    fixed_seen = {symbol for pair in fixed["train"] for symbol in pair.input.split() + pair.target.split()}
    assert not {symbol for pair in fixed["test"] for symbol in pair.input.split()} <= fixed_seen


def test_the_dataset_dict_holds_the_drawn_pairs():
    dataset = length_splits("reverse", **COUNTS, seed=4)
    drawn = draw_length_splits("reverse", **COUNTS, seed=4)
    assert list(dataset) == ["train", "validation", "test"]
    for split, pairs in drawn.items():
        assert dataset[split].to_list() == [{"input": p.input, "target": p.target, "length": p.length} for p in pairs]


@pytest.mark.parametrize("task", list(LENGTH_TASKS))
def test_the_tokenizer_reads_every_text_of_the_task_exactly(task, splits):
    tokenizer = task_tokenizer(task)
    for pair in all_pairs(splits[task]):
        for text in (pair.input, pair.target):
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            assert tokenizer.unk_token_id not in ids
            assert len(ids) == len(text.split())
            assert tokenizer.decode(ids) == text


def test_a_decoder_reads_bos_input_sep_target_eos_with_the_loss_on_the_answer():
    tokenizer = task_tokenizer("addition")
    assert tokenizer.convert_ids_to_tokens(range(5)) == ["[PAD]", "[BOS]", "[EOS]", "[SEP]", "[UNK]"]
    features = decoder_features(tokenizer, ["1 2 + 3 4", "5 + 6"], ["4 6", "1 1"])
    assert tokenizer.convert_ids_to_tokens(features["input_ids"][1]) == ["[BOS]", "5", "+", "6", "[SEP]", "1", "1",
                                                                           "[EOS]"]
    for ids, labels, target in zip(features["input_ids"], features["labels"], ["4 6", "1 1"]):
        answer_start = ids.index(tokenizer.sep_token_id) + 1
        assert labels[:answer_start] == [-100] * answer_start
        assert labels[answer_start:] == ids[answer_start:]
        assert tokenizer.decode(labels[answer_start:]) == f"{target} [EOS]"
    assert tokenizer.convert_ids_to_tokens(tokenizer("5 + 6")["input_ids"]) == ["[BOS]", "5", "+", "6", "[SEP]"]


@pytest.mark.parametrize(("task", "input", "answer_length", "written_out"), [
    # 153 + 209 = 362, reversed: a digit's id is its place (1 the units) in both operands and the answer; [EOS] 4
    ("addition_reversed", "3 5 1 + 9 0 2", 3, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 4]),
    # 99 + 99 = 198: the carry's place 3 is planned; with it the answer fills the plan and [EOS] goes on to 4
    ("addition_reversed", "9 9 + 9 9", 3, [0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 4]),
    ("addition_reversed", "9 9 + 9 9", None, [0, 1, 2, 0, 1, 2, 0, 1, 2, 3]),
    # 5 + 17 = 22 (operands of unlike lengths): the shorter operand's places are its own
    ("addition_reversed", "5 + 7 1", 2, [0, 1, 0, 1, 2, 0, 1, 2, 3]),
    # a hint shares the id of the digit after it
    ("addition_reversed_hints", "A 3 B 5 + A 9 B 0", 4, [0, 1, 1, 2, 2, 0, 1, 1, 2, 2, 0, 1, 1, 2, 2, 3]),
    ("addition_reversed_hints_random", "C 3 D 5 + C 9 D 0", None, [0, 1, 1, 2, 2, 0, 1, 1, 2, 2, 0, 1, 1, 2, 2, 3, 3]),
    # copy: the i-th answer item copies item i
    ("copy", "c a b", 3, [0, 1, 2, 3, 0, 1, 2, 3, 4]),
    # reverse: the i-th answer item copies item n + 1 - i; past the plan the ids go on by one, as generate()'s
    ("reverse", "c a b", 3, [0, 1, 2, 3, 0, 3, 2, 1, 2]),
    ("reverse", "c a b", 4, [0, 1, 2, 3, 0, 3, 2, 1, 2, 3]),
])
def test_coupled_position_ids_written_out_by_hand(task, input, answer_length, written_out):
    assert coupled_position_ids(task, input, answer_length) == written_out
    if answer_length is not None:  # one id per token of [BOS] input [SEP] target [EOS]
        assert len(written_out) == len(input.split()) + answer_length + 3


@pytest.mark.parametrize("task", ["sort", "addition", "addition_hints"])
def test_a_task_whose_answer_ids_would_depend_on_the_answer_has_no_coupling(task):
    with pytest.raises(ValueError, match=f"{task} has no position coupling.*couple copy, reverse, addition_reversed"):
        coupled_position_ids(task, "1 2 + 3 4" if task.startswith("addition") else "b a", 2)


def test_the_digit_tokens_of_a_task_s_tokenizer():
    tokenizer = task_tokenizer("addition_reversed_hints")
    assert [tokenizer.convert_ids_to_tokens(i) for i in digit_token_ids(tokenizer)] == list("0123456789")
    assert digit_token_ids(task_tokenizer("copy")) == []


def test_the_tokenizer_saves_and_loads_back_through_auto_tokenizer(tmp_path):
    tokenizer = task_tokenizer("addition_reversed_hints")
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded.get_vocab() == tokenizer.get_vocab()
    assert loaded("A 1 B 2 + A 3", "A 4 B 2")["input_ids"] == tokenizer("A 1 B 2 + A 3", "A 4 B 2")["input_ids"]
    assert (loaded.pad_token, loaded.bos_token, loaded.eos_token, loaded.sep_token) == ("[PAD]", "[BOS]", "[EOS]",
                                                                                         "[SEP]")


# --------------------------------------------------------------------------------------------------- SCAN


def _scan_lines(name: str) -> list[tuple[str, str]]:
    lines = (SCAN_FOLDER / name).read_text(encoding="utf-8").splitlines()
    return [re.fullmatch(r"IN: (.*) OUT: (.*)", line).groups() for line in lines if line]


def test_scan_holds_every_line_of_the_files(scan):
    train_lines, test_lines = (_scan_lines(SCAN_LENGTH_FILES[split]) for split in ("train", "test"))
    assert (len(train_lines), len(test_lines)) == (16_990, 3_920)  # the counts the public split states
    assert len(scan["train"]) + len(scan["validation"]) == len(train_lines)
    assert len(scan["validation"]) == 500
    assert [(row["input"], row["target"]) for row in scan["test"]] == test_lines
    assert sorted((row["input"], row["target"]) for split in ("train", "validation") for row in scan[split]) == sorted(
        train_lines)


def test_scan_lengths_count_the_actions_and_follow_the_split(scan):
    for split in scan.values():
        assert list(split["length"]) == [len(re.findall(r"\bI_[A-Z_]+\b", target)) for target in split["target"]]
    assert max(scan["train"]["length"]) == 22 and max(scan["validation"]["length"]) <= 22
    assert (min(scan["test"]["length"]), max(scan["test"]["length"])) == (24, 48)
    assert not set(scan["train"]["input"]) & set(scan["validation"]["input"])
    assert not (set(scan["train"]["input"]) | set(scan["validation"]["input"])) & set(scan["test"]["input"])


def test_scan_scores_in_distribution_and_past_it_as_one_bucket_each(scan):
    source = dataset_source({"kind": "scan", "folder": str(SCAN_FOLDER), "n_validation": 500, "seed": 3})
    in_distribution, past = source.score_buckets()
    # Lake & Baroni's split: training commands have at most 22 actions, test ones 24 to 48.
    assert in_distribution == (1, 22) and past[0] == 23 and past[1] >= 48
    assert all(in_distribution[0] <= length <= in_distribution[1]
               for split in ("train", "validation") for length in scan[split]["length"])
    assert all(past[0] <= length <= past[1] for length in scan["test"]["length"])
    assert dataset_source({"kind": "length", "name": "copy", "max_train_length": 5}).score_buckets() == [
        (1, 5), (6, 10), (20, 20)]


def test_scan_validation_is_seeded(scan):
    again = scan_length_split(SCAN_FOLDER, n_validation=500, seed=3)
    other = scan_length_split(SCAN_FOLDER, n_validation=500, seed=4)
    assert again["validation"].to_list() == scan["validation"].to_list()
    assert other["validation"]["input"] != scan["validation"]["input"]


def test_scan_tokenizer_reads_every_text_exactly(scan):
    tokenizer = scan_tokenizer(scan)
    assert len(tokenizer) == 5 + 13 + 6  # special tokens, command words, actions
    words = {word for split in scan.values() for column in ("input", "target") for text in split[column]
             for word in text.split()}
    assert words == set(tokenizer.get_vocab()) - {"[PAD]", "[BOS]", "[EOS]", "[SEP]", "[UNK]"}
    # Every word is in the vocabulary; the round trip over validation and test (lengths 1..48) stays fast.
    texts = [text for split in ("validation", "test") for column in ("input", "target") for text in scan[split][column]]
    encoded = tokenizer(texts, add_special_tokens=False)["input_ids"]
    assert not any(tokenizer.unk_token_id in ids for ids in encoded)
    assert tokenizer.batch_decode(encoded) == texts


def test_scan_refuses_a_folder_without_the_files_and_a_bad_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="lacks tasks_train_length.txt, tasks_test_length.txt"):
        scan_length_split(tmp_path)
    (tmp_path / "tasks_train_length.txt").write_text("IN: walk OUT: I_WALK\nwalk I_WALK\n")
    (tmp_path / "tasks_test_length.txt").write_text("IN: walk twice OUT: I_WALK I_WALK\n")
    with pytest.raises(ValueError, match=r"tasks_train_length.txt, line 2: not a SCAN line"):
        scan_length_split(tmp_path)


# ------------------------------------------------------------------------------------------------ scoring


def test_exact_match_by_length_against_hand_values():
    predictions = ["a b", "a c", "1 2", " 1  2 ", "12", "x", "q r s t u"]
    targets = ["a b", "a b", "1 2", "1 2", "1 2", "y", "q r s t u"]
    lengths = [1, 1, 2, 2, 2, 2, 5]
    per_length = exact_match_by_length(predictions, targets, lengths)
    assert [(s.low, s.high, s.correct, s.count) for s in per_length] == [(1, 1, 1, 2), (2, 2, 2, 4), (5, 5, 1, 1)]
    assert per_length[0].accuracy == 0.5 and per_length[0].standard_error == pytest.approx(math.sqrt(0.125))
    assert per_length[1].standard_error == pytest.approx(0.25)  # sqrt(0.5 * 0.5 / 4)
    assert per_length[2].standard_error == 0.0
    bucketed = exact_match_by_length(predictions, targets, lengths, buckets=[(1, 2), (3, 5), (6, 9)])
    assert [(s.low, s.correct, s.count) for s in bucketed] == [(1, 3, 6), (3, 1, 1)]  # (6, 9) holds none
    assert bucketed[0].standard_error == pytest.approx(math.sqrt(0.5 * 0.5 / 6))
    with pytest.raises(ValueError, match=r"length 5 lies in 0 of the buckets \[\(1, 2\)\]"):
        exact_match_by_length(predictions, targets, lengths, buckets=[(1, 2)])
    with pytest.raises(ValueError, match="must be as long as each other, got 7, 7 and 1"):
        exact_match_by_length(predictions, targets, [1])


def test_word_accuracy_by_position_against_hand_values():
    predictions = ["a b c", "a x", "a b c d", "", "z"]
    targets = ["a b c", "a b c", "a b", "q", "z"]
    # position 1: a=a, a=a, a=a, ''!=q, z=z; position 2: b=b, x!=b, b=b; position 3: c=c, (missing)!=c
    assert [(s.low, s.high, s.correct, s.count) for s in word_accuracy_by_position(predictions, targets)] == [
        (1, 1, 4, 5), (2, 2, 2, 3), (3, 3, 1, 2)]
    assert word_accuracy_by_position([], []) == []
    with pytest.raises(ValueError, match="as long as each other, got 1 and 0"):
        word_accuracy_by_position(["a"], [])


def test_mean_reciprocal_rank_against_hand_values():
    accuracies = {
        "copy": {"none": 0.9, "rope": 0.8, "alibi": 0.8, "learned": 0.5},  # ranks 1, 2, 2, 4
        "sort": {"none": 0.1, "rope": 0.7, "alibi": 0.3, "learned": 0.7},  # ranks 4, 1, 3, 1
    }
    assert mean_reciprocal_rank(accuracies) == pytest.approx(
        {"none": (1 + 1 / 4) / 2, "rope": (1 / 2 + 1) / 2, "alibi": (1 / 2 + 1 / 3) / 2, "learned": (1 / 4 + 1) / 2})
    with pytest.raises(ValueError, match="task 'sort' has the schemes \\['none'\\], the first task"):
        mean_reciprocal_rank({"copy": {"none": 0.9, "rope": 0.8}, "sort": {"none": 0.1}})


# ------------------------------------------------------------------------------------------- pairs files


def test_pairs_files_round_trip_with_and_without_lengths(tmp_path):
    dataset = length_splits("sort", **COUNTS, seed=2)["test"]
    path = tmp_path / "pairs.jsonl"
    write_pairs(path, dataset)
    assert [json.loads(line) for line in path.read_text().splitlines()] == dataset.to_list()
    assert read_pairs(path) == [Pair(**row) for row in dataset.to_list()]
    write_pairs(path, [Pair("b a", "a b")])
    assert path.read_text() == '{"input": "b a", "target": "a b"}\n'
    path.write_text('{"input": "b a", "target": "a b", "source": "mine"}\n\n')
    assert read_pairs(path) == [Pair("b a", "a b")]


@pytest.mark.parametrize(("line", "problem"), [
    ('{"input": "1 + 2"}', 'the key "target" is missing'),
    ('{"input": 12, "target": "3"}', '"input" is 12, not a string'),
    ('{"input": "1 + 2", "target": "3"', "not valid JSON"),
    ('["1 + 2", "3"]', "a JSON list, not an object"),
    ('{"input": "1 + 2", "target": "3", "length": "1"}', '"length" is "1", not a non-negative integer'),
])
def test_a_bad_pairs_line_is_refused_naming_the_file_and_line(tmp_path, line, problem):
    path = tmp_path / "mine.jsonl"
    path.write_text('{"input": "a", "target": "a", "length": 1}\n' + line + "\n")
    with pytest.raises(ValueError, match=re.escape(f"{path}, line 2: {problem}")):
        read_pairs(path)


def test_the_command_line_writes_each_split_as_a_pairs_file(tmp_path, capsys):
    cli.main(["write-pairs", "sort", "--max-train-length", "3", "--n-train", "8", "--n-validation", "4",
              "--n-test-per-length", "2", "--seed", "5", "--output-dir", str(tmp_path)])
    drawn = draw_length_splits("sort", 3, n_train=8, n_validation=4, n_test_per_length=2, seed=5)
    assert {split: read_pairs(tmp_path / f"{split}.jsonl") for split in drawn} == drawn
    assert f"{tmp_path / 'test.jsonl'}: 8 pairs" in capsys.readouterr().out
    for task, problem in (("copy", "copy: 1000 draws in a row for validation"),
                          ("cpy", "unknown length task 'cpy'; choose one of copy, reverse, sort")):
        with pytest.raises(SystemExit):
            cli.main(["write-pairs", task, "--max-train-length", "1", "--n-train", "200", "--n-validation", "1",
                      "--n-test-per-length", "1", "--output-dir", str(tmp_path)])
        error = capsys.readouterr().err
        assert error.startswith("hf-attn write-pairs: error: ") and problem in error and "Traceback" not in error


def test_a_causal_lm_learns_from_the_answer_only_and_generates_from_the_prompt():
    # transformers' causal LMs shift labels left inside the loss: the loss must be the mean cross-entropy of
    # the answer tokens (target and [EOS]), each predicted from the position before it.
    tokenizer = task_tokenizer("reverse")
    pairs = draw_length_splits("reverse", 4, n_train=3, n_validation=0, n_test_per_length=0, seed=1)["train"]
    features = decoder_features(tokenizer, [p.input for p in pairs], [p.target for p in pairs])
    batch = tokenizer.pad({"input_ids": features["input_ids"], "attention_mask": features["attention_mask"]},
                          return_tensors="pt")
    labels = torch.full_like(batch["input_ids"], -100)
    for row, row_labels in enumerate(features["labels"]):
        labels[row, : len(row_labels)] = torch.tensor(row_labels)
    torch.manual_seed(0)
    model = HfAttnForCausalLM(HfAttnConfig(**tiny_config_kwargs(
        is_decoder=True, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id))).eval()
    with torch.no_grad():
        output = model(**batch, labels=labels)
    log_probs = output.logits.log_softmax(-1)
    answer_terms = [-log_probs[row, position - 1, batch["input_ids"][row, position]]
                    for row, row_labels in enumerate(features["labels"])
                    for position, label in enumerate(row_labels) if label != -100]
    assert len(answer_terms) == sum(len(p.target.split()) + 1 for p in pairs)
    assert output.loss.item() == pytest.approx(torch.stack(answer_terms).mean().item(), rel=1e-5)
    prompt = tokenizer(pairs[0].input, return_tensors="pt")
    generated = model.generate(**prompt, max_new_tokens=6, do_sample=False, eos_token_id=tokenizer.eos_token_id,
                               pad_token_id=tokenizer.pad_token_id)
    answer = tokenizer.decode(generated[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True)
    assert set(answer.split()) <= set(tokenizer.get_vocab()) - {"[PAD]", "[BOS]", "[EOS]", "[SEP]", "[UNK]"}
