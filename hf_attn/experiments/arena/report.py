"""The arena's table (markdown), record (JSON) and plots, with standard errors and a ranking only beyond noise."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .measure import readings_of
from .schema import ATTENTION_MODES, WHOLE


def standard_error(accuracy: float, reviews: int) -> float:
    """The standard error of an accuracy measured on `reviews` reviews (binomial): the test set's own noise."""
    return math.sqrt(accuracy * (1.0 - accuracy) / reviews)


class _Notes:
    """Footnotes of the markdown table: one number per distinct reason a cell is n/a."""

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


def ranking(record: dict[str, Any], reading: str, read: int | str) -> str:
    """The schemes read `reading` at `read`, by mean test accuracy, `>` where the gap to the next exceeds twice the
    standard error of a difference (both accuracies' errors combined) and `~` where it does not; empty while
    fewer than two schemes are read."""
    scored = sorted(((entry["value"], entry["se"], key.split("/")[0]) for key, entry in record["reading"].items()
                     if key.endswith(f"/{reading}/{read}") and entry.get("value") is not None), reverse=True)
    if len(scored) < 2:
        return ""
    words = [scored[0][2]]
    for (value, se, _), (next_value, next_se, name) in zip(scored, scored[1:]):
        words += [">" if value - next_value > 2 * math.hypot(se, next_se) else "~", name]
    return " ".join(words)


LEARNED = 0.95  # exact match in distribution a scheme must reach before its task is read past the training length


def _mean_and_error(values: list[float], single_error: float) -> tuple[float, float]:
    """The mean of the seeds' values and its standard error: the seeds' (sample standard deviation / sqrt(n)) for
    two seeds or more, else `single_error` (the one seed's binomial error on its examples)."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, single_error
    variance = sum((value - mean) ** 2 for value in values) / (len(values) - 1)
    return mean, math.sqrt(variance / len(values))


def summarize_sequences(record: dict[str, Any]) -> None:
    """Each sequence task's schemes in one row: per length bucket (in distribution on validation, past the
    training length on test) the seeds' mean exact match ± its standard error; then the mean reciprocal rank of
    each scheme across the tasks every scheme has a cell of and learned (`LEARNED` in distribution: a task one scheme
    did not learn ranks nothing, it needs a longer schedule for all), ranked on the first bucket past the training
    length (L+1..2L), as Kazemnejad et al. (2023) rank schemes."""
    from ...tasks.length import mean_reciprocal_rank  # the sequence tasks' scoring: only where there are some

    summaries: dict[str, dict[str, Any]] = {}
    for task, by_scheme in record["sequence"].items():
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
    record["sequence_summary"] = summaries
    record["sequence_minutes"] = {task: _minutes([_cell_seconds(cell) for by_seed in by_scheme.values()
                                                  for cell in by_seed.values()])
                                  for task, by_scheme in record["sequence"].items()}
    schemes = record["settings"]["schemes"]
    complete = {task: by_scheme for task, by_scheme in summaries.items() if set(by_scheme) == set(schemes)}
    unlearned = {task: sorted(scheme for scheme, buckets in by_scheme.items() if buckets[0]["value"] < LEARNED)
                 for task, by_scheme in complete.items()}
    ranked = {task: {scheme: by_scheme[scheme][1]["value"] for scheme in schemes}
              for task, by_scheme in complete.items() if not unlearned[task]}
    # The same ranking seed by seed (each seed's exact match past the training length), over the seeds every ranked
    # task and scheme has: how far the ranking moves with the seed is its standard error.
    cells = record["sequence"]
    seeds = sorted(set.intersection(*[set(cells[task][scheme]) for task in ranked for scheme in schemes])) \
        if ranked else []
    by_seed = {seed: mean_reciprocal_rank({task: {scheme: cells[task][scheme][seed]["test_exact_match_by_length"][0][
        "accuracy"] for scheme in schemes} for task in ranked}) for seed in seeds}
    record["mean_reciprocal_rank"] = {
        "bucket": "L+1..2L (test)", "tasks": sorted(ranked),
        "not_learned": {task: names for task, names in unlearned.items() if names},
        "by_scheme": mean_reciprocal_rank(ranked) if ranked else {},
        "by_seed": by_seed,
        "seed_mean_and_error": {scheme: _mean_and_error([values[scheme] for values in by_seed.values()], math.nan)
                                for scheme in schemes} if by_seed else {}}


def _cell_seconds(cell: dict[str, Any]) -> float:
    """What a sequence cell took: its stage's time (training and scoring), or, for a training resumed from an earlier
    stage, its training time over every stage (`train_runtime_s`), the longer (a resumed cell's scoring, seconds
    beside a training of minutes, is left out)."""
    return max(cell["seconds"], cell.get("train_runtime_s", 0.0))


def _minutes(seconds: list[float]) -> dict[str, Any]:
    """What the cells of a task took, training and scoring: how many, the median and the range, in minutes."""
    return {"cells": len(seconds), "median": statistics.median(seconds) / 60, "low": min(seconds) / 60,
            "high": max(seconds) / 60}


def _sequence_lines(record: dict[str, Any]) -> list[str]:
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
        lines += ["", f"### {task}", "", "| scheme | seeds | " + " | ".join(header) + " |",
                  "|---|---|" + "---|" * len(header)]
        for scheme in record["settings"]["schemes"]:
            if scheme in by_scheme:
                buckets = by_scheme[scheme]
                row = [f"{bucket['value']:.3f} ± {bucket['se']:.3f}" for bucket in buckets]
                row[0] += "" if buckets[0]["value"] >= LEARNED else " *"
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


def markdown_report(record: dict[str, Any]) -> str:
    """The arena table in markdown: accuracy by read length with standard errors and a ranking, masked-LM loss
    by length, speed and memory; exact match by length on the sequence tasks."""
    settings = record["settings"]
    notes = _Notes()
    lines = [
        f"# Position-scheme arena, budget `{record['budget']}`",
        "",
        f"Every scheme on the same data, budget and seeds ({', '.join(map(str, record['seeds']))}); arena file "
        f"`{settings['path']}`; command: `{record['command']}`. Each cell is a JSON file in `cells/` with the "
        "command that measured it.",
    ]
    if record.get("stopped"):
        lines += ["", f"**Stage stopped by --max-time** ({record['stopped']}): the table holds what is measured "
                  "so far (a blank cell is not measured yet); the same command continues."]
    if record.get("skipped_as_claimed"):
        lines += ["", f"{len(record['skipped_as_claimed'])} cell(s) were left to another stage running beside this "
                  "one on the same machine (its claims); the same command measures what neither finished."]
    if settings["classifier"]:
        lines += _classifier_lines(record, notes)
    if settings["sequence"]:
        lines += _sequence_lines(record)
    return "\n".join(lines + notes.lines()) + "\n"


def _classifier_lines(record: dict[str, Any], notes: _Notes) -> list[str]:
    """The IMDb arena's tables: accuracy by read length with a ranking, masked-LM loss by length, speed."""
    settings = record["settings"]
    reads = settings["read_lengths"]
    longest = next((entry["tokens"]["test"] for key, entry in record["reading"].items()
                    if key.endswith(f"/{WHOLE}") and "test" in entry["tokens"]), None)
    header = [f"{read} (longest: {longest})" if read == WHOLE and longest else str(read) for read in reads]
    seeds = record["seeds"]

    def accuracy(entry: dict[str, Any]) -> str:
        read_by = entry["test"]["seeds"]
        partial = f" ({read_by} of {len(seeds)} seeds)" if read_by < len(seeds) else ""
        return f"{entry['value']:.3f} ± {entry['se']:.3f}{partial}"

    eval_limit = settings["budget"]["eval_limit"] or "all"
    lines = [
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
            row = [notes.cell(record["reading"].get(f"{scheme}/{reading}/{read}"), accuracy) for read in reads]
            lines.append(f"| {scheme} | {reading} | " + " | ".join(row) + " |")
    lines += ["", "Ranking of the direct readings (`>`: ahead by more than twice the standard error of the "
              "difference; `~`: within it, no ranking):", ""]
    orders = {read: ranking(record, "direct", read) for read in reads}
    lines += [f"- {read}: {order}" for read, order in orders.items() if order] or ["- none yet: two schemes read"
                                                                                   " on test are needed"]
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
    return lines + _speed_lines(record, notes)


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
    from ...analysis.plots import plot_line_panels  # matplotlib: only when plots are drawn

    def series(cells: dict[str, dict[str, Any]], name_of: Callable[[str], str], x_of: Callable[[str, dict], float],
               y_of: Callable[[dict], float], error_of: Callable[[dict], float] | None = None,
               ) -> dict[str, tuple[list[float], ...]]:
        """{line name: (xs, ys), or (xs, ys, standard errors) when `error_of` is given}, skipping empty cells."""
        lines: dict[str, tuple[list[float], ...]] = {}
        for key, cell in cells.items():
            if cell["value"] is not None:
                xs, ys, *errors = lines.setdefault(name_of(key), ([], [], []) if error_of else ([], []))
                xs.append(x_of(key, cell))
                ys.append(y_of(cell))
                if error_of:
                    errors[0].append(error_of(cell))
        return lines

    if not record["settings"]["classifier"]:
        return [sequence_plot(record, results_dir)] if record.get("sequence_summary") else []
    accuracy = series(record["reading"], lambda key: key.rsplit("/", 1)[0],
                      lambda key, cell: cell["tokens"].get("test", cell["tokens"].get("validation")),
                      lambda cell: cell["value"], error_of=lambda cell: cell["se"])
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


def sequence_plot(record: dict[str, Any], results_dir: Path) -> Path:
    """exact_match.png: a panel per sequence task, each scheme's exact match by length bucket (the bucket's longest
    length on a log-2 axis) with its standard error."""
    from ...analysis.plots import plot_line_panels  # matplotlib: only when plots are drawn

    panels = []
    for task, by_scheme in record["sequence_summary"].items():
        lines = {scheme: ([bucket["high"] for bucket in buckets], [bucket["value"] for bucket in buckets],
                          [bucket["se"] for bucket in buckets]) for scheme, buckets in by_scheme.items()}
        panels.append((task, "exact match", lines))
    return plot_line_panels(panels, results_dir / "exact_match.png", "length (a bucket's longest)", log_x=True)


def write_report(record: dict[str, Any], results_dir: Path) -> None:
    """arena.json, arena.md and the plots in `results_dir`."""
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "arena.json").write_text(json.dumps(record, indent=2, default=str))
    (results_dir / "arena.md").write_text(markdown_report(record))
    arena_plots(record, results_dir)
