"""Arena files (`configs/arena/arena.yaml`): the schema, a budget, and the experiments an arena runs."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from ...configuration_hf_attn import ROPE_TYPES, is_count
from ...positions import POSITION_SCHEMES
from ..config import (
    FINE_TUNING_SETTINGS,
    Experiment,
    ExperimentConfigError,
    check_init_from,
    load_experiment,
    load_yaml,
    merge_sections,
    read_experiment_file,
    replaces_dataset,
)

WHOLE = "whole"  # a read length: each test review whole (read at the longest test review's length)


READINGS = ("direct", "windows")  # how every scheme reads past its training length; RoPE adds its scalings


ATTENTION_MODES = ("full", "sliding", "windows")  # how the speed section reads a whole review


class ArenaConfigError(ExperimentConfigError):
    """An arena file (or budget) that cannot describe an arena."""


@dataclasses.dataclass(frozen=True)
class Budget:
    """One entry of an arena file's `budgets`: overrides of the two experiments and the evaluation limits.

    Attributes:
        classifier / pretraining / sequence: experiment keys (sections as mappings) set over the base files.
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
    sequence: dict[str, Any] = dataclasses.field(default_factory=dict)
    fine_tune: bool = False
    seeds: list[int] = dataclasses.field(default_factory=lambda: [42])
    eval_limit: int | None = None
    mlm_tokens: int = 65536
    speed_warmup: int = 1
    speed_repeats: int = 5


@dataclasses.dataclass(frozen=True)
class Arena:
    """A validated arena file with one budget chosen (see `load_arena`).

    An arena of IMDb classifiers names `classifier` and `pretraining` (and what to read them at); an arena of
    sequence tasks names a `sequence` experiment and its `tasks`: each task's experiment keys (`task_keys`: its
    `dataset`, and e.g. `max_length`). An arena may name both. `scheme_settings` are the experiment keys one
    scheme's experiments add (after the budget's and the task's), such as the scaled token embeddings sinusoidal
    positions are defined with.
    """

    path: Path
    budget_name: str
    budget: Budget
    schemes: list[str]
    classifier: str | None = None
    pretraining: str | None = None
    rope_scalings: list[str] = dataclasses.field(default_factory=list)
    read_lengths: list[int | str] = dataclasses.field(default_factory=list)
    mlm_lengths: list[int] = dataclasses.field(default_factory=list)
    speed_lengths: list[int] = dataclasses.field(default_factory=list)
    speed_batch_sizes: list[int] = dataclasses.field(default_factory=list)
    sliding_window: int | None = None
    window_stride: int | None = None
    sequence: str | None = None
    tasks: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    scheme_settings: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    overrides: tuple[str, ...] = ()

    def settings(self) -> dict[str, Any]:
        """The arena's settings as the record keeps them; each kind of cell is stamped with those it depends on
        (`kinds.Cell.depends_on`, `budget.KEY` for a budget's key). An experiment file stands for its keys (its
        `base:` chain merged in), so that a cell measured before the file changed is refused, not mixed in; the
        files' paths are kept under `experiment_files`."""
        settings = dataclasses.asdict(self)
        settings["path"] = str(self.path)
        settings["experiment_files"] = {kind: settings[kind] for kind in EXPERIMENT_KINDS if settings[kind]}
        for kind, path in settings["experiment_files"].items():
            settings[kind] = read_experiment_file(path)
        return settings


def _counts(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(is_count(item) for item in value)


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
                     and all(is_count(item) or item == WHOLE for item in value),
                     f"a non-empty list of positive integers and {WHOLE!r}"),
    "mlm_lengths": (_counts, "a non-empty list of positive integers"),
    "speed_lengths": (_counts, "a non-empty list of positive integers"),
    "speed_batch_sizes": (_counts, "a non-empty list of positive integers"),
    "sliding_window": (is_count, "a positive integer (keys each side a sliding-attention token sees)"),
    "window_stride": (is_count, "a positive integer, at most the training length"),
    "sequence": (lambda value: isinstance(value, str), "a sequence-task experiment file, relative to the arena file"),
    "tasks": (lambda value: isinstance(value, dict) and bool(value)
              and all(isinstance(keys, dict) for keys in value.values()),
              "a mapping of task names to experiment keys (a `dataset` mapping, `max_length`, ...)"),
    "scheme_settings": (lambda value: isinstance(value, dict)
                        and all(isinstance(keys, dict) for keys in value.values()),
                        "a mapping of scheme names to experiment keys (what a scheme's definition adds, e.g. "
                        "sinusoidal's scaled embeddings)"),
    "budgets": (lambda value: isinstance(value, dict) and bool(value), "a mapping of budget names to budgets"),
}
# The keys an arena needs for each experiment it names.
CLASSIFIER_KEYS = ("classifier", "pretraining", "rope_scalings", "read_lengths", "mlm_lengths", "speed_lengths",
                   "speed_batch_sizes", "sliding_window", "window_stride")
SEQUENCE_KEYS = ("sequence", "tasks")
EXPERIMENT_KINDS = ("classifier", "pretraining", "sequence")  # the keys that name an experiment file
BUDGET_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "classifier": (lambda value: isinstance(value, dict), "a mapping of classifier experiment keys"),
    "pretraining": (lambda value: isinstance(value, dict), "a mapping of pretraining experiment keys"),
    "sequence": (lambda value: isinstance(value, dict), "a mapping of sequence-task experiment keys"),
    "fine_tune": (lambda value: isinstance(value, bool), "true or false"),
    "seeds": (lambda value: isinstance(value, list) and bool(value) and len(set(value)) == len(value)
              and all(isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 for seed in value),
              "a non-empty list of distinct non-negative integers"),
    "eval_limit": (lambda value: value is None or is_count(value), "a positive integer or null (all)"),
    "mlm_tokens": (is_count, "a positive integer"),
    "speed_warmup": (lambda value: isinstance(value, int) and value >= 0, "a non-negative integer"),
    "speed_repeats": (is_count, "a positive integer"),
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
        raw = load_yaml(path.read_text())
    except yaml.YAMLError as error:
        raise ArenaConfigError(f"{path} is not valid YAML: {error}") from error
    _check_mapping(raw, ARENA_RULES, str(path), required=("schemes", "budgets"))
    if not {"classifier", "sequence"} & set(raw):
        raise ArenaConfigError(f"{path}: name a `classifier` (with `pretraining`: an IMDb arena) or a `sequence` "
                               "experiment (with `tasks`), or both.")
    for first, keys in (("classifier", CLASSIFIER_KEYS), ("sequence", SEQUENCE_KEYS)):
        missing = sorted(set(keys) - set(raw)) if first in raw or set(keys[1:]) & set(raw) else []
        if missing:
            raise ArenaConfigError(f"{path}: missing key(s) {missing} (an arena of `{first}` experiments needs "
                                   f"{list(keys)}).")
    unknown_schemes = sorted(set(raw.get("scheme_settings", {})) - set(raw["schemes"]))
    if unknown_schemes:
        raise ArenaConfigError(f"{path}: `scheme_settings` names {unknown_schemes}, not in `schemes`.")
    if budget not in raw["budgets"]:
        raise ArenaConfigError(f"{path}: no budget {budget!r}; choose one of {sorted(raw['budgets'])}.")
    budget_raw = raw.pop("budgets")[budget] or {}
    _check_mapping(budget_raw, BUDGET_RULES, f"{path} [budgets.{budget}]", required=())
    files = {kind: str(path.parent / raw[kind]) for kind in EXPERIMENT_KINDS if kind in raw}
    arena = Arena(path=path, budget_name=budget, budget=Budget(**budget_raw), overrides=tuple(overrides),
                  **{**raw, **files})
    for scheme in arena.schemes:
        for kind in ("classifier", "pretraining") if arena.classifier else ():
            experiment = experiment_for(arena, kind, scheme)
            if arena.window_stride > experiment.max_length:
                raise ArenaConfigError(f"{path}: `window_stride` {arena.window_stride} is longer than the training "
                                       f"length {experiment.max_length}; windows would skip tokens.")
        for task in arena.tasks:
            experiment_for(arena, "sequence", scheme, task=task)
    return arena


def task_keys(arena: Arena, task: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The experiment keys of one of the arena's `tasks`: those merged into the sequence experiment (and the
    budget's), and those that replace its own. A task's `dataset` of the experiment's kind (or naming none) merges
    into the experiment's, so a task states only what differs (`{dataset: {name: copy}}`); one of another kind
    (SCAN beside generated tasks) replaces it whole, since the two kinds' settings do not mix."""
    keys = dict(arena.tasks[task])
    dataset = keys.get("dataset")
    if replaces_dataset(read_experiment_file(arena.sequence).get("dataset"), dataset):
        return {key: value for key, value in keys.items() if key != "dataset"}, {"dataset": dataset}
    return keys, {}


def experiment_for(arena: Arena, kind: str, scheme: str, seed: int | None = None,
                   init_from: Path | None = None, task: str | None = None) -> Experiment:
    """The `classifier`, `pretraining` or `sequence` experiment of `scheme`: the base file, the `task`'s keys (a
    sequence experiment), the budget's keys (after the task's: a budget sets what every task gets, so the tiny one
    trains a task of longer schedule for its few steps too), the scheme (and the `seed`, and a classifier's
    pretrained encoder `init_from`), then the command line's overrides; a bad key is an `ExperimentConfigError`
    naming the arena file."""
    name = "-".join(["arena", kind, *([task] if task else []), scheme, *([f"seed{seed}"] if seed is not None else [])])
    task_changes, dataset = task_keys(arena, task) if task is not None else ({}, {})
    changes = merge_sections(task_changes, getattr(arena.budget, kind))
    changes = merge_sections(merge_sections(changes, arena.scheme_settings.get(scheme, {})), {
        "name": name, "model": {"position_embedding_type": scheme}, **({} if seed is None else {"seed": seed})})
    try:
        experiment = load_experiment(getattr(arena, kind), arena.overrides, changes=changes, replacing=dataset)
        if init_from is None:
            return experiment
        # The encoder's architecture stands: of the model section only the fine-tuning settings remain.
        fine_tuning = {key: value for key, value in experiment.model.items() if key in FINE_TUNING_SETTINGS}
        experiment = dataclasses.replace(experiment, init_from=str(init_from), model=fine_tuning)
        check_init_from(experiment)
        return experiment
    except ExperimentConfigError as error:
        where = f"{kind} of budget {arena.budget_name}, " + (f"task {task}, " if task else "")
        raise ArenaConfigError(f"{arena.path} [{where}scheme {scheme}]: "
                               f"{error}") from error
