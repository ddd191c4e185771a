"""The arena's report: the record (JSON), the markdown table and the plots, each kind of cell asked for its own
section, summary, table lines and plots (`kinds.CELL_KINDS`, in the registry's order)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .kinds import CELL_KINDS, Notes
from .kinds.reading import ranking, standard_error

__all__ = ["arena_plots", "markdown_report", "ranking", "standard_error", "write_report"]


def markdown_report(record: dict[str, Any]) -> str:
    """The arena table in markdown: what the record says of its stage, then each kind's tables in the arena (accuracy
    by read length with standard errors and a ranking, masked-LM loss by length, speed and memory; exact match by
    length on the sequence tasks), then the notes of the n/a cells."""
    settings = record["settings"]
    notes = Notes()
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
    for kind in CELL_KINDS.values():
        if kind.in_arena(settings):
            lines += kind.table(record, notes)
    return "\n".join(lines + notes.lines()) + "\n"


def arena_plots(record: dict[str, Any], results_dir: Path) -> list[Path]:
    """Each kind's plots of the record (accuracy.png, mlm_loss.png, speed.png; exact_match.png), log-2 length axes."""
    return [plot for kind in CELL_KINDS.values() if kind.in_arena(record["settings"])
            for plot in kind.plots(record, results_dir)]


def write_report(record: dict[str, Any], results_dir: Path) -> None:
    """arena.json, arena.md and the plots in `results_dir`."""
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "arena.json").write_text(json.dumps(record, indent=2, default=str))
    (results_dir / "arena.md").write_text(markdown_report(record))
    arena_plots(record, results_dir)
