"""`speed` cells: whole-review inference time and peak memory of every scheme's architecture at a length, with full,
sliding-window and windowed attention."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ....configuration_hf_attn import is_count
from .. import measure
from ..measure import ATTENTION_MODES
from ..roles import ROLES, Model
from ..settings import ArenaConfigError, Setting, counts
from .base import ENCODER_SETTINGS, Cell, Notes, plot_series

if TYPE_CHECKING:
    from ..run import ArenaRun
    from ..schema import Arena


@dataclasses.dataclass(frozen=True, kw_only=True)
class SpeedCell(Cell):
    """Whole-review inference time and memory of every scheme's architecture at `length` tokens, `batch` reviews a
    forward. The schemes are timed interleaved, so a cell measured for other schemes is timed again with them.
    `window_stride` is declared here and read by the readings as windows too."""

    kind: ClassVar[str] = "speed"
    section: ClassVar[str] = "speed"
    roles: ClassVar[tuple[str, ...]] = ("encoder",)
    settings: ClassVar[tuple[Setting, ...]] = (
        Setting("speed_lengths", counts, "a non-empty list of positive integers", []),
        Setting("speed_batch_sizes", counts, "a non-empty list of positive integers", []),
        Setting("sliding_window", is_count, "a positive integer (keys each side a sliding-attention token sees)"),
        Setting("window_stride", is_count, "a positive integer, at most the training length"),
    )
    budget_settings: ClassVar[tuple[Setting, ...]] = (
        Setting("speed_warmup", lambda value: isinstance(value, int) and value >= 0, "a non-negative integer", 1),
        Setting("speed_repeats", is_count, "a positive integer", 5),
    )
    plural: ClassVar[str] = "timings"
    replaced_when_stale: ClassVar[bool] = True
    length: int
    batch: int

    @classmethod
    def check(cls, arena: Arena) -> None:
        """Windows of the training length every `window_stride` tokens skip none: the stride is at most that length."""
        from ..schema import experiment_for  # the experiments of the arena being checked

        for scheme in arena.schemes:
            for role in ("classifier", "encoder"):
                experiment = experiment_for(arena, ROLES[role].experiment, scheme)
                if arena.window_stride > experiment.max_length:
                    raise ArenaConfigError(f"{arena.path}: `window_stride` {arena.window_stride} is longer than the "
                                           f"training length {experiment.max_length}; windows would skip tokens.")

    @classmethod
    def of(cls, arena: Arena, task: str) -> list[Cell]:
        return [cls(task=task, length=length, batch=batch) for length in arena.speed_lengths
                for batch in arena.speed_batch_sizes]

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
        record[self.section][f"{self.length}/{self.batch}"] = cell

    @classmethod
    def table(cls, record: dict[str, Any], notes: Notes) -> list[str]:
        """Per batch size: median ms per forward and peak MiB by length, each scheme and attention mode."""
        settings = record["settings"]
        lines = []
        for batch in settings["speed_batch_sizes"]:
            cells = {length: record[cls.section][f"{length}/{batch}"] for length in settings["speed_lengths"]
                     if f"{length}/{batch}" in record[cls.section]}
            if not cells:
                continue
            device = next(iter(cells.values()))["device"]
            lines += ["", f"## Whole-review inference, batch {batch}: median ms per forward / peak MiB ({device}, "
                      "fp32, no grad)", "",
                      f"`full`: every token attends to every token; `sliding`: to {settings['sliding_window']} keys "
                      f"each side in every layer; `windows`: windows of the training length every "
                      f"{settings['window_stride']} tokens.", "",
                      "| scheme | attention | " + " | ".join(map(str, cells)) + " |",
                      "|---|---|" + "---|" * len(cells)]
            for scheme in settings["schemes"]:
                for mode in ATTENTION_MODES:
                    row = [notes.cell(cell["candidates"].get(f"{scheme}/{mode}"),
                                      lambda found: f"{found['value']:.1f} / {found['peak_mib']:.1f}")
                           for cell in cells.values()]
                    lines.append(f"| {scheme} | {mode} | " + " | ".join(row) + " |")
        return lines

    @classmethod
    def plots(cls, record: dict[str, Any], results_dir: Path) -> list[Path]:
        """speed.png: median forward time and peak memory by length (log-2 axis), each scheme, attention mode and
        batch size."""
        from ....analysis.plots import plot_line_panels  # matplotlib: only when plots are drawn

        candidates = {f"{name}/b{cell['batch']}/{cell['length']}": {**found, "length": cell["length"]}
                      for cell in record[cls.section].values() for name, found in cell["candidates"].items()}
        time_ms, peak_mib = (plot_series(candidates, lambda key: key.rsplit("/", 1)[0],
                                         lambda key, cell: cell["length"], lambda cell, field=field: cell[field])
                             for field in ("value", "peak_mib"))
        return [plot_line_panels([("Median forward time", "ms", time_ms), ("Peak memory", "MiB", peak_mib)],
                                 results_dir / "speed.png", "tokens per review", log_x=True)]
