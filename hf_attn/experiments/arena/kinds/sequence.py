"""`sequence` cells: a scheme's decoder trained on one of the arena's sequence tasks (one seed), scored by exact match
by length bucket; the tasks' schemes summarized with standard errors and ranked by mean reciprocal rank."""

from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..settings import Setting
from .base import Cell, Notes, cell_summary, each_scheme_and_seed

if TYPE_CHECKING:
    from ..run import ArenaRun
    from ..schema import Arena

LEARNED = 0.95  # exact match in distribution a scheme must reach before its task is read past the training length


def _mean_and_error(values: list[float], single_error: float) -> tuple[float, float]:
    """The mean of the seeds' values and its standard error: the seeds' (sample standard deviation / sqrt(n)) for
    two seeds or more, else `single_error` (the one seed's binomial error on its examples)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, single_error
    variance = sum((value - mean) ** 2 for value in values) / (len(values) - 1)
    return mean, math.sqrt(variance / len(values))


def _each_length(by_seed: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The seeds' mean exact match ± its standard error at each length (validation's for the training lengths, then
    test's), over the lengths every seed's cell scored one by one (`*_exact_match_by_each_length`); none for cells
    scored by bucket only."""
    by_length: dict[int, list[dict[str, Any]]] = {}
    for cell in by_seed.values():
        for split in ("val", "test"):
            for row in cell.get(f"{split}_exact_match_by_each_length", []):
                by_length.setdefault(row["low"], []).append(row)
    points = []
    for length, rows in sorted(by_length.items()):
        if len(rows) == len(by_seed):
            mean, error = _mean_and_error([row["accuracy"] for row in rows], rows[0]["standard_error"])
            points.append({"length": length, "value": mean, "se": error, "seeds": len(rows)})
    return points


def _cell_seconds(cell: dict[str, Any]) -> float:
    """What a sequence cell took: its stage's time (training and scoring), or, for a training resumed from an earlier
    stage, its training time over every stage (`train_runtime_s`), the longer (a resumed cell's scoring, seconds
    beside a training of minutes, is left out)."""
    return max(cell["seconds"], cell.get("train_runtime_s", 0.0))


def _minutes(seconds: list[float]) -> dict[str, Any]:
    """What the cells of a task took, training and scoring: how many, the median and the range, in minutes."""
    return {"cells": len(seconds), "median": statistics.median(seconds) / 60, "low": min(seconds) / 60,
            "high": max(seconds) / 60}


SEQUENCE_ERRORS_KEPT = 5  # wrong test answers a sequence cell keeps, to show what the failures look like


def sequence_summary(metrics: dict[str, Any]) -> dict[str, Any]:
    """What the table shows of a sequence-task run's metrics.json: exact match by length bucket and at each length on
    validation (in distribution) and test (past the training length), the validation loss (and at each evaluation),
    the first wrong test answers; where and in which precision it trained (`precision: auto` differs by machine, so a
    study's cells say it)."""
    keys = ("val_exact_match_by_length", "test_exact_match_by_length", "val_exact_match_by_each_length",
            "test_exact_match_by_each_length", "val_loss", "val_loss_by_step",
            "optimizer_steps", "train_runtime_s", "n_train", "hardware", "precision", "command")
    summary = {key: metrics[key] for key in keys if key in metrics}
    summary["test_errors"] = metrics.get("test_errors", [])[:SEQUENCE_ERRORS_KEPT]
    return summary



@dataclasses.dataclass(frozen=True, kw_only=True)
class SequenceCell(Cell):
    """A decoder trained on one of the arena's sequence `tasks` (one scheme and seed) and scored by exact match by
    length bucket, in distribution (validation) and past the training length (test); the cell's time is the
    training's and the scoring's. Seed by seed, task by task, so that a stage lands every scheme of a task
    together."""

    kind: ClassVar[str] = "sequence"
    section: ClassVar[str] = "sequence"
    roles: ClassVar[tuple[str, ...]] = ("decoder",)
    part: ClassVar[str] = "decoder"
    settings: ClassVar[tuple[Setting, ...]] = (
        Setting("tasks", lambda value: isinstance(value, dict) and bool(value)
                and all(isinstance(keys, dict) for keys in value.values()),
                "a mapping of task names to experiment keys (a `dataset` mapping, `max_length`, ...)", {}),)
    plural: ClassVar[str] = "decoders"
    scheme: str
    seed: int

    @classmethod
    def tasks(cls, arena: Arena) -> list[str]:
        return list(arena.tasks)

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        return each_scheme_and_seed(cls, arena, task)

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
        record[self.section].setdefault(self.task, {}).setdefault(self.scheme, {})[str(self.seed)] = {
            **cell_summary(cell), "seconds": cell["seconds"]}  # what a stage of the task costs: the report says

    @classmethod
    def summarize(cls, record: dict[str, Any]) -> None:
        """Each sequence task's schemes in one row: per length bucket (in distribution on validation, past the
        training length on test) the seeds' mean exact match ± its standard error; then the mean reciprocal rank of
        each scheme across the tasks every scheme has a cell of and learned (`LEARNED` in distribution: a task one
        scheme did not learn ranks nothing, it needs a longer schedule for all), ranked on the first bucket past the
        training length (L+1..2L), as Kazemnejad et al. (2023) rank schemes."""
        from ....tasks.length import mean_reciprocal_rank  # the sequence tasks' scoring: only where there are some

        summaries: dict[str, dict[str, Any]] = {}
        by_length: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for task, by_scheme in record[cls.section].items():
            for scheme, by_seed in by_scheme.items():
                buckets = []
                for split in ("val", "test"):
                    rows = [cell[f"{split}_exact_match_by_length"] for cell in by_seed.values()]
                    for index, bucket in enumerate(rows[0]):
                        values = [seed_rows[index]["accuracy"] for seed_rows in rows]
                        mean, error = _mean_and_error(values, bucket["standard_error"])
                        buckets.append({"split": split, "low": bucket["low"], "high": bucket["high"], "value": mean,
                                        "se": error, "seeds": len(values), "count": bucket["count"]})
                summaries.setdefault(task, {})[scheme] = buckets
                if points := _each_length(by_seed):
                    by_length.setdefault(task, {})[scheme] = points
        record["sequence_summary"] = summaries
        record["sequence_by_length"] = by_length
        record["sequence_minutes"] = {task: _minutes([_cell_seconds(cell) for by_seed in by_scheme.values()
                                                      for cell in by_seed.values()])
                                      for task, by_scheme in record[cls.section].items()}
        schemes = record["settings"]["schemes"]
        complete = {task: by_scheme for task, by_scheme in summaries.items() if set(by_scheme) == set(schemes)}
        unlearned = {task: sorted(scheme for scheme, buckets in by_scheme.items() if buckets[0]["value"] < LEARNED)
                     for task, by_scheme in complete.items()}
        ranked = {task: {scheme: by_scheme[scheme][1]["value"] for scheme in schemes}
                  for task, by_scheme in complete.items() if not unlearned[task]}
        # The same ranking seed by seed (each seed's exact match past the training length), over the seeds every ranked
        # task and scheme has: how far the ranking moves with the seed is its standard error.
        cells = record[cls.section]
        seeds = sorted(set.intersection(*[set(cells[task][scheme]) for task in ranked for scheme in schemes])) \
            if ranked else []
        by_seed = {seed: mean_reciprocal_rank({task: {
            scheme: cells[task][scheme][seed]["test_exact_match_by_length"][0]["accuracy"] for scheme in schemes}
            for task in ranked}) for seed in seeds}
        record["mean_reciprocal_rank"] = {
            "bucket": "L+1..2L (test)", "tasks": sorted(ranked),
            "not_learned": {task: names for task, names in unlearned.items() if names},
            "by_scheme": mean_reciprocal_rank(ranked) if ranked else {},
            "by_seed": by_seed,
            "seed_mean_and_error": {scheme: _mean_and_error([values[scheme] for values in by_seed.values()], math.nan)
                                    for scheme in schemes} if by_seed else {}}

    @classmethod
    def table(cls, record: dict[str, Any], notes: Notes) -> list[str]:
        """The sequence tasks' tables (exact match by length bucket, each scheme) and the mean reciprocal rank."""
        seeds = record["seeds"]
        lines = ["", f"## Exact match by length (seeds {', '.join(map(str, seeds))}; mean ± standard error: of the "
                 "seeds where two or more are in, else the binomial one of a seed's examples)", "",
                 "`1..L`: validation, the training lengths; `L+1..2L` and `4L`: test, past them. A task is ranked past "
                 f"the training length only where every scheme reaches {LEARNED} in distribution (`*`: below it)."]
        for task, by_scheme in record.get("sequence_summary", {}).items():
            first = next(iter(by_scheme.values()))
            header = [f"{bucket['low']}..{bucket['high']}" if bucket["low"] != bucket["high"] else str(bucket["low"])
                      for bucket in first]
            at_2l = _points_at_twice_the_training_length(record, task, first)
            header += ["2L (one length)"] if at_2l else []
            lines += ["", f"### {task}", "", "| scheme | seeds | " + " | ".join(header) + " |",
                      "|---|---|" + "---|" * len(header)]
            for scheme in record["settings"]["schemes"]:
                if scheme in by_scheme:
                    buckets = by_scheme[scheme]
                    row = [f"{bucket['value']:.3f} ± {bucket['se']:.3f}" for bucket in buckets]
                    row[0] += "" if buckets[0]["value"] >= LEARNED else " *"
                    if at_2l:
                        point = at_2l.get(scheme)
                        row.append(f"{point['value']:.3f} ± {point['se']:.3f}" if point else "")
                    lines.append(f"| {scheme} | {buckets[0]['seeds']} | " + " | ".join(row) + " |")
            minutes = record["sequence_minutes"][task]
            cells = f"{minutes['cells']} cell" + ("s" if minutes["cells"] != 1 else "")
            lines += ["", f"{cells}, {minutes['median']:.1f} minutes each (median; "
                      f"{minutes['low']:.1f}-{minutes['high']:.1f}), training (over every stage) and scoring."]
        rank = record.get("mean_reciprocal_rank", {})
        if rank.get("by_scheme"):
            order = sorted(rank["by_scheme"].items(), key=lambda item: -item[1])
            lines += ["", f"Mean reciprocal rank on {rank['bucket']} across {', '.join(rank['tasks'])}: "
                      + ", ".join(f"{scheme} {value:.2f}" for scheme, value in order) + "."]
            if len(rank.get("by_seed", {})) >= 2:
                by_seed = rank["seed_mean_and_error"]
                lines += ["", f"Ranked seed by seed (seeds {', '.join(map(str, rank['by_seed']))}), mean ± the seeds' "
                          "standard error: " + ", ".join(f"{scheme} {by_seed[scheme][0]:.2f} ± {by_seed[scheme][1]:.2f}"
                                                         for scheme, _ in order) + "."]
        for task, names in rank.get("not_learned", {}).items():
            lines += ["", f"Not ranked: {task} ({', '.join(names)} below {LEARNED} in distribution)."]
        return lines

    @classmethod
    def plots(cls, record: dict[str, Any], results_dir: Path) -> list[Path]:
        """exact_match.png: a panel per sequence task, each scheme's exact match by length bucket (the bucket's longest
        length on a log-2 axis) with its standard error; exact_match_by_length.png, where cells were scored at each
        length, the same at every length."""
        from ....analysis.plots import plot_line_panels  # matplotlib: only when plots are drawn

        if not record.get("sequence_summary"):
            return []
        panels = []
        for task, by_scheme in record["sequence_summary"].items():
            lines = {scheme: ([bucket["high"] for bucket in buckets], [bucket["value"] for bucket in buckets],
                              [bucket["se"] for bucket in buckets]) for scheme, buckets in by_scheme.items()}
            panels.append((task, "exact match", lines))
        paths = [plot_line_panels(panels, results_dir / "exact_match.png", "length (a bucket's longest)", log_x=True)]
        curves = [(task, "exact match", {scheme: tuple([point[key] for point in points]
                                                       for key in ("length", "value", "se"))
                                         for scheme, points in by_scheme.items()})
                  for task, by_scheme in record.get("sequence_by_length", {}).items()]
        if curves:
            paths.append(plot_line_panels(curves, results_dir / "exact_match_by_length.png", "length"))
        return paths


def _points_at_twice_the_training_length(record: dict[str, Any], task: str,
                                         buckets: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each scheme's point at length 2L of `task` (L: the first bucket's longest length), where scored at each
    length."""
    twice = 2 * buckets[0]["high"]
    return {scheme: point for scheme, points in record.get("sequence_by_length", {}).get(task, {}).items()
            for point in points if point["length"] == twice}
