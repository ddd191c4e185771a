"""`pretraining` cells: a scheme's masked-LM pretraining, summarized from its metrics (the masked-LM table shows
its steps)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

from ..roles import Model
from .base import ENCODER_SETTINGS, Cell, cell_summary, encoder_group, run_summary

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
