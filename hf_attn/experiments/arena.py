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
from .config import Experiment, ExperimentConfigError, load_experiment
from .data import limit_rows, load_imdb
from .perplexity import token_stream
from .pretraining import IGNORE_INDEX, MaskedLMCollator, masked_once
from .run import cli_command

WHOLE = "whole"  # a read length: each test review whole (read at the longest test review's length)
READINGS = ("direct", "windows")  # how every scheme reads past its training length; RoPE adds its scalings
ATTENTION_MODES = ("full", "sliding", "windows")  # how the speed section reads a whole review
EVAL_BATCH_TOKENS = 8192  # padded tokens per evaluation batch: the batch shrinks as the read length grows
ARENA_RECORD = "arena.json"  # in --output-dir: the settings its cells were measured with


class ArenaConfigError(ExperimentConfigError):
    """An arena file (or budget) that cannot describe an arena."""


@dataclasses.dataclass(frozen=True)
class Budget:
    """One entry of an arena file's `budgets`: overrides of the two experiments and the evaluation limits.

    Attributes:
        classifier / pretraining: experiment keys (sections as mappings) set over the two base files.
        eval_limit: test reviews each reading is scored on (`None`: all).
        mlm_tokens: validation tokens the masked-LM loss is measured on at every length (the same tokens,
            cut into windows of each length), at most the stream of the pretraining run's `limit_eval` reviews.
        speed_warmup / speed_repeats: untimed and timed forward passes of each model at each speed length.
    """

    classifier: dict[str, Any] = dataclasses.field(default_factory=dict)
    pretraining: dict[str, Any] = dataclasses.field(default_factory=dict)
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


def experiment_for(arena: Arena, kind: str, scheme: str) -> Experiment:
    """The `classifier` or `pretraining` experiment of `scheme`: the base file, the budget's keys, the scheme,
    then the command line's overrides; a bad key is an `ExperimentConfigError` naming the arena file."""
    budget_keys = getattr(arena.budget, kind)
    overrides = [*as_overrides(budget_keys), f"model.position_embedding_type={scheme}",
                 f"name=arena-{kind}-{scheme}", *arena.overrides]
    try:
        return load_experiment(getattr(arena, kind), overrides)
    except ExperimentConfigError as error:
        raise ArenaConfigError(f"{arena.path} [{kind} of budget {arena.budget_name}, scheme {scheme}]: "
                               f"{error}") from error


class Cells:
    """The arena's finished measurements, one JSON file each under `root`: read back if there, else measured
    and written at once (through a temporary file, so an interrupted write leaves no half cell)."""

    def __init__(self, root: Path, command: str | None) -> None:
        self.root = root
        self.command = command
        self.measured: list[str] = []

    def get(self, key: str, measure: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        path = self.root / f"{key}.json"
        if path.is_file():
            return json.loads(path.read_text())
        started = time.perf_counter()
        record = {**measure(), "seconds": time.perf_counter() - started, "command": self.command}
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(record, indent=2, default=str))
        temporary.replace(path)
        self.measured.append(key)
        return record


def trained(run_dir: Path, train: Callable[..., dict[str, Any]], experiment: Experiment) -> dict[str, Any]:
    """A training run's metrics: read from a finished `run_dir`, resumed from its last checkpoint, or run."""
    metrics = run_dir / "metrics.json"
    if metrics.is_file():
        return json.loads(metrics.read_text())
    resume = any(run_dir.glob("checkpoint-*"))
    return train(experiment, run_dir, resume=resume, overwrite=not resume)


def na(reason: str) -> dict[str, Any]:
    """A cell that cannot be measured, and why."""
    return {"value": None, "reason": reason}


def readings_of(scheme: str, rope_scalings: Sequence[str]) -> list[str]:
    """How a scheme's classifier reads past its training length: directly, as windows, and (RoPE) scaled."""
    return [*READINGS, *(rope_scalings if scheme == "rope" else ())]


def longest_review(model_dir: Path, dataset: str, limit: int | None) -> int:
    """Tokens of the longest of the first `limit` test reviews: the length `whole` reads at."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    texts = list(limit_rows(load_imdb(dataset)["test"], limit)["text"])
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
                  scaled_dir: Path) -> dict[str, Any]:
    """Test accuracy of a classifier reading `length` tokens of each review: `direct`ly, as `windows`, or
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
    metrics = classification.evaluate_saved(model_dir, dataset=dataset, split="test", limit=arena.budget.eval_limit,
                                            batch_size=batch_size, max_length=length, window_stride=stride)
    return {**record, "value": metrics["test_accuracy"], "test_f1": metrics["test_f1"],
            "test_loss": metrics["test_loss"], "n_reviews": arena.budget.eval_limit}


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
    return masked_lm_loss(model, MaskedLMCollator(tokenizer, experiment.mlm_probability), stream, length, n_tokens)


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


def claim_arena_dir(output_dir: Path, arena: Arena) -> None:
    """Record the arena's settings in `output_dir`, or refuse a folder whose cells were measured with others."""
    record = output_dir / ARENA_RECORD
    settings = json.loads(json.dumps(arena.settings(), default=str))
    if record.is_file():
        previous = json.loads(record.read_text())
        if previous != settings:
            changed = sorted(key for key in settings.keys() | previous.keys()
                             if settings.get(key) != previous.get(key))
            raise ArenaConfigError(f"{output_dir} holds an arena measured with other settings ({', '.join(changed)} "
                                   "differ); pass another --output-dir, or the same file and budget.")
        return
    output_dir.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(settings, indent=2))


def run_arena(arena: Arena, output_dir: str | os.PathLike[str],
              results_dir: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Measure every cell of `arena` not yet in `output_dir`, then write the table and plots to `results_dir`
    (default `output_dir/results`); returns the table's record."""
    output_dir = Path(output_dir)
    claim_arena_dir(output_dir, arena)
    cells = Cells(output_dir / "cells", cli_command())
    runs = output_dir / "runs"
    classifiers = {scheme: runs / "classifier" / scheme for scheme in arena.schemes}
    encoders = {scheme: runs / "pretraining" / scheme for scheme in arena.schemes}
    record: dict[str, Any] = {"budget": arena.budget_name, "settings": arena.settings(), "command": cli_command(),
                              "training_length": experiment_for(arena, "classifier", arena.schemes[0]).max_length,
                              "classifiers": {}, "pretraining": {}, "reading": {}, "mlm": {}, "speed": {}}
    for scheme in arena.schemes:
        experiment = experiment_for(arena, "classifier", scheme)
        record["classifiers"][scheme] = _run_summary(trained(classifiers[scheme], classification.train, experiment))
        record["reading"].update(_readings(arena, scheme, classifiers[scheme], experiment, cells, output_dir))
    for scheme in arena.schemes:
        experiment = experiment_for(arena, "pretraining", scheme)
        record["pretraining"][scheme] = _run_summary(trained(encoders[scheme], pretraining.pretrain, experiment))
        for length in arena.mlm_lengths:
            record["mlm"][f"{scheme}/{length}"] = cells.get(f"mlm/{scheme}/{length}", functools.partial(
                mlm_cell, encoders[scheme], length, experiment, arena.budget.mlm_tokens, arena.mlm_lengths))
    for length in arena.speed_lengths:
        for batch in arena.speed_batch_sizes:
            record["speed"][f"{length}/{batch}"] = cells.get(f"speed/{length}-batch{batch}", functools.partial(
                speed_cell, classifiers, arena, length, batch))
    record["measured_now"] = cells.measured
    write_report(record, Path(results_dir) if results_dir is not None else output_dir / "results")
    return record


def _readings(arena: Arena, scheme: str, model_dir: Path, experiment: Experiment, cells: Cells,
              output_dir: Path) -> dict[str, Any]:
    """Every reading cell of one scheme's classifier: each read length, directly, as windows past the
    training length, and (RoPE) with each scaling."""
    readings = readings_of(scheme, arena.rope_scalings)
    whole = cells.get(f"whole-length/{scheme}", lambda: {"value": longest_review(
        model_dir, experiment.dataset, arena.budget.eval_limit)})["value"]
    found = {}
    for read in arena.read_lengths:
        length = whole if read == WHOLE else read
        for reading in readings:
            if reading == "windows" and length <= experiment.max_length:
                continue  # one window: the direct reading
            key = f"{scheme}/{reading}/{read}"
            found[key] = {"tokens": length, **cells.get(f"read/{key}", functools.partial(
                read_accuracy, model_dir, reading, length, arena, experiment.dataset,
                output_dir / "runs" / "scaled" / f"{scheme}-{reading}-{read}"))}
    return found


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


def markdown_report(record: dict[str, Any]) -> str:
    """The arena table in markdown: accuracy by read length, masked-LM loss by length, speed and memory."""
    settings = record["settings"]
    notes = _Notes()
    reads = settings["read_lengths"]
    tokens = {read: next((cell["tokens"] for key, cell in record["reading"].items() if key.endswith(f"/{read}")), read)
              for read in reads}
    header = [f"{read} (longest: {tokens[read]})" if read == WHOLE else str(read) for read in reads]
    lines = [
        f"# Position-scheme arena, budget `{record['budget']}`",
        "",
        f"Every scheme trained and pretrained on the same data with the same seed and budget; arena file "
        f"`{settings['path']}`; command: `{record['command']}`. Cells measured by this command are in "
        "`--output-dir/cells/`, one JSON each, with the command that measured them.",
        "",
        f"## Test accuracy by read length (trained at {record['training_length']} tokens; "
        f"{settings['budget']['eval_limit'] or 'all'} test reviews)",
        "",
        "`direct`: the whole read length at once; `windows`: windows of the training length every "
        f"{settings['window_stride']} tokens, pooled; `linear` / `dynamic` / `yarn`: RoPE scaled at inference.",
        "",
        "| scheme | reading | " + " | ".join(header) + " | run's test accuracy |",
        "|---|---|" + "---|" * (len(reads) + 1),
    ]
    for scheme, run in record["classifiers"].items():
        for reading in readings_of(scheme, settings["rope_scalings"]):
            row = [notes.cell(record["reading"].get(f"{scheme}/{reading}/{read}"), lambda cell: f"{cell['value']:.3f}")
                   for read in reads]
            own = f"{run['test_accuracy']:.3f}" if reading == "direct" else ""
            lines.append(f"| {scheme} | {reading} | " + " | ".join(row) + f" | {own} |")
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
        cells = {length: record["speed"][f"{length}/{batch}"] for length in settings["speed_lengths"]}
        device = next(iter(cells.values()))["device"]
        lines += ["", f"## Whole-review inference, batch {batch}: median ms per forward / peak MiB ({device}, fp32, "
                  "no grad)", "",
                  f"`full`: every token attends to every token; `sliding`: to {settings['sliding_window']} keys each "
                  f"side in every layer; `windows`: windows of the training length every {settings['window_stride']} "
                  "tokens.", "",
                  "| scheme | attention | " + " | ".join(map(str, cells)) + " |",
                  "|---|---|" + "---|" * len(cells)]
        for scheme in record["classifiers"]:
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

    accuracy = series(record["reading"], lambda key: key.rsplit("/", 1)[0], lambda key, cell: cell["tokens"],
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
