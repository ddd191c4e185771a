"""Length-generalization tasks: copy, reverse, sort and multi-digit addition, generated from a seed.

A model trains on lengths 1..L and is read at L+1..2L and at 4L, where the position scheme, not the data,
decides whether it still answers (Kazemnejad et al., NeurIPS 2023; Zhou et al., 2024). docs/length-tasks.md
describes the format, the split and the scoring with an example line per task.

The text format. An example is a `Pair`: `input` and `target`, each a sequence of symbols joined by single
spaces (`"c a b"`, `"3 5 1 + 9 0 2"`), and its `length`, the task's measure of size (the number of items for
copy, reverse and sort; the digits of the longer operand for addition). Every symbol is one character (a
letter, a digit, `+`), so a character-level tokenizer reads the text as well as a word-level one; the tiny
word-level tokenizer of `build_tokenizer` reads a decoder's sequence as `[BOS] input [SEP] target [EOS]`, and
`decoder_features` puts the loss on `target [EOS]` only.

Determinism. Every draw comes from a `random.Random` seeded from the split's own seed (`split_seed`), never
from global state, using only digit- and item-wise `choice` / `randint`, whose results Python keeps stable
across versions and machines: the same arguments give byte-identical pairs anywhere.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import string
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from datasets import Dataset, DatasetDict, Features, Value
from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from .sources import SequenceTask

# The items of copy, reverse and sort: ten letters, drawn with replacement (so sort sees repeats).
LETTERS = tuple("abcdefghij")
DIGITS = tuple("0123456789")
# Index hints of addition: the letter before a digit names its place (A the units, B the tens, ...).
HINT_SYMBOLS = tuple(string.ascii_uppercase + string.ascii_lowercase)
PAD, BOS, EOS, SEP, UNK = "[PAD]", "[BOS]", "[EOS]", "[SEP]", "[UNK]"
SPECIAL_TOKENS = (PAD, BOS, EOS, SEP, UNK)
# The answer's places an encoder fills (`encoder_features`); added to a task's tokenizer by an encoder's run only,
# so that a decoder's vocabulary (and with it every decoder run) stays as it was.
MASK = "[MASK]"
# Draws in a row that may land on an example an earlier split holds before a split is declared impossible.
MAX_REJECTED_DRAWS = 1_000
PAIR_FEATURES = Features({"input": Value("string"), "target": Value("string"), "length": Value("int32")})


@dataclasses.dataclass(frozen=True)
class Pair:
    """One example: the `input` a model reads, the `target` it must produce, and the task's `length` of it."""

    input: str
    target: str
    length: int | None = None


class LengthTask:
    """A generated task: a name, its symbols, and how to draw one example of a given length."""

    name: str
    symbols: tuple[str, ...]
    # The longest example the task can write (None: any).
    max_length: int | None = None
    couples: bool = False  # it has a position coupling (`coupling`)

    def draw(self, rng: random.Random, length: int) -> Pair:
        raise NotImplementedError

    def coupling(self, symbols: list[str]) -> tuple[list[int], list[int]]:
        """Position coupling (Cho et al., NeurIPS 2024): the position ids of the input's `symbols` and the planned
        ids of the answer's positions, from the input alone (the model reads them before it writes the answer), so
        that tokens that belong together share an id."""
        raise ValueError(f"{self.name} has no position coupling: its answer's ids would depend on the answer (a "
                         "sorted item's source, the first place of a sum written most significant first); couple "
                         f"{', '.join(name for name, task in LENGTH_TASKS.items() if task.couples)} instead.")


class ItemsTask(LengthTask):
    """`length` letters drawn with replacement; the target is `answer(items)`."""

    symbols = LETTERS

    def answer(self, items: list[str]) -> list[str]:
        raise NotImplementedError

    def draw(self, rng: random.Random, length: int) -> Pair:
        items = [rng.choice(LETTERS) for _ in range(length)]
        return Pair(" ".join(items), " ".join(self.answer(items)), length)


class CopyTask(ItemsTask):
    name = "copy"
    couples = True

    def answer(self, items: list[str]) -> list[str]:
        return items

    def coupling(self, symbols: list[str]) -> tuple[list[int], list[int]]:
        """Items 1..n; the i-th answer item copies the i-th."""
        places = list(range(1, len(symbols) + 1))
        return places, places


class ReverseTask(ItemsTask):
    name = "reverse"
    couples = True

    def answer(self, items: list[str]) -> list[str]:
        return items[::-1]

    def coupling(self, symbols: list[str]) -> tuple[list[int], list[int]]:
        """Items 1..n; the i-th answer item copies item n + 1 - i."""
        places = list(range(1, len(symbols) + 1))
        return places, places[::-1]


class SortTask(ItemsTask):
    name = "sort"

    def answer(self, items: list[str]) -> list[str]:
        return sorted(items)


class AdditionTask(LengthTask):
    """`a + b` with `a` and `b` of exactly `length` digits each (no leading zero unless `length` is 1).

    With `reversed_digits`, the digits of both operands and of the sum are written least significant first,
    as Zhou et al. (2024) do, so that a model emits each digit of the sum after the digits it depends on.
    With `index_hints`, each digit follows a letter naming its place (`A` the units, `B` the tens, ...; Zhou et
    al.'s index hints, aligned by place so that a digit of the sum and the digits it adds share a letter): the
    52 letters A-Z a-z name at most 52 places, so hinted operands have at most 51 digits. With
    `random_hint_start`, the units' letter is drawn at random and the places take the letters after it (Zhou et
    al. sample consecutive hints from an ordered set), so that training at short lengths sees every letter that
    longer test numbers need; the letter is drawn from the pair's numbers (a SHA-512 seed), so the numbers stay
    those every addition task draws with the same seed.
    """

    def __init__(self, reversed_digits: bool = False, index_hints: bool = False,
                 random_hint_start: bool = False) -> None:
        self.reversed_digits = reversed_digits
        self.index_hints = index_hints or random_hint_start
        self.random_hint_start = random_hint_start
        self.name = ("addition" + ("_reversed" if reversed_digits else "") + ("_hints" if self.index_hints else "")
                     + ("_random" if random_hint_start else ""))
        self.symbols = (*DIGITS, "+", *(HINT_SYMBOLS if self.index_hints else ()))
        self.max_length = len(HINT_SYMBOLS) - 1 if self.index_hints else None
        self.couples = reversed_digits

    def draw(self, rng: random.Random, length: int) -> Pair:
        first, second = (_draw_number(rng, length) for _ in range(2))
        total = str(int(first) + int(second))
        start = (random.Random(f"{first} + {second}").randrange(len(HINT_SYMBOLS) - len(total) + 1)
                 if self.random_hint_start else 0)
        return Pair(f"{self._write(first, start)} + {self._write(second, start)}", self._write(total, start), length)

    def coupling(self, symbols: list[str]) -> tuple[list[int], list[int]]:
        """Reversed digits only (written most significant first, the answer's first place depends on its carry): a
        digit's id is its place (1 the units), in both operands and the answer; a hint shares its digit's id, `+`
        gets 0; the answer's planned places are 1..n+1 for operands of at most n digits."""
        if not self.couples:
            return super().coupling(symbols)
        ids, place = [], 0
        for symbol in symbols:
            place = 0 if symbol == "+" else place + (symbol in DIGITS)
            ids.append(place + (symbol in HINT_SYMBOLS))  # a hint names the place of the digit after it
        planned = range(1, max(ids) + 2)
        return ids, [place for place in planned for _ in range(1 + self.index_hints)]

    def _write(self, number: str, start: int) -> str:
        """`number`'s digits spaced, least significant first if reversed, each after its place's hint if hinted (the
        units' hint the letter `start`)."""
        places = [(HINT_SYMBOLS[start + place] if self.index_hints else "", digit)
                  for place, digit in enumerate(reversed(number))]  # units first
        if not self.reversed_digits:
            places.reverse()
        return " ".join(f"{hint} {digit}" if hint else digit for hint, digit in places)


def _draw_number(rng: random.Random, digits: int) -> str:
    """A decimal number of exactly `digits` digits, digit by digit: the first is nonzero unless it is the only one."""
    leading = rng.choice(DIGITS if digits == 1 else DIGITS[1:])
    return leading + "".join(rng.choice(DIGITS) for _ in range(digits - 1))


LENGTH_TASKS: dict[str, LengthTask] = {
    task.name: task
    for task in (CopyTask(), ReverseTask(), SortTask(), AdditionTask(), AdditionTask(reversed_digits=True),
                 AdditionTask(index_hints=True), AdditionTask(reversed_digits=True, index_hints=True),
                 AdditionTask(reversed_digits=True, random_hint_start=True))
}


def get_length_task(name: str) -> LengthTask:
    """The task called `name`; an unknown name is refused with the valid ones."""
    if name not in LENGTH_TASKS:
        raise ValueError(f"unknown length task {name!r}; choose one of {', '.join(LENGTH_TASKS)}.")
    return LENGTH_TASKS[name]


# ----------------------------------------------------------------------------------------------- the split


def held_out_lengths(max_train_length: int, every_test_length: bool = False) -> list[int]:
    """The lengths the test split holds: L+1..2L, then 4L; with `every_test_length` every one of L+1..4L (a curve by
    length, not only by bucket)."""
    n = max_train_length
    return [*range(n + 1, 4 * n + 1)] if every_test_length else [*range(n + 1, 2 * n + 1), 4 * n]


def length_buckets(max_train_length: int, every_test_length: bool = False) -> list[tuple[int, int]]:
    """The buckets results are reported in (inclusive bounds): 1..L (trained), L+1..2L, and 4L; with
    `every_test_length` also 2L+1..4L-1, between the last two."""
    n = max_train_length
    between = [(2 * n + 1, 4 * n - 1)] if every_test_length else []
    return [(1, n), (n + 1, 2 * n), *between, (4 * n, 4 * n)]


def split_seed(seed: int, split: str) -> int:
    """The seed of one split, derived from `seed` by SHA-256 so each split's draws do not depend on the others'
    counts (a bigger train set leaves the test set as it was)."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{split}".encode()).digest()[:8], "big")


def draw_length_splits(
    task: LengthTask | str,
    max_train_length: int,
    n_train: int,
    n_validation: int,
    n_test_per_length: int,
    seed: int,
    every_test_length: bool = False,
) -> dict[str, list[Pair]]:
    """`train` and `validation` at lengths drawn uniformly from 1..L, `test` with `n_test_per_length` pairs at
    each of `held_out_lengths` (L+1..2L and 4L, or every one of L+1..4L), in that order.

    No input appears in two splits: a draw whose input an earlier split (train, then validation) holds is
    drawn again, length included, so at short lengths whose few distinct examples train has taken validation
    holds fewer. Within a split repeats are kept, as the generator makes them.
    """
    task = get_length_task(task) if isinstance(task, str) else task
    _require_count("max_train_length", max_train_length, minimum=1)
    for name, value in (("n_train", n_train), ("n_validation", n_validation), ("n_test_per_length", n_test_per_length)):
        _require_count(name, value, minimum=0)
    test_lengths = held_out_lengths(max_train_length, every_test_length)
    longest = test_lengths[-1]
    if task.max_length is not None and longest > task.max_length:
        raise ValueError(f"{task.name} writes examples of length at most {task.max_length}, and the test split of "
                         f"max_train_length={max_train_length} reaches {longest}: lower max_train_length.")
    taken: set[str] = set()
    splits: dict[str, list[Pair]] = {}
    for split, plan in (("train", [(n_train, (1, max_train_length))]),
                        ("validation", [(n_validation, (1, max_train_length))]),
                        ("test", [(n_test_per_length, (n, n)) for n in test_lengths])):
        rng = random.Random(split_seed(seed, split))
        pairs = [pair for count, lengths in plan for pair in _draw_avoiding(task, rng, count, lengths, taken, split)]
        taken.update(pair.input for pair in pairs)
        splits[split] = pairs
    return splits


def _require_count(name: str, value: object, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer of at least {minimum}, got {value!r}.")


def _draw_avoiding(task: LengthTask, rng: random.Random, count: int, lengths: tuple[int, int],
                   taken: set[str], split: str) -> list[Pair]:
    """`count` pairs of lengths drawn uniformly from `lengths` (inclusive) whose inputs are not in `taken`, each
    redrawn (length too) while it lands in `taken`."""
    pairs = []
    for _ in range(count):
        for _ in range(MAX_REJECTED_DRAWS):
            pair = task.draw(rng, rng.randint(*lengths))
            if pair.input not in taken:
                pairs.append(pair)
                break
        else:
            raise ValueError(f"{task.name}: {MAX_REJECTED_DRAWS} draws in a row for {split} landed on examples an "
                             f"earlier split holds; lower its count or raise max_train_length.")
    return pairs


def length_splits(
    task: LengthTask | str,
    max_train_length: int,
    n_train: int,
    n_validation: int,
    n_test_per_length: int,
    seed: int,
    every_test_length: bool = False,
) -> DatasetDict:
    """`draw_length_splits` as a `DatasetDict` (`train`, `validation`, `test`; columns input, target, length)."""
    splits = draw_length_splits(task, max_train_length, n_train, n_validation, n_test_per_length, seed,
                                every_test_length)
    return pairs_to_dataset_dict(splits)


def pairs_to_dataset_dict(splits: Mapping[str, Sequence[Pair]]) -> DatasetDict:
    """Pairs per split as a `DatasetDict` with the columns input, target and length."""
    return DatasetDict({
        split: Dataset.from_dict({"input": [pair.input for pair in pairs], "target": [pair.target for pair in pairs],
                                  "length": [pair.length for pair in pairs]}, features=PAIR_FEATURES)
        for split, pairs in splits.items()
    })


# ------------------------------------------------------------------------------------------- the tokenizer


def build_tokenizer(symbols: Iterable[str]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer of `symbols` (sorted) after [PAD] [BOS] [EOS] [SEP] [UNK] (ids 0-4).

    Text splits on whitespace; one text encodes as the prompt `[BOS] input [SEP]`, a pair (input, target) as
    the training sequence `[BOS] input [SEP] target [EOS]`; decoding joins the symbols with single spaces, so
    the task's text comes back exactly.
    """
    vocabulary = sorted(set(symbols))
    for symbol in vocabulary:
        if not symbol or symbol != symbol.strip() or len(symbol.split()) != 1 or symbol in SPECIAL_TOKENS:
            raise ValueError(f"symbol {symbol!r} cannot be a word of the vocabulary: it must be non-empty, hold no "
                             f"whitespace and not be one of {', '.join(SPECIAL_TOKENS)}.")
    vocab = {token: index for index, token in enumerate((*SPECIAL_TOKENS, *vocabulary))}
    backend = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A {SEP}",
        pair=f"{BOS} $A {SEP} $B:1 {EOS}:1",
        special_tokens=[(token, vocab[token]) for token in (BOS, SEP, EOS)],
    )
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token=PAD, bos_token=BOS, eos_token=EOS,
                                   sep_token=SEP, unk_token=UNK, clean_up_tokenization_spaces=False)


def task_tokenizer(task: LengthTask | str) -> PreTrainedTokenizerFast:
    """`build_tokenizer` of the task's symbols."""
    task = get_length_task(task) if isinstance(task, str) else task
    return build_tokenizer(task.symbols)


def decoder_features(tokenizer: PreTrainedTokenizerFast, inputs: Sequence[str],
                     targets: Sequence[str]) -> dict[str, list[list[int]]]:
    """`input_ids` and `attention_mask` of `[BOS] input [SEP] target [EOS]`, and `labels` equal to the ids on
    `target [EOS]` and -100 on the prompt, so that a causal LM's loss falls on the answer only (a batch of a
    `datasets.Dataset.map(batched=True)`)."""
    prompts = tokenizer(list(inputs))["input_ids"]
    encoded = tokenizer(list(inputs), list(targets))
    labels = [[-100] * len(prompt) + ids[len(prompt):] for prompt, ids in zip(prompts, encoded["input_ids"])]
    return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"], "labels": labels}


def coupled_position_ids(task: LengthTask | str, input: str, answer_length: int | None = None) -> list[int]:
    """The coupled position ids (`LengthTask.coupling`) of `[BOS] input [SEP]` (0 for the special tokens), then those
    of the answer's positions: every planned one (what `generate()` is given), or with `answer_length` those of
    `target [EOS]` (what training reads); past the plan they go on by one, as `generate()` continues them."""
    task = get_length_task(task) if isinstance(task, str) else task
    input_ids, planned = task.coupling(input.split())
    if answer_length is not None:
        wanted = answer_length + 1
        planned = [*planned, *range(planned[-1] + 1, planned[-1] + 1 + wanted - len(planned))][:wanted]
    return [0, *input_ids, 0, *planned]


def digit_token_ids(tokenizer: PreTrainedTokenizerFast) -> list[int]:
    """The ids of the digit tokens of a task's word-level tokenizer (Abacus position ids number them)."""
    vocabulary = tokenizer.get_vocab()
    return [vocabulary[digit] for digit in DIGITS if digit in vocabulary]


def with_mask_token(tokenizer: PreTrainedTokenizerFast) -> PreTrainedTokenizerFast:
    """`tokenizer` with `[MASK]` added (the last id) if it has no mask token: what an encoder's answer is read at."""
    if tokenizer.mask_token is None:
        tokenizer.add_special_tokens({"mask_token": MASK})
    return tokenizer


def encoder_features(tokenizer: PreTrainedTokenizerFast, inputs: Sequence[str],
                     targets: Sequence[str]) -> dict[str, list[list[int]]]:
    """`input_ids` and `attention_mask` of `[BOS] input [SEP] [MASK] ... [MASK] [EOS]`, one `[MASK]` per word of
    the target, and `labels` equal to the target's ids at the masks and -100 elsewhere: an encoder (a masked LM)
    fills the whole answer in one pass, told its length but not its words. The tokenizer needs a mask token
    (`with_mask_token`)."""
    if tokenizer.mask_token is None:
        raise ValueError("an encoder's answer is read at [MASK] tokens, and this tokenizer has none: "
                         "use with_mask_token(tokenizer).")
    answers = tokenizer(list(targets), add_special_tokens=False)["input_ids"]
    prompts = tokenizer(list(inputs))["input_ids"]
    masks = [" ".join([tokenizer.mask_token] * len(answer)) for answer in answers]
    encoded = tokenizer(list(inputs), masks)
    labels = [[-100] * len(prompt) + answer + [-100] * (len(ids) - len(prompt) - len(answer))
              for prompt, answer, ids in zip(prompts, answers, encoded["input_ids"])]
    return {"input_ids": encoded["input_ids"], "attention_mask": encoded["attention_mask"], "labels": labels}


# ---------------------------------------------------------------------------------------------- scoring


@dataclasses.dataclass(frozen=True)
class BucketScore:
    """Exact match over the examples whose length lies in `low..high` (inclusive)."""

    low: int
    high: int
    correct: int
    count: int

    @property
    def accuracy(self) -> float:
        return self.correct / self.count

    @property
    def standard_error(self) -> float:
        """The binomial standard error sqrt(p (1 - p) / n) of the accuracy p over n examples."""
        p = self.accuracy
        return math.sqrt(p * (1 - p) / self.count)


def exact_match(prediction: str, target: str) -> bool:
    """Whether `prediction` holds exactly the target's symbols, in order (whitespace between them is not compared)."""
    return prediction.split() == target.split()


def buckets_holding(length: int, buckets: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """The buckets (inclusive bounds) `length` lies in: exactly one where a table counts it."""
    return [bucket for bucket in buckets if bucket[0] <= length <= bucket[1]]


def exact_match_by_length(
    predictions: Sequence[str],
    targets: Sequence[str],
    lengths: Sequence[int],
    buckets: Sequence[tuple[int, int]] | None = None,
) -> list[BucketScore]:
    """Exact-match accuracy per bucket of lengths (inclusive `(low, high)` bounds, e.g. `length_buckets(L)`), or
    per distinct length when `buckets` is None; in the buckets' order (ascending lengths when None).

    A bucket no example falls in is left out; a length in no bucket, or in two, is refused: every example is
    counted once.
    """
    if not len(predictions) == len(targets) == len(lengths):
        raise ValueError(f"predictions, targets and lengths must be as long as each other, got {len(predictions)}, "
                         f"{len(targets)} and {len(lengths)}.")
    if buckets is None:
        buckets = [(length, length) for length in sorted(set(lengths))]
    counts = {bucket: [0, 0] for bucket in buckets}
    for prediction, target, length in zip(predictions, targets, lengths):
        holding = buckets_holding(length, buckets)
        if len(holding) != 1:
            raise ValueError(f"length {length} lies in {len(holding)} of the buckets {list(buckets)}; each length "
                             f"must lie in exactly one.")
        counts[holding[0]][0] += exact_match(prediction, target)
        counts[holding[0]][1] += 1
    return [BucketScore(low, high, correct, count) for (low, high), (correct, count) in counts.items() if count]


def word_accuracy_by_position(predictions: Sequence[str], targets: Sequence[str]) -> list[BucketScore]:
    """Where along the answer a model goes wrong: for each word position i of the targets (1-based, as a
    `BucketScore` whose bounds are both i), of the targets with at least i words, how many predictions hold the
    target's i-th word there (a prediction shorter than its target misses the words it lacks)."""
    if len(predictions) != len(targets):
        raise ValueError(f"predictions and targets must be as long as each other, got {len(predictions)} and "
                         f"{len(targets)}.")
    correct: list[int] = []
    count: list[int] = []
    for prediction, target in zip(predictions, targets):
        predicted = prediction.split()
        for position, word in enumerate(target.split()):
            if position == len(count):
                correct.append(0)
                count.append(0)
            count[position] += 1
            correct[position] += position < len(predicted) and predicted[position] == word
    return [BucketScore(position, position, right, total)
            for position, (right, total) in enumerate(zip(correct, count), start=1)]


def mean_reciprocal_rank(accuracies: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The mean reciprocal rank of each scheme across tasks, as Kazemnejad et al. (NeurIPS 2023) report it.

    `accuracies[task][scheme]` is a scheme's accuracy on a task (each task must name the same schemes). On each
    task the schemes are ranked by accuracy, highest first; tied schemes share the best rank of their group
    (competition ranking: accuracies 0.9, 0.8, 0.8, 0.5 rank 1, 2, 2, 4). A scheme's score is the mean over
    tasks of 1 / rank: 1.0 for a scheme first on every task.
    """
    if not accuracies:
        raise ValueError("mean_reciprocal_rank needs the accuracies of at least one task.")
    schemes = set(next(iter(accuracies.values())))
    reciprocal_ranks: dict[str, list[float]] = {scheme: [] for scheme in sorted(schemes)}
    for task, by_scheme in accuracies.items():
        if set(by_scheme) != schemes:
            raise ValueError(f"task {task!r} has the schemes {sorted(by_scheme)}, the first task "
                             f"{sorted(schemes)}; every task must rank the same schemes.")
        for scheme, accuracy in by_scheme.items():
            rank = 1 + sum(other > accuracy for other in by_scheme.values())
            reciprocal_ranks[scheme].append(1 / rank)
    return {scheme: sum(values) / len(values) for scheme, values in reciprocal_ranks.items()}


# ------------------------------------------------------------------------------------------ pairs files


def write_pairs(path: str | Path, pairs: Iterable[Pair | Mapping[str, object]]) -> None:
    """Write one JSON object a line: `{"input": ..., "target": ...}`, with `"length"` where the pair has one.

    `pairs` are `Pair`s or rows with those keys (a `datasets.Dataset` iterates as such rows).
    """
    with open(path, "w", encoding="utf-8") as file:
        for pair in pairs:
            row = dataclasses.asdict(pair) if isinstance(pair, Pair) else dict(pair)
            record = {"input": row["input"], "target": row["target"]}
            if row.get("length") is not None:
                record["length"] = row["length"]
            file.write(json.dumps(record, ensure_ascii=False) + "\n")


def read_pairs(path: str | Path) -> list[Pair]:
    """The pairs of a JSONL file of `{"input": str, "target": str}` objects, with an optional integer `"length"`;
    other keys are ignored and blank lines skipped. A bad line is refused in one line naming the file and line."""
    pairs = []
    with open(path, encoding="utf-8") as file:
        for number, line in enumerate(file, start=1):
            if line.strip():
                pairs.append(_parse_pair_line(line, f"{path}, line {number}"))
    return pairs


def _parse_pair_line(line: str, where: str) -> Pair:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not valid JSON ({error.msg}); each line must be one "
                         f'{{"input": ..., "target": ...}} object.') from None
    if not isinstance(record, dict):
        raise ValueError(f'{where}: a JSON {type(record).__name__}, not an object {{"input": ..., "target": ...}}.')
    for key in ("input", "target"):
        if key not in record:
            raise ValueError(f'{where}: the key "{key}" is missing; each line needs "input" and "target".')
        if not isinstance(record[key], str):
            raise ValueError(f'{where}: "{key}" is {json.dumps(record[key])}, not a string.')
    length = record.get("length")
    if length is not None and (not isinstance(length, int) or isinstance(length, bool) or length < 0):
        raise ValueError(f'{where}: "length" is {json.dumps(length)}, not a non-negative integer.')
    return Pair(record["input"], record["target"], length)


# --------------------------------------------------------------------------------------------- command line


def write_length_splits(task: str, max_train_length: int, n_train: int, n_validation: int, n_test_per_length: int,
                        seed: int, output_dir: Path) -> dict[Path, int]:
    """`draw_length_splits`' splits as `output_dir/SPLIT.jsonl` (`hf-attn write-pairs`): each file and its count."""
    splits = draw_length_splits(task, max_train_length, n_train, n_validation, n_test_per_length, seed)
    output_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for split, pairs in splits.items():
        write_pairs(output_dir / f"{split}.jsonl", pairs)
        written[output_dir / f"{split}.jsonl"] = len(pairs)
    return written


@dataclasses.dataclass(frozen=True)
class GeneratedLengthTask(SequenceTask):
    """A generated length-generalization task (`hf_attn.tasks.length`: copy, reverse, sort, addition, ...): train and
    validation at lengths 1..`max_train_length`, test at L+1..2L and 4L (with `every_test_length`, at every one of
    L+1..4L), drawn with `seed` (docs/length-tasks.md)."""

    kind: ClassVar[str] = "length"
    name: str
    max_train_length: int
    n_train: int = 10_000
    n_validation: int = 500
    n_test_per_length: int = 100
    seed: int = 0
    every_test_length: bool = False

    def check(self) -> None:
        get_length_task(self.name)  # an unknown task is refused now, naming the known ones

    def load_pairs(self) -> DatasetDict:
        return length_splits(self.name, self.max_train_length, self.n_train, self.n_validation,
                             self.n_test_per_length, self.seed, self.every_test_length)

    def score_buckets(self) -> list[tuple[int, int]]:
        return length_buckets(self.max_train_length, self.every_test_length)

    def pairs_tokenizer(self, data: DatasetDict) -> PreTrainedTokenizerFast:
        """The task's symbols, whatever the drawn pairs hold."""
        return task_tokenizer(self.name)

    def coupled_position_ids(self, input: str, answer_length: int | None = None) -> list[int]:
        return coupled_position_ids(self.name, input, answer_length)
