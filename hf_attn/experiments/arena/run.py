"""`run_arena`: the arena's trainings and cells in order, as stages that end and continue on any machine."""

from __future__ import annotations

import collections
import dataclasses
import functools
import json
import os
import shutil
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

from transformers.trainer import TRAINER_STATE_NAME
from transformers.trainer_utils import get_last_checkpoint

from .. import classification, pretraining, sequence
from ..config import Experiment
from ..records import changed_settings, cli_command
from ..stages import STAGE_RECORD, StageClock, StageStopped
from .cells import Cells, Claims
from .kinds import CELL_KINDS, Cell, plan
from .report import write_report
from .roles import ROLES, Model
from .schema import Arena, ArenaConfigError, experiment_for


def holds(recorded: Any, current: Any) -> bool:
    """Whether a recorded setting states `current`: equal, or for a section every key of `current` recorded equal
    (a record may keep keys the code has since moved, and a run records the model defaults its task adds)."""
    if isinstance(current, dict) and isinstance(recorded, dict):
        return all(key in recorded and holds(recorded[key], value) for key, value in current.items())
    return recorded == current


def ran(metrics: dict[str, Any], experiment: Experiment) -> bool:
    """Whether a finished run's `metrics` record `experiment` (`holds`, setting by setting; a setting the run's code
    did not have yet is not compared)."""
    recorded = metrics.get("experiment")
    if recorded is None:
        return True
    current = json.loads(json.dumps(dataclasses.asdict(experiment), default=str))
    return all(holds(recorded[key], value) for key, value in current.items() if key in recorded and key != "name")


def trained(run_dir: Path, train: Callable[..., dict[str, Any]], experiment: Experiment,
            clock: StageClock | None = None, continue_from: Path | None = None) -> dict[str, Any]:
    """A training run's metrics: read from a finished `run_dir` of the same experiment (`ran`), resumed from its last
    checkpoint, continued from a committed stage (`continue_from`), or run, replacing a finished or interrupted run of
    other settings; within the stage's time (`StageStopped` when it stops first)."""
    metrics = run_dir / "metrics.json"
    if metrics.is_file():
        finished = json.loads(metrics.read_text())
        if ran(finished, experiment):
            return finished
        print(f"{run_dir} holds a run of other settings than {experiment.name}'s: training it again")
        shutil.rmtree(run_dir)
    last = get_last_checkpoint(str(run_dir)) if run_dir.is_dir() else None
    if last is not None and changed_settings(last, experiment):
        print(f"{run_dir} holds an interrupted run of other settings than {experiment.name}'s: training it again")
        shutil.rmtree(run_dir)
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
    # A committed checkpoint with Trainer's state is a stage to continue: stopped by --max-time, or ended otherwise.
    stopped_elsewhere = committed is not None and (committed / TRAINER_STATE_NAME).is_file()
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
    from ...publishing.checkpoint import write_checkpoint  # the model card's machinery: only when writing one

    write_checkpoint(source, committed, overwrite=True, max_checkpoints=schemes)


CELL_FIELDS = ("scheme", "task", "seed")  # what a stage can be limited to (`run_arena`'s `only`)


def check_only(arena: Arena, only: Mapping[str, Collection[Any]]) -> None:
    """Refuse an `only` that names a field other than `CELL_FIELDS`, or a value the arena has no cell of."""
    cells = plan(arena)
    for field, values in only.items():
        if field not in CELL_FIELDS:
            raise ArenaConfigError(f"a stage is limited by {', '.join(CELL_FIELDS)}, not {field!r}")
        known = list(dict.fromkeys(getattr(cell, field) for cell in cells if hasattr(cell, field)))
        unknown = [value for value in values if value not in known]
        if unknown:
            raise ArenaConfigError(f"{arena.path} (budget {arena.budget_name}) has no cell of {field} "
                                   f"{', '.join(map(str, unknown))}; choose among {', '.join(map(str, known))}")


def run_arena(arena: Arena, output_dir: str | os.PathLike[str], results_dir: str | os.PathLike[str] | None = None,
              max_time: float | None = None, checkpoints: str | os.PathLike[str] | None = None,
              report_only: bool = False, only: Mapping[str, Collection[Any]] | None = None) -> dict[str, Any]:
    """Measure every cell of `arena` not yet in `results_dir`, then write the table and plots there (default
    `output_dir/results`); returns the table's record.

    The cells come in `kinds.plan`'s order: pretraining first (the classifiers of a `fine_tune` budget start from
    it), then the classifiers of every scheme and seed with their readings of validation and test, then speed. With
    `max_time` (minutes) the stage ends when it is up, at a step boundary of a training or before a cell it has no
    time for; what it finished is kept (cells in `results_dir/cells`, encoders in `checkpoints`), the record says
    `stopped`, and the same command continues. `checkpoints` is where each scheme's encoder is committed as
    float16 (`checkpoints/SCHEME`), for a stage on another machine to continue from or fine-tune from. With
    `report_only`, nothing is measured: the table is redrawn from the cells there are. `only` limits what the stage
    measures to the cells of some schemes, tasks or seeds (`{"scheme": ["fire"], "seed": [1]}`), and the models
    they need; the table still shows every cell there is.
    """
    output_dir = Path(output_dir)
    results = Path(results_dir) if results_dir is not None else output_dir / "results"
    run = ArenaRun(arena, output_dir, results, None if report_only else max_time, checkpoints, only)
    return run.measure_all(measure=not report_only)


class ArenaRun:
    """One stage of an arena: its cells left to measure, listed once (`pending`), and the models they are measured
    with, pretrained, trained or read when a pending cell first needs them. Every decision reads `pending`: which
    classifiers to train (`to_train`), which encoders to pretrain or read (those a pending cell needs), and whether
    a cell left that cannot resume in a later stage could ever fit this one (`Cells.check_fits`, before anything
    starts)."""

    def __init__(self, arena: Arena, output_dir: Path, results: Path, max_time: float | None = None,
                 checkpoints: str | os.PathLike[str] | None = None,
                 only: Mapping[str, Collection[Any]] | None = None) -> None:
        self.only = only or {}
        check_only(arena, self.only)
        self.arena = arena
        self.runs = output_dir / "runs"
        self.results = results
        self.checkpoints = Path(checkpoints) if checkpoints is not None else None
        self.clock = StageClock(max_time)
        self.cells = Cells(results / "cells", arena, cli_command(), self.clock)
        self.claims = Claims(output_dir / "claims")
        self._experiments: dict[tuple[str, str, int | None], Experiment] = {}
        self._encoders: dict[str, tuple[Path, dict[str, Any]]] = {}
        self.training_length = self.experiment("classifier", arena.schemes[0]).max_length if arena.classifier else None
        self.plan = plan(arena)
        self.pending = [cell for cell in self.cells.pending(self.plan) if self.selected(cell) and cell.wanted(self)]
        needed = {model for cell in self.pending for model in (*cell.needs(arena), cell.trains()) if model}
        self.to_train = sorted(model for model in needed
                               if ROLES[model.role].retrained and not ROLES[model.role].finished_here(self, model))
        trainings = {self.training_cell(model).timing_class for model in self.to_train}
        self.cells.check_fits(max_time, {cell.timing_class for cell in self.pending if not cell.checks_its_own_time()}
                              | trainings)

    def measure_all(self, measure: bool = True) -> dict[str, Any]:
        """Measure the pending cells in order (until the stage stops; none without `measure`), then write the report
        of every cell there."""
        record: dict[str, Any] = {"budget": self.arena.budget_name, "settings": self.arena.settings(),
                                  "command": cli_command(), "training_length": self.training_length,
                                  "seeds": self.arena.budget.seeds,
                                  **{kind.section: {} for kind in CELL_KINDS.values()}, "stopped": None}
        skipped = []
        try:
            for cell in self.pending if measure else ():
                if not cell.wanted(self):
                    continue
                with self.claims.holding(self.claim_names(cell)) as held:
                    if not held:  # another stage on this machine is measuring it, or training its model
                        skipped.append(cell.path)
                    elif not self.cells.finished(cell):  # (or has since measured it)
                        for model in sorted(cell.needs(self.arena)):
                            self.model(model)
                        self.cells.measure(cell, functools.partial(cell.measure, self),
                                           needs_seconds=0.0 if cell.checks_its_own_time() else None)
        except StageStopped as stop:
            record["stopped"] = str(stop)
        record["skipped_as_claimed"] = skipped
        for cell in self.plan:  # each cell's stamp stays in its file; another stage's cells are read in too
            if self.cells.finished(cell) and cell.wanted(self):
                cell.report(record, {key: value for key, value in self.cells.done[cell].items() if key != "stamp"})
        record["measured_now"] = self.cells.measured
        for kind in CELL_KINDS.values():
            kind.summarize(record)
        write_report(record, self.results)
        return record

    def selected(self, cell: Cell) -> bool:
        """Whether `cell` is one this stage measures: with `only`, a cell that has each field named, with a value
        given (a speed cell, of every scheme together, or IMDb's longest review, of no seed, is left by a stage
        limited to some schemes or seeds)."""
        return all(hasattr(cell, field) and getattr(cell, field) in values for field, values in self.only.items())

    def claim_names(self, cell: Cell) -> list[str]:
        """The claims a stage holds while it measures `cell` (`Claims`): the cell, and every model its measuring
        may train (those it needs or trains, and the encoder a fine-tuned classifier starts from)."""
        models = {*cell.needs(self.arena), *filter(None, [cell.trains()])}
        models |= {start for model in models for start in ROLES[model.role].starts_from(self.arena, model)}
        names = sorted(f"models/{model.role}-{model.scheme}" + ("" if model.seed is None else f"-seed{model.seed}")
                       for model in models)
        return [f"cells/{cell.path}", *names]

    def experiment(self, kind: str, scheme: str, seed: int | None = None) -> Experiment:
        """The `classifier` or `pretraining` experiment of `scheme` (and `seed`), loaded once."""
        key = (kind, scheme, seed)
        if key not in self._experiments:
            self._experiments[key] = experiment_for(self.arena, kind, scheme, seed)
        return self._experiments[key]

    def model(self, model: Model) -> Path:
        """The folder of `model` on this machine, pretrained, trained or read first if need be (its role's way)."""
        return ROLES[model.role].folder(self, model)

    def training_cell(self, model: Model) -> Cell:
        """The cell whose measurement trains `model`: its time is the training's."""
        return next(cell for cell in self.plan if cell.trains() == model)

    def encoder(self, scheme: str) -> Path:
        return self._encoder(scheme)[0]

    def encoder_metrics(self, scheme: str) -> dict[str, Any]:
        return self._encoder(scheme)[1]

    def _encoder(self, scheme: str) -> tuple[Path, dict[str, Any]]:
        """`scheme`'s pretrained encoder folder and metrics, pretrained or read on first use (`pretrained_encoder`)."""
        if scheme not in self._encoders:
            committed = self.checkpoints / scheme if self.checkpoints is not None else None
            self._encoders[scheme] = pretrained_encoder(self.arena, scheme, self.runs / "pretraining" / scheme,
                                                        self.clock, committed)
        return self._encoders[scheme]

    def classifier_dir(self, scheme: str, seed: int) -> Path:
        return self.runs / "classifier" / f"{scheme}-seed{seed}"

    def classifier(self, scheme: str, seed: int) -> Path:
        """The folder of `scheme`'s classifier of `seed` on this machine, trained if it has none."""
        self.classifier_metrics(scheme, seed)
        return self.classifier_dir(scheme, seed)

    def classifier_metrics(self, scheme: str, seed: int) -> dict[str, Any]:
        """A classifier's metrics, trained first where this machine has no finished run of it. Classifiers are not
        committed, only their cells: one whose cells are all committed (by a stage on any machine) is not trained
        again; one with cells left is trained on a machine without it. A training is started only when the stage
        has time for it and for the cells it has left, as long as the slowest of each timing class measured so far
        (at most 90% of a stage, so that a classifier longer than a stage still starts in a fresh one and its
        readings land over several)."""
        model = Model("classifier", scheme, seed)
        run_dir = self.classifier_dir(scheme, seed)
        finished = ROLES[model.role].finished_here(self, model)
        if not finished:
            left = [cell for cell in self.pending if model in cell.needs(self.arena)]
            needs = self.cells.seconds_of(self.training_cell(model)) + sum(self.cells.seconds_of(cell) for cell in left)
            if self.clock.max_time is not None:
                needs = min(needs, 0.9 * 60.0 * self.clock.max_time)
            kinds = collections.Counter(type(cell).plural for cell in left)
            cells = ", ".join(f"{count} {plural}" for plural, count in kinds.items()) or "no cells"
            self.clock.check(needs / 60.0, f"classifier {scheme} seed {seed} and its {cells} left")
        init_from = self.encoder(scheme) if self.arena.budget.fine_tune and not finished else None
        experiment = experiment_for(self.arena, "classifier", scheme, seed, init_from)
        return trained(run_dir, classification.train, experiment, self.clock)

    def sequence_metrics(self, task: str, scheme: str, seed: int) -> dict[str, Any]:
        """The metrics of `scheme`'s decoder of `seed` on `task`: trained here (or resumed) within the stage's time.
        Only its cell is committed: the run folder is this machine's."""
        experiment = experiment_for(self.arena, "sequence", scheme, seed, task=task)
        return trained(self.runs / "sequence" / task / f"{scheme}-seed{seed}", sequence.train_sequence, experiment,
                       self.clock)
