"""The arena's table (markdown), record (JSON) and plots, with standard errors and a ranking only beyond noise."""

from __future__ import annotations

import json
import math
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


def markdown_report(record: dict[str, Any]) -> str:
    """The arena table in markdown: accuracy by read length with standard errors and a ranking, masked-LM loss
    by length, speed and memory."""
    settings = record["settings"]
    notes = _Notes()
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
        f"# Position-scheme arena, budget `{record['budget']}`",
        "",
        f"Every scheme on the same data, budget and seeds ({', '.join(map(str, seeds))}); arena file "
        f"`{settings['path']}`; command: `{record['command']}`. Each cell is a JSON file in `cells/` with the "
        "command that measured it.",
    ]
    if record.get("stopped"):
        lines += ["", f"**Stage stopped by --max-time** ({record['stopped']}): the table holds what is measured "
                  "so far (a blank cell is not measured yet); the same command continues."]
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


def write_report(record: dict[str, Any], results_dir: Path) -> None:
    """arena.json, arena.md and the plots in `results_dir`."""
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "arena.json").write_text(json.dumps(record, indent=2, default=str))
    (results_dir / "arena.md").write_text(markdown_report(record))
    arena_plots(record, results_dir)
