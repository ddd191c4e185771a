"""What every kind of arena cell is: `Cell`, the key of one measurement, and what its class declares and does. A
kind's class owns its settings (the arena file's keys and the budget's it adds, checked when the file is read), its
stamp (`depends_on`), its measurement, its section of the report's record, the summary of that section and the
table lines and plots that show it. The run and the report only iterate over `CELL_KINDS` and ask each class.

A cell is stamped with the settings of its own kind only (`Cell.stamp`), so an arena that gains a scheme, a read
length, a task or a kind keeps every cell it has and measures only the new ones. Its cells (`Cell.of`) come in a stage
with the model they are measured with (`Cell.group`), in the registry's order.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..roles import ROLES, Model
from ..settings import Setting

if TYPE_CHECKING:  # the run is what a cell is measured with, the arena what it is planned from; both import this
    from ..run import ArenaRun
    from ..schema import Arena

DEFAULT_TASK = "imdb"  # the task (dataset) of a cell whose key names none: every cell measured before tasks
SPLITS = ("validation", "test")  # every reading is scored on both: choose on validation, report test
ENCODER_SETTINGS = ("pretraining", "budget.pretraining", "overrides")  # what makes a scheme's encoder
CLASSIFIER_SETTINGS = ("classifier", "budget.classifier", "overrides", "budget.fine_tune")


def settings_of(arena: Arena, names: tuple[str, ...]) -> dict[str, Any]:
    """The arena's values of `names` (`budget.KEY` for a budget key), as JSON reads them back."""
    settings = arena.settings()
    values = {name: _setting(settings, name) for name in names}
    return json.loads(json.dumps(values, default=str))


def _setting(settings: dict[str, Any], name: str) -> Any:
    """One setting by its dotted name (`budget.fine_tune`, `tasks.reverse`)."""
    for part in name.split("."):
        settings = settings[part]
    return settings


def encoder_group(arena: Arena, scheme: str) -> tuple[int, ...]:
    """The cells of a scheme's encoder come first, scheme by scheme: a `fine_tune` budget's classifiers need it."""
    return (0, arena.schemes.index(scheme))


def classifier_group(arena: Arena, scheme: str, seed: int) -> tuple[int, ...]:
    """Then each classifier's cells, scheme by scheme and seed by seed, so that a stage reads what it trained."""
    return (1, arena.schemes.index(scheme), arena.budget.seeds.index(seed))


EVERY_SCHEME = (2,)  # last, the cells of every scheme together


def each_scheme_and_seed(kind: type[Cell], arena: Arena, task: str) -> list[Cell]:
    """A cell of `kind` for every scheme and seed of `arena` (a classifier's training, a decoder's), for `task`."""
    return [kind(task=task, scheme=scheme, seed=seed) for scheme in arena.schemes for seed in arena.budget.seeds]


def classifier_settings(arena: Arena) -> tuple[str, ...]:
    """What a classifier depends on: its experiment, and its encoder's when it is fine-tuned from one."""
    return tuple(dict.fromkeys(CLASSIFIER_SETTINGS + (ENCODER_SETTINGS if arena.budget.fine_tune else ())))


class Notes:
    """Footnotes of the markdown report: one number per distinct reason a cell is n/a, shared by every kind's table."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def cell(self, record: dict[str, Any] | None, show: Callable[[dict[str, Any]], str]) -> str:
        if record is None or (record["value"] is None and record.get("reason") is None):
            return ""  # not measured yet
        if record["value"] is not None:
            return show(record)
        if record["reason"] not in self.reasons:
            self.reasons.append(record["reason"])
        return f"n/a [{self.reasons.index(record['reason']) + 1}]"

    def lines(self) -> list[str]:
        return ["", *(f"[{number}] {reason}" for number, reason in enumerate(self.reasons, 1))] if self.reasons else []


def plot_series(cells: dict[str, dict[str, Any]], name_of: Callable[[str], str],
                x_of: Callable[[str, dict[str, Any]], float], y_of: Callable[[dict[str, Any]], float],
                error_of: Callable[[dict[str, Any]], float] | None = None) -> dict[str, tuple[list[float], ...]]:
    """A plot's lines from a report section: {line name: (xs, ys), or (xs, ys, standard errors) when `error_of` is
    given}, skipping cells not measured or n/a."""
    lines: dict[str, tuple[list[float], ...]] = {}
    for key, cell in cells.items():
        if cell["value"] is not None:
            xs, ys, *errors = lines.setdefault(name_of(key), ([], [], []) if error_of else ([], []))
            xs.append(x_of(key, cell))
            ys.append(y_of(cell))
            if error_of:
                errors[0].append(error_of(cell))
    return lines


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cell:
    """The key of one measurement: its kind (the class) and fields, and the task its models learn (`imdb` for
    every cell so far, whose files name no task).

    What the class declares: `kind` (its folder under `cells/`), `section` (its key in the report's record),
    `roles` (of the models its cells use: their experiments are keys of the arena file), `part` (the role the
    arena is built around that the kind belongs to: it has cells where the arena names that role's experiment,
    which then needs every key of the part's kinds), `settings` and `budget_settings` (the keys it adds to the arena
    file and to each budget) and `plural` (its cells, in a stage's messages)."""

    kind: ClassVar[str]
    section: ClassVar[str]
    roles: ClassVar[tuple[str, ...]] = ()
    part: ClassVar[str] = "classifier"
    settings: ClassVar[tuple[Setting, ...]] = ()
    budget_settings: ClassVar[tuple[Setting, ...]] = ()
    plural: ClassVar[str] = "cells"
    version: ClassVar[int] = 2  # raised when a change to this kind's measuring makes its earlier cells incomparable
    replaced_when_stale: ClassVar[bool] = False  # a cell of other settings is measured again, not refused
    task: str = DEFAULT_TASK

    # ------------------------------------------------------------------ the arena file: checks, cells, plan

    @classmethod
    def check(cls, arena: Arena) -> None:
        """Refuse values of this kind's settings that do not go together with the arena's experiments (an
        `ArenaConfigError`); every setting alone is checked already (`Setting.valid`)."""

    @classmethod
    def in_arena(cls, settings: dict[str, Any]) -> bool:
        """Whether an arena of `settings` (`Arena.settings()`, or the record's) names this kind's part."""
        return bool(settings.get(ROLES[cls.part].experiment))

    @classmethod
    def tasks(cls, arena: Arena) -> list[str]:
        """The tasks of `arena` this kind has cells for: IMDb's (`DEFAULT_TASK`) where it names its part's
        experiment."""
        return [DEFAULT_TASK] if getattr(arena, ROLES[cls.part].experiment) else []

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        """Every cell of this kind in `arena`, for `task`."""
        raise NotImplementedError

    def group(self, arena: Arena) -> tuple[int, ...]:
        """Where the cell comes in a stage: `encoder_group`, `classifier_group`, or by default `EVERY_SCHEME` (after
        every model's own cells)."""
        return EVERY_SCHEME

    @property
    def path(self) -> str:
        """The cell's file under `cells/`, without `.json`."""
        parts = "/".join(self.parts())
        return f"{self.kind}/{parts}" if self.task == DEFAULT_TASK else f"tasks/{self.task}/{self.kind}/{parts}"

    def parts(self) -> tuple[str, ...]:
        """The key's fields as the folders and file name of its path after the kind."""
        raise NotImplementedError

    @property
    def timing_class(self) -> str:
        """Cells that take about as long: the measurement and its last field (`read:whole`, `classifier:train`)."""
        return f"{self.kind}:{self.parts()[-1]}"

    # ------------------------------------------------------------------ the stamp and the models

    def depends_on(self, arena: Arena) -> tuple[str, ...]:
        """The settings of `arena` this cell's value depends on."""
        raise NotImplementedError

    def stamp(self, arena: Arena) -> dict[str, Any]:
        """What the cell records to be refused (or replaced) where the arena's settings for it differ: those of
        `depends_on`, and the `scheme_settings` of the schemes it measures that have some."""
        schemes = (self.scheme,) if hasattr(self, "scheme") else arena.schemes
        own = tuple(f"scheme_settings.{scheme}" for scheme in schemes if scheme in arena.scheme_settings)
        return {"kind": self.kind, "version": self.version,
                "settings": settings_of(arena, self.depends_on(arena) + own)}

    def needs(self, arena: Arena) -> set[Model]:
        """The models this cell is measured with, trained or read before its time starts."""
        return set()

    def trains(self) -> Model | None:
        """The model this cell's measurement trains (its time is the training's), if any."""
        return None

    def checks_its_own_time(self) -> bool:
        """Whether the cell's measurement is a training that checks the stage's time itself, so the stage starts the
        cell with any time left: a classifier's training asks for its own and its readings' time
        (`ArenaRun.classifier_metrics`); a sequence task's decoder trains with what is left and resumes in a later
        stage on this machine, so a stage shorter than it is not refused either (`SequenceCell`)."""
        return self.trains() is not None

    def wanted(self, run: ArenaRun) -> bool:
        """Whether the cell is part of the arena, as far as the run knows yet."""
        return True

    # ------------------------------------------------------------------ measuring and reporting

    def measure(self, run: ArenaRun) -> dict[str, Any]:
        raise NotImplementedError

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        """Put the measured `cell` into the report's `record` (its `section`)."""
        raise NotImplementedError

    @classmethod
    def summarize(cls, record: dict[str, Any]) -> None:
        """Summarize this kind's section of `record` once every cell is in (seeds into means, tasks into ranks)."""

    @classmethod
    def table(cls, record: dict[str, Any], notes: Notes) -> list[str]:
        """The markdown lines that show this kind's section (none: another kind's table shows it)."""
        return []

    @classmethod
    def plots(cls, record: dict[str, Any], results_dir: Path) -> list[Path]:
        """The plots of this kind's section drawn into `results_dir`."""
        return []


def cell_summary(cell: dict[str, Any]) -> dict[str, Any]:
    """A run summary kept as a cell, without what the cell adds (its time and command)."""
    return {key: value for key, value in cell.items() if key not in ("seconds", "command")}


def run_summary(metrics: dict[str, Any]) -> dict[str, Any]:
    """What the table shows of a training run's metrics.json."""
    keys = ("test_accuracy", "val_accuracy", "eval_mlm_loss", "optimizer_steps", "epochs", "train_runtime_s",
            "n_train", "n_train_chunks", "hardware", "command")
    return {key: metrics[key] for key in keys if key in metrics}
