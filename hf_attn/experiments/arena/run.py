"""`run_arena`: the arena's trainings and cells in order, as stages that end and continue on any machine."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from transformers.trainer import TRAINER_STATE_NAME

from .. import classification, pretraining
from ..config import Experiment
from ..records import cli_command
from ..stages import STAGE_RECORD
from .cells import Cells, StageClock, StageStopped, arena_stamp, claim_arena_dir
from .measure import longest_review, mlm_cell, na, read_accuracy, readings_of, speed_cell
from .report import standard_error, write_report
from .schema import WHOLE, Arena, experiment_for

SPLITS = ("validation", "test")  # every reading is scored on both: choose on validation, report test


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


def encoder_needed(arena: Arena, scheme: str, cells: Cells, to_train: list[tuple[str, int]]) -> bool:
    """Whether a cell left to measure needs `scheme`'s pretrained encoder: its pretraining record, its masked-LM
    losses, a classifier to fine-tune from it, or speed (which reads its config). A finished arena needs none,
    so its encoders can leave `checkpoints/` without the next run pretraining them again."""
    keys = [f"pretraining/{scheme}", *(f"mlm/{scheme}/{length}" for length in arena.mlm_lengths),
            *(speed_key(length, batch) for length in arena.speed_lengths for batch in arena.speed_batch_sizes)]
    classifiers_left = arena.budget.fine_tune and any(trained == scheme for trained, _ in to_train)
    return classifiers_left or any(cells.recorded(key) is None for key in keys)


def speed_key(length: int, batch: int) -> str:
    """The cell of whole-review speed at `length` tokens, `batch` reviews a forward."""
    return f"speed/{length}-batch{batch}"


def commit_encoder(source: Path, committed: Path, schemes: int) -> None:
    """`source` (a run folder or one of its checkpoints) as the float16 checkpoint `committed`, replacing it; the
    folder beside it holds one per scheme."""
    from ...analysis.checkpoint import write_checkpoint  # the model card's machinery: only when writing one

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
    runs = output_dir / "runs"
    to_train = classifiers_to_train(arena, runs, cells)
    cells.check_fits(max_time, done_kinds=() if to_train else ("classifier:train",))
    record: dict[str, Any] = {"budget": arena.budget_name, "settings": arena.settings(), "command": cli_command(),
                              "training_length": experiment_for(arena, "classifier", arena.schemes[0]).max_length,
                              "seeds": arena.budget.seeds, "classifiers": {}, "pretraining": {}, "reading": {},
                              "mlm": {}, "speed": {}, "stopped": None}
    try:
        encoders: dict[str, Path] = {}
        for scheme in arena.schemes:
            pretraining_key = f"pretraining/{scheme}"
            if encoder_needed(arena, scheme, cells, to_train):
                committed = Path(checkpoints) / scheme if checkpoints is not None else None
                encoders[scheme], metrics = pretrained_encoder(arena, scheme, runs / "pretraining" / scheme, clock,
                                                               committed)
                summary = cells.get(pretraining_key, functools.partial(_run_summary, metrics), needs_seconds=0.0)
            else:  # every cell of this scheme is measured, its pretraining summary among them
                summary = cells.recorded(pretraining_key)
            record["pretraining"][scheme] = _cell_summary(summary)
            experiment = experiment_for(arena, "pretraining", scheme)
            for length in arena.mlm_lengths:
                record["mlm"][f"{scheme}/{length}"] = cells.get(f"mlm/{scheme}/{length}", functools.partial(
                    mlm_cell, encoders.get(scheme), length, experiment, arena.budget.mlm_tokens, arena.mlm_lengths))
        for scheme in arena.schemes:
            for seed in arena.budget.seeds:
                experiment = experiment_for(arena, "classifier", scheme, seed,
                                            encoders.get(scheme) if arena.budget.fine_tune else None)
                record["classifiers"][f"{scheme}/{seed}"] = classifier_and_readings(
                    arena, scheme, seed, runs / "classifier" / f"{scheme}-seed{seed}", experiment, cells,
                    record["reading"])
        for length in arena.speed_lengths:
            for batch in arena.speed_batch_sizes:
                record["speed"][f"{length}/{batch}"] = cells.get(speed_key(length, batch), functools.partial(
                    speed_cell, encoders, arena, length, batch))
    except StageStopped as stop:
        record["stopped"] = str(stop)
    record["measured_now"] = cells.measured
    summarize_readings(record)
    write_report(record, results)
    return record


def classifier_and_readings(arena: Arena, scheme: str, seed: int, run_dir: Path, experiment: Experiment,
                            cells: Cells, found: dict[str, Any]) -> dict[str, Any]:
    """One classifier (a scheme and seed) trained and read: its readings go into `found`, its run summary is
    returned. Classifiers are not committed, only their cells: a classifier whose readings were all committed
    (by a stage on any machine) is not trained again; one with readings left is trained on a machine without it
    (the cells it has stand). A training is started only when the stage has time for it and for the readings
    it has left, as long as the slowest of each measured so far (at most 90% of a stage, so that a classifier
    longer than a stage still starts in a fresh one and its readings land over several)."""
    train_key = f"classifier/{scheme}/seed{seed}/train"
    missing = _readings_left(arena, scheme, seed, experiment, cells)
    summary = cells.recorded(train_key)
    if summary is None or missing:
        if not (run_dir / "metrics.json").is_file():
            needs = cells.seconds_of(train_key) + sum(cells.seconds_of(key) for key in missing)
            if cells.clock.max_time is not None:
                needs = min(needs, 0.9 * 60.0 * cells.clock.max_time)
            cells.clock.check(needs / 60.0, f"classifier {scheme} seed {seed} and its {len(missing)} readings left")
        summary = cells.get(train_key, lambda: _run_summary(
            trained(run_dir, classification.train, experiment, cells.clock)), needs_seconds=0.0)
        if missing:
            trained(run_dir, classification.train, experiment, cells.clock)  # this machine's copy to read with
    for key, split, reading, read, length in _reading_plan(arena, scheme, seed, experiment, cells, run_dir):
        cell = cells.get(key, functools.partial(read_accuracy, run_dir, reading, length, arena, experiment.dataset,
                                                split, experiment.precision))
        entry = found.setdefault(f"{scheme}/{reading}/{read}", {"tokens": {}, "by_seed": {}})
        entry["tokens"][split] = length
        entry["by_seed"].setdefault(str(seed), {})[split] = cell
    return _cell_summary(summary)


def classifiers_to_train(arena: Arena, runs: Path, cells: Cells) -> list[tuple[str, int]]:
    """The classifiers (scheme, seed) a stage would still train: cells of theirs are left to measure and this
    machine has no finished run folder of theirs to read with."""
    return [(scheme, seed) for scheme in arena.schemes for seed in arena.budget.seeds
            if not (runs / "classifier" / f"{scheme}-seed{seed}" / "metrics.json").is_file()
            and (cells.recorded(f"classifier/{scheme}/seed{seed}/train") is None
                 or _readings_left(arena, scheme, seed, experiment_for(arena, "classifier", scheme, seed), cells))]


def _readings_left(arena: Arena, scheme: str, seed: int, experiment: Experiment, cells: Cells) -> list[str]:
    """The keys of one classifier's reading cells that no stage has measured yet."""
    return [key for key, *_ in _reading_plan(arena, scheme, seed, experiment, cells) if cells.recorded(key) is None]


def _reading_plan(arena: Arena, scheme: str, seed: int, experiment: Experiment, cells: Cells,
                  model_dir: Path | None = None) -> list[tuple[str, str, str, int | str, int]]:
    """The reading cells of one classifier as (cell key, split, reading, read length, tokens): validation and test at
    each read length, directly, as windows past the training length, and (RoPE) with each scaling. With
    `model_dir`, the length of `whole` (the split's longest review) is measured where no cell has it yet;
    without, a `whole` of unknown length counts as past the training length."""
    plan = []
    for split in SPLITS:
        whole_key = f"whole-length/{split}"
        if model_dir is not None:
            whole = cells.get(whole_key, lambda split=split: {"value": longest_review(
                model_dir, experiment.dataset, arena.budget.eval_limit, split)})["value"]
        else:
            whole = (cells.recorded(whole_key) or {"value": experiment.max_length + 1})["value"]
        for read in arena.read_lengths:
            length = whole if read == WHOLE else read
            for reading in readings_of(scheme, arena.rope_scalings):
                if reading == "windows" and length <= experiment.max_length:
                    continue  # one window: the direct reading
                plan.append((f"read/{scheme}/seed{seed}/{split}/{reading}/{read}", split, reading, read, length))
    return plan


def summarize_readings(record: dict[str, Any]) -> None:
    """Each reading's seeds in one number per split: the mean accuracy (`value` is the test one), its standard
    error on the reviews read (the seeds read the same reviews, so it does not shrink with them), and the
    seeds' spread; n/a with the reason where a seed's cell is n/a. `value` is the test mean, None (not measured
    yet) until a seed's test reading is in."""
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
        test = entry.get("test", {})  # the table's number: none yet while only validation is read
        entry["value"], entry["reason"], entry["se"] = test.get("value"), test.get("reason"), test.get("se")


def _cell_summary(cell: dict[str, Any]) -> dict[str, Any]:
    """A run summary kept as a cell, without what the cell adds (its time, command and stamp)."""
    return {key: value for key, value in cell.items() if key not in ("seconds", "command", "stamp")}


def _run_summary(metrics: dict[str, Any]) -> dict[str, Any]:
    """What the table shows of a training run's metrics.json."""
    keys = ("test_accuracy", "val_accuracy", "eval_mlm_loss", "optimizer_steps", "epochs", "train_runtime_s",
            "n_train", "n_train_chunks", "hardware", "command")
    return {key: metrics[key] for key in keys if key in metrics}
