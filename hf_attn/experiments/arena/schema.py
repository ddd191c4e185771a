"""Arena files (`configs/arena/arena.yaml`): the schema, a budget, and the experiments an arena runs.

The keys of an arena file are declared where they are used: `schemes`, `scheme_settings` and `budgets` here, the
experiment file of each role (`roles.ROLES`) and the settings of each kind of cell (`kinds.CELL_KINDS`) with them,
in the registries' order; a budget's keys likewise (`fine_tune` and `seeds` here)."""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from ...positions import POSITION_SCHEMES
from ...settings import refuse_unknown_keys
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
from .kinds import CELL_KINDS, Cell
from .roles import ROLES
from .settings import ArenaConfigError, Setting, subset

BASE_SETTINGS = (  # what every arena file has; the roles and the kinds declare the rest (`arena_settings`)
    Setting("schemes", lambda value: bool(value) and subset(tuple(POSITION_SCHEMES))(value),
            f"a non-empty list of {sorted(POSITION_SCHEMES)}"),
    Setting("scheme_settings", lambda value: isinstance(value, dict)
            and all(isinstance(keys, dict) for keys in value.values()),
            "a mapping of scheme names to experiment keys (what a scheme's definition adds, e.g. sinusoidal's scaled "
            "embeddings)", {}),
    Setting("budgets", lambda value: isinstance(value, dict) and bool(value), "a mapping of budget names to budgets"),
)
BASE_BUDGET_SETTINGS = (
    Setting("fine_tune", lambda value: isinstance(value, bool), "true or false", False),
    Setting("seeds", lambda value: isinstance(value, list) and bool(value) and len(set(value)) == len(value)
            and all(isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0 for seed in value),
            "a non-empty list of distinct non-negative integers", [42]),
)


def declared(settings: Iterable[Setting]) -> dict[str, Setting]:
    """`settings` by name, each where it is first declared (a key several kinds read is one key)."""
    found: dict[str, Setting] = {}
    for setting in settings:
        found.setdefault(setting.name, setting)
    return found


def part_settings(kinds: Iterable[type[Cell]]) -> dict[str, Setting]:
    """What `kinds` add to an arena file, in the registry's order: the experiment file of each role their cells use,
    then each kind's own settings."""
    return declared(setting for kind in kinds
                    for setting in (*(ROLES[role].setting() for role in kind.roles), *kind.settings))


def kind_settings() -> dict[str, Setting]:
    """The keys of an arena file the roles and kinds declare (read from the registries as they are now)."""
    return part_settings(CELL_KINDS.values())


def arena_settings() -> dict[str, Setting]:
    """Every key of an arena file: `schemes`, the roles' and kinds' (`kind_settings`), `scheme_settings`, `budgets`."""
    return declared((BASE_SETTINGS[0], *kind_settings().values(), *BASE_SETTINGS[1:]))


def budget_settings() -> dict[str, Setting]:
    """Every key of a budget: each role's experiment keys, `fine_tune` and `seeds`, then the kinds'."""
    return declared((*(role.budget_setting() for role in ROLES.values()), *BASE_BUDGET_SETTINGS,
                     *(setting for kind in CELL_KINDS.values() for setting in kind.budget_settings)))


def experiment_keys() -> tuple[str, ...]:
    """The keys of an arena file that name an experiment file: one per role."""
    return tuple(role.experiment for role in ROLES.values())


def _defaults(settings: dict[str, Setting], raw: dict[str, Any]) -> dict[str, Any]:
    """The values of `settings` in `raw`, each setting's default where it has none (a copy: defaults are shared)."""
    return {name: copy.deepcopy(raw.get(name, setting.default)) for name, setting in settings.items()}


class _Values:
    """Settings read as attributes (`arena.mlm_lengths`, `budget.eval_limit`) from a dataclass's `values`."""

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("values", {})
        if name in values:
            return values[name]
        raise AttributeError(f"{type(self).__name__} has no setting {name!r}")


@dataclasses.dataclass(frozen=True)
class Budget(_Values):
    """One entry of an arena file's `budgets`: overrides of the experiments and the evaluation limits; the keys the
    roles and kinds declare in `values` (`budget_settings`).

    Its keys: `classifier` / `pretraining` / `sequence` (experiment keys, sections as mappings, set over the base
    files); `fine_tune` (each scheme's classifier is fine-tuned from its pretrained encoder, `init_from`, not trained
    from scratch); `seeds` (the classifier of each scheme is trained once per seed; accuracies are the seeds' mean);
    and those the kinds of cells declare: `eval_limit` (validation and test reviews each reading is scored on,
    `None`: all), `mlm_tokens` (validation tokens the masked-LM loss is measured on at every length, at most the
    stream of the pretraining run's `limit_eval` reviews), `speed_warmup` / `speed_repeats` (untimed and timed
    forward passes of each model at each speed length).
    """

    values: dict[str, Any]
    fine_tune: bool = False
    seeds: list[int] = dataclasses.field(default_factory=lambda: [42])

    def settings(self) -> dict[str, Any]:
        return {name: copy.deepcopy(getattr(self, name)) for name in budget_settings()}


@dataclasses.dataclass(frozen=True)
class Arena(_Values):
    """A validated arena file with one budget chosen (see `load_arena`); every key the roles and kinds declare
    (`kind_settings`) is in `values`, read as an attribute (`arena.read_lengths`).

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
    values: dict[str, Any]
    scheme_settings: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    overrides: tuple[str, ...] = ()

    def settings(self) -> dict[str, Any]:
        """The arena's settings as the record keeps them; each kind of cell is stamped with those it depends on
        (`kinds.Cell.depends_on`, `budget.KEY` for a budget's key). An experiment file stands for its keys (its
        `base:` chain merged in), so that a cell measured before the file changed is refused, not mixed in; the
        files' paths are kept under `experiment_files`."""
        settings = {"path": str(self.path), "budget_name": self.budget_name, "budget": self.budget.settings(),
                    "schemes": list(self.schemes), **copy.deepcopy(self.values),
                    "scheme_settings": copy.deepcopy(self.scheme_settings), "overrides": list(self.overrides)}
        settings["experiment_files"] = {kind: settings[kind] for kind in experiment_keys() if settings[kind]}
        for kind, path in settings["experiment_files"].items():
            settings[kind] = read_experiment_file(path)
        return settings


def _check_mapping(raw: Any, settings: dict[str, Setting], where: str, owner: str, required: Sequence[str]) -> None:
    """Unknown keys, missing keys and bad values of one mapping, as an `ArenaConfigError` naming the key."""
    if not isinstance(raw, dict):
        raise ArenaConfigError(f"{where} must be a mapping of keys ({', '.join(settings)}).")
    refuse_unknown_keys(raw, settings, where, owner, error=ArenaConfigError)
    missing = sorted(set(required) - set(raw))
    if missing:
        raise ArenaConfigError(f"{where}: missing key(s) {missing}.")
    for key, value in raw.items():
        if not settings[key].valid(value):
            raise ArenaConfigError(f"{where}: {settings[key].rule.refusal(key, value)}")


def _check_parts(raw: dict[str, Any], path: Path) -> None:
    """An arena names the experiment of at least one role it is built around (a kind's `part`), and with it every
    key of that part's kinds."""
    parts = {part: part_settings(kind for kind in CELL_KINDS.values() if kind.part == part)
             for part in dict.fromkeys(kind.part for kind in CELL_KINDS.values())}
    if not {ROLES[part].experiment for part in parts} & set(raw):
        raise ArenaConfigError(f"{path}: name " + " or ".join(ROLES[part].arena for part in parts) + ", or both.")
    for part, keys in parts.items():
        first = ROLES[part].experiment
        missing = sorted(set(keys) - set(raw)) if first in raw or (set(keys) - {first}) & set(raw) else []
        if missing:
            raise ArenaConfigError(f"{path}: missing key(s) {missing} (an arena of `{first}` experiments needs "
                                   f"{list(keys)}).")


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
    _check_mapping(raw, arena_settings(), str(path), "an arena", required=("schemes", "budgets"))
    _check_parts(raw, path)
    unknown_schemes = sorted(set(raw.get("scheme_settings", {})) - set(raw["schemes"]))
    if unknown_schemes:
        raise ArenaConfigError(f"{path}: `scheme_settings` names {unknown_schemes}, not in `schemes`.")
    if budget not in raw["budgets"]:
        raise ArenaConfigError(f"{path}: no budget {budget!r}; choose one of {sorted(raw['budgets'])}.")
    budget_raw = raw["budgets"][budget] or {}
    _check_mapping(budget_raw, budget_settings(), f"{path} [budgets.{budget}]", "a budget", required=())
    files = {kind: str(path.parent / raw[kind]) for kind in experiment_keys() if kind in raw}
    budget_values = _defaults(budget_settings(), budget_raw)
    base = {setting.name: budget_values.pop(setting.name) for setting in BASE_BUDGET_SETTINGS}
    arena = Arena(path=path, budget_name=budget, budget=Budget(budget_values, **base),
                  schemes=raw["schemes"], values={**_defaults(kind_settings(), raw), **files},
                  scheme_settings=raw.get("scheme_settings", {}), overrides=tuple(overrides))
    kinds = [kind for kind in CELL_KINDS.values() if kind.in_arena(arena.values)]
    for role in dict.fromkeys(role for kind in kinds for role in kind.roles):
        for scheme in arena.schemes:
            ROLES[role].experiments(arena, scheme)
    for kind in kinds:
        kind.check(arena)
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
