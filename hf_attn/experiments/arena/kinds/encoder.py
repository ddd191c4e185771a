"""The cells of a scheme's pretrained encoder: `pretraining` (its training, summarized from its metrics) and `mlm`
(its masked-LM loss on validation windows of a length: the ALiBi paper's Figure 1, for encoders)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ....configuration_hf_attn import is_count
from .. import measure
from ..roles import Model
from ..settings import Setting, counts
from .base import ENCODER_SETTINGS, Cell, Notes, cell_summary, encoder_group, plot_series, run_summary

if TYPE_CHECKING:
    from ..run import ArenaRun
    from ..schema import Arena


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainingCell(Cell):
    """A scheme's masked-LM pretraining, summarized from its metrics."""

    kind: ClassVar[str] = "pretraining"
    section: ClassVar[str] = "pretraining"
    roles: ClassVar[tuple[str, ...]] = ("encoder",)
    plural: ClassVar[str] = "pretrainings"
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
        record[self.section][self.scheme] = cell_summary(cell)


@dataclasses.dataclass(frozen=True, kw_only=True)
class MaskedLMCell(Cell):
    """A pretrained encoder's masked-LM loss on validation windows of `length` tokens."""

    kind: ClassVar[str] = "mlm"
    section: ClassVar[str] = "mlm"
    roles: ClassVar[tuple[str, ...]] = ("encoder",)
    settings: ClassVar[tuple[Setting, ...]] = (
        Setting("mlm_lengths", counts, "a non-empty list of positive integers", []),)
    budget_settings: ClassVar[tuple[Setting, ...]] = (Setting("mlm_tokens", is_count, "a positive integer", 65536),)
    plural: ClassVar[str] = "masked-LM losses"
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
        record[self.section][f"{self.scheme}/{self.length}"] = cell

    @classmethod
    def table(cls, record: dict[str, Any], notes: Notes) -> list[str]:
        """Masked-LM loss by evaluation length, each pretrained scheme with its pretraining steps."""
        lengths = record["settings"]["mlm_lengths"]
        lines = ["", f"## Masked-LM loss by evaluation length (pretrained at {record['training_length']} tokens)", "",
                 "Validation reviews as one token stream, masked once with a fixed seed, cut into windows of each "
                 "length: every length predicts the same masked tokens; mean loss per masked token.", "",
                 "| scheme | " + " | ".join(map(str, lengths)) + " | pretraining steps |",
                 "|---|" + "---|" * (len(lengths) + 1)]
        for scheme, run in record["pretraining"].items():
            row = [notes.cell(record[cls.section].get(f"{scheme}/{length}"), lambda cell: f"{cell['value']:.3f}")
                   for length in lengths]
            lines.append(f"| {scheme} | " + " | ".join(row) + f" | {run.get('optimizer_steps', '')} |")
        return lines

    @classmethod
    def plots(cls, record: dict[str, Any], results_dir: Path) -> list[Path]:
        """mlm_loss.png: masked-LM loss by evaluation length (log-2 axis), each scheme."""
        from ....analysis.plots import plot_line_panels  # matplotlib: only when plots are drawn

        mlm = plot_series(record[cls.section], lambda key: key.split("/")[0], lambda key, cell: int(key.split("/")[1]),
                          lambda cell: cell["value"])
        return [plot_line_panels([("Masked-LM loss by evaluation length", "loss per masked token", mlm)],
                                 results_dir / "mlm_loss.png", "tokens per window", log_x=True)]
