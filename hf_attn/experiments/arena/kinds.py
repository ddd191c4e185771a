"""The kinds of arena cells, one class each: the key's fields, the settings it depends on, how it is measured and
how the report reads it.

A cell is stamped with the settings of its own kind only (`Cell.stamp`), so an arena that gains a scheme, a read
length, a task or a kind keeps every cell it has and measures only the new ones. Adding a kind is one class here and
one line in `CELL_KINDS`: its cells (`Cell.of`) come in a stage with the model they are measured with
(`Cell.group`), in the registry's order.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from . import measure
from .schema import WHOLE, Arena

if TYPE_CHECKING:  # the run is what a cell is measured with; it imports this module
    from .run import ArenaRun

DEFAULT_TASK = "imdb"  # the task (dataset) of a cell whose key names none: every cell measured before tasks
SPLITS = ("validation", "test")  # every reading is scored on both: choose on validation, report test
ENCODER_SETTINGS = ("pretraining", "budget.pretraining", "overrides")  # what makes a scheme's encoder
CLASSIFIER_SETTINGS = ("classifier", "budget.classifier", "overrides", "budget.fine_tune")


class Model(NamedTuple):
    """A trained model a cell is measured with: a scheme's `encoder`, or its `classifier` of one seed."""

    role: str
    scheme: str
    seed: int | None = None


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


def classifier_settings(arena: Arena) -> tuple[str, ...]:
    """What a classifier depends on: its experiment, and its encoder's when it is fine-tuned from one."""
    return tuple(dict.fromkeys(CLASSIFIER_SETTINGS + (ENCODER_SETTINGS if arena.budget.fine_tune else ())))


@dataclasses.dataclass(frozen=True, kw_only=True)
class Cell:
    """The key of one measurement: its kind (the class) and fields, and the task its models learn (`imdb` for
    every cell so far, whose files name no task)."""

    kind: ClassVar[str]
    version: ClassVar[int] = 2  # raised when a change to this kind's measuring makes its earlier cells incomparable
    replaced_when_stale: ClassVar[bool] = False  # a cell of other settings is measured again, not refused
    task: str = DEFAULT_TASK

    @classmethod
    def tasks(cls, arena: Arena) -> list[str]:
        """The tasks of `arena` this kind has cells for: IMDb's (`DEFAULT_TASK`) where it names a classifier."""
        return [DEFAULT_TASK] if arena.classifier else []

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        """Every cell of this kind in `arena`, for `task`."""
        raise NotImplementedError

    def group(self, arena: Arena) -> tuple[int, ...]:
        """Where the cell comes in a stage: `encoder_group`, `classifier_group` or `EVERY_SCHEME`."""
        raise NotImplementedError

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

    def measure(self, run: ArenaRun) -> dict[str, Any]:
        raise NotImplementedError

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        """Put the measured `cell` into the report's `record`."""
        raise NotImplementedError


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainingCell(Cell):
    """A scheme's masked-LM pretraining, summarized from its metrics."""

    kind: ClassVar[str] = "pretraining"
    scheme: str

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        return [cls(task=task, scheme=scheme) for scheme in arena.schemes]

    def group(self, arena: Arena) -> tuple[int, ...]:
        return encoder_group(arena, self.scheme)

    def parts(self) -> tuple[str, ...]:
        return (self.scheme,)

    def depends_on(self, arena: Arena) -> tuple[str, ...]:
        return ENCODER_SETTINGS

    def needs(self, arena: Arena) -> set[Model]:
        return {Model("encoder", self.scheme)}

    def measure(self, run: ArenaRun) -> dict[str, Any]:
        return run_summary(run.encoder_metrics(self.scheme))

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        record["pretraining"][self.scheme] = cell_summary(cell)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MaskedLMCell(Cell):
    """A pretrained encoder's masked-LM loss on validation windows of `length` tokens."""

    kind: ClassVar[str] = "mlm"
    scheme: str
    length: int

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        return [cls(task=task, scheme=scheme, length=length) for scheme in arena.schemes
                for length in arena.mlm_lengths]

    def group(self, arena: Arena) -> tuple[int, ...]:
        return encoder_group(arena, self.scheme)

    def parts(self) -> tuple[str, ...]:
        return self.scheme, str(self.length)

    def depends_on(self, arena: Arena) -> tuple[str, ...]:
        return ENCODER_SETTINGS + ("budget.mlm_tokens", "mlm_lengths")  # every length reads the same tokens

    def needs(self, arena: Arena) -> set[Model]:
        return {Model("encoder", self.scheme)}

    def measure(self, run: ArenaRun) -> dict[str, Any]:
        return measure.mlm_cell(run.encoder(self.scheme), self.length, run.experiment("pretraining", self.scheme),
                                run.arena.budget.mlm_tokens, run.arena.mlm_lengths)

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        record["mlm"][f"{self.scheme}/{self.length}"] = cell


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClassifierCell(Cell):
    """A classifier's training (one scheme and seed), summarized from its metrics; the cell's time is the
    training's."""

    kind: ClassVar[str] = "classifier"
    scheme: str
    seed: int

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        return [cls(task=task, scheme=scheme, seed=seed) for scheme in arena.schemes for seed in arena.budget.seeds]

    def group(self, arena: Arena) -> tuple[int, ...]:
        return classifier_group(arena, self.scheme, self.seed)

    def parts(self) -> tuple[str, ...]:
        return self.scheme, f"seed{self.seed}", "train"

    def depends_on(self, arena: Arena) -> tuple[str, ...]:
        return classifier_settings(arena)

    def trains(self) -> Model | None:
        return Model("classifier", self.scheme, self.seed)

    def measure(self, run: ArenaRun) -> dict[str, Any]:
        return run_summary(run.classifier_metrics(self.scheme, self.seed))

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        record["classifiers"][f"{self.scheme}/{self.seed}"] = cell_summary(cell)


@dataclasses.dataclass(frozen=True, kw_only=True)
class WholeLengthCell(Cell):
    """Tokens of the longest review of a split (the first `eval_limit`): the length `whole` reads at. Measured with
    the tokenizer of the arena's first classifier (every scheme's is the same)."""

    kind: ClassVar[str] = "whole-length"
    split: str

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        return [cls(task=task, split=split) for split in SPLITS]

    def group(self, arena: Arena) -> tuple[int, ...]:
        return classifier_group(arena, arena.schemes[0], arena.budget.seeds[0])

    def parts(self) -> tuple[str, ...]:
        return (self.split,)

    def depends_on(self, arena: Arena) -> tuple[str, ...]:
        return classifier_settings(arena) + ("budget.eval_limit",)

    def needs(self, arena: Arena) -> set[Model]:
        return {Model("classifier", arena.schemes[0], arena.budget.seeds[0])}

    def measure(self, run: ArenaRun) -> dict[str, Any]:
        (model,) = self.needs(run.arena)
        experiment = run.experiment("classifier", model.scheme, model.seed)
        return {"value": measure.longest_review(run.classifier(model.scheme, model.seed), experiment.dataset,
                                                run.arena.budget.eval_limit, self.split)}

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        record["whole_length"][self.split] = cell["value"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReadingCell(Cell):
    """A classifier's accuracy on a split read at `read` tokens (`whole`: the split's longest review): directly,
    as windows, or (RoPE) scaled at inference."""

    kind: ClassVar[str] = "read"
    scheme: str
    seed: int
    split: str
    reading: str
    read: int | str

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        return [cls(task=task, scheme=scheme, seed=seed, split=split, reading=reading, read=read)
                for scheme in arena.schemes for seed in arena.budget.seeds for split in SPLITS
                for read in arena.read_lengths for reading in measure.readings_of(scheme, arena.rope_scalings)]

    def group(self, arena: Arena) -> tuple[int, ...]:
        return classifier_group(arena, self.scheme, self.seed)

    def parts(self) -> tuple[str, ...]:
        return self.scheme, f"seed{self.seed}", self.split, self.reading, str(self.read)

    def depends_on(self, arena: Arena) -> tuple[str, ...]:
        windows = ("window_stride",) if self.reading == "windows" else ()
        return classifier_settings(arena) + ("budget.eval_limit",) + windows

    def needs(self, arena: Arena) -> set[Model]:
        return {Model("classifier", self.scheme, self.seed)}

    def wanted(self, run: ArenaRun) -> bool:
        """Windows only past the training length (one window is the direct reading); a `whole` of unknown length
        counts as past it where this stage measures that length first, and waits for a stage that does where it is
        limited to other cells (`run.only`)."""
        length = run.tokens(self.read, self.split)
        if length is None:
            return run.selected(WholeLengthCell(task=self.task, split=self.split))
        return self.reading != "windows" or length > run.training_length

    def measure(self, run: ArenaRun) -> dict[str, Any]:
        experiment = run.experiment("classifier", self.scheme, self.seed)
        return measure.read_accuracy(run.classifier(self.scheme, self.seed), self.reading,
                                     run.tokens(self.read, self.split), run.arena, experiment.dataset, self.split,
                                     experiment.precision)

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        entry = record["reading"].setdefault(f"{self.scheme}/{self.reading}/{self.read}", {"tokens": {}, "by_seed": {}})
        entry["tokens"][self.split] = record["whole_length"][self.split] if self.read == WHOLE else self.read
        entry["by_seed"].setdefault(str(self.seed), {})[self.split] = cell


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpeedCell(Cell):
    """Whole-review inference time and memory of every scheme's architecture at `length` tokens, `batch` reviews a
    forward. The schemes are timed interleaved, so a cell measured for other schemes is timed again with them."""

    kind: ClassVar[str] = "speed"
    replaced_when_stale: ClassVar[bool] = True
    length: int
    batch: int

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        return [cls(task=task, length=length, batch=batch) for length in arena.speed_lengths
                for batch in arena.speed_batch_sizes]

    def group(self, arena: Arena) -> tuple[int, ...]:
        return EVERY_SCHEME

    def parts(self) -> tuple[str, ...]:
        return (f"{self.length}-batch{self.batch}",)

    def depends_on(self, arena: Arena) -> tuple[str, ...]:
        return ENCODER_SETTINGS + ("schemes", "sliding_window", "window_stride", "budget.speed_warmup",
                                   "budget.speed_repeats")

    def needs(self, arena: Arena) -> set[Model]:
        return {Model("encoder", scheme) for scheme in arena.schemes}

    def measure(self, run: ArenaRun) -> dict[str, Any]:
        encoders = {scheme: run.encoder(scheme) for scheme in run.arena.schemes}
        return measure.speed_cell(encoders, run.arena, self.length, self.batch)

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        record["speed"][f"{self.length}/{self.batch}"] = cell


@dataclasses.dataclass(frozen=True, kw_only=True)
class SequenceCell(Cell):
    """A decoder trained on one of the arena's sequence `tasks` (one scheme and seed) and scored by exact match by
    length bucket, in distribution (validation) and past the training length (test); the cell's time is the
    training's and the scoring's. Seed by seed, task by task, so that a stage lands every scheme of a task
    together."""

    kind: ClassVar[str] = "sequence"
    scheme: str
    seed: int

    @classmethod
    def tasks(cls, arena: Arena) -> list[str]:
        return list(arena.tasks)

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        return [cls(task=task, scheme=scheme, seed=seed) for scheme in arena.schemes for seed in arena.budget.seeds]

    def group(self, arena: Arena) -> tuple[int, ...]:
        return (3, arena.budget.seeds.index(self.seed), list(arena.tasks).index(self.task),
                arena.schemes.index(self.scheme))

    def parts(self) -> tuple[str, ...]:
        return self.scheme, f"seed{self.seed}"

    @property
    def timing_class(self) -> str:
        return f"{self.kind}:{self.task}"  # a task's runs take about as long as each other, whatever the seed

    def checks_its_own_time(self) -> bool:
        return True  # `ArenaRun.sequence_metrics` trains within the stage's time, resumed from its last checkpoint

    def depends_on(self, arena: Arena) -> tuple[str, ...]:
        return ("sequence", "budget.sequence", "overrides", f"tasks.{self.task}")

    def measure(self, run: ArenaRun) -> dict[str, Any]:
        return sequence_summary(run.sequence_metrics(self.task, self.scheme, self.seed))

    def report(self, record: dict[str, Any], cell: dict[str, Any]) -> None:
        record["sequence"].setdefault(self.task, {}).setdefault(self.scheme, {})[str(self.seed)] = {
            **cell_summary(cell), "seconds": cell["seconds"]}  # what a stage of the task costs: the report says


CELL_KINDS: dict[str, type[Cell]] = {kind.kind: kind for kind in (
    PretrainingCell, MaskedLMCell, ClassifierCell, WholeLengthCell, ReadingCell, SpeedCell, SequenceCell)}


def plan(arena: Arena) -> list[Cell]:
    """Every cell of `arena` in the order a stage measures them: each scheme's pretraining and masked-LM losses,
    each classifier (its training timed as its cell; the longest reviews' lengths after the first) with its
    readings, then speed; then the sequence tasks' decoders, seed by seed and task by task."""
    cells = [cell for kind in CELL_KINDS.values() for task in kind.tasks(arena) for cell in kind.of(arena, task)]
    return sorted(cells, key=lambda cell: cell.group(arena))  # stable: within a group, the registry's order


def cell_summary(cell: dict[str, Any]) -> dict[str, Any]:
    """A run summary kept as a cell, without what the cell adds (its time and command)."""
    return {key: value for key, value in cell.items() if key not in ("seconds", "command")}


SEQUENCE_ERRORS_KEPT = 5  # wrong test answers a sequence cell keeps, to show what the failures look like


def sequence_summary(metrics: dict[str, Any]) -> dict[str, Any]:
    """What the table shows of a sequence-task run's metrics.json: exact match by length bucket on validation (in
    distribution) and test (past the training length), the validation loss (and at each evaluation), the first wrong
    test answers; where and in which precision it trained (`precision: auto` differs by machine, so a study's cells
    say it)."""
    keys = ("val_exact_match_by_length", "test_exact_match_by_length", "val_loss", "val_loss_by_step",
            "optimizer_steps", "train_runtime_s", "n_train", "hardware", "precision", "command")
    summary = {key: metrics[key] for key in keys if key in metrics}
    summary["test_errors"] = metrics.get("test_errors", [])[:SEQUENCE_ERRORS_KEPT]
    return summary


def run_summary(metrics: dict[str, Any]) -> dict[str, Any]:
    """What the table shows of a training run's metrics.json."""
    keys = ("test_accuracy", "val_accuracy", "eval_mlm_loss", "optimizer_steps", "epochs", "train_runtime_s",
            "n_train", "n_train_chunks", "hardware", "command")
    return {key: metrics[key] for key in keys if key in metrics}
