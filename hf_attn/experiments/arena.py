"""The arena (`hf-attn arena`): every position scheme through the same data, budget and seed, in one table.

    hf-attn arena --config configs/arena/arena.yaml --budget small --output-dir runs/arena --results results/arena

An arena file (`configs/arena/arena.yaml`) names a classifier experiment and a pretraining experiment
(existing files of configs/), the schemes to put through both, and what to measure; each of its
`budgets` overrides the two experiments (rows, epochs, steps, model size) and sets the evaluation limits.
For every scheme the arena

* trains a classifier at the experiment's `max_length` (128) and scores test reviews read at every
  `read_lengths` entry (`whole`: the longest test review, so nothing is cut), directly, as windows
  (`classifier_window_stride`), and for RoPE also with each of `rope_scalings` applied at inference;
* pretrains a masked-LM encoder at the same length and measures its loss on the validation reviews as
  one token stream cut into windows of every `mlm_lengths` entry (the ALiBi paper's Figure 1, for encoders);
* times whole-review inference at every `speed_lengths` entry with full attention, sliding-window
  attention (all layers) and windows.

Each finished piece (a run, an evaluation, a timing) is a JSON file under `--output-dir/cells`, written
as soon as it is measured; training runs keep their checkpoints under `--output-dir/runs`. The same
command run again reads what is there, resumes an interrupted training from its last checkpoint and
measures only what is missing, then writes `arena.md`, `arena.json` and the plots to `--results`.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import datasets
import torch
import yaml
from torch.utils.data import DataLoader
from transformers import AutoTokenizer

from ..bench.timing import MIB, interleaved_times, make_batch, peak_memory_bytes, summarize
from ..configuration_hf_attn import ROPE_TYPES, HfAttnConfig
from ..modeling_hf_attn import HfAttnForMaskedLM, HfAttnForSequenceClassification
from ..positions import POSITION_SCHEMES
from ..saved import beyond_learned_table, load_saved_classifier, reading_length
from . import classification, pretraining
from .config import FINE_TUNING_SETTINGS, Experiment, ExperimentConfigError, check_init_from, load_experiment
from .data import limit_rows, load_imdb
from .perplexity import token_stream
from .precision import autocast, resolve_precision
from .pretraining import IGNORE_INDEX, MaskedLMCollator, masked_once
from .run import STAGE_RECORD, check_max_time, cli_command

WHOLE = "whole"  # a read length: each test review whole (read at the longest test review's length)
READINGS = ("direct", "windows")  # how every scheme reads past its training length; RoPE adds its scalings
ATTENTION_MODES = ("full", "sliding", "windows")  # how the speed section reads a whole review
EVAL_BATCH_TOKENS = 8192  # padded tokens per evaluation batch: the batch shrinks as the read length grows
ARENA_RECORD = "settings.json"  # in the results folder: the settings its cells were measured with
SPLITS = ("validation", "test")  # every reading is scored on both: choose on validation, report test


class ArenaConfigError(ExperimentConfigError):
    """An arena file (or budget) that cannot describe an arena."""


@dataclasses.dataclass(frozen=True)
class Budget:
    """One entry of an arena file's `budgets`: overrides of the two experiments and the evaluation limits.

    Attributes:
        classifier / pretraining: experiment keys (sections as mappings) set over the two base files.
        fine_tune: each scheme's classifier is fine-tuned from its pretrained encoder (`init_from`), not
            trained from scratch.
        seeds: the classifier of each scheme is trained once per seed; accuracies are the seeds' mean.
        eval_limit: validation and test reviews each reading is scored on (`None`: all).
        mlm_tokens: validation tokens the masked-LM loss is measured on at every length (the same tokens,
            cut into windows of each length), at most the stream of the pretraining run's `limit_eval` reviews.
        speed_warmup / speed_repeats: untimed and timed forward passes of each model at each speed length.
    """

    classifier: dict[str, Any] = dataclasses.field(default_factory=dict)
    pretraining: dict[str, Any] = dataclasses.field(default_factory=dict)
    fine_tune: bool = False
    seeds: list[int] = dataclasses.field(default_factory=lambda: [42])
    eval_limit: int | None = None
    mlm_tokens: int = 65536
    speed_warmup: int = 1
    speed_repeats: int = 5


@dataclasses.dataclass(frozen=True)
class Arena:
    """A validated arena file with one budget chosen (see `load_arena`)."""

    path: Path
    budget_name: str
    budget: Budget
    classifier: str
    pretraining: str
    schemes: list[str]
    rope_scalings: list[str]
    read_lengths: list[int | str]
    mlm_lengths: list[int]
    speed_lengths: list[int]
    speed_batch_sizes: list[int]
    sliding_window: int
    window_stride: int
    overrides: tuple[str, ...] = ()

    def settings(self) -> dict[str, Any]:
        """What the measurements depend on: a second run must find the same in --output-dir."""
        settings = dataclasses.asdict(self)
        settings["path"] = str(self.path)
        return settings


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _counts(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_count(item) for item in value)


def _subset(allowed: Sequence[str]) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, list) and all(item in allowed for item in value)


SCALINGS = tuple(rope_type for rope_type in ROPE_TYPES if rope_type != "default")
# Every key of an arena file, what it must be, and what that means (for the error message).
ARENA_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "classifier": (lambda value: isinstance(value, str), "a classifier experiment file, relative to the arena file"),
    "pretraining": (lambda value: isinstance(value, str), "a pretraining experiment file, relative to the arena file"),
    "schemes": (lambda value: bool(value) and _subset(tuple(POSITION_SCHEMES))(value),
                f"a non-empty list of {sorted(POSITION_SCHEMES)}"),
    "rope_scalings": (_subset(SCALINGS), f"a list of {list(SCALINGS)}"),
    "read_lengths": (lambda value: isinstance(value, list) and bool(value)
                     and all(_is_count(item) or item == WHOLE for item in value),
                     f"a non-empty list of positive integers and {WHOLE!r}"),
    "mlm_lengths": (_counts, "a non-empty list of positive integers"),
    "speed_lengths": (_counts, "a non-empty list of positive integers"),
    "speed_batch_sizes": (_counts, "a non-empty list of positive integers"),
    "sliding_window": (_is_count, "a positive integer (keys each side a sliding-attention token sees)"),
    "window_stride": (_is_count, "a positive integer, at most the training length"),
    "budgets": (lambda value: isinstance(value, dict) and bool(value), "a mapping of budget names to budgets"),
}
BUDGET_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "classifier": (lambda value: isinstance(value, dict), "a mapping of classifier experiment keys"),
    "pretraining": (lambda value: isinstance(value, dict), "a mapping of pretraining experiment keys"),
    "fine_tune": (lambda value: isinstance(value, bool), "true or false"),
    "seeds": (lambda value: isinstance(value, list) and bool(value) and len(set(value)) == len(value)
              and all(isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 for seed in value),
              "a non-empty list of distinct non-negative integers"),
    "eval_limit": (lambda value: value is None or _is_count(value), "a positive integer or null (all)"),
    "mlm_tokens": (_is_count, "a positive integer"),
    "speed_warmup": (lambda value: isinstance(value, int) and value >= 0, "a non-negative integer"),
    "speed_repeats": (_is_count, "a positive integer"),
}


def _check_mapping(raw: Any, rules: dict[str, Any], where: str, required: Sequence[str]) -> None:
    """Unknown keys, missing keys and bad values of one mapping, as an `ArenaConfigError` naming the key."""
    if not isinstance(raw, dict):
        raise ArenaConfigError(f"{where} must be a mapping of keys ({', '.join(rules)}).")
    unknown = sorted(set(raw) - set(rules))
    if unknown:
        raise ArenaConfigError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(rules)}.")
    missing = sorted(set(required) - set(raw))
    if missing:
        raise ArenaConfigError(f"{where}: missing key(s) {missing}.")
    for key, value in raw.items():
        valid, meaning = rules[key]
        if not valid(value):
            raise ArenaConfigError(f"{where}: `{key}` must be {meaning}, got {value!r}.")


def load_arena(path: str | os.PathLike[str], budget: str, overrides: Sequence[str] = ()) -> Arena:
    """Read and check an arena file with its `budget`; `overrides` (`key=value`) go to both experiments.

    Both experiments are loaded for every scheme here, so a bad key anywhere fails before anything is trained.
    """
    path = Path(path)
    if not path.is_file():
        raise ArenaConfigError(f"arena file {path} does not exist; see configs/arena/arena.yaml.")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ArenaConfigError(f"{path} is not valid YAML: {error}") from error
    _check_mapping(raw, ARENA_RULES, str(path), required=tuple(ARENA_RULES))
    if budget not in raw["budgets"]:
        raise ArenaConfigError(f"{path}: no budget {budget!r}; choose one of {sorted(raw['budgets'])}.")
    budget_raw = raw.pop("budgets")[budget] or {}
    _check_mapping(budget_raw, BUDGET_RULES, f"{path} [budgets.{budget}]", required=())
    arena = Arena(path=path, budget_name=budget, budget=Budget(**budget_raw), overrides=tuple(overrides),
                  **{**raw, "classifier": str(path.parent / raw["classifier"]),
                     "pretraining": str(path.parent / raw["pretraining"])})
    for scheme in arena.schemes:
        for kind in ("classifier", "pretraining"):
            experiment = experiment_for(arena, kind, scheme)
            if arena.window_stride > experiment.max_length:
                raise ArenaConfigError(f"{path}: `window_stride` {arena.window_stride} is longer than the training "
                                       f"length {experiment.max_length}; windows would skip tokens.")
    return arena


def as_overrides(section: dict[str, Any], prefix: str = "") -> list[str]:
    """`{"training": {"max_steps": 5}}` -> `["training.max_steps=5"]`: a mapping as `load_experiment` overrides."""
    overrides = []
    for key, value in section.items():
        if isinstance(value, dict) and value:
            overrides.extend(as_overrides(value, f"{prefix}{key}."))
        else:
            overrides.append(f"{prefix}{key}={json.dumps(value)}")
    return overrides


def experiment_for(arena: Arena, kind: str, scheme: str, seed: int | None = None,
                   init_from: Path | None = None) -> Experiment:
    """The `classifier` or `pretraining` experiment of `scheme`: the base file, the budget's keys, the scheme
    (and the classifier's `seed` and pretrained encoder `init_from`), then the command line's overrides; a
    bad key is an `ExperimentConfigError` naming the arena file."""
    name = f"arena-{kind}-{scheme}" if seed is None else f"arena-{kind}-{scheme}-seed{seed}"
    overrides = [*as_overrides(getattr(arena.budget, kind)), f"model.position_embedding_type={scheme}",
                 f"name={name}", *(() if seed is None else [f"seed={seed}"]), *arena.overrides]
    try:
        experiment = load_experiment(getattr(arena, kind), overrides)
        if init_from is None:
            return experiment
        # The encoder's architecture stands: of the model section only the fine-tuning settings remain.
        fine_tuning = {key: value for key, value in experiment.model.items() if key in FINE_TUNING_SETTINGS}
        experiment = dataclasses.replace(experiment, init_from=str(init_from), model=fine_tuning)
        check_init_from(experiment)
        return experiment
    except ExperimentConfigError as error:
        raise ArenaConfigError(f"{arena.path} [{kind} of budget {arena.budget_name}, scheme {scheme}]: "
                               f"{error}") from error


MEASUREMENT_VERSION = 2  # raised when a change to the measuring code makes earlier cells incomparable


class StageStopped(Exception):
    """The arena stage's --max-time is up: it ends here, with what it finished kept."""


class StageClock:
    """The minutes left to one arena stage (`--max-time`; unlimited without one)."""

    def __init__(self, max_time: float | None) -> None:
        check_max_time(max_time)
        self.deadline = None if max_time is None else time.time() + 60.0 * max_time

    def minutes_left(self) -> float | None:
        return None if self.deadline is None else (self.deadline - time.time()) / 60.0

    def check(self, needs_minutes: float = 0.0, what: str = "the next piece") -> None:
        """Raise `StageStopped` when the stage has not `needs_minutes` left for `what`."""
        left = self.minutes_left()
        if left is not None and left <= needs_minutes:
            raise StageStopped(f"{left:.1f} minutes of --max-time left, {what} needs {max(needs_minutes, 0):.1f}")


class Cells:
    """The arena's finished measurements, one JSON file each under `root`: read back if there, else measured
    and written at once (through a temporary file, so an interrupted write leaves no half cell).

    Each cell records the arena's `stamp` (budget, settings, measuring code); a cell with another stamp is
    refused, so that stages of one arena never mix with cells of another budget or code version. A cell is
    started only when the stage has time for it: as long as the slowest cell of its kind measured so far.
    """

    def __init__(self, root: Path, command: str | None, stamp: dict[str, Any], clock: StageClock) -> None:
        self.root = root
        self.command = command
        self.stamp = stamp
        self.clock = clock
        self.measured: list[str] = []
        self.seconds_by_kind: dict[str, float] = {}
        for path in sorted(root.rglob("*.json")) if root.is_dir() else ():
            self._note(self.kind(path.relative_to(root).with_suffix("").as_posix()),
                       json.loads(path.read_text()).get("seconds", 0.0))

    @staticmethod
    def kind(key: str) -> str:
        """Cells that take about as long: the measurement and its length (`read/.../whole` -> `read:whole`)."""
        parts = key.split("/")
        return f"{parts[0]}:{parts[-1]}"

    def check_fits(self, max_time: float | None) -> None:
        """Refuse a stage of `max_time` minutes shorter than a cell this arena measured before: such a cell
        could never finish in one stage, and every stage would end without it."""
        too_long = {kind: seconds for kind, seconds in self.seconds_by_kind.items()
                    if max_time is not None and seconds >= 60.0 * max_time}
        if too_long:
            kind, seconds = max(too_long.items(), key=lambda item: item[1])
            raise ArenaConfigError(
                f"a {kind} cell of this arena took {seconds / 60:.1f} minutes, more than --max-time {max_time:g}: it "
                "cannot finish in one stage; raise --max-time, or lower the budget's eval_limit or lengths"
            )

    def get(self, key: str, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        path = self.root / f"{key}.json"
        kind = self.kind(key)
        if path.is_file():
            record = json.loads(path.read_text())
            if record.get("stamp") != self.stamp:
                raise ArenaConfigError(
                    f"{path} was measured with {record.get('stamp')}, not this arena's {self.stamp}: cells of other "
                    "settings, budgets or code do not mix; pass another --results folder, or delete the old cells"
                )
            self._note(kind, record["seconds"])
            return record
        self.clock.check(self.seconds_by_kind.get(kind, 0.0) / 60.0, f"cell {key}")
        started = time.perf_counter()
        record = {**measure(), "seconds": time.perf_counter() - started, "command": self.command, "stamp": self.stamp}
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(record, indent=2, default=str))
        temporary.replace(path)
        self.measured.append(key)
        self._note(kind, record["seconds"])
        return record

    def _note(self, kind: str, seconds: float) -> None:
        self.seconds_by_kind[kind] = max(seconds, self.seconds_by_kind.get(kind, 0.0))


def trained(run_dir: Path, train: Callable[..., dict[str, Any]], experiment: Experiment,
            clock: StageClock | None = None, continue_from: Path | None = None) -> dict[str, Any]:
    """A training run's metrics: read from a finished `run_dir`, resumed from its last checkpoint, continued from
    a committed stage (`continue_from`), or run; within the stage's time (`StageStopped` when it stops first)."""
    metrics = run_dir / "metrics.json"
    if metrics.is_file():
        return json.loads(metrics.read_text())
    clock = clock or StageClock(None)
    clock.check(what=f"training {experiment.name}")
    resume = any(run_dir.glob("checkpoint-*"))
    options: dict[str, Any] = {"resume": resume, "overwrite": not resume, "max_time": clock.minutes_left()}
    if continue_from is not None and not resume:
        options["continue_from"] = continue_from
    result = train(experiment, run_dir, **options)
    if result.get("stage") == "stopped":
        raise StageStopped(f"{experiment.name} stopped at step {result['step']} of {result['max_steps']}")
    return result


def na(reason: str) -> dict[str, Any]:
    """A cell that cannot be measured, and why."""
    return {"value": None, "reason": reason}


def readings_of(scheme: str, rope_scalings: Sequence[str]) -> list[str]:
    """How a scheme's classifier reads past its training length: directly, as windows, and (RoPE) scaled."""
    return [*READINGS, *(rope_scalings if scheme == "rope" else ())]


def longest_review(model_dir: Path, dataset: str, limit: int | None, split: str = "test") -> int:
    """Tokens of the longest of the first `limit` reviews of `split`: the length `whole` reads at."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    texts = list(limit_rows(load_imdb(dataset)[split], limit)["text"])
    return max(len(ids) for ids in tokenizer(texts, truncation=False, verbose=False)["input_ids"])


def rope_scaled_folder(model_dir: Path, target: Path, rope_type: str, length: int) -> dict[str, Any]:
    """`target`: `model_dir`'s classifier (its files linked, not copied) with `rope_type` scaling for reading
    `length` tokens, and the `rope_parameters` it got. `linear` and `yarn` stretch the training length by
    factor = length / training length; `dynamic` (NTK) recomputes its frequencies from each input's own
    length (transformers' `_compute_dynamic_ntk_parameters`), so its factor stays 1: base theta is scaled by
    (length / training length) ** (d / (d - 2)) for an input of `length` tokens, and not at all within training."""
    config = json.loads((model_dir / "config.json").read_text())
    factor = 1.0 if rope_type == "dynamic" else max(1.0, length / config["max_position_embeddings"])
    rope_parameters = {**config["rope_parameters"], "rope_type": rope_type, "factor": factor}
    target.mkdir(parents=True, exist_ok=True)
    for item in model_dir.iterdir():
        link = target / item.name
        if item.is_file() and item.name != "config.json" and not link.exists():
            link.symlink_to(item.resolve())
    (target / "config.json").write_text(json.dumps({**config, "rope_parameters": rope_parameters}, indent=2))
    return rope_parameters


def read_accuracy(model_dir: Path, reading: str, length: int, arena: Arena, dataset: str,
                  scaled_dir: Path, split: str = "test", precision: str = "auto") -> dict[str, Any]:
    """Accuracy on `split` of a classifier reading `length` tokens of each review: `direct`ly, as `windows`, or
    (RoPE) with a scaling applied at inference. A length the model cannot read directly (learned positions
    past their table) is n/a with the reason the package's length policy (`reading_length`) gives."""
    stride = arena.window_stride if reading == "windows" else None
    model, tokenizer = load_saved_classifier(model_dir, stride)
    try:
        reading_length(model, tokenizer, length)
    except ValueError as error:
        return na(str(error))
    record: dict[str, Any] = {}
    batch_size = max(1, EVAL_BATCH_TOKENS // length)
    if reading in SCALINGS:
        record["rope_parameters"] = rope_scaled_folder(model_dir, scaled_dir, reading, length)
        model_dir = scaled_dir
        if reading == "dynamic":
            batch_size = 1  # its frequencies follow the padded batch length: one review per batch reads its own
    metrics = classification.evaluate_saved(model_dir, dataset=dataset, split=split, limit=arena.budget.eval_limit,
                                            batch_size=batch_size, max_length=length, window_stride=stride,
                                            precision=precision)
    return {**record, "value": metrics[f"{split}_accuracy"], "f1": metrics[f"{split}_f1"],
            "loss": metrics[f"{split}_loss"], "n_reviews": metrics[f"{split}_reviews"],
            "precision": metrics["precision"]}


def mlm_token_budget(stream_length: int, lengths: Sequence[int], wanted: int) -> int:
    """Tokens every length is evaluated on: at most `wanted` and the stream, and a whole number of windows of
    every length, so each length reads the very same tokens. A ValueError when the stream is too short."""
    unit = math.lcm(*lengths)
    budget = min(wanted, stream_length) // unit * unit
    if budget == 0:
        raise ValueError(f"the validation stream has {stream_length} tokens and `mlm_tokens` is {wanted}, fewer "
                         f"than one window of every mlm length needs ({unit}); raise the pretraining experiment's "
                         "limit_eval or the budget's mlm_tokens, or drop the longest mlm length.")
    return budget


@torch.no_grad()
def masked_lm_loss(model: HfAttnForMaskedLM, collator: MaskedLMCollator, stream: Sequence[int], length: int,
                   n_tokens: int, batch_tokens: int = EVAL_BATCH_TOKENS) -> dict[str, Any]:
    """Mean loss per masked token on the first `n_tokens` of `stream` cut into windows of `length`, in batches of
    about `batch_tokens` tokens. The stream is masked once with `EVAL_SEED` (`masked_once`) before it is cut, so
    every length predicts the same masked tokens from the same corrupted text: only the context differs."""
    whole = datasets.Dataset.from_dict({"input_ids": [list(stream[:n_tokens])], "attention_mask": [[1] * n_tokens]})
    masked = masked_once(whole, collator)[0]
    windows = {key: [values[start : start + length] for start in range(0, n_tokens, length)]
               for key, values in masked.items()}
    loader = DataLoader(datasets.Dataset.from_dict(windows), batch_size=max(1, batch_tokens // length),
                        collate_fn=collator)
    model.eval()
    total, masked_tokens = 0.0, 0
    for batch in loader:
        count = int((batch["labels"] != IGNORE_INDEX).sum())
        if count:
            total += float(model(**batch).loss) * count  # the loss is the batch's mean over its masked tokens
            masked_tokens += count
    return {"value": total / masked_tokens, "masked_tokens": masked_tokens, "windows": len(windows["input_ids"]),
            "tokens": n_tokens}


def mlm_cell(model_dir: Path, length: int, experiment: Experiment, wanted_tokens: int,
             lengths: Sequence[int]) -> dict[str, Any]:
    """The masked-LM loss of a pretrained encoder on validation windows of `length` tokens (n/a for learned
    positions past their table)."""
    model = HfAttnForMaskedLM.from_pretrained(model_dir)
    if beyond_learned_table(model.config, length):
        return na(f"learned positions cover {model.config.max_position_embeddings} tokens (the pretraining length): "
                  f"a {length}-token window has no position rows past them")
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # The pretraining run's validation reviews (its first `limit_eval`) as one stream, as `chunk_texts` reads them.
    texts = limit_rows(load_imdb(experiment.dataset)["validation"], experiment.limit_eval)["text"]
    stream = token_stream(tokenizer, texts, wanted_tokens).tolist()
    n_tokens = mlm_token_budget(len(stream), lengths, wanted_tokens)
    precision = resolve_precision(experiment.precision, torch.device("cpu"))
    with autocast(precision, torch.device("cpu")):
        loss = masked_lm_loss(model, MaskedLMCollator(tokenizer, experiment.mlm_probability), stream, length, n_tokens)
    return {**loss, "precision": precision}


def attention_settings(mode: str, arena: Arena, num_layers: int) -> dict[str, Any]:
    """Config changes that make a saved classifier read a whole review with `mode`'s attention."""
    if mode == "sliding":
        return {"sliding_window": arena.sliding_window, "layer_types": ["sliding_attention"] * num_layers}
    if mode == "windows":
        return {"classifier_window_stride": arena.window_stride}
    return {}


def speed_cell(models: dict[str, Path], arena: Arena, length: int, batch: int) -> dict[str, Any]:
    """Median forward time and peak memory (fp32, no grad, CPU or the GPU there is) of every scheme's classifier
    in every attention mode reading `batch` random reviews of `length` tokens; the candidates are timed
    interleaved as in `hf-attn bench` (`interleaved_times`). A mode a scheme cannot read is n/a."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    generator = torch.Generator().manual_seed(0)
    steps: dict[str, Callable[[], None]] = {}
    results: dict[str, dict[str, Any]] = {}
    for scheme, model_dir in models.items():
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        layers = HfAttnConfig.from_pretrained(model_dir).num_hidden_layers
        for mode in ATTENTION_MODES:
            name = f"{scheme}/{mode}"
            model = HfAttnForSequenceClassification.from_pretrained(
                model_dir, **attention_settings(mode, arena, layers)).to(device).eval()
            model.config.validate_fields()
            try:
                reading_length(model, tokenizer, length)
            except ValueError as error:
                results[name] = na(str(error))
                continue
            inputs = make_batch(batch, [length] * batch, length, model.config.vocab_size, generator, device)
            inputs.pop("labels")
            steps[name] = functools.partial(_forward, model, inputs)
    times = interleaved_times(steps, dict.fromkeys(steps, lambda: None), arena.budget.speed_warmup,
                              arena.budget.speed_repeats, device) if steps else {}
    for name, step in steps.items():
        summary = summarize(times[name])
        results[name] = {"value": summary["median_ms"], **summary, "peak_mib": peak_memory_bytes(step, device) / MIB}
    return {"length": length, "batch": batch, "device": str(device), "candidates": results}


@torch.no_grad()
def _forward(model: HfAttnForSequenceClassification, inputs: dict[str, torch.Tensor]) -> None:
    model(**inputs)


def claim_arena_dir(results_dir: Path, arena: Arena) -> None:
    """Record the arena's settings in `results_dir`, or refuse a folder whose cells were measured with others."""
    record = results_dir / ARENA_RECORD
    settings = json.loads(json.dumps({**arena.settings(), "measurement_version": MEASUREMENT_VERSION}, default=str))
    if record.is_file():
        previous = json.loads(record.read_text())
        if previous != settings:
            changed = sorted(key for key in settings.keys() | previous.keys()
                             if settings.get(key) != previous.get(key))
            raise ArenaConfigError(f"{results_dir} holds an arena measured with other settings ({', '.join(changed)} "
                                   "differ); pass another --results folder, or the same file, budget and overrides.")
        return
    results_dir.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(settings, indent=2))


def arena_stamp(arena: Arena) -> dict[str, Any]:
    """What every cell of `arena` records, to refuse cells of another arena: budget, settings digest, code."""
    settings = json.dumps(arena.settings(), sort_keys=True, default=str)
    return {"budget": arena.budget_name, "settings_sha256": hashlib.sha256(settings.encode()).hexdigest()[:16],
            "measurement_version": MEASUREMENT_VERSION}


def pretrained_encoder(arena: Arena, scheme: str, run_dir: Path, clock: StageClock,
                       committed: Path | None) -> tuple[Path, dict[str, Any]]:
    """The folder of `scheme`'s pretrained encoder and its metrics: pretrained here (resumed, or continued from a
    stage committed in `committed`), or the finished encoder committed there by an earlier stage on any machine.

    With `committed`, each stage's end is written there as a float16 checkpoint (`hf-attn checkpoint`): the last
    checkpoint of a stopped stage (from which the next one continues) or the finished encoder."""
    experiment = experiment_for(arena, "pretraining", scheme)
    finished_elsewhere = committed is not None and (committed / "metrics.json").is_file()
    if finished_elsewhere and not (run_dir / "metrics.json").is_file():
        return committed, json.loads((committed / "metrics.json").read_text())
    stopped_elsewhere = committed is not None and (committed / STAGE_RECORD).is_file()
    try:
        metrics = trained(run_dir, pretraining.pretrain, experiment, clock,
                          continue_from=committed if stopped_elsewhere else None)
    except StageStopped:
        if committed is not None and (run_dir / STAGE_RECORD).is_file():  # it trained, and stopped at a step
            stage = json.loads((run_dir / STAGE_RECORD).read_text())
            commit_encoder(Path(stage["checkpoint"]), committed, len(arena.schemes))
        raise
    if committed is not None and not finished_elsewhere:
        commit_encoder(run_dir, committed, len(arena.schemes))
    return run_dir, metrics


def commit_encoder(source: Path, committed: Path, schemes: int) -> None:
    """`source` (a run folder or one of its checkpoints) as the float16 checkpoint `committed`, replacing it; the
    folder beside it holds one per scheme."""
    from ..analysis.checkpoint import write_checkpoint  # the model card's machinery: only when writing one

    write_checkpoint(source, committed, overwrite=True, max_checkpoints=schemes)


def run_arena(arena: Arena, output_dir: str | os.PathLike[str], results_dir: str | os.PathLike[str] | None = None,
              max_time: float | None = None, checkpoints: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Measure every cell of `arena` not yet in `results_dir`, then write the table and plots there (default
    `output_dir/results`); returns the table's record.

    Pretraining comes first (the classifiers of a `fine_tune` budget start from it), then the classifiers of
    every scheme and seed with their readings of validation and test, then speed. With `max_time` (minutes)
    the stage ends when it is up, at a step boundary of a training or before a cell it has no time for; what
    it finished is kept (cells in `results_dir/cells`, encoders in `checkpoints`), the record says `stopped`,
    and the same command continues. `checkpoints` is where each scheme's encoder is committed as float16
    (`checkpoints/SCHEME`), for a stage on another machine to continue from or fine-tune from.
    """
    output_dir = Path(output_dir)
    results = Path(results_dir) if results_dir is not None else output_dir / "results"
    clock = StageClock(max_time)
    claim_arena_dir(results, arena)
    cells = Cells(results / "cells", cli_command(), arena_stamp(arena), clock)
    cells.check_fits(max_time)
    runs = output_dir / "runs"
    record: dict[str, Any] = {"budget": arena.budget_name, "settings": arena.settings(), "command": cli_command(),
                              "training_length": experiment_for(arena, "classifier", arena.schemes[0]).max_length,
                              "seeds": arena.budget.seeds, "classifiers": {}, "pretraining": {}, "reading": {},
                              "mlm": {}, "speed": {}, "stopped": None}
    classifiers: dict[str, Path] = {}
    try:
        encoders = {}
        for scheme in arena.schemes:
            committed = Path(checkpoints) / scheme if checkpoints is not None else None
            encoders[scheme], metrics = pretrained_encoder(arena, scheme, runs / "pretraining" / scheme, clock,
                                                           committed)
            record["pretraining"][scheme] = _run_summary(metrics)
            experiment = experiment_for(arena, "pretraining", scheme)
            for length in arena.mlm_lengths:
                record["mlm"][f"{scheme}/{length}"] = cells.get(f"mlm/{scheme}/{length}", functools.partial(
                    mlm_cell, encoders[scheme], length, experiment, arena.budget.mlm_tokens, arena.mlm_lengths))
        for scheme in arena.schemes:
            for seed in arena.budget.seeds:
                experiment = experiment_for(arena, "classifier", scheme, seed,
                                            encoders[scheme] if arena.budget.fine_tune else None)
                run_dir = runs / "classifier" / f"{scheme}-seed{seed}"
                record["classifiers"][f"{scheme}/{seed}"] = _run_summary(
                    trained(run_dir, classification.train, experiment, clock))
                classifiers.setdefault(scheme, run_dir)
                _readings(arena, scheme, seed, run_dir, experiment, cells, output_dir, record["reading"])
        for length in arena.speed_lengths:
            for batch in arena.speed_batch_sizes:
                record["speed"][f"{length}/{batch}"] = cells.get(f"speed/{length}-batch{batch}", functools.partial(
                    speed_cell, classifiers, arena, length, batch))
    except StageStopped as stop:
        record["stopped"] = str(stop)
    record["measured_now"] = cells.measured
    summarize_readings(record)
    write_report(record, results)
    return record


def _readings(arena: Arena, scheme: str, seed: int, model_dir: Path, experiment: Experiment, cells: Cells,
              output_dir: Path, found: dict[str, Any]) -> None:
    """Every reading cell of one classifier (a scheme and seed) into `found`: validation and test at each read
    length, directly, as windows past the training length, and (RoPE) with each scaling."""
    readings = readings_of(scheme, arena.rope_scalings)
    for split in SPLITS:
        whole = cells.get(f"whole-length/{split}", lambda split=split: {"value": longest_review(
            model_dir, experiment.dataset, arena.budget.eval_limit, split)})["value"]
        for read in arena.read_lengths:
            length = whole if read == WHOLE else read
            for reading in readings:
                if reading == "windows" and length <= experiment.max_length:
                    continue  # one window: the direct reading
                key = f"{scheme}/{reading}/{read}"
                cell = cells.get(f"read/{scheme}/seed{seed}/{split}/{reading}/{read}", functools.partial(
                    read_accuracy, model_dir, reading, length, arena, experiment.dataset,
                    output_dir / "runs" / "scaled" / f"{scheme}-seed{seed}-{reading}-{read}", split,
                    experiment.precision))
                entry = found.setdefault(key, {"tokens": {}, "by_seed": {}})
                entry["tokens"][split] = length
                entry["by_seed"].setdefault(str(seed), {})[split] = cell


def standard_error(accuracy: float, reviews: int) -> float:
    """The standard error of an accuracy measured on `reviews` reviews (binomial): the test set's own noise."""
    return math.sqrt(accuracy * (1.0 - accuracy) / reviews)


def summarize_readings(record: dict[str, Any]) -> None:
    """Each reading's seeds in one number per split: the mean accuracy (`value` is the test one), its standard
    error on the reviews read (the seeds read the same reviews, so it does not shrink with them), and the
    seeds' spread; n/a with the reason where a seed's cell is n/a."""
    for entry in record["reading"].values():
        for split in SPLITS:
            seeds = [cells[split] for cells in entry["by_seed"].values() if split in cells]
            if not seeds:
                continue
            if any(cell["value"] is None for cell in seeds):
                summary = na(next(cell["reason"] for cell in seeds if cell["value"] is None))
            else:
                values = [cell["value"] for cell in seeds]
                mean = sum(values) / len(values)
                reviews = seeds[0]["n_reviews"]
                summary = {"value": mean, "se": standard_error(mean, reviews),
                           "spread": max(values) - min(values), "seeds": len(values), "n_reviews": reviews}
            entry["val" if split == "validation" else "test"] = summary
        test = entry.get("test") or entry.get("val")
        entry["value"], entry["reason"] = test["value"], test.get("reason")
        entry["se"] = test.get("se")


def _run_summary(metrics: dict[str, Any]) -> dict[str, Any]:
    """What the table shows of a training run's metrics.json."""
    keys = ("test_accuracy", "val_accuracy", "eval_mlm_loss", "optimizer_steps", "epochs", "train_runtime_s",
            "n_train", "n_train_chunks", "hardware", "command")
    return {key: metrics[key] for key in keys if key in metrics}


class _Notes:
    """Footnotes of the markdown table: one number per distinct reason a cell is n/a."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def cell(self, record: dict[str, Any] | None, show: Callable[[dict[str, Any]], str]) -> str:
        if record is None:
            return ""
        if record["value"] is not None:
            return show(record)
        if record["reason"] not in self.reasons:
            self.reasons.append(record["reason"])
        return f"n/a [{self.reasons.index(record['reason']) + 1}]"

    def lines(self) -> list[str]:
        return ["", *(f"[{number}] {reason}" for number, reason in enumerate(self.reasons, 1))] if self.reasons else []


def ranking(record: dict[str, Any], reading: str, read: int | str) -> str:
    """The schemes read `reading` at `read`, by mean test accuracy, `>` where the gap to the next exceeds twice the
    standard error of a difference (both accuracies' errors combined) and `~` where it does not."""
    scored = sorted(((entry["value"], entry["se"], key.split("/")[0]) for key, entry in record["reading"].items()
                     if key.endswith(f"/{reading}/{read}") and entry.get("value") is not None), reverse=True)
    if not scored:
        return ""
    words = [scored[0][2]]
    for (value, se, _), (next_value, next_se, name) in zip(scored, scored[1:]):
        words += [">" if value - next_value > 2 * math.hypot(se, next_se) else "~", name]
    return " ".join(words)


def markdown_report(record: dict[str, Any]) -> str:
    """The arena table in markdown: accuracy by read length with standard errors and a ranking, masked-LM loss
    by length, speed and memory."""
    settings = record["settings"]
    notes = _Notes()
    reads = settings["read_lengths"]
    tokens = {read: next((entry["tokens"].get("test") for key, entry in record["reading"].items()
                          if key.endswith(f"/{read}")), read) for read in reads}
    header = [f"{read} (longest: {tokens[read]})" if read == WHOLE else str(read) for read in reads]
    seeds = record["seeds"]
    eval_limit = settings["budget"]["eval_limit"] or "all"
    lines = [
        f"# Position-scheme arena, budget `{record['budget']}`",
        "",
        f"Every scheme on the same data, budget and seeds ({', '.join(map(str, seeds))}); arena file "
        f"`{settings['path']}`; command: `{record['command']}`. Each cell is a JSON file in `cells/` with the "
        "command that measured it.",
    ]
    if record.get("stopped"):
        lines += ["", f"**Stage stopped by --max-time** ({record['stopped']}): the table holds what is measured "
                  "so far; the same command continues."]
    lines += [
        "",
        f"## Test accuracy by read length (trained at {record['training_length']} tokens; {eval_limit} test "
        f"reviews; mean of {len(seeds)} seed(s) ± one standard error)",
        "",
        "`direct`: the whole read length at once; `windows`: windows of the training length every "
        f"{settings['window_stride']} tokens, pooled; `linear` / `dynamic` / `yarn`: RoPE scaled at inference. "
        "Validation accuracies are in arena.json (`val`).",
        "",
        "| scheme | reading | " + " | ".join(header) + " |",
        "|---|---|" + "---|" * len(reads),
    ]
    for scheme in settings["schemes"]:
        for reading in readings_of(scheme, settings["rope_scalings"]):
            row = [notes.cell(record["reading"].get(f"{scheme}/{reading}/{read}"),
                              lambda entry: f"{entry['value']:.3f} ± {entry['se']:.3f}") for read in reads]
            lines.append(f"| {scheme} | {reading} | " + " | ".join(row) + " |")
    lines += ["", "Ranking of the direct readings (`>`: ahead by more than twice the standard error of the "
              "difference; `~`: within it, no ranking):", ""]
    lines += [f"- {read}: {ranking(record, 'direct', read)}" for read in reads if ranking(record, "direct", read)]
    lengths = settings["mlm_lengths"]
    lines += ["", f"## Masked-LM loss by evaluation length (pretrained at {record['training_length']} tokens)", "",
              "Validation reviews as one token stream, masked once with a fixed seed, cut into windows of each "
              "length: every length predicts the same masked tokens; mean loss per masked token.", "",
              "| scheme | " + " | ".join(map(str, lengths)) + " | pretraining steps |",
              "|---|" + "---|" * (len(lengths) + 1)]
    for scheme, run in record["pretraining"].items():
        row = [notes.cell(record["mlm"].get(f"{scheme}/{length}"), lambda cell: f"{cell['value']:.3f}")
               for length in lengths]
        lines.append(f"| {scheme} | " + " | ".join(row) + f" | {run.get('optimizer_steps', '')} |")
    lines += _speed_lines(record, notes)
    return "\n".join(lines + notes.lines()) + "\n"


def _speed_lines(record: dict[str, Any], notes: _Notes) -> list[str]:
    settings = record["settings"]
    lines = []
    for batch in settings["speed_batch_sizes"]:
        cells = {length: record["speed"][f"{length}/{batch}"] for length in settings["speed_lengths"]
                 if f"{length}/{batch}" in record["speed"]}
        if not cells:
            continue
        device = next(iter(cells.values()))["device"]
        lines += ["", f"## Whole-review inference, batch {batch}: median ms per forward / peak MiB ({device}, fp32, "
                  "no grad)", "",
                  f"`full`: every token attends to every token; `sliding`: to {settings['sliding_window']} keys each "
                  f"side in every layer; `windows`: windows of the training length every {settings['window_stride']} "
                  "tokens.", "",
                  "| scheme | attention | " + " | ".join(map(str, cells)) + " |",
                  "|---|---|" + "---|" * len(cells)]
        for scheme in settings["schemes"]:
            for mode in ATTENTION_MODES:
                row = [notes.cell(cell["candidates"].get(f"{scheme}/{mode}"),
                                  lambda found: f"{found['value']:.1f} / {found['peak_mib']:.1f}")
                       for cell in cells.values()]
                lines.append(f"| {scheme} | {mode} | " + " | ".join(row) + " |")
    return lines


def arena_plots(record: dict[str, Any], results_dir: Path) -> list[Path]:
    """accuracy.png (by read length), mlm_loss.png (by evaluation length) and speed.png (time and memory by
    length, each attention mode), log-2 length axes."""
    from ..analysis.plots import plot_line_panels  # matplotlib: only when plots are drawn

    def series(cells: dict[str, dict[str, Any]], name_of: Callable[[str], str], x_of: Callable[[str, dict], float],
               y_of: Callable[[dict], float]) -> dict[str, tuple[list[float], list[float]]]:
        lines: dict[str, tuple[list[float], list[float]]] = {}
        for key, cell in cells.items():
            if cell["value"] is not None:
                xs, ys = lines.setdefault(name_of(key), ([], []))
                xs.append(x_of(key, cell))
                ys.append(y_of(cell))
        return lines

    accuracy = series(record["reading"], lambda key: key.rsplit("/", 1)[0],
                      lambda key, cell: cell["tokens"].get("test", cell["tokens"].get("validation")),
                      lambda cell: cell["value"])
    mlm = series(record["mlm"], lambda key: key.split("/")[0], lambda key, cell: int(key.split("/")[1]),
                 lambda cell: cell["value"])
    candidates = {f"{name}/b{cell['batch']}/{cell['length']}": {**found, "length": cell["length"]}
                  for cell in record["speed"].values() for name, found in cell["candidates"].items()}
    time_ms, peak_mib = (series(candidates, lambda key: key.rsplit("/", 1)[0], lambda key, cell: cell["length"],
                                lambda cell, field=field: cell[field]) for field in ("value", "peak_mib"))
    return [
        plot_line_panels([("Test accuracy by read length", "accuracy", accuracy)], results_dir / "accuracy.png",
                         "tokens read per review", log_x=True),
        plot_line_panels([("Masked-LM loss by evaluation length", "loss per masked token", mlm)],
                         results_dir / "mlm_loss.png", "tokens per window", log_x=True),
        plot_line_panels([("Median forward time", "ms", time_ms), ("Peak memory", "MiB", peak_mib)],
                         results_dir / "speed.png", "tokens per review", log_x=True),
    ]


def write_report(record: dict[str, Any], results_dir: Path) -> None:
    """arena.json, arena.md and the plots in `results_dir`."""
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "arena.json").write_text(json.dumps(record, indent=2, default=str))
    (results_dir / "arena.md").write_text(markdown_report(record))
    arena_plots(record, results_dir)
